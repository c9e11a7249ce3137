package casetable

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
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

// TestStalledClaimerOnAnotherHost: the stalled claimer of
// TestStalledClaimerCannotUndoOrDuplicate runs on another (simulated) host:
// its host name and PIDs mean nothing here, and nothing depends on them.
func TestStalledClaimerOnAnotherHost(t *testing.T) {
	needNamespaces(t)
	stallTrials(t, 20, 200, func(script string, env ...string) *exec.Cmd {
		return onHost("nodeA", script, env...)
	})
}
