// Package slurm is the Slurm backend of farm: it submits jobs with sbatch,
// follows them with squeue, cancels them with scancel and reads the cluster's
// settings with scontrol.
//
// Every scheduler command runs under a timeout (DefaultCallTimeout, or
// $FARM_SLURM_CALL_TIMEOUT as a Go duration such as "90s"): a controller that
// hangs or fails gives an error that says so, never a wrong job state. The
// number of scheduler calls grows with the number of jobs of a farm at most
// (one sbatch per meta-job, one per job array), never with its number of
// cases, and Jobs is always a single squeue call.
package slurm

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/farm-hpc/farm/backend"
)

// DefaultCallTimeout bounds each sbatch, squeue, scancel and scontrol call
// unless $FARM_SLURM_CALL_TIMEOUT (a Go duration) says otherwise.
const DefaultCallTimeout = 30 * time.Second

// EnvCallTimeout names the environment variable that overrides
// DefaultCallTimeout.
const EnvCallTimeout = "FARM_SLURM_CALL_TIMEOUT"

// DefaultCancelWait is how long Cancel waits, at most, for the jobs it
// cancelled to leave the queue.
const DefaultCancelWait = 10 * time.Second

// DefaultMaxArraySize is Slurm's default MaxArraySize, used when scontrol
// cannot tell the cluster's own: array indexes 0 to 1000.
const DefaultMaxArraySize = 1001

// pingTimeout bounds the scontrol ping of Available (a variable for tests).
var pingTimeout = 5 * time.Second

// submitErrPrefix starts the message of every sbatch failure, as META users
// know it.
const submitErrPrefix = "Something wrong with sbatch farm submission"

// Backend runs farm jobs on Slurm. The zero value but for Dir is ready to
// use; the other fields are for tests and tuning.
type Backend struct {
	// Dir is the farm directory.
	Dir string

	// CallTimeout bounds each scheduler command; zero means
	// DefaultCallTimeout.
	CallTimeout time.Duration

	// CancelWait is how long Cancel waits for the cancelled jobs to leave
	// the queue; zero means DefaultCancelWait.
	CancelWait time.Duration

	// MaxArraySize is the cluster's MaxArraySize (array indexes 0 to
	// MaxArraySize-1); zero means ask scontrol once, on the first SIMPLE-mode
	// submission.
	MaxArraySize int

	maxArrayOnce sync.Once
}

var _ backend.Backend = (*Backend)(nil)

// New returns the Slurm backend for the farm in dir.
func New(dir string) *Backend { return &Backend{Dir: dir} }

// Name is the engine's name.
const Name = "slurm"

// Options tune the Slurm engine. The farm command reads CallTimeout from
// $FARM_SLURM_CALL_TIMEOUT (EnvCallTimeout).
type Options struct {
	CallTimeout time.Duration // DefaultCallTimeout if zero
}

// Engine registers the Slurm engine: available where sbatch is found and a
// controller answers.
func Engine(opt Options) backend.Engine {
	return backend.Engine{Name: Name, Available: Available, Open: func(dir string) backend.Backend {
		return &Backend{Dir: dir, CallTimeout: opt.CallTimeout}
	}, Script: Script{}, Templates: Templates(), Edit: "#SBATCH -t, -A"}
}

// Capabilities implements backend.Backend: SIMPLE-mode submissions are job
// arrays; the run-time is the job script's (#SBATCH -t).
func (b *Backend) Capabilities() backend.Capabilities {
	return backend.Capabilities{Arrays: true, Scripts: []backend.Script{Script{}}}
}

// Available returns "" when Slurm can be used here: sbatch is in $PATH and
// `scontrol ping` reports a controller UP within a few seconds. Otherwise it
// returns a short reason.
func Available(ctx context.Context) string {
	if _, err := exec.LookPath("sbatch"); err != nil {
		return "sbatch not found"
	}
	if _, err := exec.LookPath("scontrol"); err != nil {
		return "scontrol not found"
	}
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "scontrol", "ping")
	cmd.Env = queryEnv()
	cmd.WaitDelay = time.Second
	out, _ := cmd.Output()
	if strings.Contains(string(out), "is UP") {
		return ""
	}
	if ctx.Err() != nil {
		return fmt.Sprintf("no Slurm controller answers (scontrol ping timed out after %s)", pingTimeout)
	}
	return "no Slurm controller answers"
}

// Name implements backend.Backend.
func (b *Backend) Name() string { return Name }

// CommandError is a Slurm command that failed, timed out or could not be
// started.
type CommandError = backend.CommandError

// commands runs Slurm's commands, each under the call timeout.
func (b *Backend) commands() backend.Commands {
	return backend.Commands{Timeout: backend.CallTimeout(b.CallTimeout, DefaultCallTimeout), Who: "the Slurm controller", TimeoutEnv: EnvCallTimeout}
}

// run runs one scheduler command under the call timeout and returns its
// standard output.
func (b *Backend) run(ctx context.Context, env []string, name string, args ...string) (string, error) {
	return b.commands().Run(ctx, env, false, name, args...)
}

// runCmd is run; own starts the command in a process group of its own, so
// that a Ctrl-C at the terminal, which signals the whole foreground group,
// does not reach it.
func (b *Backend) runCmd(ctx context.Context, env []string, own bool, name string, args []string) (string, error) {
	return b.commands().Run(ctx, env, own, name, args...)
}

// queryEnv is the environment of squeue, scancel and scontrol: the user's,
// without the variables that would filter or reformat what they show or do
// (SQUEUE_USERS, SQUEUE_PARTITION, SCANCEL_STATE, ...), and with Slurm's
// standard time format, which parseTime reads.
func queryEnv() []string {
	return backend.FilterEnv(nil, func(k string) bool {
		return strings.HasPrefix(k, "SQUEUE_") || strings.HasPrefix(k, "SCANCEL_") || k == "SLURM_TIME_FORMAT"
	}, "SLURM_TIME_FORMAT=standard")
}

// submitEnv is the environment of sbatch, which sbatch exports to the job:
// the submitting environment base (this process's if nil) plus extra. Variables that Slurm sets inside a
// job and does not reset in a job submitted from it are dropped: a plain job
// submitted from an array task would otherwise inherit the task's
// SLURM_ARRAY_JOB_ID and take itself for that task; and a job without
// GPUs submitted from a job with some would take the submitter's
// SLURM_JOB_GPUS for its own (allocVars). SBATCH_ARRAY_INX is dropped too,
// as it would turn every meta-job into an array.
func submitEnv(base, extra []string) []string {
	return backend.FilterEnv(base, func(k string) bool {
		return strings.HasPrefix(k, "SLURM_ARRAY_") || k == "SLURM_JOB_END_TIME" || k == "SLURM_JOB_START_TIME" || k == "SBATCH_ARRAY_INX" || slices.Contains(allocVars, k)
	}, extra...)
}

// Submit implements backend.Backend. META mode (req.Array false) submits
// req.Count separate jobs, one sbatch call each, so that every meta-job has a
// plain job ID. SIMPLE mode (req.Array) submits job arrays of at most
// MaxArraySize-1 tasks (indexes 1..K) and returns the array job IDs; each
// task's own ID, as Self gives it, is "ARRAYID_TASK".
//
// The jobs run in req.Dir with the submitting environment plus req.Env
// (--export=ALL), their output goes to req.Output("%j") (req.Output("%A_%a")
// for array tasks), and req.Args are passed to sbatch before the job script.
// The run-time comes from the job script's #SBATCH lines; req.TimeLimit is
// not passed on. On an sbatch failure the error starts with "Something wrong
// with sbatch farm submission" and holds sbatch's own message; the IDs
// submitted before it are returned with it.
//
// When ctx is cancelled (Ctrl-C), no further sbatch is started, and the one
// in flight is let finish, within the call timeout: killed, it might have
// submitted its job all the same, with its ID lost. It runs in a process
// group of its own, out of the reach of the terminal's Ctrl-C. The IDs it
// and the calls before it gave are returned with ctx's error.
func (b *Backend) Submit(ctx context.Context, req backend.SubmitRequest) ([]string, error) {
	if req.Count < 1 {
		return nil, nil
	}
	env := submitEnv(req.Environ, req.Env)
	var ids []string
	submit := func(output, array string, n, of int) error {
		// --open-mode=append: a job Slurm requeues (its node failed) keeps
		// the output of its earlier run instead of truncating it.
		args := []string{"--parsable", "--chdir", req.Dir, "--export=ALL", "--open-mode=append"}
		if req.Name != "" {
			args = append(args, "--job-name", req.Name)
		}
		if req.Output != nil {
			args = append(args, "-o", req.Output(output))
		}
		args = append(args, req.Args...)
		if len(req.After) > 0 {
			args = append(args, "--dependency=afterany:"+strings.Join(req.After, ":"))
		}
		if array != "" {
			args = append(args, "--array="+array)
		}
		args = append(args, req.Script)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("stopped before sbatch call %d of %d (%d job(s) submitted before it): %w", n, of, len(ids), err)
		}
		out, err := b.runCmd(context.WithoutCancel(ctx), env, true, "sbatch", args)
		if err != nil {
			return backend.SubmitError("sbatch", "squeue", submitErrPrefix, err, n, of, len(ids))
		}
		id, err := parseSbatch(out)
		if err != nil {
			return fmt.Errorf("%s (sbatch call %d of %d): %w", submitErrPrefix, n, of, err)
		}
		ids = append(ids, id)
		return nil
	}
	per := 0
	if req.Array {
		per = b.maxArraySize(ctx) - 1
	}
	if per < 2 {
		// META mode, or a cluster where job arrays are disabled
		// (MaxArraySize 0 or 1): one plain job per requested job.
		for i := 1; i <= req.Count; i++ {
			if err := submit("%j", "", i, req.Count); err != nil {
				return ids, err
			}
		}
		return ids, nil
	}
	calls := (req.Count + per - 1) / per
	for i, left := 1, req.Count; left > 0; i++ {
		k := min(left, per)
		if err := submit("%A_%a", fmt.Sprintf("1-%d", k), i, calls); err != nil {
			return ids, err
		}
		left -= k
	}
	return ids, nil
}

var jobIDRe = regexp.MustCompile(`^[0-9]+$`)

// parseSbatch reads the job ID from sbatch --parsable: "ID" or "ID;CLUSTER".
func parseSbatch(out string) (string, error) {
	line := strings.TrimSpace(out)
	if i := strings.LastIndexByte(line, '\n'); i >= 0 {
		line = strings.TrimSpace(line[i+1:])
	}
	id, _, _ := strings.Cut(line, ";")
	if !jobIDRe.MatchString(id) {
		return "", fmt.Errorf("sbatch --parsable printed %q, not a job ID", strings.TrimSpace(out))
	}
	return id, nil
}

// maxArraySize returns the cluster's MaxArraySize, read once from
// `scontrol show config`; DefaultMaxArraySize if scontrol cannot tell.
func (b *Backend) maxArraySize(ctx context.Context) int {
	b.maxArrayOnce.Do(func() {
		if b.MaxArraySize > 0 {
			return
		}
		b.MaxArraySize = DefaultMaxArraySize
		out, err := b.run(ctx, queryEnv(), "scontrol", "show", "config")
		if err != nil {
			return
		}
		if n, ok := parseMaxArraySize(out); ok {
			b.MaxArraySize = n
		}
	})
	return b.MaxArraySize
}

// parseMaxArraySize finds "MaxArraySize = N" in `scontrol show config`.
func parseMaxArraySize(config string) (int, bool) {
	for _, line := range strings.Split(config, "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.TrimSpace(k) != "MaxArraySize" {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		return n, err == nil && n >= 0
	}
	return 0, false
}

// squeueFormat is the one squeue format farm reads: array job ID (the job ID
// of a plain job), array task index or index expression ("N/A" for a plain
// job), the job's own ID, state, start and end.
const squeueFormat = "%F|%K|%A|%T|%S|%e"

// Jobs implements backend.Backend with a single `squeue -h -t all -j IDS` call
// (one per ~10,000 jobs, the most one command-line argument holds).
// Every ID in ids gets an entry; an ID squeue does not list is Gone (Slurm
// forgets jobs MinJobAge after they end). For an array job ID ("123") the
// entry sums up its tasks: Running if any task runs, else Pending if any is
// pending, else the worst final state (FAILED, TIMEOUT, CANCELLED, COMPLETED
// in that order). The map also has an entry for every array task that squeue
// lists one by one ("123_4"), since a task names its status file by that ID.
// A failed or hung squeue is an error, never a wrong state.
func (b *Backend) Jobs(ctx context.Context, ids []string) (map[string]backend.JobInfo, error) {
	q, err := b.query(ctx, ids)
	if err != nil {
		return nil, err
	}
	return q.Infos(), nil
}

// query runs squeue once for ids and sums up the rows for each.
func (b *Backend) query(ctx context.Context, ids []string) (*queue, error) {
	var valid []string
	seen := map[string]bool{}
	for _, id := range ids {
		if validID(id) && !seen[id] {
			valid = append(valid, id)
			seen[id] = true
		}
	}
	var rows []row
	for _, list := range chunks(valid, maxJobList) {
		out, err := b.run(ctx, queryEnv(), "squeue", "-h", "-t", "all", "-j", list, "-o", squeueFormat)
		if err != nil {
			var ce *CommandError
			// squeue -j with one ID that Slurm has purged exits 1 with this
			// message (with several IDs it just omits them): no job.
			if !errors.As(err, &ce) || ce.Timeout > 0 || !strings.Contains(ce.Stderr, "Invalid job id specified") {
				return nil, fmt.Errorf("asking Slurm for the state of %d job(s): %w", len(valid), err)
			}
			out = ""
		}
		r, err := parseSqueue(out)
		if err != nil {
			return nil, fmt.Errorf("reading squeue's answer: %w", err)
		}
		rows = append(rows, r...)
	}
	return newQueue(ids, rows), nil
}

// maxJobList bounds the length of one squeue -j argument: Linux refuses a
// single argument over 128 KiB. Only a farm of more than ~10,000 jobs needs
// more than one squeue call.
const maxJobList = 100_000

// chunks joins ids with commas into lists of at most max bytes.
func chunks(ids []string, max int) []string {
	var out []string
	var b strings.Builder
	for _, id := range ids {
		if b.Len() > 0 && b.Len()+1+len(id) > max {
			out = append(out, b.String())
			b.Reset()
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(id)
	}
	if b.Len() > 0 {
		out = append(out, b.String())
	}
	return out
}

var validIDRe = regexp.MustCompile(`^[0-9]+(_[0-9]+)?$`)

// validID reports whether id is a Slurm job ID ("123") or array task ID
// ("123_4"); other strings are never passed to squeue or scancel.
func validID(id string) bool { return validIDRe.MatchString(id) }

// row is one line of squeue's answer.
type row struct {
	ArrayJob string // %F: the array job ID, or the job ID of a plain job
	Task     string // %K: "" for a plain job or an array's meta record, a task index, or an index expression for pending tasks
	JobID    string // %A: the job's own ID
	Raw      string // Slurm's state name
	State    backend.JobState
	Start    time.Time
	End      time.Time
}

// single reports whether r is one array task, listed by itself.
func (r row) single() bool { return r.Task != "" && jobIDRe.MatchString(r.Task) }

// parseSqueue reads squeue output in squeueFormat.
func parseSqueue(out string) ([]row, error) {
	var rows []row
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "CLUSTER:") {
			continue
		}
		f := strings.Split(line, "|")
		if len(f) != 6 {
			return nil, fmt.Errorf("unexpected squeue line %q (want %s)", line, squeueFormat)
		}
		r := row{ArrayJob: f[0], Task: f[1], JobID: f[2], Raw: f[3], State: MapState(f[3])}
		if r.Task == "N/A" || r.Task == "(null)" {
			r.Task = ""
		}
		if !jobIDRe.MatchString(r.ArrayJob) || !jobIDRe.MatchString(r.JobID) {
			return nil, fmt.Errorf("unexpected squeue line %q: bad job ID", line)
		}
		// A pending job's %S and %e are the scheduler's guesses: keep them out.
		if r.State != backend.Pending {
			r.Start, r.End = ParseTime(f[4]), ParseTime(f[5])
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// queue is squeue's answer for a set of asked IDs.
type queue = backend.Queue

func newQueue(asked []string, rows []row) *queue {
	q := backend.NewQueue(nil)
	byArray := map[string][]row{}
	byJob := map[string][]row{}
	for _, r := range rows {
		byArray[r.ArrayJob] = append(byArray[r.ArrayJob], r)
		if r.JobID != r.ArrayJob {
			byJob[r.JobID] = append(byJob[r.JobID], r)
		}
	}
	for _, id := range asked {
		if q.Jobs[id] != nil {
			continue
		}
		a := &backend.Rollup{}
		q.Jobs[id] = a
		if !validID(id) {
			continue
		}
		if parent, task, ok := strings.Cut(id, "_"); ok {
			for _, r := range byArray[parent] {
				if backend.TaskMatches(r.Task, task) {
					add(a, r)
				}
			}
			continue
		}
		// A plain job, a whole array, or an array task by its own job ID.
		for _, r := range byArray[id] {
			add(a, r)
			if r.single() {
				q.Tasks[id+"_"+r.Task] = info(id+"_"+r.Task, r)
			}
		}
		for _, r := range byJob[id] {
			add(a, r)
		}
	}
	return q
}

// add adds row r to the roll-up a.
func add(a *backend.Rollup, r row) { a.Add(r.State, r.Task, r.Start, r.End) }

func info(id string, r row) backend.JobInfo {
	return backend.JobInfo{ID: id, State: r.State, Start: r.Start, End: r.End}
}

// MapState maps a Slurm job state name (squeue %T, scontrol JobState) to the
// farm's JobState. States in which the job's processes may still run —
// CONFIGURING, COMPLETING, SUSPENDED, STOPPED, SIGNALING, STAGE_OUT,
// RESIZING — are Running, so that no case of such a job is taken for
// interrupted and `farm kill` waits for them; states in which the job waits
// to (re)start — REQUEUED, REQUEUE_HOLD, REQUEUE_FED, RESV_DEL_HOLD,
// SPECIAL_EXIT — are Pending. Every other end (NODE_FAIL, OUT_OF_MEMORY,
// PREEMPTED, BOOT_FAIL, DEADLINE, REVOKED) and any state this version does
// not know are Failed.
func MapState(s string) backend.JobState {
	s = strings.ToUpper(strings.TrimSpace(s))
	// Slurm may add flags after the base state ("CANCELLED by 0", "RUNNING+").
	if i := strings.IndexAny(s, " +"); i > 0 {
		s = s[:i]
	}
	switch s {
	case "PENDING", "PD", "REQUEUED", "RQ", "REQUEUE_HOLD", "RH", "REQUEUE_FED", "RF", "RESV_DEL_HOLD", "RD", "SPECIAL_EXIT", "SE":
		return backend.Pending
	case "RUNNING", "R", "CONFIGURING", "CF", "COMPLETING", "CG", "SUSPENDED", "S", "STOPPED", "ST", "SIGNALING", "SI", "STAGE_OUT", "SO", "RESIZING", "RS":
		return backend.Running
	case "COMPLETED", "CD":
		return backend.Completed
	case "CANCELLED", "CA":
		return backend.Cancelled
	case "TIMEOUT", "TO":
		return backend.Timeout
	}
	return backend.Failed
}

// ParseTime reads a Slurm time in the standard format
// (2006-01-02T15:04:05, local time). "N/A", "Unknown", "None", "INVALID"
// and anything unreadable give the zero time.
func ParseTime(s string) time.Time {
	t, err := time.ParseInLocation("2006-01-02T15:04:05", strings.TrimSpace(s), time.Local)
	if err != nil {
		return time.Time{}
	}
	return t
}

// maxCancelArgs is the most job IDs given to one scancel call.
const maxCancelArgs = 5000

// Cancel implements backend.Backend. It asks squeue once which of ids are
// active (pending, with PendingOnly), cancels those with one scancel call
// (one per 5,000 jobs; scancel --state=PENDING with PendingOnly, which also
// cancels only the pending tasks of an array) and returns them. It then
// polls squeue, for up to CancelWait, until they are no longer pending or
// running, so that squeue shows no job of the farm once `farm kill`
// returns; with Slurm's usual KillWait of 30 s a job that ignores SIGTERM
// may outlast that wait, and Cancel returns anyway: Slurm kills it. With
// PendingOnly, a job that started between the query and scancel was not
// cancelled and is left out.
func (b *Backend) Cancel(ctx context.Context, ids []string, scope backend.CancelScope) ([]string, error) {
	pendingOnly := scope == backend.PendingOnly
	before, err := b.query(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("cancelling jobs: %w", err)
	}
	targets := before.Pick(ids, func(a *backend.Rollup) bool { return (pendingOnly && a.Pending) || (!pendingOnly && a.Active()) })
	if len(targets) == 0 {
		return nil, nil
	}
	cancelErr := b.scancel(ctx, targets, pendingOnly)
	// scancel may fail for a job that ended meanwhile; what counts is that
	// none is left pending (or running).
	wait := b.CancelWait
	if wait <= 0 {
		wait = DefaultCancelWait
	}
	return backend.SettleCancel(ctx, wait, targets, cancelErr,
		func() (*queue, error) { return b.query(ctx, targets) },
		func(q *queue, id string) bool { return q.Jobs[id].Settled(pendingOnly) },
		func(q *queue, id string) bool {
			// It started before scancel came: not cancelled, it runs on.
			a := q.Jobs[id]
			return pendingOnly && a.N > 0 && !a.Pending && !a.Cancelled
		})
}

// scancel cancels targets (only their pending tasks with pendingOnly), in
// calls of at most maxCancelArgs jobs; it returns the first error.
func (b *Backend) scancel(ctx context.Context, targets []string, pendingOnly bool) error {
	args := []string{}
	if pendingOnly {
		args = append(args, "--state=PENDING")
	}
	return backend.Batches(targets, maxCancelArgs, func(batch []string) error {
		_, err := b.run(ctx, queryEnv(), "scancel", append(args, batch...)...)
		return err
	})
}

// Self implements backend.Backend inside a Slurm job. Its ID is
// "$SLURM_ARRAY_JOB_ID_$SLURM_ARRAY_TASK_ID" in an array task, else
// $SLURM_JOB_ID; its Restart is $SLURM_RESTART_COUNT. Its end time is $SLURM_JOB_END_TIME (Unix seconds, set by
// Slurm 23.02 and later) if set, else the job's EndTime from squeue (its
// start plus its time limit), unless req.NoEnd; the zero time if neither
// tells.
func (b *Backend) Self(ctx context.Context, req backend.SelfRequest) (backend.Self, error) {
	env := req.Env
	id, err := selfID(env)
	if err != nil {
		return backend.Self{}, err
	}
	s := backend.Self{ID: id, Alloc: selfAlloc(env)}
	// Set by Slurm when it restarted (requeued) the job under the same ID.
	if n, err := strconv.Atoi(strings.TrimSpace(env("SLURM_RESTART_COUNT"))); err == nil && n > 0 {
		s.Restart = n
	}
	if v := strings.TrimSpace(env("SLURM_JOB_END_TIME")); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
			s.End = time.Unix(n, 0)
			return s, nil
		}
	}
	// A SIMPLE-mode task runs one case and never needs its end time: spare
	// the controller one query per task.
	if req.NoEnd {
		return s, nil
	}
	// Asked by the array task ID: the job ID of an array's last task is the
	// array job ID, which would list every task.
	out, err := b.run(ctx, queryEnv(), "squeue", "-h", "-j", id, "-o", "%e")
	if err == nil {
		s.End = ParseTime(firstLine(out))
	}
	return s, nil
}

// selfID is the job's own ID from Slurm's environment.
func selfID(env func(string) string) (string, error) {
	arr, task := env("SLURM_ARRAY_JOB_ID"), env("SLURM_ARRAY_TASK_ID")
	if arr != "" && task != "" {
		id := arr + "_" + task
		if !validID(id) {
			return "", fmt.Errorf("SLURM_ARRAY_JOB_ID=%q SLURM_ARRAY_TASK_ID=%q: not an array task ID", arr, task)
		}
		return id, nil
	}
	id := env("SLURM_JOB_ID")
	if id == "" {
		return "", errors.New("SLURM_JOB_ID is not set: not inside a Slurm job")
	}
	if !jobIDRe.MatchString(id) {
		return "", fmt.Errorf("SLURM_JOB_ID=%q: not a job ID", id)
	}
	return id, nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(line)
}

// ActiveIn implements backend.DirJobs with one `squeue --me` call (active
// jobs only: squeue lists no ended job without -t): the job IDs whose
// working directory (%Z) is dir or below it.
func (b *Backend) ActiveIn(ctx context.Context, dir string) ([]string, error) {
	out, err := b.run(ctx, queryEnv(), "squeue", "-h", "--me", "-o", "%A|%Z")
	if err != nil {
		return nil, fmt.Errorf("asking Slurm for your jobs: %w", err)
	}
	dirs := []string{filepath.Clean(dir)}
	if real, err := filepath.EvalSymlinks(dir); err == nil && real != dirs[0] {
		dirs = append(dirs, real)
	}
	var ids []string
	for _, line := range strings.Split(out, "\n") {
		id, wd, ok := strings.Cut(strings.TrimSpace(line), "|")
		if !ok {
			continue
		}
		wd = filepath.Clean(wd)
		for _, d := range dirs {
			if wd == d || strings.HasPrefix(wd, d+"/") {
				ids = append(ids, id)
				break
			}
		}
	}
	return ids, nil
}

var _ backend.DirJobs = (*Backend)(nil)

var _ backend.TaskIDs = (*Backend)(nil)

// ArrayOf implements backend.TaskIDs: a task's ID is ARRAY_TASK.
func (b *Backend) ArrayOf(id string) (string, bool) { return backend.CutTask(id, "_") }
