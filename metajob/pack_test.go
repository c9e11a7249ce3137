package metajob

import (
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/tablefmt"
	"github.com/google/go-cmp/cmp"
)

// TestPoolWants: what a case takes: its declared needs; undeclared, one
// CPU and no GPU in WHOLE_NODE mode, else the whole job (one at a time,
// unmanaged, as farm always ran cases).
func TestPoolWants(t *testing.T) {
	p := newPool(8, nil, backend.Alloc{GPUs: []string{"0", "1"}, MemMB: 1000})
	none := tablefmt.Needs{GPUs: -1}
	for _, c := range []struct {
		n     tablefmt.Needs
		whole bool
		want  want
	}{
		{none, false, want{nodes: 1, cpus: 8, gpus: 2}},
		{none, true, want{nodes: 1, cpus: 1, gpus: 0, managed: true}},
		{tablefmt.Needs{Declared: true, CPUs: 2, GPUs: -1}, false, want{nodes: 1, cpus: 2, gpus: 0, managed: true}},
		{tablefmt.Needs{Declared: true, GPUs: 1}, false, want{nodes: 1, cpus: 1, gpus: 1, managed: true}},
		{tablefmt.Needs{Declared: true, GPUs: 1, MemMB: 300}, true, want{nodes: 1, cpus: 1, gpus: 1, memMB: 300, managed: true}},
		// nodes=N alone: N whole nodes (one is all this job has).
		{tablefmt.Needs{Declared: true, GPUs: -1, Nodes: 1}, false, want{nodes: 1, cpus: 8, gpus: 2, whole: true, managed: true}},
	} {
		if got := p.wants(c.n, c.whole); got != c.want {
			t.Errorf("wants(%+v, whole node %v) = %+v, want %+v", c.n, c.whole, got, c.want)
		}
	}
}

// TestPoolUnfit: a case that can never start in the job says why.
func TestPoolUnfit(t *testing.T) {
	p := newPool(4, nil, backend.Alloc{GPUs: []string{"0"}, MemMB: 1000})
	for _, c := range []struct {
		w       want
		minTime time.Duration
		left    time.Duration
		why     string
	}{
		{want{cpus: 4, gpus: 1, memMB: 1000}, time.Hour, 2 * time.Hour, ""},
		{want{cpus: 5}, 0, 0, "needs 5 CPUs, the job has 4"},
		{want{cpus: 1, gpus: 2}, 0, 0, "needs 2 GPUs, the job has 1"},
		{want{cpus: 1, memMB: 1001}, 0, 0, "needs 1001 MiB of memory, the job has 1000"},
		{want{cpus: 1}, 30 * time.Minute, 10 * time.Minute, "needs at least 30m0s of run-time, the job has 10m0s left"},
		{want{cpus: 1}, 30 * time.Minute, 0, ""}, // the job's end is not known
	} {
		if got := p.unfit(c.w, c.minTime, c.left); got != c.why {
			t.Errorf("unfit(%+v, %s, %s) = %q, want %q", c.w, c.minTime, c.left, got, c.why)
		}
	}
}

// TestPoolStartsInClaimOrder: cases take their turns in ticket order, each
// once what it needs is free, never more than the job has at once, no GPU
// given twice; a stop wakes every loop still waiting.
func TestPoolStartsInClaimOrder(t *testing.T) {
	p := newPool(4, []int{10, 11, 12, 13}, backend.Alloc{GPUs: []string{"0", "1"}})
	wants := []want{{cpus: 3}, {cpus: 2, gpus: 1}, {cpus: 1, gpus: 1}, {cpus: 1, gpus: 1}, {cpus: 4}}
	var mu sync.Mutex
	var order []int
	busyCPU, busyGPU, most := 0, map[string]bool{}, 0
	var wg sync.WaitGroup
	tickets := make([]uint64, len(wants))
	for i := range wants {
		tickets[i] = p.ticket()
	}
	for i := len(wants) - 1; i >= 0; i-- { // asked in the wrong order
		wg.Add(1)
		go func() {
			defer wg.Done()
			g, ok := p.acquire(tickets[i], wants[i], -1)
			if !ok {
				t.Errorf("case %d: stopped", i)
				return
			}
			mu.Lock()
			order = append(order, i)
			busyCPU += len(g.parts[0].cpus)
			most = max(most, busyCPU)
			for _, d := range g.parts[0].gpus {
				if busyGPU[d] {
					t.Errorf("GPU %s given twice", d)
				}
				busyGPU[d] = true
			}
			mu.Unlock()
			time.Sleep(20 * time.Millisecond)
			mu.Lock()
			busyCPU -= len(g.parts[0].cpus)
			for _, d := range g.parts[0].gpus {
				busyGPU[d] = false
			}
			mu.Unlock()
			p.release(g)
		}()
	}
	wg.Wait()
	if diff := cmp.Diff([]int{0, 1, 2, 3, 4}, order); diff != "" {
		t.Errorf("start order (-want +got):\n%s", diff)
	}
	if most > 4 {
		t.Errorf("%d CPUs busy at once, the job has 4", most)
	}
	// A stop wakes a loop waiting for more than is free.
	g, _ := p.acquire(p.ticket(), want{cpus: 4}, -1)
	done := make(chan bool)
	go func() {
		_, ok := p.acquire(p.ticket(), want{cpus: 1}, -1)
		done <- ok
	}()
	time.Sleep(10 * time.Millisecond)
	p.stop()
	if ok := <-done; ok {
		t.Errorf("a loop waiting at a stop was given its case")
	}
	p.release(g)
}

// TestPoolBinding: logical CPUs are bound to their share of the CPUs the
// job may run on; a managed case's settings follow what it was given.
func TestPoolBinding(t *testing.T) {
	p := newPool(2, []int{0, 1, 2, 3}, backend.Alloc{GPUs: []string{"3", "5"}})
	g, _ := p.acquire(p.ticket(), want{cpus: 1, gpus: 1, managed: true}, 0)
	cpus := p.bound(g)
	if fmt.Sprint(cpus) != "[0 1]" || fmt.Sprint(g.parts[0].gpus) != "[3]" {
		t.Errorf("bound to CPUs %v, GPUs %v; want [0 1] and [3]", cpus, g.parts[0].gpus)
	}
	if s := p.setting(want{cpus: 1, managed: true}, g, cpus, false); !reflect.DeepEqual(s, caseSetting{omp: "2", cuda: "3", setCUDA: true}) {
		t.Errorf("setting %+v", s)
	}
	if s := p.setting(want{cpus: 1, managed: true}, g, cpus, true); s.omp != "" {
		t.Errorf("OMP_NUM_THREADS %q set over the job's own", s.omp)
	}
	if s := p.setting(want{cpus: 2}, g, nil, false); !reflect.DeepEqual(s, caseSetting{}) {
		t.Errorf("an unmanaged case got settings %+v", s)
	}
	over := newPool(4, []int{0, 1}, backend.Alloc{}) // 2 loops a core
	if got := fmt.Sprint(over.shares); got != "[[0] [1] [0] [1]]" {
		t.Errorf("4 logical CPUs over 2: %s", got)
	}
	// A case of 2 CPUs gets both CPUs, whichever loop's share it starts on
	// (TestPackMixedCPUs: loop 2 took the first case and it got logical
	// CPUs 0 and 2, both bound to CPU 0).
	for prefer := range 4 {
		g, _ := over.acquire(over.ticket(), want{cpus: 2, managed: true}, prefer)
		if got := fmt.Sprint(over.bound(g)); got != "[0 1]" {
			t.Errorf("a case of 2 CPUs started by loop %d got logical CPUs %v, bound to %s; want [0 1]", prefer, g.parts[0].cpus, got)
		}
		over.release(g)
	}
}

// TestPoolNodes: a job of several nodes (issue 25). A case that says
// nodes=N gets N distinct nodes with its CPUs on each (N whole nodes when
// it says nothing else); one that does not say nodes= stays on the
// meta-job's own node; the whole job is every node; what can never fit
// says why.
func TestPoolNodes(t *testing.T) {
	p := newNodesPool([]int{4, 4, 4, 2}, []string{"n1", "n2", "n3", "n4"}, nil, backend.Alloc{})
	d := func(nodes, cpus int) tablefmt.Needs {
		return tablefmt.Needs{Declared: true, Nodes: nodes, CPUs: cpus, GPUs: -1}
	}
	for _, c := range []struct {
		n    tablefmt.Needs
		want want
	}{
		{d(2, 2), want{nodes: 2, cpus: 2, managed: true}},
		{d(3, 0), want{nodes: 3, cpus: 4, whole: true, managed: true}},
		// nodes=2 gpus=1: whole nodes' CPUs, one GPU of each.
		{tablefmt.Needs{Declared: true, Nodes: 2, GPUs: 1}, want{nodes: 2, cpus: 4, gpus: 1, whole: true, managed: true}},
		{d(0, 2), want{nodes: 1, cpus: 2, local: true, managed: true}},
		{tablefmt.Needs{GPUs: -1}, want{nodes: 4, cpus: 4, whole: true}},
	} {
		if got := p.wants(c.n, false); got != c.want {
			t.Errorf("wants(%+v) = %+v, want %+v", c.n, got, c.want)
		}
	}
	for _, c := range []struct {
		n   tablefmt.Needs
		why string
	}{
		{d(4, 2), ""},
		{d(4, 0), ""},
		{d(5, 0), "needs 5 nodes, the job has 4"},
		{d(4, 4), "needs 4 nodes of 4 CPUs, the job has 3"},
		{d(0, 4), ""},
		{d(0, 5), "needs 5 CPUs, the job's node n1 has 4 (a case given other nodes says #FARM nodes=N and reaches them with srun or mpirun)"},
	} {
		if got := p.unfit(p.wants(c.n, false), 0, 0); got != c.why {
			t.Errorf("unfit(%+v) = %q, want %q", c.n, got, c.why)
		}
	}
	// Placement: the fullest nodes that fit first, a local case on n1.
	g1, _ := p.acquire(p.ticket(), p.wants(d(0, 1), false), -1)
	g2, _ := p.acquire(p.ticket(), p.wants(d(2, 1), false), -1)
	names, cpus := p.nodesOf(g2)
	if fmt.Sprint(names, cpus) != "[n1 n4] [1 1]" {
		t.Errorf("nodes=2 cpus=1 after a local case was given %v %v; want the fullest nodes, [n1 n4] [1 1]", names, cpus)
	}
	if names, _ := p.nodesOf(g1); fmt.Sprint(names) != "[n1]" || p.bound(g1) != nil {
		t.Errorf("a local case on %v", names)
	}
	g3, _ := p.acquire(p.ticket(), p.wants(d(2, 0), false), -1)
	if names, _ := p.nodesOf(g3); fmt.Sprint(names) != "[n2 n3]" {
		t.Errorf("2 whole nodes: %v, want [n2 n3]", names)
	}
	for _, g := range []grant{g1, g2, g3} {
		p.release(g)
	}
	g4, _ := p.acquire(p.ticket(), p.wants(d(4, 0), false), -1)
	if names, cpus := p.nodesOf(g4); fmt.Sprint(names, cpus) != "[n1 n2 n3 n4] [4 4 4 2]" {
		t.Errorf("4 whole nodes: %v %v", names, cpus)
	}
	p.release(g4)
}

// TestPoolNodesPacking: many cases of 1, 2 and 4 nodes through the pool at
// once, as a job's loops take them: never more CPUs on a node than it
// has, a case's nodes distinct, a case of every node alone.
func TestPoolNodesPacking(t *testing.T) {
	p := newNodesPool([]int{2, 2, 2, 2}, []string{"a", "b", "c", "d"}, nil, backend.Alloc{})
	var mu sync.Mutex
	busy := make([]int, 4)
	running, wholeAlone := 0, true
	var wg sync.WaitGroup
	for i := 0; i < 60; i++ {
		n := tablefmt.Needs{Declared: true, GPUs: -1, Nodes: []int{1, 2, 4, 1, 2}[i%5], CPUs: 1 + i%2}
		if i%10 == 7 {
			n.CPUs = 0 // whole nodes
		}
		w := p.wants(n, false)
		t0 := p.ticket()
		wg.Add(1)
		go func() {
			defer wg.Done()
			g, ok := p.acquire(t0, w, -1)
			if !ok {
				t.Error("stopped")
				return
			}
			mu.Lock()
			seen := map[int]bool{}
			for _, pt := range g.parts {
				if seen[pt.node] {
					t.Errorf("case %+v given node %d twice", w, pt.node)
				}
				seen[pt.node] = true
				busy[pt.node] += len(pt.cpus)
				if busy[pt.node] > 2 {
					t.Errorf("node %d: %d CPUs busy, it has 2", pt.node, busy[pt.node])
				}
			}
			if len(g.parts) != w.nodes {
				t.Errorf("case %+v given %d nodes", w, len(g.parts))
			}
			running++
			if w.whole && w.nodes == 4 && running > 1 {
				wholeAlone = false
			}
			mu.Unlock()
			time.Sleep(time.Millisecond)
			mu.Lock()
			running--
			for _, pt := range g.parts {
				busy[pt.node] -= len(pt.cpus)
			}
			mu.Unlock()
			p.release(g)
		}()
	}
	wg.Wait()
	if !wholeAlone {
		t.Errorf("a case of every node ran beside another")
	}
}

// TestNodeEnv: what a case learns of its nodes.
func TestNodeEnv(t *testing.T) {
	got := nodeEnv([]string{"node1", "node2", "node4"}, []int{4, 2, 4}, "/tmp/x/hostfile", "/tmp/x/machinefile").env()
	want := []string{"FARM_NNODES=3", "FARM_NODELIST=node[1-2,4]", "FARM_CPUS_PER_NODE=2", "FARM_HOSTFILE=/tmp/x/hostfile", "FARM_MACHINEFILE=/tmp/x/machinefile"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("nodeEnv (-want +got):\n%s", diff)
	}
	h, mf := hostfiles([]string{"node1", "node2"}, []int{4, 2})
	if h != "node1 slots=4\nnode2 slots=2\n" || mf != "node1:4\nnode2:2\n" {
		t.Errorf("hostfiles %q, %q", h, mf)
	}
}
