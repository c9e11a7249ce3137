package slurm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/farm-hpc/farm/backend"
)

// Self implements backend.Backend inside a Slurm job. Its ID is
// "$SLURM_ARRAY_JOB_ID_$SLURM_ARRAY_TASK_ID" in an array task, else
// $SLURM_JOB_ID; its Restart is $SLURM_RESTART_COUNT. Its end time is $SLURM_JOB_END_TIME (Unix seconds, set by
// Slurm 23.02 and later) if set, else the job's EndTime from squeue (its
// start plus its time limit), unless req.NoEnd; the zero time if neither
// tells.
func (b *Backend) Self(ctx context.Context, req backend.SelfRequest) (backend.Self, error) {
	env := req.Env
	id, err := selfID(env)
	if err != nil {
		return backend.Self{}, err
	}
	s := backend.Self{ID: id, Alloc: selfAlloc(env)}
	// Set by Slurm when it restarted (requeued) the job under the same ID.
	if n, err := strconv.Atoi(strings.TrimSpace(env("SLURM_RESTART_COUNT"))); err == nil && n > 0 {
		s.Restart = n
	}
	if v := strings.TrimSpace(env("SLURM_JOB_END_TIME")); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
			s.End = time.Unix(n, 0)
			return s, nil
		}
	}
	// A SIMPLE-mode task runs one case and never needs its end time: spare
	// the controller one query per task.
	if req.NoEnd {
		return s, nil
	}
	// Asked by the array task ID: the job ID of an array's last task is the
	// array job ID, which would list every task.
	out, err := b.run(ctx, queryEnv(), "squeue", "-h", "-j", id, "-o", "%e")
	if err == nil {
		s.End = ParseTime(firstLine(out))
	}
	return s, nil
}

// selfID is the job's own ID from Slurm's environment.
func selfID(env func(string) string) (string, error) {
	arr, task := env("SLURM_ARRAY_JOB_ID"), env("SLURM_ARRAY_TASK_ID")
	if arr != "" && task != "" {
		id := arr + "_" + task
		if !validID(id) {
			return "", fmt.Errorf("SLURM_ARRAY_JOB_ID=%q SLURM_ARRAY_TASK_ID=%q: not an array task ID", arr, task)
		}
		return id, nil
	}
	id := env("SLURM_JOB_ID")
	if id == "" {
		return "", errors.New("SLURM_JOB_ID is not set: not inside a Slurm job")
	}
	if !jobIDRe.MatchString(id) {
		return "", fmt.Errorf("SLURM_JOB_ID=%q: not a job ID", id)
	}
	return id, nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(line)
}

// allocVars are the variables in which Slurm tells a job what it was given
// (selfAlloc). A job submitted from inside another inherits the
// submitter's, and Slurm sets only those that apply to the new job: the
// others, left over, would describe the submitter's allocation (GPUs the
// new job does not have, a memory limit it was not given), so submitEnv
// drops them all.
var allocVars = []string{
	"SLURM_CPUS_ON_NODE", "SLURM_JOB_GPUS", "SLURM_STEP_GPUS", "SLURM_GPUS_ON_NODE",
	"SLURM_MEM_PER_NODE", "SLURM_MEM_PER_CPU", "SLURM_MEM_PER_GPU",
	"SLURM_JOB_NODELIST", "SLURM_NODELIST", "SLURM_JOB_CPUS_PER_NODE", "SLURM_JOB_NUM_NODES", "SLURM_NNODES",
}

// selfAlloc is what the job was given on this node, from its environment:
//
//   - CPUs: SLURM_CPUS_ON_NODE.
//   - GPUs: the job's (SLURM_JOB_GPUS, else CUDA_VISIBLE_DEVICES, else
//     SLURM_STEP_GPUS), named as CUDA_VISIBLE_DEVICES names them where it
//     lists as many: SLURM_JOB_GPUS has the node's indexes, but where
//     Slurm confines a job to its devices (cgroup.conf ConstrainDevices)
//     the job sees them numbered from 0, and CUDA_VISIBLE_DEVICES says so
//     (Slurm 25.11 puts the GPUs' UUIDs there).
//   - Memory: SLURM_MEM_PER_NODE (MB), else SLURM_MEM_PER_CPU x CPUs, else
//     SLURM_MEM_PER_GPU x GPUs.
//   - Nodes, for a job of several: SLURM_JOB_NODELIST with
//     SLURM_JOB_CPUS_PER_NODE ("4(x2),2"), the batch host (SLURMD_NODENAME)
//     first (jobNodes).
//
// A value that does not read is ignored (0 or nil: unknown), never an
// error: the job runs on its defaults.
func selfAlloc(env func(string) string) backend.Alloc {
	var a backend.Alloc
	a.CPUs = int(backend.Positive(env("SLURM_CPUS_ON_NODE"), math.MaxInt32))
	cuda := backend.GPUList(env("CUDA_VISIBLE_DEVICES"), true)
	switch job := backend.GPUList(env("SLURM_JOB_GPUS"), false); {
	case job != nil && len(cuda) == len(job):
		a.GPUs = cuda
	case job != nil:
		a.GPUs = job
	case cuda != nil:
		a.GPUs = cuda
	default:
		a.GPUs = backend.GPUList(env("SLURM_STEP_GPUS"), false)
		if cuda != nil && len(cuda) == len(a.GPUs) {
			a.GPUs = cuda
		}
	}
	if mb := backend.Positive(env("SLURM_MEM_PER_NODE"), math.MaxInt64); mb > 0 {
		a.MemMB = mb
	} else if mb := backend.Positive(env("SLURM_MEM_PER_CPU"), math.MaxInt64); mb > 0 && a.CPUs > 0 && mb <= math.MaxInt64/int64(a.CPUs) {
		a.MemMB = mb * int64(a.CPUs)
	} else if mb := backend.Positive(env("SLURM_MEM_PER_GPU"), math.MaxInt64); mb > 0 && len(a.GPUs) > 0 && mb <= math.MaxInt64/int64(len(a.GPUs)) {
		a.MemMB = mb * int64(len(a.GPUs))
	}
	a.Nodes = jobNodes(env)
	return a
}

// jobNodes lists the nodes of a job of several: SLURM_JOB_NODELIST (else
// SLURM_NODELIST), each with its CPUs from SLURM_JOB_CPUS_PER_NODE, the
// batch host (SLURMD_NODENAME) moved first; nil when the variables do not
// read (the job then packs into its own node, as a job of one).
func jobNodes(env func(string) string) []backend.Node {
	list := env("SLURM_JOB_NODELIST")
	if list == "" {
		list = env("SLURM_NODELIST")
	}
	names, err := backend.ExpandHosts(list)
	if err != nil || len(names) == 0 {
		return nil
	}
	cpus := cpusPerNode(env("SLURM_JOB_CPUS_PER_NODE"))
	if len(cpus) != len(names) {
		return nil
	}
	nodes := make([]backend.Node, len(names))
	for i, n := range names {
		nodes[i] = backend.Node{Name: n, CPUs: cpus[i]}
	}
	if here := env("SLURMD_NODENAME"); here != "" {
		for i, n := range nodes {
			if n.Name == here {
				copy(nodes[1:i+1], nodes[:i])
				nodes[0] = n
				break
			}
		}
	}
	return nodes
}

// cpusPerNode reads SLURM_JOB_CPUS_PER_NODE: counts, each optionally
// repeated ("4(x2),2" is 4, 4, 2); nil if it does not read.
func cpusPerNode(v string) []int {
	var out []int
	for _, part := range strings.Split(v, ",") {
		count, rep, repeated := strings.Cut(part, "(x")
		n := int(backend.Positive(count, math.MaxInt32))
		k := 1
		if repeated {
			k = int(backend.Positive(strings.TrimSuffix(rep, ")"), 1<<20))
		}
		if n < 1 || k < 1 || len(out)+k > 1<<20 {
			return nil
		}
		for ; k > 0; k-- {
			out = append(out, n)
		}
	}
	return out
}
