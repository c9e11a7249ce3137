package casetable

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/farm-hpc/farm/integration/harness"
	"github.com/farm-hpc/farm/internal/testreq"
)

// Claims across real nodes: the claimers run on the nodes of the cluster
// rig (integration/cluster-up), each node with its own network, host name,
// PIDs and FUSE client of the Gluster volume that holds the farm. These
// tests skip when the rig is not up, unless FARM_REQUIRE_CLUSTER=1.

type rigNodes struct {
	script string // integration/cluster
	mnt    string // where every node mounts the volumes
}

func needRig(t *testing.T) rigNodes {
	t.Helper()
	env, err := harness.RigEnv()
	r := rigNodes{script: filepath.Join(harness.Root(), "integration", "cluster"), mnt: env["FARM_CLUSTER_MNT"]}
	if err == nil {
		if err = exec.Command(r.script, "exec", "1", "true").Run(); err == nil {
			return r
		}
		err = fmt.Errorf("integration/cluster exec 1 true: %v", err)
	}
	testreq.Skip(t, "FARM_REQUIRE_CLUSTER", "CLUSTER TESTS SKIPPED: "+err.Error())
	return r
}

// farmDir makes a directory on the volume of profile, removed after a test
// that passed.
func (r rigNodes) farmDir(t *testing.T, profile string) string {
	t.Helper()
	dir := filepath.Join(r.mnt, profile, fmt.Sprintf("casetable-%s-%06d", strings.ReplaceAll(t.Name(), "/", "_"), rand.IntN(1e6)))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the farm is kept in %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	return dir
}

// onNode runs script with sh on node n, in a process group of its own.
func (r rigNodes) onNode(n int, script string, env ...string) *exec.Cmd {
	cmd := exec.Command(r.script, "exec", strconv.Itoa(n), "sh", "-c", script)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// TestClaimAcrossRigNodes: 8 claimers, 2 on each of the 4 nodes, share a
// table on the shared filesystem: every case is claimed exactly once.
func TestClaimAcrossRigNodes(t *testing.T) {
	r := needRig(t)
	for _, profile := range []string{"coherent", "default"} {
		t.Run(profile, func(t *testing.T) {
			const n, nodes = 400, 4
			dir := newFarmAt(t, r.farmDir(t, profile), n)
			start := time.Now()
			// 100 ms of work per claim, as a meta-job has: on Gluster a
			// commit takes 20-40 ms when 8 clients contend, and a claimer
			// that claimed again at once would win most races against the
			// others, which must first read what they lost to.
			busy := claimOnHosts(t, dir, n, nodes, 2, func(h int, script string, env ...string) *exec.Cmd {
				return r.onNode(h, script, append(env, "CLAIM_WORK=100ms")...)
			})
			t.Logf("%d claims by %d processes on %d nodes in %s", n, 2*nodes, nodes, time.Since(start).Round(time.Millisecond))
			if busy < 3 {
				t.Errorf("only %d of %d nodes claimed anything", busy, nodes)
			}
		})
	}
}

// TestStalledClaimerOnRigNode: a claimer on node1 stopped in the middle of
// a commit while 3 claimers on node2 claim every case through their own
// filesystem client, then resumed, claims nothing twice; on Gluster's
// default profile too, where node1's client caches what it read.
func TestStalledClaimerOnRigNode(t *testing.T) {
	r := needRig(t)
	for _, profile := range []string{"coherent", "default"} {
		t.Run(profile, func(t *testing.T) {
			for _, stage := range []string{"write", "mark"} {
				dir := newFarmAt(t, r.farmDir(t, profile), 60)
				stalled := stalledClaimer(t, dir, dir+"/out.stalled", stage, 2, func(script string, env ...string) *exec.Cmd {
					return r.onNode(1, script, env...)
				})
				var outs []string
				var script []string
				for p := 0; p < 3; p++ {
					out := fmt.Sprintf("%s/out.2.%d", dir, p)
					outs = append(outs, out)
					script = append(script, fmt.Sprintf("OUT=%s timeout 120 %s -test.run=^$ &", out, os.Args[0]))
				}
				script = append(script, "wait")
				runAll(t, []*exec.Cmd{r.onNode(2, strings.Join(script, " "), "CASETABLE_TEST_ROLE=claimer", "FARM_DIR="+dir)})
				syscall.Kill(stalled.Process.Pid, syscall.SIGCONT)
				done := make(chan error, 1)
				go func() { done <- stalled.Wait() }()
				select {
				case err := <-done:
					if err != nil {
						t.Fatalf("%s: the resumed claimer: %v", stage, err)
					}
				case <-time.After(2 * time.Minute):
					syscall.Kill(-stalled.Process.Pid, syscall.SIGKILL)
					t.Fatalf("%s: the resumed claimer did not end", stage)
				}
				checkClaimedOnce(t, 60, append(outs, dir+"/out.stalled"))
			}
		})
	}
}
