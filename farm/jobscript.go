package farm

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/layout"
)

// RunTime is the run-time line of a job script.
type RunTime struct {
	Limit time.Duration // 0: no limit (0, UNLIMITED, INFINITE, INFINITY)
	Line  int           // the line of the script that sets it
	Value string        // the value as written
	// Script is the job-script dialect it was read in, which also words
	// the messages about it.
	Script backend.Script
}

// scriptTimeLimit reads the run-time of a job script as ScriptRunTime
// does. ok is false when the script has none.
func scriptTimeLimit(path string, scripts []backend.Script) (limit time.Duration, ok bool, err error) {
	rt, ok, err := ScriptRunTime(path, scripts)
	return rt.Limit, ok, err
}

// ScriptRunTime reads the run-time of a job script, with its line, as the
// engine whose Capabilities().Scripts are scripts reads it: in the first
// dialect that finds one. ok is false when the script has none. A value
// that does not read is an error naming the script's line.
func ScriptRunTime(path string, scripts []backend.Script) (rt RunTime, ok bool, err error) {
	if len(scripts) == 0 {
		// An engine that says no dialect: said as it is, not as a script
		// that cannot be read.
		return rt, false, Userf("the engine reads no run-time from a job script (its backend.Capabilities.Scripts is empty)")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return rt, false, err
	}
	lines := strings.Split(string(b), "\n")
	for _, sc := range scripts {
		got, ok, err := sc.RunTime(lines)
		var se *backend.ScriptError
		if errors.As(err, &se) {
			return rt, false, Userf("%s:%d: %s", path, se.Line, se.Msg)
		} else if err != nil {
			return rt, false, Userf("%s: %v", path, err)
		}
		if ok {
			return RunTime{Limit: got.Limit, Line: got.Line, Value: got.Value, Script: sc}, true, nil
		}
	}
	return rt, false, nil
}

// The run-times META accepts: a job script whose run-time is outside is
// refused (checkRunTime).
const (
	shortestRunTime = 30 * time.Second
	longestRunTime  = 35 * 24 * time.Hour
)

// minRunTimeVar lowers the minimum run-time, for trying a farm's time
// limits in seconds, on an engine that keeps a limit to the second itself
// (Capabilities.EnforcesTimeLimit: the local one, Grid Engine): a Go
// duration such as "2s", in the submitting environment. Slurm, which
// counts whole minutes and checks limits every 30 s or so, keeps META's 30
// seconds.
const minRunTimeVar = "FARM_MIN_RUNTIME"

// minRunTime is the shortest run-time a submission from environ may give
// its jobs on an engine with capabilities caps: shortestRunTime, or
// FARM_MIN_RUNTIME where the engine keeps limits to the second.
func minRunTime(environ []string, caps backend.Capabilities) (time.Duration, error) {
	v, set := "", false
	for _, kv := range environ {
		if val, ok := strings.CutPrefix(kv, minRunTimeVar+"="); ok {
			v, set = val, true
		}
	}
	if !set || !caps.EnforcesTimeLimit {
		return shortestRunTime, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, Userf("%s=%q is not a duration above 0 such as 5s: fix it, or unset it to keep the minimum run-time of 30 seconds", minRunTimeVar, v)
	}
	return d, nil
}

// checkRunTime refuses, as META does, the run-time rt of the job script
// name if it is under min (shortestRunTime, 30 seconds, unless minRunTime
// lowered it) or over 35 days, whatever its form ("0:29", "0:0:1",
// "0-0:0:1", h_rt=29): "Wrong job runtime in job_script.sh - T . Exiting",
// after the script's name and line, with an example in the form rt was
// read from. No limit (0, UNLIMITED, INFINITY) is over 35 days.
func checkRunTime(name string, rt RunTime, min time.Duration) error {
	if rt.Limit >= min && rt.Limit > 0 && rt.Limit <= longestRunTime {
		return nil
	}
	least := "30 seconds"
	if min != shortestRunTime {
		least = min.String() + " (" + minRunTimeVar + ")"
	}
	return Userf("%s:%d: Wrong job runtime in %s - %s . Exiting (the run-time must be from %s to 35 days, e.g. '%s')", name, rt.Line, name, rt.Value, least, rt.Script.RunTimeLine(time.Hour))
}

// missingRunTime is the error for the script name, which has no run-time,
// in the words of the first of scripts (the engine's own), with a line
// that sets the run-time d in each dialect as the suggestion.
func missingRunTime(name string, scripts []backend.Script, d time.Duration) error {
	msg := scripts[0].Missing(name) + " (add a line like '" + scripts[0].RunTimeLine(d) + "'"
	for _, sc := range scripts[1:] {
		msg += fmt.Sprintf(", or '%s' for %s", sc.RunTimeLine(d), sc.System())
	}
	return Userf("%s)", msg)
}

// runTimeArg refuses a run-time among args, the extra arguments of a
// submission, in the forms the engine whose dialects are scripts reads:
// it must be in the job script, where farm reads it.
func runTimeArg(args []string, scripts []backend.Script) error {
	first, given, use := -1, "", ""
	for _, sc := range scripts {
		if i, g, u := sc.RunTimeArg(args); i >= 0 && (first < 0 || i < first) {
			first, given, use = i, g, u
		}
	}
	if first >= 0 {
		return Userf("the run-time (%s) cannot be given on the command line: set it with '%s' in %s", given, use, layout.JobScript)
	}
	return nil
}
