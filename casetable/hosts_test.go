package casetable

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Hosts are simulated with Linux namespaces: each "host" is a UTS namespace
// (its own host name) and a PID namespace (its own PIDs, so a PID in another
// host's lock may be dead — or alive as some other process — here), sharing
// this filesystem as cluster nodes share a parallel filesystem. Needs root
// and unshare(1); skipped otherwise.

func needNamespaces(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("simulated hosts need root (unshare)")
	}
	if err := exec.Command("unshare", "--uts", "--pid", "--fork", "--mount-proc", "true").Run(); err != nil {
		t.Skipf("simulated hosts need unshare: %v", err)
	}
}

// onHost runs script with sh in a new UTS+PID namespace named host.
func onHost(host, script string, env ...string) *exec.Cmd {
	cmd := exec.Command("unshare", "--uts", "--pid", "--fork", "--mount-proc", "sh", "-c", "hostname "+host+" && "+script)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

func TestClaimAcrossSimulatedHosts(t *testing.T) {
	needNamespaces(t)
	const n = 4000
	dir := newFarm(t, n)
	busy := claimOnHosts(t, dir, n, 3, 3, func(h int, script string, env ...string) *exec.Cmd {
		return onHost(fmt.Sprintf("node%d", h), script, env...)
	})
	if busy < 2 {
		t.Errorf("only %d simulated hosts claimed anything", busy)
	}
	// Every host left its own per-host lock file; none is held now.
	locks, _ := filepath.Glob(filepath.Join(dir, "MISC", "lock"))
	if len(locks) != 0 {
		t.Errorf("the farm lock is still held: %v", locks)
	}
}

// claimOnHosts runs perHost claimer processes on each of hosts hosts (host
// h's through on(h, script, env...), h from 1) until the n cases of the farm
// in dir are claimed (5 minutes at most), checks that each was claimed
// exactly once, and returns how many hosts claimed anything.
func claimOnHosts(t *testing.T, dir string, n, hosts, perHost int, on func(h int, script string, env ...string) *exec.Cmd) int {
	t.Helper()
	var cmds []*exec.Cmd
	var outs []string
	for h := 1; h <= hosts; h++ {
		var script []string
		for p := 0; p < perHost; p++ {
			out := fmt.Sprintf("%s/out.%d.%d", dir, h, p)
			outs = append(outs, out)
			script = append(script, fmt.Sprintf("OUT=%s timeout 300 %s -test.run=^$ &", out, os.Args[0]))
		}
		script = append(script, "wait")
		cmds = append(cmds, on(h, strings.Join(script, " "), "CASETABLE_TEST_ROLE=claimer", "FARM_DIR="+dir, "HOST="))
	}
	runAll(t, cmds)
	busy := map[int]bool{}
	for i, b := range checkClaimedOnce(t, n, outs) {
		if b {
			busy[i/perHost] = true
		}
	}
	return len(busy)
}

func TestLockOfKilledHolderOnAnotherHostWaitsForAge(t *testing.T) {
	needNamespaces(t)
	dir := newFarm(t, 1)
	holder := onHost("nodeA", "exec "+os.Args[0]+" -test.run=^$", "CASETABLE_TEST_ROLE=holder", "FARM_DIR="+dir, "HOST=")
	out, _ := holder.StdoutPipe()
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "locked\n" {
		t.Fatalf("holder said %q", line)
	}
	syscall.Kill(-holder.Process.Pid, syscall.SIGKILL) // the whole "host"
	holder.Wait()
	token, _ := os.ReadFile(filepath.Join(dir, "MISC", "lock"))
	if !strings.HasPrefix(string(token), "nodeA ") {
		t.Fatalf("lock token %q", token)
	}
	// On another host the dead holder's PID means nothing (in its own PID
	// namespace it may even be alive): only age may break the lock.
	start := time.Now()
	claim := onHost("nodeB", "exec "+os.Args[0]+" -test.run=^$", "CASETABLE_TEST_ROLE=claimer", "FARM_DIR="+dir, "HOST=",
		"OUT="+dir+"/out.B", "CASETABLE_STALE=1500ms")
	claim.Stderr = os.Stderr
	if err := claim.Run(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 1500*time.Millisecond {
		t.Errorf("nodeB took nodeA's lock after %s, before it was 1.5 s old", d)
	}
	if b, _ := os.ReadFile(dir + "/out.B"); strings.TrimSpace(string(b)) != "1" {
		t.Errorf("nodeB claimed %q, want case 1", b)
	}
}
