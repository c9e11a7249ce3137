package casetable

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/farm-hpc/farm/fsretry"
	"github.com/farm-hpc/farm/vfs"
)

// chainStore reads and advances one chain, the main chain or a lane's (chain.go).
type chainStore struct {
	o    *Opts
	fs   vfs.FS
	misc string
	dir  string // a lane's chain directory; "": the main chain, which MISC/chain names
	ch   *chain
	gen  int64 // newest generation known; -1: none
	top  int64 // newest mark known with it: every mark after gen up to top is a void
	cur  State // its state
	wbuf []byte
	con  contention
	tab  *tableCheck // a lane's: the run's table its claims read
}

// contention is what others' claims cost the store's (Ahead).
type contention struct {
	own   int64 // the generation this store committed last; -1: none
	ahead int   // batches' worth the next claim should take; 0: 1
	peers int64 // others claiming: generations they committed between its last two commits, or slots it lost
	carry int   // doublings of a lost commit's pause carried into its next claim (backoffLimit)
}

// pause waits before the look after try (0, 1, ...): 10 ms more each time.
func (s *chainStore) pause(try int) {
	s.fs.Sleep(context.Background(), time.Duration(try+1)*10*time.Millisecond)
}

const (
	MaxAhead    = 64 // caps Ahead
	aheadTarget = 3  // calls that sharing the chain may add to a claim, per batch's worth
	maxCarry    = 10 // doublings carried (a pause's bound up to 1,024 units): 10 claims back down
)

// contended updates Ahead after a claim that committed gen and lost lost
// attempts: the calls others cost it over aheadTarget, or half the last.
func (s *chainStore) contended(gen int64, lost int) {
	c := &s.con
	extra := 0
	c.peers = int64(lost) // each slot lost was another's
	if c.own >= 0 && gen-c.own > 1 {
		c.peers = max(c.peers, gen-c.own-1)
		extra += 3 + 2*bits.Len64(uint64(gen-c.own-1)) // a gallop of lookups, a read
	}
	extra += 8 * lost // a slot, a wait and a reading each
	// A store that keeps losing keeps pausing longer: the doublings its
	// losses added, less one a claim, at most maxCarry (CLAIMS-APPENDIX.md).
	c.carry = min(max(0, c.carry+lost-1), maxCarry)
	want := 1 + (extra+aheadTarget-1)/aheadTarget
	c.ahead = min(MaxAhead, max(want, max(c.ahead, 1)/2))
	c.own = gen
}

// close releases the chain store's files (if s is not nil).
func (s *chainStore) close() {
	if s != nil {
		s.tab.drop()
		s.setChain(nil)
	}
}

// setChain makes ch the store's chain, closing the one it replaces (and
// saying how many of its generations could not be buried, past the first).
func (s *chainStore) setChain(ch *chain) {
	if c := s.ch; c != nil && c != ch {
		if c.buried.fails > 1 {
			fmt.Fprintf(s.o.log(), "farm: %d generations of the claim state could not be buried (the first: %v)\n", c.buried.fails, c.buried.first)
			c.buried.fails = 0
		}
		c.close()
	}
	if ch != nil {
		ch.buried.log = s.o.log()
	}
	s.ch = ch
}

// open opens the store's chain if it has none: a lane's, or MISC/chain's.
func (s *chainStore) open() error {
	if s.ch != nil {
		return nil
	}
	var ch *chain
	var err error
	if s.dir != "" {
		// A lane of a set a record names: made whole, generation 0 committed, before.
		ch = newChain(s.fs, s.dir)
		ch.known = 0
	} else if ch, _, _, err = openChain(s.fs, s.misc); err != nil {
		return err
	}
	s.setChain(ch)
	s.gen, s.top = -1, -1
	return nil
}

// refresh reads the newest generation.
func (s *chainStore) refresh() error {
	if err := s.open(); err != nil {
		return err
	}
	for tries := 0; ; tries++ {
		n, err := s.ch.latestNear(s.gen, s.con.peers)
		switch {
		case err == errInconsistent || os.IsNotExist(err):
			// Damage if the chain's directory is gone; else a cache's passing answer.
			s.ch.close()
			if gone(s.fs, s.ch.dir) {
				return &DamageError{Path: s.ch.dir, Why: "the chain directory is gone"}
			}
			err = fsretry.Transient(err)
		case err != nil:
			return err
		case n < 0:
			if err = s.ch.noGeneration(); err == nil && s.dir == "" {
				return ErrNoState // a chain with no generation yet
			} else if err == nil {
				// A lane has generation 0 before anyone knows it: a passing answer.
				err = fsretry.Transient(fmt.Errorf("%s: no generation of the lane found", s.ch.dir))
			}
		default:
			if done, err := s.loadAt(n, tries); done {
				return err
			}
			continue
		}
		if !fsretry.IsTransient(err) || tries >= 20 {
			return err
		}
		s.pause(tries)
	}
}

// loadAt is refresh's reading of generation n at its tries-th look: done, or to look again.
func (s *chainStore) loadAt(n int64, tries int) (done bool, _ error) {
	err := s.load(n)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, errClosed) && s.dir != "":
		return true, err // a lane closed: its run is over
	case errors.Is(err, errClosed):
		closed := s.ch.dir
		s.setChain(nil)
		if err := s.open(); err != nil {
			return true, err
		}
		if s.ch.dir == closed {
			// Still named: a repair is replacing it (repair.go), or died doing so.
			if tries >= 20 {
				return true, &DamageError{Path: closed, Why: "closed by a 'farm repair' that did not finish"}
			}
			s.pause(tries)
		}
		return false, nil
	case tries >= 20 && os.IsNotExist(err) && !mutated("one-look-is-gone"):
		return true, s.ch.checkGone(err) // damage if the chain is gone, else passing
	case tries >= 20 || !(errors.Is(err, errBuried) || os.IsNotExist(err) || err == errInconsistent):
		return true, err
	}
	// Buried while we looked, or a cached name: look again from the start.
	s.gen, s.top = -1, -1
	s.pause(tries)
	return false, nil
}

// load reads generation n into s.cur.
func (s *chainStore) load(n int64) error {
	b, err := s.ch.read(n)
	if err != nil {
		return err
	}
	var st State
	if err := st.unmarshal(b); err == errClosed {
		return err
	} else if err != nil {
		return &DamageError{Path: s.ch.segPath(n, genName(n)), Why: err.Error()}
	}
	st.Gen, st.Chain = n, filepath.Base(s.ch.dir)
	// Marks after n up to the top that reading found are voids: commits pass them.
	s.gen, s.top, s.cur = n, max(n, s.ch.top), st
	return nil
}

// update is the compare-and-swap (CLAIMS.md, "The chain of generations"):
// fn runs on the newest state, committed as its generation +1, again on a
// commit lost; fn sets *info to what it claimed. Transient errors are retried.
func (s *chainStore) update(ctx context.Context, fn func(*State) error, info *commitInfo) (err error) {
	defer func() {
		if err != nil && !mutated("failed-read-old-base") {
			s.gen, s.top = -1, -1 // read afresh next time, whatever was half read
		}
	}()
	// Read afresh if others committed between its last two claims: likely since too.
	u := &updating{r: fsretry.Retrier{Limit: s.o.Retry, Log: s.o.log(), Clock: s.fs},
		stale: s.ch == nil || s.gen < 0 || s.con.ahead > 1 || s.con.peers > 0, carry: s.con.carry}
	for err = errAgain; err == errAgain; {
		if err = ctx.Err(); err == nil {
			err = s.attempt(ctx, u, fn, info)
		}
	}
	if err == errNoCommit {
		return nil
	}
	return err
}

// updating is an update's attempts so far.
type updating struct {
	r        fsretry.Retrier
	stale    bool          // the base must be read (again)
	reopened bool          // the chain was looked up again after damage
	lost     int           // attempts lost to other processes
	carry    int           // doublings of its pause carried from the store's last claims
	empties  bool          // the attempt's commit claims the last of its lane's cases
	pause    time.Duration // a lost commit's pause, yet to be taken before the next
	fresh    bool          // the base is the generation that beat it, read just now
	tried    time.Time     // this attempt's start: its reading of the base, then its commit
}

var (
	errAgain    = errors.New("again")             // from update's steps: another attempt
	errNoCommit = errors.New("nothing to commit") // from update's fn: no commit
)

// again is errAgain once err is to be retried (r) and waited for, else err.
func (u *updating) again(ctx context.Context, err error) error {
	if u.r.Again(ctx, err) {
		return errAgain
	}
	return err
}

// attempt is one attempt of update: nil once committed, errNoCommit,
// errAgain for another, or the error that ends the update.
func (s *chainStore) attempt(ctx context.Context, u *updating, fn func(*State) error, info *commitInfo) error {
	st, err := s.propose(ctx, u, fn)
	if err != nil {
		return err
	}
	next := max(s.gen, s.top) + 1
	if mutated("failed-read-old-base") {
		next = s.ch.nextSlot(s.gen)
	}
	ci := *info
	u.empties = ci.empties
	ci.nonce = newNonce(s.fs)
	ci.by = cmp.Or(ci.by, s.o.Job)
	s.wbuf = st.marshal(s.wbuf[:0], next, ci)
	if err := s.note(next, ci, false, false, nil); err != nil {
		return err
	}
	won, err := s.ch.commitOrWait(ctx, u, next, s.wbuf)
	s.note(next, ci, true, won, err)
	switch {
	case err != nil && !errors.As(err, new(*DamageError)):
		// Read afresh: the failed slot may be decided by now (EIO: GlusterFS
		// healing). errAgain (the mutant undecided-recommitted) passes again as it is.
		u.stale = true
		return u.again(ctx, err)
	case err != nil && (s.dir != "" || u.reopened):
		return err // damage (a lane is where it is)
	case err != nil:
		// A repair may have named a new chain: MISC/chain read again, once.
		old := s.ch.dir
		s.setChain(nil)
		ch, _, _, oerr := openChain(s.fs, s.misc)
		if ch.close(); oerr != nil || ch.dir == old {
			return err
		}
		u.reopened, u.stale = true, true
		return errAgain
	case won:
		u.r.OK()
		st.Gen, st.Chain = next, filepath.Base(s.ch.dir)
		s.gen, s.top, s.cur = next, next, *st
		s.contended(next, u.lost)
		return nil
	}
	// Lost, and the slot is marked: the newest generation is the new base.
	u.r.OK()
	u.tried = s.fs.Now()
	n, err := s.ch.latestNear(next, 0)
	if err == nil {
		err = s.load(n)
	}
	if errors.Is(err, errClosed) {
		s.setChain(nil) // a repair made a new chain
	}
	u.stale, u.fresh = err != nil, err == nil
	return errAgain
}

// note tells Opts.Note of a claim of ci's cases in generation next: before
// its commit (not done), and once it is decided lost (done, won false, err
// not an undecided commit's, which is ClaimWon's to decide).
func (s *chainStore) note(next int64, ci commitInfo, done, won bool, err error) error {
	late := mutated("note-after-commit") // noted once won, never before
	switch {
	case ci.ids == nil || s.o.Note == nil:
	case !done && !late, done && won && late:
		return s.o.Note(s.token(next, ci.nonce), ci.ids, false)
	case done && !won && !late && !errors.Is(err, errUndecided):
		return s.o.Note(s.token(next, ci.nonce), ci.ids, true)
	}
	return nil
}

// token names a lane's generation n, by nonce, for Opts.Note: "DIR@N#NONCE", DIR its chain's in MISC.
func (s *chainStore) token(n int64, nonce string) string {
	rel, _ := filepath.Rel(s.misc, s.dir)
	return rel + "@" + strconv.FormatInt(n, 10) + "#" + nonce
}

// propose reads the base if it must, runs fn on it and, for the farm's first
// commit, makes its chain: the state to commit (after the pause a lost commit
// left it: paused), errAgain, or errNoCommit.
func (s *chainStore) propose(ctx context.Context, u *updating, fn func(*State) error) (*State, error) {
	if u.tried.IsZero() || u.stale {
		u.tried = s.fs.Now()
	}
	read := u.stale || u.fresh // the base is read in this call, or was by the lost commit
	u.fresh = false
	if u.stale {
		if err := s.readBase(); err != nil {
			return nil, u.again(ctx, err)
		}
		u.stale = false
	}
	st := s.cur
	if err := fn(&st); err != nil {
		switch {
		case err == errNoCommit && read:
			return nil, errNoCommit
		case err == errNoCommit:
			// Decided on the last generation it knew: once more, on the newest.
			u.stale = true
			return nil, errAgain
		case fsretry.IsTransient(err):
			// A table unreadable for now: all read afresh, stale handles too.
			s.tab.drop()
			s.ch.close()
			u.stale = true
		}
		return nil, u.again(ctx, err)
	}
	if s.ch == nil { // the farm's first commit: its chain made first
		ch, err := createChain(s.fs, s.misc)
		if err != nil {
			return nil, u.again(ctx, err)
		}
		s.setChain(ch)
		if n, err := ch.latestNear(-1, 0); err != nil || n >= 0 {
			u.stale = true // another made the chain and its first generation first
			return nil, errAgain
		}
	}
	return &st, s.paused(ctx, u)
}

// paused takes the pause a lost commit left for the next (u.pause: the lost one
// took its lane's last case, and the winner's generation left cases); errAgain
// if the chain moved on meanwhile, for the base to be read again.
func (s *chainStore) paused(ctx context.Context, u *updating) error {
	if u.pause == 0 {
		return nil
	}
	err := s.fs.Sleep(ctx, u.pause)
	u.pause = 0
	if err != nil {
		return err
	}
	if m, err := s.ch.marker(s.ch.nextSlot(s.gen)); err != nil || m != unmarked {
		u.stale = true
		return errAgain
	}
	return nil
}

// readBase reads the newest generation into s.cur; none yet: a zero State, Gen -1.
func (s *chainStore) readBase() error {
	err := s.refresh()
	if errors.Is(err, ErrNoState) {
		s.cur, s.gen, s.top = State{Gen: -1}, -1, -1
		if s.ch != nil {
			s.top = s.ch.top // voids only (a first commit voided)
		}
		return nil
	}
	return err
}
