package faulttrials

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/farm-hpc/farm/casetable"
	"github.com/farm-hpc/farm/integration/harness"
)

// TestFrozenAcrossResubmitLanes: FARM_FAULT_LANES_TRIALS trials (default
// 6) of a meta-job frozen past the rescue's fence, on runs with lanes, with
// the default config (rescue on: RESCUE_CHECK=60) and the default lease
// (casetable.LookEvery, 5 s). Each trial submits 3-6 meta-jobs on 60-150
// cases of 5-40 ms with FARM_CLAIM_LANES=2, 3 or 4 (by the seed), and
// freezes one of them (SIGSTOP to its process group) before, inside or
// right after a commit in its lane, as TestFrozenHoldersLanes does; in half
// the trials (by the seed) every other live meta-job is frozen too,
// wherever it is. Then their nodes go down as a batch system sees it: their
// supervisors are stopped too and the jobs recorded FAILED, their
// processes left stopped. The others, if any, rescue the frozen jobs'
// cases within run 1 (metajob/rescue.go: the case a frozen job was running
// as its next attempt, why=rescue, the documented rescue duplicate) and
// end; what is left (every live job frozen: no one rescues) goes to 'farm
// resubmit' (FARM_CLAIM_LANES again, by the seed), run 2, which must close
// every lane of run 1 and run what did not succeed, to the end. Then the
// frozen jobs resume, at least 6 s after the first froze (more than the
// lease): they must start no case (their cases were rescued, or their
// lanes are closed, and they had no news of their run for more than the
// lease), and end. Counted from the cases' execution logs and the status
// records as the kill trials (dup-claims, dup-exec, lost; rescued, left,
// rescue-dups, death to rerun, from the moment the node went down), plus
// late-starts: cases a resumed job started. A case a frozen job had
// started and not ended (its start record written: ran-on) is run again
// by the rescue or by run 2, farm not knowing whether it ended, and runs
// on to its end when the job resumes (its command may even write its
// start line then): that is the price of a frozen node, not a duplicate of
// farm's (finalRanOn).
func TestFrozenAcrossResubmitLanes(t *testing.T) {
	supersededTrials(t, "TestFrozenAcrossResubmitLanes", "frozen-across-resubmit-lanes", true)
}

// TestFrozenAcrossResubmitLanesNoRescue: the trials of
// TestFrozenAcrossResubmitLanes with rescue off (RESCUE_CHECK=0) and a
// lease of 1 s (FARM_LOOK_EVERY=1s), the hazard lanes add (CLAIMS.md,
// "Lanes", invariant 3): a meta-job frozen in run R that resumes after run
// R+1 started. With rescue on, run 1's live meta-jobs take the frozen
// jobs' cases, so that run 2 starts only when every live job was frozen;
// here it starts whenever a frozen job held cases, and every such trial
// checks that run 2 closes the lanes of run 1 and that the resumed jobs
// find their run superseded.
func TestFrozenAcrossResubmitLanesNoRescue(t *testing.T) {
	supersededTrials(t, "TestFrozenAcrossResubmitLanesNoRescue", "frozen-across-resubmit-lanes-norescue", false)
}

func supersededTrials(t *testing.T, test, label string, rescue bool) {
	harness.Bin(t)
	ta := &tally{started: time.Now()}
	var mu sync.Mutex
	points := map[string]int{}
	late, closed, ranOn := 0, 0, 0
	pointOf := func(seed uint64) string { return []string{"before", "inside", "after"}[seed%3] }
	par := parallel(t, rescue)
	runTrials(t, seeds(t, envInt(t, "FARM_FAULT_LANES_TRIALS", 6)), par, func(seed uint64) string { return fmt.Sprintf("%d-%s", seed, pointOf(seed)) }, func(t *testing.T, seed uint64) {
		c, got, l, cl, ro := supersededTrial(t, seed, pointOf(seed), rescue)
		if t.Failed() || c.bad() || l > 0 {
			t.Errorf("trial of seed %d failed (%s, late starts %d); rerun it with:\n  %s", seed, c.short(), l, rerun(test, seed))
		}
		ta.add(c, seed, t.Failed())
		mu.Lock()
		points[got]++
		late += l
		closed += cl
		ranOn += ro
		mu.Unlock()
	})
	c := ta.c
	figure(t, fmt.Sprintf("%s trials=%d metajobs=3-6 lanes=2-4 lane-runs=%d before=%d inside=%d after=%d missed=%d frozen=%d inside-lane-commit=%d lanes-closed=%d ran-on=%d dup-claims=%d dup-exec=%d lost=%d late-starts=%d %s failed-trials=%d parallel=%d seconds=%.0f",
		label, c.Trials, c.LaneRuns, points["before"], points["inside"], points["after"], points["missed"], c.Kills, c.InLane, closed, ranOn, c.DupClaims, c.DupExec, c.Lost, late, rescueFigure(rescue, c), len(ta.failed), par, time.Since(ta.started).Seconds()))
	if len(ta.failed) > 0 {
		var cmds []string
		for _, s := range ta.failed {
			cmds = append(cmds, "  "+rerun(test, s))
		}
		t.Errorf("%d trials failed; rerun them with:\n%s", len(ta.failed), strings.Join(cmds, "\n"))
	}
}

// supersededTrial runs the trial of seed, freezing at point, rescue on if
// rescue; it returns its counts, the point it froze at, the cases the
// resumed jobs started, how many lanes of run 1 it found closed, and how
// many cases the frozen jobs had started and not ended.
func supersededTrial(t *testing.T, seed uint64, point string, rescue bool) (c counts, got string, late, closed, ranOn int) {
	var running map[string]map[int64]bool // per frozen job, started and not ended when it froze
	rng := rand.New(rand.NewPCG(seed, seed^0x2545f4914f6cdd1d))
	jobs := 3 + rng.IntN(4)
	n := 60 + rng.IntN(91)
	dur := durations(rng, n, 5, 40)
	delay := time.Duration(50+rng.IntN(300)) * time.Millisecond
	k := 1 + rng.IntN(3)
	all := rng.IntN(2) == 0
	t.Logf("seed %d: %d meta-jobs, %d cases of 5-40 ms, frozen %s, %s after the first live job, every live job's node down too %v; run 2 of %d meta-jobs; rescue %v", seed, jobs, n, point, delay, all, k, rescue)
	eng := local{}
	tr := newTrial(t, eng, dur, rescue)
	mustEnv(t, tr.dir, supersededEnv(seed, 1, rescue), append([]string{"submit", fmt.Sprint(jobs)}, eng.args()...)...)
	c.Trials, c.Cases = 1, n
	if tr.checkLanes(1, lanesOf(seed, 1)) {
		c.LaneRuns++
	}
	w := tr.watch()
	lanedir, lanes := w.lanedir, w.lanes
	ids := harness.JobIDs(tr.dir)
	if len(tr.live(ids, nil, 60*time.Second)) == 0 {
		t.Fatal("no meta-job ran")
	}
	time.Sleep(delay)
	live := tr.live(ids, nil, 0)
	if len(live) < 2 {
		t.Logf("the farm ended before the freeze")
		return c, "missed", 0, 0, 0
	}
	victim := live[rng.IntN(len(live))]
	got, slot, stopped := tr.freezeVictim(w, victim, point)
	t0 := time.Now()
	if !stopped {
		tr.wait()
		f := final(t, tr.dir, tr.exec, n, nil, rescue)
		f.Trials, f.LaneRuns = c.Trials, c.LaneRuns
		return f, "missed", 0, 0, 0
	}
	c.InCommit, c.InLane = tr.frozeAt(w, victim, got, slot)
	frozen := []string{victim}
	if all {
		// Every node goes down: the others freeze wherever they are
		// (a victim frozen inside its commit keeps its slot open: only
		// run 2's closing of the lane voids it).
		frozen = append(frozen, tr.freezeLive(ids, victim)...)
	}
	supervisors, down := tr.nodesDown(frozen)
	// The cases they had started and not ended: a rescue or the next run
	// runs them again (farm cannot know whether they ended), and they run
	// on to their end when their jobs resume.
	running, ranOn = startedNotEnded(readJobRecords(t, tr.dir), frozen)
	tr.waitOthers(ids, frozen)
	closed, ended := tr.runTwo(seed, k, rescue, frozen, lanedir, lanes)
	if !ended {
		c.NotEnded++
	}
	// The nodes thaw: the frozen meta-jobs resume, stopped for more than
	// the lease.
	late = tr.thawLate(t0, rescue, frozen, supervisors, running)
	tr.logSuperseded(frozen)
	f := finalRanOn(t, tr.dir, tr.exec, n, running, down, rescue)
	f.Trials, f.Kills, f.InCommit, f.InLane, f.LaneRuns, f.NotEnded = c.Trials, len(frozen), c.InCommit, c.InLane, c.LaneRuns, c.NotEnded
	if f.Reruns > ranOn {
		t.Errorf("%d cases ran again after an unrecorded end; the frozen jobs had %d started", f.Reruns, ranOn)
	}
	tr.diagnose()
	return f, got, late, closed, ranOn
}

// runTwo resubmits k meta-jobs of the trial of seed as run 2, with run
// 1's jobs frozen (their nodes down), unless every case has succeeded
// (the others ran everything, the frozen jobs' cases too). It checks that
// run 2 closed the lanes of run 1 (lanes of them, in lanedir) and returns
// how many it found closed, and whether run 2 ended (within 5 minutes;
// true if there was none).
func (tr *trial) runTwo(seed uint64, k int, rescue bool, frozen []string, lanedir string, lanes int) (closed int, ended bool) {
	if tr.allSucceeded() {
		// The others ran everything, the frozen jobs' cases too (they
		// held none, or a rescue took them): no run 2.
		tr.t.Logf("every case succeeded without a resubmit")
		return 0, true
	}
	mustEnv(tr.t, tr.dir, supersededEnv(seed, 2, rescue), "resubmit", fmt.Sprint(k))
	tr.checkLanes(2, lanesOf(seed, 2))
	closed = tr.closedLanes(lanedir, lanes)
	ended = tr.waitEnd(seed, 2, 5*time.Minute, fmt.Sprintf("; jobs %v of run 1 frozen, their nodes down", frozen))
	return closed, ended
}

// thawLate resumes the frozen jobs and their supervisors (thaw) once they
// have been stopped, since t0, for more than the lease (with rescue off,
// FARM_LOOK_EVERY=1s), and returns how many cases they started then other
// than those they had running (lateStarts).
func (tr *trial) thawLate(t0 time.Time, rescue bool, frozen []string, supervisors []int, running map[string]map[int64]bool) (late int) {
	seen := readExec(tr.exec, tr.n)
	minHold := 2 * time.Second // FARM_LOOK_EVERY=1s
	if rescue {
		minHold = casetable.LookEvery + time.Second
	}
	time.Sleep(time.Until(t0.Add(minHold)))
	tr.thaw(frozen, supervisors)
	return lateStarts(tr.t, seen, readExec(tr.exec, tr.n), running)
}

// supersededEnv is the environment of the farm commands of run of the
// trial of seed: its lanes, and with rescue off a look at the run every
// 1 s (with rescue on, the default lease).
func supersededEnv(seed uint64, run int, rescue bool) []string {
	env := []string{fmt.Sprintf("FARM_CLAIM_LANES=%d", lanesOf(seed, run))}
	if !rescue {
		env = append(env, "FARM_LOOK_EVERY=1s")
	}
	return env
}

// freezeVictim stops the meta-job victim at point (before, inside or after
// a commit) and returns where it froze and in which slot; stopped is false
// if it ended before it could be.
func (tr *trial) freezeVictim(w *commitWatch, victim, point string) (got, slot string, stopped bool) {
	eng := local{}
	got = point
	if point == "before" {
		eng.signal(tr.dir, victim, syscall.SIGSTOP)
		tr.waitStopped(victim)
	} else {
		got, slot = tr.freezeAtCommit(w, victim, point)
	}
	if !procState(eng.leader(tr.dir, victim), 'T') {
		tr.t.Logf("job %s ended before it could be frozen (the farm was almost done)", victim)
		return got, slot, false
	}
	return got, slot, true
}

// frozeAt logs where the victim froze (got: before, inside or after its
// commit, in slot) and returns the counts of a freeze inside a commit, and
// inside one in a lane; a slot open on the main chain of a run with lanes
// is an error.
func (tr *trial) frozeAt(w *commitWatch, victim, got, slot string) (inCommit, inLane int) {
	if got == "inside" {
		inCommit = 1
		if w.inLane(filepath.Dir(slot)) {
			inLane = 1
		} else if w.lanes > 0 {
			tr.t.Errorf("slot %s open on the main chain of a run with lanes (%s): claims must commit in the lanes only", slot, w.lanedir)
		}
	}
	at := ""
	if slot != "" {
		at, _ = filepath.Rel(tr.dir, slot)
		at = " (" + at + ")"
	}
	tr.t.Logf("froze job %s %s its commit%s", victim, got, at)
	return inCommit, inLane
}

// nodesDown takes the nodes of the frozen jobs down: the batch system
// records the jobs FAILED, their processes live on, stopped. It returns
// their supervisors (stopped too; the test's end resumes them all), and
// when each job was recorded FAILED.
func (tr *trial) nodesDown(frozen []string) (supervisors []int, down deaths) {
	eng := local{}
	down = deaths{}
	for _, j := range frozen {
		supervisor, err := eng.nodeDown(tr.dir, j)
		down[j] = time.Now()
		if supervisor > 0 {
			tr.t.Cleanup(func() { syscall.Kill(supervisor, syscall.SIGCONT) })
		}
		tr.t.Cleanup(func() { eng.signal(tr.dir, j, syscall.SIGCONT) })
		if err != nil {
			tr.t.Fatal(err)
		}
		supervisors = append(supervisors, supervisor)
	}
	return supervisors, down
}

// logSuperseded logs the line of each frozen job's output that says why
// it ended once resumed: its run superseded, or its cases rescued.
func (tr *trial) logSuperseded(frozen []string) {
	for _, j := range frozen {
		out, _ := os.ReadFile(filepath.Join(tr.dir, "OUTPUT", "slurm-"+j+".out"))
		for _, l := range strings.Split(string(out), "\n") {
			if strings.Contains(l, "was superseded") || strings.Contains(l, "rescued its cases") {
				tr.t.Logf("job %s: %s", j, l)
			}
		}
	}
}

// freezeLive stops (SIGSTOP) every live meta-job of jobs but victim, and
// returns them.
func (tr *trial) freezeLive(jobs []string, victim string) []string {
	var frozen []string
	for _, j := range jobs {
		if j != victim && tr.eng.alive(tr.dir, j) && tr.eng.signal(tr.dir, j, syscall.SIGSTOP) == nil {
			tr.waitStopped(j)
			frozen = append(frozen, j)
		}
	}
	tr.t.Logf("froze the other live jobs too: %v", frozen)
	return frozen
}

// startedNotEnded returns, per frozen job, the cases its records say it
// started and did not end, and how many.
func startedNotEnded(recs map[string]jobRecords, frozen []string) (running map[string]map[int64]bool, n int) {
	running = map[string]map[int64]bool{}
	for _, j := range frozen {
		running[j] = map[int64]bool{}
		for id := range recs[j].started {
			if !recs[j].ended[id] {
				running[j][id] = true
				n++
			}
		}
	}
	return running, n
}

// waitOthers waits (2 minutes at most) for the meta-jobs of jobs that are
// not frozen to end, then for the farm.
func (tr *trial) waitOthers(jobs, frozen []string) {
	tr.waitNoneLive(jobs, frozenSet(frozen))
	tr.wait()
}

// waitNoneLive waits, 2 minutes at most, until no meta-job of jobs but
// those of skip is live.
func (tr *trial) waitNoneLive(jobs []string, skip map[string]bool) {
	deadline := time.Now().Add(2 * time.Minute)
	for len(tr.live(jobs, skip, 0)) > 0 {
		if time.Now().After(deadline) {
			tr.t.Fatal("the other meta-jobs did not end within 2 minutes")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// closedLanes checks that each of the lanes of run 1 (in lanedir) is
// closed, its newest generation a closing one, once run 2 started; it
// returns how many are.
func (tr *trial) closedLanes(lanedir string, lanes int) (closed int) {
	for l := 0; l < lanes; l++ {
		seg := filepath.Join(tr.dir, "MISC", lanedir, strconv.Itoa(l), "000000")
		if g, err := newestGeneration(seg); err != nil || !strings.HasSuffix(strings.TrimSpace(g), " closed") {
			tr.t.Errorf("lane %d of run 1 not closed once run 2 started: newest generation %q (%v)", l, g, err)
		} else {
			closed++
		}
	}
	return closed
}

// thaw resumes the frozen meta-jobs and their supervisors, and waits (60 s
// at most) for them to end.
func (tr *trial) thaw(frozen []string, supervisors []int) {
	for i, j := range frozen {
		syscall.Kill(supervisors[i], syscall.SIGCONT)
		tr.eng.signal(tr.dir, j, syscall.SIGCONT)
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, j := range frozen {
		pgid := tr.eng.leader(tr.dir, j)
		for pgid > 0 && syscall.Kill(-pgid, 0) == nil && !zombie(pgid) {
			if time.Now().After(deadline) {
				tr.t.Fatalf("job %s still running 60 s after it resumed", j)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// lateStarts counts the cases that a frozen job started after it resumed
// (events in after beyond those in seen) other than those it had started
// and not ended when it froze (running), each an error.
func lateStarts(t *testing.T, seen, after map[int64][]event, running map[string]map[int64]bool) (late int) {
	for id, evs := range after {
		for _, e := range evs[len(seen[id]):] {
			if e.kind == 'S' && running[e.job] != nil && !running[e.job][id] {
				late++
				t.Errorf("case %d: started by job %s of run 1 after it resumed (execution log %v)", id, e.job, evs)
			}
		}
	}
	return late
}

// newestGeneration returns the content of the newest committed generation
// (the highest c.N that is a regular file) in the segment directory seg.
func newestGeneration(seg string) (string, error) {
	ents, err := os.ReadDir(seg)
	if err != nil {
		return "", err
	}
	top := int64(-1)
	for _, e := range ents {
		if v, ok := strings.CutPrefix(e.Name(), "c."); ok && e.Type().IsRegular() {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > top {
				top = n
			}
		}
	}
	if top < 0 {
		return "", fmt.Errorf("%s: no committed generation", seg)
	}
	b, err := os.ReadFile(filepath.Join(seg, fmt.Sprintf("g.%d", top)))
	return string(b), err
}

// nodeDown does to the local job what a batch system does when it marks
// the job's node DOWN: the job is recorded FAILED, its processes live on
// (its supervisor, the local backend's batch system, is stopped so that it
// records nothing). It returns the supervisor's PID.
func (l local) nodeDown(dir, job string) (int, error) {
	pid, _ := l.state(dir, job)
	if pid <= 1 {
		return 0, fmt.Errorf("job %s: no supervisor PID recorded", job)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return 0, fmt.Errorf("SIGSTOP %d (job %s's supervisor): %w", pid, job, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !procState(pid, 'T') {
		if time.Now().After(deadline) {
			return pid, fmt.Errorf("job %s's supervisor %d did not stop", job, pid)
		}
		time.Sleep(time.Millisecond)
	}
	path := filepath.Join(dir, "MISC", "local", job+".state")
	b, err := os.ReadFile(path)
	if err != nil {
		return pid, err
	}
	var st map[string]any
	if err := json.Unmarshal(b, &st); err != nil {
		return pid, err
	}
	st["State"], st["Reason"], st["End"] = "FAILED", "node down (test)", time.Now()
	if b, err = json.Marshal(st); err != nil {
		return pid, err
	}
	if err := os.WriteFile(path+".tmp", b, 0o644); err != nil {
		return pid, err
	}
	return pid, os.Rename(path+".tmp", path)
}

func frozenSet(jobs []string) map[string]bool {
	m := map[string]bool{}
	for _, j := range jobs {
		m[j] = true
	}
	return m
}
