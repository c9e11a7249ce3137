package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/farm-hpc/farm/casetable"
	"github.com/farm-hpc/farm/integration/harness"
)

// TestLocalFrozenMetajobStartsNothingOfItsOldRun is issue 21's point 7: a
// meta-job frozen with cases claimed and not started, whose job the batch
// system then presumes dead, must not run those cases when it resumes if a
// resubmit has started the next run meanwhile (which runs them too).
//
// One meta-job runs a farm of short cases; each case appends "JOB ID" to an
// execution log of its own (not farm's records). The test stops the job's
// whole process group (SIGSTOP: the meta-job, its case worker, its case) at
// a moment when the claim state shows cases claimed beyond those the log
// shows started, and then does what a batch system does when it marks the
// node DOWN: the job is recorded FAILED, its processes left stopped (and
// its supervisor, the local backend's batch system, stopped too). farm
// resubmit then starts run 2, whose job runs every case left, to the end.
// Then the frozen group is continued (SIGCONT), with FARM_LOOK_EVERY=1s.
// The resumed meta-job must start none of the cases it held — the log gets
// no line of it, run 1 has no start record of them but for one a loop was
// about to start when it froze (after its last look at the run), recorded
// interrupted once the look after its start record finds the run
// superseded (metajob's TestFrozenAfterItsLastLookStartsNothing) — and exit with the line
// that says its run was superseded and how many cases it left to run 2.
// On commit 149e76d it ran them in run 1, after run 2 had. Twice: with the
// meta-job's one loop, and in WHOLE_NODE mode with 3 loops sharing its
// claims (each loop's case running when it froze runs on to its end).
func TestLocalFrozenMetajobStartsNothingOfItsOldRun(t *testing.T) {
	t.Parallel()
	for _, mode := range []struct{ name, config string }{
		{"one loop", ""},
		{"WHOLE_NODE 3 loops", "WHOLE_NODE=1\nNWHOLE=3\n"},
	} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			testFrozenMetajob(t, mode.config)
		})
	}
}

func testFrozenMetajob(t *testing.T, config string) {
	const n = 300
	execLog := filepath.Join(t.TempDir(), "exec.log")
	// Run 1's cases take 30 ms, so that the test can stop its job
	// mid-batch; run 2's are quick.
	table := repeat(fmt.Sprintf(`echo "$METAJOB_ID $ID" >> %s; [ "$FARM_RUN" != 1 ] || sleep 0.03`, execLog), n)
	dir := newFarm(t, table, "0-00:10")
	if config != "" {
		appendFile(t, dir, "config", config)
	}
	env := []string{"TMPDIR=" + t.TempDir(), "FARM_LOCAL_SLOTS=3", "FARM_LOOK_EVERY=1s"}
	if r := farmIn(t, dir, env, "submit", "1", "--backend", "local"); r.Code != 0 {
		t.Fatalf("submit: %s", r.Err)
	}
	victim := harness.JobIDs(dir)[0]
	waitFor(t, 10*time.Second, "the job's state record", func() bool {
		_, err := os.Stat(filepath.Join(dir, "MISC", "local", victim+".state"))
		return err == nil
	})
	pgid := jobPGID(t, dir, victim)
	defer func() {
		syscall.Kill(-pgid, syscall.SIGCONT) // never leave it stopped
		if t.Failed() {
			harness.Diagnose(t, dir)
			farmIn(t, dir, nil, "kill")
		}
	}()

	// Stop it with cases claimed and not started.
	held, started := stopHoldingCases(t, dir, execLog, pgid, n)
	before := len(execLines(t, execLog))
	t.Logf("job %s stopped with %d cases started (%d in the log), holding cases %d..%d", victim, len(started), before, held[0], held[len(held)-1])
	t0 := time.Now()

	// Its node is marked DOWN: the job is presumed dead, its processes
	// live on (stopped).
	supervisor := nodeDown(t, dir, victim)
	defer syscall.Kill(supervisor, syscall.SIGCONT)
	if rows := harness.ListJSON(t, dir); len(rows) != 1 || rows[0].State != "FAILED" {
		t.Fatalf("farm list after the node went down: %+v, want job %s FAILED", rows, victim)
	}
	r := farmIn(t, dir, env, "resubmit", "2", "--backend", "local")
	if r.Code != 0 || !strings.Contains(r.Out, "run 2") {
		t.Fatalf("resubmit: exit %d\n%s\n%s", r.Code, r.Out, r.Err)
	}
	if r := farmIn(t, dir, nil, "wait", "--timeout", "2m"); r.Code != 0 {
		t.Fatalf("farm wait for run 2: exit %d\n%s\n%s", r.Code, r.Out, r.Err)
	}

	t.Logf("run 2 ran the cases left in %s", time.Since(t0).Round(time.Millisecond))

	// The node thaws: the frozen meta-job resumes, stopped for at least
	// twice FARM_LOOK_EVERY (1s).
	time.Sleep(time.Until(t0.Add(2 * time.Second)))
	syscall.Kill(supervisor, syscall.SIGCONT)
	syscall.Kill(-pgid, syscall.SIGCONT)
	waitFor(t, 20*time.Second, "the resumed meta-job to exit", func() bool { return gone(pgid) })

	var late []string
	for _, l := range execLines(t, execLog)[before:] {
		if l.job == victim && slices.Contains(held, l.id) {
			late = append(late, fmt.Sprint(l.id))
		}
	}
	if len(late) > 0 {
		t.Errorf("the resumed meta-job of run 1 started cases %s after run 2 had started (and run them)", strings.Join(late, " "))
	}
	// A case whose start record was written when the job froze, and not
	// yet run, is withdrawn when it resumes and counted with those held.
	checkSupersededOutput(t, dir, victim, config, len(held), len(started)-before)
	checkHeldRanOnceInRun2(t, dir, held, n)
}

// stopHoldingCases stops (SIGSTOP) the process group pgid of the one
// meta-job of the farm dir of n cases once it has claimed cases it has not
// started (the rest of its batch), and returns them, and those started.
func stopHoldingCases(t *testing.T, dir, execLog string, pgid, n int) (held []int64, started map[int64]bool) {
	t.Helper()
	waitFor(t, 30*time.Second, "15 cases to start", func() bool { return len(execLines(t, execLog)) >= 15 })
	deadline := time.Now().Add(30 * time.Second)
	for len(held) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("never stopped the meta-job with cases claimed and not started")
		}
		// At least 3 held: a loaded machine makes cases slower and the
		// batches smaller (5 a claim here at a load average of 10-25,
		// when 8 was never reached).
		if claimed(t, dir)-int64(len(execLines(t, execLog))) < 3 {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		stopGroup(t, pgid)
		// Started: its start record written (the case may not have
		// begun its command yet: it runs on when the job resumes), or
		// in the log.
		started = map[int64]bool{}
		for id := range harness.ReadRunRecords(t, dir)[1].Starts {
			started[id] = true
		}
		for _, l := range execLines(t, execLog) {
			started[l.id] = true
		}
		for id := int64(1); id <= claimed(t, dir); id++ { // one meta-job: it claimed 1..Claimed
			if !started[id] {
				held = append(held, id)
			}
		}
		if len(held) == 0 || len(started) >= n*3/4 {
			syscall.Kill(-pgid, syscall.SIGCONT) // between two batches: again
			held = nil
			time.Sleep(20 * time.Millisecond)
		}
	}
	return held, started
}

// checkSupersededOutput checks that the output of the frozen meta-job
// victim says that run 2 took over its held cases (and, with a config, that
// it ran 3 loops).
func checkSupersededOutput(t *testing.T, dir, victim, config string, held, withdrawn int) {
	t.Helper()
	out, _ := os.ReadFile(filepath.Join(dir, "OUTPUT", "slurm-"+victim+".out"))
	t.Logf("job %s's output ends: %s", victim, tail(out, 300))
	if config != "" && !strings.Contains(string(out), "farm: WHOLE_NODE: 3 loops") {
		t.Errorf("job %s did not run 3 loops", victim)
	}
	said := false
	for n := held; n <= held+withdrawn; n++ {
		cases := fmt.Sprintf("the %d cases it had claimed but not started were left to run 2; exiting.", n)
		if n == 1 {
			cases = "the case it had claimed but not started was left to run 2; exiting."
		}
		said = said || strings.Contains(string(out), cases)
	}
	if !strings.Contains(string(out), "farm: run 1 was superseded by run 2 while this meta-job had no news of its run") || !said {
		t.Errorf("job %s's output lacks the line saying run 2 took over its %d cases (or up to %d more whose start it withdrew):\n%s", victim, held, withdrawn, tail(out, 1500))
	}
}

// checkHeldRanOnceInRun2 checks farm's records of the n cases: in run 1 the
// held cases never started — but for one a loop froze between its last
// look at the run and the case's start record (at most one a loop), whose
// record is written when it resumes, followed by the look that finds the
// run superseded: it is recorded interrupted, not run (the execution log
// says so: late) —; run 2 ran every one of them; no case started twice in
// a run; all succeeded.
func checkHeldRanOnceInRun2(t *testing.T, dir string, held []int64, n int) {
	t.Helper()
	runs := harness.ReadRunRecords(t, dir)
	recorded := 0
	for _, id := range held {
		s1 := runs[1].Starts[id]
		if s1 == 1 && runs[1].Interrupts[id] == 1 {
			recorded++ // its start record, then interrupted
			s1 = 0
		}
		if s1 != 0 || runs[2].Starts[id] != 1 {
			t.Errorf("held case %d: %d start records in run 1 (%d interrupted), %d in run 2; want 0 (or 1, interrupted) and 1", id, runs[1].Starts[id], runs[1].Interrupts[id], runs[2].Starts[id])
		}
	}
	if recorded > 3 {
		t.Errorf("%d held cases have a start record in run 1: more than one a loop", recorded)
	}
	for run, rec := range runs {
		for id, k := range rec.Starts {
			if k > 1 {
				t.Errorf("case %d started %d times in run %d", id, k, run)
			}
		}
	}
	rows := statusJSON(t, dir)
	for id := int64(1); id <= int64(n); id++ {
		if rows[id].State != "succeeded" {
			t.Errorf("case %d: %+v, want succeeded", id, rows[id])
		}
	}
}

// execLine is a line of the cases' own execution log: the job that ran the
// case, and its ID.
type execLine struct {
	job string
	id  int64
}

func execLines(t *testing.T, path string) []execLine {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	} else if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []execLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l execLine
		if _, err := fmt.Sscan(sc.Text(), &l.job, &l.id); err != nil {
			continue // a line being written
		}
		out = append(out, l)
	}
	return out
}

// claimed is how many cases the current run of the farm in dir claimed.
func claimed(t *testing.T, dir string) int64 {
	t.Helper()
	st := casetable.NewStore(dir, filepath.Join(dir, "MISC"))
	defer st.Close()
	s, err := st.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s.Claimed
}

// stopGroup stops the process group pgid and waits until each of its
// processes is stopped: nothing of it runs any more.
func stopGroup(t *testing.T, pgid int) {
	t.Helper()
	if err := syscall.Kill(-pgid, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP -%d: %v", pgid, err)
	}
	waitFor(t, 5*time.Second, "the job's processes to stop", func() bool {
		for _, pid := range groupPIDs(pgid) {
			if !stopped(pid) {
				return false
			}
		}
		return true
	})
}

// groupPIDs lists the processes of process group pgid (zombies left out).
func groupPIDs(pgid int) []int {
	var pids []int
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...
		i := strings.LastIndexByte(string(b), ')')
		var state string
		var pid, ppid, pgrp int
		if i < 0 {
			continue
		}
		fmt.Sscan(string(b[:strings.IndexByte(string(b), ' ')]), &pid)
		if _, err := fmt.Sscan(string(b[i+1:]), &state, &ppid, &pgrp); err != nil || pgrp != pgid || state == "Z" {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

// gone reports whether no live process is left in process group pgid.
func gone(pgid int) bool { return len(groupPIDs(pgid)) == 0 }

// nodeDown does to local job id of the farm in dir, whose processes are
// stopped, what a batch system does to the jobs of a node it marks DOWN
// because it stopped answering: the job is recorded as failed, and its
// processes are left as they are. The local backend's batch system is the
// job's supervisor, which keeps the job's state record: it is stopped too
// (the node is frozen: it records nothing meanwhile), and the record is
// rewritten as it records a failure, by rename. (Killing the supervisor
// instead would orphan the job's stopped process group, which the kernel
// then sends SIGHUP and SIGCONT: a frozen node's processes get neither.)
// It returns the supervisor's PID, for SIGCONT.
func nodeDown(t *testing.T, dir, id string) int {
	t.Helper()
	pid, _, _ := localState(t, dir, id)
	if pid <= 1 {
		t.Fatalf("job %s: no supervisor PID recorded", id)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP %d (job %s's supervisor): %v", pid, id, err)
	}
	waitFor(t, 5*time.Second, "the supervisor to stop", func() bool { return stopped(pid) })
	path := filepath.Join(dir, "MISC", "local", id+".state")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]any
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	st["State"], st["Reason"], st["End"] = "FAILED", "node down (test)", time.Now()
	if b, err = json.Marshal(st); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".tmp", b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
	return pid
}

// tail is the last n bytes of b.
func tail(b []byte, n int) string {
	if len(b) > n {
		return "..." + string(b[len(b)-n:])
	}
	return string(b)
}
