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

// startTimer starts the timer of case id, run by r, of limit, counted
// from start: the time its start record holds, which its run-time in its
// end record counts from too, so that the status write before the case
// runs (an fsync on the farm's filesystem) does not lengthen its limit.
func (m *Metajob) startTimer(r caseRunner, id int64, start time.Time, limit time.Duration) *caseTimer {
	ct := &caseTimer{r: r, id: id, limit: limit, grace: m.Farm.Config.CaseKillGrace, log: m.log, graces: &m.graces}
	ct.mu.Lock()
	ct.t = time.AfterFunc(time.Until(start.Add(limit)), ct.term)
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
	ct.graces.add(g, born, ct.grace, ct.killing)
}

// killing is told that the grace is over: the case, if it still runs,
// ends of SIGKILL.
func (ct *caseTimer) killing() {
	ct.mu.Lock()
	if !ct.done {
		ct.sent = syscall.SIGKILL // before the case can end of it
	}
	ct.mu.Unlock()
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
func (m *Metajob) timedOut(c tablefmt.Case, sig int, start time.Time, d time.Duration, u status.Use) (int, time.Duration, stop, error) {
	m.swMu.Lock()
	err := m.sw.TimedOut(c.ID, sig, start, d, u)
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

// killLeftAfterStop sets SIGKILL, after the grace (at most stopGrace),
// for what is left of the process group of the case r ran last, with a
// limit, when a stop signal came: the signal the job got was passed on to
// the group, which left the job's, and which the batch system's SIGKILL
// of the job, after its own grace, would not reach. The meta-job, which
// stops, waits for it as it exits (graces.finish).
func (m *Metajob) killLeftAfterStop(r caseRunner) {
	if g := r.lastGroup(); g > 0 {
		born, _ := procStart(g)
		m.graces.add(g, born, min(m.Farm.Config.CaseKillGrace, stopGrace), nil)
	}
}

// stopGrace bounds the grace of a case with a limit that a stop signal
// ended: within the grace batch systems give a job they stop before they
// kill it (Slurm's KillWait, 30 s by default; farm's local backend, 10 s),
// so that the meta-job is still there to send its SIGKILL.
const stopGrace = 5 * time.Second

// graces are the SIGKILLs due after the grace of the cases that timed
// out (or that a stop signal ended): the meta-job waits for those still
// due before it exits (finish), else what a case left behind, in its own
// process group, would outlive it.
type graces struct {
	mu  sync.Mutex
	set map[*graceKill]struct{}
}

// graceKill is the SIGKILL of process group g, whose leader started at
// born (procStart), due at due; killing, if set, is told first.
type graceKill struct {
	g       int
	born    uint64
	due     time.Time
	killing func()
	t       *time.Timer
	once    sync.Once // its kill: once, and done when Do returns, whoever calls it
}

// add sets the SIGKILL of group g after d.
func (gs *graces) add(g int, born uint64, d time.Duration, killing func()) {
	gk := &graceKill{g: g, born: born, due: time.Now().Add(d), killing: killing}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if gs.set == nil {
		gs.set = map[*graceKill]struct{}{}
	}
	gs.set[gk] = struct{}{}
	gk.t = time.AfterFunc(d, func() { gs.fire(gk) })
}

// kill sends gk's SIGKILL, unless the group's number now names
// another group: a group's number is taken by no new process while one
// of its processes lives, so a leader that is gone, or the same, leaves
// the group the case's.
func (gk *graceKill) kill() {
	if now, ok := procStart(gk.g); ok && now != gk.born {
		return
	}
	if gk.killing != nil {
		gk.killing()
	}
	syscall.Kill(-gk.g, syscall.SIGKILL)
}

// fire sends gk's SIGKILL (once; a call that comes while another sends
// it returns once it is sent).
func (gs *graces) fire(gk *graceKill) {
	gs.mu.Lock()
	delete(gs.set, gk)
	gs.mu.Unlock()
	gk.once.Do(gk.kill)
}

// finishPoll is how often finish looks whether a group it waits for has
// ended.
const finishPoll = 50 * time.Millisecond

// finish waits for the SIGKILLs still due: each group's, until it is due
// (then sent) or the group has ended by itself.
func (gs *graces) finish(log io.Writer) {
	gs.mu.Lock()
	var left []*graceKill
	for gk := range gs.set {
		left = append(left, gk)
	}
	gs.mu.Unlock()
	for _, gk := range left {
		if d := time.Until(gk.due); d > 0 && syscall.Kill(-gk.g, 0) == nil {
			fmt.Fprintf(log, "farm: waiting up to %s for the processes of a case ended by farm (process group %d) before SIGKILL\n", d.Round(time.Millisecond), gk.g)
		}
		for time.Now().Before(gk.due) && syscall.Kill(-gk.g, 0) == nil {
			time.Sleep(min(finishPoll, time.Until(gk.due)))
		}
		gk.t.Stop()
		gs.fire(gk)
	}
}
