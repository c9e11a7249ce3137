package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/farm-hpc/farm/integration/harness"
)

func TestMain(m *testing.M) {
	if os.Getenv("FARM_RSS_CHILD") == "1" {
		os.Exit(rssChild()) // farmRSS's starter of farm, not a test run
	}
	// Local jobs share the host's job slots across farms; the tests run
	// several small farms at once.
	os.Setenv("FARM_LOCAL_SLOTS", "8")
	os.Setenv("FARM_LOCAL_KILL_WAIT", "3s")
	// A meta-job stopped or killed inside its claim commit holds the
	// others' claims up for voidAfter (casetable): 2 s in tests, not 20.
	os.Setenv("FARM_CLAIM_VOID_AFTER", "2s")
	// A job whose environment sets OMP_NUM_THREADS or CUDA_VISIBLE_DEVICES
	// keeps them for its cases (README, "Per-case resources"); the tests
	// that check what farm sets must not inherit the shell's (CI's had
	// OMP_NUM_THREADS=1).
	os.Unsetenv("OMP_NUM_THREADS")
	os.Unsetenv("CUDA_VISIBLE_DEVICES")
	code := m.Run()
	harness.Cleanup()
	os.Exit(code)
}

func TestLocalTenThousandCasesRunExactlyOnce(t *testing.T) {
	t.Parallel()
	const n = 10000
	dir := newFarm(t, repeat("true", n), "0-00:10")
	mustFarm(t, dir, "submit", "2", "--backend", "local")
	out := mustFarm(t, dir, "wait", "--timeout", "5m")
	if !strings.Contains(out, fmt.Sprintf("%d cases: %d succeeded", n, n)) {
		t.Errorf("wait said %q", out)
	}
	rec := readRecords(t, dir)
	for id := int64(1); id <= n; id++ {
		if rec.Starts[id] != 1 || rec.Ends[id] != 1 || rec.EndStatus[id] != 0 {
			t.Fatalf("case %d: %d starts, %d ends, status %d; want exactly one successful run", id, rec.Starts[id], rec.Ends[id], rec.EndStatus[id])
		}
	}
	if len(rec.Starts) != n {
		t.Errorf("%d distinct cases started, want %d", len(rec.Starts), n)
	}
	st := statusJSON(t, dir)
	if len(st) != n {
		t.Errorf("Status lists %d cases, want %d", len(st), n)
	}
	jobs := map[string]int{}
	for _, r := range st {
		if r.State != "succeeded" || r.Status != 0 {
			t.Fatalf("case %d: %+v", r.ID, r)
		}
		jobs[r.Job]++
	}
	if len(jobs) != 2 {
		t.Errorf("cases ran in jobs %v, want both meta-jobs", jobs)
	}
}

func TestLocalFailedCaseStatusAndWaitExit(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, []string{"true", "exit 3", "echo hello"}, "0-00:10")
	mustFarm(t, dir, "submit", "2", "--backend", "local")
	r := farmIn(t, dir, nil, "wait", "--timeout", "2m")
	if r.Code != exitNotAllOK {
		t.Errorf("wait exit %d, want 3 when a case failed (out %q)", r.Code, r.Out)
	}
	st := statusJSON(t, dir)
	if got := st[2]; got.State != "failed" || got.Status != 3 {
		t.Errorf("case 2 = %+v, want failed with STATUS 3", got)
	}
	for _, id := range []int64{1, 3} {
		if st[id].State != "succeeded" {
			t.Errorf("case %d = %+v", id, st[id])
		}
	}
	// -f lists the failure last.
	out := mustFarm(t, dir, "Status", "-f")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, "failed") || !strings.HasPrefix(strings.TrimSpace(last), "2 ") {
		t.Errorf("Status -f last line %q, want case 2 failed\n%s", last, out)
	}
}

// jobPGID returns the process group of a running local job's script.
func TestLocalKill9OfMetajobLeavesOneInterruptedCase(t *testing.T) {
	t.Parallel()
	table := repeat("sleep 0.05", 80)
	table[9] = "touch ../long-case-started; sleep 60" // case 10
	dir := newFarm(t, table, "0-00:10")
	setConfig(t, dir, "RESCUE_CHECK", "0") // what a dead job leaves, for resubmit
	mustFarm(t, dir, "submit", "2", "--backend", "local")
	waitFor(t, 30*time.Second, "case 10 to start", func() bool {
		_, err := os.Stat(filepath.Join(dir, "long-case-started"))
		return err == nil
	})
	// Which meta-job runs case 10?
	var victim string
	files, _ := filepath.Glob(filepath.Join(dir, "STATUSES", "status.*"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		if strings.Contains(string(b), "\nS 10 ") {
			victim = strings.TrimPrefix(filepath.Base(f), "status.")
		}
	}
	if victim == "" {
		t.Fatal("no status file shows case 10 started")
	}
	pgid := jobPGID(t, dir, victim)
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 -%d: %v", pgid, err)
	}
	mustFarmCode(t, dir, exitNotAllOK, "wait", "--timeout", "2m")
	rec := readRecords(t, dir)
	st := statusJSON(t, dir)
	if got := st[10]; got.State != "interrupted" || got.Job != victim {
		t.Errorf("case 10 = %+v, want interrupted in job %s", got, victim)
	}
	for id := int64(1); id <= 80; id++ {
		if id == 10 {
			if rec.Starts[id] != 1 || rec.Ends[id] != 0 {
				t.Errorf("case 10: %d starts %d ends", rec.Starts[id], rec.Ends[id])
			}
			continue
		}
		if rec.Starts[id] != 1 || rec.Ends[id] != 1 || st[id].State != "succeeded" {
			t.Errorf("case %d: %d starts, %d ends, %+v; want exactly one successful run", id, rec.Starts[id], rec.Ends[id], st[id])
		}
	}
	list := mustFarm(t, dir, "list")
	if !strings.Contains(list, "FAILED") || !strings.Contains(list, "COMPLETED") {
		t.Errorf("list should show the killed job FAILED and the other COMPLETED:\n%s", list)
	}
}

func mustFarmCode(t *testing.T, dir string, code int, args ...string) result {
	t.Helper()
	r := farmIn(t, dir, nil, args...)
	if r.Code != code {
		t.Fatalf("farm %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.Code, code, r.Out, r.Err)
	}
	return r
}

func TestLocalTimeLimitInterruptsCase(t *testing.T) {
	t.Parallel()
	// "0:03" is 0 minutes 3 seconds in Slurm's format.
	dir := newFarm(t, []string{"true", "sleep 60", "true"}, "0:03")
	mustFarmShort(t, dir, "submit", "1", "--backend", "local")
	start := time.Now()
	mustFarmCode(t, dir, exitNotAllOK, "wait", "--timeout", "1m")
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("the 3 s limit took %s to act", d)
	}
	st := statusJSON(t, dir)
	if st[1].State != "succeeded" || st[2].State != "interrupted" {
		t.Errorf("statuses %+v", st)
	}
	if _, ok := st[3]; ok {
		t.Errorf("case 3 ran after the time limit: %+v", st[3])
	}
	if list := mustFarm(t, dir, "list"); !strings.Contains(list, "TIMEOUT") {
		t.Errorf("list does not show TIMEOUT:\n%s", list)
	}
}

func TestLocalEnvironmentReachesCases(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, repeat(`echo "$VAR $ID $METAJOB_ID" > out.txt`, 6), "0-00:10")
	r := farmIn(t, dir, []string{"VAR=1"}, "submit", "2", "--backend", "local")
	if r.Code != 0 {
		t.Fatal(r.Err)
	}
	mustFarm(t, dir, "wait", "--timeout", "1m")
	for id := 1; id <= 6; id++ {
		b, err := os.ReadFile(filepath.Join(dir, "RUN"+strconv.Itoa(id), "out.txt"))
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(string(b))
		if len(f) != 3 || f[0] != "1" || f[1] != strconv.Itoa(id) || f[2] == "" {
			t.Errorf("case %d saw %q, want VAR=1, its ID and a METAJOB_ID", id, b)
		}
	}
}

// TestLocalNamesIgnoredArgs: the local backend has no submit command:
// batch-system arguments given to it are named in one warning line on
// stderr, and the submission goes on (also in a resubmit); a mistyped
// farm flag among them is refused first, with nothing submitted.
func TestLocalNamesIgnoredArgs(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, []string{"true", "false"}, "0-00:10")
	r := farmIn(t, dir, nil, "submit", "2", "--backend", "local", "--backnd", "local", "--mem=8G")
	if r.Code != 64 || r.Err != "farm: unknown flag --backnd: did you mean --backend? (nothing was submitted) (see 'farm help')\n" {
		t.Errorf("typo: exit %d, stderr %q", r.Code, r.Err)
	}
	if _, err := os.Stat(filepath.Join(dir, "MISC", "jobs")); !os.IsNotExist(err) {
		t.Errorf("the refused submit recorded jobs: %v", err)
	}
	r = farmIn(t, dir, nil, "submit", "1", "--mem=8G", "--backend", "local", "-A", "x")
	if r.Code != 0 || r.Err != "farm: ignored on the local backend: --mem=8G -A x\n" {
		t.Fatalf("submit: exit %d, stderr %q", r.Code, r.Err)
	}
	mustFarmCode(t, dir, exitNotAllOK, "wait", "--timeout", "1m")
	r = farmIn(t, dir, nil, "resubmit", "1", "--gres=gpu:1", "--failed", "--backend", "local")
	if r.Code != 0 || r.Err != "farm: ignored on the local backend: --gres=gpu:1\n" {
		t.Fatalf("resubmit: exit %d, stderr %q", r.Code, r.Err)
	}
	mustFarmCode(t, dir, exitNotAllOK, "wait", "--timeout", "1m")
	if jobs := listJSON(t, dir); len(jobs) != 2 {
		t.Errorf("%d jobs, want 2", len(jobs))
	}
}

func TestLocalSimpleModeOneCasePerJob(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, repeat("true", 5), "0-00:10")
	out := mustFarm(t, dir, "submit", "-1", "--backend", "local")
	if !strings.Contains(out, "Submitted 5 jobs") {
		t.Errorf("submit said %q", out)
	}
	mustFarm(t, dir, "wait", "--timeout", "1m")
	files, _ := filepath.Glob(filepath.Join(dir, "STATUSES", "status.*"))
	if len(files) != 5 {
		t.Fatalf("%d status files, want 5", len(files))
	}
	for _, f := range files {
		b, _ := os.ReadFile(f)
		if n := strings.Count(string(b), "\nE "); n != 1 {
			t.Errorf("%s has %d cases, want 1", f, n)
		}
		if !strings.Contains(string(b), "Exiting after processing one case (-1 option)") {
			t.Errorf("%s lacks the SIMPLE-mode exit message:\n%s", f, b)
		}
	}
}

func TestLocalFastFailureStopsMetajob(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, repeat("exit 1", 20), "0-00:10")
	cfg := filepath.Join(dir, "config")
	b, _ := os.ReadFile(cfg)
	os.WriteFile(cfg, []byte(strings.Replace(string(b), "N_failed_max=5", "N_failed_max=3", 1)), 0o644)
	mustFarm(t, dir, "submit", "1", "--backend", "local")
	mustFarmCode(t, dir, exitNotAllOK, "wait", "--timeout", "1m")
	rec := readRecords(t, dir)
	if len(rec.Ends) != 3 {
		t.Errorf("%d cases ran, want 3 before fast-failure protection", len(rec.Ends))
	}
	out, _ := filepath.Glob(filepath.Join(dir, "OUTPUT", "*.out"))
	b, _ = os.ReadFile(out[0])
	if !strings.Contains(string(b), "Too many failed (very short) cases - exiting") {
		t.Errorf("output lacks the fast-failure message:\n%s", b)
	}

	// Short cases that succeed never trigger it.
	dir = newFarm(t, repeat("true", 20), "0-00:10")
	mustFarm(t, dir, "submit", "1", "--backend", "local")
	mustFarm(t, dir, "wait", "--timeout", "1m")
}

func TestUserErrors(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	dir := newFarm(t, []string{"true"}, "0-00:10")
	noTime := newFarm(t, []string{"true"}, "0-00:10")
	js := filepath.Join(noTime, "job_script.sh")
	b, _ := os.ReadFile(js)
	os.WriteFile(js, []byte(strings.Replace(string(b), "#SBATCH -t 0-00:10\n", "", 1)), 0o755)
	dup := newFarm(t, []string{"1 true", "2 true", "2 false"}, "0-00:10")
	appendFile(t, dup, "config", "TABLE_IDS=1\n") // by META's rule 1, 2, 2 is not numbered
	noLoop := newFarm(t, []string{"true"}, "0-00:10")
	js = filepath.Join(noLoop, "job_script.sh")
	b, _ = os.ReadFile(js)
	os.WriteFile(js, []byte(strings.Replace(string(b), `exec "${FARM_BIN:-farm}" metajob`, "echo hello", 1)), 0o755)
	badCfg := newFarm(t, []string{"true"}, "0-00:10")
	os.WriteFile(filepath.Join(badCfg, "config"), []byte("N_failed_max=5\nNJOBS=3\n"), 0o644)

	for _, tc := range []struct {
		name string
		dir  string
		args []string
		code int
		msg  string
	}{
		{"wrong N", dir, []string{"submit", "0"}, 64, "Wrong first argument: 0 (should be a positive integer or -1) ; exiting"},
		{"wrong N text", dir, []string{"submit", "many"}, 64, "Wrong first argument: many"},
		{"no N", dir, []string{"submit"}, 64, "give the number of meta-jobs"},
		{"bad backend", dir, []string{"submit", "2", "--backend", "pbs"}, 64, `unknown backend "pbs"`},
		{"selection on submit", dir, []string{"submit", "2", "--failed", "--backend", "local"}, 64, "--failed chooses cases for 'farm resubmit'"},
		{"bad --cases", dir, []string{"resubmit", "2", "--cases", "5-3"}, 64, `--cases 5-3: "5-3" ends before it starts`},
		{"time on command line", dir, []string{"submit", "2", "--backend", "local", "-t", "10"}, 1, "cannot be given on the command line"},
		{"no run-time", noTime, []string{"submit", "2", "--backend", "local"}, 1, "Job runtime sbatch argument (-t or --time) is missing in job_script.sh"},
		{"no meta-job loop", noLoop, []string{"submit", "2", "--backend", "local"}, 1, "job_script.sh does not run 'farm metajob': restore its last line"},
		{"duplicate ID", dup, []string{"submit", "2", "--backend", "local"}, 1, "table.dat:3: duplicate case ID 2 (first used on line 2)"},
		{"bad config", badCfg, []string{"submit", "2", "--backend", "local"}, 1, `config:2: unknown setting "NJOBS"`},
		{"outside a farm", tmp, []string{"Status"}, 1, "Non-farm directory"},
		{"init existing", tmp, []string{"init", dir}, 1, "exists and is not empty"},
		{"unknown command", tmp, []string{"frobnicate"}, 64, `unknown command "frobnicate"`},
		{"unknown flag", dir, []string{"wait", "--forever"}, 64, "flag provided but not defined"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := farmIn(t, tc.dir, nil, tc.args...)
			if r.Code != tc.code {
				t.Errorf("exit %d, want %d (stderr %q)", r.Code, tc.code, r.Err)
			}
			lines := strings.Split(strings.TrimSpace(r.Err), "\n")
			if !strings.Contains(r.Err, tc.msg) || strings.Contains(r.Err, "goroutine") {
				t.Errorf("stderr %q, want it to contain %q", r.Err, tc.msg)
			}
			if tc.name != "unknown flag" && len(lines) != 1 {
				t.Errorf("stderr has %d lines, want one:\n%s", len(lines), r.Err)
			}
		})
	}
	// Nothing was submitted or rewritten by the refused commands.
	if got, _ := os.ReadFile(filepath.Join(dup, "table.dat")); string(got) != "1 true\n2 true\n2 false\n" {
		t.Errorf("refused table changed: %q", got)
	}
	for _, d := range []string{noTime, noLoop, dup, badCfg} {
		if _, err := os.Stat(filepath.Join(d, "MISC", "jobs")); !os.IsNotExist(err) {
			t.Errorf("%s: jobs recorded after a refused submit", d)
		}
	}
}

func TestInitMakesTemplates(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "f")
	mustFarm(t, filepath.Dir(dir), "init", dir)
	for _, name := range []string{"job_script.sh", "single_case.sh", "resubmit_script.sh", "config", "table.dat"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Error(err)
		}
	}
	b, _ := os.ReadFile(filepath.Join(dir, "job_script.sh"))
	for _, want := range []string{"#SBATCH -t ", "#SBATCH --mem=", "#SBATCH -A ", "metajob"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("job_script.sh lacks %q", want)
		}
	}
	// The example farm runs as it is.
	mustFarm(t, dir, "submit", "2", "--backend", "local")
	out := mustFarm(t, dir, "wait", "--timeout", "1m")
	if !strings.Contains(out, "3 cases: 3 succeeded") {
		t.Errorf("example farm: %q", out)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "RUN3", "answer.txt")); strings.TrimSpace(string(b)) != "Case three: 42" {
		t.Errorf("RUN3/answer.txt = %q", b)
	}
}

// TestInitForGridEngineRunsOnLocal: farm init --engine sge writes job
// scripts with Grid Engine's #$ lines, which bash reads, and the farm so
// made runs as it is on the local backend, which reads its run-time
// (#$ -l h_rt=), with -auto; the same farm is refused by Slurm, which
// reads #SBATCH lines only, before anything is submitted.
func TestInitForGridEngineRunsOnLocal(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "f")
	out := mustFarm(t, filepath.Dir(dir), "init", "--engine", "sge", dir)
	if !strings.Contains(out, "job_script.sh (#$ -l h_rt, -P)") {
		t.Errorf("init said %q", out)
	}
	for _, name := range []string{"job_script.sh", "resubmit_script.sh", "single_case.sh"} {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		if name != "single_case.sh" && (!strings.Contains(string(b), "\n#$ -l h_rt=00:10:00\n") || strings.Contains(string(b), "#SBATCH")) {
			t.Errorf("%s is not Grid Engine's:\n%s", name, b)
		}
		if out, err := exec.Command("bash", "-n", filepath.Join(dir, name)).CombinedOutput(); err != nil {
			t.Errorf("bash -n %s: %v %s", name, err, out)
		}
	}
	r := farmIn(t, dir, []string{"PATH=" + t.TempDir()}, "submit", "1", "--backend", "slurm")
	if r.Code != 1 || !strings.HasPrefix(r.Err, "farm: Job runtime sbatch argument (-t or --time) is missing in job_script.sh. Exiting (add a line like '#SBATCH -t 0-01:00')") {
		t.Errorf("submit on Slurm: exit %d, %q", r.Code, r.Err)
	}
	if _, err := os.Stat(filepath.Join(dir, "MISC")); !os.IsNotExist(err) {
		t.Errorf("the refused submit wrote MISC/ (%v)", err)
	}
	mustFarm(t, dir, "submit", "1", "-auto", "--backend", "local")
	out = mustFarm(t, dir, "wait", "--timeout", "1m")
	if !strings.Contains(out, "3 cases: 3 succeeded") {
		t.Errorf("wait said %q", out)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "RUN3", "answer.txt")); strings.TrimSpace(string(b)) != "Case three: 42" {
		t.Errorf("RUN3/answer.txt = %q", b)
	}
}

// BenchmarkThroughput runs 2 meta-jobs over 2,000 trivial cases through the
// default single_case.sh on the local backend and reports cases per second,
// from the first case's start to the last case's end.
func BenchmarkThroughput(b *testing.B) {
	benchmarkCases(b, 2000, 2, "")
}

// BenchmarkThroughputTimeLimit is BenchmarkThroughput with a time limit on
// every case (CASE_TIME_LIMIT): each runs in a process group of its own,
// under a timer.
func BenchmarkThroughputTimeLimit(b *testing.B) {
	benchmarkCases(b, 2000, 2, "\nCASE_TIME_LIMIT=1h\n")
}

// benchmarkCases runs jobs local meta-jobs over n trivial cases through
// the default single_case.sh, config added to the farm's config, b.N
// times, and reports cases per second from the first case's start to the
// last case's end.
func benchmarkCases(b *testing.B, n, jobs int, config string) {
	for i := 0; i < b.N; i++ {
		dir := newFarm(b, repeat("true", n), "0-00:10")
		f, err := os.OpenFile(filepath.Join(dir, "config"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			b.Fatal(err)
		}
		f.WriteString(config)
		f.Close()
		mustFarm(b, dir, "submit", fmt.Sprint(jobs), "--backend", "local")
		mustFarm(b, dir, "wait", "--timeout", "5m")
		rec := readRecords(b, dir)
		if len(rec.Ends) != n {
			b.Fatalf("%d cases ended, want %d", len(rec.Ends), n)
		}
		b.ReportMetric(float64(n)/(rec.Last-rec.First), "cases/s")
	}
}

func TestLocalLateMetajobsJoinTheActiveRun(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, repeat("sleep 0.2", 30), "0-00:10")
	mustFarm(t, dir, "submit", "1", "--backend", "local")
	out := mustFarm(t, dir, "submit", "2", "--backend", "local")
	if !strings.Contains(out, "Run 1 is active: adding jobs to it.") {
		t.Errorf("second submit said %q", out)
	}
	mustFarm(t, dir, "wait", "--timeout", "1m")
	rec := readRecords(t, dir)
	for id := int64(1); id <= 30; id++ {
		if rec.Starts[id] != 1 || rec.Ends[id] != 1 {
			t.Errorf("case %d: %d starts %d ends", id, rec.Starts[id], rec.Ends[id])
		}
	}
	jobs := map[string]bool{}
	for _, r := range statusJSON(t, dir) {
		jobs[r.Job] = true
	}
	if len(jobs) != 3 {
		t.Errorf("cases ran in %d meta-jobs, want all 3 to take part", len(jobs))
	}
	// Once the run is over, submit refuses and points to resubmit.
	r := farmIn(t, dir, nil, "submit", "2", "--backend", "local")
	if r.Code != 1 || !strings.Contains(r.Err, "already submitted") || !strings.Contains(r.Err, "farm resubmit") {
		t.Errorf("submit after the run: exit %d %q", r.Code, r.Err)
	}
}
