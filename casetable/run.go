package casetable

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/farm-hpc/farm/fsretry"
	"github.com/farm-hpc/farm/vfs"
)

// The claim state's transitions made by commands (farm submit, resubmit,
// add), beside the claims (claim.go, lanes.go) and the repair
// (repair.go): each is one compare-and-swap on the main chain, whose
// effects outside the state (a run's lanes, a queued table) are made
// before it and undone only when it certainly did not commit.

// ErrMoved says the claim state moved on since the caller read it (another
// command started a run, or a meta-job claimed): nothing was changed.
var ErrMoved = errors.New("the claim state moved on since it was read")

// RunSpec is a run to start.
type RunSpec struct {
	Base   int64  // the generation the caller decided on (ErrMoved if it is not the newest)
	Chain  string // the chain Base is of (State.Chain; "": the caller read none)
	Run    int    // the run's number
	Table  string // its table, relative to the farm directory
	Simple bool   // one case per meta-job: no lanes
	Cases  int64  // the table's cases
	MaxID  int64  // a first run: the table's largest ID (0: the state's stays)
	Jobs   int    // the meta-jobs it is started for: its lanes (LanesFor)
}

// moved reports whether st is not the state spec was decided on: another
// generation, or one of another chain (a repair made it since, and its
// generations count from 0 again).
func (spec RunSpec) moved(st State) bool {
	return st.Gen != spec.Base || spec.Chain != "" && st.Chain != spec.Chain && !mutated("base-of-any-chain")
}

// StartRun makes spec's run the current one, if the state is still at
// generation spec.Base. Its lanes, if it gets any, are made whole before
// the commit names them; the current run's lanes are closed right before
// that commit, so that none of its meta-jobs, however stalled, claims
// after it (CLAIMS.md, Lanes). What 'farm add' queued to the run before is
// dropped: the new run's table was made from table.dat, which holds it.
func (s *Store) StartRun(ctx context.Context, spec RunSpec) error {
	r := fsretry.Retrier{Limit: s.Retry, Log: s.log(), Clock: s.fs}
	size, ino, fp, err := s.tableID(ctx, &r, filepath.Join(s.Dir, spec.Table))
	if err != nil {
		return err
	}
	cur, err := s.Read(ctx)
	if err != nil && !errors.Is(err, ErrNoState) {
		return err
	}
	if err == nil && spec.moved(cur) {
		return ErrMoved
	}
	lanes := State{Run: spec.Run, Table: spec.Table, Simple: spec.Simple, TSize: size, TIno: ino, TFP: fp}
	if !spec.Simple {
		if err := r.Do(ctx, func() (err error) {
			lanes, err = makeLanes(s.fs, s.Dir, s.misc, lanes, LanesFor(spec.Jobs), spec.Jobs)
			return err
		}); err != nil {
			return err
		}
	}
	if err := s.CloseLanes(ctx, cur); err != nil {
		removeLanes(s.fs, s.misc, lanes)
		return err
	}
	err = s.Update(ctx, func(st *State) error {
		if spec.moved(*st) {
			return ErrMoved
		}
		st.startRun(spec, lanes)
		return nil
	})
	if errors.Is(err, ErrMoved) || err != nil && mutated("lanes-removed-after-undecided-start") {
		// Not committed: nobody knows the lanes. (After another error
		// the commit may have been made, its reply lost: they stay.)
		removeLanes(s.fs, s.misc, lanes)
	}
	return err
}

// startRun makes st the state of spec's run, over the table lanes
// describes (its identity, and its lanes if it has any).
func (st *State) startRun(spec RunSpec, lanes State) {
	st.Run, st.Table, st.Simple, st.Offset, st.Claimed, st.Cases = spec.Run, spec.Table, spec.Simple, 0, 0, spec.Cases
	st.Lanes, st.LaneDir = lanes.Lanes, lanes.LaneDir
	if !mutated("queue-carried-to-next-run") {
		st.Queue, st.Own = nil, Queued{}
	}
	if lanes.Lanes > 1 {
		// Nothing to claim on this chain: the lanes hold the cursors.
		st.Offset = lanes.TSize
	}
	// The table as it is now is the run's: a claim refuses to read it
	// once it has another size or inode.
	st.Lines, st.TSize, st.TIno, st.TFP = 0, lanes.TSize, lanes.TIno, lanes.TFP
	if spec.MaxID > 0 { // a first run: a copy of table.dat whole
		st.MaxID, st.Total = spec.MaxID, spec.Cases
	}
}

// CloseRun leaves nothing to claim in run, which is over table (of size
// bytes now), if it is still the current run: a run none of whose jobs
// was submitted. ErrMoved if it is not the current run.
func (s *Store) CloseRun(ctx context.Context, run int, table string, size int64) error {
	// A run with lanes is closed by closing them (then they count as
	// claimed whole); the main chain then forgets them.
	var cur State
	r := fsretry.Retrier{Limit: s.Retry, Log: s.log(), Clock: s.fs}
	if err := r.Do(ctx, func() (err error) {
		cur, err = s.Read(ctx)
		return err
	}); err != nil {
		return err
	}
	if cur.Run == run && cur.OwnTable().Table == table {
		if err := s.CloseLanes(ctx, cur); err != nil {
			return err
		}
	}
	return s.Update(ctx, func(st *State) error {
		if st.Run != run || st.OwnTable().Table != table {
			return ErrMoved
		}
		st.DropQueue() // what farm add queued is in table.dat, for the next run
		st.Lanes, st.LaneDir = 0, ""
		// Past every line the run recorded, whatever the table is now.
		st.Offset, st.Claimed, st.Lines = max(size, st.TSize), st.Cases, -1
		return nil
	})
}

// Enqueued is where Enqueue queued a table of added cases.
type Enqueued struct {
	Run   int    // the run it was queued to (0: none, Why says why)
	Lanes bool   // that run has lanes
	Table string // the table, relative to the farm directory
	Why   string // why it was not queued
}

// Enqueue writes lines, the numbered cases of 'farm add' (cases of them,
// the last of ID last), as a table of the current run's own, named
// MISC/table.runN.add.TAG (an immutable file, as every run table), and
// queues it to the run — first, ahead of the run's own cases, if first —
// with a compare-and-swap on the claim state. A run that cannot take it
// (none yet, SIMPLE, one 'farm repair' rebuilt) gets nothing, and Why
// says why.
// After an error the commit may have been made, its reply lost: the table
// stays, as a queued one must.
func (s *Store) Enqueue(ctx context.Context, run int, tag string, lines []byte, cases, last int64, first bool) (Enqueued, error) {
	q := Enqueued{Table: filepath.Join(filepath.Base(s.misc), fmt.Sprintf("table.run%d.add.%s", run, tag))}
	path := filepath.Join(s.Dir, q.Table)
	if err := vfs.WriteAtomic(s.fs, path, 0o644, lines); err != nil {
		return Enqueued{}, passing(s.fs, s.misc, err)
	}
	r := fsretry.Retrier{Limit: s.Retry, Log: s.log(), Clock: s.fs}
	size, ino, fp, err := s.tableIDOnce(ctx, &r, path)
	if err != nil {
		// Decided before the removal (the simulator, seed 307690 on
		// gluster-dht: a passing ENOENT, the table removed, then
		// looked up gone and the error taken for good).
		vfs.Remove(s.fs, path)
		return Enqueued{}, err
	}
	err = s.Update(ctx, func(st *State) error {
		q.Run, q.Lanes, q.Why = st.Run, st.Lanes > 1, ""
		switch {
		case st.Run == 0:
			return errNotQueued
		case st.Simple:
			q.Why = fmt.Sprintf("run %d is in SIMPLE mode (one case per meta-job)", st.Run)
			return errNotQueued
		case st.TSize <= 0:
			q.Why = fmt.Sprintf("run %d's claim state records no table size (one 'farm repair' rebuilt)", st.Run)
			return errNotQueued
		}
		st.Enqueue(Queued{Table: q.Table, TSize: size, TIno: ino, TFP: fp}, cases, first)
		st.Total += cases
		st.MaxID = max(st.MaxID, last)
		return nil
	})
	if errors.Is(err, errNotQueued) {
		vfs.Remove(s.fs, path)
		if q.Why == "" {
			q.Why = "the farm has not been submitted yet"
		}
		return Enqueued{Why: q.Why}, nil
	}
	if err != nil {
		if mutated("add-removes-undecided-table") {
			vfs.Remove(s.fs, path)
		}
		return Enqueued{}, err
	}
	return q, nil
}

var errNotQueued = errors.New("not queued")

// tableIDOnce is tableID, or, as it was before 2026-11-29 (the mutant
// add-removes-table-then-looks), tableIDOn once, the table removed on an
// error before the error is looked up.
func (s *Store) tableIDOnce(ctx context.Context, r *fsretry.Retrier, path string) (int64, uint64, string, error) {
	if !mutated("add-removes-table-then-looks") {
		return s.tableID(ctx, r, path)
	}
	if testHook != nil {
		testHook("table", path)
	}
	size, ino, fp, err := tableIDOn(s.fs, path)
	if err != nil {
		vfs.Remove(s.fs, path)
		err = passing(s.fs, path, err)
	}
	return size, ino, fp, err
}

// tableID is tableIDOn of the table at path, its passing errors (a
// network filesystem's ENOENT for a name that is there) retried by r.
func (s *Store) tableID(ctx context.Context, r *fsretry.Retrier, path string) (size int64, ino uint64, fp string, err error) {
	if testHook != nil {
		testHook("table", path)
	}
	err = r.Do(ctx, func() (err error) {
		size, ino, fp, err = tableIDOn(s.fs, path)
		return passing(s.fs, path, err)
	})
	return size, ino, fp, err
}
