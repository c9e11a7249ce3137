// Package integration holds end-to-end tests of the built farm binary, on
// the local backend and against a real Slurm.
package integration

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

// bin builds the farm binary once per test run.
func bin(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "farm-bin")
		if err != nil {
			buildErr = err
			return
		}
		farmBin = filepath.Join(dir, "farm")
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Dir(filepath.Dir(file))
		cmd := exec.Command("go", "build", "-o", farmBin, "./cmd/farm")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return farmBin
}

// result is one run of the farm binary.
type result struct {
	out, err string
	code     int
}

// farmIn runs farm with args in dir, with extra environment.
func farmIn(t testing.TB, dir string, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(bin(t), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("farm %v: %v", args, err)
	}
	return result{stdout.String(), stderr.String(), code}
}

// mustFarm runs farm and fails the test on a non-zero exit.
func mustFarm(t testing.TB, dir string, args ...string) string {
	t.Helper()
	r := farmIn(t, dir, nil, args...)
	if r.code != 0 {
		t.Fatalf("farm %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.out, r.err)
	}
	return r.out
}

// newFarm makes a farm with the given table and job time limit.
func newFarm(t testing.TB, table []string, limit string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "farm")
	mustFarm(t, filepath.Dir(dir), "init", dir)
	if err := os.WriteFile(filepath.Join(dir, "table.dat"), []byte(strings.Join(table, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	setLimit(t, dir, limit)
	return dir
}

func setLimit(t testing.TB, dir, limit string) {
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
	os.WriteFile(p, []byte(strings.Join(out, "\n")), 0o755)
}

func repeat(line string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = line
	}
	return out
}

// statusRow mirrors farm Status --json.
type statusRow struct {
	ID      int64   `json:"id"`
	State   string  `json:"state"`
	Status  int     `json:"status"`
	Seconds float64 `json:"seconds"`
	Job     string  `json:"job"`
	Host    string  `json:"host"`
}

func statusJSON(t testing.TB, dir string) map[int64]statusRow {
	t.Helper()
	var rows []statusRow
	if err := json.Unmarshal([]byte(mustFarm(t, dir, "Status", "--json")), &rows); err != nil {
		t.Fatal(err)
	}
	m := map[int64]statusRow{}
	for _, r := range rows {
		if _, dup := m[r.ID]; dup {
			t.Errorf("case %d listed twice", r.ID)
		}
		m[r.ID] = r
	}
	return m
}

// records counts, per case ID, the S and E/I records of every status file.
type records struct {
	starts, ends map[int64]int
	endStatus    map[int64]int
	first, last  float64 // earliest start and latest end, Unix seconds
}

func readRecords(t testing.TB, dir string) records {
	t.Helper()
	r := records{starts: map[int64]int{}, ends: map[int64]int{}, endStatus: map[int64]int{}}
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
				r.starts[id]++
				if r.first == 0 || start < r.first {
					r.first = start
				}
			case 'E', 'I':
				fmt.Sscan(line, &kind, &id, &a, &start, &secs)
				r.ends[id]++
				r.endStatus[id] = a
				if start+secs > r.last {
					r.last = start + secs
				}
			}
		}
		fh.Close()
	}
	return r
}

// waitFor polls cond until it holds or d passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
