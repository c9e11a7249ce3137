// Package harness drives the built farm binary the way a user does, for the
// end-to-end tests in integration/ and integration/rigtest/: it builds the
// binary once per test binary, makes farms, runs farm commands and reads
// their JSON output and status records.
package harness

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	farmBin   string
	buildErr  error
)

// Bin builds the farm binary once per test binary and returns its path.
func Bin(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "farm-bin")
		if err != nil {
			buildErr = err
			return
		}
		farmBin = filepath.Join(dir, "farm")
		cmd := exec.Command("go", "build", "-o", farmBin, "./cmd/farm")
		cmd.Dir = Root()
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return farmBin
}

// Cleanup removes the binary Bin built; call it from TestMain after m.Run.
func Cleanup() {
	if farmBin != "" {
		os.RemoveAll(filepath.Dir(farmBin))
	}
}

// Root is the repository's root directory.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(filepath.Dir(file)))
}

// ExitNotAllOK is farm wait's exit code when the farm's jobs ended and
// some case did not succeed (1 is an error: farm could not wait).
const ExitNotAllOK = 3

// Result is one run of the farm binary.
type Result struct {
	Out, Err string
	Code     int
}

// Run runs farm with args in dir, with extra environment.
func Run(t testing.TB, dir string, env []string, args ...string) Result {
	t.Helper()
	cmd := exec.Command(Bin(t), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	return Exec(t, cmd, args)
}

// Exec runs cmd, a farm command with args (for messages) set up by the
// caller, and returns what it said and its exit code; cmd.ProcessState is
// there afterwards.
func Exec(t testing.TB, cmd *exec.Cmd, args []string) Result {
	t.Helper()
	r, err := Output(cmd)
	if err != nil {
		t.Fatalf("farm %v: %v", args, err)
	}
	return r
}

// Output runs cmd, set up by the caller, and returns what it said and its
// exit code, as Exec does; but where Exec fails the test it returns the
// error of a command that could not be run or waited for (Code 0). It
// does not touch the test: a goroutine may call it.
func Output(cmd *exec.Cmd) (Result, error) {
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code, err = ee.ExitCode(), nil
	}
	return Result{stdout.String(), stderr.String(), code}, err
}

// Must runs farm and fails the test on a non-zero exit.
func Must(t testing.TB, dir string, args ...string) string {
	t.Helper()
	r := Run(t, dir, nil, args...)
	if r.Code != 0 {
		t.Fatalf("farm %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.Code, r.Out, r.Err)
	}
	return r.Out
}

// NewFarm makes a farm in a new temporary directory, with the given table
// and job time limit.
func NewFarm(t testing.TB, table []string, limit string) string {
	t.Helper()
	return NewFarmAt(t, filepath.Join(t.TempDir(), "farm"), table, limit)
}

// NewFarmAt makes the farm dir (whose parent must exist) with the given
// table and job time limit.
func NewFarmAt(t testing.TB, dir string, table []string, limit string) string {
	t.Helper()
	Must(t, filepath.Dir(dir), "init", dir)
	if err := os.WriteFile(filepath.Join(dir, "table.dat"), []byte(strings.Join(table, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	SetLimit(t, dir, limit)
	return dir
}

// SetLimit sets the run-time (#SBATCH -t) of the farm's job_script.sh.
func SetLimit(t testing.TB, dir, limit string) {
	t.Helper()
	p := filepath.Join(dir, "job_script.sh")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "#SBATCH -t ") {
			l = "#SBATCH -t " + limit
		}
		out = append(out, l)
	}
	if err := os.WriteFile(p, []byte(strings.Join(out, "\n")), 0o755); err != nil {
		t.Fatal(err)
	}
}

// Repeat returns n copies of line.
func Repeat(line string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = line
	}
	return out
}

// StatusRow mirrors farm Status --json.
type StatusRow struct {
	ID      int64   `json:"id"`
	State   string  `json:"state"`
	Status  int     `json:"status"`  // null (no STATUS: running, unfit, its meta-job died) reads as 0
	Seconds float64 `json:"seconds"` // null (not known) reads as 0
	// MaxRSS and CPU: what it used (max_rss_bytes, cpu_seconds), nil if
	// not known.
	MaxRSS *int64   `json:"max_rss_bytes"`
	CPU    *float64 `json:"cpu_seconds"`
	Job    string   `json:"job"`
	Host   string   `json:"host"`
	Run    int      `json:"run"`
	Reason string   `json:"reason"` // an unfit case's
	// Starts and StartsRun are set only for a case started more than once
	// in one run, which must never be.
	Starts    int `json:"starts"`
	StartsRun int `json:"starts_run"`
	// Attempts, Crashes and Crashed: its starts in every run, those cut
	// off by the death of their meta-job, and whether the crash limit
	// (MAX_CRASHES) keeps it from running again.
	Attempts int  `json:"attempts"`
	Crashes  int  `json:"crashes"`
	Crashed  bool `json:"crashed"`
}

// StatusJSON runs farm Status --json and returns its rows by case ID; a
// case listed twice fails the test.
func StatusJSON(t testing.TB, dir string) map[int64]StatusRow {
	t.Helper()
	var rows []StatusRow
	if err := json.Unmarshal([]byte(Must(t, dir, "Status", "--json")), &rows); err != nil {
		t.Fatal(err)
	}
	m := map[int64]StatusRow{}
	for _, r := range rows {
		if _, dup := m[r.ID]; dup {
			t.Errorf("case %d listed twice", r.ID)
		}
		m[r.ID] = r
	}
	return m
}

// Records counts, per case ID, the S and E/I records of every status file.
type Records struct {
	Starts, Ends map[int64]int // S records; E and I records
	Interrupts   map[int64]int // I records
	ExitStatus   map[int64]int // the status of the last E record read
	EndStatus    map[int64]int // the status (E) or signal (I) of the last one read
	First, Last  float64       // earliest start and latest end, Unix seconds
}

// ReadRecords reads every STATUSES/status.* file of the farm in dir.
func ReadRecords(t testing.TB, dir string) Records {
	t.Helper()
	r := Records{Starts: map[int64]int{}, Ends: map[int64]int{}, Interrupts: map[int64]int{}, ExitStatus: map[int64]int{}, EndStatus: map[int64]int{}}
	files, _ := filepath.Glob(filepath.Join(dir, "STATUSES", "status.*"))
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			var kind string
			var id int64
			var a int
			var start, secs float64
			line := sc.Text()
			if line == "" || line[0] == '#' || line[0] == 'Q' {
				continue
			}
			switch line[0] {
			case 'S':
				fmt.Sscan(line, &kind, &id, &start)
				r.Starts[id]++
				if r.First == 0 || start < r.First {
					r.First = start
				}
			case 'E', 'I':
				fmt.Sscan(line, &kind, &id, &a, &start, &secs)
				r.Ends[id]++
				if kind == "I" {
					r.Interrupts[id]++
				} else {
					r.ExitStatus[id] = a
				}
				r.EndStatus[id] = a
				if start+secs > r.Last {
					r.Last = start + secs
				}
			}
		}
		fh.Close()
	}
	return r
}

// ReadRunRecords counts the S and E/I records of every status file of the
// farm in dir per run, the run being the run= of each file's header: within
// one run, every case must have at most one start record.
func ReadRunRecords(t testing.TB, dir string) map[int]Records {
	t.Helper()
	out := map[int]Records{}
	files, _ := filepath.Glob(filepath.Join(dir, "STATUSES", "status.*"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		run := -1
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "# farm-status ") {
				for _, kv := range strings.Fields(line) {
					if v, ok := strings.CutPrefix(kv, "run="); ok {
						fmt.Sscan(v, &run)
					}
				}
				continue
			}
			if line == "" || (line[0] != 'S' && line[0] != 'E' && line[0] != 'I') {
				continue
			}
			if run < 0 {
				t.Fatalf("%s: a record before the header", f)
			}
			r, ok := out[run]
			if !ok {
				r = Records{Starts: map[int64]int{}, Ends: map[int64]int{}, Interrupts: map[int64]int{}, EndStatus: map[int64]int{}}
				out[run] = r
			}
			var kind string
			var id int64
			var a int
			var start, secs float64
			if line[0] == 'S' {
				fmt.Sscan(line, &kind, &id, &start)
				r.Starts[id]++
				continue
			}
			fmt.Sscan(line, &kind, &id, &a, &start, &secs)
			r.Ends[id]++
			r.EndStatus[id] = a
			if line[0] == 'I' {
				r.Interrupts[id]++
			}
		}
	}
	return out
}

// WaitFor polls cond until it holds or d passes.
func WaitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// JobIDs reads the job IDs the farm in dir recorded in MISC/jobs/.
func JobIDs(dir string) []string {
	files, _ := filepath.Glob(filepath.Join(dir, "MISC", "jobs", "[0-9]*"))
	var ids []string
	for _, p := range files {
		b, _ := os.ReadFile(p)
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) == 4 {
				ids = append(ids, f[3])
			}
		}
	}
	return ids
}

// ListRow mirrors farm list --json.
type ListRow struct {
	ID      string `json:"id"`
	Run     int    `json:"run"`
	Kind    string `json:"kind"`
	Backend string `json:"backend"`
	State   string `json:"state"`
	Cases   int64  `json:"cases"` // ended (of all its tasks, for an array)
	// OtherHost is the host identity of a local job run by another host.
	OtherHost string `json:"other_host"`
}

// ListJSON runs farm list --json.
func ListJSON(t testing.TB, dir string) []ListRow {
	t.Helper()
	var rows []ListRow
	out := Must(t, dir, "list", "--json")
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("farm list --json: %v\n%s", err, out)
	}
	return rows
}

// Diagnose logs what Slurm says of the farm's jobs, the tails of their
// output files, the farm's log and its status files: call it when a test
// of the farm in dir failed.
func Diagnose(t testing.TB, dir string) {
	t.Helper()
	ids := JobIDs(dir)
	t.Logf("diagnostics: jobs of the farm: %v", ids)
	if len(ids) > 0 {
		out, _ := exec.Command("squeue", "-t", "all", "-j", strings.Join(ids, ","), "-o", "%i %j %T %r %N %S %e %L").CombinedOutput()
		t.Logf("diagnostics: squeue:\n%s", out)
	}
	for _, pat := range []string{"OUTPUT/*.out", "farm.log", "STATUSES/status.*"} {
		files, _ := filepath.Glob(filepath.Join(dir, pat))
		for _, f := range files {
			b, _ := os.ReadFile(f)
			if len(b) > 4000 {
				b = append([]byte("...\n"), b[len(b)-4000:]...)
			}
			t.Logf("diagnostics: %s:\n%s", strings.TrimPrefix(f, dir+"/"), b)
		}
	}
}

// RigEnv reads the env file of the cluster rig (integration/cluster-up) in
// $FARM_CLUSTER_DIR (/tmp/farm-cluster by default): its variables by name
// (SLURM_CONF, FARM_CLUSTER_MNT, ...), with FARM_CLUSTER_DIR set. It fails
// when the rig is not up, or FARM_CLUSTER_TESTS=0 (make unit) turns the
// rig's tests off.
func RigEnv() (map[string]string, error) {
	if os.Getenv("FARM_CLUSTER_TESTS") == "0" {
		return nil, fmt.Errorf("FARM_CLUSTER_TESTS=0: the tests on the cluster rig are off")
	}
	dir := os.Getenv("FARM_CLUSTER_DIR")
	if dir == "" {
		dir = "/tmp/farm-cluster"
	}
	b, err := os.ReadFile(filepath.Join(dir, "env"))
	if err != nil {
		return nil, fmt.Errorf("the cluster rig is not up (no %s/env; start it with integration/cluster-up as root)", dir)
	}
	env := map[string]string{"FARM_CLUSTER_DIR": dir}
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimPrefix(strings.TrimSpace(l), "export ")
		if k, v, ok := strings.Cut(l, "="); ok && !strings.HasPrefix(k, "#") {
			env[k] = strings.Trim(v, `"`)
		}
	}
	return env, nil
}
