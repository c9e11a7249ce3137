package farm

import (
	"context"
	"errors"
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

// runsCases reports whether a job in state s may be running a case right
// now: a pending job — one never started, or one requeued to start again —
// is running none, so a case its earlier run left open was interrupted.
func (s JobState) runsCases() bool { return s == Running }

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
	// this host's, or the backend does not say (Slurm).
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
	Dir       string        // farm directory: the jobs' working directory
	Script    string        // job script to run
	Name      string        // job name, ties the jobs to their farm
	Count     int           // how many jobs
	Array     bool          // one case per job (SIMPLE mode): an array where possible
	Env       []string      // KEY=value added to the submitting environment
	Args      []string      // extra batch-system arguments (sbatch options)
	After     []string      // start only once these jobs have ended, in any state
	TimeLimit time.Duration // the script's run-time; the local backend enforces it
	Output    func(id string) string
}

// Self is what a running job knows of itself.
type Self struct {
	ID  string
	End time.Time // when the job will be stopped; zero if unknown
	// Restart counts the times the batch system restarted the job under the
	// same ID (Slurm requeues a job whose node failed): 0 for its first run.
	Restart int
}

// Backend is a batch system that runs a farm's jobs.
//
// Every method is safe to call from any process on a host that shares the
// farm directory; no state is kept in the Backend value between calls.
type Backend interface {
	// Name is the backend's name, as given to --backend.
	Name() string

	// Submit submits req.Count jobs and returns their IDs, in order. On
	// error it still returns the IDs of the jobs that were submitted
	// before the error, so that none is lost track of.
	Submit(ctx context.Context, req SubmitRequest) ([]string, error)

	// Jobs reports the state of each job in ids. Every ID gets an entry; a
	// job the batch system no longer knows is reported Gone. Its cost is one
	// batch-system query, whatever the number of jobs.
	Jobs(ctx context.Context, ids []string) (map[string]JobInfo, error)

	// Cancel cancels the jobs in ids that are still active (only the
	// pending ones if pendingOnly) and returns the IDs it cancelled.
	Cancel(ctx context.Context, ids []string, pendingOnly bool) ([]string, error)

	// Self is called inside a running job: its own ID and end time.
	Self(ctx context.Context) (Self, error)
}

// ErrNoBackend means a backend is not available here.
var ErrNoBackend = errors.New("backend not available")
