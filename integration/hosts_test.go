package integration

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/farm-hpc/farm/integration/harness"
	"github.com/farm-hpc/farm/internal/testhost"
	"github.com/farm-hpc/farm/proc"
)

// Another host is simulated with testhost, as in casetable/hosts_test.go:
// its own UTS namespace (host name) and PID namespace, sharing this
// filesystem as cluster nodes share a network filesystem. Needs root and
// unshare(1).

// onHost starts script with sh in dir, on a simulated host named host
// (testhost.Command), which ends (every process in it killed) when the
// script does. $FARM is the farm binary. It is killed at the test's end.
// done is closed when it has ended; out is its output then.
func onHost(t *testing.T, host, dir, script string, env ...string) (done <-chan struct{}, out *bytes.Buffer) {
	t.Helper()
	cmd := testhost.Command(host, script, append(env, "FARM="+bin(t))...)
	cmd.Dir = dir
	out = new(bytes.Buffer)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ended := make(chan struct{})
	go func() { cmd.Wait(); close(ended) }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-ended
	})
	return ended, out
}

// localState reads the fields the tests need of MISC/local/ID.state.
func localState(t *testing.T, dir, id string) (pid, pgid int, host string) {
	t.Helper()
	var st struct {
		PID, PGID int
		Host      string
	}
	b, err := os.ReadFile(filepath.Join(dir, "MISC", "local", id+".state"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return st.PID, st.PGID, st.Host
}

// jobPGID returns the process group of running local job id of the farm
// in dir, to signal. It waits (10 s at most) for the group to be recorded:
// a case may start before its supervisor has written the group down, and
// a PGID of 0 given to kill(-pgid) would signal the test's own process
// group (the test binary, go test and whatever started them).
func jobPGID(t *testing.T, dir, id string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, pgid, _ := localState(t, dir, id)
		if pgid > 1 && pgid != syscall.Getpgrp() {
			return pgid
		}
		if time.Now().After(deadline) {
			t.Fatalf("local job %s: no process group recorded after 10 s", id)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// caseStarted reports whether a status file of the farm in dir records
// case id's start.
func caseStarted(dir string, id string) bool {
	files, _ := filepath.Glob(filepath.Join(dir, "STATUSES", "status.*"))
	for _, f := range files {
		if b, _ := os.ReadFile(f); strings.Contains(string(b), "\nS "+id+" ") {
			return true
		}
	}
	return false
}

// TestLocalJobsOfAnotherHost: local-backend jobs submitted on another
// (simulated) host, to a farm directory both share, are seen here as they
// say they are — running, pending — never as failed because their PIDs
// are not alive here; farm list says where they run; farm kill here stops
// them within a few seconds, through their cancel files.
func TestLocalJobsOfAnotherHost(t *testing.T) {
	testhost.NeedNamespaces(t)
	t.Parallel()
	// Two cases: submit caps N at the cases (issue 34).
	dir := newFarm(t, []string{"sleep 300", "sleep 300"}, "0-00:10")
	// nodeA has one job slot of its own: of its 2 meta-jobs one runs case
	// 1 and one stays pending.
	innerDone, out := onHost(t, "nodeA", dir, `"$FARM" submit 2 --backend local && exec "$FARM" wait --timeout 3m`,
		"TMPDIR="+t.TempDir(), "FARM_LOCAL_SLOTS=1")
	waitFor(t, 30*time.Second, "case 1 to start on nodeA", func() bool { return caseStarted(dir, "1") })
	ids := harness.JobIDs(dir)
	if len(ids) != 2 {
		t.Fatalf("jobs %v, want 2", ids)
	}
	running := ""
	for _, id := range ids {
		pid, _, host := localState(t, dir, id)
		if proc.HostName(host) != "nodeA" || host == proc.HostID() {
			t.Errorf("job %s: recorded host %q, want nodeA's identity (ours is %q)", id, host, proc.HostID())
		}
		if proc.Alive(pid) {
			t.Logf("job %s: nodeA's PID %d happens to be alive here too", id, pid)
		}
	}
	// Seen from here for a few seconds: one RUNNING, one PENDING, none
	// FAILED; the case is running, not interrupted.
	for i := 0; i < 6; i++ {
		states := map[string]int{}
		for _, r := range harness.ListJSON(t, dir) {
			states[r.State]++
			if r.State == "RUNNING" {
				running = r.ID
			}
			if proc.HostName(r.OtherHost) != "nodeA" {
				t.Errorf("list: job %s other_host %q, want nodeA's identity", r.ID, r.OtherHost)
			}
		}
		if states["RUNNING"] != 1 || states["PENDING"] != 1 {
			t.Fatalf("list from here: %v, want one RUNNING and one PENDING\n%s", states, mustFarm(t, dir, "list"))
		}
		if st := statusJSON(t, dir)[1]; st.State != "running" {
			t.Fatalf("case 1 seen from here: %+v, want running", st)
		}
		time.Sleep(500 * time.Millisecond)
	}
	list := mustFarm(t, dir, "list")
	if !strings.Contains(list, "Job "+running+" runs on nodeA (host identity nodeA/") {
		t.Errorf("list does not say where job %s runs:\n%s", running, list)
	}
	// farm wait here does not end while they run.
	if r := farmIn(t, dir, nil, "wait", "--timeout", "1s"); r.Code != 2 {
		t.Errorf("wait --timeout 1s: exit %d, want 2 (timeout)", r.Code)
	}

	start := time.Now()
	kill := mustFarm(t, dir, "kill")
	took := time.Since(start)
	if !strings.Contains(kill, "Cancelled 2 job(s)") {
		t.Errorf("kill said %q", kill)
	}
	// The supervisor polls every second; the case ends at SIGTERM.
	if took > 8*time.Second {
		t.Errorf("farm kill took %s", took)
	}
	for _, r := range harness.ListJSON(t, dir) {
		if r.State != "CANCELLED" {
			t.Errorf("after kill: job %s is %s, want CANCELLED", r.ID, r.State)
		}
	}
	if st := statusJSON(t, dir)[1]; st.State != "interrupted" || st.Job != running {
		t.Errorf("case 1 after kill: %+v, want interrupted in job %s", st, running)
	}
	// nodeA's farm wait ends too.
	select {
	case <-innerDone:
		t.Logf("kill took %s; nodeA's output:\n%s", took, out)
	case <-time.After(10 * time.Second):
		t.Errorf("nodeA's farm wait has not ended 10 s after the kill")
	}
}

// TestLocalSupervisorKill9ShowsFailed: on its own host a job whose
// supervisor and job script were killed with kill -9 shows as FAILED (its
// PIDs are judged here); while only the supervisor is dead and the script
// runs on, it is RUNNING.
func TestLocalSupervisorKill9ShowsFailed(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, []string{"sleep 300"}, "0-00:10")
	mustFarm(t, dir, "submit", "1", "--backend", "local")
	waitFor(t, 30*time.Second, "case 1 to start", func() bool { return caseStarted(dir, "1") })
	id := harness.JobIDs(dir)[0]
	pid, _, host := localState(t, dir, id)
	pgid := jobPGID(t, dir, id)
	t.Cleanup(func() { syscall.Kill(-pgid, syscall.SIGKILL) })
	if host != proc.HostID() {
		t.Errorf("recorded host %q, want ours %q", host, proc.HostID())
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the supervisor to die", func() bool { return !proc.Alive(pid) })
	if rows := harness.ListJSON(t, dir); rows[0].State != "RUNNING" || rows[0].OtherHost != "" {
		t.Errorf("supervisor dead, script alive: %+v, want RUNNING here", rows[0])
	}
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the job to show FAILED", func() bool { return harness.ListJSON(t, dir)[0].State == "FAILED" })
	mustFarmCode(t, dir, exitNotAllOK, "wait", "--timeout", "30s")
	if st := statusJSON(t, dir)[1]; st.State != "interrupted" {
		t.Errorf("case 1: %+v, want interrupted", st)
	}
}
