package rigtest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

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
	t.Run("MultiNodeCases", func(t *testing.T) { multiNodeCases(t, r) })
	t.Run("MultiNodeTimeLimit", func(t *testing.T) { multiNodeTimeLimit(t, r) })
	t.Run("NodeLoss", func(t *testing.T) {
		t.Run("RunDirsOnSharedFilesystem", func(t *testing.T) { runDirsOnSharedFilesystem(t, r) })
		t.Run("RescueAfterPowerCut", func(t *testing.T) { rescueAfterPowerCut(t, r) })
	})
}

// TestRigSlurmdDeath is a node's slurmd killed while its meta-job runs
// (slurmdDeathLosesNothing). make test leaves it out for time (about 2
// minutes; TestRig/NodeLoss/RescueAfterPowerCut takes a node away with
// its meta-job); make rig-extra runs it, and .ci/run after make test.
func TestRigSlurmdDeath(t *testing.T) {
	r := needRig(t)
	t.Run("SlurmdDeathLosesNothing", func(t *testing.T) { slurmdDeathLosesNothing(t, r) })
}

// TestRigWithoutRescue is what a power cut leaves with rescue off
// (RESCUE_CHECK=0), to 'farm resubmit'. make test leaves it out for time
// (TestRig/NodeLoss/RescueAfterPowerCut cuts a node's power too, with
// rescue); make rig-extra runs it, and .ci/run after make test.
func TestRigWithoutRescue(t *testing.T) {
	r := needRig(t)
	t.Run("PowerCutInterruptsOnlyItsCase", func(t *testing.T) { powerCutInterruptsOnlyItsCase(t, r) })
}

// TestRigRequeue is a node's power cut after which Slurm requeues the
// meta-job (requeuedJobJoinsTheRun). make test leaves it out for time
// (about a minute of waiting for the requeue; TestRig/NodeLoss cuts a
// node's power with rescue); make rig-extra runs it, and .ci/run after
// make test.
func TestRigRequeue(t *testing.T) {
	r := needRig(t)
	t.Run("RequeuedJobJoinsTheRun", func(t *testing.T) { requeuedJobJoinsTheRun(t, r) })
}

// TestRigAdd is farm add on the rig (addWhileRunning). make test leaves it
// out for time (the local backend's TestAddWhileRunning tests the same
// with real processes); make rig-extra runs it, and .ci/run after make
// test.
func TestRigAdd(t *testing.T) {
	r := needRig(t)
	t.Run("AddWhileRunning", func(t *testing.T) { addWhileRunning(t, r) })
}

// TestRigFourThousandCasesDHT is issue 21's farm on the distribute-
// replicate volume (profile dht, client quorum on): 5 runs one after
// another, each a fresh farm of 4,000 cases with 4 meta-jobs on the 4 nodes
// of partition rig, as TestRig/FourThousandCases; in the third, brick 2 (the
// second of the first replica set) is killed with SIGKILL once the meta-jobs
// have started 400 cases, and started again 10 s later, while they claim.
// In every run every case runs exactly once (by the cases' own record, the
// status records and farm Status) and every meta-job ends by itself with
// "No cases left; exiting.". The third run's cases sleep 20 ms each, so
// that the run outlasts the brick's absence and its restart. The fourth
// claims over 4 lanes, its cases sleep 20 ms, and one of its meta-jobs is
// stopped for 25 s mid-run (freezeOneMidRun). The others are trivial.
// make test leaves it out for time (about 6 minutes; TestRig's 4,000-case
// farms run on the other three volumes); make rig-extra runs it, and
// .ci/run after make test.
func TestRigFourThousandCasesDHT(t *testing.T) {
	r := needRig(t)
	for run := 1; run <= 5; run++ {
		name, pre, during := fmt.Sprintf("run%d", run), "", (func(*testing.T, string, string))(nil)
		lanes := ""
		switch run {
		case 3:
			name += "_brick2_killed"
			pre, during = "sleep 0.02; ", func(t *testing.T, dir, ranDir string) { killBrickMidRun(t, r, ranDir) }
		case 4:
			name += "_lanes_frozen"
			lanes, pre, during = "4", "sleep 0.02; ", freezeOneMidRun
		}
		t.Run(name, func(t *testing.T) {
			if lanes != "" {
				t.Setenv("FARM_CLAIM_LANES", lanes)
			}
			farmOf4000(t, r, "dht", pre, during)
		})
	}
}

// TestRigManyMetaJobs is the shortened configuration of BenchmarkRigClaims
// (make bench-cluster) that make rig-extra runs (and .ci/run, after make
// test): 32 meta-jobs on the 4 nodes of
// partition many (8 a node, sharing its CPUs) claim a farm of 640 trivial
// cases on the coherent volume. Every case runs exactly once — by the
// cases' own record and by the status records — the meta-jobs ran on the 4
// nodes, and each ended by itself ("No cases left; exiting."). It reports
// claims per second and efficiency, and asserts nothing about them.
func TestRigManyMetaJobs(t *testing.T) {
	r := needRig(t)
	const jobs, n = 32, 640
	ranDir := t.TempDir()
	dir := r.farm(t, "coherent", harness.Repeat(ranLineAt(ranDir), n), "0-00:30")
	largeFarmConfig(t, dir)
	m := runMany(t, dir, jobs, n, "5m")
	checkMetaJobsEnded(t, dir, jobs)
	jobsGone(t, dir)
	ran := ranCounts(t, ranDir)
	bad := 0
	for id := int64(1); id <= n; id++ {
		if ran[id] != 1 {
			if bad++; bad <= 10 {
				t.Errorf("case %d ran %d times by its own record; want once", id, ran[id])
			}
		}
	}
	if len(ran) != n {
		t.Errorf("%d cases recorded a run; want %d", len(ran), n)
	}
	var hosts []string
	for h := range m.perHost {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	if want := []string{"node1", "node2", "node3", "node4"}; strings.Join(hosts, " ") != strings.Join(want, " ") {
		t.Errorf("the meta-jobs ran on %v; want them spread over %v", m.perHost, want)
	}
	report(t, "%d cases, %d meta-jobs on 4 nodes (per node %v), coherent volume: %.1f claims/s farm-wide, efficiency %.3f (%.1f s from first start to last end; %d meta-jobs ran cases, the last began %.1f s after the first case; Slurm started the last meta-job %.0f s after it)",
		n, jobs, m.perHost, m.claimsPerSec(), m.efficiency(), m.wall, m.working, m.spread, m.lastJob)
}

// killBrickMidRun kills brick 2 of the dht volume once the farm's cases
// (recording their runs in ranDir) have run 400, starts it again 10 s
// later, and checks that the farm was still running when it returned.
func killBrickMidRun(t *testing.T, r *rig, ranDir string) {
	t.Cleanup(func() { r.run(t, "start-bricks", "dht") })
	harness.WaitFor(t, 5*time.Minute, "400 cases to run", func() bool { return ranLines(ranDir) >= 400 })
	before := ranLines(ranDir)
	killed := time.Now()
	r.run(t, "kill-brick", "dht", "2")
	time.Sleep(10 * time.Second)
	during := ranLines(ranDir)
	r.run(t, "start-bricks", "dht")
	back := ranLines(ranDir)
	if back >= 4000 {
		t.Errorf("the farm ended (%d cases run) before the brick was back: it proves nothing of a restart mid-run", back)
	}
	report(t, "brick 2 killed after %d cases had run, %d had run 10 s later, %d when it was back (%.1f s after the kill)",
		before, during, back, time.Since(killed).Seconds())
}

// freezeOneMidRun is a farmOf4000 during for a run with 4 lanes
// (FARM_CLAIM_LANES=4: each meta-job has a home lane of its own) and cases
// of 20 ms: once 400 cases have run, one meta-job is stopped (SIGSTOP) for
// 25 s — longer than a slot waits for its mark (20 s), so that a commit it
// was in is voided by the others — and continued. farmOf4000 then checks
// that every case ran exactly once and every meta-job ended by itself.
func freezeOneMidRun(t *testing.T, dir, ranDir string) {
	harness.WaitFor(t, 5*time.Minute, "400 cases to run", func() bool { return ranLines(ranDir) >= 400 })
	pid := metaJobPID(t, dir)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP of meta-job %d: %v", pid, err)
	}
	defer syscall.Kill(pid, syscall.SIGCONT) // whatever happens below
	before := ranLines(ranDir)
	time.Sleep(25 * time.Second)
	during := ranLines(ranDir)
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatalf("SIGCONT of meta-job %d: %v", pid, err)
	}
	if during >= 4000 {
		t.Errorf("the farm ended (%d cases run) while meta-job %d was stopped: it proves nothing of its resuming", during, pid)
	}
	lanes, _ := filepath.Glob(filepath.Join(dir, "MISC", "lanes.1.*", "index"))
	if len(lanes) != 1 {
		t.Errorf("run 1 has lane indexes %v; want one (4 lanes)", lanes)
	}
	report(t, "4 lanes: meta-job %d stopped for 25 s after %d cases had run; %d had run when it was continued", pid, before, during)
}

// metaJobPID returns the PID of a meta-job ('farm metajob') of the farm in
// dir, on whichever node it runs (the rig's nodes share this machine's
// process table).
func metaJobPID(t *testing.T, dir string) int {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, []byte("metajob")) {
			continue
		}
		env, err := os.ReadFile(filepath.Join(filepath.Dir(p), "environ"))
		if err != nil || !bytes.Contains(env, []byte("FARM_DIR="+dir+"\x00")) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err == nil {
			return pid
		}
	}
	t.Fatalf("no meta-job of %s found in /proc", dir)
	return 0
}

// ranLines counts the lines of the files ran.* in dir: the runs the cases
// recorded so far (while they are being written).
func ranLines(dir string) int {
	files, _ := filepath.Glob(filepath.Join(dir, "ran.*"))
	n := 0
	for _, f := range files {
		b, _ := os.ReadFile(f)
		n += bytes.Count(b, []byte("\n"))
	}
	return n
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
func fourThousandCases(t *testing.T, r *rig, profile string) { farmOf4000(t, r, profile, "", nil) }

// farmOf4000 is fourThousandCases with pre before each case's command, and
// during (if not nil) called once the meta-jobs run, with the farm's
// directory and the one where the cases record their runs. It also checks
// that every meta-job ended by itself ("No cases left; exiting.").
func farmOf4000(t *testing.T, r *rig, profile, pre string, during func(t *testing.T, dir, ranDir string)) {
	const n = 4000
	ranDir := t.TempDir()
	dir := r.farm(t, profile, harness.Repeat(pre+ranLineAt(ranDir), n), "0-00:30")
	largeFarmConfig(t, dir)
	submitSpread(t, dir, 4)
	if during != nil {
		during(t, dir, ranDir)
	}
	out := harness.Must(t, dir, "wait", "--timeout", "4m")
	checkMetaJobsEnded(t, dir, 4)
	jobsGone(t, dir)
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
// RUN<ID> directory per case, the default single_case.sh, OUTPUT=job), runs
// on the nodes and its cases' outputs are where the user looks for them:
// their files in their RUN directories, and what they wrote to their
// standard output and error in farm output.
func runDirsOnSharedFilesystem(t *testing.T, r *rig) {
	const n = 40
	table := harness.Repeat(`echo "case $ID on $HOSTNAME" > out.txt; echo "stdout of $ID"; echo "stderr of $ID" >&2`, n)
	dir := r.farm(t, "coherent", table, "0-00:10")
	harness.Must(t, dir, "submit", "2", spare)
	harness.Must(t, dir, "wait", "--timeout", "5m")
	for id, s := range harness.StatusJSON(t, dir) {
		b, err := os.ReadFile(fmt.Sprintf("%s/RUN%d/out.txt", dir, id))
		if want := fmt.Sprintf("case %d on %s\n", id, s.Host); err != nil || string(b) != want || s.State != "succeeded" {
			t.Errorf("case %d: %+v, RUN%d/out.txt %q (%v); want %q", id, s, id, b, err, want)
		}
		if out := harness.Must(t, dir, "output", fmt.Sprint(id)); out != fmt.Sprintf("stdout of %d\n", id) {
			t.Errorf("farm output %d: %q", id, out)
		}
		if out := harness.Must(t, dir, "output", "--stderr", fmt.Sprint(id)); out != fmt.Sprintf("stderr of %d\n", id) {
			t.Errorf("farm output --stderr %d: %q", id, out)
		}
	}
	if n := len(harness.StatusJSON(t, dir)); n != 40 {
		t.Errorf("%d cases have a status, want 40", n)
	}
}

// checkMetaJobsEnded: the farm in dir had jobs meta-jobs, and each ended by
// itself: its status file holds the Q record "No cases left; exiting.",
// and its Slurm output (OUTPUT/slurm-ID.out) ends with it.
func checkMetaJobsEnded(t *testing.T, dir string, jobs int) {
	t.Helper()
	statuses, _ := filepath.Glob(filepath.Join(dir, "STATUSES", "status.*"))
	if len(statuses) != jobs {
		t.Errorf("%d status files, want one per meta-job (%d)", len(statuses), jobs)
	}
	q := regexp.MustCompile(`(?m)^Q \S+ why=no-cases No cases left; exiting\.$`)
	for _, p := range statuses {
		b, _ := os.ReadFile(p)
		if !q.Match(b) {
			t.Errorf("%s has no Q record \"No cases left; exiting.\": the meta-job did not end by itself", filepath.Base(p))
		}
	}
	outs, _ := filepath.Glob(filepath.Join(dir, "OUTPUT", "*.out"))
	for _, p := range outs {
		b, _ := os.ReadFile(p)
		if !strings.HasSuffix(string(b), "No cases left; exiting.\n") {
			tail := string(b)
			if len(tail) > 2000 {
				tail = tail[len(tail)-2000:]
			}
			t.Errorf("%s does not end with \"No cases left; exiting.\":\n%s", filepath.Base(p), tail)
		}
	}
	if len(outs) != jobs {
		t.Errorf("%d output files, want %d", len(outs), jobs)
	}
}
