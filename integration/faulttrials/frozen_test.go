package faulttrials

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/farm-hpc/farm/integration/harness"
)

// TestFrozenHolders: FARM_FAULT_FROZEN_TRIALS trials (default 12) on the local
// backend, two at a time, with the default config (rescue on:
// RESCUE_CHECK=60). Each submits 3-6 meta-jobs on 60-150 cases of 5-40 ms
// and freezes one of them (SIGSTOP to its process group; its supervisor
// runs on, and the engine reports the job RUNNING) at one of three points,
// in turn:
//
//   - before: at a random moment, outside any commit of its own (it holds
//     the cases of its last claim);
//   - inside: inside its claim commit, its next generation's slot s.N
//     taken and not yet marked (the others are stopped for the moment;
//     the victim is stopped as its slot appears, and the trial checks
//     that the slot is still open);
//   - after: right after it marked its generation (its claim is committed
//     and none of the claimed cases recorded as started yet, or just).
//
// The frozen meta-job stays stopped while the others run every other case
// and end — all but the run's warden (metajob/rescue.go), which stays, as
// it does for any job the engine reports running, to rescue its cases
// should it die — and 0-2 s more: nothing takes a marked claim from its
// holder, and no rescue takes the cases of a job the engine reports
// running, so no time would be long enough for anything to take over a
// frozen holder's cases; the trial checks that nothing does (an unmarked
// slot is voided after FARM_CLAIM_VOID_AFTER, which undoes no claim).
// Then it is resumed (SIGCONT): its commit, if it was inside one, fails
// (its mark's name is a void) and it reads on; it runs the cases it held,
// and the run ends (within 2 minutes: the warden sees its Q record, or the
// trial fails with RUN DID NOT END and the seed, and kills the farm). At
// the end every case has run exactly once, by its execution log and by
// farm's records, with no resubmit. The trials whose warden stayed for the
// frozen job are counted (warden-held). The simulated other host is in
// casetable (TestStalledClaimerOnAnotherHost, the same three points on a
// claimer process in namespaces of its own).
func TestFrozenHolders(t *testing.T) {
	frozenTrials(t, "TestFrozenHolders", "frozen-local", envInt(t, "FARM_FAULT_FROZEN_TRIALS", 12), false)
}

// TestFrozenHoldersLanes: the trials of TestFrozenHolders on a run with
// lanes (casetable/lanes.go; FARM_FAULT_LANES_TRIALS, default 6): the
// submit runs with FARM_CLAIM_LANES=2, 3 or 4 (by the seed) in its
// environment, and the 60-150 cases make 4 blocks of 16 or more, so that
// the run gets every lane asked for. The meta-job is frozen before, inside
// or right after its commit in its lane (the trial watches every lane's
// segment directory); while it is frozen the others exhaust their lanes
// and move to the others', the victim's included (frozen inside, its open
// slot holds that lane's chain up until another claimer voids it). Counted
// as TestFrozenHolders'; a claim commit on the main chain of a run with
// lanes fails the trial. Rescue on.
func TestFrozenHoldersLanes(t *testing.T) {
	frozenTrials(t, "TestFrozenHoldersLanes", "frozen-local-lanes", envInt(t, "FARM_FAULT_LANES_TRIALS", 6), true)
}

func frozenTrials(t *testing.T, test, label string, n int, lanes bool) {
	harness.Bin(t)
	ta := &tally{started: time.Now()}
	var mu sync.Mutex
	points := map[string]int{}
	// The seed picks the point, so that it reruns the same.
	pointOf := func(seed uint64) string { return []string{"before", "inside", "after"}[seed%3] }
	par := parallel(t, false) // no rescue, and the others end at once
	runTrials(t, seeds(t, n), par, func(seed uint64) string { return fmt.Sprintf("%d-%s", seed, pointOf(seed)) }, func(t *testing.T, seed uint64) {
		c, got := frozenTrial(t, seed, pointOf(seed), lanes)
		if t.Failed() || c.bad() {
			t.Errorf("trial of seed %d failed (%s); rerun it with:\n  %s", seed, c.short(), rerun(test, seed))
		}
		ta.add(c, seed, t.Failed())
		mu.Lock()
		points[got]++
		mu.Unlock()
	})
	c := ta.c
	lanesFig := ""
	if lanes {
		lanesFig = fmt.Sprintf(" lanes=2-4 lane-runs=%d inside-lane-commit=%d", c.LaneRuns, c.InLane)
	}
	figure(t, fmt.Sprintf("%s trials=%d metajobs=3-6%s before=%d inside=%d after=%d missed=%d dup-claims=%d dup-exec=%d lost=%d rescue=on cases=%d warden-held=%d rescued=%d rescue-dups=%d runs-not-ended=%d failed-trials=%d parallel=%d seconds=%.0f",
		label, c.Trials, lanesFig, points["before"], points["inside"], points["after"], points["missed"], c.DupClaims, c.DupExec, c.Lost, c.Cases, c.WardenHeld, c.Rescued, c.RescueDups, c.NotEnded, len(ta.failed), par, time.Since(ta.started).Seconds()))
	if len(ta.failed) > 0 {
		var cmds []string
		for _, s := range ta.failed {
			cmds = append(cmds, "  "+rerun(test, s))
		}
		t.Errorf("%d trials failed; rerun them with:\n%s", len(ta.failed), strings.Join(cmds, "\n"))
	}
}

// frozenTrial runs the trial of seed, freezing at point, on a run with
// lanes if lanes; it returns its counts and the point it froze at
// ("missed": no commit of the victim was caught inside or after, and it
// was frozen where it was).
func frozenTrial(t *testing.T, seed uint64, point string, lanes bool) (counts, string) {
	rng := rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d))
	jobs := 3 + rng.IntN(4)
	n := 60 + rng.IntN(91)
	dur := durations(rng, n, 5, 40)
	hold := time.Duration(rng.IntN(2000)) * time.Millisecond
	delay := time.Duration(50+rng.IntN(300)) * time.Millisecond
	t.Logf("seed %d: %d meta-jobs, %d cases of 5-40 ms, frozen %s, %s after the first live job, held %s after the others end", seed, jobs, n, point, delay, hold)
	eng := local{}
	tr := newTrial(t, eng, dur, true)
	var env []string
	if lanes {
		env = []string{fmt.Sprintf("FARM_CLAIM_LANES=%d", lanesOf(seed, 1))}
	}
	mustEnv(t, tr.dir, env, append([]string{"submit", fmt.Sprint(jobs)}, eng.args()...)...)
	laneRun := lanes && tr.checkLanes(1, lanesOf(seed, 1))
	ids := harness.JobIDs(tr.dir)
	if len(tr.live(ids, nil, 60*time.Second)) == 0 {
		t.Fatal("no meta-job ran")
	}
	time.Sleep(delay)
	live := tr.live(ids, nil, 0)
	if len(live) < 2 {
		t.Logf("the farm ended before the freeze")
		c := counts{Trials: 1, Cases: n}
		if laneRun {
			c.LaneRuns = 1
		}
		return c, "missed"
	}
	victim := live[rng.IntN(len(live))]
	w := tr.watch()
	// A victim that found nothing left to claim may end before the signal
	// reaches it: then nothing was frozen, and the trial only checks the end.
	got, slot, frozen := tr.freezeVictim(w, victim, point)
	var inCommit, inLane int
	if frozen {
		inCommit, inLane = tr.frozeAt(w, victim, got, slot)
	} else {
		got = "missed"
	}
	defer eng.signal(tr.dir, victim, syscall.SIGCONT)
	// The others run every other case and end, but the run's warden,
	// which stays while the engine reports the frozen job running.
	warden := tr.waitNoneLiveButWarden(ids, victim, 1)
	time.Sleep(hold)
	if frozen && !procState(eng.leader(tr.dir, victim), 'T') {
		t.Errorf("job %s is no longer stopped", victim)
	}
	c := counts{}
	if frozen {
		c.WardenHeld = tr.wardenHeld(warden, victim)
	}
	eng.signal(tr.dir, victim, syscall.SIGCONT)
	if !tr.waitEnd(seed, 1, 2*time.Minute, fmt.Sprintf("; job %s was frozen (SIGSTOP) and was resumed", victim)) {
		c.NotEnded = 1
	}
	// No rescue: the engine reported the frozen job running throughout.
	if rs := rescuedFrom(readStatusFiles(t, tr.dir)); len(rs) > 0 {
		t.Errorf("cases rescued (from= records) though no job ended: %v", rs)
	}
	f := final(t, tr.dir, tr.exec, n, nil, true)
	f.Trials, f.Kills, f.InCommit, f.InLane, f.WardenHeld, f.NotEnded = 1, 1, inCommit, inLane, c.WardenHeld, c.NotEnded
	if laneRun {
		f.LaneRuns = 1
	}
	if f.Reruns > 0 {
		t.Errorf("%d cases ran again after an unrecorded end: nothing was killed", f.Reruns)
	}
	if f.Left > 0 {
		t.Errorf("%d cases ran in a resubmit: there was none", f.Left)
	}
	tr.diagnose()
	return f, got
}

// wardenHeld reports (1, else 0) whether the run's warden, if it is
// another job than the frozen victim, stays while victim is frozen, and
// logs whether it stays or ended.
func (tr *trial) wardenHeld(warden, victim string) int {
	t := tr.t
	if warden == "" || warden == victim {
		return 0
	}
	if tr.eng.alive(tr.dir, warden) {
		t.Logf("the run's warden, job %s, stays while job %s is frozen (the engine reports it RUNNING)", warden, victim)
		return 1
	}
	sf := readStatusFiles(t, tr.dir)["status."+victim]
	t.Logf("the run's warden, job %s, ended while job %s was frozen (its status file: %v; its Q record: %v)", warden, victim, sf != nil, sf != nil && sf.quit)
	return 0
}

// waitNoneLiveButWarden waits, 2 minutes at most, until no meta-job of
// jobs is live but victim and the run's warden (MISC/rescue.RUN/warden),
// and returns the warden ("" if none). Past the 2 minutes the trial fails,
// naming the jobs still live.
func (tr *trial) waitNoneLiveButWarden(jobs []string, victim string, run int) string {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		w := wardenOf(tr.dir, run)
		live := tr.live(jobs, map[string]bool{victim: true, w: true}, 0)
		if len(live) == 0 {
			return w
		}
		if time.Now().After(deadline) {
			tr.t.Fatalf("meta-jobs %v (not the frozen job %s, nor the run's warden %q) did not end within 2 minutes", live, victim, w)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// freezeAtCommit stops the job victim inside its next claim commit (point
// "inside": its slot taken and still open once it is stopped) or right
// after it (point "after": its generation marked), with the other
// jobs stopped meanwhile so that the next commit is the victim's. Up to 15
// commits are tried; it returns the point reached, or "missed" (the victim
// is then stopped where it is), and the slot or mark it froze at (a
// path, "" if missed).
func (tr *trial) freezeAtCommit(w *commitWatch, victim, point string) (string, string) {
	defer tr.stopOthers(victim)()
	w.drain()
	before := w.openSlots()
	match := isSlot
	if point == "after" {
		match = isMark
	}
	sig := tr.eng.signaller(tr.dir, victim)
	for try := 0; try < 15; try++ {
		ev := w.next(3*time.Second, match)
		if ev.name == "" {
			break
		}
		sig(syscall.SIGSTOP)
		tr.waitStopped(victim)
		switch point {
		case "inside":
			if s := newSlot(before, w.openSlots()); s != "" {
				return "inside", s
			}
		case "after":
			if w.madeBy(ev) == victim {
				return "after", filepath.Join(ev.dir, ev.name)
			}
		}
		sig(syscall.SIGCONT)
	}
	tr.eng.signal(tr.dir, victim, syscall.SIGSTOP)
	tr.waitStopped(victim)
	return "missed", ""
}

// stopOthers stops (SIGSTOP) the farm's live jobs other than victim, so
// that the next claim commit is the victim's, waits a moment for them to
// stop, and returns the function that resumes them.
func (tr *trial) stopOthers(victim string) (resume func()) {
	var stopped []string
	for _, j := range harness.JobIDs(tr.dir) {
		if j != victim && tr.eng.alive(tr.dir, j) && tr.eng.signal(tr.dir, j, syscall.SIGSTOP) == nil {
			stopped = append(stopped, j)
		}
	}
	time.Sleep(10 * time.Millisecond)
	return func() {
		for _, j := range stopped {
			tr.eng.signal(tr.dir, j, syscall.SIGCONT)
		}
	}
}
