package casetable

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
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

// Lanes: where a run's claims are made (CLAIMS.md, "Lanes").
//
// One chain commits one generation at a time, whoever asks: with a
// thousand meta-jobs it is the bottleneck however cheap a commit is. A
// run's table is therefore claimed through a set of S lanes: the table is
// cut into blocks of B consecutive cases, and lane ℓ owns blocks ℓ, ℓ+S,
// ℓ+2S, …, so that the lanes together go through the table close to its
// order. Each lane is a chain of generations of its own (chain.go), whose
// state is a cursor in the lane's current block; a claim commits on one
// lane only. A run for fewer than 16 meta-jobs gets one lane, whose one
// block is the table (its index needs no reading of the table). The main
// chain holds the run record: the run's sets in claim order — its own
// table's, and one per 'farm add' (appended, or first with --first) — and
// changes only when a command starts, adds to, closes or repairs a run.
//
//	MISC/lanes.R.NONCE/index  the block index: "farm-lanes v1 lanes=S block=B blocks=K cases=C [jobs=N]",
//	                          then per block the byte offset of its first case and the lines before it
//	MISC/lanes.R.NONCE/ℓ/     lane ℓ's chain (segments, marks, generations as the main chain's)
//	MISC/lanes.R.NONCE/x.ℓ    made by the claimer whose claim exhausted lane ℓ
//	MISC/lanes.R.NONCE/end    made by a claimer that found every lane exhausted: the others need not look
//
// Every invariant of the chain holds per lane, and a case belongs to one
// lane's blocks only: no case is claimed twice in a run. A set is made
// whole (index, then every lane's generation 0) before the main chain's
// commit names it, and every set of a run is closed (a closing generation
// on each lane, closeChain) before a new run or a repair commits on the
// main chain: a claimer however stalled cannot claim in a run after the
// next one started.

// lanesMagic starts a lane index.
const lanesMagic = "farm-lanes v1 "

// MaxLanes caps the lanes of a run.
const MaxLanes = 64

// jobsPerLane is how many meta-jobs share a lane by default.
const jobsPerLane = 32

// minLaneJobs is the fewest meta-jobs a run gets several lanes for.
// Below, one chain costs a claim 7 calls alone and about 12 with 8 to 16
// claimers (each claim a read of the newest generation and a commit); from
// 16 on its claimers lose commits to each other and a claim costs 20 to
// 40 calls, where 2 lanes with Store.Ahead cost 4 to 6 (make bench-scale,
// BENCHMARKS.md).
const minLaneJobs = 16

// LanesFor is how many lanes a run started for jobs meta-jobs gets: 1
// under 16, 2 from 16 to 95, then one per 32 (at most MaxLanes).
// FARM_CLAIM_LANES, a number, overrides it (tests, benchmarks).
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
	lanes   int
	block   int64   // cases per block
	cases   int64   // cases of the run's table
	starts  []int64 // per block, the byte offset of its first case
	jobs    int     // the meta-jobs the run was started for; 0: not known
	lines   []int64 // per block, the lines of the table before it
	nblocks int64
}

// blocks is the number of blocks (the header's, which a header-only
// reading knows without the blocks themselves).
func (x *laneIndex) blocks() int64 { return x.nblocks }

// end is the byte offset past block b: the next block's start, or the end
// of the table (size).
func (x *laneIndex) end(b, size int64) int64 {
	if b+1 < x.blocks() {
		return x.starts[b+1]
	}
	return size
}

// laneCases is how many cases lane l's blocks hold.
func (x *laneIndex) laneCases(l int) int64 {
	var n int64
	for b := int64(l); b < x.blocks(); b += int64(x.lanes) {
		n += min(x.block, x.cases-b*x.block)
	}
	return n
}

// FirstBatch, as Claim's most, asks for a meta-job's first claim of a run:
// one case in a set of one lane; in a set of several, a fair first share
// of the lane (firstShare), so that the meta-jobs of a lane, which all start
// at once, do not each make a generation for one case, then two, then
// four … before their batches reach a second's work: on the cluster rig
// that start-up herd was most of the wall of short runs of 128 meta-jobs
// (BENCHMARKS.md).
const FirstBatch = 0

// maxFirstShare caps a first claim in a lane: the cases' durations are not
// known yet (a batch of hour-long cases that does not fit in the job's
// time is left never started, for the next run).
const maxFirstShare = 16

// firstShare is the first claim's size in lane l: its cases over twice
// the meta-jobs that share it (as the run was started; 32 when not
// known), 1 to maxFirstShare. The first claims of the lane's meta-jobs,
// half a fair share each, take at most half of the lane; the claims that
// follow are sized by the cases' pace.
func (x *laneIndex) firstShare(l int) int {
	if x.lanes == 1 {
		return 1 // a run for fewer than 16 meta-jobs: their cases may be long
	}
	per := int64(jobsPerLane)
	if x.jobs > 0 {
		per = int64(x.jobs / x.lanes)
		if x.jobs%x.lanes != 0 {
			per++
		}
		per = max(per, 1)
	}
	return int(min(max(x.laneCases(l)/(2*per), 1), maxFirstShare))
}

// blockSize is the cases per block for a table of cases cases: 16, more
// for tables so large that their index would pass 65,536 blocks.
func blockSize(cases int64) int64 {
	return max(16, (cases+65535)/65536)
}

// buildIndex reads the run's table and indexes its blocks.
func buildIndex(fsys vfs.FS, path string, lanes int, size int64) (*laneIndex, error) {
	f, err := vfs.Open(fsys, unix.AT_FDCWD, path, unix.O_RDONLY, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer f.Close()
	limit := int64(math.MaxInt64)
	if size > 0 {
		limit = size
	}
	var r io.Reader = io.NewSectionReader(f, 0, limit)
	// Count first, to size the blocks.
	var cases int64
	br := bufio.NewReaderSize(r, tablefmt.BufSize(limit))
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A line longer than the buffer: its case-ness is in its start.
			if tablefmt.IsCase(line) {
				cases++
			}
			for err == bufio.ErrBufferFull {
				_, err = br.ReadSlice('\n')
			}
		} else if len(line) > 0 && tablefmt.IsCase(line) {
			cases++
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	x := &laneIndex{lanes: lanes, block: blockSize(cases), cases: cases}
	br.Reset(io.NewSectionReader(f, 0, limit))
	var off, lines, i int64
	for {
		line, err := br.ReadSlice('\n')
		n := int64(len(line))
		isC := false
		if err == bufio.ErrBufferFull {
			isC = tablefmt.IsCase(line)
			for err == bufio.ErrBufferFull {
				var more []byte
				more, err = br.ReadSlice('\n')
				n += int64(len(more))
			}
		} else {
			isC = len(line) > 0 && tablefmt.IsCase(line)
		}
		if isC {
			if i%x.block == 0 {
				x.starts = append(x.starts, off)
				x.lines = append(x.lines, lines)
			}
			i++
		}
		if n > 0 {
			lines++
		}
		off += n
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if i != cases {
		return nil, fmt.Errorf("%s changed while it was indexed", path)
	}
	x.nblocks = int64(len(x.starts))
	return x, nil
}

func (x *laneIndex) marshal() []byte {
	h := kv.AppendInt([]byte(lanesMagic), "lanes", int64(x.lanes))
	h = kv.AppendInt(h, "block", x.block)
	h = kv.AppendInt(h, "blocks", x.blocks())
	h = kv.AppendInt(h, "cases", x.cases)
	if x.jobs > 0 {
		h = kv.AppendInt(h, "jobs", int64(x.jobs))
	}
	b := bytes.NewBuffer(append(h, '\n'))
	for i := range x.starts {
		b.WriteString(strconv.FormatInt(x.starts[i], 10))
		b.WriteByte(' ')
		b.WriteString(strconv.FormatInt(x.lines[i], 10))
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// readHead reads the first line of the file path (at most 4 KiB).
func readHead(fsys vfs.FS, path string) ([]byte, error) {
	f, err := vfs.Open(fsys, unix.AT_FDCWD, path, unix.O_RDONLY, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer f.Close()
	b := make([]byte, 4096)
	n, err := f.Read(b)
	if n == 0 && err != nil {
		return nil, err
	}
	if i := bytes.IndexByte(b[:n], '\n'); i >= 0 {
		return b[:i+1], nil
	}
	return b[:n], nil
}

// parseIndex reads a lane index of a table of size bytes (0: unknown); its
// header alone if head.
func parseIndex(b []byte, size int64, headOnly bool) (*laneIndex, error) {
	head, rest, ok := bytes.Cut(b, []byte("\n"))
	h, ok2 := strings.CutPrefix(string(head), lanesMagic)
	if !ok || !ok2 {
		return nil, errors.New("not a lane index")
	}
	x := &laneIndex{}
	var blocks int64
	r := kv.NewReader(h)
	for r.Next() {
		switch r.Key() {
		case "lanes":
			x.lanes = r.Atoi()
		case "block":
			x.block = r.Int()
		case "blocks":
			blocks = r.Int()
		case "cases":
			x.cases = r.Int()
		case "jobs":
			x.jobs = max(r.Atoi(), 0)
		}
	}
	if err := r.Err(); err != nil {
		return nil, err
	}
	if x.lanes < 1 || x.block < 1 || blocks < 0 || x.cases < 0 || blocks != (x.cases+x.block-1)/x.block {
		return nil, fmt.Errorf("bad header %q", head)
	}
	x.nblocks = blocks
	if headOnly {
		return x, nil
	}
	x.starts = make([]int64, 0, blocks)
	x.lines = make([]int64, 0, blocks)
	for len(rest) > 0 {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte("\n"))
		a, c, ok := bytes.Cut(line, []byte(" "))
		o, err1 := strconv.ParseInt(string(a), 10, 64)
		l, err2 := strconv.ParseInt(string(c), 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("bad block line %q", line)
		}
		// Blocks are in the table's order and within it: overlapping
		// blocks would hand a case out twice.
		if k := len(x.starts); k > 0 && (o <= x.starts[k-1] || l <= x.lines[k-1]) || o < 0 || l < 0 || size > 0 && o >= size {
			return nil, fmt.Errorf("block %d at byte %d, line %d: out of order or past the table", len(x.starts), o, l)
		}
		x.starts = append(x.starts, o)
		x.lines = append(x.lines, l)
	}
	if int64(len(x.starts)) != blocks {
		return nil, fmt.Errorf("%d blocks, the header says %d", len(x.starts), blocks)
	}
	return x, nil
}

// makeSet makes a set of lanes (at most lanes) for run over table, of
// cases cases, whose identity t holds (its TSize, TIno and TFP), in the
// farm dir whose MISC is misc: the block index and each lane's generation
// 0 at the start of its first block. It returns the set for the caller to
// commit on the main chain; nobody knows it before that commit. A table
// with fewer blocks than lanes gets fewer lanes; one lane's index is one
// block, written without reading the table. jobs is the meta-jobs the run
// is started for (0: not known), which sizes their first claims
// (FirstBatch).
func makeSet(fsys vfs.FS, dir, misc string, run int, t State, cases int64, lanes, jobs int) (Set, error) {
	x := &laneIndex{lanes: 1, block: max(cases, 1), cases: cases}
	if cases > 0 {
		x.starts, x.lines, x.nblocks = []int64{0}, []int64{0}, 1
	}
	if lanes > 1 && t.TSize > 0 {
		var err error
		if x, err = buildIndex(fsys, filepath.Join(dir, t.Table), lanes, t.TSize); err != nil {
			return Set{}, passing(fsys, filepath.Join(dir, t.Table), err)
		}
		x.lanes = int(max(min(int64(lanes), x.blocks()), 1))
	}
	x.jobs = max(jobs, 0)
	name := fmt.Sprintf("lanes.%d.%s", run, newNonce(fsys))
	ldir := filepath.Join(misc, name)
	// Its name is new (a nonce): EEXIST is our own mkdir, its reply lost
	// and its request retried; so for the lanes' directories in it.
	if err := vfs.Mkdir(fsys, ldir, 0o755); err != nil && (!errors.Is(err, unix.EEXIST) || mutated("own-mkdir-eexist-fatal")) {
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
		ls := State{Run: run, Table: t.Table, TSize: t.TSize, TIno: t.TIno, TFP: t.TFP, Cases: x.laneCases(l),
			InLane: true, Lane: l, Block: int64(l)}
		if int64(l) < x.blocks() {
			ls.Offset, ls.Lines = x.starts[l], x.lines[l]
		}
		if err := makeLane(fsys, filepath.Join(ldir, strconv.Itoa(l)), ls); err != nil {
			return fail(err)
		}
	}
	return Set{Dir: name, Lanes: x.lanes, Cases: cases, Table: t.Table}, nil
}

// makeLane makes a new lane's chain in dir, its generation 0 ls.
func makeLane(fsys vfs.FS, dir string, ls State) error {
	c := newChain(fsys, dir)
	defer c.close()
	if err := vfs.Mkdir(fsys, c.dir, 0o755); err != nil && (!errors.Is(err, unix.EEXIST) || mutated("own-mkdir-eexist-fatal")) {
		return err
	}
	nonce := newNonce(fsys)
	won, err := c.commit(0, ls.marshal(nil, 0, commitInfo{by: "launch", nonce: nonce}), nonce)
	if err == nil && !won {
		// Nobody else knows the new lane: its slot 0 answered EEXIST
		// to our own mknod, a retried request whose first made it
		// (a lost reply). Made afresh, under another name.
		err = fmt.Errorf("%s: the filesystem answered that generation 0 of a new lane exists (a reply lost, its request retried)", c.dir)
		if !mutated("lane-gen0-eexist-fatal") {
			err = fsretry.Transient(err)
		}
	}
	return err
}

// removeSets removes sets made for a change of the run record that did
// not commit (its commit lost): nobody knows them.
func removeSets(fsys vfs.FS, misc string, sets []Set) {
	for _, t := range sets {
		if t.Dir != "" && !strings.Contains(t.Dir, "/") {
			vfs.RemoveAll(fsys, filepath.Join(misc, t.Dir))
		}
	}
}

// closeSets closes every lane of every set of the run st (read from the
// main chain): after it, no process can claim in them, however long it
// stalled. A new run's start, a close and a repair close the current
// run's sets before their commit on the main chain.
func (s *Store) closeSets(ctx context.Context, st State) error {
	r := fsretry.Retrier{Limit: s.Retry, Log: s.log(), Clock: s.fs}
	for _, t := range st.Sets {
		for l := 0; l < t.Lanes; l++ {
			dir := filepath.Join(s.misc, t.Dir, strconv.Itoa(l))
			if err := r.Do(ctx, func() error { _, err := closeChainDir(s.fs, dir); return err }); err != nil {
				return fmt.Errorf("closing lane %d of run %d's set %s: %w", l, st.Run, t.Dir, err)
			}
		}
	}
	return nil
}

// closeAllLanes closes every lane in MISC of run upTo or an earlier one
// (every lane if upTo < 1): a repair, which may not know the current run's
// lanes from a damaged state. Lanes already closed cost a reading each.
func (s *Store) closeAllLanes(ctx context.Context, r *fsretry.Retrier, upTo int) error {
	var names []string
	if err := r.Do(ctx, func() (err error) {
		names, err = readDir(s.fs, s.misc)
		return passing(s.fs, s.misc, err)
	}); err != nil {
		return fmt.Errorf("listing the lanes to close: %w", err)
	}
	for _, name := range names {
		if !strings.HasPrefix(name, "lanes.") {
			continue
		}
		if run, _, _ := strings.Cut(strings.TrimPrefix(name, "lanes."), "."); upTo >= 1 {
			if n, err := strconv.Atoi(run); err == nil && n > upTo {
				continue // a later run's, started since the reading
			}
		}
		ldir := filepath.Join(s.misc, name)
		var lanes []string
		if err := r.Do(ctx, func() (err error) {
			lanes, err = readDir(s.fs, ldir)
			if errors.Is(err, unix.ENOTDIR) {
				return nil // a file of that name
			}
			// Lanes removed since the listing (a run start that lost
			// removes its own) are closed enough.
			_, err = goneOr(s.fs, ldir, err)
			return err
		}); err != nil {
			return fmt.Errorf("listing the lanes to close: %w", err)
		}
		for _, l := range lanes {
			if _, err := strconv.Atoi(l); err != nil {
				continue
			}
			dir := filepath.Join(ldir, l)
			if st, err := vfs.Stat(s.fs, dir); err == nil && !vfs.IsDir(&st) {
				continue
			}
			if err := r.Do(ctx, func() error { _, err := closeChainDir(s.fs, dir); return err }); err != nil {
				return fmt.Errorf("closing the lane %s: %w", dir, err)
			}
		}
	}
	return nil
}

// laneSet is what a claiming store knows of one set of its run's lanes.
type laneSet struct {
	set       Set
	dir       string
	x         *laneIndex
	stores    []*chainStore // per lane, opened when first claimed in
	exhausted []bool        // lanes with nothing left to claim in this run (for good)
	home      int           // the lane claimed in last
	end       bool          // every lane is exhausted
}

// close releases the lanes' stores.
func (L *laneSet) close() {
	for l, ls := range L.stores {
		if ls != nil {
			ls.close()
			L.stores[l] = nil
		}
	}
}

// openSet reads the lane index of the set t of run; only its first line,
// if head (what Read needs).
func (s *Store) openSet(run int, t Set, head bool) (*laneSet, error) {
	dir := filepath.Join(s.misc, t.Dir)
	var b []byte
	var err error
	if head {
		b, err = readHead(s.fs, filepath.Join(dir, "index"))
	} else {
		b, err = vfs.ReadFile(s.fs, filepath.Join(dir, "index"))
	}
	if os.IsNotExist(err) {
		// Believed only if the lanes' directory is gone too (a network
		// filesystem's passing ENOENT is retried, as on the chain).
		if gone(s.fs, dir) {
			return nil, &DamageError{Path: dir, Why: fmt.Sprintf("the lanes of run %d are gone", run)}
		}
		return nil, fsretry.Transient(err)
	}
	if err != nil {
		return nil, err
	}
	x, err := parseIndex(b, 0, head)
	if err != nil {
		return nil, &DamageError{Path: filepath.Join(dir, "index"), Why: err.Error()}
	}
	if x.lanes != t.Lanes {
		return nil, &DamageError{Path: filepath.Join(dir, "index"), Why: fmt.Sprintf("%d lanes, the claim state says %d", x.lanes, t.Lanes)}
	}
	L := &laneSet{set: t, dir: dir, x: x, stores: make([]*chainStore, x.lanes), exhausted: make([]bool, x.lanes)}
	L.home = homeLane(s.fs, s.Job, x.lanes)
	return L, nil
}

// homeLane is the lane a meta-job named job claims in first. Its job ID's
// number (the trailing digits: Slurm's 12345 or array task 12345_7, Grid
// Engine's 123.4, the local engine's 17) modulo the lanes, when it has
// one: the meta-jobs of one `farm submit` get consecutive numbers (one
// submission each, or an array's tasks) unless other submissions come in
// between, so that each lane gets the same number of them, give or take
// one. A hash of the name spreads them unevenly: with as many meta-jobs as
// lanes, about a third of the lanes would have no meta-job of their own
// and others two or three, whose lanes then run out early and send their
// claimers onto the other lanes (BENCHMARKS.md, "Where the calls go at 128
// meta-jobs"). A name that does not end in digits is hashed; no name gets
// a random lane.
func homeLane(fsys vfs.FS, job string, lanes int) int {
	if lanes <= 1 {
		return 0
	}
	i := len(job)
	for i > 0 && job[i-1] >= '0' && job[i-1] <= '9' {
		i--
	}
	if d := job[i:]; d != "" {
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

// claimInLane claims up to most cases in the lane whose store is ls, and
// reports whether the lane has nothing left after it.
func (ls *chainStore) claimInLane(ctx context.Context, L *laneSet, run, most int) ([]tablefmt.Case, bool, error) {
	ls.tab.checked = tableID{} // the table is checked once a claim
	if most < 1 {
		most = L.x.firstShare(L.home)
	}
	var cases []tablefmt.Case
	exhausted := false
	x := L.x
	_, err := ls.update(ctx, func(st *State) error {
		cases, exhausted = cases[:0], false
		if !st.InLane || st.Lane < 0 || st.Lane >= x.lanes {
			return &DamageError{Path: ls.dir, Why: "not a lane's generation"}
		}
		if st.Run != run || st.Block >= x.blocks() {
			exhausted = true
			return errNoCommit
		}
		if err := ls.tab.check(st); err != nil {
			return err
		}
		if ok, err := ls.tab.rd.StartsLine(st.Offset); err != nil {
			return err
		} else if !ok {
			return &TableChangedError{Table: st.Table, Run: st.Run, Size: st.TSize, WasSize: st.TSize, MidLine: st.Offset}
		}
		var err error
		cases, err = ls.readLane(L, st, ls.share(most, st.Cases-st.Claimed), cases)
		exhausted = st.Block >= x.blocks()
		if err != nil || len(cases) == 0 {
			return cmp.Or(err, errNoCommit)
		}
		st.Claimed += int64(len(cases))
		return nil
	}, claimInfo(&cases))
	if err != nil {
		return nil, false, err
	}
	return cases, exhausted, nil
}

// readLane reads up to lim cases of the lane from st's cursor into cases,
// and moves the cursor past them, through the lane's blocks; past a
// block's last byte it moves on to the lane's next block, so that the
// lane's state says so (and, past its last block, that it is exhausted).
func (ls *chainStore) readLane(L *laneSet, st *State, lim int, cases []tablefmt.Case) ([]tablefmt.Case, error) {
	x := L.x
	b, off, lines := st.Block, st.Offset, st.Lines
	// next moves the cursor to the lane's next block.
	next := func() {
		b += int64(x.lanes)
		if b < x.blocks() {
			off, lines = x.starts[b], x.lines[b]
		}
	}
	for len(cases) < lim && b < x.blocks() {
		end := x.end(b, st.TSize)
		if off >= end {
			next()
			continue
		}
		c, after, n, ok, err := ls.tab.rd.Case(off, st.TSize)
		if err != nil {
			return cases, err
		}
		if !ok && b+1 < x.blocks() {
			// The table ended before a block that is not its last: the
			// index is not of this table.
			return cases, &DamageError{Path: filepath.Join(L.dir, "index"), Why: fmt.Sprintf("the table ends in block %d of %d", b, x.blocks())}
		}
		if !ok || after > end {
			// No case left in the block (the lines after its last case
			// are not cases): the next block.
			next()
			continue
		}
		off, lines = after, lines+n
		c.Line, c.Table = lines, st.Table
		cases = append(cases, c)
	}
	for b < x.blocks() && off >= x.end(b, st.TSize) {
		next()
	}
	st.Block, st.Offset, st.Lines = b, off, lines
	return cases, nil
}

// share is how many cases, of most asked, a claim takes when left are left
// (in the run, or in a lane): near the end, at most a sixteenth of what is
// left, or less when many others claim: twice the others this store found
// committing between its own last two claims, or winning the slots it
// lost (a share for each). Not fewer when Ahead is up: Ahead grows most,
// which only makes the limit apply sooner, and a share that shrank with
// Ahead made a contended lane's claims 1 to 3 cases each (CLAIMS-APPENDIX.md).
func (s *chainStore) share(most int, left int64) int {
	share := max(16, 2*s.con.peers)
	if left < share*int64(most) {
		return 1 + int(max(left, 0)/share)
	}
	return most
}

// readLanes sets st.Claimed, st being the run record: every lane's
// claims of every set of the run; all its cases when it has no set (a
// closed run). A closed lane counts as claimed whole (nothing more can be
// claimed in it).
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
			ls := newChainStore(&s.Opts, s.fs, s.misc, filepath.Join(L.dir, strconv.Itoa(l)))
			err := ls.refresh()
			lst := ls.cur
			ls.close()
			switch {
			case errors.Is(err, errClosed):
				st.Claimed += L.x.laneCases(l)
			case err != nil:
				return st, err
			default:
				st.Claimed += lst.Claimed
			}
		}
	}
	return st, nil
}
