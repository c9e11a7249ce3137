package report

import (
	"bufio"
	"fmt"
	"math"
	"slices"
	"strconv"
)

// The figures and the section of what the cases used (use.go).

var colUse = rgb(0x4477aa)

// MemoryFigure draws the distribution of the cases' peak memory: as a
// share of the mem= they declare, with mem= marked, or in bytes.
func MemoryFigure(u Use) *Canvas {
	d := u.Memory
	if d.Kind == KindRSS {
		return distFigure("memory", "Peak memory", d, "peak memory (logarithmic)", fmtBytesIEC, 0)
	}
	return distFigure("memory", "Peak memory ÷ mem=", d, "peak memory ÷ the mem= the case declares (logarithmic)", fmtPercent, 1)
}

// CPUFigure draws the distribution of the cases' CPU efficiency, with
// 100% (every CPU given busy throughout) marked.
func CPUFigure(u Use) *Canvas {
	return distFigure("cpu", "CPU efficiency", u.CPU, "CPU time ÷ (wall time × CPUs given) (logarithmic)", fmtPercent, 1)
}

// distFigure draws Dist d as a histogram on a logarithmic axis (linear if
// its first edge is 0: zeros only), its values labelled by label, with
// its median marked, and ref (if > 0: mem=, or 100%).
func distFigure(id, name string, d Dist, axis string, label func(float64) string, ref float64) *Canvas {
	c := &Canvas{ID: id, Title: name, W: Width, H: 330}
	title(c, c.Title)
	p := plot{x: 70, y: 60, w: Width - 100, h: 200}
	n := len(d.Counts)
	if n == 0 {
		c.Add(Text{X: Width / 2, Y: 160, S: "No case's record says.", Size: 13, Anchor: Middle, Fill: colMuted})
		return c
	}
	lo, hi := d.Edges[0], d.Edges[n]
	if ref > 0 && lo > 0 { // the reference on the axis, if near
		lo, hi = math.Min(lo, math.Max(ref/4, lo/4)), math.Max(hi, math.Min(ref*1.1, hi*4))
	}
	xs := func(v float64) float64 { return p.x + (v-lo)/(hi-lo)*p.w }
	if lo > 0 {
		llo, lhi := math.Log10(lo), math.Log10(hi)
		xs = func(v float64) float64 { return p.x + (math.Log10(max(v, lo))-llo)/(lhi-llo)*p.w }
	}
	top := 0.0
	for _, k := range d.Counts {
		top = max(top, float64(k))
	}
	top = niceTop(top)
	axisY(c, p, top, "cases", true)
	for i, k := range d.Counts {
		if k == 0 {
			continue
		}
		x0, x1 := xs(d.Edges[i]), xs(d.Edges[i+1])
		bh := float64(k) / top * p.h
		c.Add(Rect{X: x0 + 0.5, Y: p.y + p.h - bh, W: max(x1-x0-1, 0.5), H: bh, Fill: colUse, Class: "ubin",
			Title: fmt.Sprintf("%s–%s: %d", label(d.Edges[i]), label(d.Edges[i+1]), k)})
	}
	ticks := durationTicks(lo > 0, lo, hi)
	if d.Kind == KindRSS {
		ticks = pow2Ticks(lo, hi)
	}
	ticks = slices.DeleteFunc(ticks, func(v float64) bool { return v < lo*(1-1e-9) || v > hi*(1+1e-9) })
	axisX(c, p, ticks, xs, label, axis)
	// The marks' labels above the plot, not over its bars.
	mark := func(v float64, col Color, class, text string, y float64) {
		x := xs(v)
		c.Add(Line{X1: x, Y1: y + 3, X2: x, Y2: p.y + p.h, Stroke: col, Width: 1.5, Dash: true, Class: class, Title: text})
		anchor, tx := Start, x+4
		if x > p.x+p.w*0.7 {
			anchor, tx = End, x-4
		}
		c.Add(Text{X: tx, Y: y, S: text, Size: 11, Anchor: anchor, Fill: col, Class: class})
	}
	mark(max(d.Median, lo), colQuantile, "median", "median "+label(d.Median), p.y-22)
	if ref > 0 && ref >= lo && ref <= hi {
		what := map[string]string{KindRatio: "mem=", KindEfficiency: "every CPU given busy"}[d.Kind]
		mark(ref, colCutoff, "reference", what+" ("+label(ref)+")", p.y-8)
	}
	return c
}

// pow2Ticks are ticks at powers of 2 from lo to hi, every so many
// doublings that there are at most 8.
func pow2Ticks(lo, hi float64) []float64 {
	k0, k1 := math.Ceil(math.Log2(lo)), math.Floor(math.Log2(hi))
	step := math.Max(1, math.Ceil((k1-k0+1)/8))
	var ticks []float64
	for k := k0; k <= k1; k += step {
		ticks = append(ticks, math.Exp2(k))
	}
	return ticks
}

// fmtPercent is a share as a percentage: "12%", "0.5%", "250%".
func fmtPercent(x float64) string { return fmtNum(100*x) + "%" }

// fmtBytesIEC is a size in powers of 1024: "512 KiB", "1.5 GiB".
func fmtBytesIEC(b float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	u := 0
	for b >= 1024 && u < len(units)-1 {
		b /= 1024
		u++
	}
	return fmtNum(b) + " " + units[u]
}

// writeUseSection writes the section of what the cases used: one line
// when no record says.
func writeUseSection(b *bufio.Writer, u Use) {
	b.WriteString("<section id=\"use-section\">\n<h2>What the cases used</h2>\n")
	if !u.Any() {
		b.WriteString("<p>No record of a case that ended says what it used (its peak memory or CPU time): farm's records say it since issue 38.</p>\n</section>\n")
		return
	}
	m := u.Memory
	switch m.Kind {
	case KindRatio:
		fmt.Fprintf(b, "<p>The peak memory of each case run that ended (the resident peak of its largest process) as a share of the mem= its line in table.dat declares, for the %d that declare one", m.Count)
		if u.Undeclared > 0 {
			fmt.Fprintf(b, " (%d more say their peak and declare no mem=)", u.Undeclared)
		}
		fmt.Fprintf(b, ". %s. A case right of the mem= line took more than it declared; one far left of it declares more than it needs.</p>\n", quantiles(m, fmtPercent))
	case KindRSS:
		fmt.Fprintf(b, "<p>The peak memory of each case run that ended (the resident peak of its largest process), for the %d that say it; no case declares mem= in table.dat. %s.</p>\n", m.Count, quantiles(m, fmtBytesIEC))
	default:
		b.WriteString("<p>No record says a case's peak memory.</p>\n")
	}
	if m.Kind != "" {
		writeInline(b, MemoryFigure(u))
	}
	if c := u.CPU; c.Kind != "" {
		fmt.Fprintf(b, "<p>The CPU efficiency of each case run that ended, for the %d that say their CPU time: its CPU time (user + system) ÷ (its wall time × the CPUs it was given: those its start record names, else all of its meta-job's, as a case that declares no needs holds them). 100%% is every CPU it was given busy throughout; a case far below it was given CPUs it did not use ('farm query' suggests a cpus=). %s.", c.Count, quantiles(c, fmtPercent))
		if c.Zero > 0 {
			fmt.Fprintf(b, " %d used no CPU time to the hundredth of a second: they are counted in the first bin.", c.Zero)
		}
		b.WriteString("</p>\n")
		writeInline(b, CPUFigure(u))
	} else {
		b.WriteString("<p>No record says a case's CPU time.</p>\n")
	}
	writeUseCases(b, u)
	b.WriteString("</section>\n")
}

// quantiles says the quantiles of d.
func quantiles(d Dist, label func(float64) string) string {
	return fmt.Sprintf("Least %s, 10%% quantile %s, median %s, 90%% quantile %s, most %s", label(d.Min), label(d.P10), label(d.Median), label(d.P90), label(d.Max))
}

// MemText is mem= as a case line may declare it: a size in MiB, in GiB
// when whole ("512M", "1536M", "4G").
func MemText(mib int64) string {
	if mib%1024 == 0 {
		return strconv.FormatInt(mib/1024, 10) + "G"
	}
	return strconv.FormatInt(mib, 10) + "M"
}

// writeUseCases writes the table of the cases furthest off.
func writeUseCases(b *bufio.Writer, u Use) {
	esc := xmlText
	over, under := "furthest above mem=", "furthest below mem="
	if u.Memory.Kind == KindRSS {
		over = "largest peak"
	}
	b.WriteString("<p>The cases furthest off: the peaks furthest above and below the mem= their case declares, as a share of it (or the largest peaks, where no case declares mem=), and the lowest CPU efficiencies.")
	if u.Memory.Kind == KindRatio && len(u.Over) == 0 {
		b.WriteString(" No case's peak is above its mem=.")
	}
	b.WriteString("</p>\n")
	b.WriteString("<table id=\"use-cases\">\n<tr><th>listed as</th><th class=\"n\">case</th><th>ended</th><th>job</th><th>host</th><th class=\"n\">duration</th><th class=\"n\">peak memory</th><th class=\"n\">mem=</th><th class=\"n\">CPU time</th><th class=\"n\">CPUs</th><th class=\"n\">CPU efficiency</th><th>command</th></tr>\n")
	for _, l := range []struct {
		what  string
		cases []UseCase
	}{{over, u.Over}, {under, u.Under}, {"lowest CPU efficiency", u.LeastCPU}} {
		for _, c := range l.cases {
			peak, mem, cpu, eff := "-", "-", "-", "-"
			if c.RSS > 0 {
				peak = fmtBytesIEC(float64(c.RSS))
			}
			if c.MemMB > 0 {
				mem = MemText(c.MemMB)
				if c.RSS > 0 {
					mem += " (" + fmtPercent(float64(c.RSS)/float64(c.MemMB<<20)) + ")"
				}
			}
			if !c.NoCPU {
				cpu = fmtSeconds(c.CPU)
				if c.Seconds > 0 {
					eff = fmtPercent(c.CPU / (c.Seconds * float64(c.CPUs)))
				}
			}
			fmt.Fprintf(b, "<tr><td>%s</td><td class=\"n\">%d</td><td class=\"%s\">%s</td><td>%s</td><td>%s</td><td class=\"n\">%s</td><td class=\"n\">%s</td><td class=\"n\">%s</td><td class=\"n\">%s</td><td class=\"n\">%d</td><td class=\"n\">%s</td><td class=\"cmd\">%s</td></tr>\n",
				esc(l.what), c.ID, c.State, esc(endedHow(c.Attempt)), esc(c.Job), esc(c.Host), esc(fmtSeconds(c.Seconds)), esc(peak), esc(mem), esc(cpu), c.CPUs, esc(eff), esc(c.Command))
		}
	}
	b.WriteString("</table>\n")
}
