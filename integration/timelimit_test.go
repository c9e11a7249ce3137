package integration

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/farm-hpc/farm/integration/harness"
)

// addConfig appends KEY=value lines to the farm's config.
func addConfig(t *testing.T, dir string, lines ...string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, "config"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("\n" + strings.Join(lines, "\n") + "\n"); err != nil {
		t.Fatal(err)
	}
}

// endRecords reads the T and E records and the S records of every status
// file of the farm in dir: for each case, its last start (S) and the start,
// seconds and kind of its last end.
type endRecord struct {
	kind          byte
	status        int
	start, secs   float64
	startedAt     float64 // its S record's time
	startedAtSeen bool
}

func readEnds(t *testing.T, dir string) map[int64]*endRecord {
	t.Helper()
	out := map[int64]*endRecord{}
	files, _ := filepath.Glob(filepath.Join(dir, "STATUSES", "status.*"))
	for _, name := range files {
		fh, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) < 3 || len(f[0]) != 1 {
				continue
			}
			id, _ := strconv.ParseInt(f[1], 10, 64)
			r := out[id]
			if r == nil {
				r = &endRecord{}
				out[id] = r
			}
			switch f[0] {
			case "S":
				r.startedAt, _ = strconv.ParseFloat(f[2], 64)
				r.startedAtSeen = true
			case "E", "I", "T":
				r.kind = f[0][0]
				r.status, _ = strconv.Atoi(f[2])
				r.start, _ = strconv.ParseFloat(f[3], 64)
				r.secs, _ = strconv.ParseFloat(f[4], 64)
			}
		}
		fh.Close()
	}
	return out
}

// processGone reports whether process pid has ended (a zombie has).
func processGone(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return true
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && i+2 < len(b) && b[i+2] == 'Z'
}

// awaitGone reports whether process pid is gone within d; if it is not,
// it kills it, so that a failed test leaves nothing running.
func awaitGone(pid int, d time.Duration) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if processGone(pid) {
			return true
		}
	}
	if processGone(pid) {
		return true
	}
	syscall.Kill(pid, syscall.SIGKILL)
	return false
}

// awaitWritten waits (30 s at most) for a case to write a whole line to
// path, and returns it.
func awaitWritten(t *testing.T, path string) string {
	t.Helper()
	waitFor(t, 30*time.Second, "the case to start", func() bool {
		b, err := os.ReadFile(path)
		return err == nil && strings.HasSuffix(string(b), "\n")
	})
	b, _ := os.ReadFile(path)
	return string(b)
}

// lateBy is how late after its limit (or its limit and grace) a test
// accepts a case's end: the signal's delivery, the case's exit and its
// end record, which CI's loaded machine stretched to 1.0 s. The grace of
// the tests that tell a SIGTERM's end from a SIGKILL's is longer than
// it, and the signal recorded (15 only if the case ended before its
// grace was over) tells them apart too.
const lateBy = 1.5

// TestLocalCaseTimeLimit: a case with #FARM time=2s that runs sleep 1000
// with a background grandchild is ended at its limit (SIGTERM to its
// process group), the grandchild with it; one that ignores SIGTERM is
// killed CASE_KILL_GRACE later (SIGKILL), its grandchild too; one whose
// grandchild alone ignores SIGTERM ends at the limit, and the grandchild
// is killed after the grace; all are
// recorded timed out (T records, farm Status, --json, --meta, query,
// wait's count), and the meta-job's next case starts at once. farm
// resubmit --timed-out chooses them, and runs them again.
func TestLocalCaseTimeLimit(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	pid := func(id int) string { return filepath.Join(tmp, "grandchild."+strconv.Itoa(id)) }
	dir := newFarm(t, []string{
		`sh -c 'sleep 1000 & echo $! > ` + pid(1) + `; sleep 1000' #FARM time=2s`,
		`trap "" TERM; sleep 1000 & echo $! > ` + pid(2) + `; while :; do sleep 0.1; done #FARM time=2s`,
		`sh -c 'trap "" TERM; sleep 1000 & echo $! > ` + pid(3) + `; sleep 1000' #FARM time=2s`,
		`true`,
	}, "0-00:10")
	setConfig(t, dir, "RETRIES", "2")
	setConfig(t, dir, "CASE_KILL_GRACE", "2")
	start := time.Now()
	mustFarm(t, dir, "submit", "1", "--backend", "local")
	r := mustFarmCode(t, dir, exitNotAllOK, "wait", "--timeout", "1m")
	if !strings.Contains(r.Err+r.Out, "4 cases: 1 succeeded, 0 failed, 0 interrupted, 3 timed out, 0 never ran, 0 unfit") {
		t.Errorf("farm wait says:\n%s%s", r.Out, r.Err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("the farm took %s", d)
	}
	ends := readEnds(t, dir)
	for id, want := range map[int64]struct {
		sig      int
		min, max float64 // seconds
	}{1: {15, 2, 2 + lateBy}, 2: {9, 4, 4 + lateBy}, 3: {15, 2, 2 + lateBy}} {
		e := ends[id]
		if e == nil || e.kind != 'T' || e.status != want.sig || e.secs < want.min || e.secs > want.max {
			t.Errorf("case %d: end record %+v; want T with signal %d after %.1f to %.1f s", id, e, want.sig, want.min, want.max)
			continue
		}
		t.Logf("case %d: ended by signal %d %.3f s after its start (limit 2 s, grace 2 s)", id, e.status, e.secs)
		b, err := os.ReadFile(pid(int(id)))
		p, perr := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || perr != nil {
			t.Errorf("case %d: its grandchild's PID: %q %v", id, b, err)
			continue
		}
		// (Case 3 ended at SIGTERM, which its grandchild ignores:
		// SIGKILL reached it after the grace, before its meta-job,
		// which had no case left, exited.)
		if !processGone(p) {
			syscall.Kill(p, syscall.SIGKILL)
			t.Errorf("case %d: its background grandchild %d outlived it", id, p)
		} else {
			t.Logf("case %d: its background grandchild %d is gone", id, p)
		}
	}
	// The meta-job goes on with its next case at once.
	for id := int64(2); id <= 4; id++ {
		e1, e2 := ends[id-1], ends[id]
		if e1 == nil || e2 == nil || !e2.startedAtSeen || e2.startedAt-(e1.start+e1.secs) > 0.5 {
			t.Errorf("case %d did not start at once after case %d timed out: %+v, %+v", id, id-1, e1, e2)
		} else {
			t.Logf("case %d started %.3f s after case %d's end", id, e2.startedAt-(e1.start+e1.secs), id-1)
		}
	}
	checkTimedOutReported(t, dir)
}

// checkTimedOutReported checks what farm says of the farm of
// TestLocalCaseTimeLimit: cases 1-3 timed out, 4 succeeded; and that farm
// resubmit --timed-out runs them again.
func checkTimedOutReported(t *testing.T, dir string) {
	st := statusJSON(t, dir)
	if c := st[1]; c.State != "timed out" || c.Status != 15 || c.Attempts != 1 {
		t.Errorf("case 1: %+v; want timed out (15), once: RETRIES does not retry a timeout", c)
	}
	if c := st[2]; c.State != "timed out" || c.Status != 9 {
		t.Errorf("case 2: %+v; want timed out (9)", c)
	}
	if c := st[4]; c.State != "succeeded" {
		t.Errorf("case 4: %+v", c)
	}
	if out := mustFarm(t, dir, "Status", "--meta"); out != "1 143\n2 137\n3 143\n4 0\n" {
		t.Errorf("Status --meta:\n%s", out)
	}
	if out := mustFarm(t, dir, "Status"); !strings.Contains(out, "timed out") {
		t.Errorf("Status:\n%s", out)
	}
	if out := mustFarm(t, dir, "query"); !strings.Contains(out, "Timed out: 3 case(s) ran past their time limit") {
		t.Errorf("query:\n%s", out)
	}
	if out := mustFarm(t, dir, "query", "--json"); !strings.Contains(out, `"timed_out":3`) {
		t.Errorf("query --json:\n%s", out)
	}
	r := mustFarmCode(t, dir, 0, "resubmit", "1", "--timed-out", "--backend", "local")
	if !strings.Contains(r.Out, "Resubmitting the 3 case(s) chosen by --timed-out (3 timed out)") {
		t.Errorf("resubmit --timed-out says:\n%s%s", r.Out, r.Err)
	}
	mustFarmCode(t, dir, exitNotAllOK, "wait", "--timeout", "1m")
	st = statusJSON(t, dir)
	for _, id := range []int64{1, 2, 3} {
		if c := st[id]; c.State != "timed out" || c.Attempts != 2 || c.Run != 2 {
			t.Errorf("case %d after the resubmit: %+v; want timed out in run 2 after 2 attempts", id, c)
		}
	}
}

// TestLocalCaseTimeLimitMedian: with CASE_TIME_LIMIT=5x, a case that would
// run 25 times the median of the 40 cases that succeeded before it is
// ended at 5 times the median (the floor, CASE_TIME_LIMIT_MIN, made 1 s).
func TestLocalCaseTimeLimitMedian(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, append(repeat("sleep 0.2", 40), "sleep 30"), "0-00:10")
	addConfig(t, dir, "CASE_TIME_LIMIT=5x")
	setConfig(t, dir, "CASE_TIME_LIMIT_MIN", "1")
	setConfig(t, dir, "CASE_KILL_GRACE", "1")
	mustFarm(t, dir, "submit", "1", "--backend", "local")
	mustFarmCode(t, dir, exitNotAllOK, "wait", "--timeout", "2m")
	st := statusJSON(t, dir)
	var durs []float64
	for id := int64(1); id <= 40; id++ {
		if c := st[id]; c.State != "succeeded" {
			t.Errorf("case %d: %+v", id, c)
		}
		durs = append(durs, st[id].Seconds)
	}
	// The limit is 5 times the median the meta-job measured, which on a
	// loaded machine is well above sleep's 0.2 s (CI saw 0.5 s): the bounds
	// come from the recorded durations, not from the command lines (the
	// meta-job takes the median again once its cases grew by an eighth, so
	// its median may be of the first 36 or so: a margin either side).
	sort.Float64s(durs)
	limit := 5 * max(durs[len(durs)/2], 0.2)
	c := st[41]
	if c.State != "timed out" || c.Status != 15 || c.Seconds < 0.7*limit || c.Seconds > 1.3*limit+2 {
		t.Errorf("case 41 (sleep 30): %+v; want timed out (15) after 5 times the median (%.3f s)", c, limit)
	}
	t.Logf("case 41 timed out after %.3f s; 5 times the median is %.3f s", c.Seconds, limit)
}

// TestLocalStopReachesCaseWithLimit: a case with a time limit runs in a
// process group of its own; the job's stop signal (farm kill, the job's
// time limit) still reaches it and what it started in the background:
// it is recorded interrupted, not timed out, and nothing of it is left.
func TestLocalStopReachesCaseWithLimit(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	pidFile := filepath.Join(tmp, "grandchild")
	dir := newFarm(t, []string{
		`sh -c 'sleep 1000 & echo $! > ` + pidFile + `; sleep 1000' #FARM time=1h`,
	}, "0-00:10")
	mustFarm(t, dir, "submit", "1", "--backend", "local")
	pid, err := strconv.Atoi(strings.TrimSpace(awaitWritten(t, pidFile)))
	if err != nil {
		t.Fatal(err)
	}
	mustFarm(t, dir, "kill")
	mustFarmCode(t, dir, exitNotAllOK, "wait", "--timeout", "1m")
	if c := statusJSON(t, dir)[1]; c.State != "interrupted" || c.Status != 15 {
		t.Errorf("case 1: %+v; want interrupted by signal 15", c)
	}
	if !awaitGone(pid, 5*time.Second) {
		t.Errorf("the case's background process %d outlived farm kill", pid)
	}
}

// TestLocalCaseTimeLimitWholeNode: in WHOLE_NODE mode the limit is per
// case: a case past its limit is ended while the case beside it, in the
// meta-job's other loop, runs on to its end, and its loop takes the next
// case at once.
func TestLocalCaseTimeLimitWholeNode(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, []string{"sleep 1000 #FARM time=1s", "sleep 3", "true", "true"}, "0-00:10")
	addConfig(t, dir, "WHOLE_NODE=1", "NWHOLE=2")
	setConfig(t, dir, "CASE_KILL_GRACE", "2")
	mustFarm(t, dir, "submit", "1", "--backend", "local")
	mustFarmCode(t, dir, exitNotAllOK, "wait", "--timeout", "1m")
	st := statusJSON(t, dir)
	if c := st[1]; c.State != "timed out" || c.Status != 15 || c.Seconds < 1 || c.Seconds > 1+lateBy {
		t.Errorf("case 1: %+v; want timed out (15) after 1 s", c)
	}
	if c := st[2]; c.State != "succeeded" || c.Seconds < 3 {
		t.Errorf("case 2: %+v; want succeeded after its 3 s", c)
	}
	ends := readEnds(t, dir)
	if e1, e3 := ends[1], ends[3]; e1 == nil || e3 == nil || !e3.startedAtSeen || e3.startedAt-(e1.start+e1.secs) > 0.5 {
		t.Errorf("case 3 did not start at once after case 1 timed out: %+v, %+v", e1, e3)
	}
}

// TestLocalStopKillsWhatIgnoresIt: a case with a time limit that ignores
// the job's SIGTERM (farm kill) is killed by its meta-job before it exits
// (its process group left the job's, which the local backend's SIGKILL
// reaches), its background process too.
func TestLocalStopKillsWhatIgnoresIt(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "grandchild")
	dir := newFarm(t, []string{
		`trap "" TERM; sleep 1000 & echo $! > ` + pidFile + `; while :; do sleep 0.1; done #FARM time=1h`,
	}, "0-00:10")
	setConfig(t, dir, "CASE_KILL_GRACE", "1")
	mustFarm(t, dir, "submit", "1", "--backend", "local")
	pid, err := strconv.Atoi(strings.TrimSpace(awaitWritten(t, pidFile)))
	if err != nil {
		t.Fatal(err)
	}
	mustFarm(t, dir, "kill")
	mustFarmCode(t, dir, exitNotAllOK, "wait", "--timeout", "1m")
	if c := statusJSON(t, dir)[1]; c.State != "interrupted" {
		t.Errorf("case 1: %+v; want interrupted", c)
	}
	if !awaitGone(pid, 5*time.Second) {
		t.Errorf("the case's background process %d, which ignores SIGTERM, outlived farm kill", pid)
	}
}

// TestLocalRetryTimeouts: with RETRY_TIMEOUTS=1, RETRIES runs again a case
// that timed out (attempt=2 why=timeout), and the run counts it once.
func TestLocalRetryTimeouts(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, []string{"sleep 100 #FARM time=1s", "true"}, "0-00:10")
	setConfig(t, dir, "RETRIES", "1")
	setConfig(t, dir, "CASE_KILL_GRACE", "1")
	addConfig(t, dir, "RETRY_TIMEOUTS=1")
	mustFarm(t, dir, "submit", "1", "--backend", "local")
	mustFarmCode(t, dir, exitNotAllOK, "wait", "--timeout", "1m")
	if c := statusJSON(t, dir)[1]; c.State != "timed out" || c.Attempts != 2 {
		t.Errorf("case 1: %+v; want timed out after 2 attempts", c)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "STATUSES", "status.1"))
	if !strings.Contains(string(b), " attempt=2 why=timeout") {
		t.Errorf("no retry's start record says why=timeout:\n%s", b)
	}
	if out := mustFarm(t, dir, "query", "--json"); !strings.Contains(out, `"run_cases":{"total":2,"succeeded":1,"failed":0,"interrupted":0,"timed_out":1,`) {
		t.Errorf("query --json:\n%s", out)
	}
}

// TestLocalCaseTimeLimitProgram: a single_case.sh that is a program of its
// own (executed, not sourced: here by env sh) has its cases' limits kept
// the same way, its case's background grandchild ended with it.
func TestLocalCaseTimeLimitProgram(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "grandchild")
	dir := newFarm(t, []string{`sh -c 'sleep 1000 & echo $! > ` + pidFile + `; sleep 1000' #FARM time=1s`, "true"}, "0-00:10")
	if err := os.WriteFile(filepath.Join(dir, "single_case.sh"), []byte("#!/usr/bin/env sh\ncd \"RUN$ID\" && eval \"$COMM\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	setConfig(t, dir, "CASE_KILL_GRACE", "2")
	mustFarm(t, dir, "submit", "1", "--backend", "local")
	mustFarmCode(t, dir, exitNotAllOK, "wait", "--timeout", "1m")
	st := statusJSON(t, dir)
	if c := st[1]; c.State != "timed out" || c.Status != 15 || c.Seconds < 1 || c.Seconds > 1+lateBy {
		t.Errorf("case 1: %+v; want timed out (15) after 1 s", c)
	}
	if c := st[2]; c.State != "succeeded" {
		t.Errorf("case 2: %+v", c)
	}
	b, _ := os.ReadFile(pidFile)
	if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err != nil || !processGone(pid) {
		if err == nil {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		t.Errorf("case 1's grandchild (%q) outlived it", b)
	}
}

// TestLocalKilledJobTakesItsLimitedCase: a job killed with SIGKILL to its
// process group (what the fault trials' kill -9 does) takes with it a
// case with a time limit, which runs in a process group of its own: the
// local backend kills the job's whole session once its script is gone.
// Before, the case and its background grandchild ran on, and the job
// looked ended while they ran, so that rescue could run the case again
// beside them.
func TestLocalKilledJobTakesItsLimitedCase(t *testing.T) {
	t.Parallel()
	pids := filepath.Join(t.TempDir(), "pids")
	dir := newFarm(t, []string{
		`sleep 1000 & echo "$BASHPID $!" > ` + pids + `; sleep 1000 #FARM time=1h`,
	}, "0-00:10")
	setConfig(t, dir, "RESCUE_CHECK", "0")
	mustFarm(t, dir, "submit", "1", "--backend", "local")
	line := awaitWritten(t, pids)
	var caseShell, grandchild int
	if _, err := fmt.Sscan(line, &caseShell, &grandchild); err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	pgid := jobPGID(t, dir, harness.JobIDs(dir)[0])
	if g, _ := syscall.Getpgid(caseShell); g == pgid {
		t.Fatalf("the case with a time limit runs in the job's process group %d: this test tests one that does not", pgid)
	}
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for _, pid := range []int{caseShell, grandchild} {
		if !awaitGone(pid, 10*time.Second) {
			t.Errorf("process %d of the case outlived its job's SIGKILL by 10 s", pid)
		}
	}
	mustFarmCode(t, dir, exitNotAllOK, "wait", "--timeout", "1m")
}
