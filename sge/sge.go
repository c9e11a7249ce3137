// Package sge is the Grid Engine backend of farm (Son of Grid Engine, and
// the Univa/Altair Grid Engines that kept its commands): it submits jobs
// with qsub, follows them with qstat while they are queued or running and
// in the accounting file once they have ended, and cancels them with qdel.
//
// Every scheduler command runs under a timeout (DefaultCallTimeout, or
// $FARM_SGE_CALL_TIMEOUT as a Go duration such as "90s"): a qmaster that
// hangs or fails gives an error that says so, never a wrong job state. The
// number of scheduler calls grows with the number of jobs of a farm at most
// (one qsub per meta-job, one per job array), never with its number of
// cases, and Jobs is one qstat call plus, for the jobs qstat no longer
// lists, one read of the accounting file from its end.
//
// What differs from Slurm:
//
//   - The run-time is h_rt (`#$ -l h_rt=01:00:00` in the job script), which
//     Submit also passes on qsub's command line from SubmitRequest.TimeLimit:
//     Grid Engine stops a job at it to the second (it ends TIMEOUT).
//   - qstat forgets a job the moment it ends: its final state comes from
//     the accounting file ($SGE_ROOT/$SGE_CELL/common/accounting, what
//     qacct reads). qmaster may buffer that file (reporting_params
//     accounting_flush_time, by default flush_time, 15 s): for that long
//     an ended job is reported GONE.
//   - A job deleted while pending leaves no accounting record: Cancel marks
//     the jobs it deletes in the farm directory (MISC/sge/), so that they
//     are reported CANCELLED afterwards.
//   - An array task's ID is "JOB.TASK", as qstat and qacct write it.
//   - A job script that exits 99 is requeued, one that exits 100 goes to
//     the error state Eqw and holds the jobs that wait for it; such a job
//     is reported PENDING, as it is.
package sge

import (
	"context"
	"fmt"
	"os"
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

// Name is the engine's name (--backend sge).
const Name = "sge"

// DefaultCallTimeout bounds each qsub, qstat, qdel and qconf call unless
// $FARM_SGE_CALL_TIMEOUT (a Go duration) says otherwise.
const DefaultCallTimeout = 30 * time.Second

// EnvCallTimeout names the environment variable that overrides
// DefaultCallTimeout.
const EnvCallTimeout = "FARM_SGE_CALL_TIMEOUT"

// EnvAccounting names the environment variable that gives the accounting
// file's path, where it is not $SGE_ROOT/$SGE_CELL/common/accounting.
const EnvAccounting = "FARM_SGE_ACCOUNTING"

// DefaultCancelWait is how long Cancel waits, at most, for the jobs it
// deleted to leave qstat.
const DefaultCancelWait = 20 * time.Second

// DefaultMaxArrayTasks is Grid Engine's default max_aj_tasks, used when
// qconf cannot tell the cluster's own.
const DefaultMaxArrayTasks = 75000

// pingTimeout bounds the qstat of Available (a variable for tests).
var pingTimeout = 5 * time.Second

// submitErrPrefix starts the message of every qsub failure.
const submitErrPrefix = "Something wrong with qsub farm submission"

// Options tune the Grid Engine engine. The farm command reads them from
// $FARM_SGE_CALL_TIMEOUT and $FARM_SGE_ACCOUNTING.
type Options struct {
	CallTimeout time.Duration // DefaultCallTimeout if zero
	// Accounting is the accounting file; "" means
	// $SGE_ROOT/$SGE_CELL/common/accounting (DefaultAccounting).
	Accounting string
}

// Backend runs farm jobs on Grid Engine. The zero value but for Dir is
// ready to use; the other fields are for tests and tuning.
type Backend struct {
	Dir         string // the farm directory
	CallTimeout time.Duration
	CancelWait  time.Duration
	Accounting  string
	// MaxArrayTasks is the cluster's max_aj_tasks; zero means ask qconf
	// once, on the first SIMPLE-mode submission.
	MaxArrayTasks int

	maxArrayOnce sync.Once
}

var _ backend.Backend = (*Backend)(nil)

// New returns the Grid Engine backend for the farm in dir.
func New(dir string, opt Options) *Backend {
	return &Backend{Dir: dir, CallTimeout: opt.CallTimeout, Accounting: opt.Accounting}
}

// Engine registers the Grid Engine engine: available where qsub is found
// and a qmaster answers.
func Engine(opt Options) backend.Engine {
	return backend.Engine{Name: Name, Available: Available, Open: func(dir string) backend.Backend { return New(dir, opt) }, Script: Script{}, Templates: Templates(), Edit: "#$ -l h_rt, -P", Options: qsubOptions}
}

// qsubOptions are Grid Engine's qsub options.
var qsubOptions = strings.Fields(`
	-@ -a -ac -adds -ar -A -b -binding -c -ckpt -clear -clearp -clears -cwd -C -dc -dl
	-e -hard -h -hold_jid -hold_jid_ad -i -j -js -jsv -l -m -masterq -mbind -mods -notify
	-now -M -N -o -P -p -pe -pty -q -R -r -rou -rdi -sc -shell -si -soft -sync -S -t -tc
	-tcon -terse -u -v -verify -V -w -wd`)

// Name implements backend.Backend.
func (b *Backend) Name() string { return Name }

// Capabilities implements backend.Backend: SIMPLE-mode submissions are job
// arrays; the run-time is passed to qsub as h_rt, which Grid Engine
// enforces to the second; job scripts carry "#$" directives.
func (b *Backend) Capabilities() backend.Capabilities {
	return backend.Capabilities{Arrays: true, EnforcesTimeLimit: true, Scripts: []backend.Script{Script{}}}
}

// Available returns "" when Grid Engine can be used here: qsub and qstat
// are in $PATH and qstat answers within a few seconds. Otherwise it
// returns a short reason.
func Available(ctx context.Context) string {
	// qconf tells Grid Engine from PBS/Torque, which has qsub, qstat and
	// qdel too.
	for _, c := range []string{"qsub", "qstat", "qdel", "qconf"} {
		if _, err := exec.LookPath(c); err != nil {
			return c + " not found"
		}
	}
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "qstat", "-u", userName())
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err == nil {
		return ""
	}
	if ctx.Err() != nil {
		return fmt.Sprintf("no Grid Engine qmaster answers (qstat timed out after %s)", pingTimeout)
	}
	return "no Grid Engine qmaster answers"
}

// userName is the user qstat is asked about: this process's, from $USER
// or $LOGNAME (Grid Engine sets both in a job), else `id -un`, else every
// user's jobs. (Not os/user: it would link cgo into farm, whose threads
// then need more address space than the memory tests give the binary.)
func userName() string {
	for _, k := range []string{"USER", "LOGNAME"} {
		if u := strings.TrimSpace(os.Getenv(k)); u != "" {
			return u
		}
	}
	if out, err := exec.Command("id", "-un").Output(); err == nil && strings.TrimSpace(string(out)) != "" {
		return strings.TrimSpace(string(out))
	}
	return "*"
}

// CommandError is a Grid Engine command that failed, timed out or could
// not be started.
type CommandError = backend.CommandError

// run runs one scheduler command under the call timeout and returns its
// standard output. env nil means this process's environment. own starts
// it in a process group of its own, out of reach of the terminal's Ctrl-C.
func (b *Backend) run(ctx context.Context, env []string, own bool, name string, args ...string) (string, error) {
	c := backend.Commands{Timeout: backend.CallTimeout(b.CallTimeout, DefaultCallTimeout), Who: "the Grid Engine qmaster", TimeoutEnv: EnvCallTimeout,
		Message: func(stderr, stdout string) string {
			msg := strings.TrimSpace(stderr)
			if msg == "" {
				// Grid Engine's commands print some errors on stdout.
				msg = strings.TrimSpace(stdout)
			}
			return oneLine(msg)
		}}
	return c.Run(ctx, env, own, name, args...)
}

// oneLine joins the lines of a command's message, without Grid Engine's
// "Exiting." trailer.
func oneLine(s string) string {
	var parts []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && l != "Exiting." {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, "; ")
}

// jobVars are the variables Grid Engine sets in a job, and those in which
// a site tells a job its GPUs. qsub -V exports the submitting environment
// to the job: one submitted from inside another job (the -auto job) must
// not inherit the submitter's, as Grid Engine does not reset those that do
// not apply to the new job (SGE_TASK_* of an array task, the submitter's
// GPUs).
var jobVars = []string{
	"JOB_ID", "JOB_NAME", "JOB_SCRIPT", "SGE_TASK_ID", "SGE_TASK_FIRST", "SGE_TASK_LAST", "SGE_TASK_STEPSIZE",
	"NSLOTS", "NHOSTS", "NQUEUES", "PE", "PE_HOSTFILE", "RESTARTED", "QUEUE", "SGE_JOB_SPOOL_DIR",
	"SGE_STDOUT_PATH", "SGE_STDERR_PATH", "SGE_STDIN_PATH", "SGE_CWD_PATH", "SGE_BINDING", "CUDA_VISIBLE_DEVICES",
}

// submitEnv is qsub's environment, which -V exports to the job: base (this
// process's if nil) without jobVars and SGE_HGR_*, plus extra.
func submitEnv(base, extra []string) []string {
	return backend.FilterEnv(base, func(k string) bool {
		return strings.HasPrefix(k, "SGE_HGR_") || slices.Contains(jobVars, k)
	}, extra...)
}

// jobName makes name a valid Grid Engine job name: no blanks or
// / : @ \ * ? (qsub gives a misleading "Error reading answer list from
// qmaster" for a blank), not starting with a digit.
func jobName(name string) string {
	var b strings.Builder
	for _, c := range name {
		if c <= ' ' || strings.ContainsRune(`/:@\*?"'`, c) || c > '~' {
			c = '_'
		}
		b.WriteRune(c)
	}
	s := b.String()
	if s == "" || (s[0] >= '0' && s[0] <= '9') {
		s = "j" + s
	}
	return s
}

// shell is the interpreter of a job script's "#!" line when it is a
// single absolute path ("" otherwise): qsub -S, as a queue's
// shell_start_mode may otherwise run the script with its own shell
// (csh by default).
func shell(script string) string {
	fh, err := os.Open(script)
	if err != nil {
		return ""
	}
	defer fh.Close()
	buf := make([]byte, 256)
	n, _ := fh.Read(buf)
	line, _, _ := strings.Cut(string(buf[:n]), "\n")
	path, ok := strings.CutPrefix(line, "#!")
	path = strings.TrimSpace(path)
	if !ok || !filepath.IsAbs(path) || strings.ContainsAny(path, " \t") {
		return ""
	}
	return path
}

// hrt renders a duration as an h_rt value in seconds (at least 1).
func hrt(d time.Duration) string {
	return strconv.FormatInt(max(int64((d+time.Second-1)/time.Second), 1), 10)
}

// Submit implements backend.Backend. META mode (req.Array false) submits
// req.Count separate jobs, one qsub each. SIMPLE mode (req.Array) submits
// job arrays of at most max_aj_tasks tasks (1..K) and returns the array
// job IDs; each task's own ID, as Self gives it, is "JOB.TASK".
//
// The jobs run in req.Dir (-wd) with the submitting environment plus
// req.Env (-V), stdout and stderr go to req.Output("$JOB_ID") (for array
// tasks req.Output("$JOB_ID.$TASK_ID")), req.TimeLimit becomes -l h_rt,
// req.After -hold_jid (which waits for the jobs to end in any state), and
// req.Args are passed to qsub before the job script. On a qsub failure the
// error starts with "Something wrong with qsub farm submission" and holds
// qsub's own message; the IDs submitted before it are returned with it. A
// cancelled ctx stops it before its next qsub, as in the Slurm engine.
func (b *Backend) Submit(ctx context.Context, req backend.SubmitRequest) ([]string, error) {
	if req.Count < 1 {
		return nil, nil
	}
	env := submitEnv(req.Environ, req.Env)
	base := []string{"-terse", "-V", "-j", "y", "-wd", req.Dir}
	if req.Name != "" {
		base = append(base, "-N", jobName(req.Name))
	}
	if sh := shell(req.Script); sh != "" {
		base = append(base, "-S", sh)
	}
	if req.TimeLimit > 0 {
		base = append(base, "-l", "h_rt="+hrt(req.TimeLimit))
	}
	if len(req.After) > 0 {
		base = append(base, "-hold_jid", strings.Join(req.After, ","))
	}
	var ids []string
	submit := func(output, array string, n, of int) error {
		args := append([]string{}, base...)
		if req.Output != nil {
			args = append(args, "-o", req.Output(output))
		}
		if array != "" {
			args = append(args, "-t", array)
		}
		args = append(args, req.Args...)
		args = append(args, req.Script)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("stopped before qsub call %d of %d (%d job(s) submitted before it): %w", n, of, len(ids), err)
		}
		out, err := b.run(context.WithoutCancel(ctx), env, true, "qsub", args...)
		if err != nil {
			return backend.SubmitError("qsub", "qstat", submitErrPrefix, err, n, of, len(ids))
		}
		id, err := parseQsub(out)
		if err != nil {
			return fmt.Errorf("%s (qsub call %d of %d): %w", submitErrPrefix, n, of, err)
		}
		ids = append(ids, id)
		return nil
	}
	if !req.Array {
		for i := 1; i <= req.Count; i++ {
			if err := submit("$JOB_ID", "", i, req.Count); err != nil {
				return ids, err
			}
		}
		return ids, nil
	}
	per := b.maxArrayTasks(ctx)
	calls := (req.Count + per - 1) / per
	for i, left := 1, req.Count; left > 0; i++ {
		k := min(left, per)
		if err := submit("$JOB_ID.$TASK_ID", fmt.Sprintf("1-%d", k), i, calls); err != nil {
			return ids, err
		}
		left -= k
	}
	return ids, nil
}

var (
	jobIDRe = regexp.MustCompile(`^[0-9]+$`)
	// qsub -terse prints "ID" for a job, "ID.1-K:1" for an array.
	qsubRe    = regexp.MustCompile(`^([0-9]+)(\.[0-9]+-[0-9]+:[0-9]+)?$`)
	validIDRe = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)
)

// validID reports whether id is a job ID ("123") or an array task's
// ("123.4"); other strings are never passed to qstat or qdel.
func validID(id string) bool { return validIDRe.MatchString(id) }

// parseQsub reads the job ID from qsub -terse.
func parseQsub(out string) (string, error) {
	line := strings.TrimSpace(out)
	if i := strings.LastIndexByte(line, '\n'); i >= 0 {
		line = strings.TrimSpace(line[i+1:])
	}
	m := qsubRe.FindStringSubmatch(line)
	if m == nil {
		return "", fmt.Errorf("qsub -terse printed %q, not a job ID", strings.TrimSpace(out))
	}
	return m[1], nil
}

// maxArrayTasks returns the cluster's max_aj_tasks (0 there means no
// limit), read once from `qconf -sconf`; DefaultMaxArrayTasks if qconf
// cannot tell.
func (b *Backend) maxArrayTasks(ctx context.Context) int {
	b.maxArrayOnce.Do(func() {
		if b.MaxArrayTasks > 0 {
			return
		}
		b.MaxArrayTasks = DefaultMaxArrayTasks
		out, err := b.run(ctx, nil, false, "qconf", "-sconf")
		if err != nil {
			return
		}
		if n, ok := parseMaxArrayTasks(out); ok {
			b.MaxArrayTasks = n
		}
	})
	return b.MaxArrayTasks
}

// parseMaxArrayTasks finds "max_aj_tasks N" in `qconf -sconf`; 0 (no
// limit) is given as the most an int holds.
func parseMaxArrayTasks(conf string) (int, bool) {
	for _, line := range strings.Split(conf, "\n") {
		f := strings.Fields(line)
		if len(f) != 2 || f[0] != "max_aj_tasks" {
			continue
		}
		n, err := strconv.Atoi(f[1])
		if err != nil || n < 0 {
			return 0, false
		}
		if n == 0 {
			n = 1 << 30
		}
		return n, true
	}
	return 0, false
}

var _ backend.TaskIDs = (*Backend)(nil)

// ArrayOf implements backend.TaskIDs: a task's ID is ARRAY.TASK.
func (b *Backend) ArrayOf(id string) (string, bool) { return backend.CutTask(id, ".") }
