package farm

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/casetable"
	"github.com/farm-hpc/farm/layout"
	"github.com/farm-hpc/farm/report"
)

// ReportData computes the data of farm report: one scheduler query per
// backend (the jobs' starts and ends), one read of the status files for
// farm query's figures and one for the report's, and, for the commands of
// the slowest cases, one read of table.dat.
func (f *Farm) ReportData(ctx context.Context, now time.Time) (*report.Data, error) {
	q, infos, st, err := f.query(ctx, now)
	if err != nil {
		return nil, err
	}
	jobs := map[string]report.JobInfo{}
	for id, in := range infos {
		jobs[id] = report.JobInfo{Start: in.Start, End: in.End, Live: runsCases(in.State)}
		if in.State == backend.Pending {
			jobs[id] = report.JobInfo{}
		}
	}
	d, err := report.Build(report.Input{
		StatusDir:  f.Path(layout.StatusDir),
		Now:        now,
		Jobs:       jobs,
		LiveAsOf:   now, // before the scheduler was asked
		Cutoff:     st.Cutoff,
		Summary:    summaryStats(q),
		PerMinute:  q.PerMinute,
		ETASeconds: q.ETASeconds,
		Active:     q.Active(),
	})
	if err != nil {
		return nil, err
	}
	f.slowestCommands(d.Slowest, st.Table)
	return d, nil
}

// summaryStats are farm query's numbers, for the report.
func summaryStats(q Query) []report.Stat {
	c := q.FarmCases
	s := func(name string, format string, a ...any) report.Stat {
		return report.Stat{Name: name, Value: fmt.Sprintf(format, a...)}
	}
	return []report.Stat{
		s("cases in table.dat", "%d", c.Total),
		s("succeeded", "%d", c.Succeeded),
		s("failed", "%d", c.Failed),
		s("interrupted", "%d", c.Interrupted),
		s("unfit", "%d", c.Unfit),
		s("running", "%d", c.Running),
		s("never ran", "%d", c.Left),
		s("processed", "%s", percent(c)),
		s("current run", "%d (%d cases, %d not yet taken)", q.Run, q.RunCases.Total, q.RunCases.Left),
		s("jobs", "%d queued, %d running, %d finished", q.Jobs.Queued, q.Jobs.Running, q.Jobs.Finished),
		s("throughput", "%s", rateETA(q)),
	}
}

// errFound stops the reading of table.dat once every case wanted is found.
var errFound = errors.New("found")

// slowestCommands fills in the commands of the attempts: from runTable,
// the current run's own table (what its cases ran, whatever table.dat is
// now), then, for the cases it does not hold (they ran in earlier runs),
// from table.dat. A table that does not read leaves them empty.
func (f *Farm) slowestCommands(as []report.Attempt, runTable string) {
	want := map[int64][]int{}
	for i, a := range as {
		want[a.ID] = append(want[a.ID], i)
	}
	left := len(want)
	from := func(table string) {
		if left == 0 || table == "" {
			return
		}
		_ = casetable.ReadCases(filepath.Join(f.Dir, table), func(c casetable.Case) error {
			if is, ok := want[c.ID]; ok {
				for _, i := range is {
					as[i].Command = c.Command
				}
				delete(want, c.ID)
				if left--; left == 0 {
					return errFound
				}
			}
			return nil
		})
	}
	if runTable != layout.Table {
		from(runTable)
	}
	from(layout.Table)
}
