package integration

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/farm-hpc/farm/internal/testreq"
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
	sum := 0.0
	for _, b := range c.BusyBy {
		sum += b
	}
	if math.Abs(sum-c.Busy) > 1e-9 {
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

// TestSlurmCoreHoursAgreeWithSacct: on the real Slurm with accounting
// (integration/slurm-up starts slurmdbd on MariaDB), farm query --json's
// allocated core-hours of a farm of 3 meta-jobs, each running cases of
// several seconds, agree within 5% with what Slurm itself records for
// those jobs (sacct: AllocCPUS × ElapsedRaw, summed), and say they come
// from Slurm's accounting. With sacct saying accounting is disabled they
// come from the status records, which miss only each job's seconds
// before its first case and after its last: logged, and within 80-105%.
func TestSlurmCoreHoursAgreeWithSacct(t *testing.T) {
	needSlurm(t)
	if out, err := exec.Command("sacct", "-n", "-X", "-j", "1", "-o", "JobID").CombinedOutput(); err != nil {
		testreq.Skip(t, "FARM_REQUIRE_SLURM", fmt.Sprintf("SLURM ACCOUNTING TESTS SKIPPED: sacct does not work (%v: %s); integration/slurm-up starts Slurm with accounting (FARM_SLURM_ACCOUNTING=1, its default)", err, strings.TrimSpace(string(out))))
	}
	t.Parallel()
	dir, slurmSecs := coreHoursAgree(t, slurmEngine, "sacct", sacctCoreSeconds)
	// Without accounting: a sacct that says so, first in PATH.
	shim := t.TempDir()
	if err := os.WriteFile(filepath.Join(shim, "sacct"), []byte("#!/bin/sh\necho 'Slurm accounting storage is disabled' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	recSecs, from := queryAllocated(t, dir, "PATH="+shim+":"+os.Getenv("PATH"))
	t.Logf("allocated without accounting: %.1f core-seconds (from %s), %.1f%% of sacct's", recSecs, from, 100*recSecs/slurmSecs)
	if from != "status records" || recSecs > slurmSecs*1.05 || recSecs < slurmSecs*0.8 {
		t.Errorf("without accounting: %.1f core-seconds from %q; want from \"status records\", 80-105%% of Slurm's %.1f", recSecs, from, slurmSecs)
	}
}

// TestSGECoreHoursAgreeWithQacct: as on Slurm, farm's allocated
// core-hours of an ended farm on Grid Engine agree within 5% with what
// Grid Engine records of its jobs (qacct -j: slots × ru_wallclock), and
// say they come from its accounting.
func TestSGECoreHoursAgreeWithQacct(t *testing.T) {
	needSGE(t)
	t.Parallel()
	coreHoursAgree(t, sgeEngine, "qacct", qacctCoreSeconds)
}

// coreHoursAgree runs a farm of 3 meta-jobs, 12 cases of 3 s, on engine e
// to its end, and checks that farm query --json's allocated core-hours
// agree within 5% with what the engine's accounting records of the jobs
// (record, named tool), and come from "NAME accounting". It returns the
// farm and the engine's core-seconds.
func coreHoursAgree(t *testing.T, e engine, tool string, record func(*testing.T, []string) float64) (string, float64) {
	t.Helper()
	dir := e.farm(t, repeat("sleep 3", 12), "0-00:10")
	mustFarm(t, dir, "submit", "3", "--backend", e.name)
	mustFarm(t, dir, "wait", "--timeout", "5m")
	ids := farmJobIDs(dir)
	if len(ids) != 3 {
		t.Fatalf("farm recorded jobs %v, want 3", ids)
	}
	engineSecs := record(t, ids)
	farmSecs, from := queryAllocated(t, dir)
	t.Logf("allocated: farm %.1f core-seconds (from %s), %s %.1f", farmSecs, from, tool, engineSecs)
	if want := e.name + " accounting"; from != want {
		t.Errorf("allocated_from %q, want %q", from, want)
	}
	if engineSecs <= 0 || math.Abs(farmSecs-engineSecs) > 0.05*engineSecs {
		t.Errorf("farm's allocated %.1f core-seconds, %s's %.1f: want within 5%%", farmSecs, tool, engineSecs)
	}
	return dir, engineSecs
}

// queryAllocated is farm query --json's allocated core-seconds, and where
// they come from, with extra environment env.
func queryAllocated(t *testing.T, dir string, env ...string) (float64, string) {
	t.Helper()
	r := farmIn(t, dir, env, "query", "--json")
	var q struct {
		CoreHours struct {
			Allocated     float64
			AllocatedFrom string `json:"allocated_from"`
		} `json:"core_hours"`
	}
	if r.Code != 0 || json.Unmarshal([]byte(r.Out), &q) != nil {
		t.Fatalf("farm query --json: exit %d\n%s%s", r.Code, r.Out, r.Err)
	}
	return q.CoreHours.Allocated * 3600, q.CoreHours.AllocatedFrom
}

// sacctCoreSeconds is what Slurm's accounting records of the jobs ids,
// once every one of them has ended there (slurmdbd hears of a job's end a
// moment after squeue): AllocCPUS × ElapsedRaw, summed.
func sacctCoreSeconds(t *testing.T, ids []string) float64 {
	t.Helper()
	var sum float64
	waitFor(t, 30*time.Second, "sacct to record the jobs' ends", func() bool {
		out, err := exec.Command("sacct", "-X", "-n", "-P", "-j", strings.Join(ids, ","), "-o", "JobID,AllocCPUS,ElapsedRaw,State").Output()
		if err != nil {
			return false
		}
		sum = 0
		ended := 0
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			f := strings.Split(line, "|")
			if len(f) != 4 {
				return false
			}
			cpus, _ := strconv.Atoi(f[1])
			secs, _ := strconv.Atoi(f[2])
			sum += float64(cpus * secs)
			if !strings.HasPrefix(f[3], "RUNNING") && !strings.HasPrefix(f[3], "PENDING") {
				ended++
			}
		}
		return ended == len(ids)
	})
	return sum
}

// qacctCoreSeconds is what Grid Engine's accounting records of the jobs
// ids (qacct -j ID for each): slots × ru_wallclock, summed over their
// records.
func qacctCoreSeconds(t *testing.T, ids []string) float64 {
	t.Helper()
	var sum float64
	for _, id := range ids {
		out, err := exec.Command("qacct", "-j", id).CombinedOutput()
		if err != nil {
			t.Fatalf("qacct -j %s: %v\n%s", id, err, out)
		}
		slots := 0.0
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			if len(f) != 2 {
				continue
			}
			switch f[0] {
			case "slots":
				slots, _ = strconv.ParseFloat(f[1], 64)
			case "ru_wallclock":
				secs, err := strconv.ParseFloat(strings.TrimSuffix(f[1], "s"), 64)
				if err != nil {
					t.Fatalf("qacct -j %s: ru_wallclock %q", id, f[1])
				}
				sum += slots * secs // slots comes before ru_wallclock in each record
			}
		}
	}
	return sum
}
