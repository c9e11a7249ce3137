package rigtest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/farm-hpc/farm/integration/harness"
)

// Node-loss tests, on the 2 nodes of partition spare (the other tests use
// partition rig meanwhile). A power cut kills every process of a node at
// once (its slurmd, the meta-job, the case, the filesystem client); Slurm
// notices after SlurmdTimeout (20 s on the rig) and then requeues the job
// or, with --no-requeue, ends it NODE_FAIL. A dead slurmd alone leaves the
// node's jobs running, cut off from the batch system.

// spare is the sbatch option, passed through farm submit, for the nodes the
// node-loss tests may damage.
const spare = "--partition=spare"

// jobNode is where each running job of the farm runs: job ID -> node number.
func jobNodes(t *testing.T, dir string) map[string]int {
	t.Helper()
	ids := harness.JobIDs(dir)
	out, err := exec.Command("squeue", "-h", "-t", "running", "-j", strings.Join(ids, ","), "-o", "%i %N").CombinedOutput()
	if err != nil {
		t.Fatalf("squeue: %v\n%s", err, out)
	}
	m := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var id string
		var node int
		if _, err := fmt.Sscanf(l, "%s node%d", &id, &node); err == nil {
			m[id] = node
		}
	}
	return m
}

// jobState is Slurm's state of job id (PENDING, RUNNING, NODE_FAIL, ...).
func jobState(t *testing.T, id string) string {
	out, _ := exec.Command("squeue", "-h", "-t", "all", "-j", id, "-o", "%T").Output()
	return strings.TrimSpace(string(out))
}

// openCases are the cases with a start and no end record in one status file
// (none while the file does not exist).
func openCases(t *testing.T, path string) []int64 {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	open := map[int64]bool{}
	var order []int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fl := strings.Fields(sc.Text())
		if len(fl) < 2 {
			continue
		}
		id, err := strconv.ParseInt(fl[1], 10, 64)
		if err != nil {
			continue
		}
		switch fl[0] {
		case "S":
			open[id] = true
			order = append(order, id)
		case "E", "I":
			delete(open, id)
		}
	}
	var out []int64
	for _, id := range order {
		if open[id] {
			out = append(out, id)
		}
	}
	return out
}

// submitting serialises submitSpread.
var submitting sync.Mutex

// submitSpread runs 'farm submit jobs args...' and waits until the jobs
// run, one on each of as many nodes. One farm at a time: the rig's partition puts a job
// on the least loaded node, so jobs of two farms submitted at once could
// interleave and leave one farm on fewer nodes.
func submitSpread(t *testing.T, dir string, jobs int, args ...string) {
	t.Helper()
	submitting.Lock()
	defer submitting.Unlock()
	out := harness.Must(t, dir, append([]string{"submit", strconv.Itoa(jobs)}, args...)...)
	if want := fmt.Sprintf("Submitted %d meta-jobs for run 1 on the slurm backend", jobs); !strings.Contains(out, want) {
		t.Errorf("submit said %q; want %q", out, want)
	}
	waitOrTell(t, 2*time.Minute, fmt.Sprintf("the %d meta-jobs to run", jobs), func() bool { return len(jobNodes(t, dir)) == jobs })
	nodes := map[int]bool{}
	for _, n := range jobNodes(t, dir) {
		nodes[n] = true
	}
	if len(nodes) != jobs {
		t.Errorf("the %d meta-jobs run on nodes %v; want %d different nodes", jobs, jobNodes(t, dir), jobs)
	}
}

// startAll submits the farm's meta-jobs with args and waits until each of
// them runs on a node of its own and has started a case: it returns where
// each job runs.
func startAll(t *testing.T, dir string, jobs int, args ...string) map[string]int {
	t.Helper()
	submitSpread(t, dir, jobs, args...)
	var where map[string]int
	harness.WaitFor(t, 2*time.Minute, fmt.Sprintf("%d meta-jobs running a case each", jobs), func() bool {
		where = jobNodes(t, dir)
		if len(where) < jobs {
			return false
		}
		for id := range where {
			if len(openCases(t, filepath.Join(dir, "STATUSES", "status."+id))) == 0 {
				return false
			}
		}
		return true
	})
	return where
}

// powerCut powers off the node that runs job and returns the case the job
// was running then (0 if the cut came between two cases).
func powerCut(t *testing.T, r *rig, dir, job string, node int) int64 {
	t.Helper()
	r.restore(t, node)
	r.run(t, "poweroff", strconv.Itoa(node))
	open := openCases(t, filepath.Join(dir, "STATUSES", "status."+job))
	if len(open) > 1 {
		t.Fatalf("job %s has %d open cases %v; a meta-job runs one at a time", job, len(open), open)
	}
	if len(open) == 0 {
		return 0
	}
	return open[0]
}

// checkOnce checks that every case but except ran exactly once and
// succeeded, by the cases' own count and by farm Status --json.
func checkOnce(t *testing.T, dir string, n int64, except int64) map[int64]harness.StatusRow {
	t.Helper()
	ran := ranCounts(t, dir)
	st := harness.StatusJSON(t, dir)
	bad := 0
	for id := int64(1); id <= n; id++ {
		if id == except {
			continue
		}
		if ran[id] != 1 || st[id].State != "succeeded" {
			if bad++; bad <= 10 {
				t.Errorf("case %d ran %d times and is %+v; want one successful run", id, ran[id], st[id])
			}
		}
	}
	return st
}

// resubmitCompletes runs farm resubmit and checks that every case has
// succeeded when its run is over.
func resubmitCompletes(t *testing.T, dir string, n int) {
	t.Helper()
	// One meta-job a case left, at most 2: the cut case may be the only
	// one (farm resubmit caps N at the cases, as META does).
	out := harness.Must(t, dir, "resubmit", "2", spare)
	if !strings.Contains(out, "Submitted 2 meta-jobs for run 2") && !strings.Contains(out, "Submitted 1 meta-job for run 2") {
		t.Errorf("resubmit said %q", out)
	}
	out = harness.Must(t, dir, "wait", "--timeout", "5m")
	if want := fmt.Sprintf("%d cases: %d succeeded", n, n); !strings.Contains(out, want) {
		t.Errorf("after the resubmit, wait said %q; want %q", out, want)
	}
}

// powerCutInterruptsOnlyItsCase: a node loses power while its meta-job
// (submitted --no-requeue) runs a case. Slurm ends the job NODE_FAIL; the
// case is reported interrupted, every other case ran once and succeeded,
// and farm resubmit runs the interrupted case and completes the farm.
func powerCutInterruptsOnlyItsCase(t *testing.T, r *rig) {
	const n = 40
	dir := r.farm(t, "coherent", harness.Repeat(ranLine("RUN")+"; sleep 1", n), "0-00:20")
	noRescue(t, dir) // what resubmit does (rescueAfterPowerCut: the rescue within the run)
	where := startAll(t, dir, 2, spare, "--no-requeue")
	job := harness.JobIDs(dir)[1]
	cut := powerCut(t, r, dir, job, where[job])
	t.Logf("node%d, running job %s, powered off during case %d", where[job], job, cut)

	res := harness.Run(t, dir, nil, "wait", "--timeout", "5m")
	// (A cut between two cases may still leave one claimed and never run.)
	if (res.Code != 0 && res.Code != harness.ExitNotAllOK) || (cut != 0 && res.Code != harness.ExitNotAllOK) {
		t.Errorf("wait exit %d (%s%s), want 3: a case was interrupted", res.Code, res.Out, res.Err)
	}
	if s := jobState(t, job); s != "NODE_FAIL" {
		t.Errorf("job %s is %s, want NODE_FAIL", job, s)
	}
	st := checkOnce(t, dir, n, cut)
	if cut != 0 {
		if c := st[cut]; c.State != "interrupted" || c.Job != job || c.Host != fmt.Sprintf("node%d", where[job]) {
			t.Errorf("case %d, cut by the power loss, is %+v; want interrupted, in job %s on node%d", cut, c, job, where[job])
		}
	}
	resubmitCompletes(t, dir, n)
	// The cut case started twice: cut off, then resubmitted. (It ran
	// once or twice by its own count: the power may have gone between its
	// start record and its first command.)
	if rec, ran := harness.ReadRecords(t, dir), ranCounts(t, dir); cut != 0 && (rec.Starts[cut] != 2 || ran[cut] < 1 || ran[cut] > 2) {
		t.Errorf("case %d has %d start records and ran %d times; want 2 starts: cut off, then resubmitted", cut, rec.Starts[cut], ran[cut])
	}
}

// requeuedJobJoinsTheRun: a node loses power; Slurm requeues its meta-job,
// which starts again later under the same job ID, on the other node. While
// it waits, the case it was running is interrupted, not running; once it
// runs again, it claims cases of the same run, in a status file of its own,
// and its output keeps what the first run printed.
func requeuedJobJoinsTheRun(t *testing.T, r *rig) {
	// Enough cases for the other meta-job alone to outlast the ~60 s until
	// the requeued job starts again (node down after 20-30 s, then 30 s of
	// cred_expire).
	const n = 160
	dir := r.farm(t, "coherent", harness.Repeat(ranLine("RUN")+"; sleep 0.5", n), "0-00:20")
	noRescue(t, dir) // what the restarted job and resubmit do without it
	where := startAll(t, dir, 2, spare)
	job := harness.JobIDs(dir)[0]
	cut := powerCut(t, r, dir, job, where[job])
	t.Logf("node%d, running job %s, powered off during case %d", where[job], job, cut)

	harness.WaitFor(t, 2*time.Minute, "Slurm to requeue job "+job, func() bool { return jobState(t, job) == "PENDING" })
	if cut != 0 {
		if c := harness.StatusJSON(t, dir)[cut]; c.State != "interrupted" {
			t.Errorf("while job %s waits to start again, its case %d is %+v; want interrupted", job, cut, c)
		}
	}
	restarted := filepath.Join(dir, "STATUSES", "status."+job+".r1")
	harness.WaitFor(t, 3*time.Minute, "job "+job+" to start again", func() bool {
		_, err := os.Stat(restarted)
		return err == nil
	})
	res := harness.Run(t, dir, nil, "wait", "--timeout", "5m")
	if cut != 0 && res.Code != harness.ExitNotAllOK {
		t.Errorf("wait exit %d (%s%s), want 3: a case was interrupted", res.Code, res.Out, res.Err)
	}
	b, _ := os.ReadFile(restarted)
	if hdr := " " + firstLine(b) + " "; !strings.HasPrefix(hdr, " # farm-status v1 job="+job+" run=1 ") || !strings.Contains(hdr, " restart=1 ") {
		t.Errorf("%s starts %q; want the header of job %s's restart 1 in run 1", restarted, firstLine(b), job)
	}
	if strings.Count(string(b), "\nE ") == 0 {
		t.Errorf("the restarted job %s ran no case; want it to join the run:\n%s", job, b)
	}
	out, _ := os.ReadFile(filepath.Join(dir, "OUTPUT", "slurm-"+job+".out"))
	if c := strings.Count(string(out), "farm: meta-job "+job+" (run 1"); c != 2 || !strings.Contains(string(out), "restarted by the batch system (restart 1)") {
		t.Errorf("OUTPUT/slurm-%s.out tells of %d starts; want both, the second a restart:\n%s", job, c, out)
	}
	st := checkOnce(t, dir, n, cut)
	if cut != 0 && st[cut].State != "interrupted" {
		t.Errorf("case %d is %+v; want interrupted", cut, st[cut])
	}
	resubmitCompletes(t, dir, n)
}

// slurmdDeathLosesNothing: a node's slurmd dies while its meta-job runs.
// The job goes on, cut off from Slurm, which marks the node down and
// requeues the job: for a while the same job runs twice, on two nodes. Each
// incarnation writes its own status file and claims under the farm lock:
// when both are done, every case ran exactly once and succeeded.
func slurmdDeathLosesNothing(t *testing.T, r *rig) {
	// Enough cases for the two meta-jobs to outlast the ~60 s until Slurm
	// restarts the job elsewhere (node down after 20-30 s, then 30 s of
	// cred_expire), so that the two incarnations claim at the same time.
	const n = 400
	dir := r.farm(t, "coherent", harness.Repeat(ranLine("RUN")+"; sleep 0.5", n), "0-00:20")
	where := startAll(t, dir, 2, spare)
	job := harness.JobIDs(dir)[0]
	node := where[job]
	r.restore(t, node)
	r.run(t, "kill-slurmd", strconv.Itoa(node))
	killed := float64(time.Now().UnixMilli()) / 1e3
	t.Logf("node%d's slurmd killed; it runs job %s", node, job)
	// farm wait ends with the jobs Slurm knows of: it may find the last
	// case of the first incarnation, which Slurm lost, still open
	// (interrupted, exit 3). That incarnation finishes by itself.
	if res := harness.Run(t, dir, nil, "wait", "--timeout", "6m"); res.Code != 0 && res.Code != harness.ExitNotAllOK {
		t.Fatalf("wait exit %d: %s%s", res.Code, res.Out, res.Err)
	}
	harness.WaitFor(t, 2*time.Minute, "the meta-job left on node"+strconv.Itoa(node)+" to exit", func() bool {
		out, _ := r.onNode(t, node, "pgrep", "-f", "farm metajob")
		return strings.TrimSpace(out) == ""
	})
	// With rescue (the default), the restarted job rescues its first
	// incarnation's cases: that one, cut off but alive, finds its mark at
	// its next start and runs nothing more — a start it had recorded then
	// is followed by an I record of signal 0 (fenced), and the case runs
	// in the restarted job.
	rec := harness.ReadRecords(t, dir)
	for id := int64(1); id <= n; id++ {
		ends := rec.Ends[id] - rec.Interrupts[id]
		if rec.Starts[id] != 1+rec.Interrupts[id] || ends != 1 || rec.EndStatus[id] != 0 && rec.Interrupts[id] == 0 {
			t.Errorf("case %d: %d start, %d end and %d fenced records, status %d; want one successful run", id, rec.Starts[id], ends, rec.Interrupts[id], rec.EndStatus[id])
		}
	}
	checkOnce(t, dir, n, 0)
	// Both incarnations claimed: the first went on after its slurmd died,
	// the restarted one joined the run.
	first, _ := os.ReadFile(filepath.Join(dir, "STATUSES", "status."+job))
	if e := endsAfter(first, killed); e == 0 {
		t.Errorf("job %s's first incarnation ended no case after its slurmd died", job)
	}
	second, err := os.ReadFile(filepath.Join(dir, "STATUSES", "status."+job+".r1"))
	if err != nil || strings.Count(string(second), "\nE ") == 0 {
		t.Errorf("job %s's restart claimed no case (%v):\n%s", job, err, second)
	}
}

// endsAfter counts the E records in a status file of cases that ended after
// t (Unix seconds).
func endsAfter(file []byte, t float64) int {
	n := 0
	for _, l := range strings.Split(string(file), "\n") {
		var id, st int64
		var start, secs float64
		if _, err := fmt.Sscanf(l, "E %d %d %f %f", &id, &st, &start, &secs); err == nil && start+secs > t {
			n++
		}
	}
	return n
}

func firstLine(b []byte) string {
	l, _, _ := strings.Cut(string(b), "\n")
	return l
}

// noRescue turns off rescue within the run (RESCUE_CHECK=0) in the farm
// in dir: for the tests of what a dead job leaves to 'farm resubmit'.
func noRescue(t *testing.T, dir string) {
	t.Helper()
	edit(t, filepath.Join(dir, "config"), "\nRESCUE_CHECK=60\n", "\nRESCUE_CHECK=0\n")
}

// rescueAfterPowerCut: 2,000 cases of 0.2 s over 4 meta-jobs on the 4
// nodes of partition rig (submitted --no-requeue); a node loses power
// mid-run. Slurm ends its job NODE_FAIL, and a live meta-job, at its next
// check (RESCUE_CHECK=5; the lease's fence, 5 s by default), rescues the dead job's
// cases: the case it was running runs again as attempt 2 (why=rescue), the
// cases it had claimed and not started run once. The run ends with every
// case succeeded, without a resubmit; no other case started twice.
func rescueAfterPowerCut(t *testing.T, r *rig) {
	const n = 2000
	dir := r.farm(t, "coherent", harness.Repeat(ranLine(".")+"; sleep 0.2", n), "0-00:20")
	largeFarmConfig(t, dir)
	edit(t, filepath.Join(dir, "config"), "\nRESCUE_CHECK=60\n", "\nRESCUE_CHECK=5\n")
	where := startAll(t, dir, 4, "--no-requeue")
	harness.WaitFor(t, 2*time.Minute, "400 cases to have run", func() bool { return ranLines(dir) >= 400 })
	job := harness.JobIDs(dir)[2]
	cut := powerCut(t, r, dir, job, where[job])
	t.Logf("node%d, running job %s, powered off during case %d", where[job], job, cut)
	res := harness.Run(t, dir, nil, "wait", "--timeout", "8m")
	if res.Code != 0 {
		t.Errorf("wait exit %d (%s%s), want 0: every case succeeded in the run", res.Code, res.Out, res.Err)
	}
	if s := jobState(t, job); s != "NODE_FAIL" {
		t.Errorf("job %s is %s, want NODE_FAIL", job, s)
	}
	st := checkOnce(t, dir, n, cut)
	rec := harness.ReadRecords(t, dir)
	for id := int64(1); id <= n; id++ {
		if want := 1 + btoi(id == cut); rec.Starts[id] != want {
			t.Errorf("case %d has %d start records, want %d", id, rec.Starts[id], want)
		}
	}
	if cut != 0 {
		// It ran once or twice by its own count: the power may have gone
		// between its start record and its first command.
		if c, ran := st[cut], ranCounts(t, dir)[cut]; c.State != "succeeded" || c.Attempts != 2 || c.Crashes != 1 || c.Run != 1 || ran < 1 || ran > 2 {
			t.Errorf("case %d, cut by the power loss: %+v, ran %d times; want succeeded in run 1, 2 attempts, 1 crash", cut, c, ran)
		}
		files, _ := filepath.Glob(filepath.Join(dir, "STATUSES", "status.*"))
		want := fmt.Sprintf("S %d ", cut)
		found := false
		for _, f := range files {
			b, _ := os.ReadFile(f)
			for _, l := range strings.Split(string(b), "\n") {
				if strings.HasPrefix(l, want) && strings.Contains(l+" ", " attempt=2 why=rescue from=status."+job+" ") {
					found = true
				}
			}
		}
		if !found {
			t.Errorf("no status file records case %d's rescue (attempt=2 why=rescue from=status.%s)", cut, job)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "farm.log")); strings.Contains(string(b), "resubmit") {
		t.Errorf("farm.log shows a resubmit:\n%s", b)
	}
	out, _ := exec.Command("sh", "-c", "cat "+filepath.Join(dir, "OUTPUT", "*")+" | grep -h 'rescue'").Output()
	t.Logf("what the meta-jobs said of the rescue:\n%s", out)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
