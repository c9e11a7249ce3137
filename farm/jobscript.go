package farm

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// ScriptTimeLimit reads the run-time (#SBATCH -t / --time) of a job script.
// ok is false when the script has none.
func ScriptTimeLimit(path string) (limit time.Duration, ok bool, err error) {
	fh, err := os.Open(path)
	if err != nil {
		return 0, false, err
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		rest, isDirective := strings.CutPrefix(line, "#SBATCH")
		if !isDirective {
			continue
		}
		fields := strings.Fields(rest)
		for i := range fields {
			val, ok := timeFlag(fields, i)
			if !ok {
				continue
			}
			d, err := ParseSlurmTime(val)
			if err != nil {
				return 0, false, Userf("%s:%d: bad run-time %q (%v); use a Slurm time such as 0-01:00 or 30", path, n, val, err)
			}
			return d, true, nil
		}
	}
	return 0, false, sc.Err()
}

// timeFlag reports whether args[i] gives the run-time — -t VAL, --time VAL,
// -tVAL or --time=VAL — and returns the value ("" if args ends there).
func timeFlag(args []string, i int) (val string, ok bool) {
	a := args[i]
	switch {
	case a == "-t" || a == "--time":
		if i+1 < len(args) {
			return args[i+1], true
		}
		return "", true
	case strings.HasPrefix(a, "--time="):
		return strings.TrimPrefix(a, "--time="), true
	case strings.HasPrefix(a, "-t") && !strings.HasPrefix(a, "--"):
		return a[2:], true
	}
	return "", false
}

// ParseSlurmTime parses Slurm's time formats: "minutes", "minutes:seconds",
// "hours:minutes:seconds", "days-hours", "days-hours:minutes" and
// "days-hours:minutes:seconds". "UNLIMITED" and "INFINITE" give 0.
func ParseSlurmTime(s string) (time.Duration, error) {
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
		v, err := strconv.Atoi(d)
		if err != nil || v < 0 {
			return 0, fmt.Errorf("bad days %q", d)
		}
		days, s = v, rest
	}
	parts := strings.Split(s, ":")
	nums := make([]int, len(parts))
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 {
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
	return time.Duration(days)*24*time.Hour + time.Duration(h)*time.Hour +
		time.Duration(m)*time.Minute + time.Duration(sec)*time.Second, nil
}
