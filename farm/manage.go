package farm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/layout"
	"github.com/farm-hpc/farm/proc"
	"github.com/farm-hpc/farm/status"
	"github.com/olekukonko/tablewriter"
)

// listRow is one job in farm list --json.
type listRow struct {
	ID      string `json:"id"`
	Run     int    `json:"run"`
	Kind    string `json:"kind"`
	Backend string `json:"backend"`
	State   string `json:"state"`
	Start   string `json:"start,omitempty"`
	End     string `json:"end,omitempty"`
	Cases   int64  `json:"cases"`   // cases it ended
	Running int64  `json:"running"` // cases it is running now
	// OtherHost: the host identity of a local job that runs (or ran) on
	// another host or in another container; its state is the one it
	// last recorded.
	OtherHost string `json:"other_host,omitempty"`
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Format("2006-01-02 15:04:05")
}

// List prints every job of the farm with its state and the cases it ran.
func (f *Farm) List(ctx context.Context, w io.Writer, format Format) error {
	sum, recs, infos, err := f.load(ctx, time.Time{})
	if err != nil {
		return err
	}
	if format == Text && f.Config.Backend != "" && f.Config.Backend != "auto" {
		fmt.Fprintf(w, "Backend: %s (BACKEND in %s, line %d: 'farm submit' and 'farm resubmit' use it unless given --backend)\n", f.Config.Backend, layout.Config, f.Config.BackendLine)
	}
	return writeList(w, listRows(recs, infos, sum, f.arrayOf(ctx, recs)), format)
}

// arrayOf reads array tasks' IDs as the engines of the jobs recs does
// (backend.TaskIDs): the array a task ID is of, ok false if none says it
// is a task's.
func (f *Farm) arrayOf(ctx context.Context, recs []JobRecord) func(id string) (string, bool) {
	var readers []backend.TaskIDs
	seen := map[string]bool{}
	for _, r := range recs {
		if seen[r.Backend] {
			continue
		}
		seen[r.Backend] = true
		if b, err := f.openBackend(ctx, r.Backend); err == nil {
			if t, ok := b.(backend.TaskIDs); ok {
				readers = append(readers, t)
			}
		}
	}
	return func(id string) (string, bool) {
		for _, t := range readers {
			if array, ok := t.ArrayOf(id); ok {
				return array, true
			}
		}
		return "", false
	}
}

// listRows joins the job records with their states and status files. A
// SIMPLE-mode job array counts the cases of all its tasks, whose IDs
// arrayOf reads (backend.TaskIDs).
func listRows(recs []JobRecord, infos map[string]backend.JobInfo, sum *status.Summary, arrayOf func(id string) (string, bool)) []listRow {
	recorded := map[string]bool{}
	for _, r := range recs {
		recorded[r.ID] = true
	}
	ended, open := map[string]int64{}, map[string]int64{}
	for _, j := range sum.Jobs {
		id := j.ID
		if array, ok := arrayOf(id); ok && !recorded[id] && recorded[array] {
			id = array // array task -> its array
		}
		ended[id] += j.Ended
		open[id] += j.Open
	}
	rows := make([]listRow, 0, len(recs))
	for _, r := range recs {
		in := infos[r.ID]
		rows = append(rows, listRow{ID: r.ID, Run: r.Run, Kind: r.Kind, Backend: r.Backend, State: string(in.State),
			Start: fmtTime(in.Start), End: fmtTime(in.End), Cases: ended[r.ID], Running: open[r.ID], OtherHost: in.OtherHost})
	}
	return rows
}

func writeList(w io.Writer, rows []listRow, format Format) error {
	if format == JSON {
		return json.NewEncoder(w).Encode(rows)
	}
	if len(rows) == 0 {
		fmt.Fprintln(w, "No jobs: the farm has not been submitted.")
		return nil
	}
	t := newTable(w, "JOB", "RUN", "KIND", "BACKEND", "STATE", "START", "END", "CASES", "RUNNING")
	for _, r := range rows {
		t.Append([]string{r.ID, strconv.Itoa(r.Run), r.Kind, r.Backend, r.State, dash(r.Start), dash(r.End),
			strconv.FormatInt(r.Cases, 10), strconv.FormatInt(r.Running, 10)})
	}
	t.Render()
	for _, r := range rows {
		if r.OtherHost != "" && backend.JobState(r.State).Active() {
			fmt.Fprintf(w, "Job %s runs on %s (host identity %s), not here: its state is the one it last recorded.\n",
				r.ID, proc.HostName(r.OtherHost), r.OtherHost)
		}
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// table is a plain table in the style of squeue and kubectl: no borders,
// columns left-aligned two spaces apart.
type table struct {
	*tablewriter.Table
	w   io.Writer
	buf bytes.Buffer
}

// Render writes the table without the blanks tablewriter pads the last
// column with.
func (t *table) Render() {
	t.Table.Render()
	for _, line := range strings.SplitAfter(t.buf.String(), "\n") {
		io.WriteString(t.w, strings.TrimRight(line, " \n"))
		if strings.HasSuffix(line, "\n") {
			io.WriteString(t.w, "\n")
		}
	}
}

func newTable(w io.Writer, header ...string) *table {
	tt := &table{w: w}
	t := tablewriter.NewWriter(&tt.buf)
	tt.Table = t
	t.SetHeader(header)
	t.SetAutoFormatHeaders(false)
	t.SetAutoWrapText(false)
	t.SetAlignment(tablewriter.ALIGN_LEFT)
	t.SetHeaderAlignment(tablewriter.ALIGN_LEFT)
	t.SetBorder(false)
	t.SetHeaderLine(false)
	t.SetColumnSeparator("")
	t.SetCenterSeparator("")
	t.SetRowSeparator("")
	t.SetTablePadding("  ")
	t.SetNoWhiteSpace(true)
	return tt
}

// Cancel cancels the farm's active jobs (only pending ones if pendingOnly)
// and says which.
func (f *Farm) Cancel(ctx context.Context, scope backend.CancelScope) error {
	pendingOnly := scope == backend.PendingOnly
	active, infos, err := f.activeJobs(ctx)
	if err != nil {
		return err
	}
	byBackend := map[string][]string{}
	partial := map[string]bool{} // running arrays whose pending tasks prune cancels
	for _, r := range active {
		in := infos[r.ID]
		if pendingOnly && in.State != backend.Pending {
			// A running job array may have tasks still pending: the
			// engine cancels those only (and nothing, if all run).
			if in.State != backend.Running || in.Tasks <= 1 {
				continue
			}
			partial[r.ID] = true
		}
		byBackend[r.Backend] = append(byBackend[r.Backend], r.ID)
	}
	var all []string
	names := make([]string, 0, len(byBackend))
	for n := range byBackend {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		b, err := f.openBackend(ctx, name)
		if err != nil {
			return err
		}
		done, err := b.Cancel(ctx, byBackend[name], scope)
		all = append(all, done...)
		if err != nil {
			return err
		}
	}
	verb := "kill"
	if pendingOnly {
		verb = "prune"
	}
	if len(all) == 0 {
		fmt.Fprintln(f.Out, "Nothing to cancel: no job of the farm is "+map[bool]string{true: "pending.", false: "pending or running."}[pendingOnly])
		return nil
	}
	named := make([]string, len(all))
	for i, id := range all {
		named[i] = id
		if partial[id] {
			named[i] += " (its pending array tasks; the running ones go on)"
		}
	}
	f.Log("%s: cancelled %d job(s): %s", verb, len(all), strings.Join(named, " "))
	fmt.Fprintf(f.Out, "Cancelled %d job(s): %s\n", len(all), strings.Join(named, " "))
	return nil
}
