package sge

import (
	"context"
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/layout"
)

// row is one job_list entry of `qstat -xml -r`: a job, a running array
// task, or a group of pending array tasks.
type row struct {
	Num   string // JB_job_number
	Task  string // "" for a plain job, a task index, or an index expression of pending tasks ("1-5:1", "1,3-6:1")
	State backend.JobState
	Raw   string // Grid Engine's state letters (r, qw, hqw, Eqw, dr, ...)
	Start time.Time
	End   time.Time // start + h_rt, for a running job with one
}

type qstatXML struct {
	Running []qjob `xml:"queue_info>job_list"`
	Pending []qjob `xml:"job_info>job_list"`
}

type qjob struct {
	Kind     string `xml:"state,attr"` // running, pending, suspended, zombie
	Num      string `xml:"JB_job_number"`
	State    string `xml:"state"`
	Start    string `xml:"JAT_start_time"`
	Tasks    string `xml:"tasks"`
	Requests []struct {
		Name  string `xml:"name,attr"`
		Value string `xml:",chardata"`
	} `xml:"hard_request"`
}

// parseQstat reads `qstat -xml -r`. Jobs in the queue_info section (they
// have a queue: running, suspended, being deleted) are Running; those of
// job_info (qw, hqw, Eqw: waiting for a slot, held, or in error) are
// Pending.
func parseQstat(out string) ([]row, error) {
	var q qstatXML
	if err := xml.Unmarshal([]byte(out), &q); err != nil {
		return nil, fmt.Errorf("reading qstat -xml: %v", err)
	}
	var rows []row
	for i, j := range append(q.Running, q.Pending...) {
		if j.Kind == "zombie" {
			continue
		}
		r := row{Num: strings.TrimSpace(j.Num), Task: strings.TrimSpace(j.Tasks), Raw: strings.TrimSpace(j.State), State: backend.Running}
		if i >= len(q.Running) || j.Kind == "pending" {
			r.State = backend.Pending
		}
		if !jobIDRe.MatchString(r.Num) {
			return nil, fmt.Errorf("qstat -xml: bad job number %q", j.Num)
		}
		if r.State == backend.Running {
			r.Start = parseTime(j.Start)
			for _, h := range j.Requests {
				if h.Name == "h_rt" && !r.Start.IsZero() {
					if d, err := ParseTime(strings.TrimSpace(h.Value)); err == nil && d > 0 {
						r.End = r.Start.Add(d)
					}
				}
			}
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// parseTime reads qstat's times (2006-01-02T15:04:05, local time, or
// with fractions of a second); the zero time if it cannot.
func parseTime(s string) time.Time {
	s = strings.TrimSpace(s)
	for _, layout := range []string{"2006-01-02T15:04:05", "2006-01-02T15:04:05.000"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t
		}
	}
	return time.Time{}
}

// queue is what qstat and the accounting file say of a set of asked IDs.
type queue = backend.Queue

// Jobs implements backend.Backend: one `qstat -xml -r -u USER` for the
// jobs that are queued or running and, for those it no longer lists, the
// accounting file read from its end (what qacct -j tells). An array job's
// ID sums up its tasks, as in the Slurm engine, and the answer has an entry
// for each of its tasks seen ("JOB.TASK"). An ended job without an
// accounting record is CANCELLED if farm deleted it (Cancel), else GONE.
func (b *Backend) Jobs(ctx context.Context, ids []string) (map[string]backend.JobInfo, error) {
	q, err := b.query(ctx, ids, true)
	if err != nil {
		return nil, err
	}
	return q.Infos(), nil
}

// query asks qstat about ids and, with ended, the accounting file about
// those qstat does not list.
func (b *Backend) query(ctx context.Context, ids []string, ended bool) (*queue, error) {
	q := backend.NewQueue(ids)
	any := false
	for _, id := range ids {
		any = any || validID(id)
	}
	if !any {
		return q, nil
	}
	out, err := b.run(ctx, nil, false, "qstat", "-xml", "-r", "-u", userName())
	if err != nil {
		return nil, err
	}
	rows, err := parseQstat(out)
	if err != nil {
		return nil, err
	}
	byNum := map[string][]row{}
	for _, r := range rows {
		byNum[r.Num] = append(byNum[r.Num], r)
	}
	gone := map[string]bool{}
	for id, a := range q.Jobs {
		if !validID(id) {
			continue
		}
		num, task, isTask := strings.Cut(id, ".")
		for _, r := range byNum[num] {
			if isTask && !backend.TaskMatches(r.Task, task) {
				continue
			}
			a.Add(r.State, r.Task, r.Start, r.End)
			if !isTask && r.Task != "" && jobIDRe.MatchString(r.Task) {
				q.Tasks[num+"."+r.Task] = backend.JobInfo{ID: num + "." + r.Task, State: r.State, Start: r.Start, End: r.End}
			}
		}
		if a.N == 0 {
			gone[num] = true
		}
	}
	if !ended || len(gone) == 0 {
		return q, nil
	}
	recs, err := readAccounting(b.accountingPath(), gone)
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	b.settle(q, recs)
	return q, nil
}

// settle gives the asked IDs that qstat no longer lists their final state,
// from their accounting records and Cancel's marks.
func (b *Backend) settle(q *queue, recs map[string][]record) {
	for id, a := range q.Jobs {
		if a.N > 0 || !validID(id) {
			continue
		}
		num, task, isTask := strings.Cut(id, ".")
		marked := b.marked(id) || (isTask && b.marked(num))
		for _, r := range recs[num] {
			if isTask && strconv.Itoa(r.Task) != task {
				continue
			}
			st := r.state(marked)
			if backend.Severity(st) > backend.Severity(a.Worst) {
				a.Worst = st
			}
			if a.Start.IsZero() || r.Start.Before(a.Start) {
				a.Start = r.Start
			}
			if r.End.After(a.End) {
				a.End = r.End
			}
			if !isTask && r.Task > 0 {
				tid := num + "." + strconv.Itoa(r.Task)
				q.Tasks[tid] = backend.JobInfo{ID: tid, State: st, Start: r.Start, End: r.End}
			}
		}
		array := false
		for _, r := range recs[num] {
			array = array || r.Task > 0
		}
		switch {
		case marked && a.Worst == "":
			// Deleted while pending: no record.
			a.Worst = backend.Cancelled
		case marked && array && !isTask:
			// Some of its tasks may have been deleted while pending.
			a.Worst = max2(a.Worst, backend.Cancelled)
		}
	}
}

func max2(a, b backend.JobState) backend.JobState {
	if backend.Severity(b) > backend.Severity(a) {
		return b
	}
	return a
}

// markDir holds Cancel's marks: one empty file per job ID it deleted.
func (b *Backend) markDir() string { return layout.EngineDir(b.Dir, Name) }

func (b *Backend) mark(id string) {
	os.MkdirAll(b.markDir(), 0o755)
	if fh, err := os.OpenFile(filepath.Join(b.markDir(), "cancelled."+id), os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
		fh.Close()
	}
}

func (b *Backend) marked(id string) bool {
	_, err := os.Stat(filepath.Join(b.markDir(), "cancelled."+id))
	return err == nil
}

// accountingPath is the accounting file: Backend.Accounting, else
// $SGE_ROOT/$SGE_CELL/common/accounting (DefaultAccounting).
func (b *Backend) accountingPath() string {
	if b.Accounting != "" {
		return b.Accounting
	}
	return DefaultAccounting(os.Getenv)
}

// DefaultAccounting is $SGE_ROOT/$SGE_CELL/common/accounting, with
// SGE_ROOT and SGE_CELL as Debian's wrapper of the Grid Engine commands
// finds them when unset (/etc/default/gridengine, else /var/lib/gridengine
// and default).
func DefaultAccounting(getenv func(string) string) string {
	root, cell := getenv("SGE_ROOT"), getenv("SGE_CELL")
	if root == "" || cell == "" {
		if b, err := os.ReadFile("/etc/default/gridengine"); err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
				v = strings.Trim(strings.TrimSpace(v), `"'`)
				if !ok || v == "" {
					continue
				}
				if k == "SGE_ROOT" && root == "" {
					root = v
				}
				if k == "SGE_CELL" && cell == "" {
					cell = v
				}
			}
		}
	}
	if root == "" {
		root = "/var/lib/gridengine"
	}
	if cell == "" {
		cell = "default"
	}
	return filepath.Join(root, cell, "common", "accounting")
}
