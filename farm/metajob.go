package farm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/farm-hpc/farm/casetable"
	"github.com/farm-hpc/farm/status"
	"golang.org/x/sys/unix"
)

// Messages a meta-job prints when it exits by itself, as META users know them.
const (
	MsgNoCases     = "No cases left; exiting."
	MsgSimpleDone  = "Exiting after processing one case (-1 option)"
	MsgFastFailure = "Too many failed (very short) cases - exiting"
	MsgNoRuntime   = "Not enough runtime left; exiting."
	MsgStopped     = "Stopped by a signal; exiting."
)

// ErrFastFailure is returned by RunMetajob when fast-failure protection
// stopped the meta-job.
var ErrFastFailure = errors.New(MsgFastFailure)

// Environment variables that submit passes to every job.
const (
	EnvDir     = "FARM_DIR"
	EnvRun     = "FARM_RUN"
	EnvSimple  = "FARM_SIMPLE"
	EnvBackend = "FARM_BACKEND"
	EnvBin     = "FARM_BIN"
)

// Metajob runs the meta-job loop inside a job: claim a case under the farm
// lock, run single_case.sh on it, record its start and end, and repeat until
// no case is left.
type Metajob struct {
	Farm    *Farm
	Backend Backend
	Out     io.Writer // the job's output (OUTPUT/slurm-$JOBID.out); must be an *os.File

	// Now and EndTime are for tests; zero values use the clock and the backend.
	bash  string
	env   []string
	dirFD *os.File  // the farm directory, for the *at calls
	log   io.Writer // Out, retrying transient errors (jobOutput)
}

// Run runs the loop. It returns nil at a normal end.
func (m *Metajob) Run(ctx context.Context) error {
	f := m.Farm
	out, ok := m.Out.(*os.File)
	if !ok {
		return errors.New("meta-job output must be a file")
	}
	// The output file may be on the farm's filesystem: a full disk must
	// not lose what the meta-job and its cases say meanwhile.
	m.log = &jobOutput{f: out}
	self, err := m.Backend.Self(ctx)
	if err != nil {
		return err
	}
	run, err := strconv.Atoi(os.Getenv(EnvRun))
	if err != nil || run < 1 {
		return fmt.Errorf("%s is not set to a run number: a meta-job must be started by 'farm submit'", EnvRun)
	}
	simple := os.Getenv(EnvSimple) == "1"
	if m.bash, err = exec.LookPath("bash"); err != nil {
		return err
	}
	if err := f.ensureDirs(); err != nil {
		return err
	}
	store, err := f.Store()
	if err != nil {
		return err
	}
	defer store.Close()
	store.Job, store.Log = self.ID, m.log
	// A restarted job (same ID) writes a file of its own: its earlier
	// incarnation may still be running on a node the batch system lost.
	sw, err := status.CreateLog(f.Path(StatusDir, status.FileName(self.ID, self.Restart)), self.ID, self.Restart, run, f.Host, m.log)
	if err != nil {
		return err
	}
	defer sw.Close()

	// Case environment: ours, less what we set per case.
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k != "ID" && k != "COMM" && k != "METAJOB_ID" {
			m.env = append(m.env, kv)
		}
	}
	m.env = append(m.env, "METAJOB_ID="+self.ID)

	// A stop signal (time limit, cancel) reaches the whole job, the running
	// case included; remember it so the case is recorded as interrupted.
	var stopSig atomic.Int32
	stopCh := make(chan struct{}) // closed at the first stop signal
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGUSR1)
	defer signal.Stop(sigs)
	go func() {
		for s := range sigs {
			// A signal sent to the whole job already reached the case;
			// one sent to us alone is passed on to our process group (the
			// case and its worker) the first time.
			if stopSig.Swap(int32(s.(syscall.Signal))) == 0 {
				close(stopCh)
				syscall.Kill(0, s.(syscall.Signal))
			}
		}
	}()
	runner, err := newCaseRunner(f.Dir, m.bash, m.env, out, m.log)
	if err != nil {
		return err
	}
	defer runner.close()
	// RUN directories are made relative to the open farm directory: one
	// lookup at the server instead of one per component of the path.
	if m.dirFD, err = os.OpenFile(f.Dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
		return err
	}
	defer func() { m.dirFD.Close() }()

	again := ""
	if self.Restart > 0 {
		again = fmt.Sprintf(", restarted by the batch system (restart %d)", self.Restart)
	}
	fmt.Fprintf(m.log, "farm: meta-job %s (run %d%s) on %s starting at %s\n", self.ID, run, again, f.Host, time.Now().Format(time.RFC3339))
	quit := func(msg string) {
		fmt.Fprintln(m.log, msg)
		sw.Quit(msg)
	}
	ff := fastFailure{max: f.Config.NFailedMax, short: f.Config.DtFailed}
	rt := &runtimeGuard{backendEnd: self.End}
	if end := endTime(self.End); !end.IsZero() {
		fmt.Fprintf(m.log, "farm: this job ends at %s\n", end.Format(time.RFC3339))
	}
	var queue []casetable.Case // claimed, not started yet
	bs := batchSizer{}
	if simple {
		bs.max = 1
	}
	for {
		if stopSig.Load() != 0 {
			quit(MsgStopped)
			return nil
		}
		if len(queue) == 0 {
			// The last case's end record is written before the claim
			// that counts it as finished.
			if err := sw.Flush(); err != nil {
				return err
			}
			if err := runner.refresh(); err != nil {
				return fmt.Errorf("before claiming more cases: %w", err)
			}
			cases, err := store.Claim(ctx, run, bs.next(rt), rt.before)
			if err != nil {
				return fmt.Errorf("claiming a case: %w", err)
			}
			rt.claimed()
			if rt.stop {
				quit(MsgNoRuntime)
				return nil
			}
			if len(cases) == 0 {
				quit(MsgNoCases)
				return nil
			}
			if rt.recompute {
				rt.update(ctx, store, f.Path(StatusDir), m.log)
			}
			queue = cases
		} else if rt.tooLate() {
			// The rest of the batch would likely not finish: it stays
			// never started, for the next run.
			quit(MsgNoRuntime)
			return nil
		}
		c := queue[0]
		queue = queue[1:]
		start := time.Now()
		if err := sw.Start(c.ID, start); err != nil {
			return err
		}
		code, sig, err := m.runCase(runner, c)
		d := time.Since(start)
		if err != nil {
			return fmt.Errorf("case %d: %w", c.ID, err)
		}
		bs.observe(d)
		stopped := stopSig.Load() != 0
		if !stopped && sig != 0 {
			// A stop signal sent to the whole job (Slurm's time limit,
			// scancel) kills the case and reaches us at the same time, but
			// Go hands it to us through a channel, which may come after
			// the case's exit status: give it a moment.
			select {
			case <-stopCh:
				stopped = true
			case <-time.After(500 * time.Millisecond):
			}
		}
		if stopped && sig != 0 {
			// Killed by the job's stop signal: the case did not fail, it
			// was cut short.
			sw.Interrupted(c.ID, sig, start, d)
			quit(MsgStopped)
			return nil
		}
		if err := sw.End(c.ID, code, start, d); err != nil {
			return err
		}
		if stopped { // the case ended by itself as the stop came
			quit(MsgStopped)
			return nil
		}
		rt.finished++
		if ff.add(code, d) {
			quit(MsgFastFailure)
			return ErrFastFailure
		}
		if simple {
			quit(MsgSimpleDone)
			return nil
		}
	}
}

// BatchSeconds is about how much work a meta-job claims in one commit once
// it knows how long its cases take: short cases are claimed many at a time,
// so that the shared filesystem sees about one commit a second per
// meta-job, however short they are.
const BatchSeconds = 1.0

// MaxBatch caps the cases claimed in one commit.
const MaxBatch = 1024

// batchSizer picks how many cases the next claim takes: one at first, then
// about BatchSeconds of work by the mean time of the cases run so far (at
// most doubling from one claim to the next), never more than fit in the
// job's remaining time.
type batchSizer struct {
	max   int // 0: MaxBatch
	k     int
	n     int
	total time.Duration
}

func (b *batchSizer) observe(d time.Duration) {
	b.n++
	b.total += d
}

func (b *batchSizer) next(rt *runtimeGuard) int {
	lim := b.max
	if lim == 0 {
		lim = MaxBatch
	}
	if b.k == 0 || b.n == 0 {
		b.k = 1
		return min(b.k, lim)
	}
	mean := b.total.Seconds() / float64(b.n)
	want := lim
	if mean > 0 {
		want = int(BatchSeconds / mean)
	}
	if end := endTime(rt.backendEnd); !end.IsZero() && mean > 0 {
		// What fits before the end, less the cutoff margin.
		fit := int((time.Until(end).Seconds() - rt.cutoff) / mean)
		want = min(want, fit)
	}
	b.k = max(1, min(want, 2*b.k, lim))
	return b.k
}

// runCase makes the case's directory and runs single_case.sh for c.
func (m *Metajob) runCase(r caseRunner, c casetable.Case) (code, sig int, err error) {
	id := strconv.FormatInt(c.ID, 10)
	if m.Farm.Config.RunDirs {
		// Made here, not in single_case.sh: a mkdir process per case would
		// cost more than the rest of the case's overhead together. No
		// inode left, a quota, an I/O error: retried, as a claim is.
		err := retryTransient(m.log, TransientRetry, func() error {
			err := unix.Mkdirat(int(m.dirFD.Fd()), "RUN"+id, 0o755)
			if err == unix.ESTALE {
				// The farm directory's handle went stale (an NFS
				// failover): look it up again.
				if fd, oerr := os.OpenFile(m.Farm.Dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); oerr == nil {
					m.dirFD.Close()
					m.dirFD = fd
				}
			}
			if err != nil && err != unix.EEXIST {
				return &os.PathError{Op: "mkdir", Path: m.Farm.Path("RUN" + id), Err: err}
			}
			return nil
		})
		if err != nil {
			return 0, 0, err
		}
	}
	return r.run(id, c.Command)
}

// fastFailure detects a meta-job whose first max cases all failed quickly:
// a sign of a broken node, not of broken cases. Successes never count.
type fastFailure struct {
	max   int
	short time.Duration
	seen  int
	fails int
}

// add records one case and reports whether the meta-job should stop.
func (f *fastFailure) add(code int, d time.Duration) bool {
	if f.max <= 0 || f.seen >= f.max {
		return false
	}
	f.seen++
	if code != 0 && d < f.short {
		f.fails++
	}
	return f.seen == f.max && f.fails == f.max
}

// runtimeGuard is the runtime-aware exit: every case's duration is in the
// farm-wide record (the status files) and counted in the claim state; once 8
// cases have finished farm-wide, dt_cutoff is the upper 12.5% quantile of the
// durations, recomputed at 16, 32, 64, ... cases. Before each claim, a
// meta-job whose remaining wall time is below dt_cutoff exits instead of
// starting a case it would likely not finish.
type runtimeGuard struct {
	backendEnd time.Time
	finished   int64   // cases this meta-job finished since its last claim
	cutoff     float64 // dt_cutoff as of the last claim
	recompute  bool
	stop       bool
}

// FirstCutoffAt is the number of finished cases at which dt_cutoff is first
// computed; it is recomputed each time that count doubles.
const FirstCutoffAt = 8

// before runs on the state a claim would commit; it may run more than once
// for one claim (when another meta-job committed first), so it changes only
// the State and flags that it sets afresh each time.
func (g *runtimeGuard) before(st *casetable.State) error {
	st.Done += g.finished
	if st.Next == 0 {
		st.Next = FirstCutoffAt
	}
	g.recompute, g.stop = false, false
	if st.Done >= st.Next {
		g.recompute = true // this meta-job recomputes; the others need not
		for st.Done >= st.Next {
			st.Next *= 2
		}
	}
	g.cutoff = st.Cutoff
	if end := endTime(g.backendEnd); !end.IsZero() {
		left := time.Until(end)
		if left <= 0 || left.Seconds() < st.Cutoff {
			g.stop = true
			return casetable.ErrStop
		}
	}
	return nil
}

// claimed is called after a claim committed: its finished cases are counted.
func (g *runtimeGuard) claimed() { g.finished = 0 }

// tooLate reports whether the job's remaining time is below dt_cutoff, as
// known at the last claim: the next case would likely not finish.
func (g *runtimeGuard) tooLate() bool {
	end := endTime(g.backendEnd)
	if end.IsZero() {
		return false
	}
	left := time.Until(end)
	return left <= 0 || left.Seconds() < g.cutoff
}

// update recomputes dt_cutoff from every recorded duration and stores it.
func (g *runtimeGuard) update(ctx context.Context, store *casetable.Store, statusDir string, out io.Writer) {
	d, err := status.Durations(statusDir)
	if err != nil || len(d) == 0 {
		return
	}
	n := len(d)
	cutoff := status.UpperQuantile(d, 0.125)
	if err := store.Update(ctx, func(st *casetable.State) error {
		st.Cutoff = cutoff
		return nil
	}); err == nil {
		fmt.Fprintf(out, "farm: dt_cutoff = %.3fs (upper 12.5%% quantile of %d case durations)\n", cutoff, n)
	}
}
