package casetable

import (
	"bufio"
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
	if os.Getenv("FARM_REQUIRE_CLUSTER") == "1" {
		t.Fatalf("FARM_REQUIRE_CLUSTER=1 but %v", err)
	}
	t.Skipf("CLUSTER TESTS SKIPPED: %v", err)
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
			if profile == "default" && os.Getenv("FARM_RIG_DEFAULT_PROFILE") != "1" {
				t.Skip("known defect, fixed by the claim-core issue: on Gluster's default profile a claim reads a stale cached " +
					"copy of MISC/state rewritten in place by another node; FARM_RIG_DEFAULT_PROFILE=1 runs it")
			}
			const n, nodes = 400, 4
			dir := newFarmAt(t, r.farmDir(t, profile), n)
			start := time.Now()
			busy := claimOnHosts(t, dir, n, nodes, 2, r.onNode)
			t.Logf("%d claims by %d processes on %d nodes in %s", n, 2*nodes, nodes, time.Since(start).Round(time.Millisecond))
			if busy < 3 {
				t.Errorf("only %d of %d nodes claimed anything", busy, nodes)
			}
		})
	}
}

// TestLockOfKilledHolderOnAnotherRigNodeWaitsForAge: a holder of the farm
// lock on node1 is killed; a claimer on node2, through its own filesystem
// client, honours the lock until it is StaleAfter old, then claims.
func TestLockOfKilledHolderOnAnotherRigNodeWaitsForAge(t *testing.T) {
	r := needRig(t)
	dir := newFarmAt(t, r.farmDir(t, "coherent"), 1)
	holder := r.onNode(1, "exec "+os.Args[0]+" -test.run=^$", "CASETABLE_TEST_ROLE=holder", "FARM_DIR="+dir, "HOST=")
	out, _ := holder.StdoutPipe()
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	kill := func() { syscall.Kill(-holder.Process.Pid, syscall.SIGKILL) }
	stuck := time.AfterFunc(time.Minute, kill) // a holder that never says "locked"
	line, _ := bufio.NewReader(out).ReadString('\n')
	stuck.Stop()
	if line != "locked\n" {
		kill()
		holder.Wait()
		t.Fatalf("holder said %q", line)
	}
	kill()
	holder.Wait()
	token, _ := os.ReadFile(filepath.Join(dir, "MISC", "lock"))
	if !strings.HasPrefix(string(token), "node1 ") {
		t.Fatalf("lock token %q, want node1's", token)
	}
	start := time.Now()
	claim := r.onNode(2, "exec timeout 60 "+os.Args[0]+" -test.run=^$", "CASETABLE_TEST_ROLE=claimer", "FARM_DIR="+dir, "HOST=",
		"OUT="+dir+"/out.2", "CASETABLE_STALE=1500ms")
	claim.Stderr = os.Stderr
	if err := claim.Run(); err != nil {
		t.Fatalf("the claimer on node2: %v", err)
	}
	if d := time.Since(start); d < 1500*time.Millisecond {
		t.Errorf("node2 took node1's lock after %s, before it was 1.5 s old", d)
	}
	if b, _ := os.ReadFile(dir + "/out.2"); strings.TrimSpace(string(b)) != "1" {
		t.Errorf("node2 claimed %q, want case 1", b)
	}
}
