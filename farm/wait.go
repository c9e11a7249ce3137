package farm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/farm-hpc/farm/layout"
	"github.com/farm-hpc/farm/status"
	"github.com/farm-hpc/farm/tablefmt"
)

// Progress is the farm-wide count of the cases of table.dat by state.
type Progress struct {
	Total int64
	status.Counts
	NeverRan int64
	// Crashed are those of Failed, Interrupted, TimedOut and Unfit at the crash
	// limit (MAX_CRASHES), which farm Status shows as crashed.
	Crashed int64
}

// Done reports whether every case succeeded.
func (p Progress) Done() bool { return p.Total > 0 && p.Succeeded == p.Total }

// String is the line farm wait ends with: "10 cases: 6 succeeded, 1
// failed, 1 interrupted, 1 never ran, 1 unfit", with "1 timed out" after
// the interrupted when some are, and "; 1 of them crashed" when some are.
func (p Progress) String() string {
	s := fmt.Sprintf("%d cases: %d succeeded, %d failed, %d interrupted, %s%d never ran, %d unfit",
		p.Total, p.Succeeded, p.Failed, p.Interrupted, timedOutPart(p.TimedOut), p.NeverRan, p.Unfit)
	if p.Crashed > 0 {
		s += fmt.Sprintf("; %d of them crashed (MAX_CRASHES)", p.Crashed)
	}
	return s
}

// timedOutPart is "N timed out, " for N > 0, else "": the part of a count
// of cases by state that only farms with time limits have.
func timedOutPart(n int64) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("%d timed out, ", n)
}

// progress counts the cases of table.dat (those 'farm resubmit' would
// run, or not) by their farm-wide state. Runs read private copies of
// table.dat, so it may have been edited since they started: a line that
// no longer reads, or repeats an ID, is left out of the count (a repeated
// ID counts once), with one warning on stderr naming the first such line
// and what to do, and the summary goes on.
func (f *Farm) progress(sum *status.Summary) (Progress, error) {
	var p Progress
	crashed := Selection{MaxCrashes: f.Config.MaxCrashes}
	if numbered, err := tablefmt.IsNumbered(f.Path(layout.Table), f.tableNumbering(false)); err == nil && !numbered && !f.hasRecords() {
		// table.dat is not numbered yet: the farm was never submitted.
		return Progress{}, nil
	}
	skipped, first, err := tablefmt.ReadIDsLenient(f.Path(layout.Table), func(id int64) {
		p.Total++
		c := sum.Get(id)
		if c.State == status.NeverRan {
			p.NeverRan++
		}
		if crashed.isCrashed(c) {
			p.Crashed++
		}
		p.Add(c.State)
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

// ErrWaitTimeout is what a *waitTimeoutError is (errors.Is).
var ErrWaitTimeout = errors.New("timed out waiting for the farm's jobs")

// waitTimeoutError is returned by Wait when its timeout ran out.
type waitTimeoutError struct{ Timeout time.Duration }

func (e *waitTimeoutError) Error() string {
	return fmt.Sprintf("timed out after %s; jobs are still pending or running", e.Timeout)
}

// Is makes errors.Is(err, ErrWaitTimeout) true.
func (e *waitTimeoutError) Is(target error) bool { return target == ErrWaitTimeout }

// InterruptedError is returned by Wait when its context was cancelled
// (Ctrl-C) before the farm's jobs ended; it wraps the context's error.
type InterruptedError struct {
	What string // what was left undone, for the user
	Err  error
}

func (e *InterruptedError) Error() string { return "interrupted: " + e.What }
func (e *InterruptedError) Unwrap() error { return e.Err }

// errNotSubmitted is farm wait's answer on a farm never submitted: there
// is nothing to wait for, and "0 cases" would hide why.
var errNotSubmitted = Userf("the farm has not been submitted yet: nothing to wait for ('farm submit N' submits it)")

// checkSubmitted refuses a farm that was never submitted (as farm query
// says it: no run, and no record of a job or a case). A claim state that
// does not read is left to what reads the records: wait needs only them.
func (f *Farm) checkSubmitted(ctx context.Context) error {
	st, err := f.readState(ctx)
	if err == nil && st.Run == 0 && !f.hasRecords() {
		return errNotSubmitted
	}
	return nil
}

// Wait blocks until no job of the farm is pending or running, or timeout
// (0: none) passes (a *waitTimeoutError), or ctx is cancelled (an
// *InterruptedError). It returns the farm-wide progress then.
func (f *Farm) Wait(ctx context.Context, timeout time.Duration) (Progress, error) {
	return f.WaitProgress(ctx, timeout, nil, WatchOptions{})
}

// WaitProgress is Wait that, if w is not nil, draws farm query's progress
// bar on w as it waits (as Watch does), at most every opt.Interval; the
// bar costs no scheduler query of its own. The bar's line is ended before
// it returns. Once it has waited a minute, it says on stderr what it
// waits for (waitnotice.go).
func (f *Farm) WaitProgress(ctx context.Context, timeout time.Duration, w io.Writer, opt WatchOptions) (Progress, error) {
	var b *bar
	var tail *status.Tail
	var drawn time.Time
	if w != nil {
		b, tail = &bar{w: w, opt: opt}, status.NewTail(f.Path(layout.StatusDir))
		defer b.done()
	}
	if err := f.checkSubmitted(ctx); err != nil {
		return Progress{}, err
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
		return &waitTimeoutError{Timeout: timeout}
	}
	delay := 50 * time.Millisecond
	note := waitNotice{w: f.warnings(), start: time.Now()}
	for {
		active, recs, infos, err := f.activeAndAll(ctx)
		if err == nil {
			note.say(f, b, active, infos, time.Now())
		}
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
	return f.progress(sum)
}
