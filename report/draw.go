package report

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// Width is the width of every figure.
const Width = 960

// The colours of the states (Paul Tol's bright scheme: told apart by
// colour-blind readers too), and of the marks.
var (
	colSucceeded   = rgb(0x4477aa)
	colFailed      = rgb(0xcc3311)
	colInterrupted = rgb(0xee9933)
	colRunning     = rgb(0x999999)
	colTimedOut    = rgb(0xccbb44)
	colAxis        = rgb(0x333333)
	colGrid        = rgb(0xdddddd)
	colText        = rgb(0x222222)
	colMuted       = rgb(0x666666)
	colCutoff      = rgb(0x000000)
	colQuantile    = rgb(0xaa3377)
	colRate        = rgb(0x228833)
	colJob         = rgb(0x222222)
	colQuit        = rgb(0xaa3377)
)

// rgb is the opaque colour 0xRRGGBB.
func rgb(c uint32) Color { return Color{R: uint8(c >> 16), G: uint8(c >> 8), B: uint8(c), A: 0xff} }

var stateColor = map[string]Color{Succeeded: colSucceeded, Failed: colFailed, Interrupted: colInterrupted, Running: colRunning, TimedOut: colTimedOut}

// endedNames are the states of the cases that ended, as the figures'
// legends name them, and endedColors their colours: timed out only when
// some case did (timedOut).
func endedNames(timedOut bool) []string {
	if timedOut {
		return []string{Succeeded, Failed, Interrupted, TimedOut}
	}
	return []string{Succeeded, Failed, Interrupted}
}

func endedColors(timedOut bool) []Color {
	cols := []Color{colSucceeded, colFailed, colInterrupted, colTimedOut}
	if timedOut {
		return cols
	}
	return cols[:3]
}

// timedOut reports whether a bar or cell of t is of a case that timed out.
func (t Timeline) timedOut() bool {
	for _, r := range t.Rows {
		for _, b := range r.Bars {
			if b.State == TimedOut {
				return true
			}
		}
		for _, c := range r.Cells {
			if c.State == TimedOut {
				return true
			}
		}
	}
	return false
}

// nth is v[i], 0 past v's end (a series of timed-out cases is nil when
// none timed out).
func nth(v []int64, i int) int64 {
	if i < len(v) {
		return v[i]
	}
	return 0
}

// Figures draws every figure of d: the histogram of durations, the
// timeline, the throughput, the failures by host and by status, and,
// when some record says what a case used, its peak memory and CPU
// efficiency.
func Figures(d *Data) []*Canvas {
	figs := []*Canvas{HistogramFigure(d.Histogram), TimelineFigure(d.Timeline), ThroughputFigure(d.Throughput), HostsFigure(d.Hosts), StatusesFigure(d.Statuses)}
	if d.Use.Any() {
		figs = append(figs, MemoryFigure(d.Use), CPUFigure(d.Use))
	}
	return figs
}

// plot is the area of a canvas where the data goes.
type plot struct {
	x, y, w, h float64
}

// axisX draws a horizontal axis under p with ticks at the values of ticks
// placed by xs, labelled by label.
func axisX(c *Canvas, p plot, ticks []float64, xs func(float64) float64, label func(float64) string, title string) {
	c.Add(Line{X1: p.x, Y1: p.y + p.h, X2: p.x + p.w, Y2: p.y + p.h, Stroke: colAxis, Width: 1})
	for _, t := range ticks {
		x := xs(t)
		if x < p.x-0.5 || x > p.x+p.w+0.5 {
			continue
		}
		c.Add(Line{X1: x, Y1: p.y + p.h, X2: x, Y2: p.y + p.h + 4, Stroke: colAxis, Width: 1},
			Text{X: x, Y: p.y + p.h + 16, S: label(t), Size: 11, Anchor: Middle, Fill: colText})
	}
	if title != "" {
		c.Add(Text{X: p.x + p.w/2, Y: p.y + p.h + 34, S: title, Size: 12, Anchor: Middle, Fill: colMuted})
	}
}

// axisY draws a vertical axis of counts 0..top left of p, with grid lines;
// whole numbers only if whole.
func axisY(c *Canvas, p plot, top float64, title string, whole bool) {
	step := niceStep(top / 5)
	if whole {
		step = max(step, 1)
	}
	for v := 0.0; v <= top*(1+1e-9); v += step {
		y := p.y + p.h - v/top*p.h
		c.Add(Line{X1: p.x, Y1: y, X2: p.x + p.w, Y2: y, Stroke: colGrid, Width: 1},
			Text{X: p.x - 6, Y: y + 4, S: fmtCount(v), Size: 11, Anchor: End, Fill: colText})
	}
	c.Add(Line{X1: p.x, Y1: p.y, X2: p.x, Y2: p.y + p.h, Stroke: colAxis, Width: 1})
	if title != "" {
		c.Add(Text{X: p.x, Y: p.y - 10, S: title, Size: 12, Anchor: Start, Fill: colMuted})
	}
}

// legend draws coloured squares with names, right-aligned at x.
func legend(c *Canvas, x, y float64, names []string, cols []Color) {
	for i := len(names) - 1; i >= 0; i-- {
		w := 7*float64(len(names[i])) + 24
		x -= w
		c.Add(Rect{X: x, Y: y - 9, W: 10, H: 10, Fill: cols[i]},
			Text{X: x + 14, Y: y, S: names[i], Size: 12, Fill: colText})
	}
}

func title(c *Canvas, s string) {
	c.Add(Text{X: 10, Y: 20, S: s, Size: 15, Bold: true, Fill: colText, Class: "figure-title"})
}

// HistogramFigure draws the histogram of case durations, stacked by
// state, with dt_cutoff and the 12.5% quantile marked.
func HistogramFigure(h Histogram) *Canvas {
	c := &Canvas{ID: "histogram", Title: "Case durations", W: Width, H: 330}
	title(c, c.Title)
	p := plot{x: 70, y: 60, w: Width - 100, h: 200}
	n := len(h.Edges) - 1
	if n < 1 {
		c.Add(Text{X: Width / 2, Y: 160, S: "No case has ended yet.", Size: 13, Anchor: Middle, Fill: colMuted})
		return c
	}
	lo, hi := h.Edges[0], h.Edges[n]
	xs := func(v float64) float64 { return p.x + (v-lo)/(hi-lo)*p.w }
	if h.Log {
		llo, lhi := math.Log10(lo), math.Log10(hi)
		xs = func(v float64) float64 { return p.x + (math.Log10(max(v, lo))-llo)/(lhi-llo)*p.w }
	}
	top := 0.0
	for i := 0; i < n; i++ {
		top = max(top, float64(h.Succeeded[i]+h.Failed[i]+h.Interrupted[i]+nth(h.TimedOut, i)))
	}
	top = niceTop(top)
	axisY(c, p, top, "cases", true)
	for i := 0; i < n; i++ {
		x0, x1 := xs(h.Edges[i]), xs(h.Edges[i+1])
		y := p.y + p.h
		for _, s := range []struct {
			n     int64
			state string
		}{{h.Succeeded[i], Succeeded}, {h.Failed[i], Failed}, {h.Interrupted[i], Interrupted}, {nth(h.TimedOut, i), TimedOut}} {
			if s.n == 0 {
				continue
			}
			bh := float64(s.n) / top * p.h
			y -= bh
			c.Add(Rect{X: x0 + 0.5, Y: y, W: max(x1-x0-1, 0.5), H: bh, Fill: stateColor[s.state], Class: "bin " + s.state,
				Title: fmt.Sprintf("%s–%s: %d %s", fmtSeconds(h.Edges[i]), fmtSeconds(h.Edges[i+1]), s.n, s.state)})
		}
	}
	axis := "duration"
	if h.Log {
		axis += " (logarithmic)"
	}
	axisX(c, p, durationTicks(h.Log, lo, hi), xs, fmtSeconds, axis)
	mark := func(v float64, col Color, class, label string, row float64) {
		if v <= 0 || v < lo || v > hi {
			if v > 0 {
				c.Add(Text{X: p.x + p.w, Y: p.y - 26 + row, S: label + " (off the axis)", Size: 11, Anchor: End, Fill: col, Class: class})
			}
			return
		}
		x := xs(v)
		c.Add(Line{X1: x, Y1: p.y - 4, X2: x, Y2: p.y + p.h, Stroke: col, Width: 1.5, Dash: true, Class: class, Title: label})
		anchor := Start
		tx := x + 4
		if x > p.x+p.w*0.7 {
			anchor, tx = End, x-4
		}
		c.Add(Text{X: tx, Y: p.y + 10 + row, S: label, Size: 11, Anchor: anchor, Fill: col, Class: class})
	}
	mark(h.Quantile, colQuantile, "quantile", "upper 12.5% quantile "+fmtSeconds(h.Quantile), 0)
	if h.Cutoff > 0 {
		mark(h.Cutoff, colCutoff, "cutoff", "dt_cutoff "+fmtSeconds(h.Cutoff), 14)
	}
	legend(c, Width-20, 44, endedNames(h.TimedOut != nil), endedColors(h.TimedOut != nil))
	return c
}

// durationTicks are the ticks of the histogram's axis from lo to hi: on a
// logarithmic axis the powers of ten (and their 2 and 5 times when there
// are fewer than 3), else about 8 nice steps.
func durationTicks(log bool, lo, hi float64) []float64 {
	var ticks []float64
	if !log {
		step := niceStep((hi - lo) / 8)
		for v := lo; v <= hi*(1+1e-9); v += step {
			ticks = append(ticks, v)
		}
		return ticks
	}
	for k := math.Ceil(math.Log10(lo)); k <= math.Log10(hi)+1e-9; k++ {
		ticks = append(ticks, math.Pow(10, k))
	}
	if len(ticks) < 3 { // few decades: the 2 and 5 too
		ticks = nil
		for k := math.Floor(math.Log10(lo)); k <= math.Log10(hi); k++ {
			for _, m := range []float64{1, 2, 5} {
				ticks = append(ticks, m*math.Pow(10, k))
			}
		}
	}
	return ticks
}

// TimelineFigure draws a row per meta-job (or loop): each case a bar, or
// in an aggregate each run of columns a shaded cell; the job's start and
// end as ticks, its own exit as a mark.
func TimelineFigure(t Timeline) *Canvas {
	c := &Canvas{ID: "timeline", Title: "Timeline"}
	rows := len(t.Rows)
	rh := math.Min(18, math.Max(3, 600/math.Max(float64(rows), 1)))
	p := plot{x: 150, y: 50, w: Width - 170, h: rh * float64(rows)}
	c.W, c.H = Width, p.y+p.h+60
	title(c, c.Title)
	if rows == 0 {
		c.H = 120
		c.Add(Text{X: Width / 2, Y: 70, S: "No case has started yet.", Size: 13, Anchor: Middle, Fill: colMuted})
		return c
	}
	span := t.T1 - t.T0
	xs := func(v float64) float64 { return p.x + (v-t.T0)/span*p.w }
	every := int(math.Ceil(11 / rh)) // a label every so many rows
	// An aggregate's cells have tooltips while they are few: a page of
	// 300 rows of 300 cells each must stay under 10 MB.
	cells := 0
	for _, r := range t.Rows {
		cells += len(r.Cells)
	}
	cellTitles := cells <= 20000
	for i, r := range t.Rows {
		y := p.y + float64(i)*rh
		if i%2 == 1 && rh >= 6 {
			c.Add(Rect{X: p.x, Y: y, W: p.w, H: rh, Fill: rgb(0xf4f4f4)})
		}
		if i%every == 0 {
			c.Add(Text{X: p.x - 6, Y: y + rh/2 + 4, S: r.Label, Size: min(11, max(rh, 9)), Anchor: End, Fill: colText})
		}
		pad := math.Min(2, rh/6)
		for _, b := range r.Bars {
			x0, x1 := xs(b.Start), xs(b.End)
			title := fmt.Sprintf("case %d: %s, %s", b.ID, b.State, fmtSeconds(b.End-b.Start))
			if b.State == Failed {
				title = fmt.Sprintf("case %d: failed (status %d), %s", b.ID, b.Status, fmtSeconds(b.End-b.Start))
			}
			c.Add(Rect{X: x0, Y: y + pad, W: max(x1-x0, 0.6), H: rh - 2*pad, Fill: stateColor[b.State], Class: "case " + b.State, Title: title})
		}
		cw := p.w / float64(max(t.Columns, 1))
		for _, cell := range r.Cells {
			col := stateColor[cell.State]
			col.A = uint8(math.Round(255 * cell.Busy))
			title := ""
			if cellTitles {
				title = fmt.Sprintf("%s: %.0f%% busy, mostly %s", r.Label, 100*cell.Busy, cell.State)
			}
			c.Add(Rect{X: p.x + float64(cell.From)*cw, Y: y + pad, W: float64(cell.To-cell.From) * cw, H: rh - 2*pad, Fill: col, Class: "cell " + cell.State, Title: title})
		}
		if r.Start > 0 {
			x := xs(r.Start)
			c.Add(Line{X1: x, Y1: y, X2: x, Y2: y + rh, Stroke: colJob, Width: 2, Class: "job-start", Title: r.Label + " started " + fmtTime(r.Start)})
		}
		if r.End > 0 {
			x := xs(r.End)
			c.Add(Line{X1: x, Y1: y, X2: x, Y2: y + rh, Stroke: colJob, Width: 2, Class: "job-end", Title: r.Label + " ended " + fmtTime(r.End)})
		}
		if r.QuitAt > 0 {
			x := xs(r.QuitAt)
			c.Add(Rect{X: x - 2, Y: y + rh/2 - 2, W: 4, H: 4, Fill: colQuit, Class: "job-quit", Title: r.Label + " exited: " + r.Quit})
		}
	}
	ticks, label, axis := timeTicks(t.T0, t.T1)
	axisX(c, p, ticks, xs, label, axis)
	names, cols := []string{Succeeded, Failed, Interrupted, Running}, []Color{colSucceeded, colFailed, colInterrupted, colRunning}
	if t.timedOut() {
		names, cols = append(names, TimedOut), append(cols, colTimedOut)
	}
	legend(c, Width-20, 34, names, cols)
	return c
}

// timeTicks are ticks at round elapsed times from t0, their labels and the
// axis title.
func timeTicks(t0, t1 float64) ([]float64, func(float64) string, string) {
	span := t1 - t0
	units := []struct {
		secs float64
		name string
	}{{1, "s"}, {60, "min"}, {3600, "h"}, {86400, "d"}}
	u := units[0]
	for _, x := range units {
		if span/x.secs >= 2 {
			u = x
		}
	}
	step := niceStep(span / u.secs / 8)
	var ticks []float64
	for v := 0.0; v <= span/u.secs*(1+1e-9); v += step {
		ticks = append(ticks, t0+v*u.secs)
	}
	label := func(v float64) string { return fmtNum((v-t0)/u.secs) + " " + u.name }
	return ticks, label, "time since " + fmtTime(t0)
}

// ThroughputFigure draws the cases ended per minute, stacked by state, and
// the rate farm query's ETA is computed at.
func ThroughputFigure(tp Throughput) *Canvas {
	c := &Canvas{ID: "throughput", Title: "Throughput", W: Width, H: 330}
	title(c, c.Title)
	p := plot{x: 70, y: 60, w: Width - 100, h: 200}
	n := len(tp.Succeeded)
	if n == 0 {
		c.Add(Text{X: Width / 2, Y: 160, S: "No case has ended yet.", Size: 13, Anchor: Middle, Fill: colMuted})
		return c
	}
	per := float64(tp.BinSeconds) / 60 // minutes a bin
	top := tp.PerMinute
	for i := 0; i < n; i++ {
		top = max(top, float64(tp.Succeeded[i]+tp.Failed[i]+tp.Interrupted[i]+nth(tp.TimedOut, i))/per)
	}
	top = niceTop(top)
	what := "cases ended per minute"
	if tp.BinSeconds != 60 {
		what += " (in bins of " + fmtSeconds(float64(tp.BinSeconds)) + ")"
	}
	axisY(c, p, top, what, tp.BinSeconds == 60)
	t1 := tp.T0 + float64(n)*per*60
	xs := func(v float64) float64 { return p.x + (v-tp.T0)/(t1-tp.T0)*p.w }
	bw := p.w / float64(n)
	for i := 0; i < n; i++ {
		y := p.y + p.h
		for _, s := range []struct {
			n     int64
			state string
		}{{tp.Succeeded[i], Succeeded}, {tp.Failed[i], Failed}, {tp.Interrupted[i], Interrupted}, {nth(tp.TimedOut, i), TimedOut}} {
			if s.n == 0 {
				continue
			}
			bh := float64(s.n) / per / top * p.h
			y -= bh
			c.Add(Rect{X: p.x + float64(i)*bw + min(0.5, bw/4), Y: y, W: max(bw-min(1, bw/2), 0.5), H: bh, Fill: stateColor[s.state], Class: "tbin " + s.state,
				Title: fmt.Sprintf("%s–%s: %d %s", fmtSeconds(float64(i*tp.BinSeconds)), fmtSeconds(float64((i+1)*tp.BinSeconds)), s.n, s.state)})
		}
	}
	ticks, label, axis := timeTicks(tp.T0, t1)
	axisX(c, p, ticks, xs, label, axis)
	if tp.PerMinute > 0 {
		y := p.y + p.h - tp.PerMinute/top*p.h
		c.Add(Line{X1: p.x, Y1: y, X2: p.x + p.w, Y2: y, Stroke: colRate, Width: 1.5, Dash: true, Class: "rate"},
			Text{X: p.x + p.w - 4, Y: y - 4, S: fmt.Sprintf("farm query's rate: %.1f cases/min", tp.PerMinute), Size: 11, Anchor: End, Fill: colRate})
	}
	c.Add(Text{X: p.x, Y: c.H - 12, S: ETAText(tp), Size: 12, Fill: colText, Class: "eta"})
	legend(c, Width-20, 44, endedNames(tp.TimedOut != nil), endedColors(tp.TimedOut != nil))
	return c
}

// ETAText says the ETA as farm query computes it.
func ETAText(tp Throughput) string {
	switch {
	case !tp.Active:
		return "No job of the farm is pending or running: no ETA."
	case tp.ETASeconds >= 0:
		return fmt.Sprintf("ETA %s: the current run's cases left, at %.1f cases/min (farm query's rate, over the last 10 minutes or since the first case, if later).",
			fmtSeconds(tp.ETASeconds), tp.PerMinute)
	default:
		return "ETA unknown: no case ended in the last 10 minutes."
	}
}

// HostsFigure draws, per host, the cases that ended there: succeeded,
// failed and interrupted; the hosts with the largest share of failures
// first (at most 30).
func HostsFigure(hosts []HostCount) *Canvas {
	var items []barItem
	timedOut := false
	for _, h := range hosts {
		ok := h.Ended - h.notOK()
		what := "failed or interrupted"
		if h.TimedOut > 0 {
			what, timedOut = "failed, interrupted or timed out", true
		}
		note := fmt.Sprintf("%d of %d %s (%.0f%%)", h.notOK(), h.Ended, what, 100*float64(h.notOK())/float64(max(h.Ended, 1)))
		items = append(items, barItem{label: h.Host, parts: []int64{ok, h.Failed, h.Interrupted, h.TimedOut}, note: note})
	}
	return barList("hosts", "Cases by host (worst first)", items, endedNames(timedOut))
}

// StatusesFigure draws the failed and interrupted cases by exit status or
// signal.
func StatusesFigure(st []StatusCase) *Canvas {
	var items []barItem
	timedOut := false
	for _, s := range st {
		label := fmt.Sprintf("exit %d", s.Code)
		parts := []int64{0, s.Cases, 0}
		switch s.Kind {
		case "signal":
			label, parts = fmt.Sprintf("signal %d", s.Code), []int64{0, 0, s.Cases}
		case "no end record":
			label, parts = "no end record", []int64{0, 0, s.Cases}
		case "timed out":
			label, parts, timedOut = fmt.Sprintf("timed out (signal %d)", s.Code), []int64{0, 0, 0, s.Cases}, true
		}
		items = append(items, barItem{label: label, parts: parts, note: fmt.Sprint(s.Cases)})
	}
	return barList("statuses", "Failures by exit status or signal", items, endedNames(timedOut))
}

type barItem struct {
	label string
	parts []int64
	note  string
}

// barList draws horizontal stacked bars, one per item (at most 30).
func barList(id, name string, items []barItem, states []string) *Canvas {
	shown := items[:min(len(items), 30)]
	c := &Canvas{ID: id, Title: name, W: Width, H: 50 + 20*float64(max(len(shown), 1)) + 20}
	title(c, name)
	if len(items) == 0 {
		c.Add(Text{X: 160, Y: 60, S: "None.", Size: 12, Fill: colMuted})
		return c
	}
	if len(items) > len(shown) {
		c.Add(Text{X: Width - 20, Y: 20, S: fmt.Sprintf("the first %d of %d", len(shown), len(items)), Size: 11, Anchor: End, Fill: colMuted})
	}
	top := 0.0
	for _, it := range shown {
		s := int64(0)
		for _, v := range it.parts {
			s += v
		}
		top = max(top, float64(s))
	}
	x0, w := 160.0, Width-160.0-300
	for i, it := range shown {
		y := 40 + 20*float64(i)
		c.Add(Text{X: x0 - 6, Y: y + 13, S: it.label, Size: 11, Anchor: End, Fill: colText})
		x := x0
		for k, v := range it.parts {
			if v == 0 {
				continue
			}
			bw := float64(v) / top * w
			c.Add(Rect{X: x, Y: y + 3, W: max(bw, 1), H: 14, Fill: stateColor[states[k]], Class: "hbar " + states[k], Title: fmt.Sprintf("%s: %d %s", it.label, v, states[k])})
			x += bw
		}
		c.Add(Text{X: x + 6, Y: y + 13, S: it.note, Size: 11, Fill: colMuted})
	}
	return c
}

// SummaryFigure is the summary numbers as text, for the PNG and SVG.
func SummaryFigure(d *Data, name string) *Canvas {
	c := &Canvas{ID: "summary", Title: "farm report", W: Width}
	title(c, "farm report: "+name)
	y := 44.0
	c.Add(Text{X: 10, Y: y, S: "generated " + fmtTime(d.Generated), Size: 11, Fill: colMuted})
	for i, s := range d.Summary {
		col := float64(i % 3)
		if i%3 == 0 {
			y += 18
		}
		c.Add(Text{X: 10 + col*310, Y: y, S: s.Name + ": " + s.Value, Size: 12, Fill: colText})
	}
	c.H = y + 14
	return c
}

// niceTop is the axis top for a largest value of v.
func niceTop(v float64) float64 {
	if v <= 0 {
		return 1
	}
	step := niceStep(v / 5)
	return math.Ceil(v/step*(1-1e-9)) * step
}

// fmtSeconds is a duration for people: "450 ms", "12.5 s", "4.2 min",
// "3.1 h", "2.5 d".
func fmtSeconds(s float64) string {
	switch {
	case s == 0:
		return "0 s"
	case s < 1:
		return fmtNum(s*1000) + " ms"
	case s < 120:
		return fmtNum(s) + " s"
	case s < 7200:
		return fmtNum(s/60) + " min"
	case s < 172800:
		return fmtNum(s/3600) + " h"
	}
	return fmtNum(s/86400) + " d"
}

// fmtNum prints x with at most 3 significant digits, no trailing zeros.
func fmtNum(x float64) string {
	x = roundSig(x)
	if math.Abs(x) >= 1000 {
		return strconv.FormatFloat(x, 'f', 0, 64)
	}
	return strconv.FormatFloat(x, 'g', 3, 64)
}

// fmtCount prints an axis count: 1500 → "1.5k".
func fmtCount(v float64) string {
	switch {
	case v >= 1e6:
		return fmtNum(v/1e6) + "M"
	case v >= 1e4:
		return fmtNum(v/1e3) + "k"
	}
	if v == math.Trunc(v) {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return fmtNum(v)
}

// fmtTime is a Unix time in UTC.
func fmtTime(t float64) string {
	return time.UnixMilli(int64(t * 1e3)).UTC().Format("2006-01-02 15:04:05 UTC")
}
