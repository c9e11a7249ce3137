package farm

import (
	"context"
	"errors"
	"fmt"

	"github.com/farm-hpc/farm/casetable"
	"github.com/farm-hpc/farm/layout"
	"github.com/farm-hpc/farm/tablefmt"
)

// RepairMode says whether Repair rebuilds a claim state that reads well.
type RepairMode int

// Repair modes.
const (
	RepairIfDamaged RepairMode = iota // farm repair
	RepairForce                       // farm repair --force
	// RepairAbandoned (farm repair --abandoned) is RepairForce that also
	// closes a current run with cases left and no job recorded: the user
	// says that the command that started it was killed before it recorded
	// its jobs. RepairForce refuses such a run, which may be one that a
	// running 'farm submit' or 'farm resubmit' has started and is submitting
	// the jobs of.
	RepairAbandoned
)

// Repair rebuilds the claim state from table.dat and the status and job
// records, when it is damaged or missing: the newest run found in the
// records or the state is closed (nothing left to claim in it), so 'farm
// resubmit' runs every case that did not succeed, and no case that
// succeeded runs again. It refuses while any job of the farm is pending or
// running, and does nothing to a state that reads well unless mode is
// RepairForce or RepairAbandoned.
//
// It decides from one reading of the claim state, made before the records
// are read, and changes the state only if it is still as read
// (casetable.Store.RepairFrom): a concurrent repair, or a submit or
// resubmit that started a run, makes it refuse, and a run is never rolled
// back.
func (f *Farm) Repair(ctx context.Context, mode RepairMode) error {
	force := mode != RepairIfDamaged
	store := f.Store()
	defer store.Close()
	store.Job = "repair"
	rd, err := store.Inspect(ctx)
	if err != nil {
		return err
	}
	cur, err := rd.State, rd.Err
	readable := err == nil
	if errors.Is(err, casetable.ErrNoState) {
		err = nil
	}
	var de *casetable.DamageError
	damaged := errors.As(err, &de)
	if err != nil && !damaged {
		return err
	}
	if readable && cur.Run > 0 && !force {
		fmt.Fprintf(f.Out, "The claim state reads well (run %d, %d of %d cases claimed): nothing to repair.\n", cur.Run, cur.Claimed, cur.Cases)
		return nil
	}
	run, err := f.runToClose(ctx, cur, readable, mode)
	if err != nil {
		return err
	}
	if run == 0 {
		if damaged {
			return Userf("%v, and the farm has no records of a run: remove MISC/chain, MISC/claims.* and MISC/lanes.* and submit it again", de)
		}
		fmt.Fprintln(f.Out, "The farm was never submitted: nothing to repair.")
		return nil
	}
	st, err := f.closedRun(run)
	if err != nil {
		return err
	}
	if readable {
		// IDs a killed 'farm add' queued but did not write to table.dat
		// stay taken.
		st.MaxID = max(st.MaxID, cur.MaxID)
	}
	if err := f.EnsureDirs(); err != nil {
		return err
	}
	if err := store.RepairFrom(ctx, rd, st); err != nil {
		return repairRefused(err)
	}
	if got := store.Last().Run; got > run {
		// A run started on the damaged state's chain while the records
		// were read (by a command that held the chain since before the
		// damage): closed with the rest, never moved back.
		fmt.Fprintf(f.Out, "Run %d was started while this repair ran (by 'farm submit' or 'farm resubmit'): it is closed too, and its jobs end without claiming.\n", got)
		run = got
	}
	f.Log("repair: claim state rebuilt: run %d closed", run)
	fmt.Fprintf(f.Out, "Rebuilt the claim state from the records: run %d is closed (no case left to claim in it).\n"+
		"'farm resubmit N' runs the cases that did not succeed; no case that succeeded runs again.\n", run)
	return nil
}

// runToClose is the run Repair closes, the newest that the records (or a
// claim state cur that reads well) know of, 0 if none. It refuses while jobs of the farm are pending or running, and
// when the state's run was started moments ago and has recorded no job yet
// (unless mode is RepairAbandoned). The records are read after the state,
// as resubmit reads them, and the active jobs and the job records are one
// reading.
func (f *Farm) runToClose(ctx context.Context, cur casetable.State, readable bool, mode RepairMode) (run int, err error) {
	active, recs, _, err := f.activeAndAll(ctx)
	if err != nil {
		return 0, err
	}
	if len(active) > 0 {
		return 0, Userf("%d job(s) of the farm are pending or running: 'farm wait' or 'farm kill' first, then 'farm repair'", len(active))
	}
	for _, r := range recs {
		run = max(run, r.Run)
	}
	sum, err := f.Summary(ctx)
	if err != nil {
		return 0, err
	}
	for r := range sum.RunCounts {
		run = max(run, r)
	}
	if readable {
		// A run is never moved back: the state's run may be newer than
		// every record (its command has not recorded its jobs yet).
		run = max(run, cur.Run)
		if cur.Run == run && cur.Claimed < cur.Cases && !runHasJobs(recs, run) && mode != RepairAbandoned {
			return 0, Userf("run %d was started moments ago by another 'farm submit' or 'farm resubmit' (or the -auto job), which has not recorded its jobs yet: nothing was repaired; see 'farm list' (if that command was killed before it recorded any job, 'farm repair --abandoned' closes run %d)", run, run)
		}
	}
	return run, nil
}

// repairRefused is what Repair says of err, an error of
// casetable.Store.RepairFrom: a concurrent repair, submit or resubmit
// changed the claim state since it was read, or it was damaged further.
func repairRefused(err error) error {
	var race *casetable.RepairRaceError
	var de *casetable.DamageError
	switch {
	case errors.As(err, &race) && race.Token != "":
		return Userf("%v: nothing was repaired; see 'farm query' (if that repair was killed and 'farm query' still reports damage, remove %s and run 'farm repair' again)", err, race.Token)
	case errors.As(err, &race):
		return Userf("%v: nothing was repaired; see 'farm query', and run 'farm repair' again if it is still needed", err)
	case errors.As(err, &de):
		// Damaged further since it was read: decide again.
		return Userf("%v, since 'farm repair' read it: nothing was repaired; run 'farm repair' again", err)
	}
	return err
}

// closedRun is the claim state of run over table.dat with every case
// claimed, nothing left to claim in it (farm repair, farm adopt).
func (f *Farm) closedRun(run int) (casetable.State, error) {
	var total, maxID int64
	if err := tablefmt.ReadCases(f.Path(layout.Table), func(c tablefmt.Case) error {
		total++
		maxID = max(maxID, c.ID)
		return nil
	}); err != nil {
		return casetable.State{}, tableErr(err)
	}
	return casetable.State{Run: run, Table: layout.Table, Cases: total, MaxID: maxID, Total: total}, nil
}
