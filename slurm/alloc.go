package slurm

import (
	"math"

	"github.com/farm-hpc/farm/backend"
)

// allocVars are the variables in which Slurm tells a job what it was given
// (selfAlloc). A job submitted from inside another inherits the
// submitter's, and Slurm sets only those that apply to the new job: the
// others, left over, would describe the submitter's allocation (GPUs the
// new job does not have, a memory limit it was not given), so submitEnv
// drops them all.
var allocVars = []string{
	"SLURM_CPUS_ON_NODE", "SLURM_JOB_GPUS", "SLURM_STEP_GPUS", "SLURM_GPUS_ON_NODE",
	"SLURM_MEM_PER_NODE", "SLURM_MEM_PER_CPU", "SLURM_MEM_PER_GPU",
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
	return a
}
