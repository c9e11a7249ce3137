package main

import (
	"fmt"
	"io"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/local"
	"github.com/farm-hpc/farm/sge"
	"github.com/farm-hpc/farm/slurm"
)

// registry is the one place that names the batch systems farm can use, in
// order of preference for the default (--backend unset or auto): the first
// one available here. A new engine is one package and one line here, in
// batch (the local engine, last, reads the job scripts of every engine
// before it). getenv gives the engines' tuning variables; notices (the
// default fell back) go to stderr.
func registry(getenv func(string) string, stderr io.Writer) *backend.Registry {
	batch := []backend.Engine{
		slurm.Engine(slurmOptions(getenv)),
		sge.Engine(sgeOptions(getenv)),
	}
	notice := func(msg string) { fmt.Fprintln(stderr, msg) }
	lo := localOptions(getenv, backend.Scripts(batch))
	lo.Notice = notice // a cancel on a full disk, say
	r := backend.NewRegistry(append(batch, local.Engine(lo))...)
	r.Notice = notice
	return r
}

// adoptBackend is the engine farm adopt asks for the jobs still running in
// a META farm (META runs on Slurm only): the one named, else Slurm wherever
// its squeue is installed — a Slurm that does not answer then makes adopt
// refuse rather than fall back to an engine that knows nothing of META's
// jobs.
func adoptBackend(name string) string {
	if name != "" && name != "auto" {
		return name
	}
	if _, err := exec.LookPath("squeue"); err == nil {
		return slurm.Name
	}
	return name
}

// metaTemplates are the job-script templates of META's batch system,
// Slurm's: farm adopt gives a META farm without resubmit_script.sh that one.
func metaTemplates() fs.FS { return slurm.Templates() }

// slurmOptions reads $FARM_SLURM_CALL_TIMEOUT.
func slurmOptions(getenv func(string) string) slurm.Options {
	return slurm.Options{CallTimeout: envDuration(getenv, slurm.EnvCallTimeout)}
}

// sgeOptions reads $FARM_SGE_CALL_TIMEOUT and $FARM_SGE_ACCOUNTING.
func sgeOptions(getenv func(string) string) sge.Options {
	return sge.Options{CallTimeout: envDuration(getenv, sge.EnvCallTimeout), Accounting: getenv(sge.EnvAccounting)}
}

// localOptions reads $FARM_LOCAL_SLOTS, $FARM_LOCAL_KILL_WAIT,
// $FARM_LOCAL_SLOT_DIR (default: under $TMPDIR) and $FARM_GPUS (checked
// by the engine's Preflight); scripts are the dialects it reads job scripts
// in.
func localOptions(getenv func(string) string, scripts []backend.Script) local.Options {
	opt := local.Options{KillWait: envDuration(getenv, "FARM_LOCAL_KILL_WAIT"), SlotDir: getenv(local.EnvSlotDir), GPUs: getenv(local.EnvGPUs), Scripts: scripts}
	if opt.SlotDir == "" {
		tmp := getenv("TMPDIR")
		if tmp == "" {
			tmp = "/tmp"
		}
		opt.SlotDir = local.DefaultSlotDir(tmp)
	}
	// The jobs' supervisors run in the farm directory.
	if abs, err := filepath.Abs(opt.SlotDir); err == nil {
		opt.SlotDir = abs
	}
	if n, err := strconv.Atoi(getenv("FARM_LOCAL_SLOTS")); err == nil && n > 0 {
		opt.Slots = n
	}
	return opt
}

// envDuration reads a positive duration ("30s"); 0 if unset or not one.
func envDuration(getenv func(string) string, key string) time.Duration {
	if d, err := time.ParseDuration(getenv(key)); err == nil && d > 0 {
		return d
	}
	return 0
}
