package metajob

import (
	"context"
	"fmt"
	"time"

	"github.com/farm-hpc/farm/casetable"
	"github.com/farm-hpc/farm/fsretry"
	"github.com/farm-hpc/farm/lease"
)

// A meta-job holds a lease on its run: it may claim and start cases of it
// while the run is the current one and its cases were not rescued. The
// lease is renewed in one place (look), at one cadence (casetable.LookEvery,
// FARM_LOOK_EVERY for tests): one lookup of the main chain's next mark,
// and a reading of the run record if it moved on (casetable.Store.Look);
// with rescue on, first one lookup of the job's own rescue mark
// (rescuedNow, rescue.go). The look is due once LookEvery has passed since
// the last, and is made where the job acts: before a claim, before a case
// starts (twice: see below), and while it waits for cases (dispatch.go). It
// serves four ends:
//
//   - 'farm add --first': the next claim takes from the set the record
//     now names first;
//   - WAIT_FOR_CASES: a job with nothing left claims again once the record
//     moved on (dispatch.go) — found by its probe (idle.go), a lookup of
//     the same mark, which renews nothing, and then this look, before the
//     claim;
//   - a run superseded. A meta-job may be frozen for any length of time
//     (SIGSTOP, a frozen VM, a node the batch system marked DOWN while its
//     processes live on) with cases claimed and not started. Meanwhile its
//     job may have been presumed dead and a resubmit started the next run,
//     which runs those cases too. A look that finds its run no longer the
//     current one (another run started, or farm repair rebuilt the state)
//     starts none of the cases it still holds — they stay without a start
//     record in its run, never ran, for the run that took over — says so
//     in one line, and exits;
//   - the rescue's fence: a job whose batch system said it ended, and whose
//     cases another meta-job rescued (rescue.go), starts none of them and
//     exits; the rescuer waits LookEvery and a margin before it reads what
//     the job started.
//
// The look is made twice for each case: before it starts (stillStarts),
// and again once its start record is written (startsAfterRecord), so that
// a job frozen between the two — a window a loaded machine widens — does
// not run a case the next run ran: it records it interrupted instead.
// Within LookEvery of the last look both cost only a look at the clock.
// What remains: a case already running when the job froze (or that started
// in the instant between that last look and its exec) runs on to its end;
// the cases after it do not start.
//
// When a look is due (lease.Due, by lease.Gap's measure), the lookup of the
// job's rescue mark (lease.Marks.MarkedBy) and the rescuer's side — its
// mark (lease.Marks.Mark) and its wait before it reads (lease.Fence) — are
// package lease's, over a vfs.FS (here the system's), so that the
// simulator runs this code (SIMULATION.md, "The lease and the fence").

// MsgSuperseded is the line of a loop that ends because its run is no
// longer the current one (stopSuperseded); the job's output gets the line
// that says why (owner.supersededLine).
const MsgSuperseded = "farm: this meta-job's run is no longer the current one; exiting."

// runNews is what the meta-job last knew of its run: when, and the run
// record its last claim or look read.
type runNews struct {
	at  time.Time       // when (time.Now: wall and monotonic readings)
	run casetable.State // the record then
}

// runLease is the owner's side of the lease (owner.go): what the job knows
// of its run.
type runLease struct {
	news       runNews       // the last news of the run
	looked     time.Time     // the last look; zero before the first news
	superseded string        // why the run is no longer the current one; "" while it is
	silent     time.Duration // how long the meta-job had had no news of it then
	left       int           // the cases it then held, not started
	rescuedBy  string        // the meta-job that rescued this one's cases, once found
}

// gap is how long it has been, at now, since t (lease.Gap: a freeze
// counts, whichever clock saw it).
func gap(now, t time.Time) time.Duration { return lease.Gap(now, t) }

// heard records that the run was current at t, as st (a run record read
// or claimed in) says; the first news starts the look's cadence.
func (o *owner) heard(t time.Time, st casetable.State) {
	o.news = runNews{at: t, run: st}
	if o.looked.IsZero() {
		o.looked = t
	}
}

// claimNews takes what a claim of n cases read, as of asOf, as news of the
// run: a claim in it, dated from before the claim (a job frozen inside the
// claim, once committed, must count the freeze); or, with no case, its
// record — unless a repair rebuilt it since the last news, or it is a later
// run's: then the run is superseded (stopSuperseded), at once, for the cases
// the job's loops hold.
func (o *owner) claimNews(asOf time.Time, n int) stop {
	m := o.m
	st := m.store.Last()
	if n == 0 && st.Run > m.Env.Run {
		// A later run's record: the job's run is over, whether or not it
		// had news of it (a job that starts after the next run began must
		// neither stay as a warden nor rescue what that run runs).
		return o.supersede(supersededBy(m.Env.Run, o.news.run, st), 0, 0)
	}
	if n == 0 && st.Run != m.Env.Run {
		return going // another run's record: the claim says so (stopNoCases)
	}
	if n == 0 && !o.news.at.IsZero() {
		if why := supersededBy(m.Env.Run, o.news.run, st); why != "" {
			return o.supersede(why, gap(m.now(), o.news.at), 0)
		}
	}
	o.heard(asOf, st)
	return going
}

// lookEvery is the meta-job's cadence: FARM_LOOK_EVERY, else
// casetable.LookEvery.
func (m *Metajob) lookEvery() time.Duration {
	if m.Env.LookEvery > 0 {
		return m.Env.LookEvery
	}
	return casetable.LookEvery
}

// now is the clock (a test's, if set).
func (m *Metajob) now() time.Time {
	if m.clock != nil {
		return m.clock()
	}
	return time.Now()
}

// lookDue is how long until the next look is due; 0 or less: now.
func (o *owner) lookDue() time.Duration { return o.dueAt(lease.Before) }

// dueAt is how long until the look at moment at is due (lease.Due: no
// news of the run yet, its first claim reads it); 0 or less: now.
func (o *owner) dueAt(at lease.Moment) time.Duration {
	return lease.Due(o.m.now(), o.looked, o.m.lookEvery(), at)
}

// look is the meta-job's look at its run, if due (see above). It reports
// whether the run record moved on since the job's claims opened the sets
// they claim in. If the run is no longer the current one it drops the
// cases still queued, counts them (and held more, which the caller holds)
// as left, wakes the loops waiting for their turn, and returns
// stopSuperseded; the loops then end, and the job with supersededLine. An
// error is a claim state that could not be read.
func (o *owner) look(ctx context.Context, held int) (moved bool, why stop, err error) {
	return o.lookAt(ctx, held, lease.Before)
}

// lookAt is look at moment at: before a claim or a start, or once a case's
// start record is written (startsAfterRecord).
func (o *owner) lookAt(ctx context.Context, held int, at lease.Moment) (moved bool, why stop, err error) {
	m := o.m
	if o.superseded != "" {
		o.left += held
		return false, stopSuperseded, nil
	}
	if o.dueAt(at) > 0 {
		return false, going, nil
	}
	now := m.now()
	silent := gap(now, o.news.at)
	// After a silence (a freeze, a long case) the record is read afresh,
	// as the claims' chain may be gone; else one lookup.
	afresh := gap(now, o.looked) >= 2*m.lookEvery()
	var st casetable.State
	var rescued bool
	r := fsretry.Retrier{Log: m.log}
	err = r.Do(ctx, func() error {
		var err error
		if rescued, err = o.rescuedNow(held, silent); rescued || err != nil {
			return err
		}
		st, moved, err = m.store.Look(ctx, afresh)
		return err
	})
	if rescued {
		return false, stopSuperseded, nil
	}
	if err != nil {
		// Not a look: the next caller looks again (another loop must
		// not start a case on it).
		what := fmt.Sprintf("looking at the claim state of run %d (last news of it %s ago)", m.Env.Run, roundGap(silent))
		if de := damageAdvice(what, err); de != nil {
			return false, going, de
		}
		return false, going, fmt.Errorf("%s: %w", what, err)
	}
	o.looked = now
	if why := supersededBy(m.Env.Run, o.news.run, st); why != "" {
		return false, o.supersede(why, silent, held), nil
	}
	o.heard(now, st)
	return moved, going, nil
}

// rescuedNow is the lease's look for the job's own rescue mark (look.go):
// if its cases were rescued, the run is over for it (supersede, counting
// held more cases than those queued as left), and it reports true. err is
// a lookup that failed.
func (o *owner) rescuedNow(held int, silent time.Duration) (bool, error) {
	m := o.m
	if m.rescue == nil {
		return false, nil
	}
	by, marked, err := m.rescue.markedBy(m.rescue.self)
	if err != nil || !marked {
		return false, err
	}
	o.rescuedBy = by
	o.supersede(fmt.Sprintf("its batch system reported it ended, and meta-job %s rescued its cases", by), silent, held)
	return true, nil
}

// supersede ends the job's run for it, for why, after silent without news:
// it drops the cases still queued, counts them (and held more, which the
// caller holds) as left, and wakes the loops waiting for their turn. It
// returns stopSuperseded.
func (o *owner) supersede(why string, silent time.Duration, held int) stop {
	o.superseded, o.silent = why, silent
	o.left += len(o.queue) + len(o.rescued) + held
	o.queue, o.rescued = nil, nil
	o.m.pool.stop() // the loops waiting for their turn start nothing
	return stopSuperseded
}

// supersededBy says why run is no longer the current one, now that the
// claim state reads st, when the meta-job's last claim in it read last;
// "" if it still is.
func supersededBy(run int, last, st casetable.State) string {
	switch {
	case st.Run > run:
		return fmt.Sprintf("run %d was superseded by run %d", run, st.Run)
	case st.Run != run:
		return fmt.Sprintf("run %d is no longer the current run (the claim state is at run %d)", run, st.Run)
	case st.Repair != last.Repair || st.Gen < last.Gen || st.OwnSet() != last.OwnSet():
		// Every repair marks its record as its own; only a repair
		// changes the run's own set; a new chain starts from
		// generation 0: 'farm repair' rebuilt the state.
		return fmt.Sprintf("the claim state of run %d was rebuilt (farm repair)", run)
	}
	return ""
}

// supersededLine is the job's last line when its run was superseded.
func (o *owner) supersededLine() string {
	m := o.m
	to := "left to the next run"
	if o.rescuedBy != "" {
		to = "rescued by meta-job " + o.rescuedBy
	} else if st := m.store.Last(); st.Run > m.Env.Run { // the record the look read
		to = fmt.Sprintf("left to run %d", st.Run)
	}
	cases := fmt.Sprintf("the %d cases it had claimed but not started were %s", o.left, to)
	if o.left == 1 {
		cases = "the case it had claimed but not started was " + to
	} else if o.left == 0 && o.rescuedBy == "" {
		cases = "it held no case not started"
	}
	if o.silent < 2*m.lookEvery() {
		// Found by a look on time: the job was not stopped.
		return fmt.Sprintf("farm: %s; %s; exiting.", o.superseded, cases)
	}
	return fmt.Sprintf("farm: %s while this meta-job had no news of its run (for %s: stopped, or running a case); %s; exiting.", o.superseded, roundGap(o.silent), cases)
}

// roundGap rounds d for a message: to the second, or to the millisecond
// below a second.
func roundGap(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(time.Second)
}
