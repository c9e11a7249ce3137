package casetable

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
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

// Store reads and advances a farm's claim state with no lock (CLAIMS.md):
// the main chain (the run record), and the lanes it claims in. For one goroutine.
type Store struct {
	Opts
	chainStore // the main chain

	// The sets it claims in, of run opened.Run, as generation opened.Gen of
	// chain opened.Chain names them; last: the one claimed in last.
	opened State
	sets   []*laneSet
	last   *laneSet

	hint     *hinted    // a start hint for the first claim (hint.go); nil: none, or used
	hintMade string     // the hint of the run StartRun started last (Hint)
	given    givenIndex // an index openHinted read, while it opens the sets
}

// Opts are who a store is and how it retries; its lanes' stores share them.
type Opts struct {
	Dir   string        // farm directory
	Job   string        // who commits (a job ID or a command), for the record
	Retry time.Duration // transient errors are retried this long; fsretry.Default if 0
	Log   io.Writer     // where retries are reported; os.Stderr if nil
	// Note, if set, is told of each claim in a lane before its commit is
	// tried, with a token naming the generation it takes (ClaimWon decides
	// it), and once the commit is decided lost (lost; its error is not
	// heeded); an error fails the claim before the commit.
	Note func(token string, ids []int64, lost bool) error
}

// log is where a store reports retries: Log, else os.Stderr.
func (o *Opts) log() io.Writer { return cmp.Or[io.Writer](o.Log, os.Stderr) }

// NewStore returns the claim store of the farm in dir, its state in misc (dir/MISC).
func NewStore(dir, misc string) *Store { return NewStoreOn(defaultFS, dir, misc) }

// NewStoreOn is NewStore on the filesystem fsys (the simulator's).
func NewStoreOn(fsys vfs.FS, dir, misc string) *Store {
	s := &Store{Opts: Opts{Dir: dir}}
	s.chainStore = chainStore{o: &s.Opts, fs: fsys, misc: misc, gen: -1, top: -1, con: contention{own: -1}}
	return s
}

// defaultFS is the filesystem of NewStore's stores (a benchmark's counts calls).
var defaultFS vfs.FS = vfs.OS{}

// Ahead is how many batches' worth the store's next claim should take: more as sharing its lane
// costs it more (CLAIMS.md, "Claims at scale"); on in sets of several lanes, else if aheadOn.
func (s *Store) Ahead() int {
	L := s.last
	if L == nil || L.stores[L.home] == nil || L.x.lanes == 1 && !aheadOn {
		return 1
	}
	return max(L.stores[L.home].con.ahead, 1)
}

// aheadOn turns Ahead on in sets of one lane too (FARM_CLAIM_AHEAD=1).
var aheadOn = os.Getenv("FARM_CLAIM_AHEAD") == "1"

// Close releases the store's files.
func (s *Store) Close() error {
	closeSetsBut(s.sets, nil)
	s.sets, s.last, s.opened = nil, nil, State{}
	s.chainStore.close()
	return nil
}

// Last returns the run record the store read or committed last, with no I/O.
func (s *Store) Last() State { return s.cur }

// ClaimedInRun estimates, with no I/O, the cases of its run claimed as of its
// last claim: its lane's count times the lanes, per set (metajob's dt_cutoff).
func (s *Store) ClaimedInRun() int64 {
	var n int64
	for _, L := range s.sets {
		if L.end {
			n += L.set.Cases
		} else if ls := L.stores[L.home]; ls != nil {
			n += ls.cur.Claimed*int64(L.x.stride()) + L.x.tickets
		}
	}
	return n
}

// Read returns the run record, with no wait; its Claimed is its lanes' together.
func (s *Store) Read(ctx context.Context) (State, error) {
	if err := s.refresh(); err != nil {
		return State{}, err
	}
	return s.readLanes(s.cur)
}

// Update commits fn's change of the state as the next generation, fn run again on
// another's commit (it must only compute); with no state yet, fn gets a zero State.
func (s *Store) Update(ctx context.Context, fn func(*State) error) error {
	return s.update(ctx, fn, &commitInfo{})
}

// Claim hands out up to most consecutive unclaimed cases of run (FirstBatch:
// sized by the store) in one commit, from the first set not used up; none,
// with no commit, when the run has none left or a newer run started.
func (s *Store) Claim(ctx context.Context, run, most int) ([]tablefmt.Case, error) {
	for tries := 0; ; tries++ {
		if err := s.findSets(ctx, run, tries > 0); err != nil {
			return nil, err
		}
		for _, L := range s.sets {
			cases, err := s.claimLanes(ctx, L, run, most)
			if err != nil || len(cases) > 0 {
				return cases, err
			}
		}
		// Every set it knows used up: farm add may have given another since.
		if tries > 0 || len(s.sets) == 0 || !s.moved() {
			for _, L := range s.sets { // the damage of a lane it passed, if any
				if L.damage != nil {
					return nil, L.damage
				}
			}
			return nil, nil
		}
	}
}

// LookEvery is the cadence of a meta-job's look at its run (Look).
const LookEvery = 5 * time.Second

// Look is one lookup of the main chain's next mark and, if it moved on (or
// afresh: a chain gone is then damage, not a mark not found), a reading of the
// run record, Claimed not summed; and whether it moved on since Claim opened its sets.
func (s *Store) Look(ctx context.Context, afresh bool) (State, bool, error) {
	if !afresh && !s.moved() { // moved: true if it knows no generation
		return s.cur, s.stale(), nil
	}
	if err := s.refresh(); err != nil {
		return State{}, false, err
	}
	return s.cur, true, nil
}

// moved reports, by one lookup, whether the main chain (the store's: never
// a lane's) has a mark after the newest generation it knows; true if it knows none.
func (s *Store) moved() bool {
	if s.ch == nil || s.gen < 0 {
		return true
	}
	m, err := s.ch.marker(s.ch.nextSlot(s.gen))
	return err != nil || m != unmarked
}

// stale reports whether the store read a run record since the one whose sets it opened.
func (s *Store) stale() bool {
	return s.opened.Run != 0 && (s.cur.Gen != s.opened.Gen || s.cur.Chain != s.opened.Chain)
}

// pick is the lane of L to claim in: the home lane while it has cases, else one drawn
// among those not known exhausted (end, x.ℓ marks); -1 if none: L ended, its stores
// closed, its end mark made (best effort; none after damage: every claimer must meet it).
func (s *Store) pick(L *laneSet) int {
	if L.end {
		return -1
	}
	if !L.exhausted[L.home] {
		return L.home
	}
	if L.x.lanes > 1 { // a listing that fails costs only the readings it would spare
		names, err := vfs.ReadDirNames(s.fs, L.dir)
		for l := range L.exhausted {
			L.exhausted[l] = L.exhausted[l] || err == nil && slices.ContainsFunc(names, func(n string) bool {
				return n == "end" || n == "x."+strconv.Itoa(l)
			})
		}
	}
	var left []int
	for l, ex := range L.exhausted {
		if !ex && !L.x.sweep(l) {
			left = append(left, l)
		}
	}
	if sw := L.x.lanes - 1; L.x.sweep(sw) && !L.exhausted[sw] && (len(left) == 0 || L.sweepEarly(s.fs)) {
		left = []int{sw} // the tickets' sweep: once the other lanes are exhausted, or early
	}
	if len(left) == 0 {
		L.end = true
		if L.damage == nil {
			s.fs.Mknodat(unix.AT_FDCWD, filepath.Join(L.dir, "end"), unix.S_IFREG|0o644)
		}
		L.close()
		return -1
	}
	L.stores[L.home].close() // its lane is exhausted: its descriptors go
	L.stores[L.home] = nil
	L.home = left[s.fs.Rand()%uint64(len(left))]
	return L.home
}

// findSets reads the run record and opens the sets of run it names: once per run, or
// again if again or stale (one added first); a record of another run leaves none.
func (s *Store) findSets(ctx context.Context, run int, again bool) error {
	if s.opened.Run == run && !again && !s.stale() {
		return nil
	}
	if !again && s.openHinted(run) {
		return nil
	}
	r := fsretry.Retrier{Limit: s.Retry, Log: s.log(), Clock: s.fs}
	return r.Do(ctx, func() error {
		err := s.readBase()
		switch {
		case err != nil:
			return err
		case s.cur.Run != 0:
			return s.openSets(run)
		case run < 1 || mutated("no-state-ends-claims"):
			return ErrNoState
		}
		// Run run was started: a passing ENOENT for MISC/chain, retried.
		return fsretry.Transient(fmt.Errorf("run %d was started, but %s/chain is not found: %w", run, s.misc, ErrNoState))
	})
}

// openSets makes the sets of the record just read, if of run, the store's.
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
		s.opened = State{Run: run, Gen: s.cur.Gen, Chain: s.cur.Chain} // else a stale reading: read again next claim
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

// claimLanes is a claim in the set L of run, in the lane pick says.
func (s *Store) claimLanes(ctx context.Context, L *laneSet, run, most int) ([]tablefmt.Case, error) {
	if L.x.tickets > 0 && !L.ticketTried && !L.end {
		if cases, err := s.claimTicket(ctx, L); err != nil || len(cases) > 0 {
			s.last = L
			return cases, err
		}
	}
	for {
		l := s.pick(L)
		if l < 0 {
			return nil, nil
		}
		cases, exhausted, err := L.claimInLane(ctx, s, l, run, most)
		if errors.Is(err, errClosed) { // a new run, a close or a repair closed the set
			L.end = true
			return nil, nil
		}
		var de *DamageError
		if errors.As(err, &de) {
			// A lane nobody can read: its cases wait for the next run (CLAIMS.md,
			// Damage), the others go on, and a claim that finds nothing says it.
			L.exhausted[l], L.damage = true, de
			continue
		}
		if err != nil {
			return nil, err
		}
		if exhausted {
			L.exhausted[l] = true
			if (len(cases) > 0 || L.x.sweep(l)) && L.x.lanes > 1 { // its x.ℓ mark, for the others (best effort)
				s.fs.Mknodat(unix.AT_FDCWD, filepath.Join(L.dir, "x."+strconv.Itoa(l)), unix.S_IFREG|0o644)
			}
		}
		if len(cases) == 0 && !exhausted && L.x.sweep(l) {
			continue // the sweep passed tickets their owners claimed: on
		}
		if len(cases) > 0 || !exhausted {
			s.last = L
			return cases, nil
		}
	}
}

// ClaimWon decides whether the claim a meta-job noted as token (Opts.Note) committed
// (CLAIMS.md, Noted claims); an error if it cannot tell (chain gone, generation buried).
func (s *Store) ClaimWon(ctx context.Context, token string) (won bool, err error) {
	dir, rest, ok1 := strings.Cut(token, "@")
	gen, nonce, ok2 := strings.Cut(rest, "#")
	n, err := strconv.ParseInt(gen, 10, 64)
	_, ticket := ticketDirOf(filepath.Base(dir))
	if !ok1 || !ok2 || err != nil || n < 1 && !ticket || n < 0 || !filepath.IsLocal(dir) || !strings.HasPrefix(dir, "lanes.") {
		return false, fmt.Errorf("not a claim's token: %.80q", token)
	}
	if ticket && nonce == "ticket" {
		return s.ticketWon(ctx, dir, n)
	}
	c := newChain(s.fs, filepath.Join(s.misc, dir))
	defer c.close()
	r := fsretry.Retrier{Limit: s.Retry, Log: s.log(), Clock: s.fs}
	err = r.Do(ctx, func() error {
		m, err := c.awaitPaced(ctx, n, 0)
		if err != nil || m != committed {
			return err
		}
		b, err := c.read(n)
		if err != nil {
			return passing(s.fs, c.dir, err)
		}
		won = strings.HasSuffix(strings.TrimSuffix(string(b), "\n"), " nonce="+nonce) || mutated("claim-won-by-mark")
		return nil
	})
	return won, err
}
