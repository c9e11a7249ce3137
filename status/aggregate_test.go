package status

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/farm-hpc/farm/layout"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func write(t *testing.T, dir, job string, run int, fn func(w *Writer)) {
	t.Helper()
	w, err := CreateCap(filepath.Join(dir, "status."+job), job, 0, run, "node"+job, Capacity{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	fn(w)
	w.Close()
}

func TestAggregateFarmWideTruth(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Unix(1_700_000_000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	// Run 1, job 10: case 1 ok, case 2 fails, case 3 cut off (job dead).
	write(t, dir, "10", 1, func(w *Writer) {
		w.Start(1, at(0))
		w.End(1, 0, at(0), time.Second)
		w.Start(2, at(1))
		w.End(2, 7, at(1), 2*time.Second)
		w.Start(3, at(3))
	})
	// Run 1, job 11 (still running): case 4 ok, case 5 running; case 6 interrupted by a signal.
	write(t, dir, "11", 1, func(w *Writer) {
		w.Start(6, at(0))
		w.Interrupted(6, 15, at(0), 5*time.Second)
		w.Start(4, at(5))
		w.End(4, 0, at(5), time.Second)
		w.Start(5, at(6))
	})
	// Run 2, job 20: case 2 succeeds now; case 3 fails; case 1 runs again and fails (success stays).
	write(t, dir, "20", 2, func(w *Writer) {
		w.Start(2, at(100))
		w.End(2, 0, at(100), time.Second)
		w.Start(3, at(101))
		w.End(3, 4, at(101), time.Second)
		w.Start(1, at(102))
		w.End(1, 9, at(102), time.Second)
		w.Quit("no-cases", "No cases left; exiting.")
	})
	// A torn last line (being written) is ignored.
	fh, _ := os.OpenFile(filepath.Join(dir, "status.20"), os.O_APPEND|os.O_WRONLY, 0)
	fh.WriteString("S 99 17")
	fh.Close()

	sum, err := Load(dir, Options{Live: func(id string) bool { return id == "11" || id == "20" }, Now: at(10)})
	if err != nil {
		t.Fatal(err)
	}
	var got []Case
	sum.Each(func(c Case) error { got = append(got, c); return nil })
	want := []Case{
		// Attempts: every start, in every run. Crashes: the attempts cut off
		// with no record of their end (case 3's in dead job 10); case 6's
		// interruption by a signal its meta-job caught (an I record) is not one.
		{ID: 1, State: Succeeded, Status: 0, Seconds: 1, Job: "10", Host: "node10", Run: 1, Attempts: 2},
		{ID: 2, State: Succeeded, Status: 0, Seconds: 1, Job: "20", Host: "node20", Run: 2, Attempts: 2},
		{ID: 3, State: Failed, Status: 4, Seconds: 1, Job: "20", Host: "node20", Run: 2, Attempts: 2, Crashes: 1},
		{ID: 4, State: Succeeded, Status: 0, Seconds: 1, Job: "11", Host: "node11", Run: 1, Attempts: 1},
		{ID: 5, State: Running, Seconds: 4, Job: "11", Host: "node11", Run: 1, Attempts: 1},
		{ID: 6, State: Interrupted, Status: 15, Seconds: 5, Job: "11", Host: "node11", Run: 1, Attempts: 1},
	}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreUnexported(Case{})); diff != "" {
		t.Errorf("cases (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(Counts{Running: 1, Interrupted: 1, Failed: 1, Succeeded: 3}, sum.Totals()); diff != "" {
		t.Errorf("totals (-want +got):\n%s", diff)
	}
	if c := sum.Get(42); c.State != NeverRan {
		t.Errorf("case 42 = %+v", c)
	}
	// With job 10 dead and no live jobs at all, the open case 5 is interrupted too.
	sum, _ = Load(dir, Options{})
	if c := sum.Get(5); c.State != Interrupted || c.Attempts != 1 || c.Crashes != 1 {
		t.Errorf("open case of a dead job = %v, %d attempts, %d crashes; want interrupted, 1 attempt, 1 crash", c.State, c.Attempts, c.Crashes)
	}
	if c := sum.Get(6); c.Crashes != 0 {
		t.Errorf("case interrupted by a caught signal: %d crashes; want 0", c.Crashes)
	}
}

func TestAggregateSkipsDamagedRecordAndSaysWhere(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "status.1"), []byte("# farm-status v1 job=1 run=1 host=h\nS 4 100.0 h\nE 5 zero\nE 4 0 100.0 1.0 h\n"), 0o644)
	sum, err := Load(dir, Options{})
	if err != nil {
		t.Fatalf("one damaged line blocked the farm: %v", err)
	}
	if len(sum.Warnings) != 1 || !strings.Contains(sum.Warnings[0], "status.1:3:") || !strings.Contains(sum.Warnings[0], "skipped") {
		t.Errorf("warnings %q, want one naming status.1:3", sum.Warnings)
	}
	if c := sum.Get(4); c.State != Succeeded {
		t.Errorf("the good record after the damaged line: case 4 = %v", c.State)
	}
	if c := sum.Get(5); c.State != NeverRan {
		t.Errorf("case 5 of the damaged line = %v, want never ran", c.State)
	}
}

// A job that Slurm requeued after its node failed runs again under the same
// ID: the case its first run left open was interrupted, whether the job now
// waits to start again (pending: not live) or runs again (live, but in its
// newer file).
func TestRestartedJobLeavesItsOpenCaseInterrupted(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Unix(1_700_000_000, 0)
	w, _ := CreateCap(filepath.Join(dir, layout.StatusFile("6", 0)), "6", 0, 1, "node2", Capacity{}, nil)
	w.Start(1, t0)
	w.End(1, 0, t0, time.Second)
	w.Start(2, t0.Add(time.Second)) // node2 lost power here
	w.Close()
	// Pending after the requeue: Live is false for a job that runs nothing.
	sum, err := Load(dir, Options{Live: func(string) bool { return false }, Now: t0.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if c := sum.Get(2); c.State != Interrupted || c.Job != "6" || c.Host != "node2" {
		t.Errorf("while the job waits to restart, case 2 = %+v; want interrupted on node2", c)
	}
	// Restarted on node1: its new case runs, the old one stays interrupted.
	w, _ = CreateCap(filepath.Join(dir, layout.StatusFile("6", 1)), "6", 1, 1, "node1", Capacity{}, nil)
	w.Start(3, t0.Add(2*time.Minute))
	w.Close()
	b, _ := os.ReadFile(filepath.Join(dir, "status.6.r1"))
	if want := "# farm-status v1 job=6 run=1 host=node1 restart=1\n"; !strings.HasPrefix(string(b), want) {
		t.Errorf("header %q, want %q", b, want)
	}
	sum, err = Load(dir, Options{Live: func(id string) bool { return id == "6" }, Now: t0.Add(3 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if c := sum.Get(2); c.State != Interrupted {
		t.Errorf("after the restart, case 2 = %v, want interrupted", c.State)
	}
	if c := sum.Get(3); c.State != Running || c.Host != "node1" {
		t.Errorf("case 3 = %+v, want running on node1", c)
	}
	var restarts []int
	for _, j := range sum.Jobs {
		restarts = append(restarts, j.Restart)
	}
	if diff := cmp.Diff([]int{0, 1}, restarts); diff != "" {
		t.Errorf("jobs' restarts (-want +got):\n%s", diff)
	}
	// The tail of query --watch agrees.
	tc, err := NewTail(dir).Refresh(func(id string) bool { return id == "6" }, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Counts{Succeeded: 1, Interrupted: 1, Running: 1}, *tc.Runs[1]); diff != "" {
		t.Errorf("tail counts (-want +got):\n%s", diff)
	}
}

// A job the batch system called pending may have started since it answered:
// a case started after that answer is running, one started before is not.
func TestCaseStartedAfterTheJobStatesIsRunning(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Unix(1_700_000_000, 0)
	write(t, dir, "7", 1, func(w *Writer) { w.Start(1, t0) })
	write(t, dir, "8", 1, func(w *Writer) { w.Start(2, t0.Add(2*time.Second)) })
	sum, err := Load(dir, Options{Live: func(string) bool { return false }, LiveAsOf: t0.Add(time.Second), Now: t0.Add(3 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if c := sum.Get(1); c.State != Interrupted {
		t.Errorf("case 1, started before the states were taken, is %v; want interrupted", c.State)
	}
	if c := sum.Get(2); c.State != Running {
		t.Errorf("case 2, started after the states were taken, is %v; want running", c.State)
	}
}

// A case started twice in one run — by two jobs, or twice by one — is
// listed with its run, its starts and the files, and warned of; starts in
// different runs, and a requeued job's restart that claims new cases while
// its dead incarnation's case stays interrupted, are not duplicates.
func TestCaseStartedTwiceInOneRunIsFlagged(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Unix(1_700_000_000, 0)
	// Run 1: job 10 runs 1, 2, 3; job 11 runs 4 and, wrongly, 2 again.
	write(t, dir, "10", 1, func(w *Writer) {
		for id := int64(1); id <= 3; id++ {
			w.Start(id, t0)
			w.End(id, 0, t0, time.Second)
		}
	})
	write(t, dir, "11", 1, func(w *Writer) {
		w.Start(4, t0)
		w.End(4, 1, t0, time.Second)
		w.Start(2, t0)
		w.End(2, 0, t0, time.Second)
	})
	// Job 12 (run 1) was requeued: its first incarnation left case 5 open,
	// its restart claimed case 6. Not a duplicate.
	w, _ := CreateCap(filepath.Join(dir, layout.StatusFile("12", 0)), "12", 0, 1, "node12", Capacity{}, nil)
	w.Start(5, t0)
	w.Close()
	w, _ = CreateCap(filepath.Join(dir, layout.StatusFile("12", 1)), "12", 1, 1, "node13", Capacity{}, nil)
	w.Start(6, t0)
	w.End(6, 0, t0, time.Second)
	w.Close()
	// Run 2 reruns 4 and 5 (not duplicates: another run), and job 21 starts
	// case 4 a second time in run 2, in its restart's file, and case 7 twice
	// in the same file (the first start left open).
	write(t, dir, "20", 2, func(w *Writer) {
		w.Start(4, t0.Add(time.Hour))
		w.End(4, 0, t0.Add(time.Hour), time.Second)
		w.Start(5, t0.Add(time.Hour))
		w.End(5, 0, t0.Add(time.Hour), time.Second)
	})
	w, _ = CreateCap(filepath.Join(dir, layout.StatusFile("21", 1)), "21", 1, 2, "node21", Capacity{}, nil)
	w.Start(4, t0.Add(time.Hour))
	w.End(4, 0, t0.Add(time.Hour), time.Second)
	w.Start(7, t0.Add(time.Hour))
	w.Start(7, t0.Add(time.Hour))
	w.End(7, 0, t0.Add(time.Hour), time.Second)
	w.Close()
	// An end record without its start (damage) counts no start.
	os.WriteFile(filepath.Join(dir, "status.22"), []byte("# farm-status v1 job=22 run=2 host=h\nE 5 0 1700003600.000 1.000 h\n"), 0o644)

	sum, err := Load(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Base(dir)
	want := []Duplicate{
		{ID: 2, Run: 1, Starts: 2, Files: []string{base + "/status.10", base + "/status.11"}},
		{ID: 4, Run: 2, Starts: 2, Files: []string{base + "/status.20", base + "/status.21.r1"}},
		{ID: 7, Run: 2, Starts: 2, Files: []string{base + "/status.21.r1"}},
	}
	if diff := cmp.Diff(want, sum.Duplicates); diff != "" {
		t.Errorf("duplicates (-want +got):\n%s", diff)
	}
	wantWarn := "case 2 started 2 times in run 1 (" + base + "/status.10, " + base + "/status.11): farm claims a case once per run; please report this"
	if len(sum.Warnings) != 3 || sum.Warnings[0] != wantWarn {
		t.Errorf("warnings:\n%s\nwant 3, the first\n%s", strings.Join(sum.Warnings, "\n"), wantWarn)
	}
	for id, want := range map[int64][2]int{1: {0, 0}, 2: {2, 1}, 3: {0, 0}, 4: {2, 2}, 5: {0, 0}, 6: {0, 0}, 7: {2, 2}} {
		if c := sum.Get(id); c.Starts != want[0] || c.StartsRun != want[1] {
			t.Errorf("case %d: starts %d in run %d, want %d in run %d", id, c.Starts, c.StartsRun, want[0], want[1])
		}
	}
	// Each, as farm Status uses it, says the same.
	n := 0
	sum.Each(func(c Case) error {
		if c.Starts > 0 {
			n++
		}
		return nil
	})
	if n != 3 {
		t.Errorf("Each shows %d cases with duplicate starts, want 3", n)
	}
}

// A farm where everything ran once has no duplicates and no warnings, and
// the per-run sets of started cases are gone after loading.
func TestCasesStartedOnceAreNotFlagged(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Unix(1_700_000_000, 0)
	for j := 0; j < 4; j++ {
		write(t, dir, strconv.Itoa(100+j), 1, func(w *Writer) {
			for id := int64(j); id < 20000; id += 4 {
				w.Start(id, t0)
				w.End(id, int(id%2), t0, time.Second)
			}
		})
	}
	// Run 2 reruns the failed ones, 0..19999 odd, plus a far ID.
	write(t, dir, "200", 2, func(w *Writer) {
		for id := int64(1); id < 20000; id += 2 {
			w.Start(id, t0)
			w.End(id, 0, t0, time.Second)
		}
		w.Start(1<<40, t0)
		w.End(1<<40, 0, t0, time.Second)
	})
	sum, err := Load(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	sets := 0
	for _, p := range sum.cases.order {
		sets += len(p.started)
	}
	if len(sum.Duplicates) != 0 || len(sum.Warnings) != 0 || sets != 0 || sum.cases.farStarted != nil {
		t.Errorf("duplicates %v, warnings %v, sets left %v %v", sum.Duplicates, sum.Warnings, sets, sum.cases.farStarted != nil)
	}
	if c := sum.Get(1 << 40); c.State != Succeeded || c.Starts != 0 {
		t.Errorf("far case: %+v", c)
	}
}

// Many duplicates: the warnings stop at maxDuplicateWarnings and one line
// counts the rest.
func TestManyDuplicatesAreCountedNotListed(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Unix(1_700_000_000, 0)
	for _, job := range []string{"1", "2"} {
		write(t, dir, job, 1, func(w *Writer) {
			for id := int64(1); id <= 30; id++ {
				w.Start(id, t0)
				w.End(id, 0, t0, time.Second)
			}
		})
	}
	sum, err := Load(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Duplicates) != 30 || len(sum.Warnings) != maxDuplicateWarnings+1 {
		t.Fatalf("%d duplicates, %d warnings; want 30 and %d", len(sum.Duplicates), len(sum.Warnings), maxDuplicateWarnings+1)
	}
	if last := sum.Warnings[maxDuplicateWarnings]; !strings.HasPrefix(last, "10 more case(s) started more than once in one run") {
		t.Errorf("last warning %q", last)
	}
}

// TestAggregateReadsMETAStatusFiles: a status file of META's ("ID STATUS"
// lines, no header, as farm adopt keeps them) counts its cases as ended in
// run 0, before farm's runs; the "ID STATUS" lines that a single_case.sh
// written for META appends to farm's own file are ignored (farm's E record
// says the same), with no warning.
func TestAggregateReadsMETAStatusFiles(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Unix(1_700_000_000, 0)
	if err := os.WriteFile(filepath.Join(dir, "status.5001"), []byte("1 0\n2 0\n3 1\n4 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "status.5002"), []byte("5 0\n6 0\n7 127\n8 -1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Run 1 under farm: case 3 succeeds now, case 9 fails, and the script
	// wrote its own line after each.
	write(t, dir, "30", 1, func(w *Writer) {
		w.Start(3, t0)
		w.End(3, 0, t0, time.Second)
		w.Start(9, t0)
		w.End(9, 2, t0, time.Second)
	})
	fh, _ := os.OpenFile(filepath.Join(dir, "status.30"), os.O_APPEND|os.O_WRONLY, 0)
	fh.WriteString("3 0\n9 2\n")
	fh.Close()
	sum, err := Load(dir, Options{Now: t0.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Warnings) > 0 {
		t.Errorf("warnings: %q", sum.Warnings)
	}
	want := map[int64]State{1: Succeeded, 2: Succeeded, 3: Succeeded, 4: Succeeded, 5: Succeeded, 6: Succeeded, 7: Failed, 8: Failed, 9: Failed}
	for id, st := range want {
		if got := sum.Get(id); got.State != st {
			t.Errorf("case %d: %v, want %v", id, got.State, st)
		}
	}
	if got := sum.Get(7).Status; got != 127 {
		t.Errorf("case 7: STATUS %d, want 127", got)
	}
	if c := sum.RunCounts[0]; c == nil || c.Succeeded != 5 || c.Failed != 3 {
		t.Errorf("run 0 (META's) counts %+v, want 5 succeeded, 3 failed", c)
	}
	if c := sum.RunCounts[1]; c == nil || c.Succeeded != 1 || c.Failed != 1 {
		t.Errorf("run 1 counts %+v, want 1 succeeded and 1 failed: the script's own lines do not count twice", c)
	}
	// A line that is neither is reported, as any damaged line is.
	os.WriteFile(filepath.Join(dir, "status.5003"), []byte("10 0\n11 zero\n"), 0o644)
	sum, err = Load(dir, Options{Now: t0.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Warnings) != 1 || !strings.Contains(sum.Warnings[0], `status.5003:2: bad line "11 zero"`) {
		t.Errorf("warnings %q, want one for status.5003 line 2", sum.Warnings)
	}
}

// A case run again in its run after it failed (RETRIES) is one case with
// several attempts, not a duplicate: its last attempt is its outcome, the
// run counts it once, and each start counts as an attempt. A second start
// without attempt= in the same run is still a duplicate, and a case ID far
// from the others (the map, not a page) is treated the same.
func TestRetriesAreAttemptsNotDuplicates(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Unix(1_700_000_000, 0)
	const far = 1 << 40
	write(t, dir, "10", 1, func(w *Writer) {
		for _, id := range []int64{1, far} {
			// Fails twice, then succeeds on its third attempt.
			for retry := 0; retry < 3; retry++ {
				w.StartAt(id, t0, Placement{Retry: retry})
				w.End(id, map[bool]int{true: 0, false: 1}[retry == 2], t0, time.Second)
			}
		}
		// Fails, and fails again on its one retry.
		w.StartAt(2, t0, Placement{})
		w.End(2, 3, t0, time.Second)
		w.StartAt(2, t0, Placement{Retry: 1})
		w.End(2, 3, t0, time.Second)
		// Its retry still runs.
		w.StartAt(3, t0, Placement{})
		w.End(3, 1, t0, time.Second)
		w.StartAt(3, t0, Placement{Retry: 1})
		// Started twice with no retry between: a duplicate.
		w.Start(4, t0)
		w.End(4, 0, t0, time.Second)
		w.Start(4, t0)
		w.End(4, 0, t0, time.Second)
	})
	b, err := os.ReadFile(filepath.Join(dir, "status.10"))
	if err != nil || !strings.Contains(string(b), "S 1 1700000000.000 node10 attempt=2 why=retry\n") {
		t.Fatalf("status file (%v) has no retry's start record as documented:\n%s", err, b)
	}
	sum, err := Load(dir, Options{Live: func(string) bool { return true }})
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[int64]struct {
		state    State
		attempts int
	}{1: {Succeeded, 3}, far: {Succeeded, 3}, 2: {Failed, 2}, 3: {Running, 2}, 4: {Succeeded, 2}} {
		if c := sum.Get(id); c.State != want.state || c.Attempts != want.attempts {
			t.Errorf("case %d: %v after %d attempts, want %v after %d", id, c.State, c.Attempts, want.state, want.attempts)
		}
	}
	// Each case once, but the duplicate, whose two attempts both count.
	if got, want := *sum.RunCounts[1], (Counts{Succeeded: 4, Failed: 1, Running: 1}); got != want {
		t.Errorf("run 1 counts %+v, want %+v (each retried case once)", got, want)
	}
	if len(sum.Duplicates) != 1 || sum.Duplicates[0].ID != 4 {
		t.Errorf("duplicates %+v, want case 4 alone", sum.Duplicates)
	}
	// farm query --watch's Tail counts the run the same way.
	tc, err := NewTail(dir).Refresh(func(string) bool { return true }, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := *tc.Runs[1], (Counts{Succeeded: 4, Failed: 1, Running: 1}); got != want {
		t.Errorf("Tail: run 1 counts %+v, want %+v", got, want)
	}
	if got := sum.Restarted(); got != 5 {
		t.Errorf("Restarted() = %d, want 5", got)
	}
	if a, _ := sum.MostAttempts(); a != 3 {
		t.Errorf("MostAttempts() = %d, want 3", a)
	}
}

// TestTimedOutIsItsOwnOutcome: a T record is a case that ran past its
// time limit, neither failed nor interrupted, for Load and Tail alike; a
// retry after it (why=timeout) replaces it in its run's counts, as a
// retry replaces a failure.
func TestTimedOutIsItsOwnOutcome(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Unix(1_700_000_000, 0)
	write(t, dir, "10", 1, func(w *Writer) {
		w.StartAt(1, t0, Placement{})
		w.TimedOut(1, 15, t0, 2*time.Second, Use{})
		w.StartAt(2, t0, Placement{})
		w.TimedOut(2, 9, t0, 3*time.Second, Use{})
		w.StartAt(2, t0, Placement{Retry: 1, Why: WhyTimeout})
		w.End(2, 0, t0, time.Second)
		w.StartAt(3, t0, Placement{})
		w.End(3, 1, t0, time.Second)
	})
	b, err := os.ReadFile(filepath.Join(dir, "status.10"))
	if err != nil || !strings.Contains(string(b), "\nT 1 15 1700000000.000 2.000 node10\n") || !strings.Contains(string(b), "attempt=2 why=timeout\n") {
		t.Fatalf("status file (%v) has not the records documented:\n%s", err, b)
	}
	sum, err := Load(dir, Options{Live: func(string) bool { return true }})
	if err != nil {
		t.Fatal(err)
	}
	if c := sum.Get(1); c.State != TimedOut || c.Status != 15 || c.Seconds != 2 || c.State.String() != "timed out" {
		t.Errorf("case 1: %+v (%v), want timed out by signal 15 after 2 s", c, c.State)
	}
	if c := sum.Get(2); c.State != Succeeded || c.Attempts != 2 {
		t.Errorf("case 2: %v after %d attempts, want succeeded after 2", c.State, c.Attempts)
	}
	want := Counts{Succeeded: 1, Failed: 1, TimedOut: 1}
	if got := *sum.RunCounts[1]; got != want {
		t.Errorf("run 1 counts %+v, want %+v", got, want)
	}
	tc, err := NewTail(dir).Refresh(func(string) bool { return true }, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := *tc.Runs[1]; got != want {
		t.Errorf("Tail: run 1 counts %+v, want %+v", got, want)
	}
	if d, _ := Durations(dir); len(d) != 2 {
		t.Errorf("Durations = %v, want the 2 E records only", d)
	}
	if _, ok, _ := EndedDurations(dir, true); len(ok) != 1 || Median(ok) != 1 {
		t.Errorf("succeeded durations %v, want [1]", ok)
	}
}
