package slurm

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/farm-hpc/farm/backend"
)

// squeueFormat is the one squeue format farm reads: array job ID (the job ID
// of a plain job), array task index or index expression ("N/A" for a plain
// job), the job's own ID, state, start and end.
const squeueFormat = "%F|%K|%A|%T|%S|%e"

// Jobs implements backend.Backend with a single `squeue -h -t all -j IDS` call
// (one per ~10,000 jobs, the most one command-line argument holds).
// Every ID in ids gets an entry; an ID squeue does not list is Gone (Slurm
// forgets jobs MinJobAge after they end). For an array job ID ("123") the
// entry sums up its tasks: Running if any task runs, else Pending if any is
// pending, else the worst final state (FAILED, TIMEOUT, CANCELLED, COMPLETED
// in that order). The map also has an entry for every array task that squeue
// lists one by one ("123_4"), since a task names its status file by that ID.
// A failed or hung squeue is an error, never a wrong state.
func (b *Backend) Jobs(ctx context.Context, ids []string) (map[string]backend.JobInfo, error) {
	q, err := b.query(ctx, ids)
	if err != nil {
		return nil, err
	}
	return q.Infos(), nil
}

// query runs squeue once for ids and sums up the rows for each.
func (b *Backend) query(ctx context.Context, ids []string) (*queue, error) {
	var valid []string
	seen := map[string]bool{}
	for _, id := range ids {
		if validID(id) && !seen[id] {
			valid = append(valid, id)
			seen[id] = true
		}
	}
	var rows []row
	for _, list := range chunks(valid, maxJobList) {
		out, err := b.run(ctx, queryEnv(), "squeue", "-h", "-t", "all", "-j", list, "-o", squeueFormat)
		if err != nil {
			var ce *CommandError
			// squeue -j with one ID that Slurm has purged exits 1 with this
			// message (with several IDs it just omits them): no job.
			if !errors.As(err, &ce) || ce.Timeout > 0 || !strings.Contains(ce.Stderr, "Invalid job id specified") {
				return nil, fmt.Errorf("asking Slurm for the state of %d job(s): %w", len(valid), err)
			}
			out = ""
		}
		r, err := parseSqueue(out)
		if err != nil {
			return nil, fmt.Errorf("reading squeue's answer: %w", err)
		}
		rows = append(rows, r...)
	}
	return newQueue(ids, rows), nil
}

// maxJobList bounds the length of one squeue -j argument: Linux refuses a
// single argument over 128 KiB. Only a farm of more than ~10,000 jobs needs
// more than one squeue call.
const maxJobList = 100_000

// chunks joins ids with commas into lists of at most max bytes.
func chunks(ids []string, max int) []string {
	var out []string
	var b strings.Builder
	for _, id := range ids {
		if b.Len() > 0 && b.Len()+1+len(id) > max {
			out = append(out, b.String())
			b.Reset()
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(id)
	}
	if b.Len() > 0 {
		out = append(out, b.String())
	}
	return out
}

var validIDRe = regexp.MustCompile(`^[0-9]+(_[0-9]+)?$`)

// validID reports whether id is a Slurm job ID ("123") or array task ID
// ("123_4"); other strings are never passed to squeue or scancel.
func validID(id string) bool { return validIDRe.MatchString(id) }

// row is one line of squeue's answer.
type row struct {
	ArrayJob string // %F: the array job ID, or the job ID of a plain job
	Task     string // %K: "" for a plain job or an array's meta record, a task index, or an index expression for pending tasks
	JobID    string // %A: the job's own ID
	Raw      string // Slurm's state name
	State    backend.JobState
	Start    time.Time
	End      time.Time
}

// single reports whether r is one array task, listed by itself.
func (r row) single() bool { return r.Task != "" && jobIDRe.MatchString(r.Task) }

// parseSqueue reads squeue output in squeueFormat.
func parseSqueue(out string) ([]row, error) {
	var rows []row
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "CLUSTER:") {
			continue
		}
		f := strings.Split(line, "|")
		if len(f) != 6 {
			return nil, fmt.Errorf("unexpected squeue line %q (want %s)", line, squeueFormat)
		}
		r := row{ArrayJob: f[0], Task: f[1], JobID: f[2], Raw: f[3], State: MapState(f[3])}
		if r.Task == "N/A" || r.Task == "(null)" {
			r.Task = ""
		}
		if !jobIDRe.MatchString(r.ArrayJob) || !jobIDRe.MatchString(r.JobID) {
			return nil, fmt.Errorf("unexpected squeue line %q: bad job ID", line)
		}
		// A pending job's %S and %e are the scheduler's guesses: keep them out.
		if r.State != backend.Pending {
			r.Start, r.End = ParseTime(f[4]), ParseTime(f[5])
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// queue is squeue's answer for a set of asked IDs.
type queue = backend.Queue

func newQueue(asked []string, rows []row) *queue {
	q := backend.NewQueue(nil)
	byArray := map[string][]row{}
	byJob := map[string][]row{}
	for _, r := range rows {
		byArray[r.ArrayJob] = append(byArray[r.ArrayJob], r)
		if r.JobID != r.ArrayJob {
			byJob[r.JobID] = append(byJob[r.JobID], r)
		}
	}
	for _, id := range asked {
		if q.Jobs[id] != nil {
			continue
		}
		a := &backend.Rollup{}
		q.Jobs[id] = a
		if !validID(id) {
			continue
		}
		if parent, task, ok := strings.Cut(id, "_"); ok {
			for _, r := range byArray[parent] {
				if backend.TaskMatches(r.Task, task) {
					add(a, r)
				}
			}
			continue
		}
		// A plain job, a whole array, or an array task by its own job ID.
		for _, r := range byArray[id] {
			add(a, r)
			if r.single() {
				q.Tasks[id+"_"+r.Task] = info(id+"_"+r.Task, r)
			}
		}
		for _, r := range byJob[id] {
			add(a, r)
		}
	}
	return q
}

// add adds row r to the roll-up a.
func add(a *backend.Rollup, r row) { a.Add(r.State, r.Task, r.Start, r.End) }

func info(id string, r row) backend.JobInfo {
	return backend.JobInfo{ID: id, State: r.State, Start: r.Start, End: r.End}
}

// MapState maps a Slurm job state name (squeue %T, scontrol JobState) to the
// farm's JobState. States in which the job's processes may still run —
// CONFIGURING, COMPLETING, SUSPENDED, STOPPED, SIGNALING, STAGE_OUT,
// RESIZING — are Running, so that no case of such a job is taken for
// interrupted and `farm kill` waits for them; states in which the job waits
// to (re)start — REQUEUED, REQUEUE_HOLD, REQUEUE_FED, RESV_DEL_HOLD,
// SPECIAL_EXIT — are Pending. Every other end (NODE_FAIL, OUT_OF_MEMORY,
// PREEMPTED, BOOT_FAIL, DEADLINE, REVOKED) and any state this version does
// not know are Failed.
func MapState(s string) backend.JobState {
	s = strings.ToUpper(strings.TrimSpace(s))
	// Slurm may add flags after the base state ("CANCELLED by 0", "RUNNING+").
	if i := strings.IndexAny(s, " +"); i > 0 {
		s = s[:i]
	}
	switch s {
	case "PENDING", "PD", "REQUEUED", "RQ", "REQUEUE_HOLD", "RH", "REQUEUE_FED", "RF", "RESV_DEL_HOLD", "RD", "SPECIAL_EXIT", "SE":
		return backend.Pending
	case "RUNNING", "R", "CONFIGURING", "CF", "COMPLETING", "CG", "SUSPENDED", "S", "STOPPED", "ST", "SIGNALING", "SI", "STAGE_OUT", "SO", "RESIZING", "RS":
		return backend.Running
	case "COMPLETED", "CD":
		return backend.Completed
	case "CANCELLED", "CA":
		return backend.Cancelled
	case "TIMEOUT", "TO":
		return backend.Timeout
	}
	return backend.Failed
}

// ParseTime reads a Slurm time in the standard format
// (2006-01-02T15:04:05, local time). "N/A", "Unknown", "None", "INVALID"
// and anything unreadable give the zero time.
func ParseTime(s string) time.Time {
	t, err := time.ParseInLocation("2006-01-02T15:04:05", strings.TrimSpace(s), time.Local)
	if err != nil {
		return time.Time{}
	}
	return t
}
