package status

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func write(t *testing.T, dir, job string, run int, fn func(w *Writer)) {
	t.Helper()
	w, err := Create(filepath.Join(dir, "status."+job), job, run, "node"+job)
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

func TestAggregateRejectsDamagedRecord(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "status.1"), []byte("# farm-status v1 job=1 run=1 host=h\nE 5 zero\n"), 0o644)
	if _, err := Load(dir, Options{}); err == nil {
		t.Error("a damaged record was accepted")
	}
}
