package farm

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/casetable"
	"github.com/farm-hpc/farm/layout"
	"github.com/farm-hpc/farm/status"
)

// rateWindow is how far back farm query looks to measure throughput.
const rateWindow = 10 * time.Minute

// Query is the short summary of a farm that farm query prints.
type Query struct {
	Run  int       `json:"run"`
	Jobs JobCounts `json:"jobs"`
	// RunCases are the cases of the current run (its table: table.dat, or
	// table.dat_ after a resubmit).
	RunCases CaseCounts `json:"run_cases"`
	// FarmCases are all cases of table.dat, by their farm-wide state.
	FarmCases CaseCounts `json:"farm_cases"`
	// PerMinute is the recent throughput: cases ended per minute over the
	// last rateWindow (or since the farm started, if later).
	PerMinute float64 `json:"cases_per_minute"`
	// ETASeconds estimates when the current run's cases will all have
	// ended, at that throughput; -1 when unknown (nothing active, no rate),
	// null in JSON (MarshalJSON).
	ETASeconds float64 `json:"eta_seconds"`
	// Busy says, for each running meta-job that packs its cases into the
	// CPUs and GPUs it was given (its status file's header says how many),
	// how many of them its running cases hold.
	Busy []JobBusy `json:"busy,omitempty"`
	// MaxCrashes is the farm's crash limit (MAX_CRASHES; 0: none).
	MaxCrashes int `json:"max_crashes"`
	// Restarted is how many cases were started more than once, in any
	// runs (retries, resubmits, restarts); MostAttempts the most starts of
	// any case.
	Restarted    int64 `json:"restarted"`
	MostAttempts int   `json:"most_attempts"`
	// CoreHours is what the farm cost, farm-wide (corehours.go).
	CoreHours CoreHours `json:"core_hours"`
	// Use is what the cases whose records say it used; nil if none says.
	Use *CaseUse `json:"use,omitempty"`
	// CPUUse and MemUse are how much of what they were given the cases
	// used (use.go: null when no record says), and Advice farm query's
	// lines on what to give them instead, if any.
	CPUUse *CPUUse  `json:"cpu_use"`
	MemUse *MemUse  `json:"mem_use"`
	Advice []string `json:"advice,omitempty"`
}

// CaseUse is what the cases used, as their records say (farm-wide, each
// case's decisive attempt): how many say their CPU time, its sum and
// that of their wall time, and the largest peak memory of a case.
type CaseUse struct {
	Cases       int64   `json:"cases"`
	CPUSeconds  float64 `json:"cpu_seconds"`
	WallSeconds float64 `json:"wall_seconds"`
	MaxRSSBytes int64   `json:"max_rss_bytes"`
	MaxRSSCase  int64   `json:"max_rss_case"`
}

// String is its line in farm query: "Use: 120 case(s) say their CPU time,
// 0.97 of their wall time; the largest peak memory 1.2G (case 17)".
func (u CaseUse) String() string {
	var parts []string
	if u.Cases > 0 && u.WallSeconds > 0 {
		parts = append(parts, fmt.Sprintf("%d case(s) say their CPU time, %.2f of their wall time", u.Cases, u.CPUSeconds/u.WallSeconds))
	}
	if u.MaxRSSBytes > 0 {
		parts = append(parts, fmt.Sprintf("the largest peak memory %s (case %d)", fmtKiB(nil, u.MaxRSSBytes>>10), u.MaxRSSCase))
	}
	return "Use: " + strings.Join(parts, "; ") + " ('farm Status' shows each case's)"
}

// MarshalJSON is q's JSON object, with an unknown ETA as null (as every
// unknown duration of farm's JSON).
func (q Query) MarshalJSON() ([]byte, error) {
	type plain Query
	var eta *float64
	if q.ETASeconds >= 0 {
		eta = &q.ETASeconds
	}
	return json.Marshal(struct {
		plain
		ETASeconds *float64 `json:"eta_seconds"`
	}{plain(q), eta})
}

// JobBusy is how much of what a running meta-job packs its cases into
// they hold.
type JobBusy struct {
	Job      string `json:"job"`
	CPUs     int    `json:"cpus"`      // the job's (0: it does not manage CPUs)
	BusyCPUs int    `json:"busy_cpus"` // those its running cases were given
	GPUs     int    `json:"gpus"`
	BusyGPUs int    `json:"busy_gpus"`
}

// String is its line in farm query: "job 123: 6/8 CPUs, 1/2 GPUs busy".
func (b JobBusy) String() string {
	var parts []string
	if b.CPUs > 0 {
		parts = append(parts, fmt.Sprintf("%d/%d CPUs", b.BusyCPUs, b.CPUs))
	}
	if b.GPUs > 0 {
		parts = append(parts, fmt.Sprintf("%d/%d GPUs", b.BusyGPUs, b.GPUs))
	}
	return fmt.Sprintf("job %s: %s busy", b.Job, strings.Join(parts, ", "))
}

// JobCounts counts the farm's jobs (all runs) by state.
type JobCounts struct {
	Queued   int `json:"queued"`
	Running  int `json:"running"`
	Finished int `json:"finished"`
}

// CaseCounts counts cases by state. Left are cases not yet taken (in the
// current run) or never run (farm-wide); Unfit, those a meta-job took and
// did not start, because they did not fit it (for the next run).
type CaseCounts struct {
	Total       int64 `json:"total"`
	Succeeded   int64 `json:"succeeded"`
	Failed      int64 `json:"failed"`
	Interrupted int64 `json:"interrupted"`
	TimedOut    int64 `json:"timed_out,omitempty"` // ran past their time limit (CASE_TIME_LIMIT, time=)
	Unfit       int64 `json:"unfit"`
	Running     int64 `json:"running"`
	Left        int64 `json:"left"`
	// Crashed are those of Failed, Interrupted and Unfit that the crash
	// limit (MAX_CRASHES) keeps from running again; farm-wide only.
	Crashed int64 `json:"crashed,omitempty"`
}

// processed is the number of cases that ended (succeeded or failed).
func (c CaseCounts) processed() int64 { return c.Succeeded + c.Failed + c.TimedOut }

// Active reports whether any job of the farm is queued or running.
func (q Query) Active() bool { return q.Jobs.Queued+q.Jobs.Running > 0 }

// queried is what farm query read besides its Query: what the backends
// said of the farm's jobs, the claim state, and the mem= table.dat's cases
// declare (nil: none, or no record says a case's peak).
type queried struct {
	infos map[string]backend.JobInfo
	st    casetable.State
	mem   *memTable
}

// query computes farm query's summary (one scheduler query per backend,
// one accounting query per backend that keeps accounting, one read of
// the status files, and, once some record says a case's peak memory, one
// of table.dat's #FARM parts for the mem= they declare).
func (f *Farm) query(ctx context.Context, now time.Time) (Query, queried, error) {
	var q Query
	st, err := f.readState(ctx)
	if err != nil {
		return q, queried{st: st}, err
	}
	sum, recs, infos, err := f.load(ctx, now.Add(-rateWindow))
	if err != nil {
		return q, queried{st: st}, err
	}
	q.Run = st.Run
	q.Jobs = countJobs(recs, infos)
	if rc := sum.RunCounts[st.Run]; rc != nil {
		q.RunCases = CaseCounts{Succeeded: rc.Succeeded, Failed: rc.Failed, Interrupted: rc.Interrupted, TimedOut: rc.TimedOut, Unfit: rc.Unfit, Running: rc.Running}
	}
	q.RunCases.Total = st.Cases
	q.RunCases.Left = max(0, st.Cases-st.Claimed)
	tot := sum.Totals()
	q.FarmCases = CaseCounts{Total: st.Total, Succeeded: tot.Succeeded, Failed: tot.Failed, Interrupted: tot.Interrupted, TimedOut: tot.TimedOut, Unfit: tot.Unfit, Running: tot.Running}
	q.FarmCases.Left = max(0, st.Total-tot.Succeeded-tot.Failed-tot.Interrupted-tot.TimedOut-tot.Unfit-tot.Running)
	q.FarmCases.Crashed = f.crashed(sum).all
	q.MaxCrashes = f.Config.MaxCrashes
	q.Restarted = sum.Restarted()
	q.MostAttempts, _ = sum.MostAttempts()

	q.PerMinute, q.ETASeconds = rate(q, sum.Recent, sum.First, now)
	q.Busy = busyJobs(sum.Jobs, infos)
	q.CoreHours = coreHours(sum, f.accounting(ctx, recs), q.FarmCases.Succeeded)
	var mem *memTable
	if u := sum.Use(); u.Cases > 0 || u.MaxRSS > 0 {
		q.Use = &CaseUse{Cases: u.Cases, CPUSeconds: u.CPU, WallSeconds: u.Wall, MaxRSSBytes: u.MaxRSS << 10, MaxRSSCase: u.MaxRSSCase}
		if u.MaxRSS > 0 {
			mem, _ = readMemTable(f.Path(layout.Table)) // none read: no mem= to compare with
		}
		q.CPUUse, q.MemUse, q.Advice = useAdvice(sum, mem, useMode{simple: st.Simple, wholeNode: f.Config.WholeNode, nwhole: f.Config.NWhole})
	}
	return q, queried{infos: infos, st: st, mem: mem}, nil
}

// busyJobs returns, for each running meta-job whose status file says its
// capacity, what its running cases hold, in the order of the job IDs: the
// CPUs and GPUs their start records name, or all of the job's while one
// of them holds the whole job (Job.OpenWhole).
// Only a job's newest incarnation (restart) runs; a job that ended by
// itself has nothing busy.
func busyJobs(jobs []status.Job, infos map[string]backend.JobInfo) []JobBusy {
	latest := map[string]int{}
	for _, j := range jobs {
		latest[j.ID] = max(latest[j.ID], j.Restart)
	}
	var out []JobBusy
	for _, j := range jobs {
		if j.Capacity == (status.Capacity{}) || j.Restart < latest[j.ID] || j.Quit != "" {
			continue
		}
		if !runsCases(infos[j.ID].State) && j.Open == 0 {
			continue
		}
		b := JobBusy{Job: j.ID, CPUs: j.Capacity.CPUs, BusyCPUs: min(len(j.OpenCPUs), j.Capacity.CPUs), GPUs: j.Capacity.GPUs, BusyGPUs: min(len(j.OpenGPUs), j.Capacity.GPUs)}
		if j.OpenWhole > 0 {
			// A case that declares no needs holds the whole job.
			b.BusyCPUs, b.BusyGPUs = b.CPUs, b.GPUs
		}
		out = append(out, b)
	}
	sort.SliceStable(out, func(a, b int) bool {
		x, y := out[a].Job, out[b].Job
		return len(x) < len(y) || (len(x) == len(y) && x < y)
	})
	return out
}

// countJobs counts jobs by state.
func countJobs(recs []JobRecord, infos map[string]backend.JobInfo) JobCounts {
	var c JobCounts
	for _, r := range recs {
		switch infos[r.ID].State {
		case backend.Pending:
			c.Queued++
		case backend.Running:
			c.Running++
		default:
			c.Finished++
		}
	}
	return c
}

// rate is the throughput over the last rateWindow (or since first, the
// earliest record, if later) and the ETA of the current run's remaining
// cases at that rate (-1: unknown).
func rate(q Query, recent int64, first float64, now time.Time) (perMin, eta float64) {
	window := rateWindow
	if first > 0 {
		if since := now.Sub(time.UnixMilli(int64(first * 1e3))); since < window {
			window = since
		}
	}
	if window > time.Second && recent > 0 {
		perMin = float64(recent) / window.Minutes()
	}
	eta = -1
	if q.Active() && perMin > 0 {
		left := q.RunCases.Left + q.RunCases.Running
		eta = math.Round(float64(left) / perMin * 60)
	}
	return perMin, eta
}

// PrintQuery prints the farm's summary as of now (farm query).
func (f *Farm) PrintQuery(ctx context.Context, w io.Writer, format Format) error {
	q, _, err := f.query(ctx, time.Now())
	if err != nil {
		return err
	}
	f.sayNote()
	return writeQuery(w, q, format)
}

// writeQuery prints q for people, or as JSON.
func writeQuery(w io.Writer, q Query, format Format) error {
	if format == JSON {
		return json.NewEncoder(w).Encode(q)
	}
	if q.Run == 0 {
		fmt.Fprintln(w, "The farm has not been submitted yet.")
		return nil
	}
	fmt.Fprintf(w, "Jobs: %d queued, %d running, %d finished\n", q.Jobs.Queued, q.Jobs.Running, q.Jobs.Finished)
	t := newTable(w, "CASES", "TOTAL", "SUCCEEDED", "FAILED", "INTERRUPTED", "UNFIT", "RUNNING", "LEFT")
	row := func(name string, c CaseCounts) {
		t.Append([]string{name, fmt.Sprint(c.Total), fmt.Sprint(c.Succeeded), fmt.Sprint(c.Failed),
			fmt.Sprint(c.Interrupted), fmt.Sprint(c.Unfit), fmt.Sprint(c.Running), fmt.Sprint(c.Left)})
	}
	row(fmt.Sprintf("run %d", q.Run), q.RunCases)
	row("farm", q.FarmCases)
	t.Render()
	if c := q.FarmCases.TimedOut; c > 0 {
		fmt.Fprintf(w, "Timed out: %d case(s) ran past their time limit (farm-wide; %d in run %d): 'farm resubmit --timed-out' runs them again\n", c, q.RunCases.TimedOut, q.Run)
	}
	fmt.Fprintf(w, "Progress: %s of the farm's cases processed; %s\n", percent(q.FarmCases), rateETA(q))
	if q.Restarted > 0 {
		fmt.Fprintf(w, "Attempts: %d case(s) started more than once, at most %d times ('farm Status' shows each case's attempts)\n", q.Restarted, q.MostAttempts)
	}
	if q.FarmCases.Crashed > 0 {
		fmt.Fprintf(w, "Crashed: %d case(s), their meta-job died under them MAX_CRASHES=%d times; resubmit and -auto leave them out ('farm resubmit --crashed' runs them)\n", q.FarmCases.Crashed, q.MaxCrashes)
	}
	if q.CoreHours.Allocated > 0 {
		fmt.Fprintln(w, q.CoreHours)
	}
	if q.Use != nil {
		fmt.Fprintln(w, *q.Use)
	}
	for _, a := range q.Advice {
		fmt.Fprintln(w, a)
	}
	for _, b := range q.Busy {
		fmt.Fprintln(w, b)
	}
	return nil
}

func percent(c CaseCounts) string {
	if c.Total == 0 {
		return "0%"
	}
	return fmt.Sprintf("%d/%d (%.1f%%)", c.processed(), c.Total, 100*float64(c.processed())/float64(c.Total))
}

func rateETA(q Query) string {
	s := fmt.Sprintf("%.1f cases/min", q.PerMinute)
	switch {
	case q.ETASeconds >= 0:
		s += ", ETA " + fmtDuration(time.Duration(q.ETASeconds)*time.Second)
	case !q.Active():
		s += ", no job active"
	default:
		s += ", ETA unknown"
	}
	return s
}

func fmtDuration(d time.Duration) string {
	d = d.Round(time.Second)
	if d >= 24*time.Hour {
		days := d / (24 * time.Hour)
		return fmt.Sprintf("%dd%s", days, (d - days*24*time.Hour).String())
	}
	return d.String()
}

// progressBar renders one line: a bar of the farm's processed cases, the
// jobs, the throughput and the ETA.
func progressBar(q Query, width int) string {
	frac := 0.0
	if q.FarmCases.Total > 0 {
		frac = float64(q.FarmCases.processed()) / float64(q.FarmCases.Total)
	}
	fill := int(frac * float64(width))
	bar := strings.Repeat("#", fill) + strings.Repeat("-", width-fill)
	unfit := ""
	if q.FarmCases.Unfit > 0 {
		unfit = fmt.Sprintf("  %d unfit", q.FarmCases.Unfit)
	}
	return fmt.Sprintf("[%s] %5.1f%%  %d/%d cases  %d failed%s  %d jobs running, %d queued  %s",
		bar, 100*frac, q.FarmCases.processed(), q.FarmCases.Total, q.FarmCases.Failed, unfit,
		q.Jobs.Running, q.Jobs.Queued, rateETA(q))
}

// WatchOptions are how Watch (and Wait, with a Bar) draw the progress bar.
type WatchOptions struct {
	Interval time.Duration // between refreshes
	TTY      bool          // w is a terminal: redraw the bar in place
	Columns  int           // the terminal's width (0: unknown, 80)
}

// bar draws the progress bar on a terminal, in place on one line cut to its
// width (no wrapping, so no scrolling), or as plain lines elsewhere.
type bar struct {
	w     io.Writer
	opt   WatchOptions
	drawn bool // a line is on the terminal without its newline
}

func (b *bar) draw(q Query) {
	if !b.opt.TTY {
		fmt.Fprintln(b.w, progressBar(q, 30))
		return
	}
	cols := b.opt.Columns
	if cols <= 0 {
		cols = 80
	}
	fmt.Fprintf(b.w, "\r\033[K%s", fitBar(q, cols-1))
	b.drawn = true
}

// fitBar is the progress bar in at most cols columns: a shorter bar, then
// without the failed cases and the jobs, keeping done/total, the rate and
// the ETA as long as they fit; cut as a last resort.
func fitBar(q Query, cols int) string {
	for _, w := range []int{30, 20, 10} {
		if l := progressBar(q, w); utf8.RuneCountInString(l) <= cols {
			return l
		}
	}
	c := q.FarmCases
	frac := 0.0
	if c.Total > 0 {
		frac = float64(c.processed()) / float64(c.Total)
	}
	fill := int(frac * 10)
	l := fmt.Sprintf("[%s%s] %5.1f%%  %d/%d  %s", strings.Repeat("#", fill), strings.Repeat("-", 10-fill), 100*frac, c.processed(), c.Total, rateETA(q))
	if r := []rune(l); len(r) > cols {
		l = string(r[:max(cols, 0)])
	}
	return l
}

// done ends the bar's line, so that what follows starts on a line of its
// own.
func (b *bar) done() {
	if b.drawn {
		fmt.Fprintln(b.w)
		b.drawn = false
	}
}

// Watch redraws the progress bar every interval until no job of the farm is
// active, or ctx ends (an *InterruptedError: Ctrl-C). On a terminal the
// line is redrawn in place. Each refresh costs one scheduler query per
// backend and reads only what the status files gained since the last one
// (status.Tail).
func (f *Farm) Watch(ctx context.Context, w io.Writer, opt WatchOptions) error {
	b := &bar{w: w, opt: opt}
	defer b.done()
	tail := status.NewTail(f.Path(layout.StatusDir))
	for {
		recs, err := f.Jobs()
		if err != nil {
			return err
		}
		infos, err := f.jobInfos(ctx, recs)
		if err != nil {
			return err
		}
		q, err := f.watchQuery(ctx, tail, time.Now(), recs, infos)
		if err != nil {
			return err
		}
		b.draw(q)
		if !q.Active() {
			return nil
		}
		select {
		case <-ctx.Done():
			return &InterruptedError{What: "the farm's jobs go on; 'farm query' shows them", Err: ctx.Err()}
		case <-time.After(opt.Interval):
		}
	}
}

// watchQuery is Query from a Tail and what the backends said of the jobs
// recs (infos): the current run's counts are exact, and
// farm-wide a case succeeds at most once; the failed, interrupted, unfit
// and running cases are the current run's, which holds every case not yet
// succeeded.
func (f *Farm) watchQuery(ctx context.Context, tail *status.Tail, now time.Time, recs []JobRecord, infos map[string]backend.JobInfo) (Query, error) {
	var q Query
	st, err := f.readState(ctx)
	if err != nil {
		return q, err
	}
	since := now.Add(-rateWindow)
	tc, err := tail.Refresh(func(id string) bool { return runsCases(infos[id].State) }, float64(since.Unix()))
	if err != nil {
		return q, err
	}
	q.Run = st.Run
	q.Jobs = countJobs(recs, infos)
	run := status.Counts{}
	if c := tc.Runs[st.Run]; c != nil {
		run = *c
	}
	q.RunCases = CaseCounts{Total: st.Cases, Succeeded: run.Succeeded, Failed: run.Failed, Interrupted: run.Interrupted, TimedOut: run.TimedOut,
		Unfit: run.Unfit, Running: run.Running, Left: max(0, st.Cases-st.Claimed)}
	q.FarmCases = CaseCounts{Total: st.Total, Succeeded: tc.Succeeded, Failed: run.Failed, Interrupted: run.Interrupted, TimedOut: run.TimedOut, Unfit: run.Unfit, Running: run.Running}
	q.FarmCases.Left = max(0, st.Total-tc.Succeeded-run.Failed-run.Interrupted-run.TimedOut-run.Unfit-run.Running)
	first := 0.0
	if tc.First > 0 {
		first = tc.First
	}
	q.PerMinute, q.ETASeconds = rate(q, tc.Recent, first, now)
	return q, nil
}
