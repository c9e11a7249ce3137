package metajob

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/farm-hpc/farm/status"
	"github.com/farm-hpc/farm/tablefmt"
)

// Time limits of cases (issue 38). A case's limit is its line's time=, else
// the config's CASE_TIME_LIMIT: a time, or a multiple of the median
// duration of the cases that succeeded so far in the farm (5x), from
// MedianAfter of them on and never under CASE_TIME_LIMIT_MIN. A case with
// a limit runs in a process group of its own (caseRequest.Group); the loop
// that runs it sets a timer (caseTimer), which at the limit sends SIGTERM
// to the group, and SIGKILL CASE_KILL_GRACE later to what is left of it;
// the case is recorded timed out (a T record), and the loop goes on with
// its next case as soon as the case's process has ended. No poller: the
// timer is the runtime's, set and stopped by the loop.

// MedianAfter is the number of succeeded cases from which a limit that is
// a multiple of their median (CASE_TIME_LIMIT=5x) applies.
const MedianAfter = 20

// maxOwnDurations bounds the durations of its own succeeded cases a
// meta-job keeps for the median: past it, the farm-wide median of the
// cutoff record (recomputed at each doubling of the cases) serves alone.
const maxOwnDurations = 1 << 16

// medianLimit is what a meta-job knows of the median duration of the
// succeeded cases: its own, and the farm's as its cutoff record last said.
// The owner's.
type medianLimit struct {
	own    []float64 // its succeeded cases' durations, in seconds
	median float64   // the median of own, computed at ownAt of them
	ownAt  int
}

// succeeded notes a succeeded case of d.
func (ml *medianLimit) succeeded(d time.Duration) {
	if len(ml.own) < maxOwnDurations {
		ml.own = append(ml.own, d.Seconds())
	}
}

// get returns the median of the succeeded cases and how many it is of:
// this job's own or the farm's record, whichever counts more. The own
// median is computed again once its cases grew by an eighth.
func (ml *medianLimit) get(rec status.Cutoff) (float64, int64) {
	if n := len(ml.own); n >= MedianAfter && n >= ml.ownAt+max(1, ml.ownAt/8) {
		ml.median = status.Median(append([]float64(nil), ml.own...))
		ml.ownAt = n
	}
	if rec.Succeeded > int64(ml.ownAt) {
		return rec.Median, rec.Succeeded
	}
	return ml.median, int64(ml.ownAt)
}

// caseLimit is case c's time limit, 0 for none.
func (o *owner) caseLimit(c tablefmt.Case) time.Duration {
	if c.Needs.Time > 0 {
		return c.Needs.Time
	}
	cfg := o.m.Farm.Config
	if cfg.CaseTimeFactor == 0 {
		return cfg.CaseTimeLimit
	}
	med, n := o.medians.get(o.m.rt.rec)
	if n < MedianAfter || med <= 0 {
		return 0
	}
	return max(time.Duration(cfg.CaseTimeFactor*med*float64(time.Second)), cfg.CaseTimeMin)
}

// caseTimer ends the case of a runner at its time limit: SIGTERM to its
// process group, then SIGKILL after the grace. The loop that runs the
// case starts it and stops it when the case has ended (end).
type caseTimer struct {
	r      caseRunner
	id     int64
	limit  time.Duration
	grace  time.Duration
	log    io.Writer
	graces *graces // where its SIGKILL waits

	mu   sync.Mutex
	t    *time.Timer
	sent syscall.Signal // the last signal sent to the case; 0: none
	done bool           // the case ended
}

// startTimer starts the timer of case id, run by r, of limit.
func (m *Metajob) startTimer(r caseRunner, id int64, limit time.Duration) *caseTimer {
	ct := &caseTimer{r: r, id: id, limit: limit, grace: m.Farm.Config.CaseKillGrace, log: m.log, graces: &m.graces}
	ct.mu.Lock()
	ct.t = time.AfterFunc(limit, ct.term)
	ct.mu.Unlock()
	return ct
}

// groupWait is how soon the timer looks again for the process group of a
// case that has not said it yet (the worker's line, read as it runs).
const groupWait = 20 * time.Millisecond

// term sends SIGTERM to the case's process group, and sets SIGKILL for
// what is left of it after the grace: processes it left behind too, once
// it has ended.
func (ct *caseTimer) term() {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if ct.done {
		return
	}
	g := ct.r.group()
	if g <= 0 {
		ct.t.Reset(groupWait)
		return
	}
	born, _ := procStart(g)
	if syscall.Kill(-g, syscall.SIGTERM) != nil {
		return // it has just ended
	}
	ct.sent = syscall.SIGTERM
	fmt.Fprintf(ct.log, "farm: case %d ran past its time limit of %s: SIGTERM to its processes, SIGKILL in %s\n",
		ct.id, ct.limit, ct.grace)
	ct.graces.add(ct.grace, func() { ct.kill(g, born) })
}

// kill sends SIGKILL to process group g, whose leader started at born
// (procStart), unless its number now names another group: a group's number
// is taken by no new process while one of its processes lives, so a leader
// that is gone, or the same, leaves g the case's.
func (ct *caseTimer) kill(g int, born uint64) {
	if now, ok := procStart(g); ok && now != born {
		return
	}
	ct.mu.Lock()
	if !ct.done {
		ct.sent = syscall.SIGKILL // before the case can end of it
	}
	ct.mu.Unlock()
	syscall.Kill(-g, syscall.SIGKILL)
}

// end stops the timer once the case ended, and returns the last signal
// it sent the case (0: none; the case did not time out).
func (ct *caseTimer) end() syscall.Signal {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	ct.done = true
	ct.t.Stop()
	return ct.sent
}

// procStart is the start time of process pid (field 22 of /proc/PID/stat,
// in clock ticks since boot); false if there is no such process.
func procStart(pid int) (uint64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(b, ')') // the command may hold blanks and parentheses
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(b[i+1:]) // from field 3, the state
	if len(f) < 20 {
		return 0, false
	}
	n, err := strconv.ParseUint(string(f[19]), 10, 64)
	return n, err == nil
}

// timedOutCode is the code runOne returns for a case that timed out: no
// exit status (caseEnded tells the owner).
const timedOutCode = -1

// timedOut records case c, started at start, ended by its timer after d
// with sig the last signal it sent: runOne's return for it. A stop signal
// that came meanwhile ends the loop, as after any case.
func (m *Metajob) timedOut(c tablefmt.Case, sig int, start time.Time, d time.Duration) (int, time.Duration, stop, error) {
	m.swMu.Lock()
	err := m.sw.TimedOut(c.ID, sig, start, d)
	m.swMu.Unlock()
	if err != nil {
		return 0, 0, going, err
	}
	fmt.Fprintf(m.log, "farm: case %d timed out after %.1fs (ended by signal %d)\n", c.ID, d.Seconds(), sig)
	if m.stop.stopped() {
		return 0, 0, stopSignal, nil
	}
	return timedOutCode, d, going, nil
}

// graces are the SIGKILLs due after the grace of the cases that timed
// out: the meta-job carries out those still due before it exits
// (finish), else what a case left behind, in its own process group,
// would outlive it.
type graces struct {
	mu  sync.Mutex
	set map[*graceKill]struct{}
}

// graceKill is one SIGKILL due at due.
type graceKill struct {
	due  time.Time
	kill func()
	t    *time.Timer
}

// add sets kill to run after d.
func (gs *graces) add(d time.Duration, kill func()) {
	gk := &graceKill{due: time.Now().Add(d), kill: kill}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if gs.set == nil {
		gs.set = map[*graceKill]struct{}{}
	}
	gs.set[gk] = struct{}{}
	gk.t = time.AfterFunc(d, func() { gs.fire(gk) })
}

// fire runs gk's kill, once.
func (gs *graces) fire(gk *graceKill) {
	gs.mu.Lock()
	_, ok := gs.set[gk]
	delete(gs.set, gk)
	gs.mu.Unlock()
	if ok {
		gk.kill()
	}
}

// finish carries out the SIGKILLs still due: when due, or at once once
// the job is told to stop (stop closed).
func (gs *graces) finish(stop <-chan struct{}, log io.Writer) {
	gs.mu.Lock()
	var left []*graceKill
	for gk := range gs.set {
		left = append(left, gk)
	}
	gs.mu.Unlock()
	for _, gk := range left {
		if d := time.Until(gk.due); d > 0 {
			fmt.Fprintf(log, "farm: waiting %s for the grace of a timed-out case's processes before SIGKILL\n", d.Round(time.Millisecond))
			select {
			case <-time.After(d):
			case <-stop:
			}
		}
		gk.t.Stop()
		gs.fire(gk)
	}
}
