package metajob

import (
	"context"
	"fmt"
	"time"

	"github.com/farm-hpc/farm/casetable"
	"github.com/farm-hpc/farm/fsretry"
)

// A meta-job may be frozen for any length of time (SIGSTOP, a frozen VM, a
// node the batch system marked DOWN while its processes live on) with cases
// claimed and not started. Meanwhile its job may have been presumed dead and
// a resubmit started the next run, which runs those cases too. So before it
// starts a case, a meta-job that has had no news of its run for longer than
// RecheckAfter reads the claim state once more (one lock-free read); if its
// run is no longer the current one (another run started, or farm repair
// rebuilt the state), it starts none of the cases it still holds — they stay without a start record in its run, never ran, for the
// run that took over — says so in one line, and exits. In the normal path
// (claims about a second apart) this costs nothing: no filesystem call, only
// a look at the clock.
//
// News of the run is a claim that committed cases in it (dated from before
// the claim: a job frozen inside its claim, after the commit, counts the
// freeze) or a re-check that found it current; not a status record, which
// reads nothing: a meta-job stopped in the middle of a case writes that
// case's end record as soon as it resumes, and must still re-check before
// the next case.
//
// The look is made twice for each case: before it starts (stillStarts),
// and again once its start record is written (startsAfterRecord), so that
// a job frozen between the two — a window a loaded machine widens — does
// not run a case the next run ran: it records it interrupted instead.
// What remains: a case already running when the job froze (or that started
// in the instant between that last look and its exec) runs on to its end;
// the cases after it do not start.

// RecheckAfter is how long a meta-job may go without news of its run before
// it reads the claim state again before starting a case
// (FARM_RECHECK_AFTER overrides it, for tests).
const RecheckAfter = time.Minute

// MsgSuperseded ends a loop whose run is no longer the current one; the
// job's output gets the line that says why (Metajob.supersededLine).
const MsgSuperseded = "farm: this meta-job's run is no longer the current one; exiting."

// runNews is what the meta-job last knew of its run: when, and the state
// its last claim or re-check read.
type runNews struct {
	at  time.Time       // when (time.Now: wall and monotonic readings)
	run casetable.State // the state then
}

// gap is how long it has been, at now, since t: the longer of the wall
// clock's and the monotonic clock's measures. A frozen VM, or a suspended
// host, pauses the monotonic clock (restic's lock refresh measures by the
// wall clock for this reason); a wall clock set back must not hide a
// SIGSTOP that the monotonic clock saw.
func gap(now, t time.Time) time.Duration {
	return max(now.Sub(t), now.Round(0).Sub(t.Round(0)))
}

// heard records that the run was current at t, as st (a state read or
// committed in it) says. m.mu is held.
func (m *Metajob) heard(t time.Time, st casetable.State) {
	m.news = runNews{at: t, run: st}
}

// recheckAfter is the meta-job's threshold: FARM_RECHECK_AFTER, else
// RecheckAfter.
func (m *Metajob) recheckAfter() time.Duration {
	if m.Env.RecheckAfter > 0 {
		return m.Env.RecheckAfter
	}
	return RecheckAfter
}

// now is the clock (a test's, if set).
func (m *Metajob) now() time.Time {
	if m.clock != nil {
		return m.clock()
	}
	return time.Now()
}

// recheck reports whether the meta-job may start the case it is about to
// start: yes if it had news of its run within recheckAfter, or if a read of
// the claim state finds the run still current. Otherwise it drops the
// cases still queued, counts them (and held more, which the caller holds)
// as left, wakes the loops waiting for their turn, and returns
// MsgSuperseded; the loops then end, and the job with supersededLine. An
// error is a claim state that could not be read. m.mu is held.
func (m *Metajob) recheck(ctx context.Context, held int) (string, error) {
	if m.superseded != "" {
		m.left += held
		return MsgSuperseded, nil
	}
	now := m.now()
	silent := gap(now, m.news.at)
	if m.news.at.IsZero() || silent <= m.recheckAfter() {
		return "", nil
	}
	var st casetable.State
	r := fsretry.Retrier{Log: m.log}
	err := r.Do(ctx, func() error {
		var err error
		st, err = m.store.Read(ctx)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("reading the claim state after %s without news of run %d: %w", roundGap(silent), m.Env.Run, err)
	}
	why := supersededBy(m.Env.Run, m.news.run, st)
	if why == "" {
		m.heard(now, st)
		return "", nil
	}
	m.superseded, m.silent = why, silent
	m.left += len(m.queue) + len(m.rescued) + held
	m.queue, m.rescued = nil, nil
	m.pool.stop() // the loops waiting for their turn start nothing
	return MsgSuperseded, nil
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
	case st.Repair != last.Repair || st.Gen < last.Gen || ownChanged(st.OwnSet(), last.OwnSet()):
		// Every repair marks its state as its own; a claim never
		// changes the run's own table (it may move the cursor to a
		// table 'farm add' queued); a new chain starts from generation
		// 0: 'farm repair' rebuilt the state.
		return fmt.Sprintf("the claim state of run %d was rebuilt (farm repair)", run)
	}
	return ""
}

// ownChanged reports whether a run's own table is not the one it was.
func ownChanged(a, b casetable.Set) bool {
	return a != b
}

// supersededLine is the job's last line when its run was superseded.
func (m *Metajob) supersededLine() string {
	to := "left to the next run"
	if m.rescuedBy != "" {
		to = "rescued by meta-job " + m.rescuedBy
	} else if st := m.store.Last(); st.Run > m.Env.Run { // the state the re-check read
		to = fmt.Sprintf("left to run %d", st.Run)
	}
	cases := fmt.Sprintf("the %d cases it had claimed but not started were %s", m.left, to)
	if m.left == 1 {
		cases = "the case it had claimed but not started was " + to
	}
	if m.rescuedBy != "" && m.silent == 0 {
		return fmt.Sprintf("farm: %s; %s; exiting.", m.superseded, cases)
	}
	return fmt.Sprintf("farm: %s while this meta-job was stopped (no news of its run for %s); %s; exiting.", m.superseded, roundGap(m.silent), cases)
}

// roundGap rounds d for a message: to the second, or to the millisecond
// below a second.
func roundGap(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(time.Second)
}
