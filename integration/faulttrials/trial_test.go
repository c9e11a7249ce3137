package faulttrials

import (
	"bufio"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/farm-hpc/farm/integration/harness"
)

func TestMain(m *testing.M) {
	// Job slots of our own (the local backend keeps them in
	// $TMPDIR/farm-slots-UID), enough for every meta-job of two trials at
	// once; the cases' node-local copies of single_case.sh go there too.
	tmp, err := os.MkdirTemp("", "faulttrials")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("TMPDIR", tmp)
	os.Setenv("FARM_LOCAL_SLOTS", "32")
	os.Setenv("FARM_LOCAL_KILL_WAIT", "3s")
	// A meta-job stopped or killed inside its claim commit holds the
	// others' claims up for voidAfter (casetable): 2 s in tests, not 20.
	os.Setenv("FARM_CLAIM_VOID_AFTER", "2s")
	// Cases keep a job's own OMP_NUM_THREADS and CUDA_VISIBLE_DEVICES;
	// the shell's must not reach the tests' jobs.
	os.Unsetenv("OMP_NUM_THREADS")
	os.Unsetenv("CUDA_VISIBLE_DEVICES")
	code := m.Run()
	harness.Cleanup()
	os.RemoveAll(tmp)
	os.Exit(code)
}

// envInt reads a positive integer from the environment, def if unset.
func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// seeds returns the seeds of a test's trials: FARM_FAULT_SEED alone, or n
// consecutive seeds from a base taken from the clock (logged, so that a
// whole run can be repeated with FARM_FAULT_BASE).
func seeds(t *testing.T, n int) []uint64 {
	if v := os.Getenv("FARM_FAULT_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("FARM_FAULT_SEED=%q: %v", v, err)
		}
		return []uint64{s}
	}
	base := uint64(time.Now().UnixNano()/1000) % 1_000_000_000 * 1000
	if v := os.Getenv("FARM_FAULT_BASE"); v != "" {
		b, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("FARM_FAULT_BASE=%q: %v", v, err)
		}
		base = b
	}
	t.Logf("%d trials, seeds %d to %d (FARM_FAULT_BASE=%d repeats them)", n, base, base+uint64(n)-1, base)
	out := make([]uint64, n)
	for i := range out {
		out[i] = base + uint64(i)
	}
	return out
}

// rerun is the one command that reruns the trial of seed of test.
func rerun(test string, seed uint64) string {
	return fmt.Sprintf("FARM_FAULT_SEED=%d go test ./integration/faulttrials -run '%s$' -count=1 -v", seed, test)
}

// runTrials runs trial for each seed, as the subtest trials/name(seed),
// par at a time (see parallel).
func runTrials(t *testing.T, seeds []uint64, par int, name func(uint64) string, trial func(t *testing.T, seed uint64)) {
	t.Run("trials", func(t *testing.T) {
		ch := make(chan uint64)
		var wg sync.WaitGroup
		for range par {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for seed := range ch {
					t.Run(name(seed), func(t *testing.T) { trial(t, seed) })
				}
			}()
		}
		for _, s := range seeds {
			ch <- s
		}
		close(ch)
		wg.Wait()
	})
}

// parallel is how many trials of a test run at once: go test's -parallel
// (GOMAXPROCS unless set), twice that with rescue on, whose trials spend
// most of their time waiting (a rescue waits 10 s after its mark, a check
// comes every 15 s), or FARM_FAULT_PARALLEL.
func parallel(t *testing.T, rescue bool) int {
	if os.Getenv("FARM_FAULT_PARALLEL") != "" {
		return envInt(t, "FARM_FAULT_PARALLEL", 2)
	}
	p := 2
	if f := flag.Lookup("test.parallel"); f != nil {
		if v, err := strconv.Atoi(f.Value.String()); err == nil && v > 0 {
			p = v
		}
	}
	if rescue {
		p *= 2
	}
	return p
}

// figure appends line to $FARM_FAULT_FIGURES, if set, and logs it.
func figure(t *testing.T, line string) {
	t.Log(line)
	p := os.Getenv("FARM_FAULT_FIGURES")
	if p == "" {
		return
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Errorf("figures: %v", err)
		return
	}
	fmt.Fprintln(f, line)
	f.Close()
}

// counts are what the trials count; every field but Kills, InCommit,
// Reruns, Trials and the rescue's figures (Cases to RerunAfter) must stay
// 0.
type counts struct {
	Trials   int
	Kills    int // kills (or freezes) delivered to a live meta-job
	InCommit int // of them, inside the victim's own claim commit
	// DupClaims: cases started twice within one run (by the cases'
	// execution logs, or by farm's start records), other than the rescue
	// duplicates (RescueDups).
	DupClaims int
	// DupExec: cases started again after farm had recorded their
	// success.
	DupExec int
	// Lost: cases not succeeded at the end, or whose recorded success
	// has no completion in the execution log.
	Lost int
	// NotInterrupted: cases whose meta-job was killed while they ran
	// that farm Status did not report interrupted once the run ended (and
	// that no rescue ran again in the run).
	NotInterrupted int
	// Reruns: cases that completed in a meta-job killed before it
	// recorded their end, and ran again (expected: at most one per kill;
	// farm cannot know that a case ended whose end it did not record).
	Reruns int
	// Lanes trials only: Runs, the runs started (submit and resubmits);
	// LaneRuns, those that had lanes; InLane, the kills (or freezes) of
	// InCommit inside a commit in a lane.
	Runs, LaneRuns, InLane int

	// What rescue did (rescue_test.go): the trials' cases; those rescued
	// within their run (run to success there); those left for a resubmit
	// (a first start in run 2 or later), by why (leftWhy); the documented
	// rescue duplicates; the seconds from each death to the start of
	// each case rescued from the dead job.
	Cases, Rescued, Left, RescueDups int
	LeftWhy                          map[string]int
	RerunAfter                       []float64
	// Dropped: cases whose rescue a meta-job that was not killed
	// announced (its mark) and did not carry out. NotEnded: runs whose
	// meta-jobs had not all ended by the trial's deadline (the farm was
	// then killed). Both must be 0.
	Dropped, NotEnded int
	// LateRescues: starts of a rescue in a run after the next run began
	// (the cases were the next run's to run). Must be 0.
	LateRescues int
	// WardenKills: kills, of Kills, of a run's warden.
	WardenKills int
	// WardenHeld: frozen-holder trials whose run's warden stayed, waiting
	// for the frozen job (reported RUNNING by the engine), until it was
	// resumed.
	WardenHeld int
}

func (c *counts) add(o counts) {
	c.Trials += o.Trials
	c.Kills += o.Kills
	c.InCommit += o.InCommit
	c.DupClaims += o.DupClaims
	c.DupExec += o.DupExec
	c.Lost += o.Lost
	c.NotInterrupted += o.NotInterrupted
	c.Reruns += o.Reruns
	c.Runs += o.Runs
	c.LaneRuns += o.LaneRuns
	c.InLane += o.InLane
	c.Cases += o.Cases
	c.Rescued += o.Rescued
	c.Left += o.Left
	c.RescueDups += o.RescueDups
	for k, v := range o.LeftWhy {
		if c.LeftWhy == nil {
			c.LeftWhy = map[string]int{}
		}
		c.LeftWhy[k] += v
	}
	c.RerunAfter = append(c.RerunAfter, o.RerunAfter...)
	c.Dropped += o.Dropped
	c.NotEnded += o.NotEnded
	c.LateRescues += o.LateRescues
	c.WardenHeld += o.WardenHeld
	c.WardenKills += o.WardenKills
}

func (c counts) bad() bool {
	return c.DupClaims+c.DupExec+c.Lost+c.NotInterrupted+c.Dropped+c.NotEnded+c.LateRescues > 0
}

// short is the counts of a trial for its failure line.
func (c counts) short() string {
	return fmt.Sprintf("kills=%d dup-claims=%d dup-exec=%d lost=%d not-interrupted=%d rescues-dropped=%d rescues-after-next-run=%d runs-not-ended=%d rescue-dups=%d rescued=%d left=%d %v",
		c.Kills, c.DupClaims, c.DupExec, c.Lost, c.NotInterrupted, c.Dropped, c.LateRescues, c.NotEnded, c.RescueDups, c.Rescued, c.Left, c.LeftWhy)
}

// tally gathers the counts of a test's trials, which may run in parallel.
type tally struct {
	mu      sync.Mutex
	c       counts
	failed  []uint64
	started time.Time
}

func (ta *tally) add(c counts, seed uint64, failed bool) {
	ta.mu.Lock()
	defer ta.mu.Unlock()
	ta.c.add(c)
	if failed {
		ta.failed = append(ta.failed, seed)
	}
}

// caseTable makes the table of a trial's farm: n cases of the given
// durations (ms), each appending "S JOB" to its own file in execDir when it
// starts and "E JOB" when it ends: the side effect that counts executions,
// whatever farm records.
func caseTable(execDir string, durMS []int) []string {
	table := make([]string, len(durMS))
	for i, d := range durMS {
		f := filepath.Join(execDir, strconv.Itoa(i+1))
		table[i] = fmt.Sprintf("echo S $METAJOB_ID >> %s; sleep %d.%03d; echo E $METAJOB_ID >> %s", f, d/1000, d%1000, f)
	}
	return table
}

// durations draws n case durations of lo to hi ms.
func durations(rng *rand.Rand, n, lo, hi int) []int {
	d := make([]int, n)
	for i := range d {
		d[i] = lo + rng.IntN(hi-lo+1)
	}
	return d
}

// event is one line of a case's execution log.
type event struct {
	kind byte // 'S' or 'E'
	job  string
}

// readExec reads the execution logs of cases 1..n.
func readExec(execDir string, n int) map[int64][]event {
	out := map[int64][]event{}
	for id := 1; id <= n; id++ {
		b, err := os.ReadFile(filepath.Join(execDir, strconv.Itoa(id)))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) == 2 && (f[0] == "S" || f[0] == "E") {
				out[int64(id)] = append(out[int64(id)], event{f[0][0], f[1]})
			}
		}
	}
	return out
}

// jobRecords is what one status file says: its run, and per case whether
// it started, ended (E or I) and succeeded (E with status 0).
type jobRecords struct {
	run                       int
	started, ended, succeeded map[int64]bool
	starts                    map[int64]int
}

// readJobRecords reads every status file of the farm in dir, by job ID.
func readJobRecords(t *testing.T, dir string) map[string]jobRecords {
	out := map[string]jobRecords{}
	files, _ := filepath.Glob(filepath.Join(dir, "STATUSES", "status.*"))
	for _, f := range files {
		job := strings.TrimPrefix(filepath.Base(f), "status.")
		r := jobRecords{run: -1, started: map[int64]bool{}, ended: map[int64]bool{}, succeeded: map[int64]bool{}, starts: map[int64]int{}}
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "# farm-status ") {
				for _, kv := range strings.Fields(line) {
					if v, ok := strings.CutPrefix(kv, "run="); ok {
						r.run, _ = strconv.Atoi(v)
					}
				}
				continue
			}
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			id, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				continue
			}
			switch f[0] {
			case "S":
				r.started[id] = true
				r.starts[id]++
			case "E":
				r.ended[id] = true
				if len(f) > 2 && f[2] == "0" {
					r.succeeded[id] = true
				}
			case "I":
				r.ended[id] = true
				if len(f) > 5 && f[2] == "0" && f[4] == "0.000" {
					// I ID 0 START 0.000: a start the lease withdrew
					// (metajob/runone.go); the case never ran here.
					r.starts[id]--
				}
			}
		}
		fh.Close()
		out[job] = r
	}
	return out
}

// final counts, once every job of the farm in dir has ended, the
// duplicate claims, duplicate executions, lost cases and reruns of its n
// cases, from their execution logs in execDir and the status records, and
// what rescue did (countRescues: dead are the moments the trial killed or
// froze meta-jobs; rescue says whether the farm has rescue on).
func final(t *testing.T, dir, execDir string, n int, dead deaths, rescue bool) counts {
	return finalRanOn(t, dir, execDir, n, nil, dead, rescue)
}

// finalRanOn is final for a farm where ranOn[job] are the cases job had
// started (by its status file) and not ended when it froze, and which a
// later run, or a rescue in the same run, ran again while it was frozen
// (farm could not know whether they ended): job's execution log lines of
// them may come at any time after (the case's own start, frozen before it
// wrote it; its end), and its end record of them comes after the other
// start. Their start in job is not a start after a recorded success, and
// their end in job counts as unrecorded (it was not recorded when the
// other start was made).
func finalRanOn(t *testing.T, dir, execDir string, n int, ranOn map[string]map[int64]bool, dead deaths, rescue bool) counts {
	var c counts
	rc := countRescues(t, dir, dead, rescue)
	c.Cases, c.Rescued, c.Left, c.RescueDups, c.Dropped, c.LateRescues = n, rc.rescued, rc.left, rc.dups, rc.dropped, rc.late
	c.LeftWhy, c.RerunAfter = rc.leftWhy, rc.rerunAfter
	recs := readJobRecords(t, dir)
	ex := readExec(execDir, n)
	st := harness.StatusJSON(t, dir)
	// farm's own records: a case started twice in one run (countRescues
	// tells the rescue duplicates from the others, and reports these).
	perRun := startsPerRun(recs)
	for id := int64(1); id <= int64(n); id++ {
		dupClaim := false
		for run, m := range perRun {
			if m[id] > 1 && !rc.explained[run][id] {
				dupClaim = true
			}
		}
		v := checkExecLog(t, id, ex[id], recs, rc.explained, ranOn)
		if dupClaim || v.dupClaim {
			c.DupClaims++
		}
		if v.dupExec {
			c.DupExec++
		}
		if v.rerun {
			c.Reruns++
		}
		if row := st[id]; row.State != "succeeded" || !v.okEnd {
			c.Lost++
			t.Errorf("case %d lost: farm Status says %+v; execution log %v", id, row, ex[id])
		}
		c.DupClaims += checkStatusStarts(t, id, st[id], rc.explained)
	}
	return c
}

// startsPerRun adds up the start records of recs per run and case.
func startsPerRun(recs map[string]jobRecords) map[int]map[int64]int {
	perRun := map[int]map[int64]int{}
	for _, r := range recs {
		if perRun[r.run] == nil {
			perRun[r.run] = map[int64]int{}
		}
		for id, k := range r.starts {
			perRun[r.run][id] += k
		}
	}
	return perRun
}

// execVerdict is what a case's execution log says (checkExecLog): that
// it started twice in a run (other than as a rescue duplicate), started
// again after its success was recorded, or after an unrecorded end; and
// that it ended with a recorded success.
type execVerdict struct {
	dupClaim, dupExec, rerun, okEnd bool
}

// checkExecLog reads the execution log evs of case id: starts per run (a
// job's run is its status file's, in recs), a start after a recorded
// success, a start after an unrecorded end. Several starts in a run must
// be a rescue duplicate's (explained, by countRescues), each by a job with
// a start record of the case. ranOn is finalRanOn's. A duplicate start is
// an error, and so is a start after a recorded success.
func checkExecLog(t *testing.T, id int64, evs []event, recs map[string]jobRecords, explained map[int]map[int64]bool, ranOn map[string]map[int64]bool) (v execVerdict) {
	runStarts := map[int]int{}
	jobStarts := map[string]int{}
	recordedOK, unrecordedEnd := false, false
	for _, e := range evs {
		r := recs[e.job]
		switch e.kind {
		case 'S':
			runStarts[r.run]++
			jobStarts[e.job]++
			if runStarts[r.run] > 1 && (!explained[r.run][id] || jobStarts[e.job] > r.starts[id]) {
				v.dupClaim = true
				t.Errorf("case %d: started %d times in run %d (execution log %v)", id, runStarts[r.run], r.run, evs)
			}
			if ranOn[e.job][id] {
				break
			}
			if recordedOK {
				v.dupExec = true
				t.Errorf("case %d: started again in job %s after its success was recorded (execution log %v)", id, e.job, evs)
			}
			if unrecordedEnd {
				v.rerun = true
			}
		case 'E':
			if r.succeeded[id] && !ranOn[e.job][id] {
				recordedOK, v.okEnd = true, true
			} else {
				unrecordedEnd = true
			}
		}
	}
	return v
}

// checkStatusStarts checks farm Status's row of case id for a warning
// that it started several times in a run: the documented warning of a
// rescue duplicate (explained, by countRescues) is logged; any other is
// an error, counted (it returns 1, else 0) as a duplicate claim.
func checkStatusStarts(t *testing.T, id int64, row harness.StatusRow, explained map[int]map[int64]bool) int {
	if row.Starts <= 0 {
		return 0
	}
	if explained[row.StartsRun][id] {
		// The documented warning of a rescue duplicate whose
		// first attempt recorded its end (a frozen job resumed).
		t.Logf("case %d: farm Status warns it started %d times in run %d: the rescue duplicate", id, row.Starts, row.StartsRun)
		return 0
	}
	t.Errorf("case %d: farm Status reports it started %d times in run %d", id, row.Starts, row.StartsRun)
	return 1
}

// checkInterrupted counts, once the run's jobs have ended, the cases that
// a killed job had started and not ended (by its status file) that farm
// Status does not report interrupted in that job, unless a rescue ran them
// again in the run (from= the job's status file); and any case still
// reported running.
func checkInterrupted(t *testing.T, dir string, killed map[string]bool) int {
	bad := 0
	recs := readJobRecords(t, dir)
	rescued := rescuedFrom(readStatusFiles(t, dir))
	st := harness.StatusJSON(t, dir)
	for id, row := range st {
		if row.State == "running" {
			bad++
			t.Errorf("case %d still reported running after every job ended: %+v", id, row)
		}
	}
	for job := range killed {
		r := recs[job]
		for id := range r.started {
			if r.ended[id] || rescued[r.run]["status."+job][id] {
				continue
			}
			if row := st[id]; row.State != "interrupted" || row.Job != job {
				if row.State != "running" {
					bad++
				}
				t.Errorf("case %d was running in killed job %s: farm Status says %+v, want interrupted", id, job, row)
			}
		}
	}
	return bad
}

// diagnose logs the farm's outputs and status files (harness.Diagnose) if
// the trial failed, or always with FARM_FAULT_DIAGNOSE=1.
func (tr *trial) diagnose() {
	if tr.t.Failed() || os.Getenv("FARM_FAULT_DIAGNOSE") == "1" {
		harness.Diagnose(tr.t, tr.dir)
	}
}
