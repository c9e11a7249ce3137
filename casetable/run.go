package casetable

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/farm-hpc/farm/fsretry"
	"github.com/farm-hpc/farm/vfs"
)

// ErrMoved says the claim state moved on since the caller read it (another
// command started a run, farm add added cases): nothing was changed.
var ErrMoved = errors.New("the claim state moved on since it was read")

// RunSpec is a run to start.
type RunSpec struct {
	Base   int64  // the generation the caller decided on (ErrMoved if it is not the newest)
	Chain  string // the chain Base is of (State.Chain; "": the caller read none)
	Run    int    // the run's number
	Table  string // its table, relative to the farm directory
	Simple bool   // one case per meta-job: one lane
	Cases  int64  // the table's cases
	MaxID  int64  // a first run: the table's largest ID (0: the state's stays)
	Jobs   int    // the meta-jobs it is started for: its lanes (LanesFor)
}

// moved reports whether st is not the state spec was decided on: another
// generation, or one of another chain (a repair's, counted from 0 again).
func (spec RunSpec) moved(st State) bool {
	return st.Gen != spec.Base || spec.Chain != "" && st.Chain != spec.Chain && !mutated("base-of-any-chain")
}

// StartRun makes spec's run the current one if the state is still at
// generation spec.Base (CLAIMS.md, Start a run).
func (s *Store) StartRun(ctx context.Context, spec RunSpec) error {
	s.hintMade = ""
	r := fsretry.Retrier{Limit: s.Retry, Log: s.log(), Clock: s.fs}
	t, err := s.tableID(ctx, &r, spec.Table, false)
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
	lanes := LanesFor(spec.Jobs)
	if spec.Simple {
		lanes = 1
	}
	sets := make([]Set, 1)
	if err := r.Do(ctx, func() (err error) {
		sets[0], err = makeSet(s.fs, s.Dir, s.misc, spec.Run, t, spec.Cases, lanes, spec.Jobs)
		return err
	}); err != nil {
		return err
	}
	if mutated("queue-carried-to-next-run") {
		sets = append(sets, carry(s, spec, cur)...)
	}
	if err := s.closeSets(ctx, cur); err != nil {
		removeSets(s.fs, s.misc, sets)
		return err
	}
	err = s.Update(ctx, func(st *State) error {
		if spec.moved(*st) {
			return ErrMoved
		}
		st.startRun(spec, sets)
		return nil
	})
	if errors.Is(err, ErrMoved) || err != nil && mutated("lanes-removed-after-undecided-start") {
		// Not committed: nobody knows the sets (after another error they may be known).
		removeSets(s.fs, s.misc, sets)
	}
	if err == nil {
		s.hintMade = s.vouch() // won: its meta-jobs' start hint
	}
	return err
}

// startRun makes st the record of spec's run, which claims in sets.
func (st *State) startRun(spec RunSpec, sets []Set) {
	st.Run, st.Table, st.Simple, st.Cases, st.Sets = spec.Run, spec.Table, spec.Simple, spec.Cases, sets
	if spec.MaxID > 0 { // a first run: a copy of table.dat whole
		st.MaxID, st.Total = spec.MaxID, spec.Cases
	}
}

// CloseRun closes, then drops from the record, the sets of run over table,
// none of whose jobs was submitted; ErrMoved if it is not the current run.
func (s *Store) CloseRun(ctx context.Context, run int, table string) error {
	var cur State
	r := fsretry.Retrier{Limit: s.Retry, Log: s.log(), Clock: s.fs}
	if err := r.Do(ctx, func() (err error) {
		cur, err = s.Read(ctx)
		return err
	}); err != nil {
		return err
	}
	for { // every set the commit drops closed first: farm add's meanwhile too
		if cur.Run != run || cur.Table != table {
			return ErrMoved
		}
		if err := s.closeSets(ctx, cur); err != nil {
			return err
		}
		var again bool
		err := s.Update(ctx, func(st *State) error {
			if st.Run != run || st.Table != table {
				return ErrMoved
			}
			if again = !slices.Equal(st.Sets, cur.Sets); again {
				cur = *st
				return errNoCommit
			}
			st.Sets = nil
			return nil
		})
		if err != nil || !again {
			return err
		}
	}
}

// Enqueued is where Enqueue queued a table of added cases.
type Enqueued struct {
	Run   int    // the run it was queued to (0: none, Why says why)
	Table string // the table, relative to the farm directory
	Why   string // why it was not queued
}

// Enqueue writes lines, farm add's cases (cases, the last of ID last), as
// MISC/table.runN.add.TAG and adds a set over it to the run, first if first
// (CLAIMS.md, Add a set). After an error both stay: the commit may be made.
func (s *Store) Enqueue(ctx context.Context, run int, tag string, lines []byte, cases, last int64, first bool) (Enqueued, error) {
	q := Enqueued{Table: filepath.Join(filepath.Base(s.misc), fmt.Sprintf("table.run%d.add.%s", run, tag))}
	path := filepath.Join(s.Dir, q.Table)
	if err := vfs.WriteAtomic(s.fs, path, 0o644, lines); err != nil {
		return Enqueued{}, passing(s.fs, s.misc, err)
	}
	cur, set, err := s.addSet(ctx, q.Table, cases)
	if q.Why = notQueued(cur); err == nil && q.Why == "" {
		err = s.Update(ctx, func(st *State) error {
			q.Run, q.Why = st.Run, notQueued(*st)
			if q.Why == "" && st.Run != cur.Run {
				q.Why = fmt.Sprintf("run %d started meanwhile, from table.dat", st.Run)
			}
			if q.Why != "" {
				return errNotQueued
			}
			if first {
				st.Sets = append([]Set{set}, st.Sets...)
			} else {
				st.Sets = append(slices.Clip(st.Sets), set)
			}
			st.Cases, st.Total, st.MaxID = st.Cases+cases, st.Total+cases, max(st.MaxID, last)
			return nil
		})
		switch {
		case err == nil:
			return q, nil
		case errors.Is(err, errNotQueued):
			removeSets(s.fs, s.misc, []Set{set})
			err = nil
		case !mutated("add-removes-undecided-table"):
			return Enqueued{}, err // the commit may be made: its table and set stay
		}
	}
	vfs.Remove(s.fs, path)
	if err != nil {
		return Enqueued{}, err
	}
	return Enqueued{Why: q.Why}, nil
}

// addSet reads the current run and, if it can take cases, makes a set over table, farm add's n cases.
func (s *Store) addSet(ctx context.Context, table string, n int64) (cur State, set Set, err error) {
	r := fsretry.Retrier{Limit: s.Retry, Log: s.log(), Clock: s.fs}
	t, err := s.tableID(ctx, &r, table, mutated("add-removes-table-then-looks"))
	if err != nil {
		// Looked up before Enqueue removes the table, after which a passing
		// ENOENT would look gone (seed 307690 on gluster-dht).
		return cur, set, err
	}
	if err := r.Do(ctx, s.readBase); err != nil {
		return cur, set, err
	}
	if cur = s.cur; notQueued(cur) != "" {
		return cur, set, nil
	}
	if mutated("lanes-own-table") {
		t.Table = cur.Table
	}
	err = r.Do(ctx, func() (err error) {
		set, err = makeSet(s.fs, s.Dir, s.misc, cur.Run, t, n, cur.OwnSet().Lanes, 0)
		return err
	})
	set.Table = table
	return cur, set, err
}

// notQueued says why 'farm add' cannot give cases to st's run; "" if it can.
func notQueued(st State) string {
	switch {
	case st.Run == 0:
		return "the farm has not been submitted yet"
	case st.Simple:
		return fmt.Sprintf("run %d is in SIMPLE mode (one case per meta-job)", st.Run)
	case len(st.Sets) == 0:
		return fmt.Sprintf("run %d is closed (none of its jobs was submitted, or 'farm repair' or 'farm adopt' closed it)", st.Run)
	}
	return ""
}

// errNotQueued: the run cannot take farm add's set (any more).
var errNotQueued = errors.New("not queued")

// tableID is a State of table and its identity (tableIDOn), passing errors retried
// by r; once (farm add before b6298cc, the mutant add-removes-table-then-looks):
// one try, the table removed on an error before it is looked up.
func (s *Store) tableID(ctx context.Context, r *fsretry.Retrier, table string, once bool) (State, error) {
	t, path := State{Table: table}, filepath.Join(s.Dir, table)
	testHook("table", path)
	try := func() (err error) {
		if t.TSize, t.TIno, t.TFP, err = tableIDOn(s.fs, path); err != nil && once {
			vfs.Remove(s.fs, path)
		}
		return passing(s.fs, path, err)
	}
	if once {
		err := try()
		return t, err
	}
	err := r.Do(ctx, try)
	return t, err
}
