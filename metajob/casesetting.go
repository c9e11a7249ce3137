package metajob

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/farm-hpc/farm/backend"
)

// What a case placed by the pool (pack.go) learns of its place: its
// environment on top of the job's, and its nodes.

// caseSetting is the environment a managed case gets on top of the job's:
// OMP_NUM_THREADS ("" leaves the job's) and, if setCUDA, CUDA_VISIBLE_DEVICES
// (possibly empty: no GPU). The zero caseSetting leaves the job's.
type caseSetting struct {
	omp     string
	cuda    string
	setCUDA bool
	nodes   nodeSetting // the case's nodes, managed or not
}

// nodeSetting is what every case learns of its nodes (issue 25): the
// values of FARM_NNODES, FARM_NODELIST (Slurm's compressed form, for srun
// --nodelist), FARM_CPUS_PER_NODE (the CPUs it has on each: the fewest,
// if they differ) and, when the loop could write them, FARM_HOSTFILE (one
// line per node, "NAME slots=CPUS": Open MPI's mpirun --hostfile) and
// FARM_MACHINEFILE ("NAME:CPUS": MPICH's mpiexec -f). The zero value sets
// none.
type nodeSetting struct {
	n, list, cpus, hostfile, machinefile string
}

// env is ns as environment variables.
func (ns nodeSetting) env() []string {
	if ns.n == "" {
		return nil
	}
	env := []string{"FARM_NNODES=" + ns.n, "FARM_NODELIST=" + ns.list, "FARM_CPUS_PER_NODE=" + ns.cpus}
	if ns.hostfile != "" {
		env = append(env, "FARM_HOSTFILE="+ns.hostfile, "FARM_MACHINEFILE="+ns.machinefile)
	}
	return env
}

// line is ns as the worker script reads it: its values separated by tabs,
// or an empty line. A path with a tab or a newline is left out (it
// would not read back).
func (ns nodeSetting) line() string {
	if ns.n == "" {
		return ""
	}
	if strings.ContainsAny(ns.hostfile+ns.machinefile, "\t\n") {
		ns.hostfile, ns.machinefile = "", ""
	}
	return strings.Join([]string{ns.n, ns.list, ns.cpus, ns.hostfile, ns.machinefile}, "\t")
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
	return append(env, s.nodes.env()...)
}

// setting is the caseSetting of a case granted g, bound to cpus.
func (p *pool) setting(w want, g grant, cpus []int, jobSetsOMP bool) caseSetting {
	var s caseSetting
	if !w.managed {
		return s
	}
	var first part
	if len(g.parts) > 0 {
		first = g.parts[0]
	}
	if !jobSetsOMP {
		n := len(first.cpus)
		if cpus != nil {
			n = len(cpus)
		}
		s.omp = fmt.Sprint(n)
	}
	if len(p.gpus) > 0 {
		s.cuda, s.setCUDA = strings.Join(first.gpus, ","), true
	}
	return s
}

// nodesOf returns the names of g's nodes and, for each, the logical CPUs
// it has there; nil if the pool does not know its nodes' names.
func (p *pool) nodesOf(g grant) ([]string, []int) {
	if len(p.hosts) != len(p.nodes) {
		return nil, nil
	}
	names, cpus := make([]string, len(g.parts)), make([]int, len(g.parts))
	for i, pt := range g.parts {
		names[i], cpus[i] = p.hosts[pt.node], len(pt.cpus)
	}
	return names, cpus
}

// nodeEnv is the nodeSetting of a case on nodes names with cpus each,
// whose loop wrote their hostfiles at hostfile and machinefile ("": not
// written).
func nodeEnv(names []string, cpus []int, hostfile, machinefile string) nodeSetting {
	if len(names) == 0 {
		return nodeSetting{}
	}
	return nodeSetting{strconv.Itoa(len(names)), backend.CompressHosts(names), strconv.Itoa(slices.Min(cpus)), hostfile, machinefile}
}

// hostfiles returns the contents of the hostfile (Open MPI's form) and of
// the machine file (MPICH's) of nodes names with cpus each.
func hostfiles(names []string, cpus []int) (string, string) {
	var h, mf strings.Builder
	for i, n := range names {
		fmt.Fprintf(&h, "%s slots=%d\n", n, cpus[i])
		fmt.Fprintf(&mf, "%s:%d\n", n, cpus[i])
	}
	return h.String(), mf.String()
}
