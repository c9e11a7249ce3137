package casetable

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/farm-hpc/farm/internal/testhost"
)

// Hosts are simulated with Linux namespaces (testhost): each "host" has its
// own host name and PIDs (so a PID in another host's lock may be dead — or
// alive as some other process — here), and shares this filesystem as
// cluster nodes share a parallel filesystem. Needs root and unshare(1);
// skipped otherwise.

func TestClaimAcrossSimulatedHosts(t *testing.T) {
	testhost.NeedNamespaces(t)
	const n = 4000
	dir := newFarm(t, n)
	busy := claimOnHosts(t, dir, n, 3, 3, func(h int, script string, env ...string) *exec.Cmd {
		return testhost.Command(fmt.Sprintf("node%d", h), script, env...)
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
	testhost.NeedNamespaces(t)
	stallTrials(t, "other", 20, 200, func(script string, env ...string) *exec.Cmd {
		return testhost.Command("nodeA", script, env...)
	})
}
