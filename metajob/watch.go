package metajob

import (
	"context"
	"fmt"
	"time"
)

// The owner's wait for rescues (owner.go, rescue.go). A job whose table has
// no case left for it stays while it must: its own rescues wait for their
// fence, or it is the run's warden and others of the run still run. Its
// requests wait, parked, for a rescued case; the warden's watch — its
// first look at the run's jobs, then a look every rescuer.pollEvery at
// those still running — is the owner's timer, and the looks are made
// outside the owner, one at a time.

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

// wardenTick is the owner's timer for the warden's watch: once its next
// look is due, the warden looks at the jobs still running (wardenLook);
// a job that is not the warden only looks at its wait again.
func (o *owner) wardenTick() {
	if o.nextPoll.IsZero() || time.Now().Before(o.nextPoll) {
		return
	}
	o.nextPoll = time.Time{}
	if o.m.rescue.wardenNow() {
		o.wardenLook(false)
		return
	}
	o.polled()
}

// wardenLook has the warden look at the run's jobs: the first time
// (first) its check of them, then the look at those still running
// (quitPoll). It looks in a goroutine of its own, so that the batch
// system's answer and the reading of status files hold up no loop's
// request; the owner hears when the look is over.
func (o *owner) wardenLook(first bool) {
	r, m := o.m.rescue, o.m
	o.looking = true
	o.looks.Add(1)
	go func() {
		defer o.looks.Done()
		if first {
			r.check(context.Background(), time.Now())
		}
		r.quitPoll()
		m.do(func(o *owner) {
			o.looking = false
			if !first {
				o.polled()
			}
		})
	}()
}

// polled notes a look of the warden's watch: the requests waiting for
// rescues have waited through one, and the next is due pollEvery on.
func (o *owner) polled() {
	for _, r := range o.parked {
		if r.wait == waitRescue {
			r.polled = true
		}
	}
	o.nextPoll = time.Now().Add(o.m.rescue.pollEvery())
}
