package farm

import (
	"bufio"
	"os"
	"strings"
	"time"

	"github.com/farm-hpc/farm/casetable"
)

// RunTime is the run-time line of a job script.
type RunTime struct {
	Limit time.Duration // 0: no limit (0, UNLIMITED, INFINITE)
	Line  int           // the line of the script that sets it
	Value string        // the value as written
}

// ScriptTimeLimit reads the run-time (#SBATCH -t / --time) of a job script.
// ok is false when the script has none.
func ScriptTimeLimit(path string) (limit time.Duration, ok bool, err error) {
	rt, ok, err := ScriptRunTime(path)
	return rt.Limit, ok, err
}

// ScriptRunTime reads the run-time (#SBATCH -t / --time) of a job script,
// with its line. ok is false when the script has none.
func ScriptRunTime(path string) (rt RunTime, ok bool, err error) {
	fh, err := os.Open(path)
	if err != nil {
		return rt, false, err
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
				return rt, false, Userf("%s:%d: bad run-time %q (%v); use a Slurm time such as 0-01:00 or 30", path, n, val, err)
			}
			return RunTime{Limit: d, Line: n, Value: val}, true, nil
		}
	}
	return rt, false, sc.Err()
}

// The run-times META accepts: a job script whose run-time is outside is
// refused (checkRunTime).
const (
	MinRunTime = 30 * time.Second
	MaxRunTime = 35 * 24 * time.Hour
)

// checkRunTime refuses, as META does, the run-time rt of the job script
// name if it is under 30 seconds or over 35 days: "Wrong job runtime in
// job_script.sh - T . Exiting", after the script's name and line. No limit
// (0, UNLIMITED) is over 35 days. The minimum holds only where the engine
// does not enforce the limit itself (exact false: Slurm, which counts whole
// minutes and checks limits every 30 s or so); the local engine stops a job
// to the second, and a short limit is how one tries a farm's time limits on
// it.
func checkRunTime(name string, rt RunTime, exact bool) error {
	if rt.Limit > 0 && rt.Limit <= MaxRunTime && (exact || rt.Limit >= MinRunTime) {
		return nil
	}
	return Userf("%s:%d: Wrong job runtime in %s - %s . Exiting (the run-time must be from 30 seconds to 35 days, e.g. '#SBATCH -t 0-01:00')", name, rt.Line, name, rt.Value)
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
// "days-hours:minutes:seconds"; UNLIMITED and INFINITE are 0. It is
// casetable.ParseSlurmTime, which a table line's min_time shares.
func ParseSlurmTime(s string) (time.Duration, error) { return casetable.ParseSlurmTime(s) }
