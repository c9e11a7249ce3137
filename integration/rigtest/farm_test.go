package rigtest

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/farm-hpc/farm/integration/harness"
)

// TestRig runs the tests on the rig: first the 4,000-case farms on the 4
// nodes of partition rig, one volume profile after another, each with the
// rig (and this machine's cores) to itself, so that its claims per second
// are its own (each takes seconds); then, one after another on the nodes of
// partition spare, the tests that power nodes off or kill their slurmd.
// go test -run selects them as usual: -run 'TestRig/NodeLoss/PowerCut'.
func TestRig(t *testing.T) {
	r := needRig(t)
	t.Run("FourThousandCases", func(t *testing.T) {
		for _, profile := range []string{"coherent", "latency", "default"} {
			t.Run(profile, func(t *testing.T) { fourThousandCases(t, r, profile) })
		}
	})
	t.Run("NodeLoss", func(t *testing.T) {
		t.Run("RunDirsOnSharedFilesystem", func(t *testing.T) { runDirsOnSharedFilesystem(t, r) })
		t.Run("PowerCutInterruptsOnlyItsCase", func(t *testing.T) { powerCutInterruptsOnlyItsCase(t, r) })
		t.Run("RequeuedJobJoinsTheRun", func(t *testing.T) { requeuedJobJoinsTheRun(t, r) })
		t.Run("SlurmdDeathLosesNothing", func(t *testing.T) { slurmdDeathLosesNothing(t, r) })
	})
}

// TestRigFourThousandCasesDHT is TestRig/FourThousandCases on the
// distribute-replicate volume (profile dht). Not in make test yet: the
// claim core of 149e76d takes generations with link(), which is not
// exclusive there, and claims cases twice (issue 21, point 9); it joins
// TestRig's profiles when the claim core no longer relies on link().
// FARM_RIG_DHT_FARM=1 runs it.
func TestRigFourThousandCasesDHT(t *testing.T) {
	if os.Getenv("FARM_RIG_DHT_FARM") != "1" {
		t.Skip("not in make test until the claim core no longer relies on link(): FARM_RIG_DHT_FARM=1 runs it")
	}
	fourThousandCases(t, needRig(t), "dht")
}

// fourThousandCases: a farm of 4,000 trivial cases on the shared
// filesystem (each case records its run on this machine's disk, outside the
// farm's filesystem), submitted with 'farm submit 4' from the head: the 4 meta-jobs
// run on the 4 nodes of partition rig, each through its own filesystem
// client, and every case runs exactly once — by the cases' own count, by
// the status records, and in farm Status --json, which shows the cases
// spread over the 4 hosts. The volume profiles: Gluster's default options
// (client-side caches), coherent (no client caches), and coherent with
// every brick operation 1 ms late (latency). It reports claims per second
// farm-wide.
func fourThousandCases(t *testing.T, r *rig, profile string) {
	const n = 4000
	ranDir := t.TempDir()
	dir := r.farm(t, profile, harness.Repeat(ranLineAt(ranDir), n), "0-00:30")
	largeFarmConfig(t, dir)
	submitSpread(t, dir, 4)
	out := harness.Must(t, dir, "wait", "--timeout", "15m")
	if !strings.Contains(out, fmt.Sprintf("%d cases: %d succeeded", n, n)) {
		t.Errorf("wait said %q", out)
	}
	ran := ranCounts(t, ranDir)
	rec := harness.ReadRecords(t, dir)
	st := harness.StatusJSON(t, dir)
	perHost := map[string]int{}
	bad := 0
	for id := int64(1); id <= n; id++ {
		if ran[id] != 1 || rec.Starts[id] != 1 || rec.Ends[id] != 1 || st[id].State != "succeeded" {
			if bad++; bad <= 10 {
				t.Errorf("case %d ran %d times, has %d start and %d end records, and is %+v; want exactly one successful run",
					id, ran[id], rec.Starts[id], rec.Ends[id], st[id])
			}
		}
		perHost[st[id].Host]++
	}
	if bad > 10 {
		t.Errorf("... %d cases in all did not run exactly once", bad)
	}
	if len(ran) != n || len(st) != n {
		t.Errorf("%d cases ran and %d have a status; want %d", len(ran), len(st), n)
	}
	var hosts []string
	for h := range perHost {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	if want := []string{"node1", "node2", "node3", "node4"}; strings.Join(hosts, " ") != strings.Join(want, " ") {
		t.Errorf("cases ran on %v; want the 4 meta-jobs on %v", perHost, want)
	}
	secs := rec.Last - rec.First
	report(t, "%d cases, 4 meta-jobs on 4 nodes, %s volume: %.1f claims/s farm-wide (%.1f s from first start to last end); cases per host %v",
		n, profile, float64(n)/secs, secs, perHost)
}

// runDirsOnSharedFilesystem: a new user's farm, as 'farm init' makes it (a
// RUN<ID> directory per case, the default single_case.sh), runs on the nodes
// and its cases' outputs are where the user looks for them.
func runDirsOnSharedFilesystem(t *testing.T, r *rig) {
	const n = 40
	table := harness.Repeat(`echo "case $ID on $HOSTNAME" > out.txt`, n)
	dir := r.farm(t, "coherent", table, "0-00:10")
	harness.Must(t, dir, "submit", "2", spare)
	harness.Must(t, dir, "wait", "--timeout", "5m")
	for id, s := range harness.StatusJSON(t, dir) {
		b, err := os.ReadFile(fmt.Sprintf("%s/RUN%d/out.txt", dir, id))
		if want := fmt.Sprintf("case %d on %s\n", id, s.Host); err != nil || string(b) != want || s.State != "succeeded" {
			t.Errorf("case %d: %+v, RUN%d/out.txt %q (%v); want %q", id, s, id, b, err, want)
		}
	}
	if n := len(harness.StatusJSON(t, dir)); n != 40 {
		t.Errorf("%d cases have a status, want 40", n)
	}
}
