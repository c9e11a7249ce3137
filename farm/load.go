package farm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/casetable"
	"github.com/farm-hpc/farm/layout"
	"github.com/farm-hpc/farm/status"
	"github.com/farm-hpc/farm/tablefmt"
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
// "" if it did not change, or cannot tell (a run whose table has no
// source record, or a closed run). It costs a stat of table.dat, and
// a reading of it whole only after a same-size change of its identity or
// times (tablefmt.Source.Changed).
func (f *Farm) tableNote(st casetable.State, recs []JobRecord, infos map[string]backend.JobInfo) string {
	own := st.Table // the cursor may be in a table 'farm add' queued
	if st.Run == 0 || own == "" || own == layout.Table {
		return ""
	}
	if fi, err := os.Stat(f.Path(layout.Table)); err != nil || !fi.Mode().IsRegular() {
		return "" // what reads it says what is wrong
	}
	src, err := tablefmt.ReadSource(f.Path(own))
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
