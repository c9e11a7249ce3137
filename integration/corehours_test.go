package integration

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestCoreHoursAddUp: farm query --json's core-hours (issue 38) on a
// local farm of cases that succeed and cases that fail: busy in cases is
// the sum of the cases' durations (farm Status --json) × their meta-job's
// CPUs (its status header's), split by outcome; allocated = busy + idle,
// idle is not negative, and allocated is at most the meta-jobs' CPUs ×
// the time the test ran them.
func TestCoreHoursAddUp(t *testing.T) {
	t.Parallel()
	table := append(repeat("sleep 0.5", 4), repeat("sleep 0.2; exit 3", 2)...)
	dir := newFarm(t, table, "0-00:10")
	began := time.Now()
	mustFarm(t, dir, "submit", "2", "--backend", "local")
	if r := farmIn(t, dir, nil, "wait", "--timeout", "2m"); r.Code != exitNotAllOK {
		t.Fatalf("wait: exit %d, want %d (2 cases fail)\n%s%s", r.Code, exitNotAllOK, r.Out, r.Err)
	}
	elapsed := time.Since(began).Seconds()
	var q struct {
		CoreHours struct {
			Allocated, Busy, Idle float64
			BusyBy                map[string]float64 `json:"busy_by_outcome"`
			PerSucceeded          float64            `json:"per_succeeded_case"`
		} `json:"core_hours"`
	}
	if err := json.Unmarshal([]byte(mustFarm(t, dir, "query", "--json")), &q); err != nil {
		t.Fatal(err)
	}
	c := q.CoreHours
	cpus := jobCPUs(t, dir)
	want := map[string]float64{}
	for id, row := range statusJSON(t, dir) {
		if cpus[row.Job] == 0 {
			t.Fatalf("case %d: job %q has no cpus= in its status header", id, row.Job)
		}
		want[row.State] += row.Seconds * float64(cpus[row.Job]) / 3600
	}
	const rounding = 6 * 0.001 * 4 / 3600 // 6 cases' seconds to the millisecond, at most 4 CPUs
	for _, o := range []string{"succeeded", "failed"} {
		if math.Abs(c.BusyBy[o]-want[o]) > rounding || want[o] == 0 {
			t.Errorf("busy in %s cases: %.6f core-hours, want %.6f (Status's seconds × CPUs)", o, c.BusyBy[o], want[o])
		}
	}
	if sum := c.BusyBy["succeeded"] + c.BusyBy["failed"] + c.BusyBy["interrupted"] + c.BusyBy["running"]; math.Abs(sum-c.Busy) > 1e-9 {
		t.Errorf("busy %.6f is not the sum of its outcomes %.6f", c.Busy, sum)
	}
	if math.Abs(c.Allocated-(c.Busy+c.Idle)) > 1e-9 || c.Idle < 0 {
		t.Errorf("allocated %.6f, busy %.6f, idle %.6f: want allocated = busy + idle, idle >= 0", c.Allocated, c.Busy, c.Idle)
	}
	most := 0.0
	for _, n := range cpus {
		most += float64(n) * elapsed / 3600
	}
	if c.Allocated > most {
		t.Errorf("allocated %.6f core-hours, more than the meta-jobs' CPUs × the %.1f s they ran (%.6f)", c.Allocated, elapsed, most)
	}
	if math.Abs(c.PerSucceeded-c.Allocated/4) > 1e-9 {
		t.Errorf("per succeeded case %.6f, want allocated / 4 = %.6f", c.PerSucceeded, c.Allocated/4)
	}
	if out := mustFarm(t, dir, "query"); !strings.Contains(out, "Core-hours: ") || !strings.Contains(out, " allocated = ") {
		t.Errorf("farm query says no core-hours:\n%s", out)
	}
}

// jobCPUs reads the CPUs each meta-job's status header says it has.
func jobCPUs(t *testing.T, dir string) map[string]int {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "STATUSES", "status.*"))
	m := map[string]int{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		head, _, _ := strings.Cut(string(b), "\n")
		var job string
		for _, kv := range strings.Fields(head) {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "job":
				job = v
			case "cpus":
				m[job], _ = strconv.Atoi(v)
			}
		}
	}
	return m
}
