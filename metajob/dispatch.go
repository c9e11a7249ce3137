package metajob

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/farm-hpc/farm/casetable"
	"github.com/farm-hpc/farm/layout"
	"github.com/farm-hpc/farm/tablefmt"
)

// serve answers request r if it can: with its loop's next case (a retry
// that is due, a rescued case, else the batch's next, claiming a batch
// when none is left), or why the loop ends, or an error. It reports false
// when r waits: parked, r.wait says for what; each event serves it again.
func (o *owner) serve(r *request) bool {
	for {
		var st step
		if r.wait != noWait {
			st = o.waitOver(r)
		} else if why := o.ending(); why != going { // found by another loop, or came while this one waited
			st = r.ends(why, nil)
		} else {
			st = o.fill(r)
		}
		if st == stepCase {
			st = o.hand(r)
		}
		switch st {
		case stepWait:
			return false
		case stepEnd, stepCase:
			r.reply <- r.turn
			return true
		}
		// stepAgain: from the start
	}
}

// step is where serve is with a request.
type step uint8

const (
	stepAgain step = iota // look again from the start
	stepCase              // a case was found (fill) or is handed out (hand)
	stepWait              // the request waits, parked
	stepEnd               // its loop ends (r.turn says why)
)

// ends answers r: its loop ends, for why or with err.
func (r *request) ends(why stop, err error) step {
	r.wait, r.at = noWait, time.Time{}
	r.turn = turn{why: why, err: err}
	return stepEnd
}

// waitOver looks at r's wait again (below).
func (o *owner) waitOver(r *request) step {
	switch r.wait {
	case waitRetry:
		return o.retryWait(r)
	case waitRescue:
		return o.rescueWait(r)
	}
	return o.casesWait(r)
}

// again ends r's wait: serve looks again from the start.
func (r *request) again() step {
	r.wait, r.at = noWait, time.Time{}
	return stepAgain
}

// ending is why every loop of the job ends, whichever finds it: another
// loop's error, the job's fast-failure protection, a stop signal, the run
// superseded; going if none.
func (o *owner) ending() stop {
	switch {
	case o.halted:
		return stopHalted
	case o.ffTripped:
		return stopFastFailure
	case o.m.stop.stopped():
		return stopSignal
	case o.superseded != "":
		return stopSuperseded
	}
	return going
}

// fill finds r's next case: a retry that is due (r.pick), a rescued case
// (r.pick), else the batch's next case, claiming a batch when none is
// left (claimFor); or r's loop ends (not enough time left), or it waits
// for a retry or a rescue (the table has no case left).
func (o *owner) fill(r *request) step {
	r.pick, r.picked = pendingRetry{}, false
	rt := o.m.rt
	if p, ok := o.dueRetry(); ok {
		if rt.tooLate() {
			o.retries = append([]pendingRetry{p}, o.retries...)
			return r.ends(stopNoRuntime, nil)
		}
		r.pick, r.picked = p, true
		return stepCase
	}
	if len(o.rescued) > 0 {
		if rt.tooLate() {
			// Left in this job's C record: rescued again once it ends.
			return r.ends(stopNoRuntime, nil)
		}
		r.pick, r.picked = o.rescued[0], true
		o.rescued = o.rescued[1:]
		return stepCase
	}
	if len(o.queue) > 0 {
		if rt.tooLate() {
			// The rest of the batch would likely not finish: it stays
			// never started, for the next run.
			return r.ends(stopNoRuntime, nil)
		}
		return stepCase
	}
	if o.tableDone {
		return o.awaitRetry(r) // then awaitRescue
	}
	return o.claimFor(r)
}

// claimFor claims the next batch of cases for r: stepCase, the batch
// queued; or r waits for cases 'farm add' adds (awaitCases), or its loop
// ends (no case left, not enough time, the run superseded, an error).
func (o *owner) claimFor(r *request) step {
	m := o.m
	// Before a claim, the look, if due: a set 'farm add --first' put
	// first is claimed in next.
	if _, why, err := o.look(r.ctx, 0); why != going || err != nil {
		return r.ends(why, err)
	}
	t := time.Now()
	cases, why, err := o.claim(r.ctx, m.rt, o.bs.next(m.rt, m.store.Ahead()))
	o.bs.claimed(time.Since(t), len(cases))
	if why == stopNoCases && err == nil {
		return o.awaitCases(r) // then noCases
	}
	if len(cases) > 0 {
		o.idleSince, o.probeAt = time.Time{}, time.Time{}
	}
	if why != going || err != nil {
		return r.ends(why, err)
	}
	o.queued(cases)
	return stepCase
}

// noCases is what follows a claim that found no case left, and the wait
// for added ones if any: the table is done for the job when retries or
// rescues may still come (serve looks again), else r's loop ends.
func (o *owner) noCases(r *request) step {
	if len(o.retries) > 0 || o.m.rescue != nil {
		o.tableDone = true // the last claim; what is left is retries and rescues
		return r.again()
	}
	return r.ends(stopNoCases, nil)
}

// hand hands r's loop the case fill found, once the run is still the
// job's (a job frozen with cases queued: only a look at the clock within
// LookEvery), with its copy of single_case.sh fresh (once per batch), and
// if the job can ever run it (else it is recorded unfit, and serve looks
// again); a case that declares needs grows the job's loops.
func (o *owner) hand(r *request) step {
	m, s := o.m, r.s
	if _, why, err := o.look(r.ctx, 0); why != going || err != nil {
		if r.picked && r.pick.from == "" {
			o.retriesLeft++
		}
		return r.ends(why, err)
	}
	if s.batch != o.batch {
		// Pick up an edited single_case.sh, once per batch of cases (but
		// the loop's first: its runner has just copied it).
		s.batch = o.batch
		if s.copied {
			s.copied = false
		} else if err := s.runner.refresh(); err != nil {
			return r.ends(going, fmt.Errorf("before running more cases: %w", err))
		}
	}
	c := r.pick.c
	s.retry, s.why, s.from = r.pick.retry, r.pick.why, r.pick.from
	if !r.picked {
		c = o.queue[0]
		o.queue = o.queue[1:]
	}
	w := m.pool.wants(c.Needs, m.wholeNode)
	if why := m.pool.unfit(w, c.Needs.MinTime, m.rt.left()); why != "" {
		if r.picked && r.pick.from == "" {
			o.retriesLeft++ // it stays failed, for the next run
			return stepAgain
		}
		if err := m.recordUnfit(c, why); err != nil {
			return r.ends(going, err)
		}
		return stepAgain
	}
	if c.Needs.Declared {
		o.growLoops(r.ctx)
	}
	r.turn = turn{c: c, w: w, ticket: m.pool.ticket(), several: len(m.loops) > 1, limit: o.caseLimit(c)}
	return stepCase
}

// claim claims the next batch of at most n cases. It returns them, or why
// the loop ends (no case left, not enough time, the run superseded), or an
// error.
func (o *owner) claim(ctx context.Context, rt *runtimeGuard, n int) ([]tablefmt.Case, stop, error) {
	m := o.m
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
	if why := o.claimNews(asOf, len(cases)); why != going {
		return nil, why, nil
	}
	if len(cases) == 0 {
		return nil, stopNoCases, nil
	}
	if st := m.store.Last(); m.runTable() == "" {
		m.table.Store(&st.Table) // the run's own: what rescue reads first
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

// queued makes cases, just claimed, the job's queue: the larger first in a
// job of several nodes. (With rescue on, the claim was recorded in its
// status file before its commit: noteClaim.)
func (o *owner) queued(cases []tablefmt.Case) {
	m := o.m
	o.queue = cases
	if len(m.pool.nodes) > 1 {
		// A job of several nodes starts the larger cases of a batch
		// first, so that small ones do not split the nodes the large
		// ones need (METAQ does so too).
		o.queue = slices.Clone(cases)
		slices.SortStableFunc(o.queue, func(a, b tablefmt.Case) int {
			return m.pool.size(m.pool.wants(b.Needs, m.wholeNode)) - m.pool.size(m.pool.wants(a.Needs, m.wholeNode))
		})
	}
	o.batch++
}

// noteClaim records, with rescue on, the claim of cases ids in the job's
// status file before its commit is tried (casetable.Opts.Note: a C record
// with claim=TOKEN, written at once and synced on a network filesystem), or
// that it was lost (lost=): a kill cannot part a claim from its record, and
// a rescuer decides one with no outcome recorded from the claim state.
func (m *Metajob) noteClaim(token string, ids []int64, lost bool) error {
	m.swMu.Lock()
	defer m.swMu.Unlock()
	return m.sw.ClaimNoted(ids, time.Now(), token, lost)
}

// recordUnfit records that case c was taken and is not started, and why.
func (m *Metajob) recordUnfit(c tablefmt.Case, why string) error {
	fmt.Fprintf(m.log, "farm: case %d not started: it %s; it is left for the next run\n", c.ID, why)
	m.swMu.Lock()
	defer m.swMu.Unlock()
	return m.sw.Unfit(c.ID, time.Now(), "it "+why)
}

// awaitRetry is where serve goes when the table has no case left for the
// job and it holds none: request r waits until the first pending retry
// is due, or the job ends (a stop signal; another loop's error,
// fast-failure protection, the run superseded: serve sees it). When no
// retry is pending, or the first would fall due too late to run (after
// the job's end less dt_cutoff: the retries are then left for the next
// run, as runLoops says), r waits for a rescue instead, if any
// (awaitRescue).
func (o *owner) awaitRetry(r *request) step {
	if len(o.retries) == 0 {
		return o.awaitRescue(r)
	}
	rt, due := o.m.rt, o.retries[0].due
	if end := rt.end.at(); !end.IsZero() && due.After(end.Add(-time.Duration(rt.cutoff*float64(time.Second)))) {
		return o.awaitRescue(r) // said when the job ends
	}
	r.wait, r.at = waitRetry, due
	return o.retryWait(r)
}

// retryWait is r's wait for its retry, looked at again: over (serve looks
// again) once the retry is due or the job ends.
func (o *owner) retryWait(r *request) step {
	if !time.Now().Before(r.at) || o.ending() != going {
		return r.again()
	}
	return stepWait
}

// awaitRescue is where serve goes when the table has no case left for
// the job, it holds none and no retry is to wait for: request r waits for
// a rescued case while the job must stay — its own rescues wait for
// their fence, or it is the run's warden and others of the run still run
// — unless the job ends or its time runs short first; else its loop ends,
// no case left. The job's first look as the warden is made at once, a
// run whose others have all ended keeps no warden.
func (o *owner) awaitRescue(r *request) step {
	m := o.m
	if m.rescue == nil || m.rt.tooLate() {
		return r.ends(stopNoCases, nil)
	}
	if len(o.rescued) > 0 {
		return r.again()
	}
	first := !m.rescue.wardenNow()
	if !m.rescue.warden() && !m.rescue.busy() {
		return r.ends(stopNoCases, nil)
	}
	r.wait, r.polled = waitRescue, false
	if first && m.rescue.wardenNow() {
		o.wardenLook(true)
	}
	return o.rescueWait(r)
}

// rescueWait is r's wait for a rescue, looked at again: over when a
// rescued case is there or the job ends (serve looks again), or when the
// job need no longer stay or its time runs short (its loop ends, no case
// left). While it goes on, r.at is the warden's next look.
func (o *owner) rescueWait(r *request) step {
	m := o.m
	if len(o.rescued) > 0 || o.ending() != going {
		return r.again()
	}
	if !m.rescue.busy() || m.rt.tooLate() {
		return r.ends(stopNoCases, nil)
	}
	if !o.wardenSaid && m.rescue.wardenNow() && r.polled {
		// Once a job, and once it has looked: not for a run it was
		// the last of.
		fmt.Fprintf(m.log, "farm: no case left; this meta-job stays while others of run %d run, to rescue their cases if they die (checking every %s)\n", m.Env.Run, m.rescue.period)
		o.wardenSaid = true
	}
	if o.nextPoll.IsZero() && !o.looking {
		o.nextPoll = time.Now().Add(m.rescue.pollEvery())
	}
	r.at = o.nextPoll
	return stepWait
}

// Cases added to a running farm (issue 25): 'farm add' gives the run a set
// of lanes of its own table (casetable.Store.Enqueue), and the meta-jobs
// claim them as they claim the others. A meta-job whose claim found
// nothing left waits up to WAIT_FOR_CASES (config) for such cases before
// it exits: at each of its probes (idle.go: every LookEvery, or rarer in
// a run of many jobs) it claims again if the main chain moved on.

// awaitCases is where serve goes when a claim found no case left: request
// r waits until a probe (idle.go) finds the main chain moved on, a case is
// rescued or a retry falls due (serve looks again: claims again, after
// the full look, which finds a run superseded), or until WAIT_FOR_CASES
// has passed since the job found nothing left, the job ends or the
// run-time runs short (noCases). The requests waiting so share the job's
// probes.
func (o *owner) awaitCases(r *request) step {
	m := o.m
	wait := m.Farm.Config.WaitForCases
	if wait <= 0 || m.Env.Simple || o.looked.IsZero() {
		return o.noCases(r) // (no news of its run: the record is of another)
	}
	if o.idleSince.IsZero() {
		o.idleSince = m.now()
		fmt.Fprintf(m.log, "farm: no case left; waiting up to %s for cases 'farm add' adds to run %d (WAIT_FOR_CASES)\n", wait.Round(time.Second), m.Env.Run)
	}
	r.wait = waitCases
	return o.casesWait(r)
}

// casesWait is r's wait for added cases, looked at again; while it goes
// on, r.at is when it is next: the next probe, the end of the wait, or
// the first retry due, whichever comes first.
func (o *owner) casesWait(r *request) step {
	m := o.m
	wait := m.Farm.Config.WaitForCases
	if o.ending() != going || m.rt.tooLate() || m.now().Sub(o.idleSince) >= wait {
		return o.noCases(r)
	}
	if len(o.rescued) > 0 || len(o.retries) > 0 && !time.Now().Before(o.retries[0].due) {
		return r.again()
	}
	if o.probe(r.ctx) {
		return r.again() // cases may have been added: the claim looks first
	}
	d := min(max(o.probeDue(), 0), max(wait-m.now().Sub(o.idleSince), 0)) + time.Millisecond
	if len(o.retries) > 0 {
		d = min(d, max(time.Until(o.retries[0].due), 0)+time.Millisecond)
	}
	r.at = time.Now().Add(d)
	return stepWait
}
