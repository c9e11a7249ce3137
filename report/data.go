// Package report draws a farm: the data behind each figure of farm report
// (Build, from the status files), the figures as shapes (Figures), and
// those shapes as an HTML page, SVG or PNG.
package report

import (
	"cmp"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/farm-hpc/farm/status"
)

// Input is what Build needs besides the status files: what the batch
// system says of the farm's jobs, and farm query's figures.
type Input struct {
	StatusDir string
	Now       time.Time
	// Jobs is what the batch system says of each meta-job, by job ID; a
	// job it does not list has unknown start and end and is not running.
	// LiveAsOf is when it was asked: a case started after it, in a
	// meta-job that has not exited by itself, runs in a job that started
	// since (status.ReadFile decides, for farm Status too).
	Jobs     map[string]JobInfo
	LiveAsOf time.Time
	// Cutoff is dt_cutoff as a meta-job last stored it (MISC/cutoff,
	// status.Cutoff; 0: not computed yet).
	Cutoff float64
	// Summary is the farm's summary numbers, in order (farm query's).
	Summary []Stat
	// PerMinute, ETASeconds and Active are farm query's throughput over its
	// window, its ETA of the current run (-1: unknown), and whether any job
	// of the farm is pending or running.
	PerMinute  float64
	ETASeconds float64
	Active     bool
	// Mem is the mem= case id declares, in MiB (0: none); nil: no case
	// declares one. Build may call it from several goroutines at once.
	Mem func(id int64) int64
	// Limits; the defaults if zero.
	MaxBars, MaxRows, Columns int
}

// JobInfo is what the batch system says of one job.
type JobInfo struct {
	Start, End time.Time // zero if unknown; End is the expected end while it runs
	Live       bool      // it is running cases now
}

// Stat is one summary number.
type Stat struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// The timeline draws a bar per case up to DefaultMaxBars cases and
// DefaultMaxRows rows; beyond, DefaultColumns columns per row, each shaded
// by how busy the row was, and rows of several meta-jobs (or loops) when
// there are more than DefaultMaxRows.
const (
	DefaultMaxBars = 20000
	DefaultMaxRows = 300
	DefaultColumns = 300
	// SlowestCount is how many of the slowest cases the report lists.
	SlowestCount = 20
)

// Data is what the report shows, figure by figure. Times are Unix seconds.
type Data struct {
	Generated  float64      `json:"generated"`
	Summary    []Stat       `json:"summary"`
	Histogram  Histogram    `json:"histogram"`
	Timeline   Timeline     `json:"timeline"`
	Throughput Throughput   `json:"throughput"`
	Hosts      []HostCount  `json:"hosts"`
	Statuses   []StatusCase `json:"statuses"`
	Slowest    []Attempt    `json:"slowest"`
	Use        Use          `json:"use"`
}

// The states of an attempt, as the figures tell them apart.
const (
	Succeeded   = "succeeded"
	Failed      = "failed"
	Interrupted = "interrupted"
	Running     = "running"
	// TimedOut: it ran past its time limit, and farm ended it (a T
	// record); "timed-out", a CSS class.
	TimedOut = "timed-out"
)

// states in the order of their index in att.state.
var states = [...]string{Succeeded, Failed, Interrupted, Running, TimedOut}

const (
	stSucceeded uint8 = iota
	stFailed
	stInterrupted
	stRunning
	stTimedOut
)

// Histogram is the distribution of the durations of the attempts that
// ended: bins between Edges (seconds; logarithmic if Log), counted by
// state.
type Histogram struct {
	Log         bool      `json:"log"`
	Edges       []float64 `json:"edges"`
	Succeeded   []int64   `json:"succeeded"`
	Failed      []int64   `json:"failed"`
	Interrupted []int64   `json:"interrupted"`
	TimedOut    []int64   `json:"timed_out,omitempty"` // nil when no case timed out
	// Quantile is the upper 12.5% quantile of the durations of the cases
	// that ended (E records), as a meta-job computes dt_cutoff now (0 if
	// none ended); Cutoff is dt_cutoff as the meta-jobs last stored it.
	Quantile float64 `json:"quantile"`
	Cutoff   float64 `json:"cutoff"`
	// Estimated counts the interrupted cases with no record of their end:
	// their duration is counted to their job's end (or its last record).
	Estimated int64 `json:"estimated"`
	// Zero counts the cases that ended after 0 s: on a logarithmic axis,
	// in its first bin. Untimed counts the cases META's own records say
	// ended (a farm adopted from META), with no times: not in the bins.
	Zero    int64 `json:"zero"`
	Untimed int64 `json:"untimed"`
}

// Timeline is a row per meta-job (per loop of a meta-job that runs
// several cases at once), from T0 to T1. In Mode "cases" each row has a
// bar per case; in Mode "aggregate", Columns columns per row, runs of
// equal ones as Cells.
type Timeline struct {
	T0      float64 `json:"t0"`
	T1      float64 `json:"t1"`
	Mode    string  `json:"mode"`
	Note    string  `json:"note"`
	Columns int     `json:"columns,omitempty"`
	Rows    []Row   `json:"rows"`
	Cases   int64   `json:"cases"` // attempts drawn
}

// Row is one row of the timeline.
type Row struct {
	Label string `json:"label"`
	// Start and End are the job's start and end as the batch system says
	// (0: unknown).
	Start float64 `json:"start"`
	End   float64 `json:"end"`
	// Quit is the meta-job's own exit message (QuitAt when), if it exited
	// by itself.
	Quit   string  `json:"quit,omitempty"`
	QuitAt float64 `json:"quit_at,omitempty"`
	Bars   []Bar   `json:"bars,omitempty"`
	Cells  []Cell  `json:"cells,omitempty"`
	Lanes  int     `json:"lanes"` // the meta-jobs or loops the row stands for
}

// Bar is one case in the timeline.
type Bar struct {
	ID     int64   `json:"id"`
	Start  float64 `json:"start"`
	End    float64 `json:"end"`
	State  string  `json:"state"`
	Status int     `json:"status"`
}

// Cell is a run of columns [From, To) of an aggregated row: Busy is the
// fraction of the row's time taken by cases (rounded up to a quarter),
// State the state that took most of it.
type Cell struct {
	From  int     `json:"from"`
	To    int     `json:"to"`
	Busy  float64 `json:"busy"`
	State string  `json:"state"`
}

// Throughput counts the attempts that ended in each bin of BinSeconds
// from T0, by state.
type Throughput struct {
	T0          float64 `json:"t0"`
	BinSeconds  int     `json:"bin_seconds"`
	Succeeded   []int64 `json:"succeeded"`
	Failed      []int64 `json:"failed"`
	Interrupted []int64 `json:"interrupted"`
	TimedOut    []int64 `json:"timed_out,omitempty"` // nil when no case timed out
	PerMinute   float64 `json:"per_minute"`
	ETASeconds  float64 `json:"eta_seconds"`
	Active      bool    `json:"active"`
}

// HostCount is what ended on one host.
type HostCount struct {
	Host        string `json:"host"`
	Ended       int64  `json:"ended"`
	Failed      int64  `json:"failed"`
	Interrupted int64  `json:"interrupted"`
	TimedOut    int64  `json:"timed_out,omitempty"`
}

// StatusCase counts the attempts that failed with one exit status, or were
// interrupted by one signal.
type StatusCase struct {
	Kind  string `json:"kind"` // "exit", "signal", "no end record" or "timed out" (Code: the signal farm sent)
	Code  int    `json:"code"`
	Cases int64  `json:"cases"`
}

// Attempt is one run of a case that ended.
type Attempt struct {
	ID      int64   `json:"id"`
	Seconds float64 `json:"seconds"`
	State   string  `json:"state"`
	Status  int     `json:"status"`
	Start   float64 `json:"start"`
	Job     string  `json:"job"`
	Host    string  `json:"host"`
	Command string  `json:"command,omitempty"` // its line of table.dat, when known
}

// att is an attempt as Build keeps it: 12 bytes, for farms of millions of
// cases. Its start is an offset from its file's base.
// (A float32 offset is exact to the millisecond for 2 hours, to 0.25 s
// for 35 days: enough to draw.)
type att struct {
	off, dur float32
	loop     uint16
	state    uint8
}

// file is what Build reads from one status file.
type file struct {
	job          string
	run, restart int
	host         string
	quit         string
	quitAt       float64
	base         float64
	atts         []att
	ids          []int64 // the case of each att, while ids are kept
	statuses     []int32 // the STATUS or signal of each att, while kept
	first, last  float64 // earliest start, latest time recorded
	ended        []float64
	timedOut     bool // an attempt timed out
	hosts        map[string]*HostCount
	codes        map[[2]int]int64
	slow         []Attempt
	estimated    int64
	untimed      int64 // META's "ID STATUS" lines: ended, with no times
	zero         int64 // attempts that ended after 0 s
	maxLoop      int
	loops        map[int]bool // the loops its cases ran in (0: none said)
	header       bool         // it has farm's header (not a META file)
	superseded   bool         // an earlier incarnation of a restarted job
	use          *useAcc      // what its attempts used: its reader's, shared with other files
	mem          func(int64) int64

	// While reading: the attempts whose case IDs are kept, farm-wide,
	// at most maxBars; keep says this file's still are.
	kept    *atomic.Int64
	maxBars int64
	keep    bool
}

// Build reads the status files of in.StatusDir and computes every figure's
// data.
func Build(in Input) (*Data, error) {
	if in.MaxBars <= 0 {
		in.MaxBars = DefaultMaxBars
	}
	if in.MaxRows <= 0 {
		in.MaxRows = DefaultMaxRows
	}
	if in.Columns <= 0 {
		in.Columns = DefaultColumns
	}
	if in.Now.IsZero() {
		in.Now = time.Now()
	}
	names, err := status.Files(in.StatusDir)
	if err != nil {
		return nil, err
	}
	superseded := status.Superseded(names)
	files := make([]*file, len(names))
	errs := make([]error, len(names))
	var kept atomic.Int64 // attempts whose case IDs are kept
	next := atomic.Int64{}
	var wg sync.WaitGroup
	uses := make([]*useAcc, min(runtime.GOMAXPROCS(0), len(names)))
	for w := range uses {
		uses[w] = newUseAcc()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(names) {
					return
				}
				files[i], errs[i] = readFile(names[i], in, superseded(names[i]), &kept, uses[w])
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	slices.SortStableFunc(files, func(a, b *file) int {
		return cmp.Or(cmp.Compare(a.run, b.run), compareIDs(a.job, b.job), cmp.Compare(a.restart, b.restart))
	})
	d := &Data{Generated: unix(in.Now), Summary: in.Summary}
	if d.Summary == nil {
		d.Summary = []Stat{}
	}
	d.Histogram = histogram(files, in.Cutoff)
	d.Timeline = timeline(files, in)
	d.Throughput = throughput(files, in, d.Timeline.T0, d.Timeline.T1)
	d.Hosts, d.Statuses = failures(files)
	d.Slowest = slowest(files)
	use := newUseAcc()
	for _, u := range uses {
		use.merge(u)
	}
	d.Use = use.result()
	return d, nil
}

// readFile reads one status file, whose attempts status.ReadFile
// settles; superseded says it is an earlier incarnation of a restarted
// job (not running, whatever the job's state). kept counts the attempts
// whose case IDs are kept, farm-wide; use, what they used (the reader's).
func readFile(name string, in Input, superseded bool, kept *atomic.Int64, use *useAcc) (*file, error) {
	f := &file{hosts: map[string]*HostCount{}, codes: map[[2]int]int64{}, base: math.NaN(), first: math.Inf(1),
		loops: map[int]bool{}, superseded: superseded, kept: kept, maxBars: int64(in.MaxBars), keep: true, use: use, mem: in.Mem}
	opt := status.ReadOptions{Live: func(job string) bool { return in.Jobs[job].Live }, LiveAsOf: in.LiveAsOf, Now: in.Now, Superseded: superseded}
	h, err := status.ReadFile(name, opt, func(h *status.File, a *status.Attempt) error {
		f.attempt(h, a, in.Jobs[h.Job])
		return nil
	})
	if err != nil {
		return nil, err
	}
	f.job, f.restart, f.run, f.host, f.header = h.Job, h.Restart, h.Run, h.Host, h.Header
	if h.Quitted {
		f.quit, f.quitAt = h.Quit, h.QuitAt
	}
	f.last = max(f.last, h.Last)
	if math.IsNaN(f.base) {
		f.base = 0
	}
	return f, nil
}

// attempt adds one attempt of the file h, whose job the batch system
// describes as job.
func (f *file) attempt(h *status.File, a *status.Attempt, job JobInfo) {
	switch {
	case a.Untimed:
		// A case META ran before the farm was adopted: it ended, with no
		// times or host.
		f.untimed++
		if a.State == status.Failed {
			f.codes[[2]int{0, a.Status}]++
		}
	case a.State == status.Unfit:
		// Not started: not drawn (h.Last has its time).
	case a.State == status.Running:
		f.add(a.ID, a.Start, a.Seconds, a.Loop, stRunning, 0, nil, "")
	case a.NoEnd:
		f.estimated++
		f.add(a.ID, a.Start, f.cutOff(h, a.Start, job), a.Loop, stInterrupted, -1, nil, h.Host)
	default:
		st := stInterrupted
		switch a.State {
		case status.Interrupted:
		case status.TimedOut:
			st = stTimedOut
			f.timedOut = true
		default:
			st = stSucceeded
			if a.State == status.Failed {
				st = stFailed
			}
			f.ended = append(f.ended, a.Seconds)
		}
		f.add(a.ID, a.Start, max(a.Seconds, 0), a.Loop, st, a.Status, a.Host, h.Host)
		f.used(h, a, st)
	}
}

// used counts what attempt a of file h, which ended in state st, used.
func (f *file) used(h *status.File, a *status.Attempt, st uint8) {
	if f.use == nil || (a.Use.RSS <= 0 && !a.Use.HasCPU) {
		return
	}
	var mem int64
	if f.mem != nil {
		mem = f.mem(a.ID)
	}
	f.use.add(h, a, st, mem)
}

// cutOff is how long a case started at start, interrupted with no record
// of its end, is drawn to have run: until its job's end, or, in an
// earlier incarnation of a restarted job, which died before the new one
// started, until the job's start (the new one's); else until the file's
// last record.
func (f *file) cutOff(h *status.File, start float64, job JobInfo) float64 {
	end := h.Last
	switch {
	case f.superseded:
		if !job.Start.IsZero() && unix(job.Start) > start {
			end = unix(job.Start)
		}
	case !job.End.IsZero() && unix(job.End) > start:
		end = unix(job.End)
	}
	return max(end-start, 0)
}

// add adds an attempt of case id, started at start, that ran for dur, in
// loop, in state st, with code (its STATUS, its signal, or -1: no record
// of its end), on host (fileHost if empty; not used for a running one).
func (f *file) add(id int64, start, dur float64, loop int, st uint8, code int, host []byte, fileHost string) {
	if math.IsNaN(f.base) {
		f.base = start
	}
	loop = min(max(loop, 0), math.MaxUint16)
	f.atts = append(f.atts, att{off: float32(start - f.base), dur: float32(dur), loop: uint16(loop), state: st})
	f.loops[loop] = true
	if f.keep && f.kept.Add(1) <= f.maxBars {
		f.ids = append(f.ids, id)
		f.statuses = append(f.statuses, int32(code))
	} else {
		f.keep, f.ids, f.statuses = false, nil, nil
	}
	f.first = min(f.first, start)
	f.last = max(f.last, start+dur)
	f.maxLoop = max(f.maxLoop, loop)
	if st != stRunning {
		f.count(id, start, dur, st, code, host, fileHost)
	}
}

// count counts an attempt that is not running (see add) in the figures
// of hosts, statuses and the slowest cases.
func (f *file) count(id int64, start, dur float64, st uint8, code int, host []byte, fileHost string) {
	if len(host) == 0 {
		host = []byte(fileHost)
	}
	hc := f.hosts[string(host)] // no copy of host, but for a new one
	if hc == nil {
		hc = &HostCount{Host: string(host)}
		f.hosts[hc.Host] = hc
	}
	hc.Ended++
	if dur == 0 {
		f.zero++
	}
	switch st {
	case stFailed:
		hc.Failed++
		f.codes[[2]int{0, code}]++
	case stInterrupted:
		hc.Interrupted++
		if code < 0 { // no record of its end
			f.codes[[2]int{2, 0}]++
		} else {
			f.codes[[2]int{1, code}]++
		}
	case stTimedOut:
		hc.TimedOut++
		f.codes[[2]int{3, code}]++
	}
	if len(f.slow) < SlowestCount || dur >= f.slow[len(f.slow)-1].Seconds {
		f.slow = offer(f.slow, Attempt{ID: id, Seconds: dur, State: states[st], Status: code, Start: start, Host: hc.Host})
	}
}

// offer adds a to the slowest attempts top, keeping SlowestCount.
func offer(top []Attempt, a Attempt) []Attempt {
	if len(top) == SlowestCount && !slower(a, top[len(top)-1]) {
		return top
	}
	i, _ := slices.BinarySearchFunc(top, a, func(x, y Attempt) int {
		if slower(x, y) {
			return -1
		}
		return 1
	})
	top = slices.Insert(top, i, a)
	if len(top) > SlowestCount {
		top = top[:SlowestCount]
	}
	return top
}

// slower orders attempts by duration, longest first, then by case ID.
func slower(a, b Attempt) bool {
	if a.Seconds != b.Seconds {
		return a.Seconds > b.Seconds
	}
	if a.ID != b.ID {
		return a.ID < b.ID
	}
	return a.Start < b.Start
}

// compareIDs orders job IDs as numbers where they are ("9" < "10"; an
// array task "12_3" or "12.3" by job, then task), else as strings.
func compareIDs(a, b string) int {
	as, bs := strings.FieldsFunc(a, idSep), strings.FieldsFunc(b, idSep)
	for i := 0; i < len(as) && i < len(bs); i++ {
		x, errx := strconv.ParseInt(as[i], 10, 64)
		y, erry := strconv.ParseInt(bs[i], 10, 64)
		var c int
		if errx == nil && erry == nil {
			c = cmp.Compare(x, y)
		} else {
			c = strings.Compare(as[i], bs[i])
		}
		if c != 0 {
			return c
		}
	}
	return cmp.Or(cmp.Compare(len(as), len(bs)), strings.Compare(a, b))
}

func idSep(r rune) bool { return r == '_' || r == '.' || r == '-' }

func unix(t time.Time) float64 { return float64(t.UnixMilli()) / 1e3 }

// anyTimedOut reports whether some attempt of files timed out: the
// figures then have a series for them.
func anyTimedOut(files []*file) bool {
	for _, f := range files {
		if f.timedOut {
			return true
		}
	}
	return false
}

// notOK is how many of the cases that ended on h did not succeed.
func (h HostCount) notOK() int64 { return h.Failed + h.Interrupted + h.TimedOut }

// histogram bins the durations of every attempt that ended (running ones
// are not counted): logarithmic bins when they span two decades or more.
func histogram(files []*file, cutoff float64) Histogram {
	h := Histogram{Cutoff: cutoff, Edges: []float64{}, Succeeded: []int64{}, Failed: []int64{}, Interrupted: []int64{}}
	lo, hi, n := math.Inf(1), 0.0, 0
	total := 0
	for _, f := range files {
		total += len(f.ended)
	}
	ended := make([]float64, 0, total)
	for _, f := range files {
		for _, a := range f.atts {
			if a.state == stRunning {
				continue
			}
			d := float64(a.dur)
			if d > 0 {
				lo = min(lo, d)
			}
			hi = max(hi, d)
			n++
		}
		ended = append(ended, f.ended...)
		f.ended = nil
		h.Estimated += f.estimated
		h.Zero += f.zero
		h.Untimed += f.untimed
	}
	h.Quantile = status.UpperQuantile(ended, 0.125)
	if n == 0 {
		return h
	}
	if hi > 0 && lo > 0 && hi/lo >= 100 {
		h.Log = true
		// Five bins a decade, on 1, 1.6, 2.5, 4, 6.3 × 10^k.
		k0 := math.Floor(math.Log10(lo) * 5)
		k1 := math.Floor(math.Log10(hi)*5) + 1
		for k := k0; k <= k1; k++ {
			h.Edges = append(h.Edges, roundSig(math.Pow(10, k/5)))
		}
	} else {
		step := niceStep(max(hi, 1e-3) / 40)
		bins := int(math.Floor(hi/step)) + 1
		for i := 0; i <= bins; i++ {
			h.Edges = append(h.Edges, roundSig(float64(i)*step))
		}
	}
	bins := len(h.Edges) - 1
	h.Succeeded, h.Failed, h.Interrupted = make([]int64, bins), make([]int64, bins), make([]int64, bins)
	if anyTimedOut(files) {
		h.TimedOut = make([]int64, bins)
	}
	counts := [][]int64{h.Succeeded, h.Failed, h.Interrupted, nil, h.TimedOut}
	for _, f := range files {
		for _, a := range f.atts {
			if a.state == stRunning {
				continue
			}
			counts[a.state][bin(h.Edges, float64(a.dur))]++
		}
	}
	return h
}

// bin is the index of the bin of edges that holds x: the last whose lower
// edge is at most x, clamped to the bins.
func bin(edges []float64, x float64) int {
	i, _ := slices.BinarySearch(edges, x)
	if i < len(edges) && edges[i] == x {
		i++
	}
	return min(max(i-1, 0), len(edges)-2)
}

// niceStep is the smallest of 1, 2, 2.5, 5 × 10^k at least x.
func niceStep(x float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= x*(1-1e-9) {
			return m * p
		}
	}
	return 10 * p
}

// roundSig rounds x to 3 significant digits, so that edges print as
// written.
func roundSig(x float64) float64 {
	if x == 0 {
		return 0
	}
	p := math.Pow(10, 2-math.Floor(math.Log10(math.Abs(x))))
	return math.Round(x*p) / p
}

// lane is one row of the timeline before rows are grouped: a status file,
// or one loop of it.
type lane struct {
	f    *file
	loop int // 0: the whole file
}

// timeline lays the attempts out in rows.
// Every attempt's case ID was kept (readFile) when there are at most
// MaxBars attempts: the bars need them.
func timeline(files []*file, in Input) Timeline {
	t := Timeline{Rows: []Row{}}
	t0, t1, ok := timeSpan(files, in)
	if !ok {
		return t
	}
	t.T0, t.T1 = t0, t1
	lanes := timelineLanes(files)
	for _, f := range files {
		t.Cases += int64(len(f.atts))
	}
	if t.Cases <= int64(in.MaxBars) && len(lanes) <= in.MaxRows {
		t.Mode = "cases"
		t.Note = fmt.Sprintf("One bar per case: %d cases in %d rows.", t.Cases, len(lanes))
		for _, l := range lanes {
			t.Rows = append(t.Rows, caseRow(l, in))
		}
		return t
	}
	t.Mode = "aggregate"
	t.Columns = in.Columns
	per := (len(lanes) + in.MaxRows - 1) / in.MaxRows
	t.Note = fmt.Sprintf("Aggregated: %d cases are too many to draw one by one. Each row is divided in %d columns, shaded by the fraction of the time its cases ran and coloured by the state that took most of it", t.Cases, in.Columns)
	if per > 1 {
		t.Note += fmt.Sprintf("; each row stands for %d meta-jobs or loops (%d in all)", per, len(lanes))
	}
	t.Note += "."
	for g := 0; g < len(lanes); g += per {
		t.Rows = append(t.Rows, aggregateRow(lanes[g:min(g+per, len(lanes))], t0, t1, in))
	}
	return t
}

// timeSpan is the time the timeline spans: from the earliest start of a
// case or a job to the latest time recorded, or the end of a job that
// ended, or now while a job runs. ok is false if nothing has a time.
func timeSpan(files []*file, in Input) (t0, t1 float64, ok bool) {
	t0, t1 = math.Inf(1), math.Inf(-1)
	for _, f := range files {
		if len(f.atts) > 0 {
			t0, t1 = min(t0, f.first), max(t1, f.last)
		}
		if j, ok := in.Jobs[f.job]; ok && !j.Start.IsZero() {
			t0 = min(t0, unix(j.Start))
		}
	}
	if math.IsInf(t0, 1) {
		return 0, 0, false
	}
	for _, f := range files {
		j := in.Jobs[f.job]
		if j.Live {
			t1 = max(t1, unix(in.Now))
		} else if !j.End.IsZero() {
			t1 = max(t1, unix(j.End))
		}
	}
	if t1 <= t0 {
		t1 = t0 + 1
	}
	return t0, t1, true
}

// timelineLanes are the lanes of the files: one per file, or per loop of
// a file whose cases ran in loops; none for a META file (no times to
// draw).
func timelineLanes(files []*file) []lane {
	var lanes []lane
	for _, f := range files {
		if !f.header && len(f.atts) == 0 {
			continue
		}
		if f.maxLoop == 0 {
			lanes = append(lanes, lane{f: f})
			continue
		}
		for _, l := range f.laneLoops() {
			lanes = append(lanes, lane{f: f, loop: l})
		}
	}
	return lanes
}

// caseRow is the row of lane l with a bar per case.
func caseRow(l lane, in Input) Row {
	r := laneRow(l, in)
	for i, a := range l.f.atts {
		if laneOf(l.f, a) != l.loop {
			continue
		}
		s := l.f.base + float64(a.off)
		r.Bars = append(r.Bars, Bar{ID: l.f.ids[i], Start: round3(s), End: round3(s + float64(a.dur)), State: states[a.state], Status: int(l.f.statuses[i])})
	}
	return r
}

// aggregateRow is the row of the lanes of group from t0 to t1, in
// in.Columns columns: runs of columns equally busy in the same state.
func aggregateRow(group []lane, t0, t1 float64, in Input) Row {
	r := laneRow(group[0], in)
	if len(group) > 1 {
		r = groupRow(group, in)
	}
	width := (t1 - t0) / float64(in.Columns)
	busy := make([][len(states)]float64, in.Columns)
	for _, l := range group {
		for _, a := range l.f.atts {
			if laneOf(l.f, a) != l.loop {
				continue
			}
			s := l.f.base + float64(a.off)
			e := s + float64(a.dur)
			c0 := min(max(int((s-t0)/width), 0), in.Columns-1)
			c1 := min(max(int((e-t0)/width), 0), in.Columns-1)
			for c := c0; c <= c1; c++ {
				lo, hi := t0+float64(c)*width, t0+float64(c+1)*width
				busy[c][a.state] += max(0, min(e, hi)-max(s, lo))
			}
		}
	}
	for c := range busy {
		sum, top := 0.0, 0
		for s := range busy[c] {
			sum += busy[c][s]
			if busy[c][s] > busy[c][top] {
				top = s
			}
		}
		if sum <= 0 {
			continue
		}
		frac := math.Ceil(min(sum/(width*float64(len(group))), 1)*4) / 4
		cell := Cell{From: c, To: c + 1, Busy: frac, State: states[top]}
		if n := len(r.Cells); n > 0 && r.Cells[n-1].To == c && r.Cells[n-1].Busy == frac && r.Cells[n-1].State == cell.State {
			r.Cells[n-1].To++
			continue
		}
		r.Cells = append(r.Cells, cell)
	}
	return r
}

// laneLoops are the loops of a file with loops that have a lane: those its
// cases ran in, in order (a case whose start record said no loop is drawn
// in loop 1).
func (f *file) laneLoops() []int {
	var out []int
	for l := range f.loops {
		out = append(out, max(l, 1))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// laneOf is the loop whose lane a is drawn in: 0 in a file without loops;
// in one with loops, its loop (1 if its start record did not say).
func laneOf(f *file, a att) int {
	if f.maxLoop == 0 {
		return 0
	}
	return max(int(a.loop), 1)
}

// laneRow is the row of one lane, without its cases.
func laneRow(l lane, in Input) Row {
	f := l.f
	r := Row{Label: "job " + f.job, Lanes: 1, Quit: f.quit, QuitAt: f.quitAt}
	if f.restart > 0 {
		r.Label += fmt.Sprintf(" (restart %d)", f.restart)
	}
	if l.loop > 0 {
		r.Label += fmt.Sprintf(" loop %d", l.loop)
	}
	if j, ok := in.Jobs[f.job]; ok && !f.superseded {
		if !j.Start.IsZero() {
			r.Start = unix(j.Start)
		}
		if !j.End.IsZero() && !j.Live {
			r.End = unix(j.End)
		}
	}
	return r
}

// groupRow is the row of several lanes: from the earliest start of their
// jobs to the latest end, and the first of their meta-jobs' own exits,
// with how many exited by themselves.
func groupRow(group []lane, in Input) Row {
	first, last := laneRow(group[0], in), laneRow(group[len(group)-1], in)
	r := Row{Label: first.Label + " – " + strings.TrimPrefix(last.Label, "job "), Lanes: len(group)}
	quits := 0
	seen := map[*file]bool{}
	for _, l := range group {
		lr := laneRow(l, in)
		if lr.Start > 0 && (r.Start == 0 || lr.Start < r.Start) {
			r.Start = lr.Start
		}
		r.End = max(r.End, lr.End)
		if lr.QuitAt > 0 && !seen[l.f] {
			seen[l.f] = true
			quits++
			if r.QuitAt == 0 || lr.QuitAt < r.QuitAt {
				r.QuitAt, r.Quit = lr.QuitAt, lr.Quit
			}
		}
	}
	if quits > 1 {
		r.Quit = fmt.Sprintf("%d meta-jobs of the row exited by themselves, the first: %s", quits, r.Quit)
	}
	return r
}

func round3(x float64) float64 { return math.Round(x*1e3) / 1e3 }

// throughput counts the ends in bins of a minute; of 5 to 30 seconds for a
// farm that ran a few minutes (at most 60 bins), of more minutes for one
// that ran long (at most 600 bins).
func throughput(files []*file, in Input, t0, t1 float64) Throughput {
	tp := Throughput{T0: t0, BinSeconds: 60, PerMinute: in.PerMinute, ETASeconds: in.ETASeconds, Active: in.Active,
		Succeeded: []int64{}, Failed: []int64{}, Interrupted: []int64{}}
	if t1 <= t0 {
		return tp
	}
	span := t1 - t0
	for _, b := range []int{5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 21600, 43200, 86400, 172800, 604800} {
		tp.BinSeconds = b
		if limit := map[bool]float64{true: 60, false: 600}[b < 60]; span/float64(b) <= limit {
			break
		}
	}
	if span/float64(tp.BinSeconds) > 600 { // a farm of years, or a damaged time
		tp.BinSeconds = int(math.Ceil(span/600/86400)) * 86400
	}
	bins := max(int(math.Ceil(span/float64(tp.BinSeconds))), 1)
	tp.Succeeded, tp.Failed, tp.Interrupted = make([]int64, bins), make([]int64, bins), make([]int64, bins)
	if anyTimedOut(files) {
		tp.TimedOut = make([]int64, bins)
	}
	counts := [][]int64{tp.Succeeded, tp.Failed, tp.Interrupted, nil, tp.TimedOut}
	w := float64(tp.BinSeconds)
	for _, f := range files {
		for _, a := range f.atts {
			if a.state == stRunning {
				continue
			}
			e := f.base + float64(a.off) + float64(a.dur)
			counts[a.state][min(max(int((e-t0)/w), 0), bins-1)]++
		}
	}
	return tp
}

// failures counts the attempts that ended by host, and the failed and
// interrupted ones by exit status or signal.
func failures(files []*file) ([]HostCount, []StatusCase) {
	hosts := map[string]*HostCount{}
	codes := map[[2]int]int64{}
	for _, f := range files {
		for h, c := range f.hosts {
			t := hosts[h]
			if t == nil {
				t = &HostCount{Host: h}
				hosts[h] = t
			}
			t.Ended += c.Ended
			t.Failed += c.Failed
			t.Interrupted += c.Interrupted
			t.TimedOut += c.TimedOut
		}
		for k, n := range f.codes {
			codes[k] += n
		}
	}
	hs := make([]HostCount, 0, len(hosts))
	for _, h := range hosts {
		hs = append(hs, *h)
	}
	// Bad hosts first: by the share of their cases that did not succeed.
	slices.SortFunc(hs, func(a, b HostCount) int {
		ra := float64(a.notOK()) / float64(max(a.Ended, 1))
		rb := float64(b.notOK()) / float64(max(b.Ended, 1))
		return cmp.Or(cmp.Compare(rb, ra), cmp.Compare(b.notOK(), a.notOK()), strings.Compare(a.Host, b.Host))
	})
	cs := make([]StatusCase, 0, len(codes))
	for k, n := range codes {
		kind := [...]string{"exit", "signal", "no end record", "timed out"}[k[0]]
		cs = append(cs, StatusCase{Kind: kind, Code: k[1], Cases: n})
	}
	slices.SortFunc(cs, func(a, b StatusCase) int {
		return cmp.Or(cmp.Compare(b.Cases, a.Cases), strings.Compare(a.Kind, b.Kind), cmp.Compare(a.Code, b.Code))
	})
	return hs, cs
}

// slowest merges the files' slowest attempts.
func slowest(files []*file) []Attempt {
	top := []Attempt{}
	for _, f := range files {
		for _, a := range f.slow {
			a.Job = f.job
			a.Start = round3(a.Start)
			a.Seconds = round3(a.Seconds)
			top = offer(top, a)
		}
	}
	return top
}
