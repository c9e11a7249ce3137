package farm

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/casetable"
	"github.com/farm-hpc/farm/layout"
	"github.com/farm-hpc/farm/status"
)

// Summary loads every status record of the farm, asking the backends once
// which meta-jobs still run (their open cases are running, not interrupted).
func (f *Farm) Summary(ctx context.Context) (*status.Summary, error) {
	sum, _, _, err := f.load(ctx, time.Time{})
	return sum, err
}

// load reads the job records, asks the backends for their states (one call
// per backend) and loads the status records, counting cases ended since
// since.
func (f *Farm) load(ctx context.Context, since time.Time) (*status.Summary, []JobRecord, map[string]backend.JobInfo, error) {
	recs, err := f.Jobs()
	if err != nil {
		return nil, nil, nil, err
	}
	asOf := time.Now()
	infos, err := f.jobInfos(ctx, recs)
	if err != nil {
		return nil, nil, nil, err
	}
	var maxID, cases int64
	if st, err := f.readState(ctx); err == nil {
		maxID, cases = st.MaxID, st.Total
		f.note = f.tableNote(st, recs, infos)
	}
	sum, err := status.Load(f.Path(layout.StatusDir), status.Options{
		Live:     func(id string) bool { return runsCases(infos[id].State) },
		LiveAsOf: asOf,
		MaxID:    maxID,
		Cases:    cases,
		Since:    since,
	})
	if err == nil {
		for _, w := range sum.Warnings {
			fmt.Fprintf(os.Stderr, "farm: warning: %s\n", w)
		}
	}
	return sum, recs, infos, err
}

// tableNote says, in one line, that table.dat changed since the current
// run (st's) started: the run goes on (or went on) with the private table
// it started with, and 'farm resubmit' will use table.dat as it is now;
// "" if it did not change, or cannot tell (a run of an older farm, which
// recorded no source, or a closed run). It costs a stat of table.dat, and
// a reading of it whole only after a same-size change of its identity or
// times (casetable.Source.Changed).
func (f *Farm) tableNote(st casetable.State, recs []JobRecord, infos map[string]backend.JobInfo) string {
	if st.Run == 0 || st.Table == "" || st.Table == layout.Table {
		return ""
	}
	if fi, err := os.Stat(f.Path(layout.Table)); err != nil || !fi.Mode().IsRegular() {
		return "" // what reads it says what is wrong
	}
	src, err := casetable.ReadSource(f.Path(st.Table))
	if err != nil {
		return ""
	}
	if changed, err := src.Changed(f.Path(layout.Table)); err != nil || !changed {
		return ""
	}
	going := st.Claimed < st.Cases
	for _, r := range recs {
		if r.Run == st.Run && infos[r.ID].State.Active() {
			going = true
		}
	}
	if going {
		return fmt.Sprintf("%s changed since run %d started; run %d goes on with the table it started with; 'farm resubmit' will use %s as it is now", layout.Table, st.Run, st.Run, layout.Table)
	}
	return fmt.Sprintf("%s changed since run %d started; run %d ran the table it started with; 'farm resubmit' will use %s as it is now", layout.Table, st.Run, st.Run, layout.Table)
}

// readState reads the claim state (zero State if never submitted).
func (f *Farm) readState(ctx context.Context) (casetable.State, error) {
	store := f.Store()
	defer store.Close()
	st, err := store.Read(ctx)
	if errors.Is(err, casetable.ErrNoState) {
		return st, nil
	}
	return st, stateErr(err)
}

// Progress is the farm-wide count of the cases of table.dat by state.
type Progress struct {
	Total int64
	status.Counts
	NeverRan int64
}

// Done reports whether every case succeeded.
func (p Progress) Done() bool { return p.Total > 0 && p.Succeeded == p.Total }

// String is the line farm wait ends with: "10 cases: 6 succeeded, 1
// failed, 1 interrupted, 1 never ran, 1 unfit".
func (p Progress) String() string {
	return fmt.Sprintf("%d cases: %d succeeded, %d failed, %d interrupted, %d never ran, %d unfit",
		p.Total, p.Succeeded, p.Failed, p.Interrupted, p.NeverRan, p.Unfit)
}

// Progress counts the cases of table.dat (those 'farm resubmit' would
// run, or not) by their farm-wide state. Runs read private copies of
// table.dat, so it may have been edited since they started: a line that
// no longer reads, or repeats an ID, is left out of the count (a repeated
// ID counts once), with one warning on stderr naming the first such line
// and what to do, and the summary goes on.
func (f *Farm) Progress(sum *status.Summary) (Progress, error) {
	var p Progress
	if numbered, err := casetable.FirstCaseNumbered(f.Path(layout.Table)); err == nil && !numbered && !f.hasRecords() {
		// table.dat is not numbered yet: the farm was never submitted.
		return Progress{}, nil
	}
	skipped, first, err := casetable.ReadIDsLenient(f.Path(layout.Table), func(id int64) {
		p.Total++
		st := sum.Get(id).State
		if st == status.NeverRan {
			p.NeverRan++
		}
		p.Add(st)
	})
	if err != nil {
		// A farm that ran counts the cases of its table: a table gone
		// must not read as "0 cases".
		return p, tableErr(err)
	}
	if first != nil {
		more := ""
		if skipped > 1 {
			more = fmt.Sprintf(" (and %d more such line(s))", skipped-1)
		}
		note := ""
		if f.note != "" {
			note = " (" + f.note + ")"
			f.note = ""
		}
		fmt.Fprintf(f.warnings(), "farm: warning: %v%s: not counted; fix the line before 'farm resubmit', which refuses %s until then%s\n", first, more, layout.Table, note)
	}
	f.sayNote()
	return p, nil
}

// warnings is where farm's readers warn: stderr.
func (f *Farm) warnings() io.Writer { return os.Stderr }

// sayNote says what the last load found to say of table.dat (tableNote),
// once.
func (f *Farm) sayNote() {
	if f.note != "" {
		fmt.Fprintf(f.warnings(), "farm: note: %s\n", f.note)
		f.note = ""
	}
}

// ErrWaitTimeout is what a *WaitTimeoutError is (errors.Is).
var ErrWaitTimeout = errors.New("timed out waiting for the farm's jobs")

// WaitTimeoutError is returned by Wait when its timeout ran out.
type WaitTimeoutError struct{ Timeout time.Duration }

func (e *WaitTimeoutError) Error() string {
	return fmt.Sprintf("timed out after %s; jobs are still pending or running", e.Timeout)
}

// Is makes errors.Is(err, ErrWaitTimeout) true.
func (e *WaitTimeoutError) Is(target error) bool { return target == ErrWaitTimeout }

// InterruptedError is returned by Wait when its context was cancelled
// (Ctrl-C) before the farm's jobs ended; it wraps the context's error.
type InterruptedError struct {
	What string // what was left undone, for the user
	Err  error
}

func (e *InterruptedError) Error() string { return "interrupted: " + e.What }
func (e *InterruptedError) Unwrap() error { return e.Err }

// Wait blocks until no job of the farm is pending or running, or timeout
// (0: none) passes (a *WaitTimeoutError), or ctx is cancelled (an
// *InterruptedError). It returns the farm-wide progress then.
func (f *Farm) Wait(ctx context.Context, timeout time.Duration) (Progress, error) {
	return f.WaitProgress(ctx, timeout, nil, WatchOptions{})
}

// WaitProgress is Wait that, if w is not nil, draws farm query's progress
// bar on w as it waits (as Watch does), at most every opt.Interval; the
// bar costs no scheduler query of its own. The bar's line is ended before
// it returns.
func (f *Farm) WaitProgress(ctx context.Context, timeout time.Duration, w io.Writer, opt WatchOptions) (Progress, error) {
	var b *bar
	var tail *status.Tail
	var drawn time.Time
	if w != nil {
		b, tail = &bar{w: w, opt: opt}, status.NewTail(f.Path(layout.StatusDir))
		defer b.done()
	}
	parent := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	stopped := func() error {
		if parent.Err() != nil {
			return &InterruptedError{What: "the farm's jobs go on; 'farm query' shows them", Err: parent.Err()}
		}
		return &WaitTimeoutError{Timeout: timeout}
	}
	delay := 50 * time.Millisecond
	for {
		active, recs, infos, err := f.activeAndAll(ctx)
		if err == nil && b != nil && (len(active) == 0 || time.Since(drawn) >= opt.Interval) {
			// The bar is drawn when it can be: what it fails to read
			// does not stop the wait.
			if q, qerr := f.watchQuery(ctx, tail, time.Now(), recs, infos); qerr == nil {
				b.draw(q)
				drawn = time.Now()
			}
		}
		if err == nil && len(active) == 0 {
			// A job may have submitted others and ended between the
			// reading of the records and that of the states (the -auto
			// job's resubmission): it recorded them before it ended, so a
			// second reading of the records shows them.
			var again []JobRecord
			if again, err = f.Jobs(); err == nil && len(again) == len(recs) {
				break
			}
			if err == nil {
				continue
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return Progress{}, stopped()
			}
			return Progress{}, err
		}
		select {
		case <-ctx.Done():
			return Progress{}, stopped()
		case <-time.After(delay):
		}
		delay = min(delay*2, 2*time.Second)
	}
	sum, err := f.Summary(context.WithoutCancel(ctx))
	if err != nil {
		return Progress{}, err
	}
	return f.Progress(sum)
}

// StatusOptions are the flags of farm Status.
type StatusOptions struct {
	FailedLast bool // -f: non-zero statuses last
	FailedOnly bool // --failed: only cases that did not succeed
	JSON       bool
	META       bool // --meta: META's "ID STATUS" lines, of the cases that ended
}

// Status prints the status of every case that has a record (farm Status).
func (f *Farm) Status(ctx context.Context, w io.Writer, opt StatusOptions) error {
	sum, err := f.Summary(ctx)
	if err != nil {
		return err
	}
	f.sayNote()
	return WriteStatus(w, sum, opt)
}

// WriteStatus prints one row per case that has a record, in ID order (with
// -f, the cases that did not succeed after the others). It streams: ten
// million cases print in constant memory beyond the summary itself.
func WriteStatus(w io.Writer, sum *status.Summary, opt StatusOptions) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	each := func(fn func(status.Case) error) error { return eachStatusCase(sum, opt, fn) }
	if opt.JSON {
		return writeStatusJSON(bw, each)
	}
	if opt.META {
		return writeStatusMETA(bw, each)
	}
	return writeStatusTable(bw, sum, opt.FailedOnly, each)
}

// statusNotOK reports whether c did not succeed and does not run (it
// failed, was interrupted or is unfit): a case --failed prints, and -f
// prints last.
func statusNotOK(c status.Case) bool {
	return c.State != status.Succeeded && c.State != status.Running
}

// statusWhere returns fn for the cases whose statusNotOK is notOK only.
func statusWhere(notOK bool, fn func(status.Case) error) func(status.Case) error {
	return func(c status.Case) error {
		if statusNotOK(c) == notOK {
			return fn(c)
		}
		return nil
	}
}

// eachStatusCase calls fn for the cases WriteStatus prints, in its order.
func eachStatusCase(sum *status.Summary, opt StatusOptions, fn func(status.Case) error) error {
	if opt.FailedOnly {
		return sum.Each(statusWhere(true, fn))
	}
	if !opt.FailedLast {
		return sum.Each(fn)
	}
	if err := sum.Each(statusWhere(false, fn)); err != nil {
		return err
	}
	return sum.Each(statusWhere(true, fn))
}

// writeStatusMETA writes the cases each gives as META's Status.run prints
// them: "ID STATUS" lines, for the cases that ended with a STATUS
// (succeeded or failed; META has no line for the others), and flushes bw.
func writeStatusMETA(bw *bufio.Writer, each func(func(status.Case) error) error) error {
	var b []byte
	err := each(func(c status.Case) error {
		if c.State != status.Succeeded && c.State != status.Failed {
			return nil
		}
		b = strconv.AppendInt(b[:0], c.ID, 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(c.Status), 10)
		b = append(b, '\n')
		_, err := bw.Write(b)
		return err
	})
	if err != nil {
		return err
	}
	return bw.Flush()
}

// writeStatusJSON writes the cases each gives as a JSON array, one object
// a case, and flushes bw.
func writeStatusJSON(bw *bufio.Writer, each func(func(status.Case) error) error) error {
	quoted := map[string][]byte{}
	q := func(s string) []byte {
		b, ok := quoted[s]
		if !ok {
			b, _ = json.Marshal(s)
			quoted[s] = b
		}
		return b
	}
	first := true
	bw.WriteByte('[')
	var b []byte
	err := each(func(c status.Case) error {
		b = b[:0]
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendStatusJSON(b, c, q)
		_, err := bw.Write(b)
		return err
	})
	if err != nil {
		return err
	}
	bw.WriteString("]\n")
	return bw.Flush()
}

// appendStatusJSON appends the JSON object of case c to b; q quotes a
// string.
func appendStatusJSON(b []byte, c status.Case, q func(string) []byte) []byte {
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, c.ID, 10)
	b = append(b, `,"state":"`...)
	b = append(b, c.State.String()...)
	b = append(b, `","status":`...)
	b = strconv.AppendInt(b, int64(c.Status), 10)
	b = append(b, `,"seconds":`...)
	b = strconv.AppendFloat(b, c.Seconds, 'f', -1, 64)
	b = append(b, `,"job":`...)
	b = append(b, q(c.Job)...)
	b = append(b, `,"host":`...)
	b = append(b, q(c.Host)...)
	b = append(b, `,"run":`...)
	b = strconv.AppendInt(b, int64(c.Run), 10)
	if c.Loop > 0 {
		b = append(b, `,"loop":`...)
		b = strconv.AppendInt(b, int64(c.Loop), 10)
	}
	if len(c.CPUs) > 0 {
		b = append(b, `,"cpus":[`...)
		for i, cpu := range c.CPUs {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(cpu), 10)
		}
		b = append(b, ']')
	}
	if len(c.GPUs) > 0 {
		b = append(b, `,"gpus":[`...)
		for i, gpu := range c.GPUs {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, q(gpu)...)
		}
		b = append(b, ']')
	}
	if c.State == status.Unfit {
		b = append(b, `,"reason":`...)
		b = append(b, q(c.Reason)...)
	}
	if c.Starts > 1 { // must never be: farm claims a case once per run
		b = append(b, `,"starts":`...)
		b = strconv.AppendInt(b, int64(c.Starts), 10)
		b = append(b, `,"starts_run":`...)
		b = strconv.AppendInt(b, int64(c.StartsRun), 10)
	}
	return append(b, '}')
}

// writeStatusTable writes the cases each gives as a table, and flushes bw.
// failedOnly is --failed: it says so when there is no such case. When some
// case is unfit, a last column says why.
func writeStatusTable(bw *bufio.Writer, sum *status.Summary, failedOnly bool, each func(func(status.Case) error) error) error {
	// Column widths from the summary's extremes: no pass over the cases.
	head := []string{"ID", "STATE", "STATUS", "SECONDS", "JOB", "HOST"}
	maxID, minSt, maxSt, maxMs, jobW, hostW := sum.Widths()
	totals := sum.Totals()
	if maxID == 0 && totals == (status.Counts{}) {
		fmt.Fprintln(bw, "No case has a record yet.")
		return bw.Flush()
	}
	if totals.Unfit > 0 {
		head = append(head, "REASON")
	}
	digits := func(v int64) int { return len(strconv.AppendInt(nil, v, 10)) }
	wd := []int{
		max(2, digits(maxID), digits(-1)),
		len("interrupted"),
		max(6, digits(int64(minSt)), digits(int64(maxSt))),
		max(7, len(fmtMillis(nil, maxMs))),
		max(3, jobW),
		max(4, hostW),
		0, // REASON, last
	}
	cells := make([][]byte, len(head))
	for i, h := range head {
		cells[i] = []byte(h)
	}
	writeRow(bw, wd, cells)
	var scratch [7][]byte
	rows := 0
	if err := each(func(c status.Case) error {
		rows++
		writeRow(bw, wd, statusCells(&scratch, c)[:len(head)])
		return nil
	}); err != nil {
		return err
	}
	if rows == 0 && failedOnly {
		fmt.Fprintln(bw, "(no failed, interrupted or unfit case)")
	}
	return bw.Flush()
}

// statusCells fills r with the cells of case c's row of the table, and
// returns them: ID, STATE, STATUS, SECONDS, JOB, HOST and REASON.
func statusCells(r *[7][]byte, c status.Case) [][]byte {
	r[0] = strconv.AppendInt(r[0][:0], c.ID, 10)
	r[1] = append(r[1][:0], c.State.String()...)
	if c.State == status.Running || c.State == status.Unfit || (c.State == status.Interrupted && c.Status == 0) {
		r[2] = append(r[2][:0], '-') // no STATUS (yet), or none known
	} else {
		r[2] = strconv.AppendInt(r[2][:0], int64(c.Status), 10)
	}
	if c.State == status.Unfit {
		r[3] = append(r[3][:0], '-') // it did not run
	} else {
		r[3] = fmtMillis(r[3][:0], int64(c.Seconds*1000+0.5))
	}
	r[4] = append(r[4][:0], c.Job...)
	r[5] = append(r[5][:0], c.Host...)
	r[6] = append(r[6][:0], c.Reason...)
	return r[:]
}

// fmtMillis appends ms as seconds with three decimals.
func fmtMillis(b []byte, ms int64) []byte {
	b = strconv.AppendInt(b, ms/1000, 10)
	f := ms % 1000
	return append(b, '.', byte('0'+f/100), byte('0'+f/10%10), byte('0'+f%10))
}

var spaces = []byte("                                                                ")

// writeRow writes cells left-aligned in columns of widths wd, two spaces
// apart, as the other tables of farm do; empty cells at the end of the row
// are left out, with the blanks before them.
func writeRow(w *bufio.Writer, wd []int, cells [][]byte) {
	for len(cells) > 1 && len(cells[len(cells)-1]) == 0 {
		cells = cells[:len(cells)-1]
	}
	for i, c := range cells {
		w.Write(c)
		if i < len(cells)-1 {
			for pad := wd[i] + 2 - len(c); pad > 0; pad -= len(spaces) {
				w.Write(spaces[:min(pad, len(spaces))])
			}
		}
	}
	w.WriteByte('\n')
}
