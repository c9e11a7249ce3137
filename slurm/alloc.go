package slurm

import (
	"math"
	"strconv"
	"strings"

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
	a.CPUs = int(positive(env("SLURM_CPUS_ON_NODE"), math.MaxInt32))
	cuda := gpuList(env("CUDA_VISIBLE_DEVICES"), true)
	switch job := gpuList(env("SLURM_JOB_GPUS"), false); {
	case job != nil && len(cuda) == len(job):
		a.GPUs = cuda
	case job != nil:
		a.GPUs = job
	case cuda != nil:
		a.GPUs = cuda
	default:
		a.GPUs = gpuList(env("SLURM_STEP_GPUS"), false)
		if cuda != nil && len(cuda) == len(a.GPUs) {
			a.GPUs = cuda
		}
	}
	if mb := positive(env("SLURM_MEM_PER_NODE"), math.MaxInt64); mb > 0 {
		a.MemMB = mb
	} else if mb := positive(env("SLURM_MEM_PER_CPU"), math.MaxInt64); mb > 0 && a.CPUs > 0 && mb <= math.MaxInt64/int64(a.CPUs) {
		a.MemMB = mb * int64(a.CPUs)
	} else if mb := positive(env("SLURM_MEM_PER_GPU"), math.MaxInt64); mb > 0 && len(a.GPUs) > 0 && mb <= math.MaxInt64/int64(len(a.GPUs)) {
		a.MemMB = mb * int64(len(a.GPUs))
	}
	return a
}

// positive reads a whole number from 1 to most (digits only, blanks
// around them ignored); 0 if s is not one.
func positive(s string, most int64) int64 {
	s = strings.TrimSpace(s)
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 || n > most {
		return 0
	}
	return n
}

// gpuList reads a comma-separated list of GPUs: device indexes, and with
// uuids also the UUIDs CUDA_VISIBLE_DEVICES may hold (GPU-..., MIG-...).
// nil if s is empty or not such a list (a word such as NoDevFiles, which
// older Slurms set for a job without GPUs, an empty item, a repeat).
func gpuList(s string, uuids bool) []string {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	var list []string
	seen := map[string]bool{}
	for _, g := range strings.Split(s, ",") {
		g = strings.TrimSpace(g)
		if i, ok := gpuIndex(g); ok {
			g = strconv.Itoa(i) // 07 is 7
		} else if !uuids || !isUUID(g) {
			return nil
		}
		if seen[g] {
			return nil
		}
		seen[g] = true
		list = append(list, g)
	}
	return list
}

// gpuIndex reads a device index: digits, within 32 bits.
func gpuIndex(g string) (int, bool) {
	if g == "" || strings.TrimLeft(g, "0123456789") != "" {
		return 0, false
	}
	i, err := strconv.ParseInt(g, 10, 32)
	return int(i), err == nil
}

// isUUID reports whether g names a GPU or a MIG instance by its UUID, as
// CUDA_VISIBLE_DEVICES may: "GPU-" or "MIG-" and letters, digits, '-' or
// '/' (MIG-GPU-UUID/1/0, the older form).
func isUUID(g string) bool {
	rest, ok := strings.CutPrefix(g, "GPU-")
	if !ok {
		if rest, ok = strings.CutPrefix(g, "MIG-"); !ok {
			return false
		}
	}
	if rest == "" {
		return false
	}
	for _, c := range rest {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '/') {
			return false
		}
	}
	return true
}
