package metajob

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// openSlots makes the meta-job's slots, each with a case runner of its
// own: one, or NWHOLE in WHOLE_NODE mode. A case learns its slot from
// $FARM_LOOP (1 to NWHOLE). In WHOLE_NODE mode the CPUs the job may use
// are shared out between the slots, and each slot's cases are bound to its
// share (sched_setaffinity on its bash worker, which the cases inherit),
// with OMP_NUM_THREADS set to its size unless the job's environment sets
// it; with more slots than CPUs, slots share CPUs in turn.
func (m *Metajob) openSlots(out *os.File) error {
	n := m.Farm.Config.Slots()
	var shares [][]int
	if n > 1 {
		shares = shareCPUs(allowedCPUs(), n)
	}
	for k := 1; k <= n; k++ {
		env := caseEnv(m.Env.Environ, m.self.ID)
		env = append(env, "FARM_LOOP="+strconv.Itoa(k))
		var cpus []int
		if shares != nil {
			cpus = shares[k-1]
			if !hasEnv(env, "OMP_NUM_THREADS") {
				env = append(env, "OMP_NUM_THREADS="+strconv.Itoa(len(cpus)))
			}
		}
		r, err := newCaseRunner(m.Farm.Dir, m.bash, env, out, m.log)
		if err != nil {
			return err
		}
		m.slots = append(m.slots, &slot{k: k, runner: r})
		if cpus != nil {
			r.bind(cpus)
		}
	}
	return nil
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

// shareCPUs shares cpus out between n slots: in contiguous groups as even
// as can be when there are at least as many CPUs as slots, else one CPU a
// slot, in turn. nil when there is nothing to share (fewer than 2 CPUs).
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

// bindPID binds process pid to cpus; a failure is said on w and otherwise
// ignored (the case runs unbound).
func bindPID(pid int, cpus []int, w io.Writer) {
	var set unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	if err := unix.SchedSetaffinity(pid, &set); err != nil {
		fmt.Fprintf(w, "farm: binding a case runner to CPUs %v: %v; its cases run unbound\n", cpus, err)
	}
}

// lockedWriter serializes the writes of the slots to the job's output.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
