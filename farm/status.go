package farm

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/farm-hpc/farm/status"
)

// StatusOptions are the flags of farm Status.
type StatusOptions struct {
	FailedLast bool // -f: non-zero statuses last
	FailedOnly bool // --failed: only cases that did not succeed
	JSON       bool
	META       bool // --meta: META's "ID STATUS" lines, of the cases that ended
	// MaxCrashes is the farm's MAX_CRASHES, for the "crashed" of --json
	// (Status sets it from the config).
	MaxCrashes int
}

// Status prints the status of every case that has a record (farm Status).
func (f *Farm) Status(ctx context.Context, w io.Writer, opt StatusOptions) error {
	sum, err := f.Summary(ctx)
	if err != nil {
		return err
	}
	f.sayNote()
	opt.MaxCrashes = f.Config.MaxCrashes
	return printStatus(w, sum, opt)
}

// printStatus prints one row per case that has a record, in ID order (with
// -f, the cases that did not succeed after the others). It streams: ten
// million cases print in constant memory beyond the summary itself.
func printStatus(w io.Writer, sum *status.Summary, opt StatusOptions) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	each := func(fn func(status.Case) error) error { return eachStatusCase(sum, opt, fn) }
	if opt.JSON {
		return writeStatusJSON(bw, each, Selection{MaxCrashes: opt.MaxCrashes})
	}
	if opt.META {
		return writeStatusMETA(bw, each)
	}
	return writeStatusTable(bw, sum, opt.FailedOnly, each, Selection{MaxCrashes: opt.MaxCrashes})
}

// statusNotOK reports whether c did not succeed and does not run (it
// failed, was interrupted, timed out or is unfit): a case --failed prints, and -f
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

// eachStatusCase calls fn for the cases printStatus prints, in its order.
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
// (succeeded or failed; META has no line for the others), and those that
// timed out, with 128+SIGNAL as bash reports a process a signal killed
// (a script that looks for non-zero lines finds them), and flushes bw.
func writeStatusMETA(bw *bufio.Writer, each func(func(status.Case) error) error) error {
	var b []byte
	err := each(func(c status.Case) error {
		st := c.Status
		switch c.State {
		case status.Succeeded, status.Failed:
		case status.TimedOut:
			st += 128
		default:
			return nil
		}
		b = strconv.AppendInt(b[:0], c.ID, 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(st), 10)
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
// a case, and flushes bw; sel says which cases are crashed.
func writeStatusJSON(bw *bufio.Writer, each func(func(status.Case) error) error, sel Selection) error {
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
		b = appendStatusJSON(b, c, q, sel.isCrashed(c))
		_, err := bw.Write(b)
		return err
	})
	if err != nil {
		return err
	}
	bw.WriteString("]\n")
	return bw.Flush()
}

// appendStatusJSON appends the JSON object of case c, crashed or not, to
// b; q quotes a string.
func appendStatusJSON(b []byte, c status.Case, q func(string) []byte, crashed bool) []byte {
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, c.ID, 10)
	b = append(b, `,"state":"`...)
	b = append(b, stateName(c, crashed)...)
	b = append(b, `","status":`...)
	if hasStatus(c) {
		b = strconv.AppendInt(b, int64(c.Status), 10)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"seconds":`...)
	if hasSeconds(c) {
		b = strconv.AppendFloat(b, c.Seconds, 'f', -1, 64)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"max_rss_bytes":`...)
	if c.RSS > 0 {
		b = strconv.AppendInt(b, c.RSS<<10, 10)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"cpu_seconds":`...)
	if c.HasCPU {
		b = strconv.AppendFloat(b, c.CPU, 'f', -1, 64)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"job":`...)
	b = append(b, q(c.Job)...)
	b = append(b, `,"host":`...)
	b = append(b, q(c.Host)...)
	b = append(b, `,"run":`...)
	b = strconv.AppendInt(b, int64(c.Run), 10)
	b = append(b, `,"attempts":`...)
	b = strconv.AppendInt(b, int64(c.Attempts), 10)
	b = append(b, `,"crashes":`...)
	b = strconv.AppendInt(b, int64(c.Crashes), 10)
	if crashed {
		b = append(b, `,"crashed":true`...)
	}
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

// stateName is what farm Status calls case c's state: "crashed" for a
// case at the crash limit (MAX_CRASHES), which resubmit leaves out (see
// Selection.isCrashed), else its farm-wide state.
func stateName(c status.Case, crashed bool) string {
	if crashed {
		return "crashed"
	}
	return c.State.String()
}

// hasStatus reports whether case c has a STATUS to show: it ended (or was
// interrupted by a signal, its STATUS then). A running or unfit case has
// none (yet), nor does one whose meta-job died under it.
func hasStatus(c status.Case) bool {
	switch c.State {
	case status.Running, status.Unfit, status.NeverRan:
		return false
	case status.Interrupted:
		return c.Status != 0
	}
	return true
}

// hasSeconds reports whether case c's duration is known: how long it ran
// (so far, if it runs).
func hasSeconds(c status.Case) bool {
	return !c.NoSeconds && c.State != status.Unfit && c.State != status.NeverRan
}

// writeStatusTable writes the cases each gives as a table, and flushes bw;
// sel says which cases are crashed. failedOnly is --failed: it says so
// when there is no such case. When some case's record says what it used,
// MAXRSS and CPU say it (before REASON); when some case is unfit, a last
// column says why.
func writeStatusTable(bw *bufio.Writer, sum *status.Summary, failedOnly bool, each func(func(status.Case) error) error, sel Selection) error {
	// Column widths from the summary's extremes: no pass over the cases.
	maxID, minSt, maxSt, maxMs, jobW, hostW := sum.Widths()
	totals := sum.Totals()
	if maxID == 0 && totals == (status.Counts{}) {
		fmt.Fprintln(bw, "No case has a record yet.")
		return bw.Flush()
	}
	digits := func(v int64) int { return len(strconv.AppendInt(nil, v, 10)) }
	// Every column statusCells fills, and its width; the table has those
	// that say something for this farm.
	names := [...]string{"ID", "STATE", "STATUS", "SECONDS", "JOB", "HOST", "ATTEMPTS", "CRASHES", "MAXRSS", "CPU", "REASON"}
	used, maxCPU := sum.MostUse()
	widths := [...]int{
		max(2, digits(maxID), digits(-1)),
		len("interrupted"),
		max(6, digits(int64(minSt)), digits(int64(maxSt))),
		max(7, len(fmtMillis(nil, maxMs))),
		max(3, jobW),
		max(4, hostW),
		len("ATTEMPTS"),
		len("CRASHES"),
		len("MAXRSS"),
		max(3, len(fmtCPU(nil, maxCPU))),
		0, // REASON, last
	}
	cols := []int{0, 1, 2, 3, 4, 5}
	tries, crashes := sum.MostAttempts()
	if tries > 1 || crashes > 0 {
		cols = append(cols, 6)
	}
	if crashes > 0 {
		cols = append(cols, 7)
	}
	if used {
		cols = append(cols, 8, 9)
	}
	if totals.Unfit > 0 {
		cols = append(cols, 10)
	}
	wd := make([]int, len(cols))
	cells := make([][]byte, len(cols))
	for k, i := range cols {
		wd[k], cells[k] = widths[i], []byte(names[i])
	}
	writeRow(bw, wd, cells)
	var scratch [len(names)][]byte
	rows := 0
	if err := each(func(c status.Case) error {
		rows++
		all := statusCells(&scratch, c, sel.isCrashed(c))
		for k, i := range cols {
			cells[k] = all[i]
		}
		writeRow(bw, wd, cells)
		return nil
	}); err != nil {
		return err
	}
	if rows == 0 && failedOnly {
		fmt.Fprintln(bw, "(no failed, interrupted or unfit case)")
	}
	return bw.Flush()
}

// statusCells fills r with the cells of case c's row of the table
// (crashed: at the crash limit), and returns them: ID, STATE, STATUS,
// SECONDS, JOB, HOST, ATTEMPTS, CRASHES, MAXRSS, CPU and REASON.
func statusCells(r *[11][]byte, c status.Case, crashed bool) [][]byte {
	r[0] = strconv.AppendInt(r[0][:0], c.ID, 10)
	r[1] = append(r[1][:0], stateName(c, crashed)...)
	if !hasStatus(c) {
		r[2] = append(r[2][:0], '-') // no STATUS (yet), or none known
	} else {
		r[2] = strconv.AppendInt(r[2][:0], int64(c.Status), 10)
	}
	if !hasSeconds(c) {
		r[3] = append(r[3][:0], '-') // it did not run, or for how long is not known
	} else {
		r[3] = fmtMillis(r[3][:0], int64(c.Seconds*1000+0.5))
	}
	r[4] = append(r[4][:0], c.Job...)
	r[5] = append(r[5][:0], c.Host...)
	r[6] = strconv.AppendInt(r[6][:0], int64(c.Attempts), 10)
	r[7] = strconv.AppendInt(r[7][:0], int64(c.Crashes), 10)
	if c.RSS > 0 {
		r[8] = fmtKiB(r[8][:0], c.RSS)
	} else {
		r[8] = append(r[8][:0], '-') // not known
	}
	if c.HasCPU {
		r[9] = fmtCPU(r[9][:0], c.CPU)
	} else {
		r[9] = append(r[9][:0], '-')
	}
	r[10] = append(r[10][:0], c.Reason...)
	return r[:]
}

// fmtKiB appends kib KiB in human units, powers of 1024 as ls -h and
// Slurm write them: "512K", "212M", "1.2G" (one decimal below 10).
func fmtKiB(b []byte, kib int64) []byte {
	v, unit := float64(kib), 0
	for v >= 1024 && unit < 4 {
		v /= 1024
		unit++
	}
	prec := 0
	if v < 9.95 && unit > 0 {
		prec = 1
	}
	b = strconv.AppendFloat(b, v, 'f', prec, 64)
	return append(b, "KMGTP"[unit])
}

// fmtCPU appends CPU seconds with two decimals.
func fmtCPU(b []byte, s float64) []byte {
	return strconv.AppendFloat(b, s, 'f', 2, 64)
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
