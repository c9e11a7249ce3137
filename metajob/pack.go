package metajob

import (
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/tablefmt"
)

// The meta-job packs its cases into what its job was given (issue 13):
//
//   - The job's capacity is a number of CPUs — NWHOLE in WHOLE_NODE mode,
//     else what the batch system gave it (backend.Alloc) — its GPUs and its
//     memory. The CPUs are logical: logical CPU i is bound to its share of
//     the CPUs the process may run on (shareCPUs), so that NWHOLE = 2 x
//     cores shares each core between two loops.
//   - A case needs what it declares with #FARM (tablefmt.Needs); what it
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
	mu     sync.Mutex
	cond   *sync.Cond
	shares [][]int  // node 0's logical CPU -> the CPUs it is bound to (nil: unbound)
	nodes  []*node  // the job's nodes, node 0 (the one the meta-job runs on) first
	gpus   []string // device indexes, the same on every node
	memMB  int64    // per node; 0: unknown, not counted
	// hosts is the job's node names, node 0 first; names a node set.
	hosts   []string
	next    uint64 // the next ticket to hand out
	serving uint64 // the ticket whose case starts next
	stopped bool
}

// node is one node of the pool and what of it is free. Node 0's logical
// CPUs are bound (pool.shares); another node's are counted only: a case
// reaches them through the batch system (srun, mpirun), which binds there.
type node struct {
	cpuFree []bool // logical CPUs
	gpuFree []bool // as pool.gpus
	// How many of each are free: what fits looks at, once per wake-up of
	// every waiting loop.
	cpusFree, gpusFree int
	memFree            int64
}

// newPool makes the pool of a job of cpus logical CPUs, bound over the
// CPUs in allowed, with the GPUs and memory of alloc, on one node.
func newPool(cpus int, allowed []int, alloc backend.Alloc) *pool {
	return newNodesPool([]int{cpus}, nil, allowed, alloc)
}

// newNodesPool makes the pool of a job of len(cpus) nodes named hosts,
// with cpus[i] logical CPUs on node i (node 0's bound over the CPUs in
// allowed) and the GPUs and memory of alloc on each.
func newNodesPool(cpus []int, hosts []string, allowed []int, alloc backend.Alloc) *pool {
	p := &pool{
		shares: shareCPUs(allowed, cpus[0]),
		gpus:   alloc.GPUs,
		memMB:  alloc.MemMB,
		hosts:  hosts,
	}
	for _, n := range cpus {
		nd := &node{cpuFree: make([]bool, n), gpuFree: make([]bool, len(alloc.GPUs)), memFree: alloc.MemMB}
		for i := range nd.cpuFree {
			nd.cpuFree[i] = true
		}
		for i := range nd.gpuFree {
			nd.gpuFree[i] = true
		}
		nd.cpusFree, nd.gpusFree = n, len(alloc.GPUs)
		p.nodes = append(p.nodes, nd)
	}
	p.cond = sync.NewCond(&p.mu)
	return p
}

// host is node k's name, or its number from 1 if the pool was not told.
func (p *pool) host(k int) string {
	if k < len(p.hosts) {
		return p.hosts[k]
	}
	return strconv.Itoa(k + 1)
}

// size is how much of the job w takes, to start the larger of waiting
// cases first: CPUs over all its nodes.
func (p *pool) size(w want) int {
	if w.whole {
		return w.nodes * len(p.nodes[0].cpuFree)
	}
	return w.nodes * w.cpus
}

// cpus is the number of logical CPUs of all the job's nodes: how many
// cases can run at once.
func (p *pool) cpus() int {
	n := 0
	for _, nd := range p.nodes {
		n += len(nd.cpuFree)
	}
	return n
}

// want is what one case takes from the pool.
type want struct {
	nodes      int // how many nodes, each with cpus, gpus and memMB
	cpus, gpus int
	memMB      int64
	whole      bool // every CPU and the memory of each of its nodes (and gpus GPUs of each)
	local      bool // on node 0 only: it does not say nodes=, so it may not reach others
	managed    bool // bound, with OMP_NUM_THREADS and CUDA_VISIBLE_DEVICES set
}

// wants is what case needs n take in a job of pool p: the declared needs;
// for the rest, one CPU and no GPU for a case that declares some needs (or
// any case in WHOLE_NODE mode), the whole job for one that declares none.
// A case that declares nodes=N and no cpus takes its N nodes whole: every
// CPU and the memory of each, and every GPU unless it says gpus=. Only a case that declares nodes= (or takes the whole job) is
// given nodes other than the meta-job's own: the others run where the
// meta-job does, as they always did, and cannot be expected to srun.
func (p *pool) wants(n tablefmt.Needs, wholeNode bool) want {
	w := want{nodes: n.Nodes, cpus: n.CPUs, gpus: n.GPUs, memMB: n.MemMB, managed: n.Declared || wholeNode}
	small := n.Declared || wholeNode // what it does not say is one CPU and no GPU
	if n.Nodes > 0 && n.CPUs == 0 {
		small, w.whole = false, true // nodes=N: N whole nodes
	}
	if w.nodes == 0 {
		w.nodes = len(p.nodes)
		if small {
			w.nodes, w.local = 1, len(p.nodes) > 1
		}
	}
	if !small && len(p.nodes) > 1 {
		w.whole = true
	}
	if w.cpus == 0 {
		w.cpus = len(p.nodes[0].cpuFree)
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
	if len(p.nodes) == 1 || w.local {
		switch {
		case w.nodes > 1:
			return fmt.Sprintf("needs %d nodes, the job has 1", w.nodes)
		case w.cpus > len(p.nodes[0].cpuFree) && !w.local:
			return fmt.Sprintf("needs %d CPUs, the job has %d", w.cpus, len(p.nodes[0].cpuFree))
		case w.cpus > len(p.nodes[0].cpuFree):
			return fmt.Sprintf("needs %d CPUs, the job's node %s has %d (a case given other nodes says #FARM nodes=N and reaches them with srun or mpirun)", w.cpus, p.host(0), len(p.nodes[0].cpuFree))
		}
	}
	switch {
	case w.nodes > len(p.nodes):
		return fmt.Sprintf("needs %d nodes, the job has %d", w.nodes, len(p.nodes))
	case w.gpus > len(p.gpus):
		return fmt.Sprintf("needs %d GPUs, the job has %d", w.gpus, len(p.gpus))
	case p.memMB > 0 && w.memMB > p.memMB:
		return fmt.Sprintf("needs %d MiB of memory, the job has %d", w.memMB, p.memMB)
	case minTime > 0 && left > 0 && minTime > left:
		return fmt.Sprintf("needs at least %s of run-time, the job has %s left", minTime.Round(time.Second), left.Round(time.Second))
	}
	if big := p.bigEnough(w); big < w.nodes {
		return fmt.Sprintf("needs %d nodes of %d CPUs, the job has %d", w.nodes, w.cpus, big)
	}
	return ""
}

// bigEnough is the number of the job's nodes that have the CPUs w needs
// on each.
func (p *pool) bigEnough(w want) int {
	k := 0
	for _, nd := range p.nodes {
		if w.whole || len(nd.cpuFree) >= w.cpus {
			k++
		}
	}
	return k
}

// ticket takes the next place in the order the cases start in. The
// meta-job's owner alone takes them (owner.hand): they follow claim order.
func (p *pool) ticket() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.next
	p.next++
	return t
}

// grant is what acquire gave a case: a part on each of its nodes.
type grant struct {
	parts []part // ascending by node
}

// part is what a case was given on one node.
type part struct {
	node  int
	cpus  []int    // logical CPUs
	gpus  []string // devices
	memMB int64
}

// local is the part of g on node 0, the meta-job's own, if it has one.
func (g grant) local() (part, bool) {
	if len(g.parts) > 0 && g.parts[0].node == 0 {
		return g.parts[0], true
	}
	return part{}, false
}

// acquire waits for ticket t's turn and for w to be free, takes it and
// returns it; false if the meta-job stopped meanwhile (the turn passes on).
// Logical CPU prefer (the loop's own: its share of the job's CPUs) is taken
// first when it is free on node 0, so that a WHOLE_NODE loop's cases run
// on its share.
func (p *pool) acquire(t uint64, w want, prefer int) (grant, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var on []int
	for !p.stopped {
		if t == p.serving {
			if on = p.place(w); on != nil {
				break
			}
		}
		p.cond.Wait()
	}
	p.serving = max(p.serving, t+1)
	p.cond.Broadcast()
	if p.stopped {
		return grant{}, false
	}
	var g grant
	for _, k := range on {
		g.parts = append(g.parts, p.take(k, w, prefer))
	}
	return g, true
}

// take takes what w needs on node k. p.mu is held.
func (p *pool) take(k int, w want, prefer int) part {
	nd := p.nodes[k]
	pt := part{node: k}
	cpus, gpus, mem := w.cpus, w.gpus, w.memMB
	if w.whole {
		cpus, mem = len(nd.cpuFree), p.memMB
	}
	if k == 0 && prefer >= 0 && prefer < len(nd.cpuFree) && nd.cpuFree[prefer] && cpus > 0 {
		nd.cpuFree[prefer] = false
		pt.cpus = append(pt.cpus, prefer)
	}
	// Logical CPUs bound to CPUs the part has not got yet come first, so
	// that a case of 2 CPUs in a job that shares each CPU between two
	// loops gets 2 CPUs, whichever loop's share it starts on.
	for _, fresh := range []bool{true, false} {
		for i := 0; i < len(nd.cpuFree) && len(pt.cpus) < cpus; i++ {
			if nd.cpuFree[i] && (!fresh || k != 0 || p.adds(pt.cpus, i)) {
				nd.cpuFree[i] = false
				pt.cpus = append(pt.cpus, i)
			}
		}
	}
	for i := 0; i < len(nd.gpuFree) && len(pt.gpus) < gpus; i++ {
		if nd.gpuFree[i] {
			nd.gpuFree[i] = false
			pt.gpus = append(pt.gpus, p.gpus[i])
		}
	}
	if p.memMB > 0 {
		pt.memMB = mem
		nd.memFree -= mem
	}
	nd.cpusFree -= len(pt.cpus)
	nd.gpusFree -= len(pt.gpus)
	return pt
}

// adds reports whether node 0's logical CPU c is bound to a CPU that none
// of the logical CPUs have is bound to (always, when the pool binds
// nothing).
func (p *pool) adds(have []int, c int) bool {
	if p.shares == nil {
		return true
	}
	for _, h := range have {
		for _, b := range p.shares[c] {
			if slices.Contains(p.shares[h], b) {
				return false
			}
		}
	}
	return true
}

// place chooses the nodes w would run on now, ascending; nil if it does
// not fit now. Of the nodes it fits on, the fullest are taken first (the
// best fit), so that whole nodes stay free for cases of several; on a job
// of one node, that node. p.mu is held.
func (p *pool) place(w want) []int {
	var fit []int
	for k, nd := range p.nodes {
		if k > 0 && w.local {
			break
		}
		if p.fitsOn(nd, w) {
			fit = append(fit, k)
		}
	}
	need := max(w.nodes, 1)
	if len(fit) < need {
		return nil
	}
	slices.SortStableFunc(fit, func(a, b int) int { return p.nodes[a].cpusFree - p.nodes[b].cpusFree })
	on := fit[:need]
	slices.Sort(on)
	return on
}

// fitsOn reports whether w's part is free on nd now. p.mu is held.
func (p *pool) fitsOn(nd *node, w want) bool {
	if w.whole {
		return nd.cpusFree == len(nd.cpuFree) && nd.gpusFree >= w.gpus && nd.memFree == p.memMB
	}
	return nd.cpusFree >= w.cpus && nd.gpusFree >= w.gpus && (p.memMB == 0 || nd.memFree >= w.memMB)
}

// release gives back what g took.
func (p *pool) release(g grant) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pt := range g.parts {
		nd := p.nodes[pt.node]
		for _, c := range pt.cpus {
			nd.cpuFree[c] = true
		}
		for _, d := range pt.gpus {
			nd.gpuFree[slices.Index(p.gpus, d)] = true
		}
		nd.memFree += pt.memMB
		nd.cpusFree += len(pt.cpus)
		nd.gpusFree += len(pt.gpus)
	}
	p.cond.Broadcast()
}

// stop wakes every loop waiting for its turn: the meta-job is stopping.
func (p *pool) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	p.cond.Broadcast()
}

// bound returns the CPUs the logical CPUs of g on node 0 are bound to, in
// order and once each; nil when the pool binds nothing or g has no part on
// node 0 (a case given only other nodes runs its launcher, srun or mpirun,
// on the job's CPUs).
func (p *pool) bound(g grant) []int {
	loc, ok := g.local()
	if p.shares == nil || !ok {
		return nil
	}
	var out []int
	for _, c := range loc.cpus {
		for _, b := range p.shares[c] {
			if !slices.Contains(out, b) {
				out = append(out, b)
			}
		}
	}
	slices.Sort(out)
	return out
}
