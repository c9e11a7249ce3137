// Package backend is the contract between farm and a batch system (an
// "engine"): the Backend interface, the values that cross it, and the
// Registry that names the engines.
//
// # Writing an engine
//
// An engine is one package beside this one (local/, slurm/, sge/) that
// holds all farm knows of its batch system, and provides:
//
//   - a type implementing Backend, checked at compile time with
//     var _ backend.Backend = (*T)(nil);
//   - its job-script dialect, a Script (Capabilities.Scripts): how its
//     scripts set the run-time, and the words of farm's messages about it;
//   - with Capabilities.Arrays, TaskIDs: the array a task's ID is of;
//     optionally OutputNamer (its output files' names), Preflighter,
//     DirJobs, Accounting (what its batch system records each job was
//     allocated);
//   - an Engine value: its name (what --backend takes), whether it can be
//     used here (Available), how to open it for a farm directory, its
//     Script, and its job-script templates for farm init (Templates, Edit);
//   - a test that runs the shared conformance suite, backend/backendtest,
//     against a real instance of the batch system.
//
// and is registered with one line in cmd/farm/backends.go. Nothing else in
// farm names an engine: the farm package sees only this interface, and what
// differs between engines is said by Capabilities and the optional
// interfaces, never by Name. ARCHITECTURE.md walks through adding PBS;
// backendtest/fakepbs is that walk done for a test engine.
//
// An engine reads no tuning variable of its own accord: its tuning comes in
// an options struct from cmd/farm, and what a job learns from its batch
// system comes to Self as SelfRequest.Env. (The user's environment reaches
// the jobs, and the scheduler's commands, as it is.)
//
// # What every method may assume and must guarantee
//
// Methods are called from short-lived commands (farm submit, list, kill)
// and from inside jobs, on any host that shares the farm directory, in any
// order and concurrently. A Backend value may cache the batch system's
// configuration (Slurm's MaxArraySize) but never the state of a job: each
// call asks afresh. Every method that talks to the batch system honours
// ctx: when it is cancelled the call returns promptly with an error
// wrapping ctx.Err(), and a Submit so interrupted still returns the IDs of
// the jobs it submitted. Errors are for the user to read as they are: they
// name the command that failed and what it said.
package backend

import (
	"context"
	"time"
)

// JobState is a job's state in the batch system, with Slurm's names.
type JobState string

// Job states. Gone is a job the batch system no longer knows (Slurm forgets
// finished jobs after MinJobAge): it is not pending or running.
const (
	Pending   JobState = "PENDING"
	Running   JobState = "RUNNING"
	Completed JobState = "COMPLETED"
	Failed    JobState = "FAILED"
	Cancelled JobState = "CANCELLED"
	Timeout   JobState = "TIMEOUT"
	Gone      JobState = "GONE"
)

// Active reports whether a job in state s may still run cases.
func (s JobState) Active() bool { return s == Pending || s == Running }

// JobInfo is what a backend knows of one job.
type JobInfo struct {
	ID    string
	State JobState
	Start time.Time // zero until it starts
	End   time.Time // expected end while running; actual end once ended; may be zero
	// Tasks is how many jobs this entry stands for that are pending or
	// running: the active tasks of a job array; 0 means 1 while active.
	Tasks int
	// OtherHost is the host identity (proc.HostID) of a job that runs (or
	// ran) on another host or in another container, whose state is the
	// one it last recorded, as it cannot be checked from here; "" if it is
	// this host's, or the engine does not say (engines whose scheduler
	// knows every job's state wherever it runs never set it).
	OtherHost string
}

// ActiveCount is how many active jobs (array tasks) in counts for
// NJOBS_MAX.
func (in JobInfo) ActiveCount() int {
	if !in.State.Active() {
		return 0
	}
	return max(in.Tasks, 1)
}

// SubmitRequest describes jobs to submit.
type SubmitRequest struct {
	Dir    string // farm directory: the jobs' working directory
	Script string // job script to run
	Name   string // job name, ties the jobs to their farm
	Count  int    // how many jobs
	// Array asks for one case per job (SIMPLE mode): an array where the
	// engine has them (Capabilities.Arrays), so that Submit may return
	// fewer IDs than Count.
	Array bool
	// Environ is the submitting environment ("KEY=value"), which every job
	// gets (os.Environ() of farm submit; this process's if nil); the
	// engine drops from it only its own variables that would mislead a job
	// submitted from inside another. Env is added to it, and wins.
	Environ []string
	Env     []string
	Args    []string // extra batch-system arguments (sbatch options)
	After   []string // start only once these jobs have ended, in any state
	// TimeLimit is the job script's run-time. An engine that reads the
	// run-time from the script itself (Slurm's #SBATCH -t) ignores it; one
	// that does not must enforce it (Capabilities.EnforcesTimeLimit).
	TimeLimit time.Duration
	Output    func(id string) string // the job's output file, given its ID (or a pattern such as "%j")
}

// SelfRequest is what a process inside a job gives Self.
type SelfRequest struct {
	// Env looks up the job's environment (os.Getenv, read by the command
	// that runs inside the job).
	Env func(key string) string
	// NoEnd says the caller does not need Self.End: an engine that would
	// ask its scheduler for it spares the call (a SIMPLE-mode job runs one
	// case; ten thousand of them starting at once should not each query
	// the controller).
	NoEnd bool
}

// Self is what a running job knows of itself.
type Self struct {
	ID  string
	End time.Time // when the job will be stopped; zero if unknown
	// Restart counts the times the batch system restarted the job under the
	// same ID (Slurm requeues a job whose node failed): 0 for its first run.
	Restart int
	// Alloc is what the job was given to run its cases on.
	Alloc Alloc
}

// Alloc is what a job was given: the meta-job packs its cases into it.
// Slurm: SLURM_CPUS_ON_NODE, SLURM_JOB_GPUS (or CUDA_VISIBLE_DEVICES),
// SLURM_MEM_PER_NODE (or SLURM_MEM_PER_CPU x CPUs); the local engine: this
// machine's CPUs (those the process may run on), the GPUs FARM_GPUS names
// (a comma-separated list of device indexes: this machine's are not
// probed), its memory (MemTotal).
//
// A job of several nodes lists them in Nodes, the node it runs on (its
// batch script's) first; CPUs, GPUs and MemMB are then the first node's,
// and the meta-job takes GPUs and MemMB to be the same on every node.
type Alloc struct {
	CPUs  int      // 0: unknown
	GPUs  []string // device indexes, as CUDA_VISIBLE_DEVICES takes them
	MemMB int64    // 0: unknown
	Nodes []Node   // nil: one node, this one
}

// CancelScope says which of the jobs given to Cancel to cancel.
type CancelScope int

const (
	// AllActive cancels pending and running jobs (farm kill).
	AllActive CancelScope = iota
	// PendingOnly cancels the pending jobs (and pending array tasks) only,
	// and leaves running ones to finish (farm prune).
	PendingOnly
)

// Capabilities says what an engine does that not every engine does. Code
// that must behave differently on some engine asks this, never Name.
type Capabilities struct {
	// Arrays: SubmitRequest.Array submits job arrays, and a task's ID (as
	// Self gives it) is not one of the IDs Submit returned but is
	// reported by Jobs under the array's ID.
	Arrays bool
	// EnforcesTimeLimit: the engine stops a job at SubmitRequest.TimeLimit
	// itself, to the second. Otherwise the batch system applies the job
	// script's own limit, with its own minimum and granularity (Slurm: one
	// minute, checked about every 30 s).
	EnforcesTimeLimit bool
	// CrossHost: the engine's job states are recorded in the farm
	// directory by the jobs themselves, so a job on another host can only
	// be seen as it last said (JobInfo.OtherHost) and cancelled through the
	// farm directory.
	CrossHost bool
	// Scripts are the job-script dialects the engine reads a script's
	// run-time in, tried in order (the first that finds one wins): its
	// own; the local engine's, every registered engine's, so that a farm
	// made for any batch system can be tried on it.
	Scripts []Script
	// IgnoresArgs: the engine has no submit command to pass
	// SubmitRequest.Args to (the local engine), so it ignores them; farm
	// submit says so.
	IgnoresArgs bool
}

// Preflighter is an optional ability: an engine that can tell, before
// anything is submitted, that Submit would fail on this host (a
// misconfiguration the user must fix) says so, and farm submit then
// changes nothing. It makes no call to the batch system.
type Preflighter interface {
	Preflight(ctx context.Context) error
}

// DirJobs is an optional ability: an engine that can list the user's
// active (queued or running) jobs whose working directory is dir or below
// it, whoever submitted them. farm adopt asks it for the jobs META
// submitted for a farm it is to take over. One scheduler query.
type DirJobs interface {
	ActiveIn(ctx context.Context, dir string) ([]string, error)
}

// Backend is a batch system that runs a farm's jobs. See the package
// documentation for what every method may assume and must guarantee.
type Backend interface {
	// Name is the engine's name, as given to --backend and kept in the
	// farm's job records.
	Name() string

	// Capabilities says what the engine does that not every engine does.
	// It makes no call to the batch system.
	Capabilities() Capabilities

	// Submit submits req.Count jobs (or fewer job arrays holding
	// req.Count tasks, with req.Array on an engine with Arrays) and
	// returns their IDs, in order. On error it still returns the IDs of
	// the jobs that were submitted before the error, so that none is lost
	// track of. Cost: one scheduler call per job (per array), which is why
	// farm submits a few meta-jobs rather than one job per case. A
	// cancelled ctx (Ctrl-C) may stop it before its next scheduler call,
	// but never kills a call that may have submitted a job: that call is
	// let finish, and its job returned (with ctx's error), so that farm
	// records it.
	Submit(ctx context.Context, req SubmitRequest) ([]string, error)

	// Jobs reports the state of each job in ids. Every ID gets an entry; a
	// job the batch system no longer knows is reported Gone. Cost: one
	// scheduler query, not one per job (Slurm: one squeue per ~10,000 IDs,
	// the length of a command line); farm list, query and wait call it
	// once per refresh. An array's ID stands for all its
	// tasks (JobInfo.Tasks); a task's ID ("ARRAY_TASK") for itself.
	Jobs(ctx context.Context, ids []string) (map[string]JobInfo, error)

	// Cancel cancels the jobs in ids that are still active — only the
	// pending ones with PendingOnly — and returns the IDs it cancelled.
	// Unknown and ended jobs are skipped without error. It returns once
	// the cancelled jobs have left the active states, or after an
	// engine-defined wait (a job that ignores SIGTERM is killed by the
	// batch system later). Cost: one query, one cancel call per few
	// thousand jobs, and queries while it waits.
	Cancel(ctx context.Context, ids []string, scope CancelScope) ([]string, error)

	// Self is called inside a running job: its own ID, restart count and
	// end time, from the environment the batch system gave the job and,
	// unless req.NoEnd, at most one scheduler query for the end time.
	Self(ctx context.Context, req SelfRequest) (Self, error)
}
