package farm

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/layout"
)

// What farm wait waits for, said on stderr: once it has waited
// noticeAfter, again when the jobs or what they do change (at most once
// every noticeAfter), and every noticeEvery while nothing changes. A long
// wait says why it is long: a run's warden staying for the others, a
// meta-job silent for long (a long case, or a frozen job, which its
// engine ends at its time limit), a job pending in the queue.
const (
	noticeAfter = time.Minute
	noticeEvery = 10 * time.Minute
	// silentAfter is how long a running meta-job must have written no
	// record for the notice to name it as silent.
	silentAfter = 10 * time.Minute
	// noticeNamed is how many jobs a notice names; the others are counted.
	noticeNamed = 6
)

// waitNotice is farm wait's notice of what it waits for.
type waitNotice struct {
	w     io.Writer // stderr
	start time.Time
	said  time.Time // the last notice; zero before the first
	key   string    // what the last notice said, without its durations
}

// say says on n.w what active, whose states are infos, are doing at now,
// if it is time to, after ending the progress bar's line b (nil: none).
func (n *waitNotice) say(f *Farm, b *bar, active []JobRecord, infos map[string]backend.JobInfo, now time.Time) {
	if len(active) == 0 || now.Sub(n.start) < noticeAfter || now.Sub(n.said) < noticeAfter {
		return
	}
	line, key := f.waitingFor(active, infos, now)
	if key == n.key && now.Sub(n.said) < noticeEvery {
		return
	}
	if b != nil {
		b.done() // the bar's line ended: the notice has its own
	}
	fmt.Fprintf(n.w, "farm wait: waiting %s so far, for %s\n", roundWait(now.Sub(n.start)), line)
	n.said, n.key = now, key
}

// waitingJob is one job farm wait waits for, as its notice names it.
type waitingJob struct {
	rec    JobRecord
	info   backend.JobInfo
	rank   int           // the order of the notice: silent, warden, running, other, pending
	silent time.Duration // a running meta-job's time since its last record, if over silentAfter
	warden bool
}

// waitingFor is the notice's text for active, whose states are infos, at
// now; and its key: the same without durations, which tells a change.
func (f *Farm) waitingFor(active []JobRecord, infos map[string]backend.JobInfo, now time.Time) (line, key string) {
	wardens := map[int]string{}
	jobs := make([]waitingJob, 0, len(active))
	for _, r := range active {
		j := waitingJob{rec: r, info: infos[r.ID], rank: 3}
		switch {
		case j.info.State == backend.Pending:
			j.rank = 4
		case j.info.State == backend.Running && r.Kind == kindMeta:
			w, ok := wardens[r.Run]
			if !ok {
				if _, job, gone, _ := ReadWarden(f.Path(layout.MiscDir, layout.RescueDir(r.Run)), nil); !gone {
					w = job
				}
				wardens[r.Run] = w
			}
			j.warden, j.rank = w == r.ID, 2
			if j.warden {
				j.rank = 1
			} else if _, last := NewestStatusFile(f.Path(layout.StatusDir), r.ID); !last.IsZero() && now.Sub(last) >= silentAfter {
				j.silent, j.rank = now.Sub(last), 0
			}
		}
		jobs = append(jobs, j)
	}
	slices.SortStableFunc(jobs, func(a, b waitingJob) int {
		return cmp.Or(cmp.Compare(a.rank, b.rank), cmp.Compare(a.rec.Run, b.rec.Run))
	})
	var parts, keys []string
	for i, j := range jobs {
		keys = append(keys, fmt.Sprintf("%s:%s:%d", j.rec.ID, j.info.State, j.rank))
		if i < noticeNamed {
			parts = append(parts, j.describe(now))
		}
	}
	line = fmt.Sprintf("%d job(s): %s", len(jobs), strings.Join(parts, "; "))
	if more := len(jobs) - noticeNamed; more > 0 {
		line += fmt.Sprintf("; and %d more (%s)", more, countStates(jobs[noticeNamed:]))
	}
	return line, strings.Join(keys, " ")
}

// describe says what job j does, for the notice.
func (j waitingJob) describe(now time.Time) string {
	id, run := j.rec.ID, j.rec.Run
	switch {
	case j.silent > 0:
		end := "until its engine ends it at its time limit"
		if !j.info.End.IsZero() {
			end = "until its time limit, " + j.info.End.UTC().Format("15:04 MST")
		}
		return fmt.Sprintf("meta-job %s of run %d has written no record for %s (a long case, or a frozen job: it is waited for %s; 'farm kill' ends it)",
			id, run, roundWait(j.silent), end)
	case j.warden:
		return fmt.Sprintf("meta-job %s stays as run %d's warden while its other meta-jobs run, to rescue their cases if they die", id, run)
	case j.rec.Kind == kindMeta && j.info.State == backend.Running:
		return fmt.Sprintf("meta-job %s of run %d runs cases", id, run)
	case j.rec.Kind == kindMeta && j.info.State == backend.Pending:
		return fmt.Sprintf("meta-job %s of run %d is pending in the queue", id, run)
	case j.rec.Kind == kindAuto:
		return fmt.Sprintf("the -auto job %s (%s) of run %d, which resubmits once the run's meta-jobs end", id, j.info.State, run)
	case j.rec.Kind == kindFinal:
		return fmt.Sprintf("the final.sh job %s (%s)", id, j.info.State)
	}
	return fmt.Sprintf("%s job %s of run %d is %s", j.rec.Kind, id, run, j.info.State)
}

// countStates counts jobs by state: "3 RUNNING, 2 PENDING".
func countStates(jobs []waitingJob) string {
	n := map[backend.JobState]int{}
	var order []backend.JobState
	for _, j := range jobs {
		if n[j.info.State] == 0 {
			order = append(order, j.info.State)
		}
		n[j.info.State]++
	}
	parts := make([]string, len(order))
	for i, s := range order {
		parts[i] = fmt.Sprintf("%d %s", n[s], s)
	}
	return strings.Join(parts, ", ")
}

// roundWait rounds d for a notice: to the minute from a minute, else the second.
func roundWait(d time.Duration) string {
	if d >= time.Minute {
		return strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
	}
	return d.Round(time.Second).String()
}
