package status

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func write(t *testing.T, dir, job string, run int, fn func(w *Writer)) {
	t.Helper()
	w, err := Create(filepath.Join(dir, "status."+job), job, 0, run, "node"+job)
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
		w.Quit("No cases left; exiting.")
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
		{ID: 1, State: Succeeded, Status: 0, Seconds: 1, Job: "10", Host: "node10", Run: 1},
		{ID: 2, State: Succeeded, Status: 0, Seconds: 1, Job: "20", Host: "node20", Run: 2},
		{ID: 3, State: Failed, Status: 4, Seconds: 1, Job: "20", Host: "node20", Run: 2},
		{ID: 4, State: Succeeded, Status: 0, Seconds: 1, Job: "11", Host: "node11", Run: 1},
		{ID: 5, State: Running, Seconds: 4, Job: "11", Host: "node11", Run: 1},
		{ID: 6, State: Interrupted, Status: 15, Seconds: 5, Job: "11", Host: "node11", Run: 1},
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
	if c := sum.Get(5); c.State != Interrupted {
		t.Errorf("open case of a dead job = %v, want interrupted", c.State)
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

func TestFileNames(t *testing.T) {
	for _, tc := range []struct {
		job     string
		restart int
		name    string
	}{
		{"17", 0, "status.17"},
		{"17", 2, "status.17.r2"},
		{"123_4", 0, "status.123_4"},
		{"123_4", 1, "status.123_4.r1"},
	} {
		if got := FileName(tc.job, tc.restart); got != tc.name {
			t.Errorf("FileName(%q, %d) = %q, want %q", tc.job, tc.restart, got, tc.name)
		}
		job, r, ok := ParseFileName(tc.name)
		if !ok || job != tc.job || r != tc.restart {
			t.Errorf("ParseFileName(%q) = %q, %d, %t", tc.name, job, r, ok)
		}
	}
	for _, bad := range []string{"status.", "status.17.tmp123", "status.17.r0", "status.17.rx", "status.17.r01", "status.17.r+1", "table.dat", "status.17.tmp"} {
		if job, r, ok := ParseFileName(bad); ok {
			t.Errorf("ParseFileName(%q) = %q, %d, true; want not a status file", bad, job, r)
		}
	}
}

// A job that Slurm requeued after its node failed runs again under the same
// ID: the case its first run left open was interrupted, whether the job now
// waits to start again (pending: not live) or runs again (live, but in its
// newer file).
func TestRestartedJobLeavesItsOpenCaseInterrupted(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Unix(1_700_000_000, 0)
	w, _ := Create(filepath.Join(dir, FileName("6", 0)), "6", 0, 1, "node2")
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
	w, _ = Create(filepath.Join(dir, FileName("6", 1)), "6", 1, 1, "node1")
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
