package farm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/farm-hpc/farm/casetable"
	"github.com/farm-hpc/farm/status"
)

// Summary loads every status record of the farm, asking the backends once
// which meta-jobs still run (their open cases are running, not interrupted).
func (f *Farm) Summary(ctx context.Context, backends Backends) (*status.Summary, error) {
	recs, err := f.Jobs()
	if err != nil {
		return nil, err
	}
	infos, err := f.jobInfos(ctx, backends, recs)
	if err != nil {
		return nil, err
	}
	return status.Load(f.Path(StatusDir), status.Options{
		Live: func(id string) bool { return infos[id].State.Active() },
	})
}

// Progress is the farm-wide count of the cases of table.dat by state.
type Progress struct {
	Total int64
	status.Counts
	NeverRan int64
}

// Done reports whether every case succeeded.
func (p Progress) Done() bool { return p.Total > 0 && p.Succeeded == p.Total }

// Progress counts the cases of table.dat by their farm-wide state.
func (f *Farm) Progress(sum *status.Summary) (Progress, error) {
	var p Progress
	err := casetable.ReadCases(f.Path(Table), func(c casetable.Case) error {
		p.Total++
		st := sum.Get(c.ID).State
		if st == status.NeverRan {
			p.NeverRan++
		}
		p.Add(st)
		return nil
	})
	var le *casetable.LineError
	if errors.As(err, &le) {
		// table.dat is not numbered yet: the farm was never submitted.
		return Progress{}, nil
	}
	return p, err
}

// ErrWaitTimeout is returned by Wait when its timeout ran out.
var ErrWaitTimeout = errors.New("timed out waiting for the farm's jobs")

// Wait blocks until no job of the farm is pending or running, or timeout
// (0: none) passes. It returns the farm-wide progress then.
func (f *Farm) Wait(ctx context.Context, backends Backends, timeout time.Duration) (Progress, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	delay := 50 * time.Millisecond
	for {
		active, _, err := f.activeJobs(ctx, backends)
		if err != nil {
			if ctx.Err() != nil {
				return Progress{}, ErrWaitTimeout
			}
			return Progress{}, err
		}
		if len(active) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return Progress{}, ErrWaitTimeout
		case <-time.After(delay):
		}
		delay = min(delay*2, 2*time.Second)
	}
	sum, err := f.Summary(context.WithoutCancel(ctx), backends)
	if err != nil {
		return Progress{}, err
	}
	return f.Progress(sum)
}

// StatusOptions are the flags of farm Status.
type StatusOptions struct {
	FailedLast bool // -f: non-zero statuses last
	FailedOnly bool // --failed: only non-zero statuses
	JSON       bool
}

// statusRow is one case in farm Status --json.
type statusRow struct {
	ID      int64   `json:"id"`
	State   string  `json:"state"`
	Status  int     `json:"status"`
	Seconds float64 `json:"seconds"`
	Job     string  `json:"job"`
	Host    string  `json:"host"`
	Run     int     `json:"run"`
}

// WriteStatus prints one row per case that has a record.
func WriteStatus(w io.Writer, sum *status.Summary, opt StatusOptions) error {
	bad := func(c status.Case) bool { return c.State != status.Succeeded && c.State != status.Running }
	var rows []status.Case
	pass := func(second bool) error {
		return sum.Each(func(c status.Case) error {
			switch {
			case opt.FailedOnly && !bad(c):
			case opt.FailedLast && bad(c) != second:
			default:
				rows = append(rows, c)
			}
			return nil
		})
	}
	if err := pass(false); err != nil {
		return err
	}
	if opt.FailedLast && !opt.FailedOnly {
		if err := pass(true); err != nil {
			return err
		}
	}
	if opt.JSON {
		out := make([]statusRow, 0, len(rows))
		for _, c := range rows {
			out = append(out, statusRow{ID: c.ID, State: c.State.String(), Status: c.Status, Seconds: c.Seconds, Job: c.Job, Host: c.Host, Run: c.Run})
		}
		enc := json.NewEncoder(w)
		return enc.Encode(out)
	}
	t := newTable(w, "ID", "State", "Status", "Seconds", "Job", "Host")
	for _, c := range rows {
		st := strconv.Itoa(c.Status)
		if c.State == status.Running {
			st = "-"
		}
		t.Append([]string{strconv.FormatInt(c.ID, 10), c.State.String(), st, fmt.Sprintf("%.3f", c.Seconds), c.Job, c.Host})
	}
	t.Render()
	return nil
}
