package metajob

import (
	"context"
	"time"
)

// The owner's wait for rescues (owner.go, rescue.go). A job whose table has
// no case left for it stays while it must: its own rescues wait for their
// fence, or it is the run's warden and others of the run still run. Its
// requests wait, parked, for a rescued case; the warden's watch — its
// first look at the run's jobs, then a look every rescuer.pollEvery at
// those still running — is the owner's timer, and the looks are made
// outside the owner, one at a time.

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
