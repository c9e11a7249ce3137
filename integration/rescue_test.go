package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Rescue within the run (metajob/rescue.go), on the local backend with
// real processes: RESCUE_CHECK=1 and a lease of 1 s (FARM_LOOK_EVERY: the
// fence) so that a rescue takes seconds, not minutes.

const rescueFence = "FARM_LOOK_EVERY=1s"

// crashesOnce is a case that kills its meta-job the first time it runs,
// and succeeds the next.
const crashesOnce = `if mkdir ../crashed-once 2>/dev/null; then ` + killsItsMetajob + `; fi`

// rescueFarm is a farm of table for rescue tests: RESCUE_CHECK=1.
func rescueFarm(t *testing.T, table []string) string {
	t.Helper()
	dir := newFarm(t, table, "0-00:10")
	setConfig(t, dir, "RESCUE_CHECK", "1")
	return dir
}

// starts are the S records of a status file: case ID -> its fields after
// HOST, one entry a start.
func starts(t *testing.T, path string) map[int64][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64][]string{}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 4 || f[0] != "S" {
			continue
		}
		id, _ := strconv.ParseInt(f[1], 10, 64)
		out[id] = append(out[id], strings.Join(f[4:], " "))
	}
	return out
}

// TestLocalRescueRunsTheDeadJobsCasesInTheRun: one of two meta-jobs is
// killed (kill -9, as the out-of-memory killer or a lost node ends it) by
// its case 20; the other, told by the engine that the job has ended,
// rescues its cases: case 20 runs again as attempt 2 (why=rescue) and
// succeeds, the cases the dead job had claimed and not started run once.
// The run ends with every case succeeded, without a resubmit, and no other
// case started twice.
func TestLocalRescueRunsTheDeadJobsCasesInTheRun(t *testing.T) {
	t.Parallel()
	table := repeat("sleep 0.1", 120)
	table[19] = crashesOnce
	dir := rescueFarm(t, table)
	r := farmIn(t, dir, []string{rescueFence}, "submit", "2", "--backend", "local")
	if r.Code != 0 {
		t.Fatalf("submit: %d %s", r.Code, r.Err)
	}
	mustFarmCode(t, dir, 0, "wait", "--timeout", "3m")
	st := statusJSON(t, dir)
	for id := int64(1); id <= 120; id++ {
		want := 1
		if id == 20 {
			want = 2
		}
		if c := st[id]; c.State != "succeeded" || c.Attempts != want || c.Run != 1 || c.Starts != 0 {
			t.Errorf("case %d: %+v; want succeeded in run 1 after %d attempt(s), no duplicate start", id, c, want)
		}
	}
	if c := st[20]; c.Crashes != 1 || c.Crashed {
		t.Errorf("case 20: %+v; want 1 crash, not crashed", c)
	}
	// The dead job's file: case 20 started, no end; the rescuer's: its
	// second attempt, why=rescue, from the dead job's file.
	files, _ := filepath.Glob(filepath.Join(dir, "STATUSES", "status.*"))
	var dead, rescuer string
	for _, f := range files {
		for _, fields := range starts(t, f)[20] {
			if strings.Contains(fields, "why=rescue") {
				rescuer = f
			} else {
				dead = f
			}
		}
	}
	if dead == "" || rescuer == "" {
		t.Fatalf("case 20's starts: dead job's file %q, rescuer's %q", dead, rescuer)
	}
	if want := "attempt=2 why=rescue from=" + filepath.Base(dead); !strings.Contains(strings.Join(starts(t, rescuer)[20], ";"), want) {
		t.Errorf("rescuer's S record of case 20: %q, want %q", starts(t, rescuer)[20], want)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "farm.log")); strings.Contains(string(b), "resubmit") {
		t.Errorf("farm.log shows a resubmit:\n%s", b)
	}
	q := mustFarm(t, dir, "query")
	if !strings.Contains(q, "run 1  120    120") {
		t.Errorf("query: want run 1 with 120 cases, 120 succeeded:\n%s", q)
	}
}

// TestLocalRescueStopsAtTheCrashLimit: a case that kills every meta-job
// that runs it is rescued until MAX_CRASHES (2) deaths, then left crashed;
// -auto then ends its chain at once, with its line: no run 2.
func TestLocalRescueStopsAtTheCrashLimit(t *testing.T) {
	t.Parallel()
	dir := rescueFarm(t, append([]string{killsItsMetajob}, repeat("sleep 0.2", 20)...))
	setConfig(t, dir, "MAX_CRASHES", "2")
	r := farmIn(t, dir, []string{rescueFence}, "submit", "3", "-auto", "--backend", "local")
	if r.Code != 0 {
		t.Fatalf("submit: %d %s", r.Code, r.Err)
	}
	mustFarmCode(t, dir, exitNotAllOK, "wait", "--timeout", "3m")
	st := statusJSON(t, dir)
	if c := st[1]; c.State != "crashed" || c.Attempts != 2 || c.Crashes != 2 || !c.Crashed || c.Run != 1 {
		t.Errorf("case 1: %+v; want crashed in run 1 after 2 attempts, 2 crashes, crashed", c)
		for _, g := range []string{"OUTPUT/*.out", "STATUSES/status.*"} {
			fs, _ := filepath.Glob(filepath.Join(dir, g))
			for _, f := range fs {
				b, _ := os.ReadFile(f)
				t.Logf("%s:\n%s", f, b)
			}
		}
	}
	for id := int64(2); id <= 21; id++ {
		if c := st[id]; c.State != "succeeded" || c.Attempts != 1 {
			t.Errorf("case %d: %+v; want succeeded once", id, c)
		}
	}
	b, _ := os.ReadFile(filepath.Join(dir, "farm.log"))
	if want := "Only failed or crashed cases left (0 failed, 1 crashed"; !strings.Contains(string(b), want) || strings.Contains(string(b), "resubmit: run 2") {
		t.Errorf("farm.log: want %q and no run 2:\n%s", want, b)
	}
}

// TestLocalRescuedJobThatWasOnlyStoppedStartsNone: a meta-job is stopped
// (SIGSTOP of its process group) and its batch system says it has ended
// (fault injection: its local state record is made FAILED, as Slurm ends
// NODE_FAIL a job whose node it lost while its processes live on). The
// other meta-job rescues its cases. Continued, the stopped job starts none
// of them: it finds its mark at its next start and exits saying so.
func TestLocalRescuedJobThatWasOnlyStoppedStartsNone(t *testing.T) {
	t.Parallel()
	dir := rescueFarm(t, repeat("sleep 0.2", 80))
	r := farmIn(t, dir, []string{rescueFence}, "submit", "2", "--backend", "local")
	if r.Code != 0 {
		t.Fatalf("submit: %d %s", r.Code, r.Err)
	}
	status := func(id string) string { return filepath.Join(dir, "STATUSES", "status."+id) }
	waitFor(t, 30*time.Second, "both meta-jobs to run cases", func() bool {
		b1, _ := os.ReadFile(status("1"))
		b2, _ := os.ReadFile(status("2"))
		return strings.Count(string(b1), "\nS ") > 2 && strings.Count(string(b2), "\nS ") > 2
	})
	pgid := jobPGID(t, dir, "1")
	if err := syscall.Kill(-pgid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stoppedAt := float64(time.Now().UnixMilli()) / 1e3
	defer syscall.Kill(-pgid, syscall.SIGCONT)
	setLocalState(t, dir, "1", "FAILED")
	outputs, _ := filepath.Glob(filepath.Join(dir, "OUTPUT", "*"))
	waitFor(t, time.Minute, "job 2 to rescue job 1's cases", func() bool {
		for _, o := range outputs {
			if b, _ := os.ReadFile(o); strings.Contains(string(b), "rescued from status.1") {
				return true
			}
		}
		return false
	})
	rescued := rescuedFrom(t, status("2"), "status.1")
	syscall.Kill(-pgid, syscall.SIGCONT)
	waitFor(t, time.Minute, "job 1 to exit", func() bool {
		b, _ := os.ReadFile(status("1"))
		return strings.Contains(string(b), "\nQ ")
	})
	if r := farmIn(t, dir, nil, "wait", "--timeout", "2m"); r.Code != 0 {
		t.Errorf("farm wait: exit %d, want 0 (every case succeeded): %s%s", r.Code, r.Out, r.Err)
	}
	startedNoneAfter(t, status("1"), rescued, stoppedAt)
	st := statusJSON(t, dir)
	for id := int64(1); id <= 80; id++ {
		if c := st[id]; c.State != "succeeded" {
			t.Errorf("case %d: %+v; want succeeded", id, c)
		}
	}
}

// rescuedFrom is the set of cases the rescuer whose status file is at path
// rescued from the status file named from, as its C record says.
func rescuedFrom(t *testing.T, path, from string) map[int64]bool {
	t.Helper()
	b, _ := os.ReadFile(path)
	m := regexp.MustCompile(`(?m)^C \S+ (\S+) from=` + regexp.QuoteMeta(from) + `( .*)?$`).FindStringSubmatch(string(b))
	if m == nil {
		t.Fatalf("%s has no C record from %s:\n%s", path, from, b)
	}
	rescued := map[int64]bool{}
	for _, part := range strings.Split(m[1], ",") {
		lo, hi, _ := strings.Cut(part, "-")
		a, _ := strconv.ParseInt(lo, 10, 64)
		z := a
		if hi != "" {
			z, _ = strconv.ParseInt(hi, 10, 64)
		}
		for id := a; id <= z; id++ {
			rescued[id] = true
		}
	}
	return rescued
}

// startedNoneAfter checks that the job whose status file is at path
// started none of the rescued cases after stoppedAt (Unix seconds): each
// start of one is from before, or was fenced (an I record with signal 0,
// nothing run); and that its file says its cases were rescued.
func startedNoneAfter(t *testing.T, path string, rescued map[int64]bool, stoppedAt float64) {
	t.Helper()
	b, _ := os.ReadFile(path)
	fenced := map[int64]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 2 && f[0] == "I" && f[2] == "0" {
			id, _ := strconv.ParseInt(f[1], 10, 64)
			fenced[id] = true
		}
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 3 || f[0] != "S" {
			continue
		}
		id, _ := strconv.ParseInt(f[1], 10, 64)
		at, _ := strconv.ParseFloat(f[2], 64)
		if rescued[id] && at > stoppedAt && !fenced[id] {
			t.Errorf("%s: rescued case %d started after the job was continued", path, id)
		}
	}
	if q := string(b); !strings.Contains(q, "rescued by meta-job") {
		t.Errorf("%s does not say its cases were rescued:\n%s", path, lastLines(q, 5))
	}
}

// setLocalState makes the local engine's state record of job id say
// state (fault injection: the engine's word that the job has ended).
func setLocalState(t *testing.T, dir, id, state string) {
	t.Helper()
	path := filepath.Join(dir, "MISC", "local", id+".state")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["State"] = state
	nb, _ := json.Marshal(m)
	tmp := path + ".tmp-test"
	if err := os.WriteFile(tmp, nb, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n") + fmt.Sprintf(" (%d lines)", len(l))
}
