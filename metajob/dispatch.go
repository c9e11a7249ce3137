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
