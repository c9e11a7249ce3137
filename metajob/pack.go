package metajob

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/casetable"
)

// The meta-job packs its cases into what its job was given (issue 13):
//
//   - The job's capacity is a number of CPUs — NWHOLE in WHOLE_NODE mode,
//     else what the batch system gave it (backend.Alloc) — its GPUs and its
//     memory. The CPUs are logical: logical CPU i is bound to its share of
//     the CPUs the process may run on (shareCPUs), so that NWHOLE = 2 x
//     cores shares each core between two loops.
//   - A case needs what it declares with #FARM (casetable.Needs); what it
//     does not declare is, in WHOLE_NODE mode, one CPU and no GPU, else the
//     whole job: a farm that declares nothing runs one case at a time, as
//     it always did. Memory and a minimum run-time count only when
//     declared.
//   - The meta-job runs one loop per logical CPU. Each takes the next case
//     in claim order and waits for its turn and its resources: the cases
//     start in claim order (no case is passed by smaller ones for ever),
//     each as soon as what it needs is free.
//   - A case that can never fit the job (it needs more than the job has, or
//     a longer run-time than the job has left) is not started: it is
//     recorded as unfit with the reason (status.Writer.Unfit), and left for
//     the next run.
//   - A case with declared needs, or any case in WHOLE_NODE mode, is
//     managed: bound to its CPUs, with OMP_NUM_THREADS their number (unless
//     the job's environment sets it) and CUDA_VISIBLE_DEVICES its GPUs (when
//     the job has GPUs). A whole-job case runs as cases always did.

// pool is a meta-job's capacity and what of it is free.
type pool struct {
	mu      sync.Mutex
	cond    *sync.Cond
	shares  [][]int  // logical CPU -> the CPUs it is bound to (nil: unbound)
	cpuFree []bool   // logical CPUs
	gpus    []string // device indexes
	gpuFree []bool
	// How many of each are free: what fits looks at, once per wake-up of
	// every waiting loop.
	cpusFree, gpusFree int
	memMB              int64 // 0: unknown, not counted
	memFree            int64
	next               uint64 // the next ticket to hand out
	serving            uint64 // the ticket whose case starts next
	stopped            bool
}

// newPool makes the pool of a job of cpus logical CPUs, bound over the
// CPUs in allowed, with the GPUs and memory of alloc.
func newPool(cpus int, allowed []int, alloc backend.Alloc) *pool {
	p := &pool{
		shares:  shareCPUs(allowed, cpus),
		cpuFree: make([]bool, cpus),
		gpus:    alloc.GPUs,
		gpuFree: make([]bool, len(alloc.GPUs)),
		memMB:   alloc.MemMB,
		memFree: alloc.MemMB,
	}
	for i := range p.cpuFree {
		p.cpuFree[i] = true
	}
	for i := range p.gpuFree {
		p.gpuFree[i] = true
	}
	p.cpusFree, p.gpusFree = cpus, len(alloc.GPUs)
	p.cond = sync.NewCond(&p.mu)
	return p
}

// want is what one case takes from the pool.
type want struct {
	cpus, gpus int
	memMB      int64
	managed    bool // bound, with OMP_NUM_THREADS and CUDA_VISIBLE_DEVICES set
}

// wants is what case needs n take in a job of pool p: the declared needs;
// for the rest, one CPU and no GPU for a case that declares some needs (or
// any case in WHOLE_NODE mode), the whole job for one that declares none.
func (p *pool) wants(n casetable.Needs, wholeNode bool) want {
	w := want{cpus: n.CPUs, gpus: n.GPUs, memMB: n.MemMB, managed: n.Declared || wholeNode}
	small := n.Declared || wholeNode // what it does not say is one CPU and no GPU
	if w.cpus == 0 {
		w.cpus = len(p.cpuFree)
		if small {
			w.cpus = 1
		}
	}
	if w.gpus < 0 {
		w.gpus = len(p.gpus)
		if small {
			w.gpus = 0
		}
	}
	return w
}

// unfit says why a case that wants w, and at least minTime of run-time,
// can never start in this job, whose time left is left (0: unknown); ""
// if it can.
func (p *pool) unfit(w want, minTime, left time.Duration) string {
	switch {
	case w.cpus > len(p.cpuFree):
		return fmt.Sprintf("needs %d CPUs, the job has %d", w.cpus, len(p.cpuFree))
	case w.gpus > len(p.gpus):
		return fmt.Sprintf("needs %d GPUs, the job has %d", w.gpus, len(p.gpus))
	case p.memMB > 0 && w.memMB > p.memMB:
		return fmt.Sprintf("needs %d MiB of memory, the job has %d", w.memMB, p.memMB)
	case minTime > 0 && left > 0 && minTime > left:
		return fmt.Sprintf("needs at least %s of run-time, the job has %s left", minTime.Round(time.Second), left.Round(time.Second))
	}
	return ""
}

// ticket takes the next place in the order the cases start in. The caller
// holds the meta-job's claim lock, so tickets follow the claim order.
func (p *pool) ticket() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.next
	p.next++
	return t
}

// grant is what acquire gave a case.
type grant struct {
	cpus  []int    // logical CPUs
	gpus  []string // devices
	memMB int64
}

// acquire waits for ticket t's turn and for w to be free, takes it and
// returns it; false if the meta-job stopped meanwhile (the turn passes on).
// Logical CPU prefer (the loop's own: its share of the job's CPUs) is taken
// first when it is free, so that a WHOLE_NODE loop's cases run on its share.
func (p *pool) acquire(t uint64, w want, prefer int) (grant, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for !p.stopped && (t != p.serving || !p.fits(w)) {
		p.cond.Wait()
	}
	p.serving = max(p.serving, t+1)
	p.cond.Broadcast()
	if p.stopped {
		return grant{}, false
	}
	var g grant
	if prefer >= 0 && prefer < len(p.cpuFree) && p.cpuFree[prefer] && w.cpus > 0 {
		p.cpuFree[prefer] = false
		g.cpus = append(g.cpus, prefer)
	}
	for i := 0; i < len(p.cpuFree) && len(g.cpus) < w.cpus; i++ {
		if p.cpuFree[i] {
			p.cpuFree[i] = false
			g.cpus = append(g.cpus, i)
		}
	}
	for i := 0; i < len(p.gpuFree) && len(g.gpus) < w.gpus; i++ {
		if p.gpuFree[i] {
			p.gpuFree[i] = false
			g.gpus = append(g.gpus, p.gpus[i])
		}
	}
	if p.memMB > 0 {
		g.memMB = w.memMB
		p.memFree -= w.memMB
	}
	p.cpusFree -= len(g.cpus)
	p.gpusFree -= len(g.gpus)
	return g, true
}

// fits reports whether w is free now. p.mu is held.
func (p *pool) fits(w want) bool {
	return p.cpusFree >= w.cpus && p.gpusFree >= w.gpus && (p.memMB == 0 || p.memFree >= w.memMB)
}

// release gives back what g took.
func (p *pool) release(g grant) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range g.cpus {
		p.cpuFree[c] = true
	}
	for _, d := range g.gpus {
		p.gpuFree[slices.Index(p.gpus, d)] = true
	}
	p.memFree += g.memMB
	p.cpusFree += len(g.cpus)
	p.gpusFree += len(g.gpus)
	p.cond.Broadcast()
}

// stop wakes every loop waiting for its turn: the meta-job is stopping.
func (p *pool) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	p.cond.Broadcast()
}

// bound returns the CPUs the logical CPUs of g are bound to, in order and
// once each; nil when the pool binds nothing.
func (p *pool) bound(g grant) []int {
	if p.shares == nil {
		return nil
	}
	var out []int
	for _, c := range g.cpus {
		for _, b := range p.shares[c] {
			if !slices.Contains(out, b) {
				out = append(out, b)
			}
		}
	}
	slices.Sort(out)
	return out
}

// caseSetting is the environment a managed case gets on top of the job's:
// OMP_NUM_THREADS ("" leaves the job's) and, if setCUDA, CUDA_VISIBLE_DEVICES
// (possibly empty: no GPU). The zero caseSetting leaves the job's.
type caseSetting struct {
	omp     string
	cuda    string
	setCUDA bool
}

// env is s as environment variables.
func (s caseSetting) env() []string {
	var env []string
	if s.omp != "" {
		env = append(env, "OMP_NUM_THREADS="+s.omp)
	}
	if s.setCUDA {
		env = append(env, "CUDA_VISIBLE_DEVICES="+s.cuda)
	}
	return env
}

// setting is the caseSetting of a case granted g, bound to cpus.
func (p *pool) setting(w want, g grant, cpus []int, jobSetsOMP bool) caseSetting {
	var s caseSetting
	if !w.managed {
		return s
	}
	if !jobSetsOMP {
		n := len(g.cpus)
		if cpus != nil {
			n = len(cpus)
		}
		s.omp = fmt.Sprint(n)
	}
	if len(p.gpus) > 0 {
		s.cuda, s.setCUDA = strings.Join(g.gpus, ","), true
	}
	return s
}
