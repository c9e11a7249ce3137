package metajob

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/casetable"
	"github.com/google/go-cmp/cmp"
)

// TestPoolWants: what a case takes: its declared needs; undeclared, one
// CPU and no GPU in WHOLE_NODE mode, else the whole job (one at a time,
// unmanaged, as farm always ran cases).
func TestPoolWants(t *testing.T) {
	p := newPool(8, nil, backend.Alloc{GPUs: []string{"0", "1"}, MemMB: 1000})
	none := casetable.Needs{GPUs: -1}
	for _, c := range []struct {
		n     casetable.Needs
		whole bool
		want  want
	}{
		{none, false, want{cpus: 8, gpus: 2}},
		{none, true, want{cpus: 1, gpus: 0, managed: true}},
		{casetable.Needs{Declared: true, CPUs: 2, GPUs: -1}, false, want{cpus: 2, gpus: 0, managed: true}},
		{casetable.Needs{Declared: true, GPUs: 1}, false, want{cpus: 1, gpus: 1, managed: true}},
		{casetable.Needs{Declared: true, GPUs: 1, MemMB: 300}, true, want{cpus: 1, gpus: 1, memMB: 300, managed: true}},
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
			busyCPU += len(g.cpus)
			most = max(most, busyCPU)
			for _, d := range g.gpus {
				if busyGPU[d] {
					t.Errorf("GPU %s given twice", d)
				}
				busyGPU[d] = true
			}
			mu.Unlock()
			time.Sleep(20 * time.Millisecond)
			mu.Lock()
			busyCPU -= len(g.cpus)
			for _, d := range g.gpus {
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
	if fmt.Sprint(cpus) != "[0 1]" || fmt.Sprint(g.gpus) != "[3]" {
		t.Errorf("bound to CPUs %v, GPUs %v; want [0 1] and [3]", cpus, g.gpus)
	}
	if s := p.setting(want{cpus: 1, managed: true}, g, cpus, false); s != (caseSetting{omp: "2", cuda: "3", setCUDA: true}) {
		t.Errorf("setting %+v", s)
	}
	if s := p.setting(want{cpus: 1, managed: true}, g, cpus, true); s.omp != "" {
		t.Errorf("OMP_NUM_THREADS %q set over the job's own", s.omp)
	}
	if s := p.setting(want{cpus: 2}, g, nil, false); s != (caseSetting{}) {
		t.Errorf("an unmanaged case got settings %+v", s)
	}
	over := newPool(4, []int{0, 1}, backend.Alloc{}) // 2 loops a core
	if got := fmt.Sprint(over.shares); got != "[[0] [1] [0] [1]]" {
		t.Errorf("4 logical CPUs over 2: %s", got)
	}
}
