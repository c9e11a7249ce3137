package metajob

import (
	"fmt"
	"time"
)

// Cases added to a running farm (issue 25): 'farm add' queues them to the
// run in its claim state (casetable.State.Enqueue), and the meta-jobs
// claim them as they claim the others. A meta-job whose claim found
// nothing left waits up to WAIT_FOR_CASES (config) for such cases before
// it exits: every waitPoll it looks whether the claim state moved on (one
// lookup, casetable.Store.Moved), and claims again when it did.

// waitPoll is how often a waiting meta-job looks for added cases: at 1,000
// meta-jobs waiting, 200 lookups a second on the farm's filesystem.
const waitPoll = 5 * time.Second

// awaitCases is called when a claim found no case left: it waits, m.mu
// released, until the claim state moves on, a case is rescued or a retry
// falls due (it reports true: look again), or until WAIT_FOR_CASES has
// passed since the job found nothing left, a stop, another loop's error
// or the run-time runs short (false). The loops of a job share one look a
// poll. m.mu is held.
func (m *Metajob) awaitCases() bool {
	wait := m.Farm.Config.WaitForCases
	if wait <= 0 || m.Env.Simple {
		return false
	}
	if m.idleSince.IsZero() {
		m.idleSince = m.now()
		fmt.Fprintf(m.log, "farm: no case left; waiting up to %s for cases 'farm add' adds to run %d (WAIT_FOR_CASES)\n", wait.Round(time.Second), m.Env.Run)
	}
	for {
		if m.stop.stopped() || m.halted || m.ffTripped || m.superseded != "" || m.rt.tooLate() {
			return false
		}
		if m.now().Sub(m.idleSince) >= wait {
			return false
		}
		if len(m.rescued) > 0 || len(m.retries) > 0 && !time.Now().Before(m.retries[0].due) {
			return true
		}
		if m.now().Sub(m.lastLook) >= waitPoll {
			m.lastLook = m.now()
			if m.store.Moved() {
				return true
			}
		}
		d := min(waitPoll, max(wait-m.now().Sub(m.idleSince), 0)+time.Millisecond)
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
