package casetable

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/farm-hpc/farm/fsretry"
	"github.com/farm-hpc/farm/internal/kv"
	"github.com/farm-hpc/farm/tablefmt"
	"github.com/farm-hpc/farm/vfs"
	"golang.org/x/sys/unix"
)

// State is a generation of the claim state (chain.go). On the main chain
// it is the run record: the current run and the sets of lanes it claims
// in, in order (lanes.go); it holds no cursor, and only commands change it
// (a run's start, farm add, a close, a repair). In a lane's chain it is
// the lane's cursor: the block and byte offset of the lane's next case,
// so that a claim costs the same on any table size.
type State struct {
	Run    int    // run number: 1 for submit, +1 for every resubmit
	Table  string // the run's own table (a lane's: its set's), relative to the farm directory
	Simple bool   // SIMPLE mode: one case per job
	Cases  int64  // cases of the run (its own table's and farm add's); a lane's: in its blocks
	MaxID  int64  // largest case ID of the farm's table.dat
	Total  int64  // cases in the farm's table.dat
	Repair string // set by each 'farm repair' to a value of its own: a meta-job tells a rebuilt state by it

	// Sets are what the run claims, in order: its own table's set, and
	// one per 'farm add' (after, or with --first before, the others).
	// A run with no set has nothing left to claim (closed).
	Sets []Set

	// Claimed is, on the main chain as Read returns it, the cases
	// claimed in the run (every lane's; a run with no set: all); in a
	// lane's generation, the lane's. Not stored on the main chain.
	Claimed int64

	// A lane's cursor (InLane): which lane, the block its cursor is in,
	// the byte offset of the next unread line of Table and the lines
	// before it; and Table's identity as the run saw it, which a claim
	// checks (TSize, TIno, TFP).
	InLane bool
	Lane   int
	Block  int64
	Offset int64
	Lines  int64
	TSize  int64
	TIno   uint64
	TFP    string

	Gen int64 // the generation this state was read from, -1 for none (not stored)
	// Chain is the chain Gen is of (its directory's name; not stored): a
	// repair starts another, whose generations count from 0 again.
	Chain string
}

// Set is a set of lanes over one table (lanes.go): the run's own, or one
// 'farm add' gave it.
type Set struct {
	Dir   string // its directory in MISC (lanes.RUN.NONCE)
	Lanes int    // its lanes
	Cases int64  // the cases of its table
	Table string // its table, relative to the farm directory
}

// OwnSet is the set of the run's own table; zero if it has none (a closed
// run).
func (st *State) OwnSet() Set {
	for _, t := range st.Sets {
		if t.Table == st.Table {
			return t
		}
	}
	return Set{}
}

// ErrNoState is returned when the farm has never been submitted.
var ErrNoState = errors.New("the farm has not been submitted yet")

// commitInfo is what a generation says about who made it and what it
// claimed; for the record (and for a reader who wants to know), not used
// by the protocol, except nonce.
type commitInfo struct {
	by    string // job ID, or the command that made it
	first int64  // first case ID claimed, 0 if none
	n     int    // cases claimed
	nonce string
}

// marshal writes s as generation gen's record: a run record, or a lane's
// cursor (InLane).
func (s *State) marshal(b []byte, gen int64, ci commitInfo) []byte {
	by := ci.by
	if by == "" || strings.ContainsAny(by, " \n=") {
		by = "-"
	}
	b = append(b, genMagic...)
	b = kv.AppendInt(b, "gen", gen)
	b = kv.AppendInt(b, "run", int64(s.Run))
	b = kv.Append(b, "table", s.Table)
	if s.InLane {
		tfp := s.TFP
		if tfp == "" || strings.ContainsAny(tfp, " \n") {
			tfp = "-"
		}
		b = kv.AppendInt(b, "lane", int64(s.Lane))
		b = kv.AppendInt(b, "block", s.Block)
		b = kv.AppendInt(b, "offset", s.Offset)
		b = kv.AppendInt(b, "line", s.Lines)
		b = kv.AppendInt(b, "tsize", s.TSize)
		b = kv.AppendUint(b, "tino", s.TIno)
		b = kv.Append(b, "tfp", tfp)
		b = kv.AppendInt(b, "cases", s.Cases)
		b = kv.AppendInt(b, "claimed", s.Claimed)
	} else {
		b = kv.AppendBool(b, "simple", s.Simple)
		b = kv.AppendInt(b, "cases", s.Cases)
		b = kv.AppendInt(b, "maxid", s.MaxID)
		b = kv.AppendInt(b, "total", s.Total)
		if s.Repair != "" && !strings.ContainsAny(s.Repair, " \n") {
			b = kv.Append(b, "repair", s.Repair)
		}
		for _, t := range s.Sets {
			b = kv.Append(b, "set", fmt.Sprintf("%s:%d:%d:%s", t.Dir, t.Lanes, t.Cases, t.Table))
		}
	}
	b = kv.Append(b, "by", by)
	b = kv.AppendInt(b, "first", ci.first)
	b = kv.AppendInt(b, "n", int64(ci.n))
	b = kv.Append(b, "nonce", ci.nonce)
	return append(b, '\n')
}

// errClosed: the generation closes its chain (a repair made a new one).
var errClosed = errors.New("chain closed")

// unmarshal reads a generation's record into s.
// Over 60 lines: one case per field of the record, in one switch.
func (s *State) unmarshal(b []byte) error {
	rest, ok := strings.CutPrefix(string(b), genMagic)
	if !ok || !strings.HasSuffix(rest, "\n") {
		return errors.New("not a generation record")
	}
	seen := 0
	r := kv.NewReader(rest)
	for r.Next() {
		if r.Word() {
			if r.Key() == "closed" {
				return errClosed
			}
			return fmt.Errorf("bad field %q", r.Key())
		}
		switch r.Key() {
		case "gen":
			s.Gen = r.Int()
		case "run":
			s.Run = r.Atoi()
			seen++
		case "table":
			s.Table = r.Value()
			seen++
		case "simple":
			s.Simple = r.Bool()
		case "lane":
			s.InLane = true
			s.Lane = r.Atoi()
		case "block":
			s.Block = r.Int()
		case "offset":
			s.Offset = r.Int()
		case "line":
			s.Lines = r.Int()
		case "tsize":
			s.TSize = r.Int()
		case "tino":
			s.TIno = r.Uint()
		case "tfp":
			if v := r.Value(); v != "-" {
				s.TFP = v
			}
		case "cases":
			s.Cases = r.Int()
		case "total":
			s.Total = r.Int()
		case "maxid":
			s.MaxID = r.Int()
		case "claimed":
			s.Claimed = r.Int()
		case "repair":
			s.Repair = r.Value()
		case "set":
			t, err := parseSet(r.Value())
			s.Sets = append(s.Sets, t)
			if err != nil {
				r.Fail(err)
			}
		}
	}
	if err := r.Err(); err != nil {
		return err
	}
	if seen != 2 || s.Run < 0 {
		return errors.New("missing run or table")
	}
	if s.InLane && (s.Lane < 0 || s.Block < 0 || s.Offset < 0) {
		return errors.New("bad lane cursor")
	}
	return nil
}

// parseSet reads a set= field: DIR:LANES:CASES:TABLE.
func parseSet(v string) (Set, error) {
	f := strings.SplitN(v, ":", 4)
	bad := errors.New("not DIR:LANES:CASES:TABLE")
	if len(f) != 4 || f[0] == "" || strings.Contains(f[0], "/") || f[3] == "" {
		return Set{}, bad
	}
	t := Set{Dir: f[0], Table: f[3]}
	var err1, err2 error
	t.Lanes, err1 = strconv.Atoi(f[1])
	t.Cases, err2 = strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil || t.Lanes < 1 || t.Cases < 0 {
		return Set{}, bad
	}
	return t, nil
}

// Store reads and advances a farm's claim state. It takes no lock: every
// change is a compare-and-swap on a chain of generations (chain.go), so
// readers never wait and a writer that stalls cannot undo anyone's change.
// Its own chain is the main chain (the run record); it claims through the
// chains of the run's lanes (lanes.go). A Store is for one goroutine.
type Store struct {
	Opts
	chainStore // the main chain

	// The sets of the run this store claims in, in order, as the run
	// record it read last names them; last is the one claimed in last.
	setsRun     int
	sets        []*laneSet
	last        *laneSet
	firstLooked time.Time // when the store last looked for a set added --first (Claim)
}

// Opts are who a store is and how it retries; its lanes' stores share them.
type Opts struct {
	Dir   string        // farm directory
	Job   string        // who commits (a job ID or a command), for the record
	Retry time.Duration // transient errors are retried this long; fsretry.Default if 0
	Log   io.Writer     // where retries are reported; os.Stderr if nil
}

// chainStore reads and advances one chain: the main chain, or a lane's.
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
	solo bool        // a lane of a set of one lane (Ahead off)
	tab  *tableCheck // a lane's: the run's table its claims read
}

// contention is what a store's claims cost because others claim too
// (Ahead).
type contention struct {
	own   int64 // the generation this store committed last; -1: none
	ahead int   // batches' worth the next claim should take; 0: 1
	peers int64 // others claiming: generations they committed between its last two commits, or slots it lost
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

// newChainStore is the store of the chain in dir (a lane's; "": the main
// chain), with o's options.
func newChainStore(o *Opts, fsys vfs.FS, misc, dir string) *chainStore {
	s := &chainStore{o: o, fs: fsys, misc: misc, dir: dir, gen: -1, top: -1, con: contention{own: -1}}
	if dir != "" {
		s.tab = &tableCheck{fs: fsys, farm: o.Dir}
	}
	return s
}

// defaultFS is the filesystem of NewStore's stores: the system's, but for
// a benchmark that counts the calls.
var defaultFS vfs.FS = vfs.OS{}

// pause waits before the try after try (0, 1, ...) to read the newest
// generation: 10 ms more each time.
func (s *chainStore) pause(try int) {
	s.fs.Sleep(context.Background(), time.Duration(try+1)*10*time.Millisecond)
}

// Ahead is how many batches' worth of cases the store's next claim should
// take, 1 while its claims cost no more than a commit: a claimer that
// shares the chain with others pays for them — the generations committed
// since its last claim, which it must find and read, and the slots it
// loses — and the more they cost, the more it takes at a time (at most
// MaxAhead), so that the commits of the farm per second fall as claimers
// are added, and so does their cost per case. See CLAIMS.md, "Claims at
// scale".
//
// Off in a set of one lane by default (Ahead is 1): on the cluster rig's
// coherent GlusterFS volume, 4 meta-jobs on 4 nodes claimed 268 and 321
// claims/s with it, 593 and 643 without (2026-11-25, on one chain, as a
// one-lane set is); the model of `make bench-scale` gains from it from 16
// claimers on, which is where a run gets several lanes (lanes.go): there
// it is always on. FARM_CLAIM_AHEAD=1 turns it on for one lane too.
func (s *Store) Ahead() int {
	if L := s.last; L != nil && L.stores[L.home] != nil {
		return L.stores[L.home].ahead()
	}
	return 1
}

// ahead is Ahead of a lane's store.
func (s *chainStore) ahead() int {
	if !aheadOn && s.solo {
		return 1 // on in a set of several lanes, which only runs for many meta-jobs have
	}
	return max(s.con.ahead, 1)
}

// aheadOn turns Ahead on (FARM_CLAIM_AHEAD=1).
var aheadOn = os.Getenv("FARM_CLAIM_AHEAD") == "1"

// MaxAhead caps Ahead.
const MaxAhead = 64

// aheadTarget is the filesystem calls that sharing the chain may add to
// a claim, per batch's worth it takes.
const aheadTarget = 3

// contended updates Ahead after a claim that committed generation gen,
// having lost lost attempts: the calls it cost beyond a commit of its own
// on its own last generation — a gallop of lookups and a read for the
// generations others committed since, and a slot, a wait and a reading
// for each attempt lost — over aheadTarget is the new Ahead; it grows
// at once and shrinks by half a claim.
func (s *chainStore) contended(gen int64, lost int) {
	c := &s.con
	extra := 0
	c.peers = int64(lost) // each slot lost was another's
	if c.own >= 0 && gen-c.own > 1 {
		c.peers = max(c.peers, gen-c.own-1)
		extra += 3 + 2*bits.Len64(uint64(gen-c.own-1))
	}
	extra += 8 * lost
	want := 1 + (extra+aheadTarget-1)/aheadTarget
	c.ahead = min(MaxAhead, max(want, max(c.ahead, 1)/2))
	c.own = gen
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

// close releases the chain store's files.
func (s *chainStore) close() {
	if s.tab != nil {
		s.tab.drop()
	}
	s.setChain(nil)
}

// setChain makes ch the store's chain, closing the one it replaces.
func (s *chainStore) setChain(ch *chain) {
	if s.ch != nil && s.ch != ch {
		s.reportBurials()
		s.ch.close()
	}
	if ch != nil {
		ch.log = s.log()
	}
	s.ch = ch
}

// reportBurials says how many generations could not be buried, when more
// than the one already said.
func (s *chainStore) reportBurials() {
	if c := s.ch; c != nil && c.buryFails > 1 {
		fmt.Fprintf(s.log(), "farm: %d generations of the claim state could not be buried (the first: %v)\n", c.buryFails, c.buryErr)
		c.buryFails = 0
	}
}

func (s *chainStore) log() io.Writer {
	if s.o.Log != nil {
		return s.o.Log
	}
	return os.Stderr
}

func (s *chainStore) open() error {
	if s.ch != nil {
		return nil
	}
	if s.dir != "" {
		s.setChain(newChain(s.fs, s.dir))
		s.gen, s.top = -1, -1
		return nil
	}
	ch, err := openChain(s.fs, s.misc)
	if err != nil {
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
		if err == errInconsistent || os.IsNotExist(err) {
			// A mark seen, then not seen, or the chain's directory
			// not found: the directory removed (its descriptors
			// still open answer ENOENT to every lookup) — damage,
			// said at once, naming it — or a cache's passing answer,
			// looked up again afresh.
			s.ch.forget()
			if gone(s.fs, s.ch.dir) {
				return &DamageError{Path: s.ch.dir, Why: "the chain directory is gone"}
			}
			if tries < 20 {
				s.pause(tries)
				continue
			}
			return fsretry.Transient(err)
		}
		if err != nil {
			return err
		}
		if n < 0 {
			err := s.ch.noGeneration()
			if err == nil && s.dir != "" {
				// A lane has its generation 0 before anyone can know
				// it: a mark not found is a network filesystem's
				// passing answer (or damage, which stays).
				err = fsretry.Transient(fmt.Errorf("%s: no generation of the lane found", s.ch.dir))
			}
			if err == nil {
				return ErrNoState // a chain with no generation yet
			}
			if fsretry.IsTransient(err) && tries < 20 {
				s.pause(tries)
				continue
			}
			return err
		}
		if err := s.load(n); err == nil {
			return nil
		} else if errors.Is(err, errClosed) && s.dir != "" {
			return err // a lane closed: its run is over
		} else if errors.Is(err, errClosed) {
			closed := s.ch.dir
			s.setChain(nil)
			if err := s.open(); err != nil {
				return err
			}
			if s.ch.dir == closed {
				// MISC/chain still names the closed chain: a repair
				// is replacing it (repair.go), or died doing so.
				if tries >= 20 {
					return &DamageError{Path: closed, Why: "closed by a 'farm repair' that did not finish"}
				}
				s.pause(tries)
			}
		} else if tries >= 20 && os.IsNotExist(err) && !mutated("one-look-is-gone") {
			return s.ch.checkGone(err) // damage if the chain is gone, else a passing ENOENT
		} else if tries >= 20 || !(errors.Is(err, errBuried) || os.IsNotExist(err) || err == errInconsistent) {
			return err
		} else {
			// Buried while we looked (we were far behind), or a cached
			// name: look again from the hint.
			s.gen, s.top = -1, -1
			s.pause(tries)
		}
	}
}

// load reads generation n into s.cur.
func (s *chainStore) load(n int64) error {
	b, err := s.ch.read(n)
	if err != nil {
		return err
	}
	var st State
	if err := st.unmarshal(b); err != nil {
		if err == errClosed {
			return err
		}
		return &DamageError{Path: s.ch.genPath(n), Why: err.Error()}
	}
	st.Gen, st.Chain = n, filepath.Base(s.ch.dir)
	// The chain's top is from the reading that found n (latest), so the
	// marks between n and it are voids: the next commit goes past them.
	s.gen, s.top, s.cur = n, max(n, s.ch.top), st
	return nil
}

// Last returns the state the store read or committed last (by Read,
// Update or Claim), with no I/O: after a Claim, the state that holds its
// cases (Table names their table).
func (s *Store) Last() State { return s.cur }

// ClaimedInRun is about how many cases of the run the store claims in
// were claimed as of its last claim, with no I/O: the cases of the sets
// before the one it claimed in last, and in that one the count of the lane
// it claimed in last times the lanes (they go through the table at about
// one pace). The runtime-aware exit (metajob) tells from it when
// dt_cutoff is due.
func (s *Store) ClaimedInRun() int64 {
	var n int64
	for _, L := range s.sets {
		if L == s.last {
			if ls := L.stores[L.home]; ls != nil {
				n += ls.cur.Claimed * int64(L.x.lanes)
			}
			break
		}
		n += L.set.Cases
	}
	return n
}

// Read returns the current state (the run record). It takes no lock and
// never waits for another process. Its Claimed is that of every lane of
// the run's sets together.
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

// update is the claim protocol's commit, behind Update, Claim and Repair.
// It runs fn on a copy of the newest state, the base, and commits the
// result as the base's generation +1: a compare-and-swap on the chain
// (chain.commit). If another process committed that generation first, the
// commit is lost: the newest generation becomes the base and fn runs
// again. info says what the commit claimed, for the record. Transient
// filesystem errors are retried for s.Retry; after a damage error the
// chain is looked up once more, in case a repair has started a new one.
func (s *chainStore) update(ctx context.Context, fn func(*State) error, info func(*State) commitInfo) (_ State, err error) {
	defer func() {
		if err != nil && !mutated("failed-read-old-base") {
			s.gen, s.top = -1, -1 // read afresh next time, whatever was half read
		}
	}()
	r := fsretry.Retrier{Limit: s.o.Retry, Log: s.log(), Clock: s.fs}
	// The base must be read (again): none is known, or others committed
	// between this store's last two claims — then they likely did since
	// the last one too, and a commit on it would only lose.
	stale := s.ch == nil || s.gen < 0 || s.con.ahead > 1 || s.con.peers > 0
	reopened := false   // the chain was looked up again after damage
	lost := 0           // attempts lost to other processes
	var tried time.Time // this attempt's start: its reading of the base, then its commit
	for {
		if err := ctx.Err(); err != nil {
			return State{}, err
		}
		if tried.IsZero() || stale {
			tried = s.fs.Now()
		}
		read := stale // the base is read in this call
		if stale {
			if err := s.readBase(); err != nil {
				if r.Again(ctx, err) {
					continue
				}
				return State{}, err
			}
			stale = false
		}
		st := s.cur
		if err := fn(&st); err != nil {
			if err == errNoCommit && !read {
				// Decided on the generation this store made or read
				// last: others may have moved on since ('farm add'
				// queued cases, a new run started). Once more, on
				// the newest.
				stale = true
				continue
			}
			if err == errNoCommit {
				return s.cur, nil
			}
			// A table that cannot be read for now (an I/O error, a
			// server out of reach): read everything afresh, later.
			if r.Again(ctx, err) {
				s.dropFiles()
				stale = true
				continue
			}
			return State{}, err
		}
		if s.ch == nil {
			first, err := s.startChain()
			if err != nil {
				if r.Again(ctx, err) {
					continue
				}
				return State{}, err
			}
			if !first {
				// Another process may have made the chain, and its first
				// generation, first.
				stale = true
				continue
			}
		}
		next := max(s.gen, s.top) + 1
		if mutated("failed-read-old-base") {
			next = s.ch.nextSlot(s.gen)
		}
		won, err := s.commitAs(next, &st, info)
		if mutated("undecided-recommitted") && errors.As(err, new(*UndecidedError)) {
			s.ch.dropPending()
			stale = true
			continue
		}
		// A commit whose outcome the filesystem cannot tell yet is
		// settled, not made again: its generation may be ours.
		for err != nil && errors.As(err, new(*UndecidedError)) && r.Again(ctx, err) {
			won, err = s.ch.settle()
		}
		if err != nil {
			var de *DamageError
			if errors.As(err, &de) {
				// A repair may have started a new chain: look again once.
				if !reopened {
					reopened, stale = true, true
					if s.chainMoved() {
						continue
					}
				}
				return State{}, err
			}
			// Read afresh before trying again: the slot that failed
			// may be decided by now (a name another client made,
			// which answers EIO here while GlusterFS heals it), and
			// the next commit then goes past it.
			if r.Again(ctx, err) {
				stale = true
				continue
			}
			return State{}, err
		}
		if won {
			r.OK()
			st.Gen, st.Chain = next, filepath.Base(s.ch.dir)
			s.gen, s.top, s.cur = next, next, st
			s.contended(next, lost)
			return st, nil
		}
		lost++
		// The others who lost this slot learn of its mark when this
		// process does: a pause of random length, doubling with the
		// attempts lost (binary exponential backoff), keeps them from
		// all looking for it and then trying the next slot at once.
		unit := s.fs.Now().Sub(tried)
		backoff(ctx, s.fs, lost, unit)
		// Lost the race: another process took the slot, or voided ours.
		// Once the slot is marked, the newest generation is the new
		// base. A meta-job that ran its batch while others committed is
		// often many generations behind: looking for the newest (a
		// gallop of name lookups from the slot it lost) costs a few
		// lookups, where following the chain one lost commit at a time
		// would cost a create and a read per generation.
		if _, err := s.ch.awaitPaced(ctx, next, unit); err != nil {
			if ctx.Err() != nil {
				return State{}, ctx.Err()
			}
			if r.Again(ctx, err) {
				stale = true
				continue
			}
			return State{}, err
		}
		r.OK()
		tried = s.fs.Now()
		if err := s.loadNewest(next); err != nil {
			stale = true
		}
	}
}

// backoff sleeps a random time below unit·2^(lost-1), or until ctx is
// done: binary exponential backoff, at most 2 s. unit is what the attempt
// that lost took, from its reading of the base to the lost slot (at
// least 1 ms): the window in which another's commit makes it lose, which
// grows with the server's queue — so that the claimers that lost spread
// their next attempts over as many windows as they are (make bench-scale:
// 256 claimers' first claims, 87 calls each with a unit of 1 ms, 73
// with this one).
func backoff(ctx context.Context, fsys vfs.FS, lost int, unit time.Duration) {
	fsys.Sleep(ctx, time.Duration(fsys.Rand()%uint64(backoffLimit(lost, unit))))
}

// backoffLimit is the bound of backoff's pause: unit·2^(lost-1), unit at
// least 1 ms, at most 2 s (computed so that it cannot overflow, whatever an
// attempt stopped for hours took).
func backoffLimit(lost int, unit time.Duration) time.Duration {
	const most = 2 * time.Second
	unit = min(max(unit, time.Millisecond), most)
	return min(unit<<min(max(lost-1, 0), 20), most)
}

// errNoCommit, returned by update's fn, ends the update with no commit.
var errNoCommit = errors.New("nothing to commit")

// dropFiles closes the table and the directories the store keeps open, after
// a transient error: a stale handle (ESTALE) is looked up afresh.
func (s *chainStore) dropFiles() {
	if s.tab != nil {
		s.tab.drop()
	}
	if s.ch != nil {
		s.ch.forget()
	}
}

// readBase reads the newest generation into s.cur; for a farm with no
// state yet, s.cur becomes a zero State of no generation (-1).
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

// startChain makes the farm's chain, for a store that has none, and
// reports whether it is still without a generation: false if another
// process made the chain and its first generation first, or if that
// cannot be told now.
func (s *chainStore) startChain() (bool, error) {
	ch, err := createChain(s.fs, s.misc)
	if err != nil {
		return false, err
	}
	s.setChain(ch)
	n, err := ch.latest(-1)
	return err == nil && n < 0, nil
}

// commitAs commits st as generation next of the chain, with what info
// says of it, and reports whether it won the generation.
func (s *chainStore) commitAs(next int64, st *State, info func(*State) commitInfo) (bool, error) {
	ci := info(st)
	ci.nonce = newNonce(s.fs)
	if ci.by == "" {
		ci.by = s.o.Job
	}
	s.wbuf = st.marshal(s.wbuf[:0], next, ci)
	return s.ch.commit(next, s.wbuf, ci.nonce)
}

// chainMoved drops the store's chain and reports whether MISC/chain now
// names another one: a repair started a new chain.
func (s *chainStore) chainMoved() bool {
	if s.dir != "" {
		return false // a lane is where it is
	}
	old := s.ch.dir
	s.setChain(nil)
	ch, err := openChain(s.fs, s.misc)
	if err != nil {
		return false
	}
	ch.close()
	return ch.dir != old
}

// loadNewest reads the newest generation after the one lost, into s.cur.
// If the chain is closed (a repair made a new one), it drops it.
func (s *chainStore) loadNewest(lost int64) error {
	n, err := s.ch.latest(lost)
	if err == nil {
		err = s.load(n)
	}
	if errors.Is(err, errClosed) {
		s.setChain(nil)
	}
	return err
}

// Moved reports whether the claim state may have changed since the store
// last read it — 'farm add' queued cases, a claim, a new run: whether the
// main chain has a mark after the newest generation the store knows. It
// costs one lookup (WAIT_FOR_CASES polls with it). A store that knows no
// generation says true.
func (s *chainStore) Moved() bool {
	if s.ch == nil || s.gen < 0 || s.dir != "" {
		return true
	}
	m, err := s.ch.marker(s.ch.nextSlot(s.gen))
	return err != nil || m != unmarked
}

// Claim hands out up to most consecutive unclaimed cases of run, in one
// commit on one lane, or none when the run has none left (or a newer run
// has started). The cases come from the run's first set (in the run
// record's order) that the store does not know to be used up. A claim
// that finds nothing to hand out commits nothing: the end of a run costs
// each meta-job a reading, not a generation won in turn. most below 1
// (FirstBatch) lets the store size a meta-job's first claim.
func (s *Store) Claim(ctx context.Context, run, most int) ([]tablefmt.Case, error) {
	// A set 'farm add --first' put ahead of the others: looked for at
	// most once a firstLook (one lookup of the main chain).
	look := false
	if now := s.fs.Now(); now.Sub(s.firstLooked) >= firstLook {
		s.firstLooked, look = now, true
	}
	if err := s.findSets(ctx, run, look && s.setsRun == run && s.Moved()); err != nil {
		return nil, err
	}
	for again := false; ; again = true {
		for _, L := range s.sets {
			cases, err := s.claimLanes(ctx, L, run, most)
			if err != nil || len(cases) > 0 {
				return cases, err
			}
		}
		// Every set it knows is used up: 'farm add' may have given the
		// run another since the store read the run record (one lookup).
		if again || len(s.sets) == 0 || !s.Moved() {
			return nil, nil
		}
		if err := s.findSets(ctx, run, true); err != nil {
			return nil, err
		}
	}
}

// firstLook is how often a claimer looks at the main chain for a set
// 'farm add --first' put ahead of the others (one lookup).
const firstLook = time.Second

// claimInfo says what a claim commits, for the record: the cases in
// *cases when the commit is made.
func claimInfo(cases *[]tablefmt.Case) func(*State) commitInfo {
	return func(*State) commitInfo {
		ci := commitInfo{n: len(*cases)}
		if len(*cases) > 0 {
			ci.first = (*cases)[0].ID
		}
		return ci
	}
}

// tableCheck is a run's table as a lane's claims read it: open, and
// checked to be the file the run started with.
type tableCheck struct {
	fs      vfs.FS
	farm    string // the farm directory
	table   *vfs.File
	tname   string
	rd      tablefmt.Reader // table's lines
	dirFD   *vfs.File       // the farm directory, for stat
	fpIno   uint64          // an inode number of fpTable that its fingerprint vouched for
	fpTable string
	checked tableID // the table check found unchanged in this claim; zero: none yet
}

// drop closes the table and the directory the check keeps open, after a
// transient error (a stale handle, ESTALE, is looked up afresh) or for
// good.
func (s *tableCheck) drop() {
	s.checked = tableID{}
	if s.table != nil {
		s.table.Close()
		s.table = nil
	}
	s.rd.Reset(nil, "")
	if s.dirFD != nil {
		s.dirFD.Close()
		s.dirFD = nil
	}
}

// open makes s.table the open table of st (again, if fresh).
func (s *tableCheck) open(table string, fresh bool) error {
	if s.table != nil && s.tname == table && !fresh {
		return nil
	}
	if s.table != nil {
		s.table.Close()
		s.table = nil
	}
	path := filepath.Join(s.farm, table)
	f, err := vfs.Open(s.fs, unix.AT_FDCWD, path, unix.O_RDONLY, 0)
	if err != nil {
		return tableErr(s.fs, "open", path, err)
	}
	s.table, s.tname = f, table
	s.rd.Reset(faultyTable{f}, table)
	return nil
}

// faultyTable is a run's table as a claim reads it, through the fault
// plan of the tests (injected "table.read").
type faultyTable struct{ f *vfs.File }

func (t faultyTable) ReadAt(b []byte, off int64) (int, error) {
	if err := injected("table.read"); err != nil {
		return 0, &os.PathError{Op: "read", Path: t.f.Name, Err: err}
	}
	return t.f.ReadAt(b, off)
}

// TableChangedError: the run's table is not the file it was when the run
// started (its size or its inode differ), so the byte offsets of the claim
// state no longer point at its lines: nothing more is claimed from it.
type TableChangedError struct {
	Table         string
	Run           int
	Size, WasSize int64
	Ino, WasIno   uint64
	MidLine       int64 // if not 0: the claim's byte offset, found not to start a line
}

func (e *TableChangedError) Error() string {
	what := fmt.Sprintf("it had %d bytes and has %d now", e.WasSize, e.Size)
	switch {
	case e.MidLine != 0:
		what = fmt.Sprintf("it was edited: byte %d, where the next case starts, is not at the start of a line", e.MidLine)
	case e.Size == e.WasSize:
		what = "it was replaced by another file"
	}
	return fmt.Sprintf("%s changed during run %d (%s): no more cases are claimed from it; put it back as it was, or let the run end (or stop it with 'farm kill') and run 'farm resubmit', which runs the cases not yet succeeded from the table as it is now", e.Table, e.Run, what)
}

// tableRecheck is how long checkTable waits before it looks at a table
// that seems changed once more: longer than a network filesystem client
// keeps a file's attributes (FUSE and GlusterFS: about a second).
var tableRecheck = 1500 * time.Millisecond

// checkTable opens st's table if needed and checks that the file of its
// name is the one the run started with: the same size, and the same inode
// or, where inode numbers differ between hosts (some Lustre, NFS and FUSE
// mounts), the same fingerprint. (A store that has the table open reads
// what it had, but the other meta-jobs would not: all stop alike.) A
// difference is looked at once more, past the attribute caches, on a
// fresh descriptor, before it is believed.
func (s *tableCheck) check(st *State) error {
	if err := s.open(st.Table, false); err != nil {
		return err
	}
	if st.TSize <= 0 {
		return nil // not recorded (a state 'farm repair' rebuilt)
	}
	// Once a claim: an attempt lost to another claimer checks the same
	// table again for nothing (a lookup at the server each; 21 in one
	// contended first claim on the rig, BENCHMARKS.md). A table changed
	// between the check and the commit is found by the next claim, as it
	// would be between a check and a commit of the same attempt.
	id := tableID{st.Table, st.TSize, st.TIno, st.TFP}
	if s.checked == id {
		return nil
	}
	var err error
	for try := 0; try < 2; try++ {
		var size int64
		var ino uint64
		var serr error
		if try == 0 {
			size, ino, serr = s.stat(st.Table)
		} else {
			s.fs.Sleep(context.Background(), tableRecheck)
			if serr = s.open(st.Table, true); serr == nil {
				size, ino, serr = fileID(s.table)
			}
		}
		if serr != nil {
			return serr
		}
		if size == st.TSize && (st.TIno == 0 || ino == st.TIno || (ino == s.fpIno && st.Table == s.fpTable)) {
			s.checked = id
			return nil
		}
		if size == st.TSize && st.TFP != "" {
			// Another inode number: the same file seen from another
			// host, or another file of the same size.
			if ferr := s.open(st.Table, true); ferr != nil {
				return ferr
			}
			if fp, ferr := tablefmt.Fingerprint(s.table, size); ferr == nil && fp == st.TFP {
				s.fpIno, s.fpTable = ino, st.Table
				s.checked = id
				return nil
			}
		}
		err = &TableChangedError{Table: st.Table, Run: st.Run, Size: size, WasSize: st.TSize, Ino: ino, WasIno: st.TIno}
	}
	return err
}

// tableID is a run's table as its claim state records it.
type tableID struct {
	name string
	size int64
	ino  uint64
	fp   string
}

// stat returns the size and inode of the file table names, looked up
// from the farm directory's open descriptor (one lookup at the server for
// "table.dat", not one per component of the farm's path).
func (s *tableCheck) stat(table string) (int64, uint64, error) {
	if s.dirFD == nil {
		fd, err := openDir(s.fs, s.farm)
		if err != nil {
			return 0, 0, tableErr(s.fs, "open", s.farm, err)
		}
		s.dirFD = fd
	}
	var st unix.Stat_t
	err := injected("table.stat")
	if err == nil {
		err = s.fs.Fstatat(s.dirFD.Fd, table, &st, 0)
	}
	if err != nil {
		return 0, 0, tableErr(s.fs, "stat", filepath.Join(s.farm, table), err)
	}
	return st.Size, st.Ino, nil
}

// tableErr is the error of the call op on a run's table at path: an ENOENT
// is a passing one (GlusterFS's, while a brick is down: a run's table is
// never removed while the run claims), retried, unless the table is
// certainly gone.
func tableErr(fsys vfs.FS, op, path string, err error) error {
	if mutated("table-enoent-ends-claims") {
		return &os.PathError{Op: op, Path: path, Err: err}
	}
	return passing(fsys, path, &os.PathError{Op: op, Path: path, Err: err})
}

// goneOr is, for err, an error of a call on path: whether path is
// certainly gone (an ENOENT that gone confirms), and else err, an ENOENT
// marked transient (passing). One look decides both: two could disagree.
func goneOr(fsys vfs.FS, path string, err error) (bool, error) {
	if !errors.Is(err, unix.ENOENT) || fsretry.IsTransient(err) {
		return false, err
	}
	if testHook != nil {
		testHook("gone", path)
	}
	if gone(fsys, path) {
		return true, nil
	}
	if mutated("gone-looked-twice") && gone(fsys, path) {
		return false, err // a second look, which said gone
	}
	return false, fsretry.Transient(err)
}

// passing marks err, an error of a call on path, as transient if it is an
// ENOENT and path is not certainly gone: a network filesystem's passing
// answer (GlusterFS's, while a brick is down), for a name that exists.
func passing(fsys vfs.FS, path string, err error) error {
	if isGone, perr := goneOr(fsys, path, err); !isGone {
		return perr
	}
	return err
}

// fileID returns the size and inode of the open file f.
func fileID(f *vfs.File) (int64, uint64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, 0, &os.PathError{Op: "fstat", Path: f.Name, Err: err}
	}
	return st.Size, st.Ino, nil
}

// TableID returns what a run records of its table at path, so that a
// claim can tell whether it changed since: its size, its inode number and
// its fingerprint.
func TableID(path string) (size int64, ino uint64, fp string, err error) {
	return tableIDOn(vfs.OS{}, path)
}

// tableIDOn is TableID on fsys.
func tableIDOn(fsys vfs.FS, path string) (size int64, ino uint64, fp string, err error) {
	f, err := vfs.Open(fsys, unix.AT_FDCWD, path, unix.O_RDONLY, 0)
	if err != nil {
		return 0, 0, "", &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer f.Close()
	if size, ino, err = fileID(f); err != nil {
		return 0, 0, "", err
	}
	fp, err = tablefmt.Fingerprint(f, size)
	return size, ino, fp, err
}
