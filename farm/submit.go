package farm

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/casetable"
	"github.com/farm-hpc/farm/layout"
	"github.com/farm-hpc/farm/status"
	"github.com/farm-hpc/farm/tablefmt"
)

// SubmitOptions are the arguments of farm submit and farm resubmit.
type SubmitOptions struct {
	N       int      // -1 (SIMPLE mode: one job per case) or the number of meta-jobs
	Auto    bool     // add the auto-resubmit job
	Args    []string // extra sbatch arguments
	Backend string   // an engine's name; "" or "auto" for the default
	Self    string   // the auto-resubmit job calling, ignored as an active job
	// Environ is the submitting environment, which every job (and case)
	// gets: os.Environ() of farm submit, or the -auto job's.
	Environ []string
	// Confirm, if set, is asked before more than ConfirmAbove jobs are
	// submitted, once nothing else can refuse them and before anything
	// is written; an error refuses them. The CLI asks the user; the -auto
	// job has none.
	Confirm func(jobs int) error
	Yes     bool // --yes: Confirm is not asked
	// Select is what a resubmit runs again (--failed, --cases, ...); the
	// zero Selection: every case that did not succeed.
	Select Selection
}

// ConfirmAbove is the number of jobs above which submit and resubmit ask
// "Are you sure?" (SubmitOptions.Confirm), as META does.
const ConfirmAbove = 1000

// ParseN checks the first argument of submit/resubmit.
func ParseN(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || (n < 1 && n != -1) {
		return 0, Userf("Wrong first argument: %s (should be a positive integer or -1) ; exiting", s)
	}
	return n, nil
}

// activeJobs returns the farm's jobs that are pending or running, but for
// the jobs in exclude.
func (f *Farm) activeJobs(ctx context.Context, exclude ...string) ([]JobRecord, map[string]backend.JobInfo, error) {
	active, _, infos, err := f.activeAndAll(ctx, exclude...)
	return active, infos, err
}

// activeAndAll is activeJobs that also returns every job record, as read
// for it.
func (f *Farm) activeAndAll(ctx context.Context, exclude ...string) (active, all []JobRecord, infos map[string]backend.JobInfo, err error) {
	all, err = f.Jobs()
	if err != nil {
		return nil, nil, nil, err
	}
	infos, err = f.jobInfos(ctx, all)
	if err != nil {
		return nil, nil, nil, err
	}
	for _, r := range all {
		if infos[r.ID].State.Active() && !slices.Contains(exclude, r.ID) {
			active = append(active, r)
		}
	}
	return active, all, infos, nil
}

// jobInfos asks each backend once for the states of its jobs.
func (f *Farm) jobInfos(ctx context.Context, recs []JobRecord) (map[string]backend.JobInfo, error) {
	byBackend := map[string][]string{}
	for _, r := range recs {
		byBackend[r.Backend] = append(byBackend[r.Backend], r.ID)
	}
	out := map[string]backend.JobInfo{}
	for name, ids := range byBackend {
		b, err := f.openBackend(ctx, name)
		var unknown *backend.UnknownError
		if errors.As(err, &unknown) {
			return nil, Userf("%s records job(s) %s on backend %q, which farm does not know: fix the records (RUN BACKEND KIND JOBID, BACKEND one of %s)", f.Path(layout.MiscDir, layout.JobRecords), strings.Join(ids, " "), name, strings.Join(unknown.Known, ", "))
		}
		if err != nil {
			return nil, err
		}
		infos, err := b.Jobs(ctx, ids)
		if err != nil {
			return nil, err
		}
		for id, in := range infos {
			out[id] = in
		}
	}
	return out, nil
}

// Submit starts the farm's first run (or adds meta-jobs to a run whose jobs
// are still active).
func (f *Farm) Submit(ctx context.Context, opt SubmitOptions) error {
	choice := f.chooseBackend(&opt, false)
	store := f.Store()
	state, err := store.Read(ctx)
	store.Close()
	if errors.Is(err, casetable.ErrNoState) {
		state.Gen = -1
		if f.hasRecords() {
			return errStateLost
		}
	} else if err != nil {
		return stateErr(err)
	}
	if state.Run > 0 {
		active, _, err := f.activeJobs(ctx)
		if err != nil {
			return err
		}
		if len(active) == 0 {
			return Userf("this farm was already submitted (run %d): use 'farm resubmit N' to run what is left, or 'farm clean --yes' to start over", state.Run)
		}
		if (opt.N == -1) != state.Simple {
			return Userf("run %d is still active in %s mode; add jobs in the same mode or wait for it to end", state.Run, modeName(state.Simple))
		}
		su, err := f.setUp(ctx, opt, false)
		if err != nil {
			return choice.err(err)
		}
		su.record = choice.record
		su.announce = fmt.Sprintf("Run %d is active: adding jobs to it.", state.Run)
		return f.launch(ctx, su, opt, runSpec{base: state.Gen, chain: state.Chain, run: state.Run, table: state.Table})
	}
	// Everything is checked before table.dat is numbered (in launch,
	// once nothing can refuse): a refused submit changes nothing.
	su, err := f.setUp(ctx, opt, true)
	if err != nil {
		return choice.err(err)
	}
	su.record = choice.record
	info, src, err := tablefmt.ValidateSource(f.Path(layout.Table), f.tableNumbering(false))
	if err != nil {
		return tableErr(err)
	}
	if !info.Numbered {
		if err := f.checkNumberable(); err != nil {
			return err
		}
	}
	// Run 1 reads a private copy of table.dat, as later runs read theirs:
	// an edit of table.dat during the run never changes what it claims.
	// What is numbered, then copied, is the table validated (its hash).
	runTable := privateTable(1)
	su.prepare = func() error {
		want := src.Hash
		if !info.Numbered {
			if want, err = f.numberTable(info, want); err != nil {
				return err
			}
		}
		return f.snapshotTable(runTable, want)
	}
	err = f.launch(ctx, su, opt, runSpec{base: state.Gen, chain: state.Chain, run: 1, table: runTable, cases: info.Cases, maxID: info.MaxID})
	if err != nil {
		f.removeRunTable(ctx, runTable)
	}
	return err
}

// privateTable is the name of a new run's table, relative to the farm:
// a name of its own, so that two commands racing never write one file.
// (Not by PID alone: processes on two hosts, or in two containers, may
// have the same PID.)
func privateTable(run int) string {
	return fmt.Sprintf("%s/table.run%d.%d.%x", layout.MiscDir, run, os.Getpid(), rand.Uint32())
}

// errTableChanged is the error of a submit whose table.dat changed
// while it ran.
var errTableChanged = Userf("%s changed while this command ran: nothing was submitted; run it again", layout.Table)

// snapshotTable writes the first run's private table runTable: a copy of
// table.dat (numbered) whose SHA-256 is want, that of the table validated
// and numbered, with the record of what it was made from
// (tablefmt.Source).
func (f *Farm) snapshotTable(runTable, want string) error {
	if err := f.EnsureDirs(); err != nil {
		return f.writeErr(err)
	}
	perm := os.FileMode(0o644)
	if fi, err := os.Stat(f.Path(layout.Table)); err == nil {
		perm = fi.Mode().Perm()
	}
	_, src, err := tablefmt.Snapshot(f.Path(layout.Table), f.Path(runTable), perm, want)
	if errors.Is(err, tablefmt.ErrChanged) {
		return errTableChanged
	}
	if err != nil {
		return f.writeErr(tableErr(err))
	}
	if err := tablefmt.WriteSource(f.Path(runTable), src); err != nil {
		os.Remove(f.Path(runTable))
		return f.writeErr(err)
	}
	return nil
}

// removeRunTable removes a private run table (and its source record)
// that a launch which failed wrote, unless its run started.
func (f *Farm) removeRunTable(ctx context.Context, runTable string) {
	if st, err := f.readState(ctx); err == nil && st.Table == runTable {
		return
	}
	os.Remove(f.Path(runTable))
	os.Remove(tablefmt.SourcePath(f.Path(runTable)))
}

// checkNumberable refuses an unnumbered table.dat that farm would have to
// number through a symbolic link out of the farm directory: farm never
// writes there.
func (f *Farm) checkNumberable() error {
	to, outside, err := f.linkedOutside(layout.Table)
	if err != nil {
		return tableErr(err)
	}
	if !outside {
		return nil
	}
	return Userf("%s is a symbolic link to %s, outside the farm directory, and is not numbered: farm numbers a table by rewriting it and never writes outside the farm directory; replace the link by a copy (cp --remove-destination %s %s), or number the table yourself ('1 command', '2 command', ... on its case lines)", layout.Table, to, shellQuote(to), layout.Table)
}

// linkedOutside reports whether the farm's file name is a symbolic link
// to a file outside the farm directory, which farm never writes, and its
// target (name itself when it is no link).
func (f *Farm) linkedOutside(name string) (to string, outside bool, err error) {
	fi, err := os.Lstat(f.Path(name))
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		return f.Path(name), false, nil
	}
	if to, err = filepath.EvalSymlinks(f.Path(name)); err != nil {
		return "", false, err
	}
	dir, err := filepath.EvalSymlinks(f.Dir)
	if err != nil {
		return "", false, err
	}
	rel, err := filepath.Rel(dir, to)
	return to, err != nil || rel == ".." || strings.HasPrefix(rel, "../"), nil
}

// shellQuote quotes s for a POSIX shell, if it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+=:,@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// numberTable numbers table.dat, which info describes and whose SHA-256
// was want when it was validated, keeping the original as table.dat.orig;
// it returns the SHA-256 of the numbered table. A table.dat that is a
// symbolic link is numbered at its target, in the target's directory
// (checkNumberable has made sure that is in the farm directory).
func (f *Farm) numberTable(info tablefmt.Info, want string) (string, error) {
	sum, err := tablefmt.NumberChecked(f.Path(layout.Table), f.Path(layout.Table+".orig"), want)
	if errors.Is(err, tablefmt.ErrChanged) {
		return "", errTableChanged
	}
	if err != nil {
		if to, lerr := filepath.EvalSymlinks(f.Path(layout.Table)); lerr == nil && to != f.Path(layout.Table) && (errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS)) {
			return "", Userf("%v: %s is a symbolic link to %s, which farm numbers in place (in its own directory); make that directory writable, or number the table yourself ('1 command', '2 command', ... on its case lines)", err, layout.Table, to)
		}
		return "", f.writeErr(tableErr(err))
	}
	fmt.Fprintf(f.Out, "Numbered the %d cases of %s (original kept as %s.orig).\n", info.Cases, layout.Table, layout.Table)
	if n := info.NotIDs; n != nil {
		fmt.Fprintf(f.warnings(), "farm: note: %s's lines start with numbers that are not 1, 2, 3, ... (line %d starts with %q where case %d would have %d), so they are not case IDs (META's rule): farm numbered every line and kept those numbers as the cases' first parameter (case 1's COMM is its whole line). If they are your case IDs: 'farm kill', 'mv %s.orig %s', add the line TABLE_IDS=1 to config, 'farm clean --yes', then submit again.\n",
			layout.Table, n.Line, n.Field, n.Want, n.Want, layout.Table, layout.Table)
	}
	return sum, nil
}

// tableNumbering is how table.dat's first fields are read: as case IDs
// once the farm has run (submitted: farm numbered table.dat, or took it
// as numbered, and may have appended cases to it since) or when config
// has TABLE_IDS=1; else by META's rule (tablefmt.METARule).
func (f *Farm) tableNumbering(submitted bool) tablefmt.Numbering {
	switch {
	case submitted:
		return tablefmt.HasIDs
	case f.Config.TableIDs:
		return tablefmt.TableIDs
	}
	return tablefmt.METARule
}

// TableNumbering is tableNumbering for a command that does not know
// whether the farm has run: it has if its claim state has a run, or
// there are records of cases.
func (f *Farm) TableNumbering(ctx context.Context) tablefmt.Numbering {
	st, err := f.readState(ctx)
	return f.tableNumbering((err == nil && st.Run > 0) || f.hasRecords())
}

func modeName(simple bool) string {
	if simple {
		return "SIMPLE (-1)"
	}
	return "META"
}

// tableErr turns table problems into user errors.
func tableErr(err error) error {
	var le *tablefmt.LineError
	if errors.As(err, &le) || errors.Is(err, tablefmt.ErrEmptyTable) {
		return &UserError{Msg: err.Error()}
	}
	if os.IsNotExist(err) {
		return Userf("%s is missing: put one case (command line) per line in %s", layout.Table, layout.Table)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) && filepath.Base(pe.Path) == layout.Table {
		return Userf("%s cannot be read (%v): make it a file with one case (command line) per line", layout.Table, pe.Err)
	}
	return err
}

// runSpec is the run launch starts or adds jobs to.
type runSpec struct {
	// base is the generation of the claim state the caller decided on:
	// if the state has moved on since (another submit or resubmit started
	// a run, or farm add added cases), nothing is started.
	base  int64
	chain string // the chain base is of (casetable.State.Chain)
	run   int
	table string // the table the run is over
	cases int    // the cases of table; 0: adding jobs to the active run
	maxID int64  // a first run: table.dat's largest ID (0: unchanged)
	jobs  int    // the meta-jobs it is started for: how many lanes its claims get (casetable.LanesFor)
}

// launch starts the run nr (or adds jobs to it, when nr.cases is 0). What
// may refuse comes first (NJOBS_MAX, the question above ConfirmAbove jobs),
// then what writes: su.prepare, the farm's directories, the run.
func (f *Farm) launch(ctx context.Context, su launchSetup, opt SubmitOptions, nr runSpec) error {
	simple := opt.N == -1
	count := opt.N
	if simple {
		// One job per case, or per NWHOLE cases in WHOLE_NODE mode (as
		// META: each of a job's NWHOLE loops runs one case). Adding to an
		// active SIMPLE run: one job per unclaimed case is unknown; add
		// one.
		n := f.Config.casesAtOnce()
		count = max((nr.cases+n-1)/n, 1)
	}
	capped := ""
	if !simple {
		count, capped = f.capJobs(count, nr.cases)
	}
	extra := 0
	if opt.Auto || f.hasFinal() {
		extra = 1
	}
	if err := f.checkJobsMax(ctx, opt.Self, count, extra); err != nil {
		return err
	}
	if opt.Confirm != nil && !opt.Yes && count > ConfirmAbove {
		if err := opt.Confirm(count); err != nil {
			return err
		}
	}
	if su.prepare != nil {
		if err := su.prepare(); err != nil {
			return err
		}
	}
	if err := f.EnsureDirs(); err != nil {
		return f.writeErr(err)
	}
	hint := ""
	if nr.cases > 0 {
		nr.jobs = count
		var err error
		if hint, err = f.startRun(ctx, nr, simple); err != nil {
			return err
		}
	}
	if su.announce != "" {
		fmt.Fprintln(f.Out, su.announce)
	}
	if capped != "" {
		fmt.Fprintln(f.Out, capped)
	}
	if su.logLine != "" {
		f.Log("%s", su.logLine)
	}
	req, err := f.jobRequest(su.be, JobEnv{Run: nr.run, Simple: simple, RunJobs: count + f.MetaJobsOf(nr.run), ClaimHint: hint}, opt.Environ)
	if err != nil {
		return err
	}
	req.Script, req.Name, req.Count, req.Array, req.Args, req.TimeLimit = f.Path(layout.JobScript), jobName(f, "meta"), count, simple, opt.Args, su.limit
	kind, verb := kindMeta, "submit"
	if simple {
		kind = kindSimple
	}
	if nr.run > 1 {
		verb = "resubmit"
	}
	ids, err := f.submitJobs(ctx, su.be, req, nr.run, kind, verb, "")
	return f.launched(ctx, su, opt, nr, count, extra, ids, err)
}

// capJobs caps n, the meta-jobs asked for a new run of cases cases, at
// the most that can each get a case, as META does: one per case, or per
// NWHOLE cases in WHOLE_NODE mode (where each meta-job runs NWHOLE at
// once). A meta-job that packs several cases into its CPUs (#FARM cpus=)
// may still leave some of them nothing; one per case is the most that
// can all run one. It returns the count, and what to say if it capped it
// ("" if not). Adding jobs to an active run (cases 0) is not capped, nor
// is any run when WAIT_FOR_CASES is set: its meta-jobs wait for cases
// 'farm add' adds.
func (f *Farm) capJobs(n, cases int) (int, string) {
	if cases <= 0 || f.Config.WaitForCases > 0 {
		return n, ""
	}
	at := f.Config.casesAtOnce()
	most := (cases + at - 1) / at
	if n <= most {
		return n, ""
	}
	each := ""
	if at > 1 {
		each = fmt.Sprintf(", %d at once in each meta-job (WHOLE_NODE, NWHOLE=%d)", at, at)
	}
	return most, fmt.Sprintf("%s%s: submitting %s, not %d (more would find no case to run; WAIT_FOR_CASES in config keeps N, for cases 'farm add' adds).",
		plural(cases, "case"), each, plural(most, "meta-job"), n)
}

// plural is "1 case" or "3 cases".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// launched follows the submission of run nr's count jobs, ids of which were
// submitted, err its error: it closes a run that got none, submits the
// -auto/final.sh job (extra), and says what was done.
func (f *Farm) launched(ctx context.Context, su launchSetup, opt SubmitOptions, nr runSpec, count, extra int, ids []string, err error) error {
	closed := false
	if len(ids) == 0 && nr.cases > 0 {
		// The run started, but none of its jobs: close it, so that the next
		// resubmit does not take it for a run whose jobs are being submitted.
		closed = f.closeRun(context.WithoutCancel(ctx), nr.run, nr.table)
	}
	if err == nil {
		f.saySubmitted(su.be, nr.run, count, opt.N == -1, ids)
	}
	if su.record != "" && len(ids) > 0 {
		verb := "submit"
		if nr.run > 1 {
			verb = "resubmit"
		}
		f.sayRecordedBackend(su.be.Name(), fmt.Sprintf("farm %s --backend %s", verb, su.record))
	}
	if err == nil && extra == 1 && nr.cases > 0 && len(ids) > 0 {
		var autoID string
		autoID, err = f.submitAuto(ctx, su.be, opt, nr.run, ids, su.autoLimit)
		if err == nil {
			what := "-auto"
			if !opt.Auto {
				what = layout.FinalScript
			}
			fmt.Fprintf(f.Out, "Submitted the %s job %s: it runs once these jobs end.\n", what, autoID)
		}
	}
	if err != nil && len(ids) > 0 {
		fmt.Fprintf(f.Out, "Submitted before the error (recorded, see 'farm list'): %s\n", strings.Join(ids, " "))
	}
	if err != nil && ctx.Err() != nil {
		return interrupted(ctx, nr.run, len(ids), closed, err)
	}
	return err
}

// interrupted is the error of a launch stopped by Ctrl-C or SIGTERM, in one
// line: n jobs of run were submitted (and recorded), the run was closed if
// none was; err is the submission's error. The submission in flight was let
// finish (submitJobs): if it failed, as a call that timed out does, its
// error says whether a job may have been submitted all the same.
func interrupted(ctx context.Context, run, n int, closed bool, err error) error {
	what := fmt.Sprintf("%d job(s) were submitted before it (see 'farm list')", n)
	if closed {
		what = fmt.Sprintf("no job was submitted and run %d was closed: 'farm resubmit N' runs its cases", run)
	}
	if !errors.Is(err, context.Canceled) {
		what = fmt.Sprintf("%d job(s) were recorded (see 'farm list')", n)
		if closed {
			what = fmt.Sprintf("no job was recorded and run %d was closed (a job submitted all the same finds no case to run): 'farm resubmit N' runs its cases", run)
		}
		what += "; the submission in flight failed: " + err.Error()
	}
	return &InterruptedError{What: what, Err: ctx.Err()}
}

// launchSetup is what is settled before a run starts: the job script's
// run-time, and the backend, which has said it can submit.
type launchSetup struct {
	limit     time.Duration
	autoLimit time.Duration // resubmit_script.sh's, if a new run gets the -auto/final.sh job
	be        backend.Backend
	// prepare, if set, writes what the run needs (numbers table.dat,
	// writes the resubmit's table) once nothing can refuse the launch.
	prepare func() error
	// announce, if set, is said once the run has started: the launch
	// will happen.
	announce string
	// logLine, if set, goes to farm.log then too.
	logLine string
	// record, if set, is the --backend given, written to config's
	// BACKEND once jobs are submitted (backendChoice).
	record string
}

// setUp opens the backend; checks the job script, the arguments and, for
// a new run (newRun) with -auto or final.sh, resubmit_script.sh, reading
// their run-times as the engine does (Capabilities.Scripts); and, if it
// can tell, asks the backend whether it can submit (backend.Preflighter):
// all that can refuse a submission before anything is changed (opening a
// backend writes nothing). It warns, on stderr, of batch-system arguments
// an engine ignores (Capabilities.IgnoresArgs).
func (f *Farm) setUp(ctx context.Context, opt SubmitOptions, newRun bool) (launchSetup, error) {
	be, err := f.openBackend(ctx, opt.Backend)
	if err != nil {
		return launchSetup{}, err
	}
	caps := be.Capabilities()
	rt, err := f.checkSubmission(opt, caps.Scripts)
	if err != nil {
		return launchSetup{}, err
	}
	var auto RunTime
	withAuto := newRun && (opt.Auto || f.hasFinal())
	if withAuto {
		// A run must not start without the -auto/final.sh job it was
		// asked for.
		if auto, err = f.checkAutoScript(caps.Scripts); err != nil {
			return launchSetup{}, err
		}
	}
	min, err := minRunTime(opt.Environ, caps)
	if err != nil {
		return launchSetup{}, err
	}
	if err := checkRunTime(layout.JobScript, rt, min); err != nil {
		return launchSetup{}, err
	}
	if withAuto {
		if err := checkRunTime(layout.ResubmitScript, auto, min); err != nil {
			return launchSetup{}, err
		}
		// final.sh's run-time, if it has one, is checked now rather than
		// by the -auto job at the run's end.
		if err := f.checkFinalRunTime(caps.Scripts, min); err != nil {
			return launchSetup{}, err
		}
	}
	if p, ok := be.(backend.Preflighter); ok {
		if err := p.Preflight(ctx); err != nil {
			return launchSetup{}, err
		}
	}
	if caps.IgnoresArgs && len(opt.Args) > 0 {
		fmt.Fprintf(f.warnings(), "farm: ignored on the %s backend: %s\n", be.Name(), strings.Join(opt.Args, " "))
	}
	return launchSetup{limit: rt.Limit, autoLimit: auto.Limit, be: be}, nil
}

// checkSubmission checks the job script and the arguments before anything
// is submitted, and returns the script's run-time, read as an engine whose
// Capabilities().Scripts are scripts reads it.
func (f *Farm) checkSubmission(opt SubmitOptions, scripts []backend.Script) (RunTime, error) {
	rt, ok, err := ScriptRunTime(f.Path(layout.JobScript), scripts)
	if err != nil {
		return rt, scriptErr(layout.JobScript, err)
	}
	if !ok {
		return rt, missingRunTime(layout.JobScript, scripts, time.Hour)
	}
	if err := scriptRuns(f.Path(layout.JobScript), "metajob"); err != nil {
		return rt, scriptErr(layout.JobScript, err)
	}
	head, err := ReadHead(f.Path(layout.SingleCase))
	if err != nil {
		return rt, scriptErr(layout.SingleCase, err)
	}
	if msg := NotRunnable(f.Path(layout.SingleCase), head); msg != "" {
		return rt, Userf("%s", msg)
	}
	return rt, runTimeArg(opt.Args, scripts)
}

// checkJobsMax refuses count more jobs (and extra for -auto/final.sh) if
// they would take the farm over NJOBS_MAX active jobs; self, the -auto job
// calling, does not count.
func (f *Farm) checkJobsMax(ctx context.Context, self string, count, extra int) error {
	limit := f.Config.NJobsMax
	if limit <= 0 {
		return nil
	}
	active, infos, err := f.activeJobs(ctx, self)
	if err != nil {
		return err
	}
	n := 0 // an active job array counts once per active task
	for _, r := range active {
		n += infos[r.ID].ActiveCount()
	}
	room := limit - n - extra
	if count > room {
		return Userf("NJOBS_MAX=%d in %s: the farm has %d active job(s) and may submit at most %d more now (with %d kept for the -auto/final.sh job); ask for fewer", limit, layout.Config, n, max(room, 0), extra)
	}
	return nil
}

// startRun makes the run nr the current run, if the claim state is still
// at generation nr.base (casetable.Store.StartRun), and returns the start
// hint for its jobs ("" if none).
func (f *Farm) startRun(ctx context.Context, nr runSpec, simple bool) (string, error) {
	store := f.Store()
	defer store.Close()
	store.Log = f.Out
	err := store.StartRun(ctx, casetable.RunSpec{Base: nr.base, Chain: nr.chain, Run: nr.run, Table: nr.table, Simple: simple,
		Cases: int64(nr.cases), MaxID: nr.maxID, Jobs: nr.jobs})
	if errors.Is(err, casetable.ErrMoved) {
		return "", errMovedUser
	}
	if err != nil {
		return "", f.writeErr(stateErr(err))
	}
	return store.Hint(), nil
}

// errMovedUser is startRun's answer when the state moved on since its
// caller read it.
var errMovedUser = Userf("the farm changed while this command ran (another 'farm submit' or 'farm resubmit', or the -auto job, started a run, or 'farm add' added cases): nothing was submitted; see 'farm query'")

// jobRequest is the part of a request that every job of the farm shares:
// its directory, output file and environment — environ (the submitting
// environment) and the FARM_* variables of env, whose Dir, Backend and Bin
// it fills in.
func (f *Farm) jobRequest(be backend.Backend, env JobEnv, environ []string) (backend.SubmitRequest, error) {
	bin, err := os.Executable()
	if err != nil {
		return backend.SubmitRequest{}, err
	}
	env.Dir, env.Backend, env.Bin, env.Cutoff = f.Dir, be.Name(), bin, f.cutoffForJobs()
	return backend.SubmitRequest{
		Dir:     f.Dir,
		Environ: environ,
		Env:     env.farmVars(),
		Output:  func(id string) string { return f.Path(layout.OutputDir, backend.OutputName(be, id)) },
	}, nil
}

// cutoffForJobs is MISC/cutoff's record for FARM_CUTOFF: its line, "none"
// if there is none, "" if it does not read (the jobs read it themselves).
func (f *Farm) cutoffForJobs() string {
	path := f.Path(layout.MiscDir, layout.Cutoff)
	if c, ok := status.ReadCutoff(path); ok {
		return status.FormatCutoff(c)
	}
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return "none"
	}
	return ""
}

// submitJobs submits req on be and records the jobs it got as jobs of kind
// in run — also when the submission failed half-way, so that none is lost
// track of — and logs it to farm.log as verb, with note after the IDs.
//
// Ctrl-C (ctx cancelled) during the submission stops it after the
// scheduler call in flight, which is let finish (backend.Backend.Submit),
// so that the job it submits is recorded here, not lost track of.
func (f *Farm) submitJobs(ctx context.Context, be backend.Backend, req backend.SubmitRequest, run int, kind, verb, note string) ([]string, error) {
	submitted := make(chan struct{})
	said := make(chan struct{})
	go func() {
		defer close(said)
		select {
		case <-ctx.Done():
			fmt.Fprintln(f.Out, "Interrupted: letting the submission in flight end, so that its job is recorded; no further job is submitted.")
		case <-submitted:
		}
	}()
	ids, err := be.Submit(ctx, req)
	close(submitted)
	<-said
	var recs []JobRecord
	for _, id := range ids {
		recs = append(recs, JobRecord{Run: run, Backend: be.Name(), Kind: kind, ID: id})
	}
	if rerr := f.recordJobs(ctx, recs); rerr != nil && err == nil {
		err = rerr
	}
	if err != nil {
		note += fmt.Sprintf(" (failed: %v)", err)
	}
	f.Log("%s: run %d, %d %s job(s) on the %s backend: %s%s", verb, run, len(ids), kind, be.Name(), strings.Join(ids, " "), note)
	return ids, err
}

// saySubmitted tells the user what launch submitted.
func (f *Farm) saySubmitted(be backend.Backend, run, count int, simple bool, ids []string) {
	if simple {
		each := "one case each"
		if n := f.Config.casesAtOnce(); n > 1 {
			each = fmt.Sprintf("%d cases each at once", n)
		}
		fmt.Fprintf(f.Out, "Submitted %d jobs (SIMPLE mode, %s) for run %d on the %s backend", count, each, run, be.Name())
		if len(ids) != count {
			fmt.Fprintf(f.Out, ", as job array(s) %s", strings.Join(ids, " "))
		}
		fmt.Fprintln(f.Out, ".")
		return
	}
	what := "meta-jobs"
	if len(ids) == 1 {
		what = "meta-job"
	}
	fmt.Fprintf(f.Out, "Submitted %d %s for run %d on the %s backend.\n", len(ids), what, run, be.Name())
}

// closeRun leaves nothing to claim in run, which is over table, if it is
// still the current run; it reports whether it closed it.
func (f *Farm) closeRun(ctx context.Context, run int, table string) bool {
	store := f.Store()
	defer store.Close()
	store.Log = f.Out
	err := store.CloseRun(ctx, run, table)
	if err == nil {
		f.Log("run %d closed: none of its jobs was submitted", run)
	} else if !errors.Is(err, casetable.ErrMoved) {
		f.Log("could not close run %d, which has no job: %v", run, err)
	}
	return err == nil
}

func (f *Farm) hasFinal() bool {
	_, err := os.Stat(f.Path(layout.FinalScript))
	return err == nil
}

// jobName names a farm's jobs after its directory, so they can be told apart
// in squeue.
func jobName(f *Farm, kind string) string {
	return "farm-" + filepath.Base(f.Dir) + "-" + kind
}

// checkAutoScript checks resubmit_script.sh, which the -auto/final.sh job
// runs, and returns its run-time, read as an engine whose
// Capabilities().Scripts are scripts reads it.
func (f *Farm) checkAutoScript(scripts []backend.Script) (RunTime, error) {
	rt, ok, err := ScriptRunTime(f.Path(layout.ResubmitScript), scripts)
	if err != nil {
		return rt, scriptErr(layout.ResubmitScript, err)
	}
	if !ok {
		return rt, missingRunTime(layout.ResubmitScript, scripts, 10*time.Minute)
	}
	if err := scriptRuns(f.Path(layout.ResubmitScript), "autojob"); err != nil {
		return rt, scriptErr(layout.ResubmitScript, err)
	}
	return rt, nil
}

// checkFinalRunTime refuses final.sh's run-time, if it has one, as
// checkRunTime does (a final.sh without one runs with the engine's
// default). A farm without final.sh passes.
func (f *Farm) checkFinalRunTime(scripts []backend.Script, min time.Duration) error {
	if !f.hasFinal() {
		return nil
	}
	rt, ok, err := ScriptRunTime(f.Path(layout.FinalScript), scripts)
	if err != nil {
		return scriptErr(layout.FinalScript, err)
	}
	if !ok {
		return nil
	}
	return checkRunTime(layout.FinalScript, rt, min)
}

// submitAuto adds the one extra job (resubmit_script.sh) that runs after the
// run's jobs end: it resubmits what is left (-auto) and submits final.sh
// once every case succeeded. limit is the script's run-time
// (checkAutoScript).
func (f *Farm) submitAuto(ctx context.Context, be backend.Backend, opt SubmitOptions, run int, after []string, limit time.Duration) (string, error) {
	env := JobEnv{Run: run, Auto: opt.Auto, AutoN: opt.N, AutoArgs: opt.Args}
	req, err := f.jobRequest(be, env, opt.Environ)
	if err != nil {
		return "", err
	}
	req.Env = append(req.Env, env.autoVars()...)
	// No opt.Args: the meta-jobs' sbatch arguments are for cases, not for
	// this small job.
	req.Script, req.Name, req.Count, req.After, req.TimeLimit = f.Path(layout.ResubmitScript), jobName(f, "auto"), 1, after, limit
	note := fmt.Sprintf(" (after %d job(s); auto=%t, final.sh=%t)", len(after), opt.Auto, f.hasFinal())
	ids, err := f.submitJobs(ctx, be, req, run, kindAuto, "submit", note)
	if err != nil {
		return "", fmt.Errorf("submitting the -auto/final.sh job: %w", err)
	}
	return ids[0], nil
}

// scriptRuns checks that a job script still has the line that runs
// 'farm VERB', so that jobs which would do nothing are not submitted.
func scriptRuns(path, verb string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "#") && strings.Contains(line, verb) {
			return nil
		}
	}
	return Userf("%s does not run 'farm %s': restore its last line, exec \"${FARM_BIN:-farm}\" %s (see 'farm init' for the template)", filepath.Base(path), verb, verb)
}

// stateErr turns a damaged claim state into advice that works.
func stateErr(err error) error {
	var de *casetable.DamageError
	if errors.As(err, &de) {
		return Userf("%v: run 'farm repair' to rebuild it from the status records (it refuses while jobs of the farm are queued or running)", err)
	}
	return err
}

// errStateLost is Submit's and Resubmit's answer when the claim state is
// missing but the farm has run (hasRecords).
var errStateLost = Userf("the farm's claim state (MISC/chain) is missing but the farm has run before: run 'farm repair' to rebuild it from the status records")

// hasRecords reports whether the farm has run: a status record or a job
// record exists.
func (f *Farm) hasRecords() bool {
	if recs, _ := f.Jobs(); len(recs) > 0 {
		return true
	}
	names, _ := os.ReadDir(f.Path(layout.StatusDir))
	for _, n := range names {
		if _, _, ok := layout.ParseStatusFile(n.Name()); ok {
			return true
		}
	}
	return false
}

// scriptErr turns an error reading the script name into advice.
func scriptErr(name string, err error) error {
	if IsUserError(err) {
		return err
	}
	if os.IsNotExist(err) {
		return Userf("%s is missing: restore it (the template is in any new farm: 'farm init DIR')", name)
	}
	return Userf("%s cannot be read (%v): restore it (the template is in any new farm: 'farm init DIR')", name, unwrapPath(err))
}

// writeErr adds to an error writing in the farm directory (read-only, not
// the user's) what to do.
func (f *Farm) writeErr(err error) error {
	if IsUserError(err) || !(errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS)) {
		return err
	}
	return Userf("%v: farm writes in the farm directory %s; make it writable (chmod u+w), or copy the farm to a directory of yours", err, f.Dir)
}

// MetaJobsOf is the number of meta-jobs the job records give run (0 if
// they cannot be read): those a submission adds to an active run join them;
// a meta-job that was not told (FARM_RUN_JOBS) counts its run's with it.
func (f *Farm) MetaJobsOf(run int) int {
	recs, _ := f.Jobs()
	n := 0
	for _, r := range recs {
		if r.Run == run && r.Kind == kindMeta {
			n++
		}
	}
	return n
}
