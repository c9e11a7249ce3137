package farm

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/farm-hpc/farm/casetable"
)

// RepairMode says whether Repair rebuilds a claim state that reads well.
type RepairMode int

// Repair modes.
const (
	RepairIfDamaged RepairMode = iota // farm repair
	RepairForce                       // farm repair --force
)

// Repair rebuilds the claim state from table.dat and the status and job
// records, when it is damaged or missing: the newest run found in the
// records is closed (nothing left to claim in it), so 'farm resubmit' runs
// every case that did not succeed, and no case that succeeded runs again. It
// refuses while any job of the farm is pending or running, and does nothing
// to a state that reads well unless mode is RepairForce.
func (f *Farm) Repair(ctx context.Context, mode RepairMode) error {
	force := mode == RepairForce
	store0, err := f.Store()
	if err != nil {
		return err
	}
	cur, err := store0.Read(ctx)
	store0.Close()
	if errors.Is(err, casetable.ErrNoState) {
		err = nil
	}
	var de *casetable.DamageError
	damaged := errors.As(err, &de)
	if err != nil && !damaged {
		return err
	}
	if !damaged && cur.Run > 0 && !force {
		fmt.Fprintf(f.Out, "The claim state reads well (run %d, %d of %d cases claimed): nothing to repair.\n", cur.Run, cur.Claimed, cur.Cases)
		return nil
	}
	active, _, err := f.activeJobs(ctx)
	if err != nil {
		return err
	}
	if len(active) > 0 {
		return Userf("%d job(s) of the farm are pending or running: 'farm wait' or 'farm kill' first, then 'farm repair'", len(active))
	}
	recs, err := f.Jobs()
	if err != nil {
		return err
	}
	run := 0
	for _, r := range recs {
		run = max(run, r.Run)
	}
	sum, err := f.Summary(ctx)
	if err != nil {
		return err
	}
	var done int64
	for r, c := range sum.RunCounts {
		run = max(run, r)
		done += c.Succeeded + c.Failed + c.Interrupted
	}
	if run == 0 {
		if damaged {
			return Userf("%v, and the farm has no records of a run: remove MISC/chain and MISC/claims.* and submit it again", de)
		}
		fmt.Fprintln(f.Out, "The farm was never submitted: nothing to repair.")
		return nil
	}
	st, err := f.closedRun(run, done)
	if err != nil {
		return err
	}
	if err := f.EnsureDirs(); err != nil {
		return err
	}
	store, err := f.Store()
	if err != nil {
		return err
	}
	defer store.Close()
	store.Job = "repair"
	if err := store.Repair(ctx, st); err != nil {
		return err
	}
	f.Log("repair: claim state rebuilt: run %d closed", run)
	fmt.Fprintf(f.Out, "Rebuilt the claim state from the records: run %d is closed (no case left to claim in it).\n"+
		"'farm resubmit N' runs the cases that did not succeed; no case that succeeded runs again.\n", run)
	return nil
}

// closedRun is the claim state of run over table.dat with every case
// claimed, nothing left to claim in it, and done cases finished farm-wide
// (farm repair, farm adopt).
func (f *Farm) closedRun(run int, done int64) (casetable.State, error) {
	var total, maxID int64
	if err := casetable.ReadCases(f.Path(Table), func(c casetable.Case) error {
		total++
		maxID = max(maxID, c.ID)
		return nil
	}); err != nil {
		return casetable.State{}, tableErr(err)
	}
	fi, err := os.Stat(f.Path(Table))
	if err != nil {
		return casetable.State{}, err
	}
	return casetable.State{Run: run, Table: Table, Offset: fi.Size(), Lines: -1, Cases: total, MaxID: maxID, Total: total, Claimed: total, Done: done}, nil
}
