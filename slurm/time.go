package slurm

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ParseDuration parses Slurm's time formats, as #SBATCH -t takes them:
// "minutes", "minutes:seconds", "hours:minutes:seconds", "days-hours",
// "days-hours:minutes" and "days-hours:minutes:seconds"; "UNLIMITED" and
// "INFINITE" are 0 (no limit), and quotes around the value are dropped. A
// value too large for a Duration is the largest Duration, never one that
// wrapped around to a small one. The job-script dialect (Script) reads
// #SBATCH -t with it, and a table line's min_time (ParseNeeds) is written
// in it, so that both read alike.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.Trim(s, `"'`)
	if s == "" {
		return 0, fmt.Errorf("empty")
	}
	switch strings.ToUpper(s) {
	case "UNLIMITED", "INFINITE":
		return 0, nil
	}
	days, hasDays := 0, false
	if d, rest, ok := strings.Cut(s, "-"); ok {
		hasDays = true
		v, err := slurmNumber(d)
		if err != nil {
			return 0, fmt.Errorf("bad days %q", d)
		}
		days, s = v, rest
	}
	parts := strings.Split(s, ":")
	nums := make([]int, len(parts))
	for i, p := range parts {
		v, err := slurmNumber(p)
		if err != nil {
			return 0, fmt.Errorf("bad number %q", p)
		}
		nums[i] = v
	}
	var h, m, sec int
	switch {
	case hasDays:
		// days-hours[:minutes[:seconds]]
		switch len(nums) {
		case 1:
			h = nums[0]
		case 2:
			h, m = nums[0], nums[1]
		case 3:
			h, m, sec = nums[0], nums[1], nums[2]
		default:
			return 0, fmt.Errorf("too many fields")
		}
	default:
		switch len(nums) {
		case 1:
			m = nums[0]
		case 2:
			m, sec = nums[0], nums[1]
		case 3:
			h, m, sec = nums[0], nums[1], nums[2]
		default:
			return 0, fmt.Errorf("too many fields")
		}
	}
	// In float64, exact below 2^53 s, so that a huge value cannot wrap
	// around to a small one: it is MaxDuration, which no check passes.
	total := float64(days)*86400 + float64(h)*3600 + float64(m)*60 + float64(sec)
	if total > float64(math.MaxInt64/int64(time.Second)) {
		return time.Duration(math.MaxInt64), nil
	}
	return time.Duration(total) * time.Second, nil
}

// slurmNumber reads one field of a Slurm time: digits, any number of them
// (one beyond int's range reads as the largest int).
func slurmNumber(s string) (int, error) {
	v, err := strconv.Atoi(s)
	if errors.Is(err, strconv.ErrRange) && !strings.HasPrefix(s, "-") {
		return math.MaxInt, nil
	}
	if err != nil || v < 0 {
		return 0, fmt.Errorf("bad number %q", s)
	}
	return v, nil
}
