package faulttrials

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/farm-hpc/farm/integration/harness"
	"github.com/farm-hpc/farm/internal/testslurm"
	"github.com/farm-hpc/farm/slurm"
)

// TestKill9Local: FARM_FAULT_TRIALS trials (default 12) on the local
// backend, four at a time (parallel). Each trial makes a farm of 30-100
// cases of 5-60 ms, with the default config (rescue on: RESCUE_CHECK=60),
// and submits 4-8 meta-jobs; it kills one or more of them with kill -9
// (their process group, or it and the job's supervisor) at random
// moments, half of the kills inside the victim's claim commit (the others
// are stopped, the victim's next slot s.N appears, the victim is killed at
// once); sometimes it kills every meta-job, sometimes one of the
// resubmitted run too, and one trial in four kills the first run's
// warden too (wardenKillPlan). The live meta-jobs of the run rescue what a
// killed one held (rescue_test.go). Once the run's jobs have ended (within 5
// minutes, or the run counts as not ended), every case a killed job was
// running must be reported interrupted, or have been run again by a
// rescue; then it resubmits until every case succeeded, and counts: no
// case started twice in a run but a rescue duplicate, none run again
// after its recorded success, none lost; the cases rescued within the
// run, those left for a resubmit (and why), and the seconds from each
// kill to the start of the cases rescued from its victim.
func TestKill9Local(t *testing.T) {
	killTrials(t, "TestKill9Local", "kill9-local", local{}, envInt(t, "FARM_FAULT_TRIALS", 12), false, true)
}

// TestKill9LocalNoRescue: the trials of TestKill9Local with rescue off
// (RESCUE_CHECK=0; FARM_FAULT_TRIALS, default 12, two at a time). It tests
// what rescue hides: with rescue on, a killed job's cases go to the
// resubmit only when the run's rescue misses them, and the case it was
// running is run again in the run, so that neither farm Status's report of
// it as interrupted once the run ended nor 'farm resubmit' taking up every
// killed job's leftovers (its claimed and unstarted cases, its cut-off
// case) exactly once is checked on most kills. Here each is, on every
// kill.
func TestKill9LocalNoRescue(t *testing.T) {
	killTrials(t, "TestKill9LocalNoRescue", "kill9-local-norescue", local{}, envInt(t, "FARM_FAULT_TRIALS", 12), false, false)
}

// TestKill9LocalLanes: the trials of TestKill9Local on runs with lanes
// (casetable/lanes.go; FARM_FAULT_LANES_TRIALS, default 6): the submit and
// every resubmit run with FARM_CLAIM_LANES=2, 3 or 4 (by the seed and the
// run) in their environment, on 64-134 cases (4 blocks of 16 or more, so
// that the first run gets every lane asked for; a resubmit of fewer than 17
// cases gets none). The trial watches every lane's segment directory too,
// so that a kill aimed at a commit lands inside the victim's commit in its
// lane. Counted as TestKill9Local's, plus the runs that had lanes and the
// kills inside a lane's commit; a claim commit on the main chain of a run
// with lanes (which CLAIMS.md rules out) fails the trial. Rescue on.
func TestKill9LocalLanes(t *testing.T) {
	killTrials(t, "TestKill9LocalLanes", "kill9-local-lanes", local{}, envInt(t, "FARM_FAULT_LANES_TRIALS", 6), true, true)
}

var slurmGate = testslurm.Gate{Available: slurm.Available}

// TestKill9Slurm: the trials of TestKill9Local on the real Slurm
// (FARM_FAULT_SLURM_TRIALS, default 3), killing with scancel
// --signal=KILL, kill -9 of the meta-job process alone, or of every process
// of the job's script. Rescue on: Slurm reports the killed job ended.
func TestKill9Slurm(t *testing.T) {
	slurmGate.Need(t)
	killTrials(t, "TestKill9Slurm", "kill9-slurm", slurmEngine{mem: "200M"}, envInt(t, "FARM_FAULT_SLURM_TRIALS", 3), false, true)
}

func killTrials(t *testing.T, test, label string, eng engine, n int, lanes, rescue bool) {
	harness.Bin(t)
	ta := &tally{started: time.Now()}
	par := parallel(t, rescue)
	runTrials(t, seeds(t, n), par, func(seed uint64) string { return fmt.Sprint(seed) }, func(t *testing.T, seed uint64) {
		c := killTrial(t, eng, seed, lanes, rescue)
		if t.Failed() || c.bad() {
			t.Errorf("trial of seed %d failed (%s); rerun it with:\n  %s", seed, c.short(), rerun(test, seed))
		}
		ta.add(c, seed, t.Failed())
	})
	c := ta.c
	lanesFig := ""
	if lanes {
		lanesFig = fmt.Sprintf(" lanes=2-4 runs=%d lane-runs=%d", c.Runs, c.LaneRuns)
	}
	inLane := ""
	if lanes {
		inLane = fmt.Sprintf(" inside-lane-commit=%d", c.InLane)
	}
	figure(t, fmt.Sprintf("%s trials=%d metajobs=4-8%s kills=%d warden-kills=%d inside-commit=%d%s dup-claims=%d dup-exec=%d lost=%d not-interrupted=%d reruns-of-unrecorded-ends=%d %s failed-trials=%d parallel=%d seconds=%.0f",
		label, c.Trials, lanesFig, c.Kills, c.WardenKills, c.InCommit, inLane, c.DupClaims, c.DupExec, c.Lost, c.NotInterrupted, c.Reruns, rescueFigure(rescue, c), len(ta.failed), par, time.Since(ta.started).Seconds()))
	if len(ta.failed) > 0 {
		var cmds []string
		for _, s := range ta.failed {
			cmds = append(cmds, "  "+rerun(test, s))
		}
		t.Errorf("%d trials failed; rerun them with:\n%s", len(ta.failed), strings.Join(cmds, "\n"))
	}
}

// killPlan is one kill of a trial: in run, after a delay from the run's
// start, at once or at the victim's next claim commit, the way how.
type killPlan struct {
	run      int
	after    time.Duration
	atCommit bool
	how      string
}

// killTrialPlan draws the trial of seed on eng from its seed, and logs it:
// the meta-jobs of each run, the durations of its n cases (in ms), and its
// kills in order; the trial draws its further choices from rng.
func killTrialPlan(t *testing.T, eng engine, seed uint64, lanes bool) (rng *rand.Rand, jobs, n int, dur []int, plan []killPlan) {
	rng = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	jobs = 4 + rng.IntN(5)
	n = 30 + rng.IntN(71)
	if lanes {
		n += 34 // 4 blocks of 16 at least
	}
	lo, hi := 5, 60
	if eng.name() == "slurm" {
		// Slurm starts the jobs up to a second or two apart: longer cases,
		// so that the kills find a run going on.
		n, lo, hi = 60+rng.IntN(91), 20, 120
	}
	dur = durations(rng, n, lo, hi)
	total := 0
	for _, d := range dur {
		total += d
	}
	// The run lasts about total/jobs ms once the jobs run.
	span := time.Duration(total/jobs) * time.Millisecond
	kills := 1 + rng.IntN(jobs/2)
	if rng.IntN(8) == 0 {
		kills = jobs // every meta-job of the run
	}
	add := func(run int) {
		at := rng.IntN(2) == 0
		hows := eng.hows(at)
		plan = append(plan, killPlan{run, time.Duration(rng.Int64N(int64(span))), at, hows[rng.IntN(len(hows))]})
	}
	for range kills {
		add(1)
	}
	if rng.IntN(3) == 0 {
		add(2)
	}
	sort.SliceStable(plan, func(i, j int) bool {
		return plan[i].run < plan[j].run || plan[i].run == plan[j].run && plan[i].after < plan[j].after
	})
	t.Logf("seed %d: %d meta-jobs, %d cases of %d-%d ms, kills %+v", seed, jobs, n, lo, hi, plan)
	return rng, jobs, n, dur, plan
}

// killTrial runs the trial of seed on eng, its runs with lanes if lanes,
// rescue on if rescue, and returns its counts.
func killTrial(t *testing.T, eng engine, seed uint64, lanes, rescue bool) counts {
	rng, jobs, n, dur, plan := killTrialPlan(t, eng, seed, lanes)
	wk := wardenKillPlan(t, eng, seed, rescue)

	tr := newTrial(t, eng, dur, rescue)
	c := counts{Trials: 1}
	known := map[string]bool{}
	killed := deaths{}
	for run := 1; ; run++ {
		if run > 6 {
			t.Errorf("seed %d: cases left after 5 resubmits", seed)
			break
		}
		if run > 1 && tr.allSucceeded() {
			break
		}
		runJobs := tr.startRun(rng, seed, run, jobs, lanes, known, &c)
		killedNow, t0 := tr.killRun(plan, wk, run, runJobs, killed, &c)
		tk := time.Now()
		if !tr.waitEnd(seed, run, 5*time.Minute, "") {
			c.NotEnded++
		}
		t.Logf("run %d: %d jobs, kills done %s after the first ran, jobs ended %s later", run, len(runJobs), tk.Sub(t0).Round(time.Millisecond), time.Since(tk).Round(time.Millisecond))
		c.NotInterrupted += checkInterrupted(t, tr.dir, killedNow)
	}
	f := final(t, tr.dir, tr.exec, n, killed, rescue)
	f.Trials, f.Kills, f.InCommit, f.NotInterrupted, f.NotEnded, f.WardenKills = c.Trials, c.Kills, c.InCommit, c.NotInterrupted, c.NotEnded, c.WardenKills
	f.Runs, f.LaneRuns, f.InLane = c.Runs, c.LaneRuns, c.InLane
	if f.Reruns > f.Kills {
		t.Errorf("%d cases completed unrecorded and ran again, more than the %d kills", f.Reruns, f.Kills)
	}
	tr.diagnose()
	return f
}

// startRun starts run of the trial of seed: run 1 submits jobs meta-jobs,
// a later run resubmits 2 to jobs of them (drawn from rng); with lanes,
// with the run's FARM_CLAIM_LANES, counting in c the run and whether it
// has lanes. It returns the run's jobs, in order: those not yet known,
// which it adds to known.
func (tr *trial) startRun(rng *rand.Rand, seed uint64, run, jobs int, lanes bool, known map[string]bool, c *counts) []string {
	k := jobs
	var what []string
	if run == 1 {
		what = append([]string{"submit", fmt.Sprint(k)}, tr.eng.args()...)
	} else {
		k = 2 + rng.IntN(jobs-1)
		what = append([]string{"resubmit", fmt.Sprint(k)}, tr.eng.args()[2:]...)
	}
	var env []string
	if lanes {
		env = []string{fmt.Sprintf("FARM_CLAIM_LANES=%d", lanesOf(seed, run))}
	}
	mustEnv(tr.t, tr.dir, env, what...)
	if lanes {
		c.Runs++
		if tr.checkLanes(run, lanesOf(seed, run)) {
			c.LaneRuns++
		}
	}
	var runJobs []string
	for _, id := range harness.JobIDs(tr.dir) {
		if !known[id] {
			known[id] = true
			runJobs = append(runJobs, id)
		}
	}
	sort.Strings(runJobs)
	return runJobs
}

// killRun carries out the kills of plan in run, among runJobs, and in run
// 1 wk's kill of the warden, counting them in c and recording in killed
// when each victim was killed. It returns the jobs it killed, and the
// moment the run's first meta-job ran, from which the kills' delays
// count.
func (tr *trial) killRun(plan []killPlan, wk wardenKill, run int, runJobs []string, killed deaths, c *counts) (map[string]bool, time.Time) {
	killedNow := map[string]bool{}
	// The delays count from the moment the run's first meta-job runs.
	tr.live(runJobs, nil, 60*time.Second)
	t0 := time.Now()
	for _, kp := range plan {
		if kp.run != run {
			continue
		}
		if v, in, at, ok := tr.killOne(kp, t0, runJobs, killed); ok {
			c.Kills++
			killed[v], killedNow[v] = at, true
			if in != "" {
				c.InCommit++
			}
			if in == "lane" {
				c.InLane++
			}
		}
	}
	if run == 1 && wk.how != "" {
		if v, at, ok := tr.killWarden(wk, run, runJobs, killed); ok {
			c.Kills++
			c.WardenKills++
			killed[v], killedNow[v] = at, true
		}
	}
	return killedNow, t0
}

// wardenKill is the kill of a run's warden (metajob/rescue.go) a trial
// with rescue on makes, one in four: after the kills of its plan in run
// 1, once a meta-job of the run has become its warden, after a delay, the
// way how ("" for none).
type wardenKill struct {
	after time.Duration
	how   string
}

// wardenKillPlan draws the trial of seed's warden kill, from a generator
// of its own (the seed's other draws are those of the trials before it
// had one), and logs it.
func wardenKillPlan(t *testing.T, eng engine, seed uint64, rescue bool) wardenKill {
	rng := rand.New(rand.NewPCG(seed^0x7f4a7c159e3779b9, seed))
	if !rescue || rng.IntN(4) != 0 {
		return wardenKill{}
	}
	hows := eng.hows(false)
	wk := wardenKill{after: time.Duration(rng.IntN(3000)) * time.Millisecond, how: hows[rng.IntN(len(hows))]}
	t.Logf("seed %d: the run's warden killed too, %s after it appears (%s)", seed, wk.after, wk.how)
	return wk
}

// killWarden kills run's warden as wk says, once there is one (within 60
// s, while the run's jobs run), if it is alive and not yet killed: it
// returns it, when it was killed, and whether it was.
func (tr *trial) killWarden(wk wardenKill, run int, runJobs []string, killed deaths) (string, time.Time, bool) {
	t := tr.t
	deadline := time.Now().Add(60 * time.Second)
	w := ""
	for w = wardenOf(tr.dir, run); w == ""; w = wardenOf(tr.dir, run) {
		if time.Now().After(deadline) || tr.ended(runJobs) {
			t.Logf("run %d had no warden to kill", run)
			return "", time.Time{}, false
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(wk.after)
	if _, dead := killed[w]; dead || !tr.eng.alive(tr.dir, w) {
		t.Logf("run %d's warden, job %s, ended before its kill", run, w)
		return "", time.Time{}, false
	}
	at := time.Now()
	if err := tr.eng.kill(tr.dir, w, wk.how); err != nil {
		if !tr.eng.alive(tr.dir, w) {
			return "", time.Time{}, false
		}
		t.Fatalf("kill %s of the warden, job %s: %v", wk.how, w, err)
	}
	for deadline := time.Now().Add(30 * time.Second); tr.eng.alive(tr.dir, w); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("job %s still alive 30 s after %s", w, wk.how)
		}
	}
	t.Logf("killed run %d's warden, job %s (%s, %s after it appeared)", run, w, wk.how, wk.after)
	return w, at, true
}

// slotLeftOpen returns the slot a killed meta-job left open, "" if none,
// and whether it is in a "lane" or on the "main" chain: a slot not in
// before that opened and stays open is the victim's, since others mark
// theirs within milliseconds (and are stopped at a commit), and it is
// voided only after FARM_CLAIM_VOID_AFTER. One left on the main chain of
// a run with lanes is an error.
func (tr *trial) slotLeftOpen(w *commitWatch, before map[string]bool) (slot, inCommit string) {
	time.Sleep(30 * time.Millisecond)
	after := w.openSlots()
	time.Sleep(30 * time.Millisecond)
	again := w.openSlots()
	for f := range after {
		if !before[f] && again[f] {
			slot = f
		}
	}
	switch {
	case slot == "":
	case w.inLane(filepath.Dir(slot)):
		inCommit = "lane"
	default:
		inCommit = "main"
		if w.lanes > 0 {
			tr.t.Errorf("slot %s left open on the main chain of a run with lanes (%s): claims must commit in the lanes only", slot, w.lanedir)
		}
	}
	return slot, inCommit
}

// trial is one trial's farm.
type trial struct {
	t    *testing.T
	eng  engine
	dir  string
	exec string // the cases' execution logs
	n    int    // cases
	w    *commitWatch
}

// newTrial makes a farm of the cases of the given durations, with the
// default config (rescue on: RESCUE_CHECK=60) if rescue, else with
// RESCUE_CHECK=0 (the caller says why); at the test's end it resumes
// anything stopped and kills what is left.
func newTrial(t *testing.T, eng engine, dur []int, rescue bool) *trial {
	root := t.TempDir()
	tr := &trial{t: t, eng: eng, exec: filepath.Join(root, "exec"), n: len(dur)}
	if err := os.Mkdir(tr.exec, 0o755); err != nil {
		t.Fatal(err)
	}
	tr.dir = harness.NewFarmAt(t, filepath.Join(root, "farm"), caseTable(tr.exec, dur), "0-00:10")
	cfg := filepath.Join(tr.dir, "config")
	b, err := os.ReadFile(cfg)
	if err != nil || !strings.Contains(string(b), "\nRESCUE_CHECK=60\n") {
		t.Fatalf("%s: no RESCUE_CHECK=60 line, the default the trials run with (%v)", cfg, err)
	}
	if !rescue {
		if err := os.WriteFile(cfg, []byte(strings.Replace(string(b), "\nRESCUE_CHECK=60\n", "\nRESCUE_CHECK=0\n", 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if tr.w != nil {
			tr.w.close()
		}
		for _, id := range harness.JobIDs(tr.dir) {
			eng.signal(tr.dir, id, syscall.SIGCONT)
		}
		harness.Run(t, tr.dir, nil, "kill")
	})
	return tr
}

// watch returns the trial's commitWatch, made at its first call, watching
// the lanes of the farm's current run if it has lanes.
func (tr *trial) watch() *commitWatch {
	if tr.w == nil {
		w, err := watchCommits(tr.dir)
		if err != nil {
			tr.t.Fatal(err)
		}
		tr.w = w
	} else if err := tr.w.follow(); err != nil {
		tr.t.Fatal(err)
	}
	return tr.w
}

// lanesOf is the FARM_CLAIM_LANES of run (1, 2, ...) of the lanes trial of
// seed: 2, 3 or 4.
func lanesOf(seed uint64, run int) int {
	return 2 + int((seed/3+uint64(run)-1)%3)
}

// checkLanes reports whether the run just started has lanes, as it must
// have the asked lanes when it is the first (its table has 4 blocks or
// more); a resubmit of fewer cases may get fewer lanes, or none.
func (tr *trial) checkLanes(run, asked int) bool {
	w := tr.watch()
	tr.t.Logf("run %d: FARM_CLAIM_LANES=%d, %d lanes (%s)", run, asked, w.lanes, w.lanedir)
	if run == 1 && w.lanes != asked {
		tr.t.Errorf("run 1 has %d lanes (%q); FARM_CLAIM_LANES=%d asked for %d", w.lanes, w.lanedir, asked, asked)
	}
	if w.lanes > asked {
		tr.t.Errorf("run %d has %d lanes, more than the %d asked", run, w.lanes, asked)
	}
	return w.lanes > 0
}

// mustEnv runs farm with extra environment and fails the test on a
// non-zero exit (harness.Must with env).
func mustEnv(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	r := harness.Run(t, dir, env, args...)
	if r.Code != 0 {
		t.Fatalf("%s farm %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(env, " "), strings.Join(args, " "), r.Code, r.Out, r.Err)
	}
	return r.Out
}

// wait waits for the farm's jobs to end.
func (tr *trial) wait() {
	r := harness.Run(tr.t, tr.dir, nil, "wait", "--timeout", "5m")
	if r.Code != 0 && r.Code != harness.ExitNotAllOK {
		tr.t.Fatalf("farm wait: exit %d\n%s%s", r.Code, r.Out, r.Err)
	}
}

// waitEnd waits up to d for the farm's jobs (those of run) to end, and
// reports whether they did. If they did not, the trial fails with a line
// that names it (RUN DID NOT END, the seed, what still runs, the run's
// warden; why: what the trial knows, such as a frozen job), and the farm
// is killed, so that the trial goes on to its counts.
func (tr *trial) waitEnd(seed uint64, run int, d time.Duration, why string) bool {
	t := tr.t
	r := harness.Run(t, tr.dir, nil, "wait", "--timeout", d.String())
	if r.Code == 0 || r.Code == harness.ExitNotAllOK {
		return true
	}
	if r.Code != 2 {
		t.Fatalf("farm wait: exit %d\n%s%s", r.Code, r.Out, r.Err)
	}
	var running []string
	for _, row := range harness.ListJSON(t, tr.dir) {
		if row.State == "PENDING" || row.State == "RUNNING" {
			running = append(running, fmt.Sprintf("%s (run %d, %s)", row.ID, row.Run, row.State))
		}
	}
	w := wardenOf(tr.dir, run)
	t.Errorf("RUN DID NOT END: seed %d, run %d: jobs still pending or running %s after the trial's last act: %v; the run's warden: %q%s",
		seed, run, d, running, w, why)
	if w != "" {
		t.Logf("the warden's output:\n%s", rescueLines(tr.dir, w))
	}
	harness.Diagnose(t, tr.dir)
	for _, id := range harness.JobIDs(tr.dir) {
		tr.eng.signal(tr.dir, id, syscall.SIGCONT)
	}
	harness.Run(t, tr.dir, nil, "kill")
	tr.wait()
	return false
}

func (tr *trial) allSucceeded() bool {
	rows := harness.StatusJSON(tr.t, tr.dir)
	for _, row := range rows {
		if row.State != "succeeded" {
			return false
		}
	}
	return len(rows) == tr.n
}

// live returns the jobs among jobs not in skip whose meta-job runs,
// waiting up to d for one.
func (tr *trial) live(jobs []string, skip map[string]bool, d time.Duration) []string {
	deadline := time.Now().Add(d)
	for {
		var out []string
		for _, j := range jobs {
			if !skip[j] && tr.eng.alive(tr.dir, j) {
				out = append(out, j)
			}
		}
		if len(out) > 0 || time.Now().After(deadline) || tr.ended(jobs) {
			return out
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ended reports whether the farm has no job pending or running.
func (tr *trial) ended(jobs []string) bool {
	for _, r := range harness.ListJSON(tr.t, tr.dir) {
		if slices.Contains(jobs, r.ID) && (r.State == "PENDING" || r.State == "RUNNING") {
			return false
		}
	}
	return true
}

// killOne carries out kp on a live job of runJobs not yet killed: it
// returns the victim, where the kill left the victim's commit slot open
// (killed inside its claim commit: "main" on the main chain, "lane" in a
// lane; "" if not), when it was killed, and whether it killed anything
// (false when the run had already ended).
func (tr *trial) killOne(kp killPlan, t0 time.Time, runJobs []string, killed deaths) (victim, inCommit string, at time.Time, ok bool) {
	t := tr.t
	dead := map[string]bool{}
	for j := range killed {
		dead[j] = true
	}
	live := tr.live(runJobs, dead, 60*time.Second)
	if len(live) == 0 {
		return "", "", at, false
	}
	time.Sleep(time.Until(t0.Add(kp.after)))
	live = tr.live(runJobs, dead, 0)
	if len(live) == 0 {
		return "", "", at, false
	}
	victim = live[int(kp.after)%len(live)]
	w := tr.watch()
	if kp.atCommit {
		// Only the victim may commit: the next slot is its own.
		defer tr.stopOthers(victim)()
		w.drain()
	}
	before := w.openSlots()
	tries := 0
	if kp.atCommit {
		// Stop the victim as its next commit takes its slot; if the
		// slot is still open once it is stopped, the kill lands inside
		// the commit; else resume it and wait for the next, up to 15
		// times.
		sig := tr.eng.signaller(tr.dir, victim)
		for ; tries < 15; tries++ {
			if w.next(3*time.Second, isSlot).name == "" {
				break
			}
			if sig(syscall.SIGSTOP) != nil {
				break
			}
			tr.waitStopped(victim)
			if newSlot(before, w.openSlots()) != "" {
				break
			}
			sig(syscall.SIGCONT)
		}
	}
	at = time.Now()
	if err := tr.eng.kill(tr.dir, victim, kp.how); err != nil {
		if !tr.eng.alive(tr.dir, victim) {
			return "", "", at, false // it ended meanwhile
		}
		t.Fatalf("kill %s of job %s: %v", kp.how, victim, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for tr.eng.alive(tr.dir, victim) {
		if time.Now().After(deadline) {
			t.Fatalf("job %s still alive 30 s after %s", victim, kp.how)
		}
		time.Sleep(10 * time.Millisecond)
	}
	slot, inCommit := tr.slotLeftOpen(w, before)
	where := ""
	if slot != "" {
		where, _ = filepath.Rel(tr.dir, slot)
		where = " (" + where + ")"
	}
	t.Logf("killed job %s (%s, %s after the run's start, at commit %v, %d tries): inside its commit %v%s", victim, kp.how, time.Since(t0).Round(time.Millisecond), kp.atCommit, tries, slot != "", where)
	return victim, inCommit, at, true
}

// waitStopped waits (up to 2 s) until the job's meta-job process is
// stopped.
func (tr *trial) waitStopped(job string) {
	pid := tr.eng.leader(tr.dir, job)
	deadline := time.Now().Add(2 * time.Second)
	for pid > 0 && !procState(pid, 'T') && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
}
