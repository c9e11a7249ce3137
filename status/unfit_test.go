package status

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// writeCap writes the status file of job in run, packing cases into c.
func writeCap(t *testing.T, dir, job string, run int, c Capacity, fn func(w *Writer)) {
	t.Helper()
	w, err := CreateCap(filepath.Join(dir, "status."+job), job, 0, run, "node"+job, c, nil)
	if err != nil {
		t.Fatal(err)
	}
	fn(w)
	w.Close()
}

// An unfit case (a U record) is "unfit" with its reason until an attempt
// that started replaces it, of any run; it replaces only nothing or an
// older unfit attempt. Every case carries the placement of its decisive
// attempt, and a live job the CPUs and GPUs of its running cases.
//
// Over 80 lines: the records of two jobs and, in full, the cases, counts
// and jobs they must sum to; the expectations are only readable next to
// the records they come from.
func TestUnfitCasesAndPlacements(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Unix(1_700_000_000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	a := Placement{Loop: 1, CPUs: []int{0, 1, 2, 3}, GPUs: []string{"0"}}
	b := Placement{Loop: 2, CPUs: []int{4, 5}, GPUs: []string{"1"}}
	// Run 1, job 10 (dead): 1 succeeds at a; 2 unfit; 5 unfit; 6 fails at
	// b; 7 unfit; 9 cut off at b (interrupted).
	writeCap(t, dir, "10", 1, Capacity{CPUs: 8, GPUs: 2}, func(w *Writer) {
		w.StartAt(1, at(0), a)
		w.End(1, 0, at(0), time.Second)
		w.Unfit(2, at(1), "needs 16 CPUs, the job has 8")
		w.Unfit(5, at(1), "needs 16 CPUs, the job has 8")
		w.StartAt(6, at(2), b)
		w.End(6, 3, at(2), 2*time.Second)
		w.Unfit(7, at(3), "needs 0-02:00:00, 0-01:00:00 left")
		w.StartAt(9, at(4), b)
	})
	// Run 2, job 20 (live): 5 fails at a plain start; 6 and 8 unfit; 7
	// unfit again, for another reason; 3 and 4 run at b and a.
	writeCap(t, dir, "20", 2, Capacity{CPUs: 8, GPUs: 2}, func(w *Writer) {
		w.Start(5, at(100))
		w.End(5, 1, at(100), time.Second)
		w.Unfit(6, at(101), "needs 3 GPUs, the job has 2")
		w.Unfit(7, at(101), "needs 0-02:00:00, 0-00:30:00 left")
		w.Unfit(8, at(101), "")
		w.StartAt(3, at(102), b)
		w.StartAt(4, at(103), a)
	})
	sum, err := Load(dir, Options{Live: func(id string) bool { return id == "20" }, Now: at(110)})
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Warnings) > 0 {
		t.Errorf("warnings: %q", sum.Warnings)
	}
	var got []Case
	sum.Each(func(c Case) error { got = append(got, c); return nil })
	want := []Case{
		{ID: 1, State: Succeeded, Seconds: 1, Job: "10", Host: "node10", Run: 1, Attempts: 1, Loop: 1, CPUs: a.CPUs, GPUs: a.GPUs},
		{ID: 2, State: Unfit, NoSeconds: true, Job: "10", Host: "node10", Run: 1, Reason: "needs 16 CPUs, the job has 8"},
		{ID: 3, State: Running, Seconds: 8, Job: "20", Host: "node20", Run: 2, Attempts: 1, Loop: 2, CPUs: b.CPUs, GPUs: b.GPUs},
		{ID: 4, State: Running, Seconds: 7, Job: "20", Host: "node20", Run: 2, Attempts: 1, Loop: 1, CPUs: a.CPUs, GPUs: a.GPUs},
		{ID: 5, State: Failed, Status: 1, Seconds: 1, Job: "20", Host: "node20", Run: 2, Attempts: 1},
		{ID: 6, State: Failed, Status: 3, Seconds: 2, Job: "10", Host: "node10", Run: 1, Attempts: 1, Loop: 2, CPUs: b.CPUs, GPUs: b.GPUs},
		{ID: 7, State: Unfit, NoSeconds: true, Job: "20", Host: "node20", Run: 2, Reason: "needs 0-02:00:00, 0-00:30:00 left"},
		{ID: 8, State: Unfit, NoSeconds: true, Job: "20", Host: "node20", Run: 2},
		{ID: 9, State: Interrupted, NoSeconds: true, Job: "10", Host: "node10", Run: 1, Attempts: 1, Crashes: 1, Loop: 2, CPUs: b.CPUs, GPUs: b.GPUs},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("cases (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(Counts{Running: 2, Interrupted: 1, Failed: 2, Succeeded: 1, Unfit: 3}, sum.Totals()); diff != "" {
		t.Errorf("totals (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[int]*Counts{
		1: {Succeeded: 1, Failed: 1, Interrupted: 1, Unfit: 3},
		2: {Failed: 1, Running: 2, Unfit: 3},
	}, sum.RunCounts); diff != "" {
		t.Errorf("run counts (-want +got):\n%s", diff)
	}
	wantJobs := []Job{
		{ID: "10", Run: 1, Host: "node10", Ended: 3, Unfit: 3, Capacity: Capacity{CPUs: 8, GPUs: 2}},
		{ID: "20", Run: 2, Host: "node20", Ended: 1, Open: 2, Unfit: 3, Capacity: Capacity{CPUs: 8, GPUs: 2},
			OpenCPUs: []int{0, 1, 2, 3, 4, 5}, OpenGPUs: []string{"0", "1"}},
	}
	if diff := cmp.Diff(wantJobs, sum.Jobs); diff != "" {
		t.Errorf("jobs (-want +got):\n%s", diff)
	}
	if c := sum.Get(7); c.Reason != want[6].Reason || c.Job != "20" {
		t.Errorf("Get(7) = %+v", c)
	}
	// The tail of query --watch counts them per run too.
	tc, err := NewTail(dir).Refresh(func(id string) bool { return id == "20" }, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Counts{Failed: 1, Running: 2, Unfit: 3}, *tc.Runs[2]); diff != "" {
		t.Errorf("tail counts of run 2 (-want +got):\n%s", diff)
	}
}

// Whatever order the files are merged in (they are parsed in parallel),
// two attempts of a case in different runs give one outcome.
func TestUnfitOutcomeDoesNotDependOnOrder(t *testing.T) {
	states := []State{Unfit, Running, Interrupted, Failed, Succeeded}
	for _, s1 := range states {
		for _, s2 := range states {
			if s1 == Running && s2 == Running {
				continue // two live runs at once: not a farm's
			}
			outcome := func(first, second int) (State, int) {
				s := &Summary{RunCounts: map[int]*Counts{}, Jobs: []Job{{ID: "1", Run: 1}, {ID: "2", Run: 2}}, jobRun: []int{1, 2}}
				att := [2]attempt{{id: 5, state: s1, started: s1 != Unfit}, {id: 5, state: s2, started: s2 != Unfit}}
				s.merge(att[first], first, first+1)
				s.merge(att[second], second, second+1)
				s.cases.done()
				c := s.Get(5)
				return c.State, c.Run
			}
			st1, run1 := outcome(0, 1)
			st2, run2 := outcome(1, 0)
			if st1 != st2 || run1 != run2 {
				t.Errorf("%v in run 1, %v in run 2: %v of run %d merged in order, %v of run %d the other way", s1, s2, st1, run1, st2, run2)
			}
			if (s1 == Unfit) != (s2 == Unfit) && st1 == Unfit {
				t.Errorf("%v in run 1, %v in run 2: unfit hides an attempt that started", s1, s2)
			}
			if s1 == Unfit && s2 == Unfit && run1 != 2 {
				t.Errorf("unfit in runs 1 and 2: run %d's reason kept, want run 2's", run1)
			}
		}
	}
}

// Placements and reasons cost nothing per case: a farm whose every case
// has one, in a few dozen kinds, keeps 15 bytes a case, as one without.
func TestPlacedCasesCostPerCase(t *testing.T) {
	const n = 200_000
	dir := t.TempDir()
	for j := 0; j < 4; j++ {
		fh, err := os.Create(filepath.Join(dir, fmt.Sprintf("status.%d", j)))
		if err != nil {
			t.Fatal(err)
		}
		w := bufio.NewWriter(fh)
		fmt.Fprintf(w, "# farm-status v1 job=%d run=1 host=node%d cpus=192 gpus=4\n", j, j)
		for id := j + 1; id <= n; id += 4 {
			if id%100 == 0 {
				fmt.Fprintf(w, "U %d 1700000000.000 needs %d CPUs, the job has 192\n", id, 193+id%7)
				continue
			}
			loop := id % 48
			fmt.Fprintf(w, "S %d 1700000000.250 node%d loop=%d cpus=%d-%d gpus=%d\n", id, j, loop+1, 4*loop, 4*loop+3, loop%4)
			fmt.Fprintf(w, "E %d 0 1700000000.250 1.5 node%d\n", id, j)
		}
		w.Flush()
		fh.Close()
	}
	sum, heap, total := kept(t, dir, Options{MaxID: n, Cases: n})
	per := float64(heap) / n
	t.Logf("%.1f bytes a case kept, %d allocated", per, total/n)
	if per > 16 {
		t.Errorf("%.1f bytes a case", per)
	}
	if got := sum.Totals(); got.Succeeded != n-n/100 || got.Unfit != n/100 {
		t.Errorf("totals %+v", got)
	}
	if c := sum.Get(47); c.Loop != 48 || len(c.CPUs) != 4 || c.CPUs[0] != 188 || c.GPUs[0] != "3" {
		t.Errorf("case 47: %+v", c)
	}
	if c := sum.Get(300); c.State != Unfit || c.Reason != "needs 199 CPUs, the job has 192" {
		t.Errorf("case 300: %+v", c)
	}
	runtime.KeepAlive(sum)
}

var benchPlacedLines = [][]byte{
	[]byte("S 1234567 1700000000.123 node042 loop=17 cpus=64-67 gpus=1\n"),
	[]byte("E 1234567 0 1700000000.123 0.517 node042\n"),
}

// BenchmarkParsePlacedRecord is ParseRecord of an S record with a
// placement and its E record.
func BenchmarkParsePlacedRecord(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := ParseRecord(benchPlacedLines[i&1]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAggregatePlacedLine is Load's work per record of a meta-job
// that places its cases.
func BenchmarkAggregatePlacedLine(b *testing.B) { benchmarkAggregate(b, benchPlacedLines) }

// A running case whose start record names no CPU and no GPU holds the
// whole job (it declares no needs): its job counts it in OpenWhole, for
// farm query's busy count (issue 34); cases placed on CPUs or GPUs, and
// ended ones, do not count.
func TestOpenWholeCountsUnplacedRunningCases(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Unix(1_700_000_000, 0)
	writeCap(t, dir, "30", 1, Capacity{CPUs: 2}, func(w *Writer) {
		w.StartAt(1, t0, Placement{})
		w.End(1, 0, t0, time.Second)
		w.StartAt(2, t0.Add(time.Second), Placement{Loop: 2}) // no CPU or GPU named: the whole job
	})
	writeCap(t, dir, "31", 1, Capacity{CPUs: 4, GPUs: 1}, func(w *Writer) {
		w.StartAt(3, t0, Placement{Loop: 1, CPUs: []int{0, 1}})
		w.StartAt(4, t0, Placement{Loop: 2, GPUs: []string{"0"}})
	})
	sum, err := Load(dir, Options{Live: func(string) bool { return true }, Now: t0.Add(5 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, j := range sum.Jobs {
		got[j.ID] = j.OpenWhole
	}
	if diff := cmp.Diff(map[string]int64{"30": 1, "31": 0}, got); diff != "" {
		t.Errorf("OpenWhole by job (-want +got):\n%s", diff)
	}
}
