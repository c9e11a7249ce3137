package rigtest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/integration/harness"
)

// multiNodeCases is issue 25's test on the rig: one Slurm meta-job holds
// the 4 nodes of partition rig (4 CPUs each) and runs a table that mixes
// cases of 1, 2 and 4 nodes, some with CPUs per node, some whole nodes.
// Every case runs `srun` over its FARM_NODELIST, one task a node, and each
// task records the host it reached. It checks:
//
//   - every case succeeded, once;
//   - each case reached exactly FARM_NNODES distinct nodes, those of its
//     FARM_NODELIST, which its start record (nodes=) names too;
//   - by the status records' start and end times, no node ever had more
//     CPUs of running cases than its 4, and a case of all 4 nodes ran when
//     nothing else did;
//   - cases did run side by side (the job packed them: at some moment
//     three or more ran at once).
func multiNodeCases(t *testing.T, r *rig) {
	type kind struct {
		nodes, cpus int // cpus 0: whole nodes
	}
	kinds := []kind{{2, 2}, {1, 1}, {1, 2}, {2, 1}, {4, 0}, {1, 3}, {2, 0}, {1, 1}, {2, 2}, {1, 4}, {3, 1}, {1, 1}}
	ranDir := t.TempDir()
	var table []string
	for i := 0; i < 36; i++ {
		k := kinds[i%len(kinds)]
		needs := fmt.Sprintf("nodes=%d cpus=%d", k.nodes, k.cpus)
		if k.cpus == 0 {
			needs = fmt.Sprintf("nodes=%d", k.nodes)
		}
		// Each task writes the host it runs on to a file of its own.
		task := `echo "$SLURMD_NODENAME $FARM_NODELIST $FARM_NNODES" > ` + ranDir + `/$ID.$SLURM_PROCID; sleep 1`
		table = append(table, `srun -N $FARM_NNODES -n $FARM_NNODES --ntasks-per-node=1 --nodelist=$FARM_NODELIST --exact -c $FARM_CPUS_PER_NODE bash -c '`+task+`' #FARM `+needs)
	}
	dir := r.farm(t, "coherent", table, "0-00:15")
	harness.Must(t, dir, "submit", "1", "--nodes=4", "--exclusive")
	harness.Must(t, dir, "wait", "--timeout", "8m")

	status := harness.StatusJSON(t, dir)
	for id := int64(1); id <= int64(len(table)); id++ {
		if s := status[id]; s.State != "succeeded" {
			t.Errorf("case %d: %+v; want succeeded", id, s)
		}
	}
	checkNodesReached(t, ranDir, len(table), func(id int) int { return kinds[(id-1)%len(kinds)].nodes })
	most := checkNodePacking(t, dir, len(table), func(id int) (int, int) {
		k := kinds[(id-1)%len(kinds)]
		return k.nodes, cmpOr(k.cpus, 4)
	})
	report(t, "%d cases of 1-4 nodes in one meta-job of 4 nodes: up to %d at once", len(table), most)
}

// checkNodesReached: each of the n cases of a farm reached, by its tasks'
// records in ranDir ("HOST FARM_NODELIST FARM_NNODES" in ID.TASK), exactly
// nodes(ID) distinct nodes, those of its FARM_NODELIST.
func checkNodesReached(t *testing.T, ranDir string, n int, nodes func(id int) int) {
	t.Helper()
	for id := 1; id <= n; id++ {
		k := nodes(id)
		files, _ := filepath.Glob(filepath.Join(ranDir, fmt.Sprintf("%d.*", id)))
		var hosts []string
		var list string
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			fs := strings.Fields(string(b))
			if len(fs) != 3 || fs[2] != strconv.Itoa(k) {
				t.Errorf("case %d: task record %q; want its host, FARM_NODELIST and FARM_NNODES=%d", id, b, k)
				continue
			}
			hosts, list = append(hosts, fs[0]), fs[1]
		}
		slices.Sort(hosts)
		want, err := backend.ExpandHosts(list)
		slices.Sort(want)
		if err != nil || len(hosts) != k || !slices.Equal(hosts, want) || len(slices.Compact(slices.Clone(hosts))) != k {
			t.Errorf("case %d (nodes=%d): its tasks reached %v; FARM_NODELIST=%s: want %d distinct nodes, those of the list", id, k, hosts, list, k)
		}
	}
}

// checkNodePacking checks, by the status records of the farm in dir (n
// cases, case ID of nodes and cpus per node by need), that each case's
// start record names its number of nodes, that no node of 4 CPUs ever had
// more CPUs of running cases, and that a case of all 4 nodes ran alone. It
// returns the most cases that ran at once.
func checkNodePacking(t *testing.T, dir string, n int, need func(id int) (nodes, cpus int)) int {
	t.Helper()
	runs := multiNodeRuns(t, dir)
	if len(runs) != n {
		t.Fatalf("%d cases have a start and an end record; want %d", len(runs), n)
	}
	most := 0
	for _, a := range runs {
		an, _ := need(a.id)
		nodes, err := backend.ExpandHosts(a.nodes)
		if err != nil || len(nodes) != an {
			t.Errorf("case %d (nodes=%d): start record says nodes=%s", a.id, an, a.nodes)
		}
		// At a's start: what else runs, and on which nodes.
		busy, at := map[string]int{}, 0
		for _, b := range runs {
			if b.start > a.start || b.end <= a.start {
				continue
			}
			at++
			bn, bc := need(b.id)
			names, _ := backend.ExpandHosts(b.nodes)
			for _, h := range names {
				busy[h] += bc
			}
			if b.id != a.id && (an == 4 || bn == 4) {
				t.Errorf("case %d (nodes=%d) and case %d (nodes=%d) ran at once: a case of every node must run alone", a.id, an, b.id, bn)
			}
		}
		for h, c := range busy {
			if c > 4 {
				t.Errorf("when case %d started, node %s had %d CPUs of cases running; it has 4", a.id, h, c)
			}
		}
		most = max(most, at)
	}
	if most < 3 {
		t.Errorf("at most %d cases ran at once: the job did not pack them side by side", most)
	}
	return most
}

// cmpOr is a, or b if a is 0.
func cmpOr(a, b int) int {
	if a == 0 {
		return b
	}
	return a
}

// nodeRun is a case's run by its status records.
type nodeRun struct {
	id         int
	start, end float64
	nodes      string
}

// multiNodeRuns reads the farm's status files: each case's start (with
// its nodes=) and end.
func multiNodeRuns(t *testing.T, dir string) []nodeRun {
	files, _ := filepath.Glob(filepath.Join(dir, "STATUSES", "status.*"))
	byID := map[int]*nodeRun{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			fs := strings.Fields(l)
			if len(fs) < 4 || fs[0] != "S" && fs[0] != "E" {
				continue
			}
			id, _ := strconv.Atoi(fs[1])
			if byID[id] == nil {
				byID[id] = &nodeRun{id: id}
			}
			a := byID[id]
			switch fs[0] {
			case "S":
				a.start, _ = strconv.ParseFloat(fs[2], 64)
				for _, f := range fs[4:] {
					if v, ok := strings.CutPrefix(f, "nodes="); ok {
						a.nodes = v
					}
				}
			case "E":
				start, _ := strconv.ParseFloat(fs[3], 64)
				secs, _ := strconv.ParseFloat(fs[4], 64)
				a.end = start + secs
			}
		}
	}
	var out []nodeRun
	for _, a := range byID {
		if a.start > 0 && a.end > 0 {
			out = append(out, *a)
		}
	}
	return out
}

// addWhileRunning is issue 25's farm add on the rig: 4 meta-jobs on the 4
// nodes claim 2,000 cases of 10 ms on the coherent volume while 1,000 more
// are added from the head in 4 batches of 250, the second with --first.
// Every case runs exactly once, in run 1; table.dat ends with IDs
// 1-3000 in order; and, by the claim chain's generations, the --first
// batch was claimed ahead of every case left unclaimed when it was queued.
func addWhileRunning(t *testing.T, r *rig) {
	const n = 2000
	ranDir := t.TempDir()
	dir := r.farm(t, "coherent", harness.Repeat("sleep 0.01; "+ranLineAt(ranDir), n), "0-00:10")
	largeFarmConfig(t, dir)
	edit(t, filepath.Join(dir, "config"), "\nWAIT_FOR_CASES=0\n", "\nWAIT_FOR_CASES=10\n")
	harness.Must(t, dir, "submit", "4")
	harness.WaitFor(t, 2*time.Minute, "cases to run", func() bool { return ranLines(ranDir) >= 200 })
	more := filepath.Join(t.TempDir(), "more.txt")
	os.WriteFile(more, []byte(strings.Repeat("sleep 0.01; "+ranLineAt(ranDir)+"\n", 250)), 0o644)
	for b := 1; b <= 4; b++ {
		args := []string{"add", more}
		if b == 2 {
			args = []string{"add", "--first", more}
		}
		out := harness.Must(t, dir, args...)
		if want := fmt.Sprintf("IDs %d-%d,", n+250*(b-1)+1, n+250*b); !strings.Contains(out, want) {
			t.Fatalf("farm add %d said %q; want %q", b, out, want)
		}
		time.Sleep(time.Second)
	}
	harness.Must(t, dir, "wait", "--timeout", "5m")
	ran := ranCounts(t, ranDir)
	for id := int64(1); id <= n+1000; id++ {
		if ran[id] != 1 {
			t.Errorf("case %d ran %d times by its own record; want once", id, ran[id])
		}
	}
	b, _ := os.ReadFile(filepath.Join(dir, "table.dat"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, strconv.Itoa(i+1)+" ") {
			t.Fatalf("table.dat line %d is %q", i+1, l)
		}
	}
	if len(lines) != n+1000 {
		t.Errorf("table.dat has %d lines, want %d", len(lines), n+1000)
	}
	for id, s := range harness.StatusJSON(t, dir) {
		if s.State != "succeeded" || s.Run != 1 {
			t.Errorf("case %d: %+v; want succeeded in run 1", id, s)
		}
	}
	harness.CheckFirstClaimedFirst(t, dir, [2]int64{n + 251, n + 500})
	report(t, "%d cases, %d added in 4 batches while 4 meta-jobs on 4 nodes ran, coherent volume: each ran once", n+1000, 1000)
}
