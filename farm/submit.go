package farm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/farm-hpc/farm/casetable"
	"github.com/farm-hpc/farm/status"
)

// Backends finds a backend by name for the farm in dir; name "" picks the
// default (Slurm when a controller answers, else local).
type Backends func(ctx context.Context, name, dir string) (Backend, error)

// SubmitOptions are the arguments of farm submit and farm resubmit.
type SubmitOptions struct {
	N       int      // -1 (SIMPLE mode: one job per case) or the number of meta-jobs
	Auto    bool     // add the auto-resubmit job
	Args    []string // extra sbatch arguments
	Backend string   // "", "local" or "slurm"
	Self    string   // the auto-resubmit job calling, ignored as an active job
}

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
func (f *Farm) activeJobs(ctx context.Context, backends Backends, exclude ...string) ([]JobRecord, map[string]JobInfo, error) {
	active, _, infos, err := f.activeAndAll(ctx, backends, exclude...)
	return active, infos, err
}

// activeAndAll is activeJobs that also returns every job record, as read
// for it.
func (f *Farm) activeAndAll(ctx context.Context, backends Backends, exclude ...string) (active, all []JobRecord, infos map[string]JobInfo, err error) {
	all, err = f.Jobs()
	if err != nil {
		return nil, nil, nil, err
	}
	infos, err = f.jobInfos(ctx, backends, all)
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
func (f *Farm) jobInfos(ctx context.Context, backends Backends, recs []JobRecord) (map[string]JobInfo, error) {
	byBackend := map[string][]string{}
	for _, r := range recs {
		byBackend[r.Backend] = append(byBackend[r.Backend], r.ID)
	}
	out := map[string]JobInfo{}
	for name, ids := range byBackend {
		b, err := backends(ctx, name, f.Dir)
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
func (f *Farm) Submit(ctx context.Context, backends Backends, opt SubmitOptions) error {
	store, err := f.Store()
	if err != nil {
		return err
	}
	state, err := store.Read(ctx)
	store.Close()
	if errors.Is(err, casetable.ErrNoState) {
		state.Gen = -1
		if f.hasRecords() {
			return Userf("the farm's claim state (MISC/chain) is missing but the farm has run before: run 'farm repair' to rebuild it from the status records")
		}
	} else if err != nil {
		return stateErr(err)
	}
	if state.Run > 0 {
		active, _, err := f.activeJobs(ctx, backends)
		if err != nil {
			return err
		}
		if len(active) == 0 {
			return Userf("this farm was already submitted (run %d): use 'farm resubmit N' to run what is left, or 'farm clean --yes' to start over", state.Run)
		}
		if (opt.N == -1) != state.Simple {
			return Userf("run %d is still active in %s mode; add jobs in the same mode or wait for it to end", state.Run, modeName(state.Simple))
		}
		fmt.Fprintf(f.Out, "Run %d is active: adding jobs to it.\n", state.Run)
		return f.launch(ctx, backends, opt, state.Gen, state.Run, state.Table, 0, 0)
	}
	info, err := casetable.Prepare(f.Path(Table))
	if err != nil {
		return tableErr(err)
	}
	if !info.Numbered {
		fmt.Fprintf(f.Out, "Numbered the %d cases of %s (original kept as %s.orig).\n", info.Cases, Table, Table)
	}
	return f.launch(ctx, backends, opt, state.Gen, 1, Table, info.Cases, info.MaxID)
}

func modeName(simple bool) string {
	if simple {
		return "SIMPLE (-1)"
	}
	return "META"
}

// tableErr turns table problems into user errors.
func tableErr(err error) error {
	var le *casetable.LineError
	if errors.As(err, &le) || errors.Is(err, casetable.ErrEmptyTable) {
		return &UserError{Msg: err.Error()}
	}
	if os.IsNotExist(err) {
		return Userf("%s is missing: put one case (command line) per line in %s", Table, Table)
	}
	return err
}

// launch submits the jobs of run over table. cases is the number of cases
// in table for a new run, 0 when adding jobs to an active run; maxID is the
// largest ID of table.dat (0: unchanged).
// launch starts run (or adds jobs to it, when cases is 0). base is the
// generation of the claim state the caller decided on: if the state has moved
// on since (another submit or resubmit started a run, or a meta-job claimed),
// nothing is started.
func (f *Farm) launch(ctx context.Context, backends Backends, opt SubmitOptions, base int64, run int, table string, cases int, maxID int64) error {
	limit, ok, err := ScriptTimeLimit(f.Path(JobScript))
	if err != nil {
		return err
	}
	if !ok {
		return Userf("Job runtime sbatch argument (-t or --time) is missing in %s. Exiting (add a line like '#SBATCH -t 0-01:00')", JobScript)
	}
	if err := scriptRuns(f.Path(JobScript), "metajob"); err != nil {
		return err
	}
	for _, a := range opt.Args {
		if a == "-t" || a == "--time" || strings.HasPrefix(a, "--time=") || (strings.HasPrefix(a, "-t") && !strings.HasPrefix(a, "--")) {
			return Userf("the run-time (%s) cannot be given on the command line: set it with '#SBATCH -t' in %s", a, JobScript)
		}
	}
	simple := opt.N == -1
	count := opt.N
	if simple {
		count = cases
		if cases == 0 { // adding to an active SIMPLE run: one job per unclaimed case is unknown; add one
			count = 1
		}
	}
	extra := 0
	if opt.Auto || f.hasFinal() {
		extra = 1
	}
	if cap := f.Config.NJobsMax; cap > 0 {
		active, infos, err := f.activeJobs(ctx, backends, opt.Self)
		if err != nil {
			return err
		}
		n := 0 // an active job array counts once per active task
		for _, r := range active {
			n += infos[r.ID].ActiveCount()
		}
		room := cap - n - extra
		if count > room {
			return Userf("NJOBS_MAX=%d in %s: the farm has %d active job(s) and may submit at most %d more now (with %d kept for the -auto/final.sh job); ask for fewer", cap, ConfigFile, n, max(room, 0), extra)
		}
	}
	be, err := backends(ctx, opt.Backend, f.Dir)
	if err != nil {
		return err
	}
	if err := f.ensureDirs(); err != nil {
		return err
	}
	if cases > 0 {
		store, err := f.Store()
		if err != nil {
			return err
		}
		err = store.Update(ctx, func(st *casetable.State) error {
			if st.Gen != base {
				return errStateMoved
			}
			st.Run, st.Table, st.Simple, st.Offset, st.Claimed, st.Cases = run, table, simple, 0, 0, int64(cases)
			if maxID > 0 { // a first run: table.dat itself
				st.MaxID, st.Total = maxID, int64(cases)
			}
			return nil
		})
		store.Close()
		if errors.Is(err, errStateMoved) {
			return Userf("the farm changed while this command ran (another 'farm submit' or 'farm resubmit', or the -auto job, started a run, or a meta-job claimed a case): nothing was submitted; see 'farm query'")
		}
		if err != nil {
			return stateErr(err)
		}
	}
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	req := SubmitRequest{
		Dir:       f.Dir,
		Script:    f.Path(JobScript),
		Name:      jobName(f, "meta"),
		Count:     count,
		Array:     simple,
		Args:      opt.Args,
		TimeLimit: limit,
		Env: []string{
			EnvDir + "=" + f.Dir,
			EnvRun + "=" + strconv.Itoa(run),
			EnvSimple + "=" + boolEnv(simple),
			EnvBackend + "=" + be.Name(),
			EnvBin + "=" + bin,
		},
		Output: func(id string) string { return f.Path(OutputDir, "slurm-"+id+".out") },
	}
	ids, err := be.Submit(ctx, req)
	if len(ids) == 0 && cases > 0 {
		// The run started, but none of its jobs: close it, so that the next
		// resubmit does not take it for a run whose jobs are being submitted.
		f.closeRun(context.WithoutCancel(ctx), run, table)
	}
	kind := KindMeta
	if simple {
		kind = KindSimple
	}
	var recs []JobRecord
	for _, id := range ids {
		recs = append(recs, JobRecord{Run: run, Backend: be.Name(), Kind: kind, ID: id})
	}
	if rerr := f.recordJobs(ctx, recs); rerr != nil && err == nil {
		err = rerr
	}
	verb := "submit"
	if run > 1 {
		verb = "resubmit"
	}
	f.Log("%s: run %d, %d %s job(s) on the %s backend: %s", verb, run, len(ids), kind, be.Name(), strings.Join(ids, " "))
	if err == nil {
		if simple {
			fmt.Fprintf(f.Out, "Submitted %d jobs (SIMPLE mode, one case each) for run %d on the %s backend", count, run, be.Name())
			if len(ids) != count {
				fmt.Fprintf(f.Out, ", as job array(s) %s", strings.Join(ids, " "))
			}
			fmt.Fprintln(f.Out, ".")
		} else {
			what := "meta-jobs"
			if len(ids) == 1 {
				what = "meta-job"
			}
			fmt.Fprintf(f.Out, "Submitted %d %s for run %d on the %s backend.\n", len(ids), what, run, be.Name())
		}
	}
	if err == nil && extra == 1 && cases > 0 && len(ids) > 0 {
		var autoID string
		autoID, err = f.submitAuto(ctx, be, req, opt, run, ids)
		if err == nil {
			what := "-auto"
			if !opt.Auto {
				what = FinalScript
			}
			fmt.Fprintf(f.Out, "Submitted the %s job %s: it runs once these jobs end.\n", what, autoID)
		}
	}
	if err != nil {
		if len(ids) > 0 {
			fmt.Fprintf(f.Out, "Submitted before the error (recorded, see 'farm list'): %s\n", strings.Join(ids, " "))
		}
		return err
	}
	return nil
}

// closeRun leaves nothing to claim in run, which is over table, if it is
// still the current run.
func (f *Farm) closeRun(ctx context.Context, run int, table string) {
	fi, err := os.Stat(f.Path(table))
	if err != nil {
		f.Log("could not close run %d, which has no job: %v", run, err)
		return
	}
	store, err := f.Store()
	if err != nil {
		f.Log("could not close run %d, which has no job: %v", run, err)
		return
	}
	defer store.Close()
	err = store.Update(ctx, func(st *casetable.State) error {
		if st.Run != run || st.Table != table {
			return errStateMoved
		}
		st.Offset, st.Claimed = fi.Size(), st.Cases
		return nil
	})
	if err == nil {
		f.Log("run %d closed: none of its jobs was submitted", run)
	} else if !errors.Is(err, errStateMoved) {
		f.Log("could not close run %d, which has no job: %v", run, err)
	}
}

func boolEnv(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func (f *Farm) hasFinal() bool {
	_, err := os.Stat(f.Path(FinalScript))
	return err == nil
}

// jobName names a farm's jobs after its directory, so they can be told apart
// in squeue.
func jobName(f *Farm, kind string) string {
	return "farm-" + filepath.Base(f.Dir) + "-" + kind
}

// submitAuto adds the one extra job (resubmit_script.sh) that runs after the
// run's jobs end: it resubmits what is left (-auto) and submits final.sh
// once every case succeeded.
func (f *Farm) submitAuto(ctx context.Context, be Backend, base SubmitRequest, opt SubmitOptions, run int, after []string) (string, error) {
	limit, ok, err := ScriptTimeLimit(f.Path(ResubmitScript))
	if err != nil {
		return "", err
	}
	if !ok {
		return "", Userf("Job runtime sbatch argument (-t or --time) is missing in %s. Exiting (add a line like '#SBATCH -t 0-00:10')", ResubmitScript)
	}
	if err := scriptRuns(f.Path(ResubmitScript), "autojob"); err != nil {
		return "", err
	}
	req := base
	req.Script = f.Path(ResubmitScript)
	req.Name = jobName(f, "auto")
	req.Count = 1
	req.Array = false
	req.Args = nil // the meta-jobs' sbatch arguments are for cases, not for this small job
	req.After = after
	req.TimeLimit = limit
	req.Env = append(append([]string(nil), base.Env...), autoEnv(opt)...)
	ids, err := be.Submit(ctx, req)
	var recs []JobRecord
	for _, id := range ids {
		recs = append(recs, JobRecord{Run: run, Backend: be.Name(), Kind: KindAuto, ID: id})
	}
	if rerr := f.recordJobs(ctx, recs); rerr != nil && err == nil {
		err = rerr
	}
	if err != nil {
		return "", fmt.Errorf("submitting the -auto/final.sh job: %w", err)
	}
	f.Log("submit: run %d, auto job %s after %d job(s) (auto=%t, final.sh=%t)", run, ids[0], len(after), opt.Auto, f.hasFinal())
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

var errStateMoved = errors.New("the claim state moved on")

// stateErr turns a damaged claim state into advice that works.
func stateErr(err error) error {
	var de *casetable.DamageError
	if errors.As(err, &de) {
		return Userf("%v: run 'farm repair' to rebuild it from the status records (it refuses while jobs of the farm are queued or running)", err)
	}
	return err
}

// hasRecords reports whether the farm has run: a status record or a job
// record exists.
func (f *Farm) hasRecords() bool {
	if recs, _ := f.Jobs(); len(recs) > 0 {
		return true
	}
	names, _ := os.ReadDir(f.Path(StatusDir))
	for _, n := range names {
		if _, _, ok := status.ParseFileName(n.Name()); ok {
			return true
		}
	}
	return false
}
