package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/farm-hpc/farm/integration/harness"
	"github.com/farm-hpc/farm/internal/testreq"
	"github.com/farm-hpc/farm/internal/testslurm"
	"github.com/farm-hpc/farm/sge"
	"github.com/farm-hpc/farm/slurm"
)

// End-to-end tests of the built farm binary on the real batch systems of
// this machine: Slurm (integration/slurm-up) and Grid Engine
// (integration/sge-up); integration/run-tests starts both. Each test is
// written once, for an engine, and run on both (TestSlurmX, TestSGEX). They
// skip with one loud line when the batch system does not answer, unless
// FARM_REQUIRE_SLURM=1 / FARM_REQUIRE_SGE=1, where they fail. Every farm
// lives in its own t.TempDir(), so the tests run in parallel; the
// time-limit test alone takes 60-100 s, the others overlap it.

// slurmGate asks once per test binary whether Slurm is available.
var slurmGate = testslurm.Gate{Available: slurm.Available}

// needSlurm skips (or, with FARM_REQUIRE_SLURM=1, fails) t without Slurm.
func needSlurm(t *testing.T) {
	t.Helper()
	slurmGate.Need(t)
}

// engine is a batch system the end-to-end tests run on: what differs
// between Slurm and Grid Engine for a test.
type engine struct {
	name string // --backend
	need func(t *testing.T)
	// farm makes a farm whose job scripts carry the engine's run-time
	// limit (a Slurm time: "1", "0-00:10").
	farm func(t *testing.T, table []string, limit string) string
	// queued lists the jobs among ids that the scheduler still shows
	// (pending or running): "" when none.
	queued func(t *testing.T, ids []string) string
	slots  func(t *testing.T) int // how many one-CPU jobs can run at once
	hold   []string               // submit arguments that keep a job pending
	task   func(array string, i int) string
}

var (
	slurmEngine = engine{name: "slurm", need: needSlurm, farm: slurmFarm, queued: queued, slots: slurmCPUs,
		hold: []string{"--begin=now+1hour"}, task: func(a string, i int) string { return fmt.Sprintf("%s_%d", a, i) }}
	sgeEngine = engine{name: "sge", need: needSGE, farm: sgeFarm, queued: sgeQueued, slots: sgeSlots,
		hold: []string{"-h"}, task: func(a string, i int) string { return fmt.Sprintf("%s.%d", a, i) }}
)

// sgeGate asks once per test binary whether Grid Engine is available.
var sgeGate = testslurm.SGE(sge.Available)

// needSGE skips (or, with FARM_REQUIRE_SGE=1, fails) t without Grid Engine.
func needSGE(t *testing.T) {
	t.Helper()
	sgeGate.Need(t)
}

// sgeFarm makes a farm for a Grid Engine test with `farm init --engine
// sge`: its job scripts carry the run-time as "#$ -l h_rt=" (limit is a
// Slurm time, as for slurmFarm; resubmit_script.sh gets one minute). When
// the test fails it logs what Grid Engine says of the farm's jobs; in any
// case it deletes the farm's jobs that are left.
func sgeFarm(t *testing.T, table []string, limit string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "farm")
	harness.Must(t, filepath.Dir(dir), "init", "--engine", "sge", dir)
	if err := os.WriteFile(filepath.Join(dir, "table.dat"), []byte(strings.Join(table, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	setSGELimit(t, dir, "job_script.sh", limit)
	setSGELimit(t, dir, "resubmit_script.sh", "1")
	t.Cleanup(func() {
		ids := harness.JobIDs(dir)
		if t.Failed() {
			harness.Diagnose(t, dir)
			out, _ := exec.Command("qstat", "-u", "*").CombinedOutput()
			t.Logf("diagnostics: qstat:\n%s", out)
		}
		if len(ids) > 0 {
			exec.Command("qdel", ids...).Run()
		}
	})
	return dir
}

// setSGELimit sets the "#$ -l h_rt=" line of the farm's script name to the
// Slurm time limit, in seconds.
func setSGELimit(t *testing.T, dir, name, limit string) {
	t.Helper()
	d, err := slurm.ParseDuration(limit)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^#\$ -l h_rt=.*$`)
	if !re.Match(b) {
		t.Fatalf("%s has no '#$ -l h_rt=' line:\n%s", name, b)
	}
	b = re.ReplaceAll(b, []byte(fmt.Sprintf("#$ -l h_rt=%d", int(d.Seconds()))))
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// sgeQueued returns the jobs among ids that qstat lists, one "ID STATE"
// line each.
func sgeQueued(t *testing.T, ids []string) string {
	t.Helper()
	out, err := exec.Command("qstat", "-u", "*").CombinedOutput()
	if err != nil {
		t.Fatalf("qstat: %v\n%s", err, out)
	}
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) > 4 && slices.Contains(ids, f[0]) {
			lines = append(lines, f[0]+" "+f[4])
		}
	}
	return strings.Join(lines, "\n")
}

// sgeSlots is the number of slots of Grid Engine's queue all.q.
func sgeSlots(t *testing.T) int {
	t.Helper()
	out, err := exec.Command("qconf", "-sq", "all.q").CombinedOutput()
	if err != nil {
		t.Fatalf("qconf -sq all.q: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`(?m)^slots\s+(\d+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no slots in qconf -sq all.q:\n%s", out)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// slurmFarm makes a farm for a Slurm test. When the test fails it logs what
// Slurm says of the farm's jobs, their output files and the farm's log; in
// any case it cancels the farm's jobs that are left.
func slurmFarm(t *testing.T, table []string, limit string) string {
	t.Helper()
	dir := newFarm(t, table, limit)
	t.Cleanup(func() {
		ids := harness.JobIDs(dir)
		if t.Failed() {
			harness.Diagnose(t, dir)
		}
		if len(ids) > 0 {
			exec.Command("scancel", ids...).Run()
		}
	})
	return dir
}

var (
	farmJobIDs = harness.JobIDs
	listJSON   = harness.ListJSON
)

type listRow = harness.ListRow

func states(rows []listRow) map[string]string {
	m := map[string]string{}
	for _, r := range rows {
		m[r.ID] = r.State
	}
	return m
}

// queued returns the IDs of the jobs among ids that plain squeue shows
// (pending, running, completing: not yet gone from the queue).
func queued(t *testing.T, ids []string) string {
	t.Helper()
	out, err := exec.Command("squeue", "-h", "-j", strings.Join(ids, ","), "-o", "%i %T").CombinedOutput()
	if err != nil && !strings.Contains(string(out), "Invalid job id") {
		t.Fatalf("squeue: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// statusFileIDs returns the job IDs that name the farm's status files.
func statusFileIDs(dir string) []string {
	files, _ := filepath.Glob(filepath.Join(dir, "STATUSES", "status.*"))
	var ids []string
	for _, f := range files {
		ids = append(ids, strings.TrimPrefix(filepath.Base(f), "status."))
	}
	sort.Strings(ids)
	return ids
}

// casesPerStatusFile counts the finished cases (E records) in each status file.
func casesPerStatusFile(t *testing.T, dir string) map[string]int {
	t.Helper()
	m := map[string]int{}
	for _, id := range statusFileIDs(dir) {
		b, err := os.ReadFile(filepath.Join(dir, "STATUSES", "status."+id))
		if err != nil {
			t.Fatal(err)
		}
		m[id] = strings.Count("\n"+string(b), "\nE ")
	}
	return m
}

// slurmCPUs is the number of CPUs the Slurm node offers.
func slurmCPUs(t *testing.T) int {
	t.Helper()
	out, err := exec.Command("scontrol", "show", "node").CombinedOutput()
	if err != nil {
		t.Fatalf("scontrol show node: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`CPUTot=(\d+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no CPUTot in scontrol show node:\n%s", out)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// TestSlurmTwoHundredCasesFourJobs: 4 meta-jobs share 200 cases; every case
// runs exactly once, every meta-job takes part, and the status files are
// named by the Slurm job IDs that farm list reports.
func TestSlurmTwoHundredCasesFourJobs(t *testing.T) { testTwoHundredCasesFourJobs(t, slurmEngine) }
func TestSGETwoHundredCasesFourJobs(t *testing.T)   { testTwoHundredCasesFourJobs(t, sgeEngine) }

func testTwoHundredCasesFourJobs(t *testing.T, e engine) {
	e.need(t)
	t.Parallel()
	if n := e.slots(t); n < 4 {
		msg := fmt.Sprintf("the %s node has %d CPUs (slots); 4 meta-jobs must run at once: FARM_SLURM_CPUS=8 / FARM_SGE_SLOTS=8 with integration/slurm-up or sge-up", e.name, n)
		testreq.Skip(t, "FARM_REQUIRE_SLURM", msg)
	}
	const n = 200
	table := repeat("sleep 0.2", n)
	// The first cases wait (at most a minute) until all 4 meta-jobs have
	// started, so that each of them takes part even if Slurm starts them
	// some seconds apart on a busy node.
	for i := 0; i < 4; i++ {
		table[i] = `for i in $(seq 600); do [ $(ls ../STATUSES | wc -l) -ge 4 ] && break; sleep 0.1; done`
	}
	dir := e.farm(t, table, "0-00:10")
	start := time.Now()
	out := mustFarm(t, dir, "submit", "4", "--backend", e.name)
	if !strings.Contains(out, "Submitted 4 meta-jobs") {
		t.Errorf("submit said %q", out)
	}
	out = mustFarm(t, dir, "wait", "--timeout", "5m")
	t.Logf("200 cases on 4 %s jobs in %s", e.name, time.Since(start).Round(time.Millisecond))
	if !strings.Contains(out, fmt.Sprintf("%d cases: %d succeeded", n, n)) {
		t.Errorf("wait said %q", out)
	}
	rec := readRecords(t, dir)
	for id := int64(1); id <= n; id++ {
		if rec.Starts[id] != 1 || rec.Ends[id] != 1 || rec.EndStatus[id] != 0 {
			t.Errorf("case %d: %d starts, %d ends, status %d; want exactly one successful run", id, rec.Starts[id], rec.Ends[id], rec.EndStatus[id])
		}
	}
	var listed []string
	for _, r := range listJSON(t, dir) {
		if r.Kind != "meta" || r.Backend != e.name || r.State != "COMPLETED" {
			t.Errorf("job %+v, want a COMPLETED %s meta-job", r, e.name)
		}
		listed = append(listed, r.ID)
	}
	sort.Strings(listed)
	if files := statusFileIDs(dir); !slices.Equal(files, listed) || len(files) != 4 {
		t.Errorf("status files of jobs %v, farm list reports jobs %v; want the same 4", files, listed)
	}
	per := casesPerStatusFile(t, dir)
	for id, c := range per {
		if c < 1 {
			t.Errorf("meta-job %s ran no case: %v", id, per)
		}
	}
	t.Logf("cases per meta-job: %v", per)
}

// TestSlurmSimpleModeOneCasePerTask: submit -1 makes one job array whose 20
// tasks run one case each, each task writing its own status file.
func TestSlurmSimpleModeOneCasePerTask(t *testing.T) { testSimpleModeOneCasePerTask(t, slurmEngine) }
func TestSGESimpleModeOneCasePerTask(t *testing.T)   { testSimpleModeOneCasePerTask(t, sgeEngine) }

func testSimpleModeOneCasePerTask(t *testing.T, e engine) {
	e.need(t)
	t.Parallel()
	const n = 20
	dir := e.farm(t, repeat("true", n), "0-00:10")
	out := mustFarm(t, dir, "submit", "-1", "--backend", e.name)
	if !strings.Contains(out, "SIMPLE mode") {
		t.Errorf("submit said %q", out)
	}
	mustFarm(t, dir, "wait", "--timeout", "3m")
	rows := listJSON(t, dir)
	if len(rows) != 1 || rows[0].Kind != "simple" || rows[0].State != "COMPLETED" || rows[0].Cases != n {
		t.Fatalf("farm list: %+v; want one COMPLETED job array of %d cases", rows, n)
	}
	array := rows[0].ID
	var want []string
	for i := 1; i <= n; i++ {
		want = append(want, e.task(array, i))
	}
	sort.Strings(want)
	if got := statusFileIDs(dir); !slices.Equal(got, want) {
		t.Errorf("status files of %v, want one per array task %v", got, want)
	}
	for id, c := range casesPerStatusFile(t, dir) {
		if c != 1 {
			t.Errorf("task %s ran %d cases, want 1", id, c)
		}
	}
	rec := readRecords(t, dir)
	st := statusJSON(t, dir)
	for id := int64(1); id <= n; id++ {
		if rec.Starts[id] != 1 || rec.Ends[id] != 1 || st[id].State != "succeeded" || !strings.HasPrefix(st[id].Job, strings.TrimSuffix(e.task(array, 0), "0")) {
			t.Errorf("case %d: %d starts, %d ends, %+v", id, rec.Starts[id], rec.Ends[id], st[id])
		}
	}
}

// TestSlurmKillLeavesNoJob: farm kill cancels the running and the pending
// meta-jobs, and when it returns squeue shows no job of the farm; the cases
// that ran are interrupted.
func TestSlurmKillLeavesNoJob(t *testing.T) { testKillLeavesNoJob(t, slurmEngine) }
func TestSGEKillLeavesNoJob(t *testing.T)   { testKillLeavesNoJob(t, sgeEngine) }

func testKillLeavesNoJob(t *testing.T, e engine) {
	e.need(t)
	t.Parallel()
	dir := e.farm(t, repeat("sleep 300", 4), "0-00:10")
	mustFarm(t, dir, "submit", "2", "--backend", e.name)
	waitFor(t, 90*time.Second, "both meta-jobs to start a case", func() bool { return len(readRecords(t, dir).Starts) == 2 })
	// One more meta-job, held pending for an hour.
	mustFarm(t, dir, append([]string{"submit", "1", "--backend", e.name}, e.hold...)...)
	ids := farmJobIDs(dir)
	if s := states(listJSON(t, dir)); len(ids) != 3 || s[ids[0]] != "RUNNING" || s[ids[1]] != "RUNNING" || s[ids[2]] != "PENDING" {
		t.Fatalf("before kill: %v; want 2 RUNNING and 1 PENDING", s)
	}
	start := time.Now()
	out := mustFarm(t, dir, "kill")
	t.Logf("farm kill took %s: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(out))
	if !strings.Contains(out, "Cancelled 3 job(s)") {
		t.Errorf("kill said %q", out)
	}
	if q := e.queued(t, ids); q != "" {
		t.Errorf("right after farm kill, the scheduler still shows jobs of the farm:\n%s", q)
	}
	for id, s := range states(listJSON(t, dir)) {
		if s != "CANCELLED" {
			t.Errorf("job %s is %s after kill, want CANCELLED", id, s)
		}
	}
	mustFarmCode(t, dir, exitNotAllOK, "wait", "--timeout", "30s")
	st := statusJSON(t, dir)
	if len(st) != 2 {
		t.Errorf("%d cases have a status, want the 2 that ran", len(st))
	}
	for id, r := range st {
		if r.State != "interrupted" {
			t.Errorf("case %d is %+v, want interrupted", id, r)
		}
	}
}

// TestSlurmPruneCancelsPendingOnly: with two meta-jobs running and two held
// pending (--begin passed through to sbatch), farm prune cancels the pending
// ones only; the running ones go on and finish every case.
func TestSlurmPruneCancelsPendingOnly(t *testing.T) { testPruneCancelsPendingOnly(t, slurmEngine) }
func TestSGEPruneCancelsPendingOnly(t *testing.T)   { testPruneCancelsPendingOnly(t, sgeEngine) }

func testPruneCancelsPendingOnly(t *testing.T, e engine) {
	e.need(t)
	t.Parallel()
	release := filepath.Join(t.TempDir(), "release")
	dir := e.farm(t, repeat(fmt.Sprintf("for i in $(seq 1200); do [ -e %s ] && break; sleep 0.1; done", release), 6), "0-00:10")
	mustFarm(t, dir, "submit", "2", "--backend", e.name)
	waitFor(t, 90*time.Second, "both meta-jobs to start a case", func() bool { return len(readRecords(t, dir).Starts) == 2 })
	out := mustFarm(t, dir, append([]string{"submit", "2", "--backend", e.name}, e.hold...)...)
	if !strings.Contains(out, "Run 1 is active: adding jobs to it") {
		t.Errorf("second submit said %q", out)
	}
	ids := farmJobIDs(dir)
	if len(ids) != 4 {
		t.Fatalf("jobs %v, want 4", ids)
	}
	running, pending := ids[:2], ids[2:]
	out = mustFarm(t, dir, "prune")
	if want := "Cancelled 2 job(s): " + strings.Join(pending, " "); !strings.Contains(out, want) {
		t.Errorf("prune said %q, want %q", out, want)
	}
	s := states(listJSON(t, dir))
	for _, id := range running {
		if s[id] != "RUNNING" {
			t.Errorf("after prune, running job %s is %s", id, s[id])
		}
	}
	for _, id := range pending {
		if s[id] != "CANCELLED" {
			t.Errorf("after prune, pending job %s is %s", id, s[id])
		}
	}
	if q := e.queued(t, ids); len(strings.Split(q, "\n")) != 2 {
		t.Errorf("after prune the scheduler shows\n%s\nwant the 2 running jobs only", q)
	}
	os.WriteFile(release, nil, 0o644)
	out = mustFarm(t, dir, "wait", "--timeout", "2m")
	if !strings.Contains(out, "6 cases: 6 succeeded") {
		t.Errorf("wait said %q", out)
	}
	rec := readRecords(t, dir)
	st := statusJSON(t, dir)
	for id := int64(1); id <= 6; id++ {
		if rec.Starts[id] != 1 || rec.Ends[id] != 1 || !slices.Contains(running, st[id].Job) {
			t.Errorf("case %d: %d starts, %d ends, %+v; want one run by a job that was running", id, rec.Starts[id], rec.Ends[id], st[id])
		}
	}
	s = states(listJSON(t, dir))
	for _, id := range running {
		if s[id] != "COMPLETED" {
			t.Errorf("job %s ended %s, want COMPLETED", id, s[id])
		}
	}
}

// TestSGEPruneArrayPartlyRunning: farm prune on a SIMPLE-mode array of
// which some tasks run (-tc 2: at most two at once) cancels its pending
// tasks only; the running ones finish their cases, the others never run.
// (Slurm's throttle, --array=1-8%2, cannot be given through farm, whose
// own --array comes last; slurm's unit tests cover its PendingOnly on
// arrays.)
func TestSGEPruneArrayPartlyRunning(t *testing.T) {
	e := sgeEngine
	e.need(t)
	t.Parallel()
	release := filepath.Join(t.TempDir(), "release")
	dir := e.farm(t, repeat(fmt.Sprintf("for i in $(seq 1200); do [ -e %s ] && break; sleep 0.1; done", release), 8), "0-00:10")
	mustFarm(t, dir, "submit", "-1", "--backend", e.name, "-tc", "2")
	waitFor(t, 90*time.Second, "two array tasks to start a case", func() bool { return len(readRecords(t, dir).Starts) == 2 })
	ids := farmJobIDs(dir)
	out := mustFarm(t, dir, "prune")
	if want := "Cancelled 1 job(s): " + ids[0] + " (its pending array tasks; the running ones go on)"; !strings.Contains(out, want) {
		t.Errorf("prune said %q, want %q", out, want)
	}
	// Running tasks show as r, or t for a moment (Grid Engine's state
	// while it starts or signals a task): two tasks, none waiting (qw).
	if q := e.queued(t, ids); strings.Contains(q, "qw") || len(strings.Split(q, "\n")) != 2 {
		t.Errorf("after prune Grid Engine shows\n%s\nwant the 2 running tasks only", q)
	}
	os.WriteFile(release, nil, 0o644)
	r := farmIn(t, dir, nil, "wait", "--timeout", "2m")
	if r.Code != exitNotAllOK || !strings.Contains(r.Out, "8 cases: 2 succeeded, 0 failed, 0 interrupted, 6 never ran") {
		t.Errorf("wait: exit %d, %q; want the 2 running cases done, 6 never run", r.Code, r.Out)
	}
	if rows := listJSON(t, dir); len(rows) != 1 || rows[0].Cases != 2 {
		t.Errorf("farm list: %+v; want the array with its 2 cases", rows)
	}
}

// TestSlurmTimeLimitInterruptsCase: Slurm stops a meta-job at its time limit
// (job_script.sh "#SBATCH -t 1") while it runs a long case; that case is
// interrupted, every other case ran once and succeeded, and farm list shows
// the job TIMEOUT. Slurm checks limits only every ~30 s: this takes 60-100 s.
func TestSlurmTimeLimitInterruptsCase(t *testing.T) { testTimeLimitInterruptsCase(t, slurmEngine) }
func TestSGETimeLimitInterruptsCase(t *testing.T)   { testTimeLimitInterruptsCase(t, sgeEngine) }

func testTimeLimitInterruptsCase(t *testing.T, e engine) {
	e.need(t)
	t.Parallel()
	const n = 10
	table := repeat("sleep 0.1", n)
	table[2] = "sleep 300" // case 3
	dir := e.farm(t, table, "1")
	start := time.Now()
	mustFarm(t, dir, "submit", "2", "--backend", e.name)
	mustFarmCode(t, dir, exitNotAllOK, "wait", "--timeout", "4m")
	t.Logf("the time limit stopped the farm after %s", time.Since(start).Round(time.Second))
	st := statusJSON(t, dir)
	rec := readRecords(t, dir)
	s := states(listJSON(t, dir))
	if r := st[3]; r.State != "interrupted" || s[r.Job] != "TIMEOUT" {
		t.Errorf("case 3 = %+v (its job %s); want interrupted in a TIMEOUT job", r, s[r.Job])
	}
	for id := int64(1); id <= n; id++ {
		if rec.Starts[id] != 1 {
			t.Errorf("case %d started %d times, want once", id, rec.Starts[id])
		}
		if id != 3 && (rec.Ends[id] != 1 || st[id].State != "succeeded") {
			t.Errorf("case %d: %d ends, %+v; want one successful run", id, rec.Ends[id], st[id])
		}
	}
	var timeouts int
	for _, state := range s {
		if state == "TIMEOUT" {
			timeouts++
		}
	}
	if timeouts != 1 {
		t.Errorf("farm list: %v; want one TIMEOUT job", s)
	}
	// The report draws what the engine says of the jobs: each one's start
	// and end (from its accounting), and the case cut by the time limit.
	checkReportPage(t, dir, map[string]int{`class="case `: n, `class="case interrupted"`: 1, `class="job-start"`: 2, `class="job-end"`: 2})
}

// TestSlurmEnvironmentReachesCases: a variable set on the farm submit
// process (VAR=1 farm submit 2) reaches every case through sbatch; and what
// each case writes to its stdout and stderr is farm output's (OUTPUT=job).
func TestSlurmEnvironmentReachesCases(t *testing.T) { testEnvironmentReachesCases(t, slurmEngine) }
func TestSGEEnvironmentReachesCases(t *testing.T)   { testEnvironmentReachesCases(t, sgeEngine) }

// TestSGEParallelEnvironment: a meta-job of 3 slots of the parallel
// environment "farm" (sge-up makes it) reads its host and slots from
// $PE_HOSTFILE (issue 25). This Grid Engine has one host, so what is
// checked is that path on a real Grid Engine: every case learns the one
// node (FARM_NNODES=1, FARM_NODELIST the host's name, its CPUs), a case of
// 3 CPUs fits the job's 3 slots, and a case of 2 nodes is unfit with the
// reason. (Cases of several hosts are tested on the rig's Slurm,
// TestRig/MultiNodeCases, and PE_HOSTFILE's reading of several hosts in
// sge's TestPENodes.)
func TestSGEParallelEnvironment(t *testing.T) {
	needSGE(t)
	t.Parallel()
	dir := sgeFarm(t, []string{
		`echo "case=$ID nodes=$FARM_NNODES list=$FARM_NODELIST cpus=$FARM_CPUS_PER_NODE" #FARM cpus=3`,
		`echo "case=$ID nodes=$FARM_NNODES list=$FARM_NODELIST cpus=$FARM_CPUS_PER_NODE" #FARM nodes=1`,
		`true #FARM nodes=2`,
	}, "0-00:10")
	mustFarm(t, dir, "submit", "1", "--backend", "sge", "-pe", "farm", "3")
	r := farmIn(t, dir, nil, "wait", "--timeout", "2m")
	if r.Code != exitNotAllOK || !strings.Contains(r.Out, "3 cases: 2 succeeded") || !strings.Contains(r.Out, "1 unfit") {
		t.Fatalf("wait: exit %d, %q; want 3, with case 3 unfit", r.Code, r.Out)
	}
	if out := mustFarm(t, dir, "Status"); !strings.Contains(out, "needs 2 nodes, the job has 1") {
		t.Errorf("Status does not say why case 3 did not run:\n%s", out)
	}
	host, _ := os.Hostname()
	host, _, _ = strings.Cut(host, ".")
	outs, _ := filepath.Glob(filepath.Join(dir, "OUTPUT", "*"))
	var all string
	for _, o := range outs {
		b, _ := os.ReadFile(o)
		all += string(b)
	}
	for _, want := range []string{
		fmt.Sprintf("case=1 nodes=1 list=%s cpus=3\n", host),
		fmt.Sprintf("case=2 nodes=1 list=%s cpus=3\n", host),
	} {
		if !strings.Contains(all, want) {
			t.Errorf("the job's output has no %q:\n%s", want, all)
		}
	}
}

func testEnvironmentReachesCases(t *testing.T, e engine) {
	e.need(t)
	t.Parallel()
	dir := e.farm(t, repeat(`echo "$VAR $ID $METAJOB_ID" > out.txt; echo "out $ID"; echo "err $ID" >&2`, 6), "0-00:10")
	if r := farmIn(t, dir, []string{"VAR=1"}, "submit", "2", "--backend", e.name); r.Code != 0 {
		t.Fatalf("submit: exit %d: %s", r.Code, r.Err)
	}
	mustFarm(t, dir, "wait", "--timeout", "2m")
	ids := farmJobIDs(dir)
	for id := 1; id <= 6; id++ {
		b, err := os.ReadFile(filepath.Join(dir, "RUN"+strconv.Itoa(id), "out.txt"))
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(string(b))
		if len(f) != 3 || f[0] != "1" || f[1] != strconv.Itoa(id) || !slices.Contains(ids, f[2]) {
			t.Errorf("case %d saw %q, want VAR=1, its ID and its meta-job's ID (one of %v)", id, b, ids)
		}
		// What it wrote, kept apart (OUTPUT=job, farm init's default).
		if out := mustFarm(t, dir, "output", strconv.Itoa(id)); out != fmt.Sprintf("out %d\n", id) {
			t.Errorf("farm output %d: %q", id, out)
		}
		if out := mustFarm(t, dir, "output", "--stderr", strconv.Itoa(id)); out != fmt.Sprintf("err %d\n", id) {
			t.Errorf("farm output --stderr %d: %q", id, out)
		}
	}
}
