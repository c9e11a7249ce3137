package backend

import (
	"os"
	"strings"
	"time"
)

// Helpers that the engines driving a scheduler's commands share (slurm,
// sge): the roll-up of the rows a scheduler lists for a job or an array,
// the environment of their commands, their timeouts, and cancels in
// batches.

// Rollup sums up the rows a scheduler lists for one asked ID: a job, an
// array (all its tasks), or some of an array's tasks.
type Rollup struct {
	N         int  // rows added
	Pending   bool // some task (or the job) is pending
	Running   bool // some task (or the job) is running or ending
	Cancelled bool // some task (or the job) ended cancelled
	// Worst is the worst end of those that ended (Severity); an engine
	// that learns the end of a job its scheduler no longer lists sets it
	// itself (Grid Engine's accounting).
	Worst      JobState
	Tasks      int // jobs or array tasks pending or running
	Start, End time.Time
	// PendExprs are the index expressions of its pending array tasks
	// ("3-12", "1,4-7:3").
	PendExprs []string
}

// Add adds one row: its state, its array task index or the index
// expression of a group of pending tasks ("" for a plain job), its start
// and its end (either may be zero).
func (a *Rollup) Add(state JobState, task string, start, end time.Time) {
	a.N++
	switch state {
	case Pending:
		a.Pending = true
		a.Tasks += TaskCount(task)
		if task != "" {
			a.PendExprs = append(a.PendExprs, task)
		}
	case Running:
		a.Running = true
		a.Tasks++
	default:
		if Severity(state) > Severity(a.Worst) {
			a.Worst = state
		}
		if state == Cancelled {
			a.Cancelled = true
		}
	}
	if !start.IsZero() && (a.Start.IsZero() || start.Before(a.Start)) {
		a.Start = start
	}
	if end.After(a.End) {
		a.End = end
	}
}

// Active reports whether the job (any of its tasks) is pending or running.
func (a *Rollup) Active() bool { return a.Running || a.Pending }

// Settled reports whether a cancel with pendingOnly (PendingOnly) or not
// is done with the job: nothing of it pending, or active.
func (a *Rollup) Settled(pendingOnly bool) bool {
	if pendingOnly {
		return !a.Pending
	}
	return !a.Active()
}

// State is the job's state: running if some task runs, else pending if
// some task waits, else its worst end; Gone if nothing is known of it.
func (a *Rollup) State() JobState {
	switch {
	case a.Running:
		return Running
	case a.Pending:
		return Pending
	case a.Worst != "":
		return a.Worst
	}
	return Gone
}

// Queue is what a scheduler says of a set of asked IDs: a Rollup for each,
// and the array tasks it listed one by one, by their own IDs.
type Queue struct {
	Jobs  map[string]*Rollup
	Tasks map[string]JobInfo
}

// NewQueue is a Queue with an empty Rollup for each asked ID.
func NewQueue(asked []string) *Queue {
	q := &Queue{Jobs: map[string]*Rollup{}, Tasks: map[string]JobInfo{}}
	for _, id := range asked {
		if q.Jobs[id] == nil {
			q.Jobs[id] = &Rollup{}
		}
	}
	return q
}

// Infos is the answer of Jobs: each asked ID's roll-up, and the tasks.
func (q *Queue) Infos() map[string]JobInfo {
	out := make(map[string]JobInfo, len(q.Jobs)+len(q.Tasks))
	for id, in := range q.Tasks {
		out[id] = in
	}
	for id, a := range q.Jobs {
		out[id] = JobInfo{ID: id, State: a.State(), Start: a.Start, End: a.End, Tasks: a.Tasks}
	}
	return out
}

// Pick returns the IDs of ids, each once, in order, whose roll-up
// satisfies cond (those Cancel is to cancel).
func (q *Queue) Pick(ids []string, cond func(*Rollup) bool) []string {
	var out []string
	seen := map[string]bool{}
	for _, id := range ids {
		if a := q.Jobs[id]; !seen[id] && a != nil && cond(a) {
			out = append(out, id)
		}
		seen[id] = true
	}
	return out
}

// CallTimeout is d, the timeout of one scheduler command an engine was
// given, or def if d is not above 0.
func CallTimeout(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// FilterEnv is the environment base (this process's if nil) without the
// variables whose names drop reports, plus extra: the environment of a
// scheduler's command, without what would mislead it or the job it
// submits.
func FilterEnv(base []string, drop func(key string) bool, extra ...string) []string {
	if base == nil {
		base = os.Environ()
	}
	var env []string
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if drop(k) {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// Batches calls run on ids, at most size at a time (a cancel command's
// arguments: a command line has a limit); it returns the first error, and
// goes on after one.
func Batches(ids []string, size int, run func(batch []string) error) error {
	var first error
	for i := 0; i < len(ids); i += size {
		if err := run(ids[i:min(i+size, len(ids))]); err != nil && first == nil {
			first = err
		}
	}
	return first
}
