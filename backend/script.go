package backend

import (
	"fmt"
	"time"
)

// Script is an engine's job-script dialect: how its job scripts set the
// run-time, the one option of theirs farm reads. farm reads, checks and
// suggests a job script's run-time in the words of the engine that runs it
// (Capabilities.Scripts), and never names a directive itself.
type Script interface {
	// System is the batch system's name in messages ("Slurm", "Grid
	// Engine").
	System() string
	// RunTime reads the run-time from a job script's lines (without their
	// line ends); ok is false if they set none. A value that does not read
	// is a *ScriptError naming its line.
	RunTime(lines []string) (rt RunTime, ok bool, err error)
	// RunTimeLine is a job-script line that sets the run-time d (an hour,
	// ten minutes): "#SBATCH -t 0-01:00".
	RunTimeLine(d time.Duration) string
	// Missing is the error message for the job script name, which sets no
	// run-time, without a suggestion (farm adds RunTimeLine's): META's
	// words for Slurm.
	Missing(name string) string
	// RunTimeArg finds a run-time among the extra arguments of a
	// submission (which must not give one: farm reads it from the job
	// script): the index of the first, the argument(s) as given ("-t",
	// "-l h_rt=1:00:00") and the directive to use instead ("#SBATCH -t");
	// i is -1 if there is none.
	RunTimeArg(args []string) (i int, given, use string)
}

// RunTime is the run-time a job script sets.
type RunTime struct {
	Limit time.Duration // 0: no limit (0, UNLIMITED, INFINITE, INFINITY)
	Line  int           // the line that sets it, from 1
	Value string        // the value as written
}

// ScriptError is a job-script line that does not read: Line (from 1) and
// what is wrong with it, in the batch system's words.
type ScriptError struct {
	Line int
	Msg  string
}

func (e *ScriptError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }
