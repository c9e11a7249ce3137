package farm

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/farm-hpc/farm/atomicfile"
	"github.com/farm-hpc/farm/casetable"
	"github.com/farm-hpc/farm/layout"
	"github.com/farm-hpc/farm/status"
	"github.com/farm-hpc/farm/tablefmt"
)

// Messages of resubmit and the auto-resubmit job, as META users know them.
const (
	msgJobsActive  = "Jobs are still running/queued; cannot resubmit"
	msgNothingLeft = "No failed/unfinished jobs; nothing to resubmit"
	msgOnlyFailed  = "Only failed cases left; cannot auto-resubmit; exiting"
)

// ErrNothingLeft is returned by Resubmit when every case succeeded.
var ErrNothingLeft = errors.New(msgNothingLeft)

// Resubmit starts a new run over the cases that failed, were interrupted,
// were unfit or never ran (every case that did not succeed), farm-wide
// over every earlier run, or over those opt.Select chooses: it writes them with their
// original IDs to table.dat_ and submits opt.N jobs over it. It refuses while
// any job of the farm (other than opt.Self) is pending or running.
func (f *Farm) Resubmit(ctx context.Context, opt SubmitOptions) error {
	store := f.Store()
	state, err := store.Read(ctx)
	store.Close()
	if errors.Is(err, casetable.ErrNoState) {
		if f.hasRecords() {
			return errStateLost
		}
		return Userf("this farm was never submitted: use 'farm submit N' first")
	}
	if err != nil {
		return stateErr(err)
	}
	active, recs, _, err := f.activeAndAll(ctx, opt.Self)
	if err != nil {
		return err
	}
	if len(active) > 0 {
		return Userf("%s (%d job(s) of the farm are pending or running: see 'farm list'; 'farm wait' or 'farm kill' first)", msgJobsActive, len(active))
	}
	// The state was read before the job records, and the active jobs are
	// those of this one reading of the records. A run with cases left to
	// claim and no job recorded was started by a command that is still
	// submitting its jobs (it records them once submitted): starting the
	// next run from it would start two runs, the first of which would never
	// run a case.
	if state.Claimed < state.Cases && !runHasJobs(recs, state.Run) {
		return Userf("run %d was started moments ago by another 'farm submit' or 'farm resubmit' (or the -auto job), which has not recorded its jobs yet: nothing was submitted; see 'farm list' (if that command was killed before it recorded any job, 'farm repair --abandoned' closes run %d)", state.Run, state.Run)
	}
	// The backend given, config's BACKEND, or the one the farm ran on.
	choice := f.chooseBackend(&opt, true)
	su, err := f.setUp(ctx, opt, true)
	if err != nil {
		return choice.err(err)
	}
	su.record = choice.record
	sum, err := f.Summary(ctx)
	if err != nil {
		return err
	}
	sel := opt.Select
	sel.MaxCrashes = f.Config.MaxCrashes
	keep := func(id int64) bool { return sel.keeps(sum.Get(id)) }
	n, by, crashedOut, tries, err := f.countChosen(sum, sel)
	if err != nil {
		return err
	}
	if n == 0 {
		if crashedOut > 0 {
			by := ""
			if !sel.IsZero() {
				by = " chosen by " + sel.String()
			}
			return Userf("nothing to resubmit%s: the %d case(s) left are crashed (their meta-job died under them MAX_CRASHES=%d times); 'farm resubmit --crashed' runs them again, or raise MAX_CRASHES in %s",
				by, crashedOut, sel.MaxCrashes, layout.Config)
		}
		if sel.IsZero() {
			return ErrNothingLeft
		}
		return fmt.Errorf("%w (no case is chosen by %s)", ErrNothingLeft, sel)
	}
	return f.launchResubmit(ctx, su, opt, state, n, keep, sel.chose(n, by, crashedOut), tries.String())
}

// priorAttempts counts the attempts, over every run so far, of the cases a
// resubmit chose: what farm.log says of them.
type priorAttempts struct {
	never, once, more, most int
}

func (a *priorAttempts) add(n int) {
	switch {
	case n == 0:
		a.never++
	case n == 1:
		a.once++
	default:
		a.more++
	}
	a.most = max(a.most, n)
}

// String: "attempts so far: 2 never started, 40 once, 12 more than once (at most 4 times)".
func (a priorAttempts) String() string {
	var parts []string
	if a.never > 0 {
		parts = append(parts, fmt.Sprintf("%d never started", a.never))
	}
	if a.once > 0 {
		parts = append(parts, fmt.Sprintf("%d once", a.once))
	}
	if a.more > 0 {
		parts = append(parts, fmt.Sprintf("%d more than once (at most %d times)", a.more, a.most))
	}
	return "attempts so far: " + strings.Join(parts, ", ")
}

// countChosen counts, writing nothing, the cases of table.dat that sel
// chooses (by Selection.label), and those it leaves out only for the crash
// limit; an ID of sel's that the table does not have is an error.
func (f *Farm) countChosen(sum *status.Summary, sel Selection) (n int, by map[string]int, crashedOut int, tries priorAttempts, err error) {
	by = map[string]int{}
	unlimited := sel
	unlimited.MaxCrashes = 0
	hit := make([]bool, len(sel.Cases))
	n, err = tablefmt.CountKept(f.Path(layout.Table), func(id int64) bool {
		sel.mark(id, hit)
		c := sum.Get(id)
		if sel.keeps(c) {
			by[sel.label(c)]++
			tries.add(c.Attempts)
			return true
		}
		if unlimited.keeps(c) {
			crashedOut++ // chosen but for the crash limit
		}
		return false
	})
	if err != nil {
		return 0, nil, 0, tries, tableErr(err)
	}
	return n, by, crashedOut, tries, sel.missing(hit, layout.Table)
}

// launchResubmit launches the run after state's, over the n cases of
// table.dat that keep keeps, written to a table of its own once nothing can
// refuse it (launchSetup.prepare). chose says what was chosen, tries the
// chosen cases' attempts so far; farm.log gets both once the run has
// started (even if a submission then fails).
func (f *Farm) launchResubmit(ctx context.Context, su launchSetup, opt SubmitOptions, state casetable.State, n int, keep func(int64) bool, chose, tries string) error {
	// The new run's table gets a name of its own, so that two resubmits
	// racing never write one file; the one whose run starts also leaves it
	// as table.dat_, as META does.
	// (Not by PID alone: processes on two hosts, or in two containers,
	// may have the same PID.)
	runTable := privateTable(state.Run + 1)
	su.prepare = func() error {
		m, src, err := tablefmt.RebuildSource(f.Path(layout.Table), f.Path(runTable), keep)
		if err == nil && m != n {
			err = Userf("%s changed while this command ran (%d cases to run, then %d): nothing was submitted; run it again", layout.Table, n, m)
		}
		if err == nil {
			err = tablefmt.WriteSource(f.Path(runTable), src)
		}
		return tableErr(err)
	}
	su.announce = fmt.Sprintf("Resubmitting %s (%s).", chose, layout.RetryTable)
	su.logLine = fmt.Sprintf("resubmit: run %d runs %s; %s", state.Run+1, chose, tries)
	if err := f.launch(ctx, su, opt, runSpec{base: state.Gen, chain: state.Chain, run: state.Run + 1, table: runTable, cases: n}); err != nil {
		f.removeRunTable(ctx, runTable)
		return err
	}
	atomicfile.Link(f.Path(runTable), f.Path(layout.RetryTable))
	return nil
}

// jobEnds says how run's meta-jobs ended, counted by the reason each one's
// last record names (metajob's stop: no-cases, no-runtime, signal, ...),
// from the newest incarnation of each: "6 no-cases, 1 no-runtime, 1 with no
// last line"; "" if the run has none.
func jobEnds(sum *status.Summary, run int) string {
	newest := map[string]status.Job{}
	for _, j := range sum.Jobs {
		if o, ok := newest[j.ID]; j.Run == run && (!ok || j.Restart > o.Restart) {
			newest[j.ID] = j
		}
	}
	n := map[string]int{}
	for _, j := range newest {
		switch {
		case j.QuitWhy != "":
			n[j.QuitWhy]++
		case j.Quit != "":
			n["exited"]++
		default:
			n["with no last line"]++ // killed, lost with its node, or still running
		}
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(n)) {
		parts = append(parts, fmt.Sprintf("%d %s", n[k], k))
	}
	return strings.Join(parts, ", ")
}

// runHasJobs reports whether a meta-job (or SIMPLE job) of run is recorded.
func runHasJobs(recs []JobRecord, run int) bool {
	for _, r := range recs {
		if r.Run == run && (r.Kind == kindMeta || r.Kind == kindSimple) {
			return true
		}
	}
	return false
}

// Autojob is the body of the extra job that -auto and final.sh add: it runs
// once the run's meta-jobs have ended and decides what comes next. env is
// the job's environment; self its ID. Every decision goes to farm.log.
func (f *Farm) Autojob(ctx context.Context, env JobEnv, self string) error {
	run := env.Run
	opt := SubmitOptions{N: env.AutoN, Auto: env.Auto, Args: env.AutoArgs, Backend: env.Backend, Self: self, Environ: env.Environ}
	if opt.N == 0 {
		opt.N = 1
	}
	say := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		f.Log("autojob (run %d): %s", run, msg)
		fmt.Fprintln(f.Out, msg)
	}
	sum, err := f.Summary(ctx)
	if err != nil {
		return err
	}
	f.logRunEnd(sum, run)
	p, err := f.progress(sum)
	if err != nil {
		return err
	}
	if p.Done() {
		if !f.hasFinal() {
			say("All %d cases succeeded; nothing left to do.", p.Total)
			return nil
		}
		ids, err := f.submitFinal(ctx, opt, run)
		if err != nil {
			say("All %d cases succeeded, but submitting %s failed: %v", p.Total, layout.FinalScript, err)
			return err
		}
		say("All %d cases succeeded; submitted %s as job %s.", p.Total, layout.FinalScript, strings.Join(ids, " "))
		return nil
	}
	left := fmt.Sprintf("%d failed, %d interrupted, %s%d never ran, %d unfit", p.Failed, p.Interrupted, timedOutPart(p.TimedOut), p.NeverRan, p.Unfit)
	crashed := f.crashed(sum)
	if crashed.all > 0 {
		left += fmt.Sprintf("; %d of them crashed", crashed.all)
	}
	if !opt.Auto {
		say("Not every case succeeded (%s); %s not submitted.", left, layout.FinalScript)
		return nil
	}
	if p.Interrupted+p.NeverRan+p.Unfit == crashed.rerun {
		// What a resubmit would run again are failures (and cases that
		// timed out, which would time out again) only, or nothing:
		// -auto ends here, whatever the crashes.
		if crashed.all > 0 {
			failed := p.Failed - crashed.failed
			how := "'farm resubmit --crashed' runs them again"
			if failed > 0 {
				how = "'farm resubmit --failed' or 'farm resubmit --crashed' runs them again"
			}
			say("Only failed or crashed cases left (%d failed, %d crashed: their meta-job died under them MAX_CRASHES=%d times); cannot auto-resubmit; exiting. %s.",
				failed, crashed.all, f.Config.MaxCrashes, how)
			return nil
		}
		if p.TimedOut > 0 {
			say("%s (%d failed, %d timed out: 'farm resubmit --timed-out' runs them again, with a longer time= or CASE_TIME_LIMIT).", msgOnlyFailed, p.Failed, p.TimedOut)
			return nil
		}
		say("%s (%d failed).", msgOnlyFailed, p.Failed)
		return nil
	}
	if c := sum.RunCounts[run]; c == nil || c.Succeeded == 0 {
		// Also what stops a case that fits no job from being taken and
		// left unfit run after run.
		say("No case succeeded in run %d; cannot auto-resubmit; exiting (%s).", run, left)
		return nil
	}
	say("%d case(s) left (%s); resubmitting with N=%d.", p.Failed+p.Interrupted+p.TimedOut+p.NeverRan+p.Unfit, left, opt.N)
	if err := f.Resubmit(ctx, opt); err != nil {
		say("Resubmission failed: %v", err)
		return err
	}
	return nil
}

// logRunEnd says in farm.log how run's meta-jobs ended, and how many of
// its cases timed out, if some did.
func (f *Farm) logRunEnd(sum *status.Summary, run int) {
	if ends := jobEnds(sum, run); ends != "" {
		f.Log("autojob (run %d): its meta-jobs ended: %s", run, ends)
	}
	if c := sum.RunCounts[run]; c != nil && c.TimedOut > 0 {
		f.Log("autojob (run %d): %d case(s) timed out: they ran past their time limit (time=, CASE_TIME_LIMIT)", run, c.TimedOut)
	}
}

// crashCount counts the crashed cases of a farm (Selection.isCrashed).
type crashCount struct {
	all    int64 // every crashed case
	rerun  int64 // those interrupted or unfit: what a resubmit would run but for the crash limit
	failed int64 // those that failed last
}

// crashed counts the crashed cases of sum, by the farm's MAX_CRASHES.
func (f *Farm) crashed(sum *status.Summary) crashCount {
	c := sum.Crashed(f.Config.MaxCrashes)
	return crashCount{all: c.Interrupted + c.Unfit + c.Failed + c.TimedOut, rerun: c.Interrupted + c.Unfit, failed: c.Failed}
}

// submitFinal submits final.sh once, on opt's backend.
func (f *Farm) submitFinal(ctx context.Context, opt SubmitOptions, run int) ([]string, error) {
	recs, err := f.Jobs()
	if err != nil {
		return nil, err
	}
	for _, r := range recs {
		if r.Kind == kindFinal {
			return nil, fmt.Errorf("%s was already submitted as job %s", layout.FinalScript, r.ID)
		}
	}
	be, err := f.openBackend(ctx, opt.Backend)
	if err != nil {
		return nil, err
	}
	min, err := minRunTime(opt.Environ, be.Capabilities())
	if err != nil {
		return nil, err
	}
	if err := f.checkFinalRunTime(be.Capabilities().Scripts, min); err != nil {
		return nil, err
	}
	limit, _, err := scriptTimeLimit(f.Path(layout.FinalScript), be.Capabilities().Scripts)
	if err != nil {
		return nil, err
	}
	req, err := f.jobRequest(be, JobEnv{Run: run}, opt.Environ)
	if err != nil {
		return nil, err
	}
	req.Script, req.Name, req.Count, req.TimeLimit = f.Path(layout.FinalScript), jobName(f, "final"), 1, limit
	return f.submitJobs(ctx, be, req, run, kindFinal, "submit", "")
}
