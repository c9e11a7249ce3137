package metajob

import (
	"context"
	"fmt"
	"time"
)

// Cases added to a running farm (issue 25): 'farm add' gives the run a set
// of lanes of its own table (casetable.Store.Enqueue), and the meta-jobs
// claim them as they claim the others. A meta-job whose claim found
// nothing left waits up to WAIT_FOR_CASES (config) for such cases before
// it exits: at each of its looks at the run (look.go, every LookEvery) it
// claims again if the run record moved on.

// awaitCases is called when a claim found no case left: it waits, m.mu
// released, until a look finds the run record moved on, a case is rescued
// or a retry falls due (it reports true: claim again), or until
// WAIT_FOR_CASES has passed since the job found nothing left, a stop,
// another loop's error or the run-time runs short (false); or it returns
// the look's stop (the run superseded) or error. The loops of a job
// share its looks. m.mu is held.
func (m *Metajob) awaitCases(ctx context.Context) (bool, stop, error) {
	wait := m.Farm.Config.WaitForCases
	if wait <= 0 || m.Env.Simple || m.looked.IsZero() {
		return false, going, nil // (no news of its run: the record is of another)
	}
	if m.idleSince.IsZero() {
		m.idleSince = m.now()
		fmt.Fprintf(m.log, "farm: no case left; waiting up to %s for cases 'farm add' adds to run %d (WAIT_FOR_CASES)\n", wait.Round(time.Second), m.Env.Run)
	}
	for {
		if m.ending() != going || m.rt.tooLate() {
			return false, going, nil
		}
		if m.now().Sub(m.idleSince) >= wait {
			return false, going, nil
		}
		if len(m.rescued) > 0 || len(m.retries) > 0 && !time.Now().Before(m.retries[0].due) {
			return true, going, nil
		}
		if moved, why, err := m.look(ctx, 0); moved || why != going || err != nil {
			return moved, why, err
		}
		d := min(max(m.lookDue(), 0), max(wait-m.now().Sub(m.idleSince), 0)) + time.Millisecond
		if len(m.retries) > 0 {
			d = min(d, max(time.Until(m.retries[0].due), 0)+time.Millisecond)
		}
		m.mu.Unlock()
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-m.stop.ch:
		}
		t.Stop()
		m.mu.Lock()
	}
}
