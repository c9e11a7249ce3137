package integration

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/farm-hpc/farm/casetable"
	"github.com/farm-hpc/farm/integration/harness"
	"github.com/farm-hpc/farm/tablefmt"
)

// farmRSS runs farm with args in dir, with extra environment, and returns
// its result and its peak memory (max RSS, KiB). Its address space is
// limited to 1 GiB: a farm that took memory for every ID below its largest
// fails at once, rather than take the machine's memory (26 GB here).
//
// farm is started by a small process of its own, this test binary run
// again (rssChild), not by the test process: Linux gives a program the
// peak RSS of the process that exec'ed it (it copies the old address
// space's high-water mark at exec), and Go starts commands from the
// parent's address space, so farm started from here would report this
// test process's peak (44 MB once the report tests had decoded their
// images), not its own.
func farmRSS(t *testing.T, dir string, env []string, args ...string) (result, int64) {
	t.Helper()
	rd, wr, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, append([]string{"sh", "-c", `ulimit -v 1048576 && exec "$0" "$@"`, bin(t)}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), env...), "FARM_RSS_CHILD=1")
	cmd.ExtraFiles = []*os.File{wr}
	r := harness.Exec(t, cmd, args)
	wr.Close()
	var rss int64
	if _, err := fmt.Fscan(rd, &rss); err != nil {
		t.Fatalf("farm %v: no peak RSS from the test binary that ran it: %v", args, err)
	}
	return r, rss
}

// rssChild is the test binary run by farmRSS (FARM_RSS_CHILD=1): it runs
// the command of its arguments with its own standard files, writes the
// command's peak RSS (KiB) on file descriptor 3 and exits with its code.
func rssChild() int {
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	if cmd.ProcessState == nil {
		fmt.Fprintln(os.Stderr, "rssChild:", err)
		return 125
	}
	fmt.Fprintln(os.NewFile(3, "rss"), cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss)
	return cmd.ProcessState.ExitCode()
}

// maxRSSKiB is the most a command may use on a farm of a few cases,
// whatever their IDs (issue 10).
const maxRSSKiB = 20 << 10

// checkRSS runs farm in dir, with the environment env (local job slots of
// its own: see privateSlots), and fails the test if it exits with another
// code than code or uses maxRSSKiB or more.
func checkRSS(t *testing.T, dir string, env []string, code int, args ...string) result {
	t.Helper()
	r, rss := farmRSS(t, dir, env, args...)
	if r.Code != code {
		t.Fatalf("farm %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.Code, code, r.Out, r.Err)
	}
	t.Logf("farm %s: peak RSS %.1f MB", strings.Join(args, " "), float64(rss)/1024)
	if rss >= maxRSSKiB {
		t.Errorf("farm %s used %.1f MB (max RSS), want under %d MB", strings.Join(args, " "), float64(rss)/1024, maxRSSKiB>>10)
	}
	return r
}

// writeRecords writes a farm's claim state (one closed run over table.dat)
// and one status file with an ended case for each ID, as meta-jobs write
// them; status 0 for even IDs, 1 for odd ones.
func writeRecords(t *testing.T, dir string, ids []int64) {
	t.Helper()
	os.MkdirAll(filepath.Join(dir, "STATUSES"), 0o755)
	os.MkdirAll(filepath.Join(dir, "MISC"), 0o755)
	info, err := tablefmt.ValidateAs(filepath.Join(dir, "table.dat"), tablefmt.HasIDs)
	if err != nil {
		t.Fatal(err)
	}
	if err := casetable.NewStore(dir, filepath.Join(dir, "MISC")).Update(context.Background(), func(s *casetable.State) error {
		n := int64(info.Cases)
		*s = casetable.State{Run: 1, Table: "table.dat", Cases: n, MaxID: info.MaxID, Total: n, Claimed: n}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	fh, err := os.Create(filepath.Join(dir, "STATUSES", "status.1000"))
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(fh)
	fmt.Fprintf(w, "# farm-status v1 job=1000 run=1 host=node001\n")
	t0 := time.Now().Add(-time.Hour).Unix()
	for i, id := range ids {
		fmt.Fprintf(w, "S %d %d.123 node001\nE %d %d %d.123 0.517 node001\n", id, t0+int64(i), id, id%2, t0+int64(i))
	}
	fmt.Fprintln(w, "Q 0 No cases left; exiting.")
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	fh.Close()
}

// A one-case farm whose case ID is 2,000,000,000 costs what a farm of case
// 1 costs, in every command that reads the table or the records: memory
// grows with the number of cases, not with the largest ID (issue 10).
func TestHugeCaseIDSmallMemory(t *testing.T) {
	t.Parallel()
	const id = 2_000_000_000
	dir := newFarm(t, []string{fmt.Sprintf("%d false", id)}, "0-00:10")
	appendFile(t, dir, "config", "TABLE_IDS=1\n") // the first field is the ID
	env := privateSlots(t, t.TempDir())

	// Numbering check of table.dat, the run, its failure.
	checkRSS(t, dir, env, 0, "submit", "1", "--backend", "local")
	r := checkRSS(t, dir, env, exitNotAllOK, "wait", "--timeout", "2m")
	if !strings.Contains(r.Out, "1 cases: 0 succeeded, 1 failed") {
		t.Errorf("wait said %q", r.Out)
	}

	r = checkRSS(t, dir, env, 0, "Status", "-f")
	if !strings.Contains(r.Out, fmt.Sprintf("%d  failed", id)) {
		t.Errorf("Status said %q", r.Out)
	}
	checkRSS(t, dir, env, 0, "Status", "--json")
	st := statusJSON(t, dir)
	if len(st) != 1 || st[id].State != "failed" || st[id].Status != 1 {
		t.Errorf("Status --json: %+v, want case %d failed with STATUS 1", st, int64(id))
	}
	r = checkRSS(t, dir, env, 0, "query")
	if !strings.Contains(r.Out, "1/1 (100.0%)") {
		t.Errorf("query said %q", r.Out)
	}
	checkRSS(t, dir, env, 0, "list")

	// The rebuild of the table for the failed case.
	checkRSS(t, dir, env, 0, "resubmit", "1", "--backend", "local")
	if b, err := os.ReadFile(filepath.Join(dir, "table.dat_")); err != nil || string(b) != fmt.Sprintf("%d false\n", id) {
		t.Errorf("table.dat_ = %q, %v", b, err)
	}
	checkRSS(t, dir, env, exitNotAllOK, "wait", "--timeout", "2m")
	st = statusJSON(t, dir)
	if len(st) != 1 || st[id].State != "failed" || st[id].Run != 2 {
		t.Errorf("Status --json after the resubmit: %+v, want case %d failed in run 2", st, int64(id))
	}

	// Without the claim state, the summary has no hint of the table's IDs.
	if err := os.Remove(filepath.Join(dir, "MISC", "chain")); err != nil {
		t.Fatal(err)
	}
	r = checkRSS(t, dir, env, 0, "Status")
	if !strings.Contains(r.Out, fmt.Sprintf("%d  failed", id)) {
		t.Errorf("Status without the claim state said %q", r.Out)
	}
	checkRSS(t, dir, env, 0, "repair")
	checkRSS(t, dir, env, 0, "Status")
}

// The numbering check of a table with cases 1,000,000,000 and
// 2,000,000,000 stays small too (it took 126 MB).
func TestSubmitHugeCaseIDsSmallMemory(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, []string{"1000000000 true", "2000000000 true"}, "0-00:10")
	appendFile(t, dir, "config", "TABLE_IDS=1\n") // the first field is the ID
	env := privateSlots(t, t.TempDir())
	checkRSS(t, dir, env, 0, "submit", "1", "--backend", "local")
	r := checkRSS(t, dir, env, 0, "wait", "--timeout", "2m")
	if !strings.Contains(r.Out, "2 cases: 2 succeeded") {
		t.Errorf("wait said %q", r.Out)
	}
}

// Status, query and resubmit over records of sparse, huge IDs (up to near
// 2^63), written directly: every case is listed once, in ID order, and the
// commands stay small.
func TestSparseCaseIDsRecords(t *testing.T) {
	t.Parallel()
	ids := []int64{1, 2, 8191, 8192, 1 << 31, 2_000_000_000, 1<<40 + 3, 1 << 62, 9_000_000_000_000_000_000}
	var table []string
	for _, id := range ids {
		table = append(table, fmt.Sprintf("%d true", id))
	}
	table = append(table, "5 true") // never ran
	dir := newFarm(t, table, "0-00:10")
	writeRecords(t, dir, ids)
	env := privateSlots(t, t.TempDir())

	r := checkRSS(t, dir, env, 0, "Status")
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(r.Out), "\n")[1:] {
		got = append(got, strings.Fields(l)[0])
	}
	var want []string
	for _, id := range []int64{1, 2, 8191, 8192, 2_000_000_000, 1 << 31, 1<<40 + 3, 1 << 62, 9_000_000_000_000_000_000} {
		want = append(want, fmt.Sprint(id))
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("Status lists %v, want %v\n%s", got, want, r.Out)
	}
	st := statusJSON(t, dir)
	for _, id := range ids {
		want := "succeeded"
		if id%2 == 1 {
			want = "failed"
		}
		if st[id].State != want {
			t.Errorf("case %d: %+v, want %s", id, st[id], want)
		}
	}
	r = checkRSS(t, dir, env, 0, "query", "--json")
	if !strings.Contains(r.Out, `"farm_cases":{"total":10,"succeeded":6,"failed":3,"interrupted":0,"unfit":0,"running":0,"left":1}`) {
		t.Errorf("query said %s", r.Out)
	}
	checkRSS(t, dir, env, 0, "resubmit", "1", "--backend", "local")
	b, err := os.ReadFile(filepath.Join(dir, "table.dat_"))
	if want := "1 true\n8191 true\n1099511627779 true\n5 true\n"; err != nil || string(b) != want {
		t.Errorf("table.dat_ = %q, %v; want %q", b, err, want)
	}
	checkRSS(t, dir, env, 0, "wait", "--timeout", "2m")
}

// TestRSSIsFarmsOwn: farmRSS measures farm, not the test process that
// starts it: with 64 MB touched here, farm help still reports its own
// few MB.
func TestRSSIsFarmsOwn(t *testing.T) {
	ballast := make([]byte, 64<<20)
	for i := range ballast {
		ballast[i] = byte(i)
	}
	r, rss := farmRSS(t, t.TempDir(), nil, "help")
	if r.Code != 0 {
		t.Fatalf("farm help: exit %d: %s", r.Code, r.Err)
	}
	if rss >= maxRSSKiB {
		t.Errorf("farm help: %.1f MB (max RSS) with 64 MB in the test process: farmRSS measures the test, not farm", float64(rss)/1024)
	}
	runtime.KeepAlive(ballast)
}
