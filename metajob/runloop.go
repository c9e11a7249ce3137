package metajob

import (
	"context"
	"fmt"
	"time"

	"github.com/farm-hpc/farm/layout"
	"github.com/farm-hpc/farm/lease"
	"github.com/farm-hpc/farm/tablefmt"
)

// runLoops claims and runs cases until one of the meta-job's ends: in each of
// its loops at once, and the meta-job ends when the last loop does. It
// starts one loop (NWHOLE in WHOLE_NODE mode), and the others, up to one
// per CPU of the job, once a case declares needs smaller than the job.
// The owner (owner.go) holds their work from the first to the last.
func (m *Metajob) runLoops(ctx context.Context) error {
	m.rt = &runtimeGuard{end: endSources{backend: m.self.End, jobFeatures: m.Env.JobFeatures, machineFeatures: m.Env.MachineFeatures},
		misc: m.Farm.Path(layout.MiscDir)}
	m.rt.given(m.Env.Cutoff, time.Now())
	if end := m.rt.end.at(); !end.IsZero() {
		fmt.Fprintf(m.log, "farm: this job ends at %s\n", end.Format(time.RFC3339))
	}
	o := m.startOwner()
	defer o.end() // (already ended on the normal path)
	if m.rescue != nil {
		m.rescue.start(ctx)
		defer m.rescue.halt() // (already halted on the normal path)
	}
	if m.wholeNode {
		fmt.Fprintf(m.log, "farm: WHOLE_NODE: %d loops, each running one case at a time\n", len(m.loops))
	}
	m.do(func(o *owner) {
		for _, s := range m.loops {
			o.startLoop(ctx, s)
		}
	})
	m.wg.Wait()
	o.looks.Wait() // the warden's look under way, if any: it may mark a rescue
	if m.rescue != nil {
		m.rescue.halt() // before the last records: it writes to the status file too
	}
	o.end()
	if n := len(o.retries) + o.retriesLeft; n > 0 {
		fmt.Fprintf(m.log, "farm: %d failed case(s) due to run again are left, failed, for the next run ('farm resubmit')\n", n)
	}
	err := m.quit(jobEnd(o.ends))
	m.graces.finish(m.log) // after its last record: a job killed meanwhile has it
	return err
}

// startLoop starts loop s; when it ends, the owner hears how.
func (o *owner) startLoop(ctx context.Context, s *loop) {
	m := o.m
	s.ff = fastFailure{max: m.Farm.Config.NFailedMax, short: m.Farm.Config.DtFailed}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		why, err := m.runLoop(ctx, s)
		several := false
		m.do(func(o *owner) {
			o.ends = append(o.ends, loopEnd{why, err})
			several = len(m.loops) > 1
			if err != nil {
				o.halted = true // the other loops take no more cases
			}
		})
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
// where they all run from the start).
func (o *owner) growLoops(ctx context.Context) {
	m := o.m
	if o.grown || m.wholeNode || m.Env.Simple {
		return
	}
	o.grown = true
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
		o.startLoop(ctx, s)
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

// runLoop is loop s: take the next case from the owner (which claims
// more when none is left), run it, until one of the ends; it returns why
// it ended, or the error it ended with.
func (m *Metajob) runLoop(ctx context.Context, s *loop) (stop, error) {
	for {
		if m.stop.stopped() {
			return stopSignal, nil
		}
		t := m.next(ctx, s)
		if t.why != going || t.err != nil {
			return t.why, t.err
		}
		g, ok := m.pool.acquire(t.ticket, t.w, s.k-1)
		if !ok {
			return m.notStarted(s), nil
		}
		if start, why, err := m.stillStarts(ctx, s, t.c, t.w); !start {
			// Waited for its turn past a stop, the run-time or its
			// min_time: not started.
			m.pool.release(g)
			if why != going || err != nil {
				return why, err
			}
			continue // recorded unfit; the next
		}
		code, d, why, err := m.runPacked(ctx, s, t, g)
		m.pool.release(g)
		if why != going || err != nil {
			return why, err
		}
		if why := m.caseEnded(s, t.c, code, d); why != going {
			return why, nil
		}
	}
}

// notStarted is why loop s ends, whose case was not started because the
// pool stopped while it waited for its turn: its run superseded (look),
// or a stop signal. A retry not started is left, failed, for the next run.
func (m *Metajob) notStarted(s *loop) stop {
	why := stopSignal
	m.do(func(o *owner) {
		o.retryNotStarted(s)
		if o.superseded != "" {
			o.left++ // its case
			why = stopSuperseded
		}
	})
	return why
}

// stillStarts reports whether loop s's case c, which wants w, may still
// start once its turn came (it may have waited long): not after a stop
// signal (stopSignal), nor when the meta-job's run is no longer the
// current one (stopSuperseded; looked at once every LookEvery, look.go),
// nor when the job's time left is below the runtime cutoff
// (stopNoRuntime), nor when it is below c's min_time (c is recorded
// unfit, going: the loop goes on; a retry is not recorded: it stays
// failed). A retry not started is left, failed, for the next run.
func (m *Metajob) stillStarts(ctx context.Context, s *loop, c tablefmt.Case, w want) (bool, stop, error) {
	if m.stop.stopped() {
		m.do(func(o *owner) { o.retryNotStarted(s) })
		return false, stopSignal, nil
	}
	var start bool
	var why stop
	var err error
	m.do(func(o *owner) {
		if start, why, err = o.stillStarts(ctx, c, w, s.retry, s.from); !start {
			o.retryNotStarted(s)
		}
	})
	return start, why, err
}

// stillStarts is Metajob.stillStarts's look, once no stop signal came.
func (o *owner) stillStarts(ctx context.Context, c tablefmt.Case, w want, retry int, from string) (bool, stop, error) {
	m := o.m
	if _, why, err := o.look(ctx, 1); why != going || err != nil {
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
	var why stop
	var err error
	m.do(func(o *owner) { _, why, err = o.lookAt(ctx, 1, lease.AfterRecord) })
	return why, err
}

// caseEnded tells the owner that loop s's case c ended with code after
// d (timedOutCode: it timed out): a failure is run again if RETRIES allows
// (failed), a timeout too with RETRY_TIMEOUTS, the end is counted (judge:
// a timeout is no failure for fast-failure protection), a success's
// duration noted for CASE_TIME_LIMIT=Nx. It returns why the loop stops —
// fast-failure protection, or in SIMPLE mode its one case done — or going.
func (m *Metajob) caseEnded(s *loop, c tablefmt.Case, code int, d time.Duration) stop {
	why := going
	m.do(func(o *owner) {
		switch {
		case code == timedOutCode:
			o.timedOut(c, s.retry)
			code = 0
		case code != 0:
			o.failed(c, s.retry, code)
		default:
			o.medians.succeeded(d)
		}
		switch {
		case o.judge(s, code, d):
			why = stopFastFailure
		case m.Env.Simple && !o.simpleRetries():
			why = stopSimpleDone
		}
	})
	return why
}
