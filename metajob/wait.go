package metajob

import (
	"fmt"
	"time"
)

// Cases added to a running farm (issue 25): 'farm add' gives the run a set
// of lanes of its own table (casetable.Store.Enqueue), and the meta-jobs
// claim them as they claim the others. A meta-job whose claim found
// nothing left waits up to WAIT_FOR_CASES (config) for such cases before
// it exits: at each of its looks at the run (look.go, every LookEvery) it
// claims again if the run record moved on.

// awaitCases is where serve goes when a claim found no case left: request
// r waits until a look finds the run record moved on, a case is rescued
// or a retry falls due (serve looks again: claims again), or until
// WAIT_FOR_CASES has passed since the job found nothing left, the job
// ends or the run-time runs short (noCases); or its loop ends with the
// look's stop (the run superseded) or error. The requests waiting so
// share the job's looks.
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
// on, r.at is when it is next: the next look due, the end of the wait, or
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
	if moved, why, err := o.look(r.ctx, 0); why != going || err != nil {
		return r.ends(why, err)
	} else if moved {
		return r.again() // cases may have been added
	}
	d := min(max(o.lookDue(), 0), max(wait-m.now().Sub(o.idleSince), 0)) + time.Millisecond
	if len(o.retries) > 0 {
		d = min(d, max(time.Until(o.retries[0].due), 0)+time.Millisecond)
	}
	r.at = time.Now().Add(d)
	return stepWait
}
