package metajob

import (
	"context"
	"fmt"
	"time"

	"github.com/farm-hpc/farm/layout"
	"github.com/farm-hpc/farm/tablefmt"
)

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
