// Package layout names the files and directories of a farm directory: the
// one place that spells them (as restic keeps its repository's layout in
// one package). It imports nothing of farm's, so that every layer can name
// a farm's files through it. Names that one package alone uses (the claim
// chain's generations, casetable's run tables, the local engine's files in
// its directory) stay with that package.
package layout

import (
	"path/filepath"
	"strconv"
	"strings"
)

// The files at the top of a farm directory.
const (
	JobScript      = "job_script.sh"      // the meta-job's job script
	SingleCase     = "single_case.sh"     // runs one case
	ResubmitScript = "resubmit_script.sh" // the -auto job's script
	FinalScript    = "final.sh"           // submitted once every case succeeded, if there
	Config         = "config"             // farm's settings
	Table          = "table.dat"          // the cases, one a line
	RetryTable     = "table.dat_"         // the cases a resubmit runs
	Log            = "farm.log"           // what submits and resubmits did
	METAConfig     = "config.h"           // META's settings, which farm adopt reads
)

// The directories of a farm directory.
const (
	StatusDir = "STATUSES" // the status files, one per meta-job incarnation
	OutputDir = "OUTPUT"   // the jobs' output files
	MiscDir   = "MISC"     // farm's own state: the claims, the job records, the engines'
)

// JobRecords is the directory, in MiscDir, of the job records: one file per
// submission.
const JobRecords = "jobs"

// Cutoff is the file, in MiscDir, of dt_cutoff, the runtime-aware exit's
// threshold (status.ReadCutoff); Cutoff + ".R.K" are the elections of its
// recomputations in run R (metajob).
const Cutoff = "cutoff"

// RescueDir is the directory, in MiscDir, of run's rescue marks (metajob's
// rescue.go and warden.go).
func RescueDir(run int) string { return "rescue." + strconv.Itoa(run) }

// WardenMark is the name, in a RescueDir, of the run's k-th warden's mark
// (k from 1), holding its job ID and a newline; suffix "" for the mark,
// ".off" once it left, ".ended" once its job was found ended.
func WardenMark(k int, suffix string) string { return "warden." + strconv.Itoa(k) + suffix }

// Warden reads, from the names in a RescueDir, its newest warden mark's k
// (0: none) and whether that warden is gone (left, or its job ended).
func Warden(names []string) (k int, gone bool) {
	has := make(map[string]bool, len(names))
	for _, name := range names {
		has[name] = true
		rest, ok := strings.CutPrefix(name, "warden.")
		if n, err := strconv.Atoi(rest); ok && err == nil && n > k {
			k = n
		}
	}
	return k, k == 0 || has[WardenMark(k, ".off")] || has[WardenMark(k, ".ended")]
}

// EngineDir is the directory, in the farm directory dir's MiscDir, that the
// engine called engine (its backend name) keeps its state in.
func EngineDir(dir, engine string) string { return filepath.Join(dir, MiscDir, engine) }

// statusPrefix starts the name of every status file.
const statusPrefix = "status."

// StatusFile is the name, in StatusDir, of the status file of incarnation
// restart (0 for the first) of job jobID.
func StatusFile(jobID string, restart int) string {
	if restart <= 0 {
		return statusPrefix + jobID
	}
	return statusPrefix + jobID + ".r" + strconv.Itoa(restart)
}

// ParseStatusFile reads a name made by StatusFile (a base name, without
// the directory). ok is false for any other name, such as a temporary
// file.
func ParseStatusFile(name string) (jobID string, restart int, ok bool) {
	rest, ok := strings.CutPrefix(name, statusPrefix)
	if !ok || rest == "" || strings.Contains(rest, ".tmp") {
		return "", 0, false
	}
	job, r, found := strings.Cut(rest, ".r")
	if !found {
		return rest, 0, true
	}
	n, err := strconv.Atoi(r)
	if err != nil || n < 1 || job == "" || StatusFile(job, n) != name {
		return "", 0, false
	}
	return job, n, true
}

// CaseOutput is the name, in OutputDir, of the file that holds the
// standard output (stderr: the standard error) of the cases that loop
// (from 1) of the meta-job whose status file is named statusFile ran, with
// OUTPUT=job in config: "cases.JOBID.loopK.stdout" ("….stderr"), with the
// incarnation's ".rN" after JOBID as in its status file's name. It is ""
// for a name that is not a status file's.
func CaseOutput(statusFile string, loop int, stderr bool) string {
	rest, ok := strings.CutPrefix(statusFile, statusPrefix)
	if !ok || rest == "" || loop < 1 {
		return ""
	}
	ext := ".stdout"
	if stderr {
		ext = ".stderr"
	}
	return "cases." + rest + ".loop" + strconv.Itoa(loop) + ext
}
