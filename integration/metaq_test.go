package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/farm-hpc/farm/integration/harness"
)

// metaqTask writes a task script of the form METAQ's x/demo.sh writes
// (its #METAQ lines, "working hard...", the sham work), which also records
// its run in ranDir/ran: its name, when it started, the GPUs it sees.
func metaqTask(t *testing.T, path, flags, ranDir string) {
	t.Helper()
	os.MkdirAll(filepath.Dir(path), 0o755)
	script := "#!/bin/bash\n" + flags + "#METAQ PROJECT metaq.demo\n\n" +
		`echo "$(basename "$0") $(date +%s.%N) gpus=${CUDA_VISIBLE_DEVICES-unset}" >> ` + ranDir + "/ran\n" +
		"echo \"working hard...\"\nsleep 0.2            # The 'hard work' is a sham!\necho \"done!\"\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestImportMetaqRuns: a METAQ queue of tasks as METAQ's demo writes them,
// two in priority/ and four in todo/ (one in a folder of its own, one
// hidden), imported into a farm and run on the local backend (one node,
// four GPUs by FARM_GPUS): every task runs once, by its own record, the
// priority ones before any todo one; each sees as many GPUs as its
// #METAQ GPUS asked for (its nodes' all when it gave none); MIN_WC_TIME
// 2hr in a job of 3 hours does not keep a task from starting. Importing
// again adds nothing.
func TestImportMetaqRuns(t *testing.T) {
	t.Parallel()
	ranDir := t.TempDir()
	q := filepath.Join(t.TempDir(), "METAQ")
	tasks := []struct{ path, flags, gpus string }{
		{"priority/p1.sh", "#METAQ NODES 1\n#METAQ GPUS 2\n#METAQ MIN_WC_TIME 30min\n", "0,1"},
		{"priority/p2.sh", "#METAQ NODES 1\n#METAQ GPUS 1\n#METAQ MIN_WC_TIME 1:30\n", "0"},
		{"todo/sub/t2.sh", "#METAQ GPUS 1\n", "0"}, // no NODES: one CPU, one GPU
		{"todo/t0.sh", "#METAQ NODES 1\n#METAQ GPUS 3\n#METAQ MIN_WC_TIME 2hr\n", "0,1,2"},
		{"todo/t1.sh", "#METAQ NODES 1\n", "0,1,2,3"}, // the node whole
	}
	for _, tk := range tasks {
		metaqTask(t, filepath.Join(q, tk.path), tk.flags, ranDir)
	}
	metaqTask(t, filepath.Join(q, "todo", ".hidden.sh"), "#METAQ NODES 1\n", ranDir)
	dir := newFarm(t, nil, "0-03:00")
	out := mustFarm(t, dir, "import-metaq", q)
	if !strings.Contains(out, "Importing 5 task(s) of the METAQ queue "+q+": 2 from priority/, 3 from todo/.") {
		t.Errorf("import-metaq said %q", out)
	}
	r := farmIn(t, dir, []string{"FARM_GPUS=0,1,2,3"}, "submit", "1", "--backend", "local")
	if r.Code != 0 {
		t.Fatalf("submit: exit %d: %s", r.Code, r.Err)
	}
	if out := mustFarm(t, dir, "wait", "--timeout", "2m"); !strings.Contains(out, "5 cases: 5 succeeded") {
		t.Fatalf("wait said %q", out)
	}
	ran := metaqRuns(t, ranDir)
	var lastPriority, firstTodo float64 = 0, 1e18
	for _, tk := range tasks {
		name := filepath.Base(tk.path)
		runs := ran[name]
		if len(runs) != 1 {
			t.Errorf("%s ran %d times; want once", tk.path, len(runs))
			continue
		}
		if got := strings.Split(runs[0].gpus, ","); runs[0].gpus != tk.gpus {
			t.Errorf("%s saw GPUs %q (%d); want %q", tk.path, runs[0].gpus, len(got), tk.gpus)
		}
		if strings.HasPrefix(tk.path, "priority/") {
			lastPriority = max(lastPriority, runs[0].at)
		} else {
			firstTodo = min(firstTodo, runs[0].at)
		}
	}
	if len(ran) != len(tasks) {
		names := make([]string, 0, len(ran))
		for n := range ran {
			names = append(names, n)
		}
		sort.Strings(names)
		t.Errorf("the tasks that ran: %v; want the %d of priority/ and todo/, not .hidden.sh", names, len(tasks))
	}
	if lastPriority >= firstTodo {
		t.Errorf("a priority task started at %.3f, after a todo one (%.3f)", lastPriority, firstTodo)
	}
	table, _ := os.ReadFile(filepath.Join(dir, "table.dat"))
	for i, want := range []string{"nodes=1 gpus=2 min_time=30m", "nodes=1 gpus=1 min_time=90s", "gpus=1", "nodes=1 gpus=3 min_time=2h", "nodes=1"} {
		if line := fmt.Sprintf("%d %s/%s #FARM %s\n", i+1, q, tasks[i].path, want); !strings.Contains(string(table), line) {
			t.Errorf("table.dat lacks %q:\n%s", line, table)
		}
	}
	if out := mustFarm(t, dir, "import-metaq", q); !strings.Contains(out, "its 5 task(s) in priority/ and todo/ were imported before") {
		t.Errorf("a second import said %q", out)
	}
}

// metaqRun is one run of a task of metaqTask's: when it started, and the
// GPUs it saw.
type metaqRun struct {
	at   float64
	gpus string
}

// metaqRuns reads the runs metaqTask's tasks recorded in ranDir, by the
// task's file name.
func metaqRuns(t *testing.T, ranDir string) map[string][]metaqRun {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(ranDir, "ran"))
	if err != nil {
		t.Fatal(err)
	}
	ran := map[string][]metaqRun{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(l)
		if len(f) != 3 {
			t.Fatalf("ran: bad line %q", l)
		}
		at, _ := strconv.ParseFloat(f[1], 64)
		ran[f[0]] = append(ran[f[0]], metaqRun{at, strings.TrimPrefix(f[2], "gpus=")})
	}
	return ran
}

// TestImportMetaqWhileRunning: a queue imported into a farm whose run is
// going: its priority tasks are queued as farm add --first queues cases
// (once queued, every claim took them until all were claimed, ahead of the
// run's unclaimed own cases), its todo tasks after; every case runs once.
func TestImportMetaqWhileRunning(t *testing.T) {
	t.Parallel()
	ranDir := t.TempDir()
	dir := newFarm(t, repeat(ranAt(ranDir), 200), "0-00:10")
	setWaitForCases(t, dir, "5")
	q := filepath.Join(t.TempDir(), "METAQ")
	for _, p := range []string{"priority/p1.sh", "priority/p2.sh", "todo/t1.sh", "todo/t2.sh"} {
		metaqTask(t, filepath.Join(q, p), "#METAQ NODES 1\n", ranDir)
	}
	mustFarm(t, dir, "submit", "2", "--backend", "local")
	waitFor(t, time.Minute, "the run's first cases", func() bool { return len(readRan(t, ranDir)) > 0 })
	out := mustFarm(t, dir, "import-metaq", q)
	if !strings.Contains(out, "Added 2 case(s), IDs 201-202, from "+q+"/priority to table.dat.\nRun 1's meta-jobs claim them next, before its other unclaimed cases (within about 5 seconds).") ||
		!strings.Contains(out, "Added 2 case(s), IDs 203-204, from "+q+"/todo to table.dat.\nRun 1's meta-jobs claim them after its other cases.") {
		t.Errorf("import-metaq said %q", out)
	}
	if out := mustFarm(t, dir, "wait", "--timeout", "2m"); !strings.Contains(out, "204 cases: 204 succeeded") {
		t.Fatalf("wait said %q", out)
	}
	own := readRan(t, ranDir)
	for id := int64(1); id <= 200; id++ {
		if own[id] != 1 {
			t.Errorf("case %d ran %d times; want once", id, own[id])
		}
	}
	b, _ := os.ReadFile(filepath.Join(ranDir, "ran"))
	for _, name := range []string{"p1.sh", "p2.sh", "t1.sh", "t2.sh"} {
		if n := strings.Count(string(b), name+" "); n != 1 {
			t.Errorf("%s ran %d times; want once", name, n)
		}
	}
	harness.CheckFirstClaimedFirst(t, dir, [2]int64{201, 202})
}

// TestImportMetaqDemoLocal: the queue METAQ's own x/demo.sh makes
// (vendored in farm/testdata/metaq-demo, its sham 'sleep N' cut to
// 'sleep 0'), imported and run on the local backend, which is one node:
// its one task of NODES 1 runs and succeeds; each of the others is unfit
// for the nodes its #METAQ NODES asks for (2, 3 or 4), not run on fewer.
func TestImportMetaqDemoLocal(t *testing.T) {
	t.Parallel()
	q := filepath.Join(t.TempDir(), "METAQ")
	nodes := map[int64]string{}
	files, _ := filepath.Glob("../farm/testdata/metaq-demo/todo/*.sh")
	if len(files) != 8 {
		t.Fatalf("the demo queue has %d tasks; want 8", len(files))
	}
	sleep := regexp.MustCompile(`sleep [0-9]+`)
	for i, f := range files { // in the order import-metaq numbers them
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		nodes[int64(i+1)] = regexp.MustCompile(`#METAQ NODES ([0-9]+)`).FindStringSubmatch(string(b))[1]
		os.MkdirAll(filepath.Join(q, "todo"), 0o755)
		os.WriteFile(filepath.Join(q, "todo", filepath.Base(f)), sleep.ReplaceAll(b, []byte("sleep 0")), 0o755)
	}
	dir := newFarm(t, nil, "0-00:10")
	mustFarm(t, dir, "import-metaq", q)
	if r := farmIn(t, dir, []string{"FARM_GPUS=0,1,2,3"}, "submit", "1", "--backend", "local"); r.Code != 0 {
		t.Fatalf("submit: exit %d: %s", r.Code, r.Err)
	}
	if r := farmIn(t, dir, nil, "wait", "--timeout", "2m"); r.Code != exitNotAllOK || !strings.Contains(r.Out, "8 cases: 1 succeeded, 0 failed, 0 interrupted, 0 never ran, 7 unfit") {
		t.Fatalf("wait: exit %d: %q", r.Code, r.Out)
	}
	st := statusJSON(t, dir)
	for id, n := range nodes {
		switch {
		case n == "1" && st[id].State != "succeeded":
			t.Errorf("case %d (NODES 1): %+v; want succeeded", id, st[id])
		case n != "1" && (st[id].State != "unfit" || st[id].Reason != "it needs "+n+" nodes, the job has 1"):
			t.Errorf("case %d (NODES %s): %+v; want unfit, needing %s nodes", id, n, st[id], n)
		}
	}
}
