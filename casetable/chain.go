package casetable

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/farm-hpc/farm/fsretry"
	"github.com/farm-hpc/farm/vfs"
	"golang.org/x/sys/unix"
)

// A chain of immutable generations and its files: CLAIMS.md, "The chain of generations".

// SegmentSize is the number of generations per segment directory.
const SegmentSize = 4096

const (
	buryAfter = 1024 // generations a generation stays readable before it is buried

	chainMagic = "farm-chain v2 "
	genMagic   = "farm-gen v1 "
	tombText   = "farm-gen v1 buried\n"
)

// testHook, which tests set, is called where the simulator aims faults: in a
// commit on the chain in path, "write", "mark", "marked"; with the path looked
// at, "table" (tableID), "gone" (goneOr), "inspect" (a repair's reading).
var testHook = func(stage, path string) {}

// errBuried is returned when a generation has been buried.
var errBuried = errors.New("generation buried")

// chain is one farm's chain of generations. Its calls are relative to open
// descriptors of its directories: on a network filesystem, a name in an open
// directory costs one lookup, a path into the farm five or more.
type chain struct {
	dir  string // MISC/claims.NONCE
	seq  int    // counter for our private names
	self string // unique among every process of every host: names our files

	fs   vfs.FS
	dfd  *vfs.File // dir, opened O_PATH; nil until needed
	sfd  *vfs.File // the segment directory sseg, opened O_PATH
	sseg int64

	top     int64 // the newest mark known (commit or void); -1: none
	known   int64 // a generation known committed without a lookup (a lane's 0); -1: none
	pending int64 // a commit whose mark was tried, outcome unknown (settle): its generation; -1: none

	buried burial // the burying of old generations (decided)
}

// burial is a chain's burying of old generations.
type burial struct {
	log   io.Writer // where a failure is said, once; nil: not said
	tomb  int       // the tomb buried generations are linked to: tomb, tomb.1, ...
	fails int       // generations that could not be buried
	first error     // the first such failure
}

// dirFD returns the chain directory's descriptor.
func (c *chain) dirFD() (int, error) {
	if c.dfd == nil {
		f, err := vfs.OpenDir(c.fs, c.dir)
		if err != nil {
			return -1, err
		}
		c.dfd = f
	}
	return c.dfd.Fd, nil
}

// segFD returns the descriptor of generation n's segment directory, made first if mk.
func (c *chain) segFD(n int64, mk bool) (int, error) {
	seg := n / SegmentSize
	if c.sfd != nil && c.sseg == seg {
		return c.sfd.Fd, nil
	}
	vfs.CloseFile(&c.sfd)
	op, f, err := "open", (*vfs.File)(nil), error(nil)
	if c.dfd == nil && !mk && c.known >= 0 {
		// A lane's, by its path: one call, where the chain's directory and
		// then the segment would be two (the directory is opened when needed).
		f, err = vfs.OpenDir(c.fs, c.segPath(n, ""))
	} else {
		var d int
		if d, err = c.dirFD(); err != nil {
			return -1, err
		}
		if op = "mkdir"; mk {
			err = c.fs.Mkdirat(d, segName(n), 0o755)
		}
		if err == nil || err == unix.EEXIST {
			op = "open"
			f, err = vfs.OpenDirAt(c.fs, d, segName(n))
		}
	}
	if err != nil {
		if err != unix.ENOENT {
			c.close() // a stale handle (NFS failover): look the directory up again
		}
		return -1, c.segErr(op, n, "", err)
	}
	c.sfd, c.sseg = f, seg
	return f.Fd, nil
}

// close releases the chain's descriptors (if c is not nil); after an error too, so
// that the next call looks the directories up again (made again, a stale handle).
func (c *chain) close() {
	if c != nil {
		vfs.CloseFile(&c.sfd)
		vfs.CloseFile(&c.dfd)
	}
}

// newNonce returns 16 random hex digits, a name no other process makes.
func newNonce(fsys vfs.FS) string { return fmt.Sprintf("%016x", fsys.Rand()) }

// openChain opens the chain misc/chain names, and returns that file's content
// and inode: ErrNoState if it is certainly gone, a transient error if it may
// only seem so, a *DamageError (its content kept, nil for a directory) else.
func openChain(fsys vfs.FS, misc string) (c *chain, b []byte, ino uint64, err error) {
	path := filepath.Join(misc, "chain")
	for try := 0; ; try++ {
		b, ino, err = vfs.ReadFileIno(fsys, path)
		switch {
		case os.IsNotExist(err) && mutated("no-state-ends-claims"):
			return nil, nil, 0, ErrNoState
		case os.IsNotExist(err):
			if isGone, err := goneOr(fsys, path, err); !isGone {
				return nil, nil, 0, err // a passing ENOENT
			}
			return nil, nil, 0, ErrNoState
		case errors.Is(err, unix.EISDIR):
			return nil, nil, ino, &DamageError{Path: path, Why: "a directory, not a file"}
		case err != nil:
			return nil, nil, 0, err
		}
		s := string(b)
		name, ok := strings.CutPrefix(s, chainMagic)
		name, ok2 := strings.CutSuffix(name, "\n")
		if ok && ok2 && strings.HasPrefix(name, "claims.") && !strings.ContainsAny(name, "/ \n") {
			return newChain(fsys, filepath.Join(misc, name)), b, ino, nil
		}
		// Empty, or the start of a chain line with no newline yet: just made by
		// O_EXCL create and not yet written, or cached so (createChain): read
		// again, past the caches. Unfinished for good: damage.
		unfinished := !strings.HasSuffix(s, "\n") && (strings.HasPrefix(s, chainMagic) || strings.HasPrefix(chainMagic, s))
		if try >= chainRereads || !unfinished {
			return nil, b, ino, &DamageError{Path: path, Why: fmt.Sprintf("unreadable content %.40q", b)}
		}
		fsys.Sleep(context.Background(), 100*time.Millisecond)
	}
}

// chainRereads is how many times openChain reads an unfinished MISC/chain again, 0.1 s apart.
var chainRereads = 20

// newChain returns the chain in directory dir; it does no I/O.
func newChain(fsys vfs.FS, dir string) *chain {
	return &chain{fs: fsys, dir: dir, self: newNonce(fsys), top: -1, known: -1, pending: -1}
}

// mkdirNew makes dir, a new name (a nonce): EEXIST is our own mkdir's, its request retried.
func mkdirNew(fsys vfs.FS, dir string) error {
	if err := vfs.Mkdir(fsys, dir, 0o755); !errors.Is(err, unix.EEXIST) || mutated("own-mkdir-eexist-fatal") {
		return err
	}
	return nil
}

// makeChain makes a new chain in dir, a new name, with generation 0 the
// record gen0 makes with its nonce: nobody knows it until the caller names it.
func makeChain(fsys vfs.FS, dir string, gen0 func(nonce string) []byte) (*chain, error) {
	c := newChain(fsys, dir)
	if err := mkdirNew(fsys, dir); err != nil {
		return nil, err // nothing of c open yet
	}
	won, err := c.commit(0, gen0(newNonce(fsys)))
	if err == nil && !won {
		// Nobody else knows the chain: the EEXIST is our own retried mknod's.
		err = fmt.Errorf("%s: the filesystem answered that generation 0 of a new chain exists (a reply lost, its request retried)", dir)
		if !mutated("lane-gen0-eexist-fatal") {
			err = fsretry.Transient(err)
		}
	}
	if err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

// createChain makes a new chain and names it in misc/chain, or opens the one another named first.
func createChain(fsys vfs.FS, misc string) (*chain, error) {
	name := "claims." + newNonce(fsys)
	dir := filepath.Join(misc, name)
	if err := mkdirNew(fsys, dir); err != nil {
		return nil, passing(fsys, misc, err)
	}
	if mutated("chain-file-by-link") {
		return linkChain(fsys, misc, name)
	}
	for range chainRemakes + 1 {
		made, err := makeChainFile(fsys, misc, name)
		if err != nil {
			return nil, err
		}
		c, _, _, err := openChain(fsys, misc)
		if errors.Is(err, ErrNoState) && !made && !mutated("chain-made-once") {
			// Another process made MISC/chain, then removed it unwritten (its disk full): again.
			continue
		}
		if err != nil {
			return nil, err
		}
		if c.dir != dir {
			vfs.Remove(fsys, dir) // another process's chain won
		}
		return c, nil
	}
	// Not ErrNoState: the farm is being submitted.
	return nil, fsretry.Transient(fmt.Errorf("%s/chain was made by another process and "+
		"removed unwritten %d times (its disk full?): free space on the farm's "+
		"filesystem and run the command again", misc, chainRemakes+1))
}

// chainRemakes is how many times createChain makes MISC/chain again after another removed it unwritten.
const chainRemakes = 3

// makeChainFile makes MISC/chain naming name by an O_EXCL create written at once: whether
// it made it (not another); on an error, misc/name goes unless MISC/chain may name it.
func makeChainFile(fsys vfs.FS, misc, name string) (bool, error) {
	path := filepath.Join(misc, "chain")
	f, err := vfs.Open(fsys, unix.AT_FDCWD, path, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o644)
	if err == unix.EEXIST {
		return false, nil // another process's: read it
	}
	named := false // MISC/chain may name misc/name: it stays
	if err == nil {
		_, err = f.Write([]byte(chainMagic + name + "\n"))
		cerr := f.Close()
		full := errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT)
		switch {
		case err != nil && (full || mutated("chain-write-lost-removes-chain")):
			// Not written (a full disk refuses a write): nobody can have read
			// it, so it goes, for the next submit, unless it cannot be removed.
			named = vfs.Remove(fsys, path) != nil && !mutated("chain-close-removes-dir")
		case err != nil:
			// Maybe a write made, its reply lost: others may use the chain (if
			// not made, MISC/chain stays empty: damage, for farm repair).
			named = true
		default:
			// A failed close (an NFS flush, its reply lost) may leave it readable.
			err, named = cerr, true
		}
	}
	if err != nil {
		if !named || mutated("chain-close-removes-dir") {
			vfs.Remove(fsys, filepath.Join(misc, name))
		}
		return false, passing(fsys, misc, &os.PathError{Op: "create", Path: path, Err: err})
	}
	return true, nil
}

// segName names generation n's segment directory.
func segName(n int64) string { return fmt.Sprintf("%06d", n/SegmentSize) }

// genName, markName and slotName name generation n's content, mark and slot.
func genName(n int64) string  { return "g." + strconv.FormatInt(n, 10) }
func markName(n int64) string { return "c." + strconv.FormatInt(n, 10) }
func slotName(n int64) string { return "s." + strconv.FormatInt(n, 10) }

// segPath is the path of name in generation n's segment ("": the segment's).
func (c *chain) segPath(n int64, name string) string {
	return filepath.Join(c.dir, segName(n), name)
}

// segErr is the error of the call op on name in generation n's segment.
func (c *chain) segErr(op string, n int64, name string, err error) error {
	return &os.PathError{Op: op, Path: c.segPath(n, name), Err: err}
}

// mark is what a generation's mark says.
type mark int

const (
	unmarked  mark = iota // no mark (yet): not committed, or still being written
	committed             // a regular file: committed (or its tomb)
	voided                // anything else (a FIFO): voided
)

// marker looks up generation n's mark. A mark seen is true (names never go
// nor change type); a missing one may be a cached negative lookup, which
// makes a commit find its slot taken, no worse.
func (c *chain) marker(n int64) (mark, error) {
	d, err := c.segFD(n, false)
	if os.IsNotExist(err) {
		// No segment yet, no chain directory, or a passing ENOENT: refresh, noGeneration decide.
		return unmarked, nil
	}
	if err != nil {
		return unmarked, err
	}
	var st unix.Stat_t
	err = c.fs.Fstatat(d, markName(n), &st, unix.AT_SYMLINK_NOFOLLOW)
	switch {
	case err == nil && st.Mode&unix.S_IFMT == unix.S_IFREG:
		return committed, nil
	case err == nil:
		return voided, nil
	case err == unix.ENOENT:
		return unmarked, nil
	}
	c.close()
	return unmarked, c.segErr("lstat", n, markName(n), err)
}

// errInconsistent: a mark seen, then not seen (a stale cache): the caller reads again later.
var errInconsistent = fsretry.Transient(errors.New("the claim state's marks looked up " +
	"inconsistently (a network filesystem's cache); reading again"))

// latestNear finds the newest committed generation from from (one known marked, or -1);
// -1 if none. The newest mark found, committed or voided, becomes c.top (CLAIMS.md,
// "Finding the newest"). A caller expecting the newest about near past from has
// from+near looked up first, then below it, by doubling steps, until a mark: the
// guess orders the lookups, not the answer.
func (c *chain) latestNear(from, near int64) (int64, error) {
	guess := from + near
	from = max(from, c.top, c.known)
	lo, loMark, hi := from, unmarked, int64(-1) // lo marked (or -1), hi not (or -1)
	if lo >= 0 && lo == c.known {
		loMark = committed
	}
	if from >= 0 && near >= 2 && guess > from+1 {
		var err error
		if lo, loMark, hi, err = c.below(guess, lo, loMark); err != nil {
			return 0, err
		}
	}
	// Gallop (lo+1, lo+2, lo+4, ...) until a generation is not marked, then bisect.
	for step := int64(1); hi < 0 || hi-lo > 1; step *= 2 {
		probe := lo + step
		if hi >= 0 {
			probe = lo + (hi-lo)/2
		}
		m, err := c.marker(probe)
		if err != nil {
			return 0, err
		}
		if m == unmarked {
			hi = probe
		} else {
			lo, loMark = probe, m
		}
	}
	c.top = max(c.top, lo)
	if loMark == committed {
		return lo, nil
	}
	// The newest mark, lo, is a void: the newest commit is the first below not voided (rare).
	for n := lo; n >= 0; n-- {
		m, err := c.marker(n)
		if err != nil {
			return 0, err
		}
		switch m {
		case committed:
			return n, nil
		case unmarked:
			// Marks are made in order: one below a mark seen is there, whatever a cache said.
			return 0, errInconsistent
		}
	}
	return -1, nil
}

// below looks up marks from g down, by doubling steps, until one is marked (then
// lo) or lo is reached; hi is the lowest found unmarked (-1: none), as latestNear keeps them.
func (c *chain) below(g, lo int64, loMark mark) (int64, mark, int64, error) {
	hi := int64(-1)
	for step := int64(1); g > lo; step *= 2 {
		m, err := c.marker(g)
		if err != nil {
			return 0, unmarked, 0, err
		}
		if m != unmarked {
			return g, m, hi, nil
		}
		hi = g
		g -= step
	}
	return lo, loMark, hi, nil
}

// nextSlot is the slot of the next commit on gen, the newest the caller read: past every mark known.
func (c *chain) nextSlot(gen int64) int64 { return max(gen, c.top) + 1 }

// read returns generation n's content; errBuried if it was buried, os.ErrNotExist if it does not exist.
func (c *chain) read(n int64) ([]byte, error) {
	d, err := c.segFD(n, false)
	if err != nil {
		return nil, err
	}
	b, err := vfs.ReadLineAt(c.fs, d, genName(n))
	if err != nil {
		if err != unix.ENOENT {
			c.close()
		}
		return nil, c.segErr("open", n, genName(n), err)
	}
	if string(b) == tombText {
		return nil, errBuried
	}
	return b, nil
}

// commitOrWait commits b as generation n, settling a commit of unknown outcome
// while u.r retries it: won, or lost once n is marked, after a backoff (as long
// as the attempt took: CLAIMS-APPENDIX.md) — or, if b emptied its lane
// (u.empties), with the backoff left for the next commit, if one follows.
func (c *chain) commitOrWait(ctx context.Context, u *updating, n int64, b []byte) (bool, error) {
	won, err := c.commit(n, b)
	if mutated("undecided-recommitted") && errors.Is(err, errUndecided) {
		c.pending = -1 // given up: if its mark was made, its cases were never started
		return false, errAgain
	}
	// A commit of unknown outcome is settled, not made again: it may be ours.
	for err != nil && errors.Is(err, errUndecided) && u.r.Again(ctx, err) {
		won, err = c.settle()
	}
	if err != nil || won {
		return won, err
	}
	// Back off: a random pause below backoffLimit, unit what the lost attempt took;
	// taken later if the winner may have left nothing to claim (then none is).
	u.lost++
	unit := c.fs.Now().Sub(u.tried)
	u.pause = time.Duration(c.fs.Rand() % uint64(backoffLimit(u.lost+u.carry, unit)))
	if !u.empties {
		c.fs.Sleep(ctx, u.pause)
		u.pause = 0
	}
	_, err = c.awaitPaced(ctx, n, unit)
	return false, cmp.Or(ctx.Err(), err) // cancelled: said so, not the wait's last error
}

// backoffLimit is the bound of a lost commit's random pause (CLAIMS-APPENDIX.md):
// unit·2^(lost-1), unit at least 1 ms, at most 10 s (no overflow); lost counts
// the doublings carried from the store's last claims (contention.carry).
func backoffLimit(lost int, unit time.Duration) time.Duration {
	const most = 10 * time.Second
	unit = min(max(unit, time.Millisecond), most)
	return min(unit<<min(max(lost-1, 0), 20), most)
}

// voidAfter is how long a process waits for the mark of a slot another took
// before it voids it: longer than any writer needs, short enough to hold
// claims up no longer. FARM_CLAIM_VOID_AFTER (a Go duration) sets it, for tests.
var voidAfter = func() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("FARM_CLAIM_VOID_AFTER")); err == nil && d > 0 {
		return d
	}
	return 20 * time.Second
}()

// commit makes generation n with content b (which holds its nonce) in three steps (CLAIMS.md,
// "Commit"): false with no error if another took slot n, or voided it; an undecided one the
// caller settles, never commits anew on its base.
func (c *chain) commit(n int64, b []byte) (bool, error) {
	c.pending = -1
	d, err := c.segFD(n, n%SegmentSize == 0)
	if err != nil {
		return false, c.checkGone(err)
	}
	if mutated("link-commit") {
		return linkCommit(c, d, n, b)
	}
	testHook("write", c.dir)
	err = c.fs.Mknodat(d, slotName(n), unix.S_IFREG|0o644) // step 1, the slot
	if err == unix.EIO && !mutated("split-slot-tried-again") {
		// A slot there, or answering EIO too (GlusterFS split-brain), is taken: awaited
		// and voided; tried again, it fails for good (the simulator, seed 16 on gluster).
		var st unix.Stat_t
		if serr := c.fs.Fstatat(d, slotName(n), &st, unix.AT_SYMLINK_NOFOLLOW); serr == nil || serr == unix.EIO {
			err = unix.EEXIST
		}
	}
	if err == unix.EEXIST {
		return false, nil
	}
	if err != nil {
		// Made, its reply lost? Nobody can tell whose: it is voided after voidAfter.
		return false, c.checkGone(c.segErr("mknod", n, slotName(n), err))
	}
	err = vfs.WriteNewAt(c.fs, d, genName(n), b, 0o644) // step 2, the content
	if err == unix.EEXIST {
		// Made by the owner of a slot removed since (step 3): ours is too late.
		c.fs.Unlinkat(d, slotName(n), 0)
		return false, nil
	}
	if err != nil {
		// Not written whole: void the slot at once (nobody waits for it), say why (ENOSPC: retried).
		c.void(d, n)
		c.fs.Unlinkat(d, slotName(n), 0)
		return false, c.checkGone(c.segErr("write", n, genName(n), err))
	}
	c.pending = n
	testHook("mark", c.dir)
	return c.decide(d, c.mark(d, n)) // step 3, the mark
}

// mark makes generation n's mark, a regular file, by mknod (an O_EXCL create with no open to close).
func (c *chain) mark(d int, n int64) error { return c.fs.Mknodat(d, markName(n), unix.S_IFREG|0o644) }

// void makes generation n's mark a FIFO, unless it has a mark, so that its
// slot's owner can never mark it committed (CLAIMS.md, Voids; not a mkdir).
func (c *chain) void(d int, n int64) error {
	var err error
	if mutated("void-as-directory") {
		err = c.fs.Mkdirat(d, markName(n), 0o755) // as before 7b63338
	} else {
		err = c.fs.Mknodat(d, markName(n), unix.S_IFIFO|0o644)
	}
	if err != nil && err != unix.EEXIST {
		return c.segErr("mknod", n, markName(n), err)
	}
	return nil
}

// awaitPaced waits until generation n, whose slot another took, is marked, and returns its
// mark, voiding a slot unmarked for voidAfter. unit (0: none), what the caller's lost attempt
// took (about what the owner has left to do), paces its looks: unit/4 apart, at least 1 ms,
// doubling to 100 ms (on saturated cores: BENCHMARKS.md).
func (c *chain) awaitPaced(ctx context.Context, n int64, unit time.Duration) (mark, error) {
	start := c.fs.Now()
	wait := min(max(unit/4, time.Millisecond), 100*time.Millisecond)
	voids := 0
	for {
		m, err := c.marker(n)
		if err != nil || m != unmarked {
			return m, err
		}
		if c.fs.Now().Sub(start) >= voidAfter {
			d, err := c.segFD(n, false)
			if err == nil {
				err = c.void(d, n)
			}
			if err != nil {
				return unmarked, c.checkGone(err)
			}
			// The owner's commit is decided: it will not remove its slot.
			c.fs.Unlinkat(d, slotName(n), 0)
			if voids++; voids > 3 {
				// mknod says the mark exists, lookups that it does not: a
				// cache that does not let go. (Else look again for its type.)
				return unmarked, errInconsistent
			}
		}
		if err := c.fs.Sleep(ctx, wait); err != nil {
			return unmarked, err
		}
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// settle decides the pending commit (every undecided error leaves one), as decide does.
func (c *chain) settle() (bool, error) {
	d, err := c.segFD(c.pending, false)
	if err != nil {
		return false, undecided(c.checkGone(err))
	}
	return c.decide(d, unix.EEXIST)
}

// decide finds out the outcome of the pending commit, whose mark was tried with
// the result merr, from the mark, not merr (a reply may be lost: CLAIMS.md,
// "Outcomes decided from the filesystem"). No mark is made again.
func (c *chain) decide(d int, merr error) (bool, error) {
	n := c.pending
	if merr == nil || mutated("reply-decides") {
		return c.decided(merr == nil), nil
	}
	m, err := c.marker(n)
	switch {
	case err != nil:
		return false, undecided(err)
	case m != unmarked:
		return c.decided(m == committed), nil
	}
	// No mark: make it again, unless its error says it never can be (then
	// the commit is given up: no mark, no cases started).
	if merr == unix.ENOENT {
		if err := c.checkGone(merr); !fsretry.IsTransient(err) {
			c.pending = -1
			return false, err
		}
		if d, err = c.segFD(n, false); err != nil {
			return false, undecided(c.checkGone(err))
		}
	} else if merr != unix.EEXIST && !fsretry.IsTransient(merr) {
		c.pending = -1
		return false, c.segErr("mknod", n, markName(n), merr)
	}
	testHook("mark", c.dir)
	if err := c.mark(d, n); err != nil {
		return false, undecided(c.segErr("mknod", n, markName(n), err))
	}
	return c.decided(true), nil
}

// decided ends the pending commit with its outcome, and returns it. The slot is
// removed (one left behind costs an inode; the content and mark stop anyone from
// making generation n again). Won, it buries an old one.
func (c *chain) decided(won bool) bool {
	n := c.pending
	c.pending = -1
	c.top = max(c.top, n)
	if sd, err := c.segFD(n, false); err == nil { // the caller's may be closed
		c.fs.Unlinkat(sd, slotName(n), 0)
	}
	if !won {
		return false
	}
	testHook("marked", c.dir)
	// The generation buryAfter back is buried. A failure costs an inode but is
	// said: the first in the log, their count when the store is closed.
	if k := n - buryAfter; k >= 0 {
		if err := c.bury(k); err != nil {
			if c.buried.fails++; c.buried.first == nil && c.buried.log != nil {
				fmt.Fprintf(c.buried.log, "farm: could not bury generation %d of the claim "+
					"state (%v): it keeps its inode; farm goes on\n", k, err)
			}
			c.buried.first = cmp.Or(c.buried.first, err)
		}
	}
	return true
}

// errUndecided says a commit's mark may or may not have been made: the filesystem
// could not be asked. undecided wraps err in it, transient (fsretry).
var errUndecided = errors.New("cannot tell whether a claim was committed")

func undecided(err error) error { return fsretry.Transient(fmt.Errorf("%w: %w", errUndecided, err)) }

// checkGone says what err, a call's in the chain's directories, means, dropping the (maybe
// stale) descriptors: an ENOENT is damage only if the chain directory is gone, else passing.
func (c *chain) checkGone(err error) error {
	c.close()
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if mutated("enoent-is-damage") || gone(c.fs, c.dir) {
		return &DamageError{Path: c.dir, Why: "the chain directory is gone"}
	}
	return fsretry.Transient(err)
}

// noGeneration is what finding no generation on c means: damage if its directory is gone;
// errInconsistent if not certainly empty (its first mark, or first segment, gone), even if
// every mark found is a void (a passing ENOENT: seed 610 on gluster-dht); else nil.
func (c *chain) noGeneration() error {
	seg := filepath.Join(c.dir, segName(0))
	switch {
	case gone(c.fs, c.dir):
		return &DamageError{Path: c.dir, Why: "the chain directory is gone"}
	case mutated("one-look-is-gone") || gone(c.fs, filepath.Join(seg, markName(0))) || gone(c.fs, seg):
		return nil
	}
	return errInconsistent
}

// gone reports whether path is certainly not there, not a passing ENOENT: it
// is not found goneLooks times nor listed by its parent (or the parent cannot
// be listed now), or its parent is gone, looking up to 3 parents up (CLAIMS.md, "Damage").
func gone(fsys vfs.FS, path string) bool {
	looks := goneLooks
	if mutated("one-look-is-gone") {
		looks = 1
	}
	for depth := 3; ; depth-- {
		parent, parentFound := filepath.Dir(path), 0
		for range looks {
			if _, err := vfs.Stat(fsys, path); !errors.Is(err, fs.ErrNotExist) {
				return false
			}
			_, perr := vfs.Stat(fsys, parent)
			switch {
			case perr == nil:
				parentFound++
			case !errors.Is(perr, fs.ErrNotExist):
				return false
			}
		}
		if parentFound == looks {
			// A GlusterFS listing is read from a brick that is up: 8 passing
			// ENOENTs would otherwise take a lane for gone (seed 3609 on gluster).
			if mutated("gone-without-listing") {
				return true
			}
			names, err := vfs.ReadDirNames(fsys, parent)
			return err == nil && !slices.Contains(names, filepath.Base(path))
		}
		// The parent not found, once or every time: gone only if it is too.
		if parentFound != 0 || depth == 0 || parent == path {
			return false
		}
		path = parent
	}
}

// goneLooks is how many lookups gone makes of a name: a passing ENOENT in every one,
// at one in two, is a chance in 256 (then the listing decides).
const goneLooks = 8

// maxTombs bounds a segment's tombs: few even where a file may have only a few hundred links.
const maxTombs = 64

// bury replaces generation k and its mark by links to its segment's tomb: the names
// stay, so that nobody can ever make generation k again, and their inodes go.
func (c *chain) bury(k int64) error {
	d := -1
	if c.sfd != nil && c.sseg == k/SegmentSize {
		d = c.sfd.Fd
	} else { // k's segment is the one before the open one
		cd, err := c.dirFD()
		if err != nil {
			return err
		}
		sf, err := vfs.OpenDirAt(c.fs, cd, segName(k))
		if err != nil {
			return c.segErr("open", k, "", err)
		}
		defer sf.Close()
		d = sf.Fd
	}
	if err := c.entomb(d, k, genName(k)); err != nil {
		return err
	}
	// A void stays a FIFO (a tomb is a regular file): an owner resuming however late finds one.
	var st unix.Stat_t
	if err := c.fs.Fstatat(d, markName(k), &st, 0); err != nil { // (a mark is no link)
		return c.segErr("stat", k, markName(k), err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil
	}
	return c.entomb(d, k, markName(k))
}

// entomb renames a new link to the tomb over name, in d, generation k's segment; a
// tomb with as many links as the filesystem allows (EMLINK) is left for the next.
func (c *chain) entomb(d int, k int64, name string) error {
	c.seq++
	x := fmt.Sprintf("x.%s.%d", c.self, c.seq)
	for ; ; c.buried.tomb++ {
		tomb := "tomb" // then tomb.1, tomb.2, ...
		if c.buried.tomb > 0 {
			tomb += "." + strconv.Itoa(c.buried.tomb)
		}
		err := c.fs.Linkat(d, tomb, d, x)
		if err == unix.ENOENT {
			werr := vfs.WriteNewAt(c.fs, d, tomb, []byte(tombText), 0o644)
			if werr != nil && werr != unix.EEXIST {
				return c.segErr("create", k, tomb, werr)
			}
			err = c.fs.Linkat(d, tomb, d, x)
		}
		if err == nil {
			break
		}
		if err != unix.EMLINK || c.buried.tomb+1 >= maxTombs {
			return &os.LinkError{Op: "link", Old: c.segPath(k, tomb), New: x, Err: err}
		}
	}
	if err := c.fs.Renameat(d, x, d, name); err != nil {
		c.fs.Unlinkat(d, x, 0)
		return &os.LinkError{Op: "rename", Old: x, New: c.segPath(k, name), Err: err}
	}
	return nil
}

// DamageError says the claim state cannot be read; 'farm repair' rebuilds it.
type DamageError struct {
	Path string
	Why  string
}

// Error says what is damaged, and how.
func (e *DamageError) Error() string {
	return fmt.Sprintf("the farm's claim state %s is damaged (%s)", e.Path, e.Why)
}
