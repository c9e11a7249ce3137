package slurm

import (
	"fmt"
	"strings"
	"time"

	"github.com/farm-hpc/farm/backend"
)

// Directive is the prefix of the job-script lines that carry sbatch's
// options.
const Directive = "#SBATCH"

// Script is Slurm's job-script dialect (backend.Script): the run-time is
// #SBATCH -t / --time, in Slurm's time formats (ParseDuration,
// which also reads a table line's min_time).
type Script struct{}

var _ backend.Script = Script{}

// System implements backend.Script.
func (Script) System() string { return "Slurm" }

// RunTime implements backend.Script: the first #SBATCH -t / --time.
func (Script) RunTime(lines []string) (rt backend.RunTime, ok bool, err error) {
	for i, line := range lines {
		rest, isDirective := strings.CutPrefix(strings.TrimSpace(line), Directive)
		if !isDirective {
			continue
		}
		fields := strings.Fields(rest)
		for j := range fields {
			val, ok := timeFlag(fields, j)
			if !ok {
				continue
			}
			d, err := ParseDuration(val)
			if err != nil {
				return rt, false, &backend.ScriptError{Line: i + 1, Msg: fmt.Sprintf("bad run-time %q (%v); use a Slurm time such as 0-01:00 or 30", val, err)}
			}
			return backend.RunTime{Limit: d, Line: i + 1, Value: val}, true, nil
		}
	}
	return rt, false, nil
}

// RunTimeLine implements backend.Script.
func (Script) RunTimeLine(d time.Duration) string {
	return fmt.Sprintf("#SBATCH -t 0-%02d:%02d", int(d.Hours()), int(d.Minutes())%60)
}

// Missing implements backend.Script, in META's words.
func (Script) Missing(name string) string {
	return fmt.Sprintf("Job runtime sbatch argument (-t or --time) is missing in %s. Exiting", name)
}

// RunTimeArg implements backend.Script: -t VAL, --time VAL, -tVAL,
// --time=VAL.
func (Script) RunTimeArg(args []string) (i int, given, use string) {
	for i, a := range args {
		if _, ok := timeFlag(args, i); ok {
			return i, a, "#SBATCH -t"
		}
	}
	return -1, "", ""
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
