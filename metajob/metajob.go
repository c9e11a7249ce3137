// Package metajob is the meta-job loop that runs inside each job of a farm:
// claim the next cases (casetable), run single_case.sh on each in a bash
// worker it keeps (caserun.go), record each case's start and end (status),
// until no case is left, the job's time is nearly up (the runtime-aware
// exit), its first cases all fail fast, or a stop signal comes.
package metajob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/farm-hpc/farm/atomicfile"
	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/casetable"
	"github.com/farm-hpc/farm/farm"
	"github.com/farm-hpc/farm/fsretry"
	"github.com/farm-hpc/farm/layout"
	"github.com/farm-hpc/farm/status"
	"github.com/farm-hpc/farm/tablefmt"
	"golang.org/x/sys/unix"
)

// Metajob runs the meta-job loop inside a job: claim the next cases, run
// single_case.sh on each, record its start and end, and repeat until no
// case is left, the job's time is nearly up, or a stop signal comes.
type Metajob struct {
	Farm    *farm.Farm
	Backend backend.Backend
	Env     farm.JobEnv // the job's environment (ParseJobEnv)
	Out     io.Writer   // the job's output (OUTPUT/slurm-$JOBID.out); must be an *os.File

	self  backend.Self
	log   io.Writer // Out, retrying transient errors (fsretry.Writer); safe for the loops
	bash  string
	dirMu sync.Mutex
	dirFD *os.File // the farm directory, for the *at calls
	sw    *status.Writer
	swMu  sync.Mutex // the loops share sw
	loops []*loop
	stop  stopWatch
	out   *os.File // the job's output file itself, for the runners of programs

	// What the job packs its cases into (pack.go).
	pool       *pool
	wholeNode  bool
	jobSetsOMP bool // the job's environment sets OMP_NUM_THREADS: cases keep it

	wg        sync.WaitGroup // the loops
	ends      []loopEnd      // how each loop ended (under mu)
	grown     bool           // the loops beyond the first were started (under mu)
	ff        fastFailure    // the job's, outside WHOLE_NODE mode (under mu)
	ffTripped bool

	// Claiming is shared by the loops: mu guards the claim store, the
	// cases claimed and not started yet, and the counters of the claims.
	mu     sync.Mutex
	store  *casetable.Store
	queue  []tablefmt.Case
	batch  int // claims made: a loop refreshes its copy of single_case.sh at each
	rt     *runtimeGuard
	bs     batchSizer
	halted bool // a loop ended with an error: the others take no more cases

	retries     []pendingRetry // failed cases to run again (retry.go)
	retriesLeft int            // retries taken and not started: left, failed, for the next run
	tableDone   bool           // a claim found no case left: only retries remain
	// idleSince is when a claim found no case left, for WAIT_FOR_CASES
	// (wait.go); zero after a claim that found some.
	idleSince time.Time

	table      string           // the run's table (one per meta-job), set at its first claim
	tableLines map[string]int64 // the lines of each table its cases came from

	// The look at the run (look.go), under mu.
	news       runNews          // the last news of the run
	looked     time.Time        // the last look; zero before the first news
	superseded string           // why the run is no longer the current one; "" while it is
	silent     time.Duration    // how long the meta-job had had no news of it then
	left       int              // the cases it then held, not started
	clock      func() time.Time // nil: time.Now

	// Rescue within the run (rescue.go): nil when off. rescued are the
	// cases handed to the job by its rescues, run before its next claim.
	rescue  *rescuer
	rescued []rescuedCase
	// wardenSaid: the job said it stays as the run's warden (rescue.go).
	wardenSaid bool
	rescuedBy  string // the meta-job that rescued this one's cases, once found
}

// loop is one of the loops of a meta-job: one in the usual mode, NWHOLE in
// WHOLE_NODE mode, each running one case at a time with its own case
// runner, all claiming through the meta-job's one claim store.
type loop struct {
	k      int // from 1
	runner caseRunner
	ff     fastFailure
	batch  int // the claim whose cases it takes now
	retry  int // which retry its case is (0: its first attempt in the run)
	// why and from: its case is rescued from a dead job (rescue.go).
	why, from string
	// hostsFor is what its hostfiles hold now (loop.hostfiles).
	hostsFor    string
	hostsFailed bool
}

// Run runs the loop. It returns nil at a normal end.
func (m *Metajob) Run(ctx context.Context) error {
	// From the start: a stop signal must not kill the meta-job before it
	// has recorded anything.
	m.stop.watch()
	defer m.stop.end()
	defer m.close()
	if err := m.open(ctx); err != nil {
		return err
	}
	f, again := m.Farm, ""
	if m.self.Restart > 0 {
		again = fmt.Sprintf(", restarted by the batch system (restart %d)", m.self.Restart)
	}
	fmt.Fprintf(m.log, "farm: meta-job %s (run %d%s) on %s starting at %s\n", m.self.ID, m.Env.Run, again, f.Host, time.Now().Format(time.RFC3339))
	return m.runLoops(ctx)
}

// open gets what the loop needs: the job's identity, the claim store, the
// job's status file, the case runner and the farm directory's handle. What
// it opened is closed by close, even when it fails half-way.
func (m *Metajob) open(ctx context.Context) error {
	f := m.Farm
	out, ok := m.Out.(*os.File)
	if !ok {
		return errors.New("meta-job output must be a file")
	}
	// The output file may be on the farm's filesystem: a full disk must
	// not lose what the meta-job and its cases say meanwhile.
	m.log = &lockedWriter{w: &fsretry.Writer{F: out}} // the loops of WHOLE_NODE share it
	var err error
	if m.self, err = m.Backend.Self(ctx, backend.SelfRequest{Env: m.Env.Getenv, NoEnd: m.Env.Simple}); err != nil {
		return err
	}
	if m.Env.Run < 1 {
		return fmt.Errorf("%s is not set to a run number: a meta-job must be started by 'farm submit'", farm.EnvRun)
	}
	if m.bash, err = exec.LookPath("bash"); err != nil {
		return err
	}
	if err := f.EnsureDirs(); err != nil {
		return err
	}
	m.store = f.Store()
	m.store.Job, m.store.Log = m.self.ID, m.log
	// A restarted job (same ID) writes a file of its own: its earlier
	// incarnation may still be running on a node the batch system lost.
	m.out = out
	m.pool = m.newPool()
	capacity := status.Capacity{CPUs: m.pool.cpus(), GPUs: len(m.pool.gpus) * len(m.pool.nodes)}
	if m.sw, err = status.CreateCap(f.Path(layout.StatusDir, layout.StatusFile(m.self.ID, m.self.Restart)), m.self.ID, m.self.Restart, m.Env.Run, f.Host, capacity, m.log); err != nil {
		return err
	}
	if err := m.openLoops(); err != nil {
		return err
	}
	if m.rescue = newRescuer(m); m.rescue != nil {
		m.sw.SyncStarts = !localFilesystem(f.Dir)
	}
	// RUN directories are made relative to the open farm directory: one
	// lookup at the server instead of one per component of the path.
	m.dirFD, err = os.OpenFile(f.Dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	return err
}

// close closes what open opened.
func (m *Metajob) close() {
	if m.dirFD != nil {
		m.dirFD.Close()
	}
	for _, s := range m.loops {
		s.runner.close()
	}
	if m.sw != nil {
		m.sw.Close()
	}
	if m.store != nil {
		m.store.Close()
	}
}

// caseEnv is the cases' environment: the job's, less what is set per case,
// plus METAJOB_ID.
func caseEnv(environ []string, job string) []string {
	var env []string
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if k != "ID" && k != "COMM" && k != "METAJOB_ID" && k != "N_cases" && k != "STATUS" && k != "FARM_LOOP" {
			env = append(env, kv)
		}
	}
	return append(env, "METAJOB_ID="+job)
}

// stopWatch catches the signals that stop a job: a stop signal (time
// limit, cancel) reaches the whole job, the running case included, and is
// remembered so that the case is recorded as interrupted.
type stopWatch struct {
	sig  atomic.Int32   // the first stop signal; 0 until one came
	ch   chan struct{}  // closed at the first stop signal
	sigs chan os.Signal // from signal.Notify
	done chan struct{}  // closed when the watching goroutine has ended
}

// watch starts watching.
func (w *stopWatch) watch() {
	w.ch, w.sigs, w.done = make(chan struct{}), make(chan os.Signal, 4), make(chan struct{})
	signal.Notify(w.sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGUSR1)
	go func() {
		defer close(w.done)
		for s := range w.sigs {
			// A signal sent to the whole job already reached the case;
			// one sent to us alone is passed on to our process group (the
			// case and its worker) the first time.
			if w.sig.Swap(int32(s.(syscall.Signal))) == 0 {
				close(w.ch)
				syscall.Kill(0, s.(syscall.Signal))
			}
		}
	}()
}

// end stops watching and waits for the watching goroutine to end.
func (w *stopWatch) end() {
	signal.Stop(w.sigs)
	close(w.sigs) // no signal is sent on it once Stop has returned
	<-w.done
}

// stopped reports whether a stop signal came.
func (w *stopWatch) stopped() bool { return w.sig.Load() != 0 }

// runLoops claims and runs cases until one of the meta-job's ends: in each of
// its loops at once, and the meta-job ends when the last loop does. It
// starts one loop (NWHOLE in WHOLE_NODE mode), and the others, up to one
// per CPU of the job, once a case declares needs smaller than the job.
func (m *Metajob) runLoops(ctx context.Context) error {
	m.rt = &runtimeGuard{end: endSources{backend: m.self.End, jobFeatures: m.Env.JobFeatures, machineFeatures: m.Env.MachineFeatures},
		misc: m.Farm.Path(layout.MiscDir)}
	if end := m.rt.end.at(); !end.IsZero() {
		fmt.Fprintf(m.log, "farm: this job ends at %s\n", end.Format(time.RFC3339))
	}
	m.bs = batchSizer{}
	m.ff = fastFailure{max: m.Farm.Config.NFailedMax, short: m.Farm.Config.DtFailed}
	if m.Env.Simple {
		m.bs.max = 1
	}
	done := make(chan struct{})
	defer close(done)
	if m.rescue != nil {
		m.rescue.start(ctx)
		defer m.rescue.halt() // (already halted on the normal path)
	}
	go func() {
		select {
		case <-m.stop.ch:
			m.pool.stop() // loops waiting for their turn stop
		case <-done:
		}
	}()
	if m.wholeNode {
		fmt.Fprintf(m.log, "farm: WHOLE_NODE: %d loops, each running one case at a time\n", len(m.loops))
	}
	m.mu.Lock()
	for _, s := range m.loops {
		m.startLoop(ctx, s)
	}
	m.mu.Unlock()
	m.wg.Wait()
	if m.rescue != nil {
		m.rescue.halt() // before the last records: it writes to the status file too
	}
	if n := len(m.retries) + m.retriesLeft; n > 0 {
		fmt.Fprintf(m.log, "farm: %d failed case(s) due to run again are left, failed, for the next run ('farm resubmit')\n", n)
	}
	return m.quit(jobEnd(m.ends))
}

// startLoop starts loop s. m.mu is held.
func (m *Metajob) startLoop(ctx context.Context, s *loop) {
	s.ff = fastFailure{max: m.Farm.Config.NFailedMax, short: m.Farm.Config.DtFailed}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		why, err := m.runLoop(ctx, s)
		m.mu.Lock()
		m.ends = append(m.ends, loopEnd{why, err})
		several := len(m.loops) > 1
		if err != nil {
			m.halted = true // the other loops take no more cases
		}
		m.mu.Unlock()
		switch {
		case !several || why == stopHalted || why == stopSuperseded:
		case err != nil:
			fmt.Fprintf(m.log, "farm: loop %d: %v\n", s.k, err)
		case why.line() != "":
			fmt.Fprintf(m.log, "farm: loop %d: %s\n", s.k, why.line())
		}
	}()
}

// growLoops starts the meta-job's other loops, up to one per CPU of the
// job, the first time a case declares needs (outside WHOLE_NODE mode,
// where they all run from the start). m.mu is held.
func (m *Metajob) growLoops(ctx context.Context) {
	if m.grown || m.wholeNode || m.Env.Simple {
		return
	}
	m.grown = true
	n := m.pool.cpus()
	if n > 1 {
		on := ""
		if k := len(m.pool.nodes); k > 1 {
			on = fmt.Sprintf(" on %d nodes", k)
		}
		fmt.Fprintf(m.log, "farm: cases declare what they need: up to %d at once in this job's %d CPUs%s\n", n, n, on)
	}
	for k := len(m.loops) + 1; k <= n; k++ {
		s, err := m.newLoop(k)
		if err != nil {
			fmt.Fprintf(m.log, "farm: starting loop %d: %v; the job goes on with %d\n", k, err, len(m.loops))
			return
		}
		m.loops = append(m.loops, s)
		m.startLoop(ctx, s)
	}
}

// loopEnd is how one loop ended: why, or with an error.
type loopEnd struct {
	why stop
	err error
}

// jobEnd is the end of a meta-job whose loops ended so: the first error,
// else the strongest of their stops (stop's order: the run superseded, a
// stop signal, the run-time, no case left); fast-failure protection ends
// the job only when it ended every loop; no loop: no case left.
func jobEnd(ends []loopEnd) (stop, error) {
	why := going
	for _, e := range ends {
		if e.err != nil {
			return e.why, e.err
		}
		why = max(why, e.why)
	}
	if why <= stopHalted {
		why = stopNoCases
	}
	return why, nil
}

// runLoop is loop s: take the next claimed case (claiming more
// when none is left), run it, until one of the ends; it returns why it
// ended, or the error it ended with.
func (m *Metajob) runLoop(ctx context.Context, s *loop) (stop, error) {
	for {
		if m.stop.stopped() {
			return stopSignal, nil
		}
		c, w, t, why, err := m.next(ctx, s)
		if why != going || err != nil {
			return why, err
		}
		g, ok := m.pool.acquire(t, w, s.k-1)
		if !ok {
			m.retryNotStarted(s)
			return m.notStarted(), nil
		}
		if start, why, err := m.stillStarts(ctx, c, w, s.retry, s.from); !start {
			// Waited for its turn past a stop, the run-time or its
			// min_time: not started.
			m.retryNotStarted(s)
			m.pool.release(g)
			if why != going || err != nil {
				return why, err
			}
			continue // recorded unfit; the next
		}
		code, d, why, err := m.runPacked(ctx, s, c, w, g)
		m.pool.release(g)
		if why != going || err != nil {
			return why, err
		}
		if code != 0 {
			m.failed(c, s.retry, code)
		}
		if m.ended(s, code, d) {
			return stopFastFailure, nil
		}
		if m.Env.Simple && !m.simpleRetries() {
			return stopSimpleDone, nil
		}
	}
}

// notStarted is why a loop ends whose case was not started because the
// pool stopped while it waited for its turn: its run superseded (look),
// or a stop signal.
func (m *Metajob) notStarted() stop {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.superseded != "" {
		m.left++ // its case
		return stopSuperseded
	}
	return stopSignal
}

// stillStarts reports whether case c (its retry-th retry; 0: its first
// attempt) may still start once its turn came
// (it may have waited long): not after a stop signal (stopSignal),
// nor when the meta-job's run is no longer the current one (stopSuperseded;
// looked at once every LookEvery, look.go), nor when the job's time
// left is below the runtime cutoff (stopNoRuntime), nor when it is below c's
// min_time (c is recorded unfit, going: the loop goes on; a retry is
// not recorded: it stays failed).
func (m *Metajob) stillStarts(ctx context.Context, c tablefmt.Case, w want, retry int, from string) (bool, stop, error) {
	if m.stop.stopped() {
		return false, stopSignal, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, why, err := m.look(ctx, 1); why != going || err != nil {
		return false, why, err
	}
	if m.rt.tooLate() {
		return false, stopNoRuntime, nil
	}
	if why := m.pool.unfit(w, c.Needs.MinTime, m.rt.left()); why != "" {
		if retry > 0 && from == "" {
			return false, going, nil // stays failed: counted by retryNotStarted
		}
		return false, going, m.recordUnfit(c, why)
	}
	return true, going, nil
}

// ended counts case ended with code after d: the job's pace, its longest
// case (the runtime-aware exit), and fast-failure protection (first attempts
// only) — per loop in
// WHOLE_NODE mode (as META's loops each have theirs), else for the whole
// job, however many loops run its cases. It reports whether the loop must
// stop.
func (m *Metajob) ended(s *loop, code int, d time.Duration) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.bs.observe(d)
	m.rt.observe(d)
	if s.retry > 0 {
		// Fast-failure protection judges the node by first attempts:
		// the retries of one bad case must not make a healthy node
		// look broken (a broken node fails the next cases too).
		return !m.wholeNode && m.ffTripped
	}
	if m.wholeNode {
		return s.ff.add(code, d)
	}
	if m.ff.add(code, d) {
		m.ffTripped = true
	}
	return m.ffTripped
}

// next hands loop s the next claimed case, claiming a batch when none is
// left; or why loop s ends (no case left, not enough time, ...), or an
// error.
func (m *Metajob) next(ctx context.Context, s *loop) (tablefmt.Case, want, uint64, stop, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for {
		if why := m.ending(); why != going { // found by another loop, or came while this one waited
			return tablefmt.Case{}, want{}, 0, why, nil
		}
		r, retry, again, why, err := m.fill(ctx)
		if again {
			continue
		}
		if why != going || err != nil {
			return tablefmt.Case{}, want{}, 0, why, err
		}
		// Is the run still the meta-job's (a job frozen with cases
		// queued)? Only a look at the clock within LookEvery.
		if _, why, err := m.look(ctx, 0); why != going || err != nil {
			if retry && r.from == "" {
				m.retriesLeft++
			}
			return tablefmt.Case{}, want{}, 0, why, err
		}
		if s.batch != m.batch {
			// Pick up an edited single_case.sh, once per batch of cases.
			s.batch = m.batch
			if err := s.runner.refresh(); err != nil {
				return tablefmt.Case{}, want{}, 0, going, fmt.Errorf("before running more cases: %w", err)
			}
		}
		c := r.c
		s.retry, s.why, s.from = r.retry, r.why, r.from
		if !retry {
			c = m.queue[0]
			m.queue = m.queue[1:]
		}
		w := m.pool.wants(c.Needs, m.wholeNode)
		if why := m.pool.unfit(w, c.Needs.MinTime, m.rt.left()); why != "" {
			if retry && r.from == "" {
				m.retriesLeft++ // it stays failed, for the next run
				continue
			}
			if err := m.recordUnfit(c, why); err != nil {
				return tablefmt.Case{}, want{}, 0, going, err
			}
			continue
		}
		if c.Needs.Declared {
			m.growLoops(ctx)
		}
		return c, w, m.pool.ticket(), going, nil
	}
}

// ending is why every loop of the job ends, whichever finds it: another
// loop's error, the job's fast-failure protection, a stop signal, the run
// superseded; going if none. m.mu is held.
func (m *Metajob) ending() stop {
	switch {
	case m.halted:
		return stopHalted
	case m.ffTripped:
		return stopFastFailure
	case m.stop.stopped():
		return stopSignal
	case m.superseded != "":
		return stopSuperseded
	}
	return going
}

// fill readies the next case for next: a retry that is due, else the
// batch's next case, claiming a batch when none is left. It reports the
// retry (retry) if that is it; again when next must look again (the table
// ran out while retries remain, or a wait for one ended); or why the loop
// ends. m.mu is held.
func (m *Metajob) fill(ctx context.Context) (r pendingRetry, retry, again bool, why stop, err error) {
	if r, ok := m.dueRetry(); ok {
		if m.rt.tooLate() {
			m.retries = append([]pendingRetry{r}, m.retries...)
			return r, false, false, stopNoRuntime, nil
		}
		return r, true, false, going, nil
	}
	if len(m.rescued) > 0 {
		if m.rt.tooLate() {
			// Left in this job's C record: rescued again once it ends.
			return r, false, false, stopNoRuntime, nil
		}
		r = m.rescued[0]
		m.rescued = m.rescued[1:]
		return r, true, false, going, nil
	}
	if len(m.queue) > 0 {
		if m.rt.tooLate() {
			// The rest of the batch would likely not finish: it stays
			// never started, for the next run.
			return r, false, false, stopNoRuntime, nil
		}
		return r, false, false, going, nil
	}
	if m.tableDone {
		if m.awaitRetry() || m.awaitRescue() {
			return r, false, true, going, nil
		}
		return r, false, false, stopNoCases, nil
	}
	// Before a claim, the look, if due: a set 'farm add --first' put
	// first is claimed in next.
	if _, why, err := m.look(ctx, 0); why != going || err != nil {
		return r, false, false, why, err
	}
	t := time.Now()
	cases, why, err := m.claim(ctx, m.rt, m.bs.next(m.rt, m.store.Ahead()))
	m.bs.claimed(time.Since(t), len(cases))
	if why == stopNoCases && err == nil {
		if again, why, err := m.awaitCases(ctx); again || why != going || err != nil {
			return r, false, again, why, err // again: cases may have been added
		}
	}
	if len(cases) > 0 {
		m.idleSince = time.Time{}
	}
	if why == stopNoCases && err == nil && (len(m.retries) > 0 || m.rescue != nil) {
		m.tableDone = true // the last claim; what is left is retries and rescues
		return r, false, true, going, nil
	}
	if why != going || err != nil {
		return r, false, false, why, err
	}
	return r, false, false, going, m.queued(cases)
}

// queued makes cases, just claimed, the job's queue: the larger first in a
// job of several nodes; with rescue on, recorded in its status file at
// once. m.mu is held.
func (m *Metajob) queued(cases []tablefmt.Case) error {
	m.queue = cases
	if len(m.pool.nodes) > 1 {
		// A job of several nodes starts the larger cases of a batch
		// first, so that small ones do not split the nodes the large
		// ones need (METAQ does so too).
		m.queue = slices.Clone(cases)
		slices.SortStableFunc(m.queue, func(a, b tablefmt.Case) int {
			return m.pool.size(m.pool.wants(b.Needs, m.wholeNode)) - m.pool.size(m.pool.wants(a.Needs, m.wholeNode))
		})
	}
	m.batch++
	if m.rescue == nil {
		return nil
	}
	// What it holds, should it die: written at once (and synced on a
	// network filesystem), for the rescue (rescue.go).
	ids := make([]int64, len(cases))
	for i, c := range cases {
		ids[i] = c.ID
	}
	m.swMu.Lock()
	defer m.swMu.Unlock()
	return m.sw.Claimed(ids, time.Now(), "", nil)
}

// recordUnfit records that case c was taken and is not started, and why.
func (m *Metajob) recordUnfit(c tablefmt.Case, why string) error {
	fmt.Fprintf(m.log, "farm: case %d not started: it %s; it is left for the next run\n", c.ID, why)
	m.swMu.Lock()
	defer m.swMu.Unlock()
	return m.sw.Unfit(c.ID, time.Now(), "it "+why)
}

// runPacked runs case c, which wants w, on what it was granted: bound to
// its CPUs and with its settings when it is managed.
func (m *Metajob) runPacked(ctx context.Context, s *loop, c tablefmt.Case, w want, g grant) (int, time.Duration, stop, error) {
	var cpus []int
	if w.managed {
		cpus = m.pool.bound(g)
	}
	s.runner.bind(cpus) // nil: the job's CPUs, as an unmanaged case has them
	p := status.Placement{CPUs: cpus}
	if w.managed && len(g.parts) > 0 {
		p.GPUs = g.parts[0].gpus
	}
	if len(m.loops) > 1 {
		p.Loop = s.k
	}
	p.Retry, p.Why, p.From = s.retry, s.why, s.from
	set := m.pool.setting(w, g, cpus, m.jobSetsOMP)
	names, per := m.pool.nodesOf(g)
	if len(m.pool.nodes) > 1 {
		p.Nodes = backend.CompressHosts(names)
	}
	hostfile, machinefile := s.hostfiles(names, per, m.log)
	set.nodes = nodeEnv(names, per, hostfile, machinefile)
	return m.runOne(ctx, s, c, p, set)
}

// hostfiles returns the paths of loop s's hostfile and machine file for a
// case on nodes names with cpus each (pack.go's hostfiles), written in
// its runner's node-local directory when they change; "" if it has none
// or they cannot be written (said once on w).
func (s *loop) hostfiles(names []string, cpus []int, w io.Writer) (string, string) {
	dir := s.runner.scratch()
	if dir == "" || len(names) == 0 {
		return "", ""
	}
	key := fmt.Sprint(names, cpus)
	h, mf := filepath.Join(dir, "hostfile"), filepath.Join(dir, "machinefile")
	if key == s.hostsFor {
		return h, mf
	}
	hosts, machines := hostfiles(names, cpus)
	for _, f := range []struct{ path, text string }{{h, hosts}, {mf, machines}} {
		if err := atomicfile.WriteBytes(f.path, 0o644, []byte(f.text)); err != nil {
			if !s.hostsFailed {
				fmt.Fprintf(w, "farm: writing the hostfile of loop %d: %v; its cases get no FARM_HOSTFILE\n", s.k, err)
			}
			s.hostsFor, s.hostsFailed = "", true
			return "", ""
		}
	}
	s.hostsFor = key
	return h, mf
}

// quit ends the meta-job, for why or with err: its last line goes to the
// job's output and its status file (a table changed says so; another error
// is Run's to say); it returns what Run returns.
func (m *Metajob) quit(why stop, err error) error {
	line := why.line()
	var changed *casetable.TableChangedError
	switch {
	case errors.As(err, &changed):
		line = "farm: " + changed.Error()
	case err != nil:
		line = ""
	case why == stopSuperseded:
		line = m.supersededLine()
	case why == stopFastFailure:
		err = ErrFastFailure
	}
	if line != "" {
		key := why.String()
		if err != nil {
			key = "failed" // the table changed
		}
		fmt.Fprintln(m.log, line)
		m.sw.Quit(key, line)
	}
	return err
}

// claim claims the next batch of at most n cases. It returns them, or why
// the loop ends (no case left, not enough time, the run superseded), or an
// error. m.mu is held.
func (m *Metajob) claim(ctx context.Context, rt *runtimeGuard, n int) ([]tablefmt.Case, stop, error) {
	// The last case's end record is written before the claim that counts
	// it as finished.
	m.swMu.Lock()
	err := m.sw.Flush()
	m.swMu.Unlock()
	if err != nil {
		return nil, going, err
	}
	if rt.shortOfTime(time.Now()) {
		return nil, stopNoRuntime, nil
	}
	asOf := m.now() // a claim that commits says the run was current then, or later
	cases, err := m.store.Claim(ctx, m.Env.Run, n)
	var changed *casetable.TableChangedError
	if errors.As(err, &changed) {
		// Said in the job's output and its status file (farm Status
		// shows it: quit), and the job ends with an error.
		return nil, going, changed
	}
	if err := damageAdvice("claiming a case", err); err != nil {
		return nil, going, err
	}
	if err != nil {
		return nil, going, fmt.Errorf("claiming a case: %w", err)
	}
	if why := m.claimNews(asOf, len(cases)); why != going {
		return nil, why, nil
	}
	if len(cases) == 0 {
		return nil, stopNoCases, nil
	}
	if st := m.store.Last(); m.table == "" {
		m.table = st.Table // the run's own: what rescue reads first
	}
	if k, ok := rt.due(m.Env.Run, m.store.ClaimedInRun()); ok {
		rt.recompute(k, m.Env.Run, m.store.ClaimedInRun(), m.Farm.Path(layout.StatusDir), m.log)
	}
	return cases, going, nil
}

// damageAdvice is err, met doing what, with the advice that mends it if it
// is damage to the claim state; nil if it is not damage.
func damageAdvice(what string, err error) error {
	var de *casetable.DamageError
	if !errors.As(err, &de) {
		return nil
	}
	return fmt.Errorf("%s: %w: this meta-job claims nothing more; once the farm's jobs have ended ('farm wait', or 'farm kill'), 'farm repair' rebuilds it from the status records and 'farm resubmit' runs what is left", what, err)
}

// linesOf is the number of lines of table, for scripts written for META
// (N_cases): counted once per meta-job and table; 0 if it cannot be read.
func (m *Metajob) linesOf(table string) int64 {
	m.mu.Lock()
	n, ok := m.tableLines[table]
	m.mu.Unlock()
	if ok || table == "" {
		return n
	}
	n, _ = tablefmt.CountLines(m.Farm.Path(table))
	m.mu.Lock()
	if m.tableLines == nil {
		m.tableLines = map[string]int64{}
	}
	m.tableLines[table] = n
	m.mu.Unlock()
	return n
}

// startsAfterRecord is the lease's last look before a case whose start
// record is written runs: not if its cases were rescued meanwhile, nor if
// its run is no longer the current one (look, due once LookEvery passed —
// a job frozen between stillStarts's look and the record; only a look at
// the clock otherwise). A job frozen before the record, which resumes, so
// starts no case that the next run ran or a rescuer took; one frozen after
// it has a case running, which runs on (look.go).
// It returns stopSuperseded, or an error reading the claim state.
func (m *Metajob) startsAfterRecord(ctx context.Context) (stop, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, why, err := m.look(ctx, 1)
	return why, err
}

// runOne runs case c and records its start and end. It returns the case's
// exit code and duration, or why the loop ends (a stop signal came, the
// run superseded), or an error.
func (m *Metajob) runOne(ctx context.Context, s *loop, c tablefmt.Case, p status.Placement, set caseSetting) (code int, d time.Duration, why stop, err error) {
	start := time.Now()
	m.swMu.Lock()
	err = m.sw.StartAt(c.ID, start, p)
	m.swMu.Unlock()
	if err != nil {
		return 0, 0, going, err
	}
	why, err = m.startsAfterRecord(ctx)
	if why != going || err != nil {
		// Its cases were rescued while it was stopped, or its run was
		// superseded: this one too is left, and never runs here.
		m.swMu.Lock()
		m.sw.Interrupted(c.ID, 0, start, 0)
		m.swMu.Unlock()
		return 0, 0, why, err
	}
	code, sig, err := m.runCase(s.runner, c, set)
	d = time.Since(start)
	if err != nil {
		return 0, 0, going, fmt.Errorf("case %d: %w", c.ID, err)
	}
	stopped := m.stop.stopped()
	if !stopped && sig != 0 {
		// A stop signal sent to the whole job (Slurm's time limit,
		// scancel) kills the case and reaches us at the same time, but
		// Go hands it to us through a channel, which may come after the
		// case's exit status: give it a moment.
		select {
		case <-m.stop.ch:
			stopped = true
		case <-time.After(500 * time.Millisecond):
		}
	}
	if stopped && sig != 0 {
		// Killed by the job's stop signal: the case did not fail, it was
		// cut short.
		m.swMu.Lock()
		m.sw.Interrupted(c.ID, sig, start, d)
		m.swMu.Unlock()
		return 0, 0, stopSignal, nil
	}
	m.swMu.Lock()
	err = m.sw.End(c.ID, code, start, d)
	m.swMu.Unlock()
	if err != nil {
		return 0, 0, going, err
	}
	if stopped { // the case ended by itself as the stop came
		return 0, 0, stopSignal, nil
	}
	return code, d, going, nil
}

// BatchSeconds is about how much work a meta-job claims in one commit once
// it knows how long its cases take, while claims are cheap: short cases are
// claimed many at a time, so that the shared filesystem sees about one
// commit a second per meta-job, however short they are. When claims get
// expensive — others commit between two of its claims, or win the
// generation it wanted — the store asks for more at a time
// (casetable.Store.Ahead, when on), so that the farm's commits per second fall as its
// meta-jobs multiply.
const BatchSeconds = 1.0

// MaxBatch caps the cases claimed in one commit.
const MaxBatch = 8192

// batchSizer picks how many cases the next claim takes: what the store
// picks at first (casetable.FirstBatch: one case, up to 16 in a run with
// lanes; one when the job has a maximum, as in SIMPLE mode), one while no
// case has ended, then
// about ahead × BatchSeconds of the job's work by the pace at which its
// cases have ended so far — the time since the first started, less the
// time the job spent claiming, over the cases ended: what a case costs the
// job (its run, the records, the loops that run cases at once), and not
// what its claims cost, so that batches do not shrink as claims get slower
// — (at most doubling from one claim, or the first share, to the next),
// never more than fit in the job's remaining time.
type batchSizer struct {
	max      int // 0: MaxBatch
	k        int
	n        int              // cases observed
	first    time.Time        // when the first case observed started
	claiming time.Duration    // time spent in claims since then
	now      func() time.Time // the clock; time.Now if nil
}

func (b *batchSizer) clock() time.Time {
	if b.now != nil {
		return b.now()
	}
	return time.Now()
}

func (b *batchSizer) observe(d time.Duration) {
	if b.n == 0 {
		b.first = b.clock().Add(-d)
	}
	b.n++
}

// claimed counts a claim that took d and handed out n cases: the next
// claim doubles from n at most.
func (b *batchSizer) claimed(d time.Duration, n int) {
	if b.n > 0 {
		b.claiming += d
	}
	b.k = max(b.k, n)
}

// next is the size of the next claim, for a job whose store asks for
// ahead batches' worth at a time.
func (b *batchSizer) next(rt *runtimeGuard, ahead int) int {
	lim := b.max
	if lim == 0 {
		lim = MaxBatch
	}
	if b.k == 0 && b.max == 0 {
		// The first claim: the store sizes it (casetable.FirstBatch: one
		// case, or in a run with lanes a fair first share of the lane).
		b.k = 1
		return casetable.FirstBatch
	}
	if b.k == 0 || b.n == 0 {
		// No case has ended yet (it is running, or none fitted): one at
		// a time; the doubling goes on from the first share, if larger.
		b.k = max(b.k, 1)
		return 1
	}
	mean := (b.clock().Sub(b.first) - b.claiming).Seconds() / float64(b.n)
	want := lim
	if mean > 0 {
		want = int(BatchSeconds * float64(max(ahead, 1)) / mean)
	}
	if end := rt.end.at(); !end.IsZero() && mean > 0 {
		// What fits before the end, less the cutoff margin.
		fit := int((time.Until(end).Seconds() - rt.cutoff) / mean)
		want = min(want, fit)
	}
	b.k = max(1, min(want, 2*b.k, lim))
	return b.k
}

// runCase makes the case's directory and runs single_case.sh for c.
func (m *Metajob) runCase(r caseRunner, c tablefmt.Case, set caseSetting) (code, sig int, err error) {
	id := strconv.FormatInt(c.ID, 10)
	table := c.Table // the table its Line is in: the run's own, or one 'farm add' queued
	if table == "" {
		m.mu.Lock()
		table = m.table
		m.mu.Unlock()
	}
	if m.Farm.Config.RunDirs {
		// Made here, not in single_case.sh: a mkdir process per case would
		// cost more than the rest of the case's overhead together. No
		// inode left, a quota, an I/O error: retried, as a claim is.
		r := fsretry.Retrier{Log: m.log}
		err := r.Do(context.Background(), func() error {
			m.dirMu.Lock()
			dir := m.dirFD
			m.dirMu.Unlock()
			err := unix.Mkdirat(int(dir.Fd()), "RUN"+id, 0o755)
			if err == unix.ESTALE {
				// The farm directory's handle went stale (an NFS
				// failover): look it up again. (The old one stays
				// open: another loop may be using it.)
				m.dirMu.Lock()
				if m.dirFD == dir {
					if fd, oerr := os.OpenFile(m.Farm.Dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); oerr == nil {
						m.dirFD = fd
					}
				}
				m.dirMu.Unlock()
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
	return r.run(caseRequest{ID: id, Comm: c.Command, Table: table, Line: c.Line, TableLines: m.linesOf(table), Set: set})
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
// farm-wide record (the status files); once FirstCutoffAt cases have ended,
// dt_cutoff is the upper 12.5% quantile of the durations. Before each
// claim, a meta-job whose remaining wall time is below dt_cutoff exits
// instead of starting a case it would likely not finish.
//
// dt_cutoff lives in an advisory record, MISC/cutoff (status.Cutoff), not
// in the claim state. It is recomputed at most once per doubling of the
// cases claimed farm-wide, and only when they are at least twice the
// durations it was computed from: by the meta-job that wins that
// doubling's election in the run (an O_EXCL create of MISC/cutoff.R.K, K
// the doubling's number), which reads the status files and rewrites the
// record. A meta-job reads the record when its reading is cutoffReread
// old, when the cases claimed pass a doubling (a new record may be out),
// and, once its end is near (its time left under twice dt_cutoff and its
// longest case), when its reading is nearReread old. A reading that fails
// keeps the last one. A stale reading costs a slightly early or late exit;
// an election whose winner dies, a recomputation until the next doubling.
type runtimeGuard struct {
	end     endSources
	misc    string        // the farm's MISC: the record, the elections
	rec     status.Cutoff // the record, as read last
	readAt  time.Time     // when
	readK   int           // the doubling of the cases claimed then (cutoffDue)
	tried   int           // the last election this job took part in
	cutoff  float64       // dt_cutoff, as read or computed last
	longest float64       // the longest case this job ran, in seconds
}

// FirstCutoffAt is the number of case durations dt_cutoff is first
// computed from.
const FirstCutoffAt = 8

// cutoffReread is how long a reading of dt_cutoff's record serves, and
// nearReread how long once the job's end is near.
const (
	cutoffReread = 30 * time.Second
	nearReread   = 5 * time.Second
)

// read reads the record if the last reading is older than serves; a
// reading that fails keeps the last one.
func (g *runtimeGuard) read(now time.Time, serves time.Duration) {
	if g.misc == "" || now.Sub(g.readAt) < serves {
		return
	}
	g.readAt = now
	if c, ok := status.ReadCutoff(filepath.Join(g.misc, layout.Cutoff)); ok {
		g.rec, g.cutoff = c, c.Seconds
	}
}

// shortOfTime reports whether the job's remaining time is below dt_cutoff
// (or its end has passed): it then claims nothing more. A job whose end is
// not known never is.
func (g *runtimeGuard) shortOfTime(now time.Time) bool {
	end := g.end.at()
	if end.IsZero() {
		return false
	}
	left := end.Sub(now)
	serves := cutoffReread
	if left.Seconds() < 2*max(g.cutoff, g.longest) {
		serves = nearReread
	}
	g.read(now, serves)
	return left <= 0 || left.Seconds() < g.cutoff
}

// observe notes a case of d that the job ran.
func (g *runtimeGuard) observe(d time.Duration) { g.longest = max(g.longest, d.Seconds()) }

// due says whether dt_cutoff is due for a recomputation after a claim that
// left claimed cases of run claimed, and the number of the election that
// decides who recomputes: the cases finished before the run (the record's
// durations, less what its run had claimed if it is this run) and those
// claimed in it, against twice the durations the record was computed
// from. A job that has run no case yet leaves it to those that have (the
// status files may record no duration yet).
func (g *runtimeGuard) due(run int, claimed int64) (int, bool) {
	if g.longest == 0 {
		return 0, false
	}
	k, est := g.estimate(run, claimed)
	if k > g.readK {
		// A doubling passed since the last reading: another meta-job
		// may have rewritten the record.
		g.read(time.Now(), 0)
		g.readK = k
		k, est = g.estimate(run, claimed)
	}
	if est < max(FirstCutoffAt, 2*g.rec.Durations) {
		return 0, false
	}
	return k, k != g.tried
}

// estimate is about how many cases were claimed farm-wide, as the record
// and claimed (cases claimed in run) tell, and the doubling it is in.
func (g *runtimeGuard) estimate(run int, claimed int64) (int, int64) {
	r := g.rec
	before := r.Durations
	if r.Run == run {
		before = max(r.Durations-r.Claimed, 0)
	}
	est := before + claimed
	return bits.Len64(uint64(est)), est
}

// recompute takes part in election k of run: the meta-job that makes
// MISC/cutoff.R.K (O_EXCL) computes dt_cutoff from every recorded duration
// and rewrites the record; the others go on with the one they read. With
// fewer than FirstCutoffAt durations recorded yet it writes nothing and
// gives the election up, for a meta-job that finds more.
func (g *runtimeGuard) recompute(k, run int, claimed int64, statusDir string, out io.Writer) {
	g.tried = k
	election := filepath.Join(g.misc, fmt.Sprintf("%s.%d.%d", layout.Cutoff, run, k))
	f, err := os.OpenFile(election, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return // another meta-job's, or a filesystem that refuses: the record stays
	}
	f.Close()
	d, err := status.Durations(statusDir)
	if err != nil || len(d) < FirstCutoffAt {
		os.Remove(election)
		return
	}
	c := status.Cutoff{Seconds: status.UpperQuantile(d, 0.125), Durations: int64(len(d)), Run: run, Claimed: claimed}
	status.WriteCutoff(filepath.Join(g.misc, layout.Cutoff), c)
	g.rec, g.readAt, g.cutoff = c, time.Now(), c.Seconds
	fmt.Fprintf(out, "farm: dt_cutoff = %.3fs (upper 12.5%% quantile of %d case durations)\n", c.Seconds, len(d))
}

// left is the job's time left; 0 if its end is not known (or passed).
func (g *runtimeGuard) left() time.Duration {
	end := g.end.at()
	if end.IsZero() {
		return 0
	}
	return max(time.Until(end), time.Nanosecond)
}

// tooLate reports whether the job's remaining time is below dt_cutoff, as
// last read: the next case would likely not finish.
func (g *runtimeGuard) tooLate() bool {
	end := g.end.at()
	if end.IsZero() {
		return false
	}
	left := time.Until(end)
	return left <= 0 || left.Seconds() < g.cutoff
}
