package casetable

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/farm-hpc/farm/fsretry"
	"github.com/farm-hpc/farm/tablefmt"
	"github.com/farm-hpc/farm/vfs"
	"golang.org/x/sys/unix"
)

// Store reads and advances a farm's claim state with no lock, by
// compare-and-swap on chains of generations (CLAIMS.md): its own is the
// main chain (the run record); it claims through the chains of the run's
// lanes (lanes.go). A Store is for one goroutine.
type Store struct {
	Opts
	chainStore // the main chain

	// The sets of run setsRun the store claims in, in order, as the run
	// record of generation setsGen of chain setsChain names them; last is
	// the one claimed in last.
	setsRun   int
	setsGen   int64
	setsChain string
	sets      []*laneSet
	last      *laneSet
}

// Opts are who a store is and how it retries; its lanes' stores share them.
type Opts struct {
	Dir   string        // farm directory
	Job   string        // who commits (a job ID or a command), for the record
	Retry time.Duration // transient errors are retried this long; fsretry.Default if 0
	Log   io.Writer     // where retries are reported; os.Stderr if nil
}

// NewStore returns the claim store of the farm in dir, whose internal state
// lives in misc (normally dir/MISC). It does no I/O.
func NewStore(dir, misc string) *Store { return NewStoreOn(defaultFS, dir, misc) }

// NewStoreOn is NewStore on the filesystem fsys (the simulator's).
func NewStoreOn(fsys vfs.FS, dir, misc string) *Store {
	s := &Store{Opts: Opts{Dir: dir}}
	s.chainStore = *newChainStore(&s.Opts, fsys, misc, "")
	return s
}

// defaultFS is the filesystem of NewStore's stores: the system's, but for
// a benchmark that counts the calls.
var defaultFS vfs.FS = vfs.OS{}

// Ahead is how many batches' worth of cases the store's next claim should
// take: 1 while its claims cost no more than a commit, more (at most
// MaxAhead) as sharing its lane with others costs it more. Off (1) in a
// set of one lane but with FARM_CLAIM_AHEAD=1 (CLAIMS.md, "Claims at scale").
func (s *Store) Ahead() int {
	if L := s.last; L != nil && L.stores[L.home] != nil {
		return L.stores[L.home].ahead()
	}
	return 1
}

// Close releases the store's files.
func (s *Store) Close() error {
	for _, L := range s.sets {
		L.close()
	}
	s.sets, s.last, s.setsRun = nil, nil, 0
	s.chainStore.close()
	return nil
}

// Last returns the run record the store read or committed last (by Read,
// Update or Claim), with no I/O.
func (s *Store) Last() State { return s.cur }

// ClaimedInRun is about how many cases of the run the store claims in
// were claimed as of its last claim, with no I/O: the cases of the sets it
// found used up, and of each other the count of the lane it claimed in
// last times the lanes. metajob tells from it when dt_cutoff is due.
func (s *Store) ClaimedInRun() int64 {
	var n int64
	for _, L := range s.sets {
		if L.end {
			n += L.set.Cases
		} else if ls := L.stores[L.home]; ls != nil {
			n += ls.cur.Claimed * int64(L.x.lanes)
		}
	}
	return n
}

// Read returns the current state (the run record), with no lock and no
// wait; its Claimed is that of every lane of the run's sets together.
func (s *Store) Read(ctx context.Context) (State, error) {
	if err := s.refresh(); err != nil {
		return State{}, err
	}
	return s.readLanes(s.cur)
}

// Update runs fn on the current state and commits the result as the next
// generation. If another process committed first, it reads that and runs fn
// again: fn must only compute, with no effects outside the State. If the farm
// has no state yet, fn gets a zero State and the first generation starts a
// new chain.
func (s *Store) Update(ctx context.Context, fn func(*State) error) error {
	_, err := s.update(ctx, fn, func(*State) commitInfo { return commitInfo{} })
	return err
}

// Claim hands out up to most consecutive unclaimed cases of run, in one
// commit on one lane of the first set (in the run record's order) not
// known to be used up; none when the run has none left (or a newer run
// started), with no commit. most below 1 (FirstBatch) lets the store size
// a meta-job's first claim.
func (s *Store) Claim(ctx context.Context, run, most int) ([]tablefmt.Case, error) {
	// A run record read since the store opened its sets (Look, Read) may
	// name a set added since: 'farm add --first' puts it first.
	again := s.setsRun == run && s.stale()
	for tries := 0; ; tries++ {
		if err := s.findSets(ctx, run, again); err != nil {
			return nil, err
		}
		for _, L := range s.sets {
			cases, err := s.claimLanes(ctx, L, run, most)
			if err != nil || len(cases) > 0 {
				return cases, err
			}
		}
		// Every set it knows is used up: 'farm add' may have given the
		// run another since the store read the run record (one lookup).
		if tries > 0 || len(s.sets) == 0 || !s.moved() {
			return nil, nil
		}
		again = true
	}
}

// LookEvery is the cadence of a meta-job's look at its run (Look), the one
// poller of the claim state: at 1,000 meta-jobs, 200 lookups a second.
const LookEvery = 5 * time.Second

// Look is a meta-job's look at its run: one lookup of the main chain's
// next mark and, if the run record moved on, a reading of it (its Claimed
// not summed). It returns the record and whether it moved on since the
// store opened the sets it claims in; the next Claim claims in those it names.
func (s *Store) Look(ctx context.Context) (State, bool, error) {
	if s.ch != nil && s.gen >= 0 && !s.moved() {
		return s.cur, s.stale(), nil
	}
	if err := s.refresh(); err != nil {
		return State{}, true, err
	}
	return s.cur, true, nil
}

// stale reports whether the store read a run record (Look, Read) since
// the one whose sets it opened.
func (s *Store) stale() bool {
	return s.setsRun != 0 && (s.cur.Gen != s.setsGen || s.cur.Chain != s.setsChain)
}

// lane returns the store of lane l of the set L.
func (s *Store) lane(L *laneSet, l int) *chainStore {
	if L.stores[l] == nil {
		L.stores[l] = newChainStore(&s.Opts, s.fs, s.misc, filepath.Join(L.dir, strconv.Itoa(l)))
		L.stores[l].solo = L.x.lanes == 1
	}
	return L.stores[l]
}

// pick is the lane of the set L to claim in: the home lane while it has
// cases, else one drawn among those not known to be exhausted; -1 if none
// is left. Before a move, one lookup of the end mark, then one listing of
// the lanes' exhausted marks, spare most claimers reading lanes one by one.
func (s *Store) pick(L *laneSet) int {
	if L.end {
		return -1
	}
	if !L.exhausted[L.home] {
		return L.home
	}
	if _, err := vfs.Stat(s.fs, filepath.Join(L.dir, "end")); err == nil {
		L.end = true
		return -1
	}
	if L.x.lanes > 1 {
		s.readExhausted(L)
	}
	var left []int
	for l, ex := range L.exhausted {
		if !ex {
			left = append(left, l)
		}
	}
	if len(left) == 0 {
		s.endSet(L)
		return -1
	}
	if ls := L.stores[L.home]; ls != nil {
		ls.close() // its lane is exhausted: its descriptors go
		L.stores[L.home] = nil
	}
	L.home = left[s.fs.Rand()%uint64(len(left))]
	return L.home
}

// readExhausted marks exhausted the lanes of L whose x.ℓ mark is listed (a
// listing that fails costs only the readings of the lanes it would spare).
func (s *Store) readExhausted(L *laneSet) {
	names, err := vfs.ReadDirNames(s.fs, L.dir)
	if err != nil {
		return
	}
	for _, n := range names {
		v, ok := strings.CutPrefix(n, "x.")
		if l, err := strconv.Atoi(v); ok && err == nil && l >= 0 && l < len(L.exhausted) {
			L.exhausted[l] = true
		}
	}
}

// endSet ends the set L, every lane of it exhausted: it makes its end mark
// for the others (best effort: without it they look at every lane once)
// and closes its lanes' stores.
func (s *Store) endSet(L *laneSet) {
	L.end = true
	path := filepath.Join(L.dir, "end")
	if f, err := vfs.Open(s.fs, unix.AT_FDCWD, path, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o644); err == nil {
		f.Close()
	}
	L.close()
}

// findSets reads the run record from the main chain and opens the sets of
// run it names (once per run and store, or again if again), keeping what
// the store knows of the sets it had open. A record of another run leaves
// the store no set: nothing to claim in run.
func (s *Store) findSets(ctx context.Context, run int, again bool) error {
	if s.setsRun == run && !again {
		return nil
	}
	r := fsretry.Retrier{Limit: s.Retry, Log: s.log(), Clock: s.fs}
	for {
		err := s.readBase()
		if err == nil && s.cur.Run == 0 {
			if run < 1 || mutated("no-state-ends-claims") {
				return ErrNoState
			}
			// Run run was started, so the state exists: a network
			// filesystem's passing ENOENT for MISC/chain, retried.
			err = fsretry.Transient(fmt.Errorf("run %d was started, but %s/chain is not found: %w", run, s.misc, ErrNoState))
		} else if err == nil {
			err = s.openSets(run)
		}
		if err == nil || !r.Again(ctx, err) {
			return err
		}
	}
}

// openSets makes the sets of the run record just read the store's, if it
// is of run (none otherwise), reusing those it has open.
func (s *Store) openSets(run int) error {
	var sets []*laneSet
	if s.cur.Run == run {
		for _, t := range s.cur.Sets {
			if i := slices.IndexFunc(s.sets, func(L *laneSet) bool { return L.set == t }); i >= 0 {
				sets = append(sets, s.sets[i])
				continue
			}
			L, err := s.openSet(run, t, false)
			if err != nil {
				closeSetsBut(sets, s.sets)
				return err
			}
			sets = append(sets, L)
		}
	}
	closeSetsBut(s.sets, sets)
	if !slices.Contains(sets, s.last) {
		s.last = nil
	}
	s.sets = sets
	if s.cur.Run >= run {
		s.setsRun = run // else a stale reading: read again next claim
		s.setsGen, s.setsChain = s.cur.Gen, s.cur.Chain
	}
	return nil
}

// closeSetsBut closes the sets of sets that keep does not hold.
func closeSetsBut(sets, keep []*laneSet) {
	for _, L := range sets {
		if !slices.Contains(keep, L) {
			L.close()
		}
	}
}

// claimLanes is a claim in the set L of run: in the home lane while it
// has cases, then in the others.
func (s *Store) claimLanes(ctx context.Context, L *laneSet, run, most int) ([]tablefmt.Case, error) {
	for {
		l := s.pick(L)
		if l < 0 {
			return nil, nil
		}
		cases, exhausted, err := s.lane(L, l).claimInLane(ctx, L, run, most)
		if errors.Is(err, errClosed) {
			// A new run, a close or a repair closed the set: nothing more
			// in this run from it.
			L.end = true
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		if exhausted {
			L.exhausted[l] = true
			if len(cases) > 0 && L.x.lanes > 1 {
				// This claim exhausted the lane: say so to the others (best
				// effort: a mark not made costs them a reading of the lane).
				s.fs.Mknodat(unix.AT_FDCWD, filepath.Join(L.dir, "x."+strconv.Itoa(l)), unix.S_IFREG|0o644)
			}
		}
		if len(cases) > 0 || !exhausted {
			s.last = L
			return cases, nil
		}
	}
}
