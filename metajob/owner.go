package metajob

import (
	"context"
	"sync"
	"time"

	"github.com/farm-hpc/farm/tablefmt"
)

// The owner of a meta-job's work (issue 37). One goroutine, the owner,
// holds what the job's loops share: the claimed batch, the retries, the
// rescued cases, the waits — for a retry to fall due, for the cases 'farm
// add' adds (WAIT_FOR_CASES), for rescues and the warden's watch — the
// lease on the run (look.go) and the judges of the cases' ends (guard.go).
// The loops only run cases: a loop asks the owner for its next case
// (Metajob.next: a request, answered with a turn) and tells it what came
// of it through Metajob.do, which has the owner run a function; so do the
// rescuer, handing over the cases it rescued, and the warden's looks at
// the run's other jobs. Only the owner's goroutine touches its state,
// which no lock guards: every method of *owner runs there (or, once the
// owner has ended, in Run's, which waited for its end).
//
// A request that cannot be answered yet — the job holds no case, and a
// retry may fall due, a rescue or an added case may come — is parked with
// what it waits for (request.wait). Every event the owner handles (a
// request, a function run, its timer, the stop signal) tries the parked
// requests again; its one timer is set for the earliest moment one of
// them must be looked at again: a retry due, the next probe of the run
// (idle.go), the end of WAIT_FOR_CASES, the warden's next look
// (rescuer.pollEvery). When the job ends, every parked request gets its
// stop.
type owner struct {
	m *Metajob

	// What the loops take their cases from (dispatch.go).
	queue       []tablefmt.Case // claimed, not handed out yet
	batch       int             // claims made: a loop refreshes its copy of single_case.sh at each
	retries     []pendingRetry  // failed cases to run again (retry.go)
	retriesLeft int             // retries taken and not started: left, failed, for the next run
	rescued     []rescuedCase   // handed over by the job's rescues, run before its next claim
	tableDone   bool            // a claim found no case left: only retries and rescues remain
	// idleSince is when a claim found no case left, for WAIT_FOR_CASES
	// (dispatch.go); zero after a claim that found some.
	idleSince  time.Time
	probeAt    time.Time        // the next probe while it waits so (idle.go); zero: none yet
	tableLines map[string]int64 // the lines of each table its cases came from

	// The cases' ends (guard.go) and the loops'.
	bs        batchSizer
	ff        fastFailure // the job's, outside WHOLE_NODE mode
	ffTripped bool
	halted    bool        // a loop ended with an error: the others take no more cases
	ends      []loopEnd   // how each loop ended
	grown     bool        // the loops beyond the first were started
	medians   medianLimit // the succeeded cases' median, for CASE_TIME_LIMIT=Nx (timelimit.go)

	runLease // the look at the run (look.go)

	// The warden's watch (rescue.go).
	wardenSaid bool           // the job said it stays as the run's warden
	looking    bool           // a warden's look is under way (wardenLook)
	nextPoll   time.Time      // the next look is due then; zero: none is
	looks      sync.WaitGroup // the looks under way: Run waits for them before the rescuer halts

	reqs   chan *request
	calls  chan call
	quit   chan struct{}   // closed to end the owner, once the loops have
	done   chan struct{}   // closed when it has ended
	stopCh <-chan struct{} // the stop signal's; nil once it came
	parked []*request      // in the order they came
	timer  *time.Timer
}

// request is a loop's request for its next case, and where the owner is
// with it (dispatch.go).
type request struct {
	ctx   context.Context
	s     *loop
	reply chan turn

	pick   pendingRetry // the retry or rescued case found for it,
	picked bool         // if that is what it gets (else the queue's first case)
	wait   waitFor      // what it waits for, parked
	at     time.Time    // when its wait is next looked at; zero: at the next event
	polled bool         // a warden's look came since it began to wait for rescues
	turn   turn         // its answer
}

// waitFor is what a parked request waits for.
type waitFor uint8

const (
	noWait     waitFor = iota
	waitRetry          // a retry to fall due (retry.go)
	waitRescue         // a rescue, or the run's other jobs to end (rescue.go)
	waitCases          // cases 'farm add' adds (dispatch.go)
)

// turn is the owner's answer to a request: the case the loop runs next,
// what it wants of the pool and its place in the order the cases start
// in; or why the loop ends, or the error it ends with.
type turn struct {
	c       tablefmt.Case
	w       want
	ticket  uint64
	several bool          // the job runs several loops: the case's start record says which
	limit   time.Duration // its time limit (timelimit.go); 0: none
	why     stop
	err     error
}

// call is a function for the owner to run; done is closed once it ran.
type call struct {
	f    func(*owner)
	done chan struct{}
}

// startOwner starts the owner of m's work, its judges set from the
// config.
func (m *Metajob) startOwner() *owner {
	o := &owner{m: m, reqs: make(chan *request), calls: make(chan call), quit: make(chan struct{}), done: make(chan struct{}),
		stopCh: m.stop.ch, timer: time.NewTimer(time.Hour)}
	o.timer.Stop()
	o.ff = fastFailure{max: m.Farm.Config.NFailedMax, short: m.Farm.Config.DtFailed}
	if m.Env.Simple {
		o.bs.max = 1
	}
	m.own = o
	go o.run()
	return o
}

// end ends the owner, once the loops and the warden's looks have ended,
// and waits for it.
func (o *owner) end() {
	select {
	case <-o.done:
	default:
		close(o.quit)
		<-o.done
	}
}

// next is loop s's request for its next case: the owner's answer.
func (m *Metajob) next(ctx context.Context, s *loop) turn {
	r := &request{ctx: ctx, s: s, reply: make(chan turn, 1)}
	m.own.reqs <- r
	return <-r.reply
}

// do has the owner run f, and returns once f has run; false if the owner
// has ended (f did not run).
func (m *Metajob) do(f func(*owner)) bool {
	o := m.own
	c := call{f: f, done: make(chan struct{})}
	select {
	case o.calls <- c:
	case <-o.done:
		return false
	}
	<-c.done
	return true
}

// run is the owner's goroutine: one event at a time, then the parked
// requests tried again and the timer set.
func (o *owner) run() {
	defer close(o.done)
	for {
		var r *request
		select {
		case r = <-o.reqs:
			if o.serve(r) {
				r = nil
			}
		case c := <-o.calls:
			c.f(o)
			close(c.done)
		case <-o.timer.C:
			o.wardenTick()
		case <-o.stopCh:
			o.stopCh = nil
			o.m.pool.stop() // the loops waiting for their turn stop
		case <-o.quit:
			return
		}
		o.retryParked()
		if r != nil {
			o.parked = append(o.parked, r)
		}
		o.rearm()
	}
}

// retryParked tries the parked requests again, in the order they came.
func (o *owner) retryParked() {
	still := o.parked[:0]
	for _, r := range o.parked {
		if !o.serve(r) {
			still = append(still, r)
		}
	}
	clear(o.parked[len(still):])
	o.parked = still
}

// rearm sets the timer for the earliest moment a parked request is to be
// looked at again; no warden's look is due while none waits for rescues.
func (o *owner) rearm() {
	var at time.Time
	rescues := false
	for _, r := range o.parked {
		rescues = rescues || r.wait == waitRescue
		if !r.at.IsZero() && (at.IsZero() || r.at.Before(at)) {
			at = r.at
		}
	}
	if !rescues {
		o.nextPoll = time.Time{}
	}
	if at.IsZero() {
		o.timer.Stop()
		return
	}
	o.timer.Reset(time.Until(at))
}
