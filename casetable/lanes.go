package casetable

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/farm-hpc/farm/fsretry"
	"github.com/farm-hpc/farm/internal/kv"
	"github.com/farm-hpc/farm/tablefmt"
	"github.com/farm-hpc/farm/vfs"
	"golang.org/x/sys/unix"
)

// Lanes: the chains a run's claims are made in, each a cursor through its blocks (CLAIMS.md, "Lanes").

const (
	MaxLanes      = 64               // caps the lanes of a run
	lanesMagic    = "farm-lanes v1 " // starts a lane index
	jobsPerLane   = 32               // meta-jobs that share a lane by default
	minLaneJobs   = 16               // fewer get one lane: cheaper below (BENCHMARKS.md)
	maxFirstShare = 16               // caps a first claim in a lane: durations unknown yet
)

// LanesFor is how many lanes a run started for jobs meta-jobs gets: 1 under
// 16, 2 up to 95, then one per 32, at most MaxLanes; FARM_CLAIM_LANES overrides it.
func LanesFor(jobs int) int {
	if v, err := strconv.Atoi(os.Getenv("FARM_CLAIM_LANES")); err == nil && v >= 1 {
		return min(v, MaxLanes)
	}
	if jobs < minLaneJobs {
		return 1
	}
	return min(max(jobs/jobsPerLane, 2), MaxLanes)
}

// laneIndex is a run's block index.
type laneIndex struct {
	lanes   int     // the set's lanes, its sweep lane among them (ticket.go)
	block   int64   // cases per block
	cases   int64   // cases of the run's table
	starts  []int64 // per block, the byte offset of its first case
	jobs    int     // the meta-jobs the run was started for; 0: not known
	lines   []int64 // per block, the lines of the table before it
	nblocks int64   // the header's count: known to a header-only reading

	// Start tickets (ticket.go): the first tickets cases, one a ticket, in
	// the first tickets/block blocks; 0: none. The table as the set was
	// made over it, for a ticket's claim to check.
	tickets int64
	tsize   int64
	tino    uint64
	tfp     string
}

// tblocks is how many blocks the tickets take, first in the table.
func (x *laneIndex) tblocks() int64 { return x.tickets / x.block }

// stride is how many lanes share the blocks after the tickets': all but the sweep lane.
func (x *laneIndex) stride() int {
	if x.tickets > 0 {
		return x.lanes - 1
	}
	return x.lanes
}

// sweep reports whether lane l is the set's sweep lane: its last, if it has tickets.
func (x *laneIndex) sweep(l int) bool { return x.tickets > 0 && l == x.lanes-1 }

// span is lane l's blocks: from first, every step, before limit. The sweep
// lane's are the tickets' blocks, in order; lane ℓ of the others owns
// the blocks after them ℓ, ℓ+S, ℓ+2S, ….
func (x *laneIndex) span(l int) (first, step, limit int64) {
	if x.sweep(l) {
		return 0, 1, x.tblocks()
	}
	return x.tblocks() + int64(l), int64(x.stride()), x.nblocks
}

// laneCases is how many cases lane l's blocks hold.
func (x *laneIndex) laneCases(l int) int64 {
	var n int64
	first, step, limit := x.span(l)
	for b := first; b < limit; b += step {
		n += min(x.block, x.cases-b*x.block)
	}
	return n
}

// FirstBatch, as Claim's most, lets the store size a meta-job's first
// claim of a run: one case in a set of one lane, else firstShare.
const FirstBatch = 0

// firstShare is the first claim's size in lane l: its cases over twice
// the meta-jobs that share it (32 if not known), 1 to maxFirstShare.
func (x *laneIndex) firstShare(l int) int {
	if x.lanes == 1 {
		return 1 // a run for fewer than 16 meta-jobs: their cases may be long
	}
	per := int64(jobsPerLane)
	if x.jobs > 0 {
		per = int64((x.jobs + x.stride() - 1) / x.stride()) // at least 1
	}
	return int(min(max(x.laneCases(l)/(2*per), 1), maxFirstShare))
}

// blockSize is the cases per block: 16, more past 65,536 blocks.
func blockSize(cases int64) int64 {
	return max(16, (cases+65535)/65536)
}

// marshal is the index as its file holds it.
func (x *laneIndex) marshal() []byte {
	h := kv.AppendInt([]byte(lanesMagic), "lanes", int64(x.lanes))
	h = kv.AppendInt(h, "block", x.block)
	h = kv.AppendInt(h, "blocks", x.nblocks)
	h = kv.AppendInt(h, "cases", x.cases)
	if x.jobs > 0 {
		h = kv.AppendInt(h, "jobs", int64(x.jobs))
	}
	if x.tickets > 0 {
		h = kv.AppendInt(h, "tickets", x.tickets)
		h = kv.AppendInt(h, "tsize", x.tsize)
		h = kv.AppendUint(h, "tino", x.tino)
		h = kv.Append(h, "tfp", recordValue(x.tfp, " \n"))
	}
	h = append(h, '\n')
	for i := range x.starts {
		h = fmt.Appendf(h, "%d %d\n", x.starts[i], x.lines[i])
	}
	return h
}

// parseIndex reads a lane index, or its header.
func parseIndex(b []byte, headOnly bool) (*laneIndex, error) {
	head, rest, ok := bytes.Cut(b, []byte("\n"))
	h, ok2 := strings.CutPrefix(string(head), lanesMagic)
	if !ok || !ok2 {
		return nil, errors.New("not a lane index")
	}
	x := &laneIndex{}
	if err := x.parseHead(h); err != nil {
		return nil, err
	}
	if x.lanes < 1 || x.block < 1 || x.nblocks < 0 || x.cases < 0 ||
		x.nblocks != (x.cases+x.block-1)/x.block || int64(x.stride()) > max(x.nblocks-x.tblocks(), 1) ||
		x.tickets < 0 || x.tickets%x.block != 0 || x.tickets > 0 && (x.lanes < 2 || x.tblocks() >= x.nblocks) {
		return nil, fmt.Errorf("bad header %q", head)
	}
	if headOnly {
		return x, nil
	}
	// The block lines, in order: overlapping blocks would hand a case out
	// twice (one past the table is damage a claim finds). A block line takes
	// 4 bytes at least: a damaged header's count allocates no more.
	n := min(x.nblocks, int64(len(rest)/4)+1)
	x.starts = make([]int64, 0, n)
	x.lines = make([]int64, 0, n)
	for len(rest) > 0 {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte("\n"))
		a, c, ok := bytes.Cut(line, []byte(" "))
		o, err1 := strconv.ParseInt(string(a), 10, 64)
		l, err2 := strconv.ParseInt(string(c), 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("bad block line %q", line)
		}
		k := len(x.starts)
		if k > 0 && (o <= x.starts[k-1] || l <= x.lines[k-1]) || o < 0 || l < 0 {
			return nil, fmt.Errorf("block %d at byte %d, line %d: out of order", k, o, l)
		}
		x.starts = append(x.starts, o)
		x.lines = append(x.lines, l)
	}
	if int64(len(x.starts)) != x.nblocks {
		return nil, fmt.Errorf("%d blocks, the header says %d", len(x.starts), x.nblocks)
	}
	return x, nil
}

// parseHead reads a lane index's header fields (after its magic) into x.
func (x *laneIndex) parseHead(h string) error {
	r := kv.NewReader(h)
	for r.Next() {
		switch r.Key() {
		case "lanes":
			x.lanes = r.Atoi()
		case "block":
			x.block = r.Int()
		case "blocks":
			x.nblocks = r.Int()
		case "cases":
			x.cases = r.Int()
		case "jobs":
			x.jobs = max(r.Atoi(), 0)
		case "tickets":
			x.tickets = r.Int()
		case "tsize":
			x.tsize = r.Int()
		case "tino":
			x.tino = r.Uint()
		case "tfp":
			if v := r.Value(); v != "-" {
				x.tfp = v
			}
		}
	}
	return r.Err()
}

// indexFor is the index of a set of at most lanes lanes over t's table (cases
// cases): one block if one lane, else blocks of blockSize, tickets for jobs.
func indexFor(fsys vfs.FS, dir string, t State, cases int64, lanes, jobs int) (*laneIndex, error) {
	x := &laneIndex{lanes: 1, block: max(cases, 1), cases: cases}
	if cases > 0 {
		x.starts, x.lines, x.nblocks = []int64{0}, []int64{0}, 1
	}
	if path := filepath.Join(dir, t.Table); lanes > 1 && t.TSize > 0 { // blocks of blockSize
		f, err := vfs.Open(fsys, unix.AT_FDCWD, path, unix.O_RDONLY, 0)
		var b tablefmt.Blocks
		if err != nil {
			err = &os.PathError{Op: "open", Path: path, Err: err}
		} else {
			b, err = tablefmt.IndexBlocks(f, path, t.TSize, blockSize)
			f.Close()
		}
		if err != nil {
			return nil, passing(fsys, path, err)
		}
		nb := int64(len(b.Starts))
		tb := ticketBlocks(jobs, b.Size, nb)
		x = &laneIndex{lanes: int(max(min(int64(lanes), nb-tb), 1)), block: b.Size, cases: b.Cases,
			starts: b.Starts, lines: b.Lines, nblocks: nb}
		if tb > 0 {
			x.lanes++ // the sweep lane
			x.tickets, x.tsize, x.tino, x.tfp = tb*b.Size, t.TSize, t.TIno, t.TFP
		}
	}
	return x, nil
}

// makeSet makes in misc a set of at most lanes lanes for run over t's table (cases
// cases), for the caller to commit; jobs (0: unknown) sizes first claims.
func makeSet(fsys vfs.FS, dir, misc string, run int, t State, cases int64, lanes, jobs int) (Set, error) {
	x, err := indexFor(fsys, dir, t, cases, lanes, jobs)
	if err != nil {
		return Set{}, err
	}
	x.jobs = max(jobs, 0)
	name := fmt.Sprintf("lanes.%d.%s", run, newNonce(fsys))
	ldir := filepath.Join(misc, name)
	if err := mkdirNew(fsys, ldir); err != nil {
		return Set{}, passing(fsys, misc, err)
	}
	fail := func(err error) (Set, error) {
		vfs.RemoveAll(fsys, ldir) // nobody knows it yet
		return Set{}, passing(fsys, misc, err)
	}
	if err := vfs.WriteAtomic(fsys, filepath.Join(ldir, "index"), 0o644, x.marshal()); err != nil {
		return fail(err)
	}
	for l := 0; l < x.lanes; l++ {
		first, _, _ := x.span(l)
		ls := State{Run: run, Table: t.Table, TSize: t.TSize, TIno: t.TIno, TFP: t.TFP,
			Cases: x.laneCases(l), InLane: true, Lane: l, Block: first}
		if first < x.nblocks {
			ls.Offset, ls.Lines = x.starts[first], x.lines[first]
		}
		c, err := makeChain(fsys, filepath.Join(ldir, strconv.Itoa(l)), func(nonce string) []byte {
			return ls.marshal(nil, 0, commitInfo{by: "launch", nonce: nonce})
		})
		c.close()
		if err != nil {
			return fail(err)
		}
	}
	if x.tickets > 0 {
		if err := mkdirNew(fsys, filepath.Join(ldir, ticketDir(x.tickets))); err != nil {
			return fail(err)
		}
	}
	return Set{Dir: name, Lanes: x.lanes, Cases: cases, Table: t.Table}, nil
}

// removeSets removes sets made for a run record's commit that lost: nobody knows them.
func removeSets(fsys vfs.FS, misc string, sets []Set) {
	for _, t := range sets {
		if t.Dir != "" && !strings.Contains(t.Dir, "/") {
			vfs.RemoveAll(fsys, filepath.Join(misc, t.Dir))
		}
	}
}

// closeSets closes every lane of the run st's sets: nobody claims in them after.
func (s *Store) closeSets(ctx context.Context, st State) error {
	r := fsretry.Retrier{Limit: s.Retry, Log: s.log(), Clock: s.fs}
	for _, t := range st.Sets {
		if err := s.closeTickets(ctx, &r, st.Run, t); err != nil {
			return fmt.Errorf("closing the start tickets of run %d's set %s: %w", st.Run, t.Dir, err)
		}
		for l := 0; l < t.Lanes; l++ {
			dir := filepath.Join(s.misc, t.Dir, strconv.Itoa(l))
			if err := r.Do(ctx, func() error {
				_, err := closeChain(ctx, &r, s.fs, dir)
				return err
			}); err != nil {
				return fmt.Errorf("closing lane %d of run %d's set %s: %w", l, st.Run, t.Dir, err)
			}
		}
	}
	return nil
}

// closeAllLanes closes MISC's lanes of run upTo or before (all if upTo < 1): a repair may not know the sets.
func (s *Store) closeAllLanes(ctx context.Context, r *fsretry.Retrier, upTo int) error {
	_, err := s.closeIn(ctx, r, s.misc, func(name string) bool {
		run, ok := strings.CutPrefix(name, "lanes.")
		run, _, _ = strings.Cut(run, ".")
		n, err := strconv.Atoi(run)
		return ok && (upTo < 1 || err != nil || n <= upTo) // not a later run's, started since the reading
	}, func(name string) bool {
		_, err := strconv.Atoi(name)
		_, tickets := ticketDirOf(name)
		return err == nil || tickets
	})
	return err
}

// newLaneStore is the store of the lane whose chain is in dir.
func newLaneStore(o *Opts, fsys vfs.FS, misc, dir string) *chainStore {
	return &chainStore{o: o, fs: fsys, misc: misc, dir: dir, gen: -1, top: -1, con: contention{own: -1},
		tab: &tableCheck{fs: fsys, farm: o.Dir}}
}

// laneSet is what a claiming store knows of a set of its run's lanes.
type laneSet struct {
	set       Set
	dir       string
	x         *laneIndex
	stores    []*chainStore // per lane, opened when first claimed in
	exhausted []bool        // lanes with nothing left to claim in this run (for good)
	home      int           // the lane claimed in last
	end       bool          // every lane is exhausted
	damage    *DamageError  // a lane found damaged, passed (Store.claimLanes)

	ticketTried bool        // its start ticket was tried (ticket.go)
	sweepTried  bool        // it tried to be the set's early sweeper (sweepEarly)
	tab         *tableCheck // the ticket's table check
}

// close releases the lanes' stores.
func (L *laneSet) close() {
	for l := range L.stores {
		L.stores[l].close()
		L.stores[l] = nil
	}
}

// openSet reads the lane index of the set t of run; its first line only if head.
func (s *Store) openSet(run int, t Set, head bool) (*laneSet, error) {
	dir := filepath.Join(s.misc, t.Dir)
	index := filepath.Join(dir, "index")
	read := readIndex
	if head {
		read = vfs.ReadHead
	}
	if s.given.b != nil && s.given.dir == t.Dir && !head {
		read = func(vfs.FS, string) ([]byte, error) { return s.given.b, nil } // the hint's vouching name
	}
	b, err := read(s.fs, index)
	if isGone, err := goneOr(s.fs, dir, err); isGone { // an ENOENT believed if the lanes' directory is gone
		return nil, &DamageError{Path: dir, Why: fmt.Sprintf("the lanes of run %d are gone", run)}
	} else if err != nil {
		return nil, err
	}
	x, err := parseIndex(b, head)
	if err == nil && x.lanes != t.Lanes {
		err = fmt.Errorf("%d lanes, the claim state says %d", x.lanes, t.Lanes)
	}
	if err != nil {
		return nil, &DamageError{Path: index, Why: err.Error()}
	}
	return &laneSet{set: t, dir: dir, x: x, stores: make([]*chainStore, x.lanes),
		exhausted: make([]bool, x.lanes), home: homeLane(s.fs, s.Job, x.stride())}, nil
}

// readIndex reads a lane index whole. Written once, by rename, it never
// changes: the read that brings the size fstat gave, ending a line, ends it,
// with no read to be told EOF (a round trip to a file server).
func readIndex(fsys vfs.FS, path string) ([]byte, error) {
	f, err := vfs.Open(fsys, unix.AT_FDCWD, path, unix.O_RDONLY, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer f.Close()
	size := int64(-1)
	if st, err := f.Stat(); err == nil && st.Size > 0 && st.Size < 1<<30 {
		size = st.Size
	}
	b := make([]byte, 0, max(size, 4095)+1)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := f.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF || err == nil && int64(len(b)) == size && b[len(b)-1] == '\n' {
			return b, nil
		}
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		}
	}
}

// homeLane is the lane a meta-job named job claims in first: its ID's trailing number
// modulo lanes, else a hash (BENCHMARKS.md, "Where the calls go at 128 meta-jobs").
func homeLane(fsys vfs.FS, job string, lanes int) int {
	if lanes <= 1 {
		return 0
	}
	if d := job[len(strings.TrimRight(job, "0123456789")):]; d != "" {
		n := 0 // the number modulo lanes, digit by digit: no overflow
		for _, c := range []byte(d) {
			n = (n*10 + int(c-'0')) % lanes
		}
		return n
	}
	if job == "" {
		return int(fsys.Rand() % uint64(lanes))
	}
	h := fnv.New32a()
	h.Write([]byte(job))
	return int(h.Sum32() % uint32(lanes))
}

// claimInLane claims up to most cases in lane l of s's set L, and whether it is then exhausted.
func (L *laneSet) claimInLane(ctx context.Context, s *Store, l, run, most int) ([]tablefmt.Case, bool, error) {
	if L.stores[l] == nil {
		L.stores[l] = newLaneStore(&s.Opts, s.fs, s.misc, filepath.Join(L.dir, strconv.Itoa(l)))
	}
	ls := L.stores[l]
	ls.tab.checked = tableID{} // the table is checked once a claim
	if most < 1 {
		most = L.x.firstShare(l)
	}
	var cases []tablefmt.Case
	var exhausted bool
	var ci commitInfo
	err := ls.update(ctx, func(st *State) error {
		cases, exhausted = cases[:0], false
		if !st.InLane || st.Lane < 0 || st.Lane >= L.x.lanes {
			return &DamageError{Path: ls.dir, Why: "not a lane's generation"}
		}
		_, _, limit := L.x.span(l)
		if st.Run != run || st.Block >= limit {
			exhausted = true
			return errNoCommit
		}
		if err := ls.tab.check(st); err != nil {
			return err
		}
		if ok, err := ls.tab.rd.StartsLine(st.Offset); err != nil {
			return err
		} else if !ok {
			return &TableChangedError{Table: st.Table, Run: st.Run, Size: st.TSize,
				WasSize: st.TSize, MidLine: st.Offset}
		}
		var err error
		was := st.Block
		cases, err = ls.readLane(L, st, ls.share(most, st.Cases-st.Claimed), cases)
		exhausted = st.Block >= limit
		if err != nil || len(cases) == 0 && (!L.x.sweep(l) || st.Block == was) {
			return cmp.Or(err, errNoCommit) // the sweep commits its cursor's move, cases or none
		}
		st.Claimed += int64(len(cases))
		ci = commitInfo{n: len(cases), empties: exhausted}
		for _, c := range cases {
			ci.first = cmp.Or(ci.first, c.ID)
			ci.ids = append(ci.ids, c.ID)
		}
		return nil
	}, &ci)
	return cases, exhausted, err // on an error, not heeded
}

// readLane reads up to lim cases from st's cursor into cases, moving it past them and used-up blocks.
func (ls *chainStore) readLane(L *laneSet, st *State, lim int, cases []tablefmt.Case) ([]tablefmt.Case, error) {
	x := L.x
	b, off, lines := st.Block, st.Offset, st.Lines
	_, step, limit := x.span(st.Lane)
	var w *sweeping // the sweep lane's walk through the tickets (ticket.go)
	if x.sweep(st.Lane) {
		var err error
		if w, err = ls.startSweep(L, st); err != nil {
			return cases, err
		}
	}
	next := func() { // to the lane's next block
		b += step
		if b < limit {
			off, lines = x.starts[b], x.lines[b]
		}
		if w != nil {
			w.k = 0
		}
	}
	for b < limit {
		end := st.TSize // past block b: the next block's start, or the table's end
		if b+1 < x.nblocks {
			end = x.starts[b+1]
		}
		if off >= end {
			next()
			continue
		}
		if len(cases) >= lim || w != nil && w.full() {
			break // the cursor at the next case
		}
		c, after, n, ok, err := ls.tab.rd.Case(off, st.TSize)
		if err != nil {
			return cases, err
		}
		if !ok && b+1 < x.nblocks {
			why := fmt.Sprintf("the table ends in block %d of %d", b, x.nblocks)
			return cases, &DamageError{Path: filepath.Join(L.dir, "index"), Why: why}
		}
		if !ok || after > end {
			next() // no case left in the block
			continue
		}
		off, lines = after, lines+n
		if w != nil { // the ticket's case, if its owner has not claimed it
			if void, err := w.take(b); err != nil {
				return cases, err
			} else if !void {
				continue
			}
		}
		c.Line, c.Table = lines, st.Table
		cases = append(cases, c)
	}
	st.Block, st.Offset, st.Lines = b, off, lines
	return cases, nil
}

// share is how many cases of most a claim takes when left are left
// (CLAIMS.md, "Claims at scale"): fewer near the end, not fewer by Ahead.
func (s *chainStore) share(most int, left int64) int {
	share := max(16, 2*s.con.peers)
	if left < share*int64(most) {
		return 1 + int(max(left, 0)/share)
	}
	return most
}

// readLanes sets st.Claimed, st being the run record: that of every lane
// of its sets, a closed lane's cases all; all its cases if it has no set.
func (s *Store) readLanes(st State) (State, error) {
	st.Claimed = 0
	if len(st.Sets) == 0 {
		st.Claimed = st.Cases
	}
	for _, t := range st.Sets {
		L, err := s.openSet(st.Run, t, true)
		if err != nil {
			return st, err
		}
		for l := 0; l < L.x.lanes; l++ {
			ls := newLaneStore(&s.Opts, s.fs, s.misc, filepath.Join(L.dir, strconv.Itoa(l)))
			err := ls.refresh()
			ls.close()
			switch {
			case errors.Is(err, errClosed):
				st.Claimed += L.x.laneCases(l)
			case err != nil:
				return st, err
			default:
				st.Claimed += ls.cur.Claimed
			}
			if L.x.sweep(l) && err == nil { // the tickets their owners claimed
				n, err := L.ticketsClaimed(s.fs)
				if err != nil {
					return st, err
				}
				st.Claimed += n
			}
		}
	}
	return st, nil
}
