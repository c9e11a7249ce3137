package backend

import (
	"strconv"
	"strings"
)

// Helpers that engines share to read what their batch systems print: array
// task index expressions (Slurm's squeue, Grid Engine's qstat) and the
// lists of GPUs and counts that jobs are given in their environment.

// span is one part of an array index expression: lo-hi:step.
type span struct{ lo, hi, step int }

// spans parses an index expression of a group of array tasks ("3-12",
// "[1,4-7:3]", "1-100%5"); parts it cannot read are left out.
func spans(expr string) []span {
	expr = strings.Trim(expr, "[]")
	expr, _, _ = strings.Cut(expr, "%") // a throttle: 1-100%5
	var out []span
	for _, part := range strings.Split(expr, ",") {
		rng, stepS, hasStep := strings.Cut(part, ":")
		loS, hiS, isRange := strings.Cut(rng, "-")
		lo, err1 := strconv.Atoi(loS)
		hi := lo
		var err2 error
		if isRange {
			hi, err2 = strconv.Atoi(hiS)
		}
		step := 1
		if hasStep {
			if v, err := strconv.Atoi(stepS); err == nil && v > 0 {
				step = v
			}
		}
		if err1 == nil && err2 == nil && hi >= lo {
			out = append(out, span{lo, hi, step})
		}
	}
	return out
}

// TaskCount is the number of tasks a row stands for: one for a plain job or
// a single task, the size of the index expression of a group of pending
// tasks ("3-12" is 10).
func TaskCount(expr string) int {
	if expr == "" || digits(expr) {
		return 1
	}
	n := 0
	for _, sp := range spans(expr) {
		n += (sp.hi-sp.lo)/sp.step + 1
	}
	return max(n, 1)
}

// TaskMatches reports whether array task index task is expr: a single index
// ("4") or the index expression of a group of pending tasks ("3-12",
// "1,4-7:3", "1-100%5").
func TaskMatches(expr, task string) bool {
	if expr == task {
		return true
	}
	n, err := strconv.Atoi(task)
	if err != nil || expr == "" {
		return false
	}
	for _, sp := range spans(expr) {
		if n >= sp.lo && n <= sp.hi && (n-sp.lo)%sp.step == 0 {
			return true
		}
	}
	return false
}

// Positive reads a whole number from 1 to most (digits only, blanks
// around them ignored); 0 if s is not one.
func Positive(s string, most int64) int64 {
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

// GPUList reads a comma-separated list of GPUs: device indexes, and with
// uuids also the UUIDs CUDA_VISIBLE_DEVICES may hold (GPU-..., MIG-...).
// nil if s is empty or not such a list (a word such as NoDevFiles, which
// older Slurms set for a job without GPUs, an empty item, a repeat).
func GPUList(s string, uuids bool) []string {
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

// digits reports whether s is a non-empty string of decimal digits.
func digits(s string) bool { return s != "" && strings.TrimLeft(s, "0123456789") == "" }
