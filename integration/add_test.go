package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/farm-hpc/farm/integration/harness"
)

// Cases added to a running farm (issue 25): farm add.

// addCases writes n cases of command cmd to a file and adds them with
// farm add (and flags), returning what it said.
func addCases(t *testing.T, dir, cmd string, n int, flags ...string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "more.txt")
	if err := os.WriteFile(f, []byte(strings.Repeat(cmd+"\n", n)), 0o644); err != nil {
		t.Fatal(err)
	}
	return mustFarm(t, dir, append(append([]string{"add"}, flags...), f)...)
}

// ranAt is a case that records its own run in a file of its meta-job's in
// dir (one writer per file), with the time it started.
func ranAt(dir string) string { return ranAtFor(dir, "0.03") }

// ranAtFor is ranAt with a case that lasts secs.
func ranAtFor(dir, secs string) string {
	return `echo "$ID $(date +%s.%N)" >> ` + dir + `/ran.$METAJOB_ID; sleep ` + secs
}

// checkFirstBeforeOwn: the --first batch (IDs ids) started before the
// last of the run's own cases (1..own) did.
func checkFirstBeforeOwn(t *testing.T, ranDir string, ids [2]int64, own int64) {
	t.Helper()
	var lastFirst, lastOwn float64
	for id, at := range ranStarts(t, ranDir) {
		if id >= ids[0] && id <= ids[1] {
			lastFirst = max(lastFirst, at)
		} else if id <= own {
			lastOwn = max(lastOwn, at)
		}
	}
	if lastFirst >= lastOwn {
		t.Errorf("the --first batch's last case started at %.3f, after the run's own last one (%.3f): it waited for the lanes", lastFirst, lastOwn)
	}
}

// ranStarts reads ranAt's records: when each case started (its first run).
func ranStarts(t *testing.T, dir string) map[int64]float64 {
	t.Helper()
	m := map[int64]float64{}
	files, _ := filepath.Glob(filepath.Join(dir, "ran.*"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if fs := strings.Fields(l); len(fs) == 2 {
				id, _ := strconv.ParseInt(fs[0], 10, 64)
				at, _ := strconv.ParseFloat(fs[1], 64)
				if _, ok := m[id]; !ok {
					m[id] = at
				}
			}
		}
	}
	return m
}

// setWaitForCases sets WAIT_FOR_CASES in the farm's config.
func setWaitForCases(t *testing.T, dir, v string) {
	t.Helper()
	p := filepath.Join(dir, "config")
	b, err := os.ReadFile(p)
	if err != nil || !strings.Contains(string(b), "\nWAIT_FOR_CASES=0\n") {
		t.Fatalf("config has no WAIT_FOR_CASES=0 (%v)", err)
	}
	os.WriteFile(p, []byte(strings.Replace(string(b), "\nWAIT_FOR_CASES=0\n", "\nWAIT_FOR_CASES="+v+"\n", 1)), 0o644)
}

// readRan reads ranAt's records: how often each case ran.
func readRan(t *testing.T, dir string) map[int64]int {
	t.Helper()
	m := map[int64]int{}
	files, _ := filepath.Glob(filepath.Join(dir, "ran.*"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if fs := strings.Fields(l); len(fs) == 2 {
				id, _ := strconv.ParseInt(fs[0], 10, 64)
				m[id]++
			}
		}
	}
	return m
}

// TestAddWhileRunning: 4 meta-jobs run 500 cases; 500 more are added in 5
// batches of 100 while they run, the third with --first. Every one of the
// 1,000 runs exactly once, in run 1; table.dat holds IDs 1-1000 in order;
// and, by the claim state's generations (each says which cases it
// claimed), from a second after the --first batch was added no claim took
// other cases until all 100 were claimed: it went ahead of the unclaimed
// rest.
func TestAddWhileRunning(t *testing.T) { addWhileRunning(t, false) }

// TestAddWhileRunningLanes is TestAddWhileRunning in a run that claims
// over 4 lanes (FARM_CLAIM_LANES=4, as a run of 16 or more meta-jobs
// does): every case once, the added ones after the lanes' own cases, the
// --first batch before them (within the second a claimer takes to look).
func TestAddWhileRunningLanes(t *testing.T) { addWhileRunning(t, true) }

func addWhileRunning(t *testing.T, lanes bool) {
	t.Parallel()
	ranDir := t.TempDir()
	// The run's own 500 cases last about 11 s on 4 meta-jobs: longer than
	// a look's cadence (casetable.LookEvery, 5 s) after the --first batch
	// is added at 1.2 s, so that its meta-jobs find it while they still
	// have cases of their own (with 0.03 s, about 5 s, they ran out first
	// on a fast machine: the --first batch's last case started 1.04 s
	// after the run's own last one, 1 run in 3).
	dir := newFarm(t, repeat(ranAtFor(ranDir, "0.08"), 500), "0-00:10")
	setWaitForCases(t, dir, "10")
	var env []string
	if lanes {
		env = []string{"FARM_CLAIM_LANES=4"}
	}
	if r := farmIn(t, dir, env, "submit", "4", "--backend", "local"); r.Code != 0 {
		t.Fatalf("submit: exit %d: %s", r.Code, r.Err)
	}
	firstIDs := [2]int64{}
	for b := 1; b <= 5; b++ {
		time.Sleep(400 * time.Millisecond)
		var flags []string
		if b == 3 {
			flags = []string{"--first"}
		}
		out := addCases(t, dir, ranAt(ranDir), 100, flags...)
		want := fmt.Sprintf("Added 100 case(s), IDs %d-%d,", 400+100*b+1, 500+100*b)
		if !strings.Contains(out, want) {
			t.Fatalf("batch %d: farm add said %q; want %q", b, out, want)
		}
		if b == 3 {
			firstIDs = [2]int64{701, 800}
			if !strings.Contains(out, "before its other unclaimed cases") {
				t.Errorf("farm add --first said %q", out)
			}
		}
	}
	if out := mustFarm(t, dir, "wait", "--timeout", "3m"); !strings.Contains(out, "1000 cases: 1000 succeeded") {
		t.Fatalf("wait said %q", out)
	}
	ran := readRan(t, ranDir)
	for id := int64(1); id <= 1000; id++ {
		if ran[id] != 1 {
			t.Errorf("case %d ran %d times by its own record; want once", id, ran[id])
		}
	}
	if len(ran) != 1000 {
		t.Errorf("%d cases ran; want 1000", len(ran))
	}
	st := statusJSON(t, dir)
	for id := int64(1); id <= 1000; id++ {
		if st[id].State != "succeeded" || st[id].Run != 1 {
			t.Errorf("case %d: %+v; want succeeded in run 1", id, st[id])
		}
	}
	b, _ := os.ReadFile(filepath.Join(dir, "table.dat"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, strconv.Itoa(i+1)+" ") {
			t.Fatalf("table.dat line %d is %q; want ID %d", i+1, l, i+1)
		}
	}
	if len(lines) != 1000 {
		t.Errorf("table.dat has %d lines, want 1000", len(lines))
	}
	// A set of lanes for the run's own cases, and one for each add.
	if ls, _ := filepath.Glob(filepath.Join(dir, "MISC", "lanes.1.*")); len(ls) != 6 {
		t.Errorf("the run has %d sets of lanes, want 6: %v", len(ls), ls)
	}
	// The --first batch was claimed at its meta-jobs' next look (within
	// 5 s of being added), so it started before the run's own cases ran
	// out.
	checkFirstBeforeOwn(t, ranDir, firstIDs, 500)
	harness.CheckFirstClaimedFirst(t, dir, firstIDs)
}

// TestAddWaitForCases: with WAIT_FOR_CASES=30, meta-jobs that found
// nothing left wait; cases added after 10 s of idleness run in the same
// run, by those meta-jobs (no new job), and the jobs exit by themselves
// once the wait is over.
func TestAddWaitForCases(t *testing.T) {
	t.Parallel()
	ranDir := t.TempDir()
	dir := newFarm(t, repeat(ranAt(ranDir), 6), "0-00:10")
	setWaitForCases(t, dir, "30")
	mustFarm(t, dir, "submit", "2", "--backend", "local")
	waitFor(t, 30*time.Second, "the 6 cases to run", func() bool { return len(readRan(t, ranDir)) == 6 })
	time.Sleep(10 * time.Second)
	if out := mustFarm(t, dir, "query"); !strings.Contains(out, "2 running") {
		t.Fatalf("after 10 s of idleness the meta-jobs are not waiting:\n%s", out)
	}
	addCases(t, dir, ranAt(ranDir), 5)
	added := time.Now()
	waitFor(t, 20*time.Second, "the added cases to run", func() bool { return len(readRan(t, ranDir)) == 11 })
	if d := time.Since(added); d > 8*time.Second {
		t.Errorf("the added cases ran %s after farm add: want within a poll (5 s)", d)
	}
	out := mustFarm(t, dir, "wait", "--timeout", "2m")
	if !strings.Contains(out, "11 cases: 11 succeeded") {
		t.Fatalf("wait said %q", out)
	}
	st := statusJSON(t, dir)
	jobs := map[string]bool{}
	for id := int64(1); id <= 11; id++ {
		if st[id].Run != 1 {
			t.Errorf("case %d ran in run %d; want 1", id, st[id].Run)
		}
		jobs[st[id].Job] = true
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "STATUSES", "status.*")); len(files) != 2 || len(jobs) > 2 {
		t.Errorf("%d status files, cases run by %v: want the 2 meta-jobs of the submit only", len(files), jobs)
	}
	for _, f := range []string{"slurm-1.out", "slurm-2.out"} {
		b, _ := os.ReadFile(filepath.Join(dir, "OUTPUT", f))
		if !strings.Contains(string(b), "waiting up to 30s for cases 'farm add' adds to run 1 (WAIT_FOR_CASES)") {
			t.Errorf("%s does not say it waits:\n%s", f, b)
		}
	}
}

// TestAddRefusesBadLines: a bad line is refused with its file and line,
// and nothing is added: table.dat, the claim state and MISC are as they
// were.
func TestAddRefusesBadLines(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, repeat("true", 3), "0-00:10")
	mustFarm(t, dir, "submit", "1", "--backend", "local")
	mustFarm(t, dir, "wait", "--timeout", "1m")
	table, _ := os.ReadFile(filepath.Join(dir, "table.dat"))
	misc, _ := os.ReadDir(filepath.Join(dir, "MISC"))
	for _, c := range []struct{ input, want string }{
		{"echo a\necho b\necho c #FARM cpu=2\n", `^farm: more.txt:3: #FARM: unknown key "cpu" \(known: cpus, gpus, mem, min_time, nodes, time\); fix the line$`},
		{"echo a\necho b\x00\n", `^farm: more.txt:2: a NUL byte at column 7: a case line must be text; remove it$`},
		{"# nothing\n\n", `^farm: more.txt has no case to add`},
	} {
		f := filepath.Join(t.TempDir(), "more.txt")
		os.WriteFile(f, []byte(c.input), 0o644)
		r := farmIn(t, dir, nil, "add", f)
		if r.Code != 1 || !regexp.MustCompile(c.want).MatchString(strings.TrimSpace(r.Err)) {
			t.Errorf("farm add of %q: exit %d, stderr %q; want 1 and %s", c.input, r.Code, r.Err, c.want)
		}
	}
	after, _ := os.ReadFile(filepath.Join(dir, "table.dat"))
	if string(after) != string(table) {
		t.Errorf("table.dat changed:\n%s", after)
	}
	miscAfter, _ := os.ReadDir(filepath.Join(dir, "MISC"))
	if len(miscAfter) != len(misc) {
		var names []string
		for _, e := range miscAfter {
			names = append(names, e.Name())
		}
		t.Errorf("MISC has %d entries, had %d: %v", len(miscAfter), len(misc), names)
	}
	if out := mustFarm(t, dir, "Status"); !slices.Contains(strings.Fields(out), "3") || strings.Contains(out, " 4 ") {
		t.Errorf("Status after refused adds:\n%s", out)
	}
}

// TestAddThenResubmit: cases added once the run's meta-jobs have all
// exited are queued to that run, which nobody claims any more; 'farm
// resubmit' runs them, each once, in the new run (whose table, made from
// table.dat, holds them: what was queued to the old run is not carried
// into it).
func TestAddThenResubmit(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, repeat("true", 4), "0-00:10")
	mustFarm(t, dir, "submit", "1", "--backend", "local")
	mustFarm(t, dir, "wait", "--timeout", "1m")
	if out := addCases(t, dir, "true", 3); !strings.Contains(out, "IDs 5-7") || !strings.Contains(out, "Run 1's meta-jobs claim them") {
		t.Errorf("farm add said %q", out)
	}
	mustFarm(t, dir, "resubmit", "1", "--backend", "local")
	r := farmIn(t, dir, nil, "wait", "--timeout", "1m")
	if r.Code != 0 || !strings.Contains(r.Out, "7 cases: 7 succeeded") || strings.Contains(r.Err, "started 2 times") {
		t.Fatalf("wait: exit %d, %q, %q", r.Code, r.Out, r.Err)
	}
	st := statusJSON(t, dir)
	for id := int64(5); id <= 7; id++ {
		if st[id].Run != 2 {
			t.Errorf("case %d ran in run %d, want 2", id, st[id].Run)
		}
	}
	recs := readRecords(t, dir)
	for id := int64(1); id <= 7; id++ {
		if recs.Starts[id] != 1 {
			t.Errorf("case %d has %d start records, want 1", id, recs.Starts[id])
		}
	}
}

// TestAddConcurrent: 6 'farm add's at once, on a farm whose run is on:
// each adds all its cases or none (the others say another holds the
// lock); table.dat ends with IDs 1..N in order, once each; the state
// counts them.
func TestAddConcurrent(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, repeat("true", 3), "0-00:10")
	mustFarm(t, dir, "submit", "1", "--backend", "local")
	mustFarm(t, dir, "wait", "--timeout", "1m")
	f := filepath.Join(t.TempDir(), "more.txt")
	os.WriteFile(f, []byte(strings.Repeat("true\n", 5)), 0o644)
	type res struct {
		r   result
		err error
	}
	done := make(chan res, 6)
	for i := 0; i < 6; i++ {
		go func() {
			cmd := exec.Command(bin(t), "add", f)
			cmd.Dir = dir
			r, err := harness.Output(cmd)
			done <- res{r, err}
		}()
	}
	added := 0
	for i := 0; i < 6; i++ {
		x := <-done
		switch {
		case x.err != nil:
			t.Fatal(x.err)
		case x.r.Code == 0:
			added++
		case !strings.Contains(x.r.Err, "another 'farm add' is adding cases to this farm"):
			t.Errorf("farm add: exit %d, %q", x.r.Code, x.r.Err)
		}
	}
	if added == 0 {
		t.Fatal("no farm add added anything")
	}
	b, _ := os.ReadFile(filepath.Join(dir, "table.dat"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if want := 3 + 5*added; len(lines) != want {
		t.Errorf("table.dat has %d lines after %d adds of 5; want %d", len(lines), added, want)
	}
	for i, l := range lines {
		if !strings.HasPrefix(l, strconv.Itoa(i+1)+" ") {
			t.Fatalf("table.dat line %d is %q", i+1, l)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "MISC", "add.lock")); !os.IsNotExist(err) {
		t.Errorf("MISC/add.lock is left: %v", err)
	}
	if out := mustFarm(t, dir, "query"); !strings.Contains(out, fmt.Sprintf("farm   %d", len(lines))) {
		t.Errorf("query does not count %d cases:\n%s", len(lines), out)
	}
}

// TestAddWithAuto: cases added during the first wave of an -auto farm too
// big for one wave run too: in the wave, or in the next, which -auto's
// resubmit starts from table.dat; each ends once, and final.sh runs once,
// after all of them.
func TestAddWithAuto(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, repeat("sleep 0.5", 30), "0:05")
	writeFinal(t, dir)
	mustFarmShort(t, dir, "submit", "2", "-auto", "--backend", "local")
	time.Sleep(time.Second)
	addCases(t, dir, "sleep 0.5", 10)
	mustFarm(t, dir, "wait", "--timeout", "3m")
	rec := readRecords(t, dir)
	for id := int64(1); id <= 40; id++ {
		if ends := rec.Ends[id] - rec.Interrupts[id]; ends != 1 || rec.ExitStatus[id] != 0 {
			t.Errorf("case %d: %d end records (and %d interrupted), status %d; want one, 0", id, ends, rec.Interrupts[id], rec.ExitStatus[id])
		}
	}
	final, _ := os.ReadFile(filepath.Join(dir, "final.out"))
	if strings.Count(string(final), "final ran") != 1 {
		t.Errorf("final.sh ran %d times: %q", strings.Count(string(final), "final ran"), final)
	}
	if out := mustFarm(t, dir, "query"); !strings.Contains(out, "farm   40     40") {
		t.Errorf("query:\n%s", out)
	}
}

// TestAddTableAndLine: a case gets, as $1 and $2, the table it was
// claimed from and its line there, as META's scripts read them — for the
// cases a farm add queued too, in meta-jobs of several loops (WHOLE_NODE)
// whose loops run cases of several tables at once.
func TestAddTableAndLine(t *testing.T) {
	t.Parallel()
	ranDir := t.TempDir()
	check := `sleep 0.05; echo "$ID $(sed -n "${2}p" "../$1" | cut -d' ' -f1)" >> ` + ranDir + `/line.$METAJOB_ID`
	dir := newFarm(t, repeat(check, 60), "0-00:10")
	appendFile(t, dir, "config", "WHOLE_NODE=1\nNWHOLE=3\n")
	setWaitForCases(t, dir, "5")
	mustFarm(t, dir, "submit", "2", "--backend", "local")
	time.Sleep(300 * time.Millisecond)
	addCases(t, dir, check, 20, "--first")
	addCases(t, dir, check, 20)
	mustFarm(t, dir, "wait", "--timeout", "2m")
	files, _ := filepath.Glob(filepath.Join(ranDir, "line.*"))
	seen := 0
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			fs := strings.Fields(l)
			if len(fs) != 2 || fs[0] != fs[1] {
				t.Errorf("a case read %q from its $1 at line $2; want its own ID", l)
			}
			seen++
		}
	}
	if seen != 100 {
		t.Errorf("%d cases recorded their line; want 100", seen)
	}
}
