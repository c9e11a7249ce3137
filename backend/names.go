package backend

import "strings"

// TaskIDs is an ability every engine with Capabilities.Arrays has: to read
// its array tasks' IDs, which a task's status file is named by (Self.ID)
// while the farm records the array's (Slurm's task "123_4" is of array
// "123", Grid Engine's "123.4" too; PBS's "123[4]" of "123[]").
type TaskIDs interface {
	// ArrayOf returns the ID of the array whose task id is; ok is false if
	// id is not a task's ID. It makes no call to the batch system.
	ArrayOf(id string) (array string, ok bool)
}

// OutputNamer is an optional ability: an engine that names its jobs'
// output files itself. Others get DefaultOutputName.
type OutputNamer interface {
	// OutputName is the name of the output file (in the farm's OUTPUT
	// directory) of the job id, or of the jobs whose ID the pattern id
	// stands for ("%j"). It makes no call to the batch system.
	OutputName(id string) string
}

// DefaultOutputName is META's name of a job's output file, slurm-ID.out,
// which users and their scripts look for: every engine's unless it is an
// OutputNamer.
func DefaultOutputName(id string) string { return "slurm-" + id + ".out" }

// OutputName is the name of the output file of the job id (or pattern) on
// b: its own (OutputNamer), or DefaultOutputName.
func OutputName(b Backend, id string) string {
	if n, ok := b.(OutputNamer); ok {
		return n.OutputName(id)
	}
	return DefaultOutputName(id)
}

// CutTask splits a task's ID at sep ("123_4" at "_"): the array's ID and
// true, or false if id has no sep or nothing before it. Engines whose task
// IDs are ARRAY<sep>TASK implement TaskIDs with it.
func CutTask(id, sep string) (array string, ok bool) {
	i := strings.LastIndex(id, sep)
	if i <= 0 {
		return "", false
	}
	return id[:i], true
}
