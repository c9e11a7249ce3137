package integration

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestLocalResubmitRerunsExactlyTheFailed(t *testing.T) {
	t.Parallel()
	var table []string
	failing := map[int64]bool{}
	for i := 1; i <= 30; i++ {
		if i%6 == 0 { // 6, 12, 18, 24, 30 fail until ../fixed exists
			table = append(table, "test -f ../fixed")
			failing[int64(i)] = true
		} else {
			table = append(table, "true")
		}
	}
	dir := newFarm(t, table, "0-00:10")
	mustFarm(t, dir, "submit", "2", "--backend", "local")
	mustFarmCode(t, dir, exitNotAllOK, "wait", "--timeout", "1m")

	os.WriteFile(filepath.Join(dir, "fixed"), nil, 0o644)
	out := mustFarm(t, dir, "resubmit", "2") // stays on the local backend
	if !strings.Contains(out, "Resubmitting the 5 case(s)") || !strings.Contains(out, "run 2 on the local backend") {
		t.Errorf("resubmit said %q", out)
	}
	retry, _ := os.ReadFile(filepath.Join(dir, "table.dat_"))
	want := "6 test -f ../fixed\n12 test -f ../fixed\n18 test -f ../fixed\n24 test -f ../fixed\n30 test -f ../fixed\n"
	if string(retry) != want {
		t.Errorf("table.dat_ = %q, want %q", retry, want)
	}
	// Refused while the run's jobs may still be active.
	if r := farmIn(t, dir, nil, "resubmit", "2"); r.Code == 0 && !strings.Contains(r.Out, "nothing to resubmit") {
		// The run may already have ended on a fast machine; then nothing is left.
		t.Errorf("second resubmit while run 2 active: exit %d, %q %q", r.Code, r.Out, r.Err)
	}
	mustFarm(t, dir, "wait", "--timeout", "1m")

	rec := readRecords(t, dir)
	for id := int64(1); id <= 30; id++ {
		wantRuns := 1
		if failing[id] {
			wantRuns = 2
		}
		if rec.Starts[id] != wantRuns {
			t.Errorf("case %d ran %d times, want %d", id, rec.Starts[id], wantRuns)
		}
	}
	for id, r := range statusJSON(t, dir) {
		if r.State != "succeeded" {
			t.Errorf("case %d: %+v", id, r)
		}
	}
	r := farmIn(t, dir, nil, "resubmit", "2")
	if r.Code != 0 || strings.TrimSpace(r.Out) != "No failed/unfinished jobs; nothing to resubmit" {
		t.Errorf("resubmit of a finished farm: exit %d, %q", r.Code, r.Out)
	}
	log, _ := os.ReadFile(filepath.Join(dir, "farm.log"))
	if !strings.Contains(string(log), "resubmit: run 2") {
		t.Errorf("farm.log lacks the resubmit:\n%s", log)
	}

	// Chosen cases, succeeded ones too, run once more; a selection of
	// nothing says so and exits 0.
	out = mustFarm(t, dir, "resubmit", "1", "--cases", "2,7-8")
	if !strings.Contains(out, "Resubmitting the 3 case(s) chosen by --cases 2,7-8 (3 succeeded)") {
		t.Errorf("resubmit --cases said %q", out)
	}
	mustFarm(t, dir, "wait", "--timeout", "1m")
	rec = readRecords(t, dir)
	for _, id := range []int64{2, 7, 8} {
		if rec.Starts[id] != 2 {
			t.Errorf("case %d ran %d times after resubmit --cases, want 2", id, rec.Starts[id])
		}
	}
	if rec.Starts[3] != 1 || rec.Starts[6] != 2 {
		t.Errorf("resubmit --cases 2,7-8 ran case 3 %d times and 6 %d times, want 1 and 2", rec.Starts[3], rec.Starts[6])
	}
	r = farmIn(t, dir, nil, "resubmit", "1", "--failed")
	if r.Code != 0 || strings.TrimSpace(r.Out) != "No failed/unfinished jobs; nothing to resubmit (no case is chosen by --failed)" {
		t.Errorf("resubmit --failed of a farm with no failure: exit %d, %q %q", r.Code, r.Out, r.Err)
	}
}

func TestLocalResubmitRefusedWhileJobsRun(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, []string{"sleep 30", "true"}, "0-00:10")
	mustFarm(t, dir, "submit", "1", "--backend", "local")
	r := farmIn(t, dir, nil, "resubmit", "1")
	if r.Code != 1 || !strings.Contains(r.Err, "Jobs are still running/queued; cannot resubmit") {
		t.Errorf("resubmit while running: exit %d, %q", r.Code, r.Err)
	}
	mustFarm(t, dir, "kill")
	mustFarmCode(t, dir, exitNotAllOK, "wait", "--timeout", "30s")
}

func writeFinal(t *testing.T, dir string) {
	t.Helper()
	script := "#!/bin/bash\n#SBATCH -t 1\n#$ -l h_rt=60\necho \"final ran $FARM_RUN\" >> final.out\n"
	if err := os.WriteFile(filepath.Join(dir, "final.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestLocalAutoCompletesTooBigFarmThenRunsFinalOnce(t *testing.T) {
	t.Parallel()
	// 40 half-second cases, 2 meta-jobs, a 5-second limit: about half a
	// farm per wave.
	dir := newFarm(t, repeat("sleep 0.5", 40), "0:05")
	writeFinal(t, dir)
	out := mustFarmShort(t, dir, "submit", "2", "-auto", "--backend", "local")
	if !strings.Contains(out, "Submitted the -auto job") {
		t.Errorf("submit said %q", out)
	}
	mustFarm(t, dir, "wait", "--timeout", "3m")
	log, _ := os.ReadFile(filepath.Join(dir, "farm.log"))
	if n := strings.Count(string(log), "resubmitting with N=2"); n < 1 {
		t.Errorf("no auto-resubmission in farm.log:\n%s", log)
	}
	if !strings.Contains(string(log), "submitted final.sh as job") {
		t.Errorf("farm.log does not show final.sh submitted:\n%s", log)
	}
	final, _ := os.ReadFile(filepath.Join(dir, "final.out"))
	if strings.Count(string(final), "final ran") != 1 {
		t.Errorf("final.sh ran %d times: %q", strings.Count(string(final), "final ran"), final)
	}
	// Every case ended once by itself, successfully. A case cut short by
	// a wave's time limit (the runtime-aware exit leaves a margin of the
	// slowest eighth of the durations, which a loaded machine can exceed)
	// is interrupted and runs again in the next wave: that is what -auto
	// is for.
	rec := readRecords(t, dir)
	for id := int64(1); id <= 40; id++ {
		if ends := rec.Ends[id] - rec.Interrupts[id]; ends != 1 || rec.ExitStatus[id] != 0 {
			t.Errorf("case %d: %d end records (and %d interrupted), status %d; want one, 0", id, ends, rec.Interrupts[id], rec.ExitStatus[id])
		}
	}
	list := mustFarm(t, dir, "list")
	if strings.Count(list, " final ") != 1 {
		t.Errorf("list shows %d final jobs:\n%s", strings.Count(list, " final "), list)
	}
}

func TestLocalAutoStopsWhenOnlyFailedCasesAreLeft(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, []string{"true", "exit 5", "true", "true"}, "0-00:10")
	writeFinal(t, dir)
	mustFarm(t, dir, "submit", "2", "-auto", "--backend", "local")
	mustFarmCode(t, dir, exitNotAllOK, "wait", "--timeout", "1m")
	log := checkAutoStoppedOnFailed(t, dir)
	if strings.Contains(log, "resubmit: run 2") {
		t.Errorf("auto resubmitted a farm with only failed cases:\n%s", log)
	}
}

// checkAutoStoppedOnFailed checks that the -auto job of the farm in dir,
// whose jobs have ended, stopped because only failed cases were left, and
// that final.sh did not run. It returns farm.log.
func checkAutoStoppedOnFailed(t *testing.T, dir string) string {
	t.Helper()
	log, _ := os.ReadFile(filepath.Join(dir, "farm.log"))
	if !strings.Contains(string(log), "Only failed cases left; cannot auto-resubmit; exiting") {
		t.Errorf("farm.log:\n%s", log)
	}
	if _, err := os.Stat(filepath.Join(dir, "final.out")); !os.IsNotExist(err) {
		t.Errorf("final.sh ran although a case failed")
	}
	return string(log)
}

func TestLocalFinalWithoutAutoRunsOnlyWhenAllSucceeded(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, repeat("true", 5), "0-00:10")
	writeFinal(t, dir)
	out := mustFarm(t, dir, "submit", "2", "--backend", "local")
	if !strings.Contains(out, "Submitted the final.sh job") {
		t.Errorf("submit said %q", out)
	}
	mustFarm(t, dir, "wait", "--timeout", "1m")
	if b, _ := os.ReadFile(filepath.Join(dir, "final.out")); strings.TrimSpace(string(b)) != "final ran 1" {
		t.Errorf("final.out = %q", b)
	}
}

func TestLocalRuntimeAwareExitAvoidsInterruptedCases(t *testing.T) {
	if testing.Short() {
		t.Skip("takes a minute")
	}
	t.Parallel()
	// 8 meta-jobs with a 1-minute limit, 20-second cases: after the first
	// wave dt_cutoff is ~20 s, so no meta-job starts a third case at ~40 s.
	dir := newFarm(t, repeat("sleep 20", 24), "1")
	// All 8 must start at once, whatever other tests hold: plenty of slots.
	if r := farmIn(t, dir, []string{"FARM_LOCAL_SLOTS=64"}, "submit", "8", "--backend", "local"); r.Code != 0 {
		t.Fatal(r.Err)
	}
	mustFarmCode(t, dir, exitNotAllOK, "wait", "--timeout", "3m")
	st := statusJSON(t, dir)
	for id, r := range st {
		if r.State != "succeeded" {
			t.Errorf("case %d: %+v", id, r)
		}
	}
	if len(st) != 16 {
		t.Errorf("%d cases ran, want 16 (two waves of 8)", len(st))
	}
	outs, _ := filepath.Glob(filepath.Join(dir, "OUTPUT", "*.out"))
	early := 0
	for _, o := range outs {
		b, _ := os.ReadFile(o)
		if strings.Contains(string(b), "Not enough runtime left; exiting.") {
			early++
		}
	}
	if early != 8 {
		t.Errorf("%d meta-jobs exited early, want 8", early)
	}
}

func TestLocalJobFeaturesShutdownStopsClaiming(t *testing.T) {
	t.Parallel()
	jf := t.TempDir()
	dir := newFarm(t, repeat("sleep 1", 40), "0-00:10")
	deadline := time.Now().Add(10 * time.Second)
	os.WriteFile(filepath.Join(jf, "shutdowntime_job"), []byte(strconv.FormatInt(deadline.Unix(), 10)+"\n"), 0o644)
	r := farmIn(t, dir, []string{"JOBFEATURES=" + jf}, "submit", "1", "--backend", "local")
	if r.Code != 0 {
		t.Fatal(r.Err)
	}
	mustFarmCode(t, dir, exitNotAllOK, "wait", "--timeout", "1m")
	rec := readRecords(t, dir)
	if rec.Last > float64(deadline.Unix())+2 { // a case may start just before it, under load
		t.Errorf("a case ran until %.1f, after the shutdown time %d", rec.Last, deadline.Unix())
	}
	for id, r := range statusJSON(t, dir) {
		if r.State != "succeeded" {
			t.Errorf("case %d: %+v", id, r)
		}
	}
	if n := len(rec.Ends); n < 5 || n > 10 {
		t.Errorf("%d cases ran before the 10 s shutdown, want 5..10", n)
	}
	outs, _ := filepath.Glob(filepath.Join(dir, "OUTPUT", "*.out"))
	b, _ := os.ReadFile(outs[0])
	if !strings.Contains(string(b), "Not enough runtime left; exiting.") {
		t.Errorf("output:\n%s", b)
	}
}

func TestLocalNJobsMaxCapsSubmission(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, repeat("true", 10), "0-00:10")
	cfg := filepath.Join(dir, "config")
	b, _ := os.ReadFile(cfg)
	os.WriteFile(cfg, []byte(strings.Replace(string(b), "NJOBS_MAX=0", "NJOBS_MAX=3", 1)), 0o644)
	r := farmIn(t, dir, nil, "submit", "4", "--backend", "local")
	if r.Code != 1 || !strings.Contains(r.Err, "NJOBS_MAX=3") || !strings.Contains(r.Err, "may submit at most 3 more") {
		t.Errorf("submit 4 with NJOBS_MAX=3: exit %d, %q", r.Code, r.Err)
	}
	r = farmIn(t, dir, nil, "submit", "3", "-auto", "--backend", "local")
	if r.Code != 1 || !strings.Contains(r.Err, "may submit at most 2 more") {
		t.Errorf("submit 3 -auto with NJOBS_MAX=3: exit %d, %q", r.Code, r.Err)
	}
	if _, err := os.Stat(filepath.Join(dir, "MISC", "jobs")); !os.IsNotExist(err) {
		t.Errorf("jobs were recorded by a refused submit")
	}
	mustFarm(t, dir, "submit", "2", "-auto", "--backend", "local")
	mustFarm(t, dir, "wait", "--timeout", "1m")
}
