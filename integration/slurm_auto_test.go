package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSlurmAutoEarlyExitAndFinal runs, on the real Slurm, a farm too big for
// one wave of 1-minute meta-jobs: 24 cases of 20 s on 8 meta-jobs. After the
// first 8 cases dt_cutoff is ~20 s, so every meta-job exits at ~40 s instead
// of being killed mid-case; -auto resubmits the 8 cases left, and final.sh
// runs once at the end. No case may be interrupted.
//
// Not parallel: the 8 meta-jobs must start together, so that 8 cases have
// ended (and dt_cutoff is known) before any meta-job's last claim: within
// 20 s with 1-minute meta-jobs (a third claim at 40 s). Grid Engine's
// farm, submitted one qsub at a time, overran that on this 2-core machine
// in a loaded make test (a first meta-job started its third case, killed
// at its limit): its meta-jobs get 1 min 20 s, a fourth claim at 60 s,
// and so 40 s to start in.
func TestSlurmAutoEarlyExitAndFinal(t *testing.T) { testAutoEarlyExitAndFinal(t, slurmEngine, 24, "1") }

// TestSGEAutoEarlyExitAndFinal is the same on Grid Engine, whose h_rt
// takes seconds (Slurm rounds a limit up to whole minutes): 32 cases on
// meta-jobs of 1 min 20 s.
func TestSGEAutoEarlyExitAndFinal(t *testing.T) { testAutoEarlyExitAndFinal(t, sgeEngine, 32, "1:20") }

func testAutoEarlyExitAndFinal(t *testing.T, e engine, cases int64, limit string) {
	e.need(t)
	dir := e.farm(t, repeat("sleep 20", int(cases)), limit)
	writeFinal(t, dir)
	mustFarm(t, dir, "submit", "8", "-auto", "--backend", e.name)
	mustFarm(t, dir, "wait", "--timeout", "6m")

	st := statusJSON(t, dir)
	if int64(len(st)) != cases {
		t.Errorf("%d cases have records, want %d", len(st), cases)
	}
	for id, r := range st {
		if r.State != "succeeded" {
			t.Errorf("case %d: %+v (want succeeded; none interrupted)", id, r)
		}
	}
	rec := readRecords(t, dir)
	for id := int64(1); id <= cases; id++ {
		if rec.Starts[id] != 1 || rec.Ends[id] != 1 {
			t.Errorf("case %d: %d starts, %d ends, want 1 and 1", id, rec.Starts[id], rec.Ends[id])
		}
	}
	log, _ := os.ReadFile(filepath.Join(dir, "farm.log"))
	if !strings.Contains(string(log), "resubmitting with N=8") || !strings.Contains(string(log), "submitted final.sh as job") {
		t.Errorf("farm.log:\n%s", log)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "final.out")); strings.Count(string(b), "final ran") != 1 {
		t.Errorf("final.out = %q, want one run", b)
	}
	outs, _ := filepath.Glob(filepath.Join(dir, "OUTPUT", "*.out"))
	early := 0
	for _, o := range outs {
		b, _ := os.ReadFile(o)
		early += strings.Count(string(b), "Not enough runtime left; exiting.")
	}
	if early == 0 {
		t.Errorf("no meta-job exited early")
	}
}

// TestSlurmAutoStopsOnOnlyFailed: with one case always failing, -auto stops
// and final.sh never runs.
func TestSlurmAutoStopsOnOnlyFailed(t *testing.T) { testAutoStopsOnOnlyFailed(t, slurmEngine) }
func TestSGEAutoStopsOnOnlyFailed(t *testing.T)   { testAutoStopsOnOnlyFailed(t, sgeEngine) }

func testAutoStopsOnOnlyFailed(t *testing.T, e engine) {
	e.need(t)
	t.Parallel()
	dir := e.farm(t, []string{"true", "exit 4", "true"}, "1")
	writeFinal(t, dir)
	mustFarm(t, dir, "submit", "2", "-auto", "--backend", e.name)
	mustFarmCode(t, dir, exitNotAllOK, "wait", "--timeout", "3m")
	checkAutoStoppedOnFailed(t, dir)
}
