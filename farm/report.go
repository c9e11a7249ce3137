package farm

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/farm-hpc/farm/atomicfile"
	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/layout"
	"github.com/farm-hpc/farm/proc"
	"github.com/farm-hpc/farm/report"
	"github.com/farm-hpc/farm/status"
	"github.com/farm-hpc/farm/tablefmt"
)

// ReportOptions are the files farm report writes.
type ReportOptions struct {
	HTML  string  // the page; "" with neither SVG nor PNG: report.html in the farm directory
	SVG   string  // the figures as one SVG image, if not ""
	PNG   string  // the figures as one PNG image, if not ""
	Scale float64 // pixels per unit of the PNG (1: 960 pixels wide)
}

// Report is farm report: it gathers the report's data (reportData) and
// writes the files opt names, each whole (atomicfile), saying on f.Out
// what it wrote and how big.
func (f *Farm) Report(ctx context.Context, opt ReportOptions) error {
	if opt.HTML == "" && opt.PNG == "" && opt.SVG == "" {
		opt.HTML = filepath.Join(f.Dir, "report.html")
	}
	d, err := f.reportData(ctx, time.Now())
	if err != nil {
		return err
	}
	name := filepath.Base(f.Dir)
	if abs, err := filepath.Abs(f.Dir); err == nil {
		name = abs
	}
	figs := append([]*report.Canvas{report.SummaryFigure(d, name)}, report.Figures(d)...)
	for _, o := range []struct {
		path  string
		write func(w *bufio.Writer) error
	}{
		{opt.HTML, func(w *bufio.Writer) error { return report.WriteHTML(w, d, name) }},
		{opt.SVG, func(w *bufio.Writer) error { return report.WriteSVG(w, figs) }},
		{opt.PNG, func(w *bufio.Writer) error { return report.WritePNG(w, figs, opt.Scale) }},
	} {
		if o.path == "" {
			continue
		}
		if err := atomicfile.Write(o.path, proc.NewMode(0o666), o.write, ""); err != nil {
			return writeError(o.path, err)
		}
		size := ""
		if st, err := os.Stat(o.path); err == nil {
			size = fmt.Sprintf(" (%s)", fmtBytes(st.Size()))
		}
		fmt.Fprintf(f.Out, "Wrote %s%s\n", o.path, size)
	}
	if opt.HTML != "" {
		fmt.Fprintf(f.Out, "Open it in a browser; it needs no network (copy it to a laptop with scp, for one).\n")
	}
	return nil
}

// writeError says why the file at path could not be written, and what to
// do, in one line.
func writeError(path string, err error) error {
	dir := filepath.Dir(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("cannot write %s: the directory %s does not exist; create it, or name another file", path, dir)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("cannot write %s: no permission to write in %s; name another file", path, dir)
	}
	return fmt.Errorf("cannot write %s: %v", path, err)
}

// fmtBytes is a size for people: "1.2 MB".
func fmtBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f kB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// reportData computes the data of farm report: one scheduler query per
// backend (the jobs' starts and ends), one read of the status files for
// farm query's figures and one for the report's, and, for the commands of
// the slowest cases, one read of table.dat.
func (f *Farm) reportData(ctx context.Context, now time.Time) (*report.Data, error) {
	q, qd, err := f.query(ctx, now)
	if err != nil {
		return nil, err
	}
	jobs := map[string]report.JobInfo{}
	for id, in := range qd.infos {
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
		Cutoff:     f.cutoff(),
		Summary:    summaryStats(q),
		PerMinute:  q.PerMinute,
		ETASeconds: q.ETASeconds,
		Active:     q.Active(),
		Mem:        qd.mem.memOf(),
	})
	if err != nil {
		return nil, err
	}
	var named []*report.Attempt
	for i := range d.Slowest {
		named = append(named, &d.Slowest[i])
	}
	for _, l := range [][]report.UseCase{d.Use.Over, d.Use.Under, d.Use.LeastCPU} {
		for i := range l {
			named = append(named, &l[i].Attempt)
		}
	}
	f.fillCommands(named, qd.st.Table)
	return d, nil
}

// summaryStats are farm query's numbers, for the report.
func summaryStats(q Query) []report.Stat {
	c := q.FarmCases
	s := func(name string, format string, a ...any) report.Stat {
		return report.Stat{Name: name, Value: fmt.Sprintf(format, a...)}
	}
	stats := []report.Stat{
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
		s("started more than once", "%d cases (at most %d attempts)", q.Restarted, q.MostAttempts),
		s("crashed", "%d cases (MAX_CRASHES=%d)", c.Crashed, q.MaxCrashes),
	}
	if c.TimedOut > 0 { // after interrupted
		stats = slices.Insert(stats, 4, s("timed out", "%d", c.TimedOut))
	}
	stats = append(stats, coreHourStats(q.CoreHours)...)
	for _, a := range q.Advice {
		stats = append(stats, s("advice", "%s", strings.TrimPrefix(a, "Advice: ")))
	}
	return stats
}

// coreHourStats are the farm's core-hours, for the report.
func coreHourStats(c CoreHours) []report.Stat {
	per := "none succeeded yet"
	if c.PerSucceeded >= 0 {
		per = fmtCoreHours(c.PerSucceeded)
	}
	var by []string
	for _, o := range busyOutcomes {
		by = append(by, fmtCoreHours(c.BusyBy[o.String()])+" "+o.String())
	}
	return []report.Stat{
		{Name: "core-hours allocated", Value: fmt.Sprintf("%s (meta-jobs' CPUs × wall time, from %s)", fmtCoreHours(c.Allocated), c.AllocatedFrom)},
		{Name: "core-hours busy in cases", Value: fmt.Sprintf("%s (%s)", fmtCoreHours(c.Busy), strings.Join(by, ", "))},
		{Name: "core-hours idle", Value: fmtCoreHours(c.Idle)},
		{Name: "core-hours per succeeded case", Value: per},
	}
}

// errFound stops the reading of table.dat once every case wanted is found.
var errFound = errors.New("found")

// fillCommands fills in the commands of the attempts the report names
// (the slowest, those furthest off in what they used): from runTable,
// the current run's own table (what its cases ran, whatever table.dat is
// now), then, for the cases it does not hold (they ran in earlier runs),
// from table.dat. A table that does not read leaves them empty.
func (f *Farm) fillCommands(as []*report.Attempt, runTable string) {
	want := map[int64][]int{}
	for i, a := range as {
		want[a.ID] = append(want[a.ID], i)
	}
	left := len(want)
	from := func(table string) {
		if left == 0 || table == "" {
			return
		}
		_ = tablefmt.ReadCases(filepath.Join(f.Dir, table), func(c tablefmt.Case) error {
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

// cutoff is dt_cutoff as a meta-job last stored it (status.Cutoff), 0 if
// none reads.
func (f *Farm) cutoff() float64 {
	c, _ := status.ReadCutoff(f.Path(layout.MiscDir, layout.Cutoff))
	return c.Seconds
}
