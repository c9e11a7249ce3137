package farm

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Environment variables that submit passes to every job of the farm.
const (
	envDir     = "FARM_DIR"
	EnvRun     = "FARM_RUN" // exported: metajob names it when it is missing
	envSimple  = "FARM_SIMPLE"
	envBackend = "FARM_BACKEND"
	envBin     = "FARM_BIN"
	// envRunJobs is the number of the run's meta-jobs when the job was
	// submitted (its own submission's with those before it): what a
	// meta-job scales its idle looks by (metajob/idle.go), without reading
	// the job records.
	envRunJobs = "FARM_RUN_JOBS"
	// envClaimHint is the run's start hint (casetable.Store.Hint), which
	// spares a job's first claim the reading of the run record; set by
	// the submit or resubmit that started the run, when it has one.
	envClaimHint = "FARM_CLAIM_HINT"
	// envCutoff is MISC/cutoff's record (dt_cutoff) as submit read it,
	// "none" if there was none: the meta-job's first reading of it, which
	// spares a call on the way to its first case (metajob/guard.go).
	envCutoff = "FARM_CUTOFF"
	// The -auto/final.sh job's only.
	envAuto     = "FARM_AUTO"      // 1: resubmit what is left; 0: only final.sh
	envAutoN    = "FARM_AUTO_N"    // N of the submit that added the job
	envAutoArgs = "FARM_AUTO_ARGS" // its sbatch arguments, as a JSON array
	// envLookEvery overrides, for tests, the cadence of a meta-job's
	// lease on its run (casetable.LookEvery: its look at the run and for
	// its rescue mark, metajob/look.go): a Go duration. Not set by submit;
	// a job gets it from the submitting environment. Every job of a farm
	// must have the same (a rescuer waits for the others' leases by its own).
	envLookEvery = "FARM_LOOK_EVERY"
)

// JobEnv is what a job of the farm is told through its environment: by
// 'farm submit' (FARM_*), by its batch system (read by the backend's Self
// through Getenv) and by the site (the HEPiX job features). The command
// that runs inside a job (farm metajob, farm autojob) reads it once, with
// ParseJobEnv; nothing else in farm reads the environment.
type JobEnv struct {
	Dir     string // FARM_DIR: the farm directory
	Run     int    // FARM_RUN: the run the job belongs to
	Simple  bool   // FARM_SIMPLE=1: SIMPLE mode, one case per job
	Backend string // FARM_BACKEND: the backend that runs the job
	Bin     string // FARM_BIN: the farm executable, which the job scripts run
	RunJobs int    // FARM_RUN_JOBS: the run's meta-jobs when it was submitted; 0 if not said

	// ClaimHint is FARM_CLAIM_HINT: the run's start hint for the first
	// claim (casetable.Store.UseHint), "" if none.
	ClaimHint string

	// Cutoff is FARM_CUTOFF: MISC/cutoff's record as submit read it (its
	// line, status.ParseCutoff's), "none" if it had none; "" if not said.
	Cutoff string

	Auto     bool     // FARM_AUTO=1: the extra job resubmits what is left
	AutoN    int      // FARM_AUTO_N: N for that resubmission
	AutoArgs []string // FARM_AUTO_ARGS: its sbatch arguments

	// LookEvery is FARM_LOOK_EVERY, 0 if not set (the meta-job's
	// default then).
	LookEvery time.Duration

	// JobFeatures and MachineFeatures are the HEPiX job-features
	// directories ($JOBFEATURES, $MACHINEFEATURES), "" if not set: they
	// may tell the job's end, or a coming shutdown of the node.
	JobFeatures, MachineFeatures string

	// Environ is the whole environment, which every case gets.
	Environ []string
	vars    map[string]string
}

// Getenv returns the variable key of Environ ("" if unset).
func (e JobEnv) Getenv(key string) string { return e.vars[key] }

// ParseJobEnv reads a job's environment (os.Environ() in a job). A value
// that does not parse is an error naming it; a missing one is left zero,
// for the command to judge.
func ParseJobEnv(environ []string) (JobEnv, error) {
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	e := JobEnv{
		Dir: m[envDir], Simple: m[envSimple] == "1", Backend: m[envBackend], Bin: m[envBin], ClaimHint: m[envClaimHint],
		Cutoff: m[envCutoff],
		Auto:   m[envAuto] == "1", JobFeatures: m["JOBFEATURES"], MachineFeatures: m["MACHINEFEATURES"],
		Environ: environ, vars: m,
	}
	var err error
	if v := m[EnvRun]; v != "" {
		if e.Run, err = strconv.Atoi(v); err != nil {
			return e, fmt.Errorf("%s=%q: not a run number", EnvRun, v)
		}
	}
	if v := m[envRunJobs]; v != "" {
		if e.RunJobs, err = strconv.Atoi(v); err != nil || e.RunJobs < 0 {
			return e, fmt.Errorf("%s=%q: not a number of meta-jobs", envRunJobs, v)
		}
	}
	if v := m[envAutoN]; v != "" {
		if e.AutoN, err = strconv.Atoi(v); err != nil {
			return e, fmt.Errorf("%s=%q: not a number", envAutoN, v)
		}
	}
	if v := m[envLookEvery]; v != "" {
		if e.LookEvery, err = time.ParseDuration(v); err != nil || e.LookEvery <= 0 {
			return e, fmt.Errorf("%s=%q: not a positive duration (such as 30s)", envLookEvery, v)
		}
	}
	if v := m[envAutoArgs]; v != "" {
		if err := json.Unmarshal([]byte(v), &e.AutoArgs); err != nil {
			return e, fmt.Errorf("%s: %v", envAutoArgs, err)
		}
	}
	return e, nil
}

// farmVars is the FARM_* part of e that every job gets, as "KEY=value", which
// submit adds to the environment of the jobs it submits (ParseJobEnv reads
// it back).
func (e JobEnv) farmVars() []string {
	vars := []string{
		envDir + "=" + e.Dir,
		EnvRun + "=" + strconv.Itoa(e.Run),
		envSimple + "=" + boolEnv(e.Simple),
		envBackend + "=" + e.Backend,
		envBin + "=" + e.Bin,
	}
	if e.RunJobs > 0 {
		vars = append(vars, envRunJobs+"="+strconv.Itoa(e.RunJobs))
	}
	if e.ClaimHint != "" {
		vars = append(vars, envClaimHint+"="+e.ClaimHint)
	}
	if e.Cutoff != "" {
		vars = append(vars, envCutoff+"="+e.Cutoff)
	}
	return vars
}

// autoVars is the FARM_AUTO* part of e, which the -auto/final.sh job gets.
func (e JobEnv) autoVars() []string {
	args, _ := json.Marshal(e.AutoArgs)
	return []string{envAuto + "=" + boolEnv(e.Auto), envAutoN + "=" + strconv.Itoa(e.AutoN), envAutoArgs + "=" + string(args)}
}

func boolEnv(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
