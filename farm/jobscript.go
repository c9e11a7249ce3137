package farm

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/casetable"
)

// RunTime is the run-time line of a job script.
type RunTime struct {
	Limit time.Duration // 0: no limit (0, UNLIMITED, INFINITE, INFINITY)
	Line  int           // the line of the script that sets it
	Value string        // the value as written
	// Directive is the directive it was read from: backend.DirectiveSlurm
	// (#SBATCH -t) or backend.DirectiveGridEngine (#$ -l h_rt=).
	Directive string
}

// ScriptTimeLimit reads the run-time of a job script as ScriptRunTime
// does. ok is false when the script has none.
func ScriptTimeLimit(path, directive string) (limit time.Duration, ok bool, err error) {
	rt, ok, err := ScriptRunTime(path, directive)
	return rt.Limit, ok, err
}

// ScriptRunTime reads the run-time of a job script, with its line, as the
// engine whose Capabilities().Directive is directive reads it:
//
//   - backend.DirectiveSlurm: #SBATCH -t / --time, in Slurm's time
//     formats (casetable.ParseSlurmTime);
//   - backend.DirectiveGridEngine: h_rt in the -l resource requests of the
//     #$ lines (#$ -l h_rt=01:00:00, #$ -l h_vmem=2G,h_rt=3600), in Grid
//     Engine's time format (backend.ParseGridEngineTime);
//   - "" (an engine that only needs the run-time: the local one): the
//     #SBATCH one if the script has one, else the #$ one, so that a farm
//     made for either batch system can be tried on it.
//
// ok is false when the script has none. A value that does not read is an
// error naming the script's line.
func ScriptRunTime(path, directive string) (rt RunTime, ok bool, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return rt, false, err
	}
	lines := strings.Split(string(b), "\n")
	switch directive {
	case backend.DirectiveSlurm:
		return slurmRunTime(path, lines)
	case backend.DirectiveGridEngine:
		return gridEngineRunTime(path, lines)
	case "":
		if rt, ok, err = slurmRunTime(path, lines); ok || err != nil {
			return rt, ok, err
		}
		return gridEngineRunTime(path, lines)
	}
	// An engine's Capabilities.Directive that farm does not know: said as
	// it is, not as a script that cannot be read.
	return rt, false, Userf("farm cannot read a run-time from %q lines, which the engine reads (backend.Capabilities.Directive)", directive)
}

// slurmRunTime reads the first #SBATCH -t / --time of a script's lines.
func slurmRunTime(path string, lines []string) (rt RunTime, ok bool, err error) {
	for i, line := range lines {
		rest, isDirective := strings.CutPrefix(strings.TrimSpace(line), backend.DirectiveSlurm)
		if !isDirective {
			continue
		}
		fields := strings.Fields(rest)
		for j := range fields {
			val, ok := timeFlag(fields, j)
			if !ok {
				continue
			}
			d, err := casetable.ParseSlurmTime(val)
			if err != nil {
				return rt, false, Userf("%s:%d: bad run-time %q (%v); use a Slurm time such as 0-01:00 or 30", path, i+1, val, err)
			}
			return RunTime{Limit: d, Line: i + 1, Value: val, Directive: backend.DirectiveSlurm}, true, nil
		}
	}
	return rt, false, nil
}

// gridEngineRunTime reads h_rt, the hard run-time limit, from the -l
// resource requests of a script's #$ lines, as qsub reads them: a #$ line
// counts only from the line's first column; the words of each line are
// options (-l LIST, where LIST is name=value,...), -hard and -soft apply to
// the requests after them on the same line only, and the last h_rt
// requested is the one the job gets.
//
// s_rt is not read: it is a soft limit (the job is sent SIGUSR1 when it
// passes, and killed the queue's notify time later; sge_queue_conf(5)),
// not the run-time farm plans with. A
// -soft h_rt is a preference of the scheduler's, no limit at all: it is an
// error, rather than a run-time farm would plan with and Grid Engine not
// keep.
func gridEngineRunTime(path string, lines []string) (rt RunTime, ok bool, err error) {
	for i, line := range lines {
		rest, isDirective := strings.CutPrefix(line, backend.DirectiveGridEngine)
		if !isDirective {
			continue
		}
		// qsub drops the double quotes of a directive's words.
		fields := strings.Fields(strings.ReplaceAll(rest, `"`, ""))
		soft := false
		for j := 0; j < len(fields); j++ {
			switch fields[j] {
			case "-hard":
				soft = false
			case "-soft":
				soft = true
			case "-l":
				if j+1 == len(fields) {
					continue // qsub's error to give
				}
				j++
				val, found := hrtRequest(fields[j])
				if !found {
					continue
				}
				if soft {
					return rt, false, Userf("%s:%d: h_rt=%s is requested after -soft, which does not limit the job's run-time; request it as a hard limit: '#$ -l h_rt=%s'", path, i+1, val, val)
				}
				d, err := backend.ParseGridEngineTime(val)
				if err != nil {
					return rt, false, Userf("%s:%d: bad run-time h_rt=%s (%v); use a Grid Engine time such as h_rt=01:00:00 (hours:minutes:seconds) or h_rt=3600 (seconds)", path, i+1, val, err)
				}
				rt, ok = RunTime{Limit: d, Line: i + 1, Value: val, Directive: backend.DirectiveGridEngine}, true
			}
		}
	}
	return rt, ok, nil
}

// hrtRequest returns the value of h_rt in a -l resource list
// ("h_vmem=2G,h_rt=1:00:00"), the last one if it is given twice.
func hrtRequest(list string) (val string, found bool) {
	for _, req := range strings.Split(list, ",") {
		if name, v, _ := strings.Cut(req, "="); name == "h_rt" {
			val, found = v, true
		}
	}
	return val, found
}

// The run-times META accepts: a job script whose run-time is outside is
// refused (checkRunTime).
const (
	MinRunTime = 30 * time.Second
	MaxRunTime = 35 * 24 * time.Hour
)

// MinRunTimeVar lowers the minimum run-time, for trying a farm's time
// limits in seconds, on an engine that keeps a limit to the second itself
// (Capabilities.EnforcesTimeLimit: the local one, Grid Engine): a Go
// duration such as "2s", in the submitting environment. Slurm, which
// counts whole minutes and checks limits every 30 s or so, keeps META's 30
// seconds.
const MinRunTimeVar = "FARM_MIN_RUNTIME"

// minRunTime is the shortest run-time a submission from environ may give
// its jobs on an engine with capabilities caps: MinRunTime, or
// FARM_MIN_RUNTIME where the engine keeps limits to the second.
func minRunTime(environ []string, caps backend.Capabilities) (time.Duration, error) {
	v, set := "", false
	for _, kv := range environ {
		if val, ok := strings.CutPrefix(kv, MinRunTimeVar+"="); ok {
			v, set = val, true
		}
	}
	if !set || !caps.EnforcesTimeLimit {
		return MinRunTime, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, Userf("%s=%q is not a duration above 0 such as 5s: fix it, or unset it to keep the minimum run-time of 30 seconds", MinRunTimeVar, v)
	}
	return d, nil
}

// checkRunTime refuses, as META does, the run-time rt of the job script
// name if it is under min (MinRunTime, 30 seconds, unless minRunTime
// lowered it) or over 35 days, whatever its form ("0:29", "0:0:1",
// "0-0:0:1", h_rt=29): "Wrong job runtime in job_script.sh - T . Exiting",
// after the script's name and line, with an example in the form rt was
// read from. No limit (0, UNLIMITED, INFINITY) is over 35 days.
func checkRunTime(name string, rt RunTime, min time.Duration) error {
	if rt.Limit >= min && rt.Limit > 0 && rt.Limit <= MaxRunTime {
		return nil
	}
	least := "30 seconds"
	if min != MinRunTime {
		least = min.String() + " (" + MinRunTimeVar + ")"
	}
	return Userf("%s:%d: Wrong job runtime in %s - %s . Exiting (the run-time must be from %s to 35 days, e.g. '%s')", name, rt.Line, name, rt.Value, least, runTimeLine(rt.Directive, time.Hour))
}

// runTimeLine is a job-script line that sets the run-time d (an hour or
// ten minutes) in the form of directive ("" is Slurm's).
func runTimeLine(directive string, d time.Duration) string {
	if directive == backend.DirectiveGridEngine {
		return fmt.Sprintf("#$ -l h_rt=%02d:%02d:00", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("#SBATCH -t 0-%02d:%02d", int(d.Hours()), int(d.Minutes())%60)
}

// missingRunTime is the error for the script name, which has no run-time,
// as the engine whose directive is directive words it; d is the run-time
// of the line it suggests. META's words are kept for Slurm, and for the
// local engine, which also reads Grid Engine's.
func missingRunTime(name, directive string, d time.Duration) error {
	switch directive {
	case backend.DirectiveGridEngine:
		return Userf("Job run-time qsub argument (-l h_rt) is missing in %s. Exiting (add a line like '%s')", name, runTimeLine(directive, d))
	case "":
		return Userf("Job runtime sbatch argument (-t or --time) is missing in %s. Exiting (add a line like '%s', or '%s' for Grid Engine)", name, runTimeLine(backend.DirectiveSlurm, d), runTimeLine(backend.DirectiveGridEngine, d))
	}
	return Userf("Job runtime sbatch argument (-t or --time) is missing in %s. Exiting (add a line like '%s')", name, runTimeLine(directive, d))
}

// runTimeArg refuses a run-time among args, the extra arguments of a
// submission, in the forms the engine whose directive is directive reads
// (both for ""): it must be in the job script, where farm reads it.
func runTimeArg(args []string, directive string) error {
	for i, a := range args {
		if directive != backend.DirectiveGridEngine {
			if _, ok := timeFlag(args, i); ok {
				return Userf("the run-time (%s) cannot be given on the command line: set it with '#SBATCH -t' in %s", a, JobScript)
			}
		}
		if directive != backend.DirectiveSlurm && a == "-l" && i+1 < len(args) {
			if _, ok := hrtRequest(args[i+1]); ok {
				return Userf("the run-time (-l %s) cannot be given on the command line: set it with '#$ -l h_rt=' in %s", args[i+1], JobScript)
			}
		}
	}
	return nil
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
