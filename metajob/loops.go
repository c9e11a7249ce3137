package metajob

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/farm-hpc/farm/layout"
	"golang.org/x/sys/unix"
)

// newPool makes what the meta-job packs its cases into (pack.go): NWHOLE
// logical CPUs in WHOLE_NODE mode, else the job's CPUs, bound over the
// CPUs this process may run on; the job's GPUs and memory; on each of
// the job's nodes.
func (m *Metajob) newPool() *pool {
	cfg := m.Farm.Config
	m.wholeNode = cfg.WholeNode
	m.jobSetsOMP = hasEnv(m.Env.Environ, "OMP_NUM_THREADS")
	a := m.self.Alloc
	cpus, hosts := []int{max(a.CPUs, 1)}, []string{thisHost()}
	if len(a.Nodes) > 0 {
		hosts[0] = a.Nodes[0].Name
	}
	for _, n := range a.Nodes[min(1, len(a.Nodes)):] {
		cpus, hosts = append(cpus, max(n.CPUs, 1)), append(hosts, n.Name)
	}
	if cfg.WholeNode {
		for i := range cpus {
			cpus[i] = cfg.NWhole
		}
	}
	return newNodesPool(cpus, hosts, allowedCPUs(), a)
}

// thisHost is this host's short name: a case's node in a job whose
// engine did not name it.
func thisHost() string {
	h, err := os.Hostname()
	if err != nil {
		return "localhost"
	}
	h, _, _ = strings.Cut(h, ".")
	return h
}

// openLoops makes the meta-job's first loops: NWHOLE in WHOLE_NODE mode,
// else one (growLoops adds the others when cases declare needs).
func (m *Metajob) openLoops() error {
	n := 1
	if m.wholeNode {
		n = m.pool.cpus()
	}
	for k := 1; k <= n; k++ {
		s, err := m.newLoop(k)
		if err != nil {
			return err
		}
		m.loops = append(m.loops, s)
	}
	return nil
}

// newLoop makes loop k, with a case runner of its own. A case learns its
// loop from $FARM_LOOP (1, 2, ...).
func (m *Metajob) newLoop(k int) (*loop, error) {
	env := append(caseEnv(m.Env.Environ, m.self.ID), "FARM_LOOP="+strconv.Itoa(k))
	r, err := newCaseRunner(m.Farm.Dir, m.bash, m.Bin, env, m.out, m.log)
	if err != nil {
		return nil, err
	}
	s := &loop{k: k, runner: r, copied: true}
	if m.Farm.Config.OutputJob {
		if s.frames, err = openCaseFrames(m.Farm.Dir, layout.StatusFile(m.self.ID, m.self.Restart), k, m.log); err != nil {
			r.close()
			return nil, fmt.Errorf("opening loop %d's files of its cases' output (OUTPUT=job in config): %w", k, err)
		}
	}
	switch r := r.(type) {
	case *execRunner:
		r.stop, r.frames = &m.stop, s.frames
	case *forkRunner:
		r.frames = s.frames
	}
	return s, nil
}

// hasEnv reports whether env sets key.
func hasEnv(env []string, key string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, key+"=") {
			return true
		}
	}
	return false
}

// allowedCPUs lists the CPUs this process may run on (its cgroup's and
// affinity's: what the batch system gave the job), in order; nil if that
// cannot be told.
func allowedCPUs() []int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil
	}
	var cpus []int
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus
}

// shareCPUs shares cpus out between n loops: in contiguous groups as even
// as can be when there are at least as many CPUs as loops, else one CPU a
// loop, in turn. nil when there is nothing to share (fewer than 2 CPUs).
func shareCPUs(cpus []int, n int) [][]int {
	if len(cpus) < 2 || n < 1 {
		return nil
	}
	shares := make([][]int, n)
	for k := range shares {
		if len(cpus) >= n {
			shares[k] = cpus[k*len(cpus)/n : (k+1)*len(cpus)/n]
		} else {
			shares[k] = []int{cpus[k%len(cpus)]}
		}
	}
	return shares
}

// bindPID binds process pid to cpus (nil: every CPU this process may run
// on); a failure is said on w and otherwise ignored (the case runs
// unbound).
func bindPID(pid int, cpus []int, w io.Writer) {
	if cpus == nil {
		cpus = allowedCPUs()
	}
	set := func(cpus []int) error {
		if len(cpus) == 0 {
			return unix.EINVAL
		}
		var s unix.CPUSet
		for _, c := range cpus {
			s.Set(c)
		}
		return unix.SchedSetaffinity(pid, &s)
	}
	if err := set(cpus); err != nil {
		// Not left on the CPUs of its last case, which may be another
		// loop's now: on all of the job's.
		if err2 := set(allowedCPUs()); err2 != nil {
			fmt.Fprintf(w, "farm: binding a case runner to CPUs %v: %v; it stays on the CPUs of its last case\n", cpus, err)
			return
		}
		fmt.Fprintf(w, "farm: binding a case runner to CPUs %v: %v; its cases run on all of the job's CPUs\n", cpus, err)
	}
}

// lockedWriter serializes the writes of the loops to the job's output.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
