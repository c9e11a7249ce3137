package status

import (
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A meta-job's usage: its CPUs × the span of its records (to now while it
// runs), and its attempts' seconds × the CPUs each was given (its cpus=
// list, else the whole job's), by the state each ended in; an attempt cut
// off by its meta-job's death, and an unfit one, count nowhere.
func TestUsageFromRecords(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		// 4 CPUs, 1000..1100: 1 succeeds on 2 CPUs for 10 s, 2 fails on
		// the whole job for 5 s, 3 is interrupted (I) after 4 s on 1
		// CPU, 4 is unfit, 5 ends with its meta-job's death.
		"status.1": "# farm-status v1 job=1 run=1 host=h cpus=4\n" +
			"S 1 1000 h loop=1 cpus=0-1\nE 1 0 1000 10 h\n" +
			"S 2 1010 h\nE 2 3 1010 5 h\n" +
			"S 3 1020 h loop=2 cpus=3\nI 3 15 1020 4 h\n" +
			"U 4 1030 needs 8 CPUs, the job has 4\n" +
			"S 5 1040 h\n" +
			"Q 1100 why=no-cases No cases left; exiting.\n",
		// No cpus= (1 CPU), live: runs case 6 since 2000, now is 2030.
		"status.2": "# farm-status v1 job=2 run=1 host=h\nS 6 2000 h\n",
		// META's: no time known.
		"status.meta-3": "7 0\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sum, err := Load(dir, Options{Live: func(job string) bool { return job == "2" }, Now: time.Unix(2030, 0)})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Usage{
		"1":      {Begin: 1000, End: 1100, CPUs: 4},
		"2":      {Begin: 2000, End: 2030, CPUs: 1},
		"meta-3": {CPUs: 1},
	}
	u1 := want["1"]
	u1.Busy[Succeeded], u1.Busy[Failed], u1.Busy[Interrupted] = 20, 20, 4
	want["1"] = u1
	u2 := want["2"]
	u2.Busy[Running] = 30
	want["2"] = u2
	for i, j := range sum.Jobs {
		got := sum.Usage[i]
		if w := want[j.ID]; got != w {
			t.Errorf("job %s: usage %+v, want %+v", j.ID, got, w)
		}
	}
	var alloc, busy float64
	for i := range sum.Usage {
		alloc += sum.Usage[i].Allocated()
		busy += sum.Usage[i].BusyTotal()
	}
	if math.Abs(alloc-430) > 1e-9 || math.Abs(busy-74) > 1e-9 {
		t.Errorf("allocated %v, busy %v core-seconds; want 430 and 74", alloc, busy)
	}
}
