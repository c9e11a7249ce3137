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
	}, Script: Script{}, Templates: Templates(), Edit: "#SBATCH -t, -A", Options: sbatchOptions}
}

// sbatchOptions are sbatch's options (Slurm 23), long and short.
var sbatchOptions = strings.Fields(`
	--account -A --acctg-freq --array -a --batch --bb --bbf --begin -b --chdir -D
	--cluster-constraint --clusters -M --comment --constraint -C --container
	--container-id --contiguous --core-spec -S --cores-per-socket --cpu-freq
	--cpus-per-gpu --cpus-per-task -c --deadline --delay-boot --dependency -d
	--distribution -m --error -e --exclude -x --exclusive --export --export-file
	--extra --extra-node-info -B --get-user-env --gid --gpu-bind --gpu-freq --gpus -G
	--gpus-per-node --gpus-per-socket --gpus-per-task --gres --gres-flags --hint
	--hold -H --ignore-pbs --input -i --job-name -J --kill-on-invalid-dep --licenses -L
	--mail-type --mail-user --mcs-label --mem --mem-bind --mem-per-cpu --mem-per-gpu
	--mincpus --network --nice --no-kill -k --no-requeue --nodefile -F --nodelist -w
	--nodes -N --ntasks -n --ntasks-per-core --ntasks-per-gpu --ntasks-per-node
	--ntasks-per-socket --open-mode --output -o --overcommit -O --oversubscribe -s
	--parsable --partition -p --power --prefer --priority --profile --propagate --qos -q
	--quiet -Q --reboot --requeue --reservation --signal --sockets-per-node
	--spread-job --switches --test-only --thread-spec --threads-per-core --time -t
	--time-min --tmp --tres-per-task --uid --use-min-nodes --verbose -v --wait -W
	--wait-all-nodes --wckey --wrap`)

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
