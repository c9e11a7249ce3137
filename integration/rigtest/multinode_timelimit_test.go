package rigtest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/farm-hpc/farm/integration/harness"
)

// multiNodeTimeLimit is issue 38's time limit on a case of several nodes:
// one Slurm meta-job of 2 nodes of partition rig runs a case of nodes=2
// and time=5s (CASE_KILL_GRACE=2) whose srun step runs sleep 1000 on both
// nodes, each task first writing its node and PID, then a case of 1 node
// that waits for the test's word and runs an srun step of its own. It
// checks, with what Slurm and the nodes say:
//
//   - the first case is recorded timed out (a T record) after its limit,
//     within limit + grace + 30 s (for srun's own handling of the signal);
//   - the step's tasks are gone from both nodes (looked for in each node's
//     namespaces, /proc/PID), and its step ended (squeue -s, then sacct),
//     while the meta-job still runs (its job RUNNING, in the second case):
//     farm's end of the case, not Slurm's of the job, ended them;
//   - the meta-job went on to the second case, whose srun on the freed
//     nodes succeeded.
func multiNodeTimeLimit(t *testing.T, r *rig) {
	const limit, grace, margin = 5 * time.Second, 2 * time.Second, 30 * time.Second
	ranDir := t.TempDir()
	release := filepath.Join(ranDir, "release")
	task := `echo "$SLURMD_NODENAME $$" > ` + ranDir + `/task.$SLURM_PROCID; exec sleep 1000`
	table := []string{
		`srun -N 2 -n 2 --ntasks-per-node=1 --nodelist=$FARM_NODELIST --exact bash -c '` + task + `' #FARM nodes=2 time=` + limit.String(),
		`echo started > ` + ranDir + `/next.start; i=0; while [ ! -e ` + release + ` ] && [ $i -lt 1500 ]; do sleep 0.2; i=$((i+1)); done; ` +
			`srun -N 1 -n 1 --nodelist=$FARM_NODELIST --exact hostname > ` + ranDir + `/next.host #FARM nodes=1 cpus=1`,
	}
	dir := r.farm(t, "coherent", table, "0-00:10")
	edit(t, filepath.Join(dir, "config"), "\nCASE_KILL_GRACE=30\n", fmt.Sprintf("\nCASE_KILL_GRACE=%g\n", grace.Seconds()))
	harness.Must(t, dir, "submit", "1", "--nodes=2", "--exclusive")
	ids := harness.JobIDs(dir)
	if len(ids) != 1 {
		t.Fatalf("the farm recorded jobs %v; want one", ids)
	}
	job := ids[0]

	tasks := stepTasks(t, r, ranDir)

	// The T record of case 1.
	var tr caseEnd
	harness.WaitFor(t, limit+grace+margin+30*time.Second, "case 1's end record", func() bool {
		var ok bool
		tr, ok = caseEnds(t, dir)[1]
		return ok
	})
	seen := time.Now()
	if tr.kind != 'T' {
		t.Fatalf("case 1 ended with a %c record (status %d); want T (timed out)", tr.kind, tr.status)
	}
	ended := unixTime(tr.start + tr.secs)
	if d := time.Duration(tr.secs * float64(time.Second)); d < limit || d > limit+grace+margin {
		t.Errorf("case 1 timed out after %s; want between its limit %s and %s", d, limit, limit+grace+margin)
	}

	// Its tasks, on both nodes, and its step.
	gone := stepEnded(t, r, job, tasks, ended, ended.Add(grace+margin))

	// The meta-job's next case.
	harness.WaitFor(t, margin, "case 2 to start", func() bool {
		_, err := os.Stat(filepath.Join(ranDir, "next.start"))
		return err == nil
	})
	var next2 float64
	for _, run := range multiNodeStarts(t, dir) {
		if run.id == 2 {
			next2 = run.start
		}
	}
	if next2 < tr.start+tr.secs-0.01 {
		t.Errorf("case 2 started at %.3f, before case 1 ended at %.3f", next2, tr.start+tr.secs)
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if w := harness.Run(t, dir, nil, "wait", "--timeout", "3m"); w.Code != harness.ExitNotAllOK || !strings.Contains(w.Out, "1 succeeded, 0 failed, 0 interrupted, 1 timed out") {
		t.Errorf("farm wait: exit %d, %q %q; want exit %d (a case did not succeed): 1 succeeded, 1 timed out", w.Code, w.Out, w.Err, harness.ExitNotAllOK)
	}
	status := harness.StatusJSON(t, dir)
	if s := status[1]; s.State != "timed out" {
		t.Errorf("case 1: %+v; want timed out", s)
	}
	if s := status[2]; s.State != "succeeded" {
		t.Errorf("case 2: %+v; want succeeded", s)
	}
	if b, _ := os.ReadFile(filepath.Join(ranDir, "next.host")); !strings.HasPrefix(string(b), "node") {
		t.Errorf("case 2's srun wrote %q; want its node's name", b)
	}
	report(t, "case of 2 nodes, time=%s, grace %s: T record (signal %d) after %.2fs (seen %.1fs after its end); its tasks on %s and %s found gone %v after, step %s gone from squeue -s %s after (sacct: %s, end %s); case 2 started %.2fs after case 1's end",
		limit, grace, tr.status, tr.secs, seen.Sub(ended).Seconds(), tasks[0].node, tasks[1].node, gone.tasks, job+".0", gone.step, gone.state, gone.end, next2-(tr.start+tr.secs))
}

// taskRec is a task of a case's step by its own record: its node and PID.
type taskRec struct{ node, pid string }

// stepTasks waits for the records of the 2 tasks of the step of
// multiNodeTimeLimit's first case (task.0, task.1 in ranDir), and checks
// that they run sleep 1000 on 2 distinct nodes.
func stepTasks(t *testing.T, r *rig, ranDir string) []taskRec {
	t.Helper()
	var tasks []taskRec
	for i := 0; i < 2; i++ {
		p := filepath.Join(ranDir, fmt.Sprintf("task.%d", i))
		harness.WaitFor(t, 3*time.Minute, "the step's task "+strconv.Itoa(i)+" to start", func() bool {
			b, err := os.ReadFile(p)
			return err == nil && strings.HasSuffix(string(b), "\n")
		})
		b, _ := os.ReadFile(p)
		fs := strings.Fields(string(b))
		if len(fs) != 2 || !strings.HasPrefix(fs[0], "node") {
			t.Fatalf("task %d recorded %q; want its node and PID", i, b)
		}
		tasks = append(tasks, taskRec{fs[0], fs[1]})
	}
	if tasks[0].node == tasks[1].node {
		t.Fatalf("both tasks ran on %s; want one on each of the case's 2 nodes", tasks[0].node)
	}
	for _, tk := range tasks {
		if !r.sleepAlive(t, tk.node, tk.pid) {
			t.Fatalf("the task on %s (PID %s) is not running sleep 1000 before the limit", tk.node, tk.pid)
		}
	}
	return tasks
}

// stepGone is when a case's step was found ended, after the case's end:
// its tasks, and the step in squeue -s; and what sacct says of the step.
type stepGone struct {
	tasks      []time.Duration
	step       time.Duration
	state, end string
}

// stepEnded checks that the tasks of step 0 of job, which ran the case
// that ended at ended, are gone from their nodes and the step from squeue
// -s by deadline, while the job still runs, and that sacct says the step
// ended.
func stepEnded(t *testing.T, r *rig, job string, tasks []taskRec, ended, deadline time.Time) stepGone {
	t.Helper()
	var g stepGone
	for _, tk := range tasks {
		if !waitUntil(deadline, func() bool { return !r.sleepAlive(t, tk.node, tk.pid) }) {
			t.Errorf("the step's task on %s (PID %s) still runs sleep 1000 %s after case 1 timed out", tk.node, tk.pid, time.Since(ended).Round(time.Second))
			continue
		}
		g.tasks = append(g.tasks, time.Since(ended).Round(time.Millisecond))
	}
	step := job + ".0"
	if !waitUntil(deadline, func() bool { return !slices.Contains(jobSteps(t, job), step) }) {
		t.Errorf("step %s still listed by squeue -s %s after case 1 timed out", step, time.Since(ended).Round(time.Second))
	} else {
		g.step = time.Since(ended).Round(time.Millisecond)
	}
	if st := jobState(t, job); st != "RUNNING" {
		t.Errorf("job %s is %q when its step's end is checked; want RUNNING (in case 2): Slurm's end of the job would end the step anyway", job, st)
	}
	ok := func() bool { return g.state != "" && g.state != "RUNNING" && g.state != "PENDING" }
	waitUntil(time.Now().Add(30*time.Second), func() bool {
		g.state, g.end = stepAcct(step)
		return ok()
	})
	if !ok() {
		t.Errorf("sacct says step %s is %q; want it ended", step, g.state)
	}
	return g
}

// sleepAlive reports whether process pid on node (nodeN) runs sleep 1000,
// as the node's own /proc says.
func (r *rig) sleepAlive(t *testing.T, node, pid string) bool {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimPrefix(node, "node"))
	if err != nil {
		t.Fatalf("node %q", node)
	}
	out, err := r.onNode(t, n, "cat", "/proc/"+pid+"/cmdline")
	return err == nil && out == "sleep\x001000\x00"
}

// jobSteps lists the steps of job that squeue -s shows.
func jobSteps(t *testing.T, job string) []string {
	out, err := exec.Command("squeue", "-h", "-s", "-j", job, "-o", "%i").CombinedOutput()
	if err != nil {
		t.Logf("squeue -s -j %s: %v: %s", job, err, out)
	}
	return strings.Fields(string(out))
}

// stepAcct is what sacct says of step: its state and end.
func stepAcct(step string) (state, end string) {
	out, _ := exec.Command("sacct", "-n", "-P", "-j", step, "-o", "JobID,State,End").Output()
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Split(l, "|"); len(f) == 3 && f[0] == step {
			return f[1], f[2]
		}
	}
	return "", ""
}

// caseEnd is a case's end record: E, I or T, its status or signal, its
// start and seconds.
type caseEnd struct {
	kind        byte
	status      int
	start, secs float64
}

// caseEnds reads the last end record of each case of the farm in dir.
func caseEnds(t *testing.T, dir string) map[int64]caseEnd {
	t.Helper()
	out := map[int64]caseEnd{}
	files, _ := filepath.Glob(filepath.Join(dir, "STATUSES", "status.*"))
	for _, name := range files {
		fh, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) < 5 || (f[0] != "E" && f[0] != "I" && f[0] != "T") {
				continue
			}
			id, _ := strconv.ParseInt(f[1], 10, 64)
			var e caseEnd
			e.kind = f[0][0]
			e.status, _ = strconv.Atoi(f[2])
			e.start, _ = strconv.ParseFloat(f[3], 64)
			e.secs, _ = strconv.ParseFloat(f[4], 64)
			out[id] = e
		}
		fh.Close()
	}
	return out
}

// multiNodeStarts reads the start (S) records of the farm in dir.
func multiNodeStarts(t *testing.T, dir string) []nodeRun {
	t.Helper()
	var out []nodeRun
	files, _ := filepath.Glob(filepath.Join(dir, "STATUSES", "status.*"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Fields(l)
			if len(f) < 3 || f[0] != "S" {
				continue
			}
			var a nodeRun
			a.id, _ = strconv.Atoi(f[1])
			a.start, _ = strconv.ParseFloat(f[2], 64)
			out = append(out, a)
		}
	}
	return out
}

// waitUntil polls cond until it holds (true) or deadline passes (false).
func waitUntil(deadline time.Time, cond func() bool) bool {
	for !cond() {
		if time.Now().After(deadline) {
			return cond()
		}
		time.Sleep(100 * time.Millisecond)
	}
	return true
}

// unixTime is the time of s, Unix seconds.
func unixTime(s float64) time.Time {
	return time.Unix(0, int64(s*1e9))
}
