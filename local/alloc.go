package local

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/farm-hpc/farm/backend"
)

// EnvGPUs names the variable that tells the local engine which GPUs its
// jobs may use: device indexes, comma-separated ("0,1"), as
// CUDA_VISIBLE_DEVICES takes them. This machine's GPUs are not probed: a
// job has none unless it is set. farm submit checks it (Options.GPUs,
// Preflight); a job reads it from its environment, which it inherits from
// the submitting command (Self).
const EnvGPUs = "FARM_GPUS"

// ParseGPUs reads the value of FARM_GPUS: nil if it is empty (or blank),
// else the GPU indexes it lists. Anything else — an item that is not a
// whole number, an empty item, an index listed twice — is an error naming
// the variable, what is wrong and what to write.
func ParseGPUs(v string) ([]string, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	bad := func(why string) error {
		return fmt.Errorf("local backend: %s=%q: %s; set it to the indexes of the GPUs of this machine that the farm's jobs may use, comma-separated (e.g. %s=0,1), or unset it", EnvGPUs, v, why, EnvGPUs)
	}
	var gpus []string
	seen := map[int64]bool{}
	for _, g := range strings.Split(v, ",") {
		g = strings.TrimSpace(g)
		if g == "" {
			return nil, bad("an empty item")
		}
		i, err := strconv.ParseInt(g, 10, 32)
		if err != nil || strings.TrimLeft(g, "0123456789") != "" {
			return nil, bad(fmt.Sprintf("%q is not a GPU index (a whole number, 0 or more)", g))
		}
		if seen[i] {
			return nil, bad(fmt.Sprintf("GPU %d is listed twice", i))
		}
		seen[i] = true
		gpus = append(gpus, strconv.FormatInt(i, 10))
	}
	return gpus, nil
}

// selfAlloc is what a job of this machine was given: the CPUs this
// process may run on, the GPUs FARM_GPUS lists (env), the machine's
// memory (MemTotal). An unknown count is 0; only a bad FARM_GPUS is an
// error.
func selfAlloc(env func(string) string) (backend.Alloc, error) {
	gpus, err := ParseGPUs(env(EnvGPUs))
	if err != nil {
		return backend.Alloc{}, err
	}
	a := backend.Alloc{CPUs: allowedCPUs(), GPUs: gpus}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		a.MemMB = memTotalMB(f)
		f.Close()
	}
	return a, nil
}

// allowedCPUs is the number of CPUs this process may run on (its affinity
// mask, which taskset, cgroups' cpusets and batch systems narrow), or, if
// that cannot be read, the number Go saw at start.
func allowedCPUs() int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err == nil {
		if n := set.Count(); n > 0 {
			return n
		}
	}
	return runtime.NumCPU()
}

// memTotalMB reads MemTotal, in MiB, from /proc/meminfo's text ("MemTotal:
// 16318420 kB"); 0 if it has none that reads.
func memTotalMB(r io.Reader) int64 {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || kb <= 0 || strings.TrimLeft(f[0], "0123456789") != "" {
			return 0
		}
		return kb / 1024
	}
	return 0
}
