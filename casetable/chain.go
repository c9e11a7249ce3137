package casetable

import (
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

// The claim state is a chain of immutable generations (CLAIMS.md in this directory):
//
//	MISC/chain                      names the chain directory
//	MISC/claims.NONCE/              the chain directory
//	MISC/claims.NONCE/head          a hint: a recent generation number
//	MISC/claims.NONCE/SEG/s.N       generation N's slot, while it is being made (SEG = N / SegmentSize)
//	MISC/claims.NONCE/SEG/g.N       generation N's content
//	MISC/claims.NONCE/SEG/c.N       its mark: a regular file if N was committed, a FIFO if it was voided
//	MISC/claims.NONCE/SEG/tomb      what buried generations and marks are links to
//
// Generation N is committed in three steps, each an operation that is
// exclusive at the server of every filesystem farm supports, GlusterFS's
// distribute-replicate volumes included (link() is not: CLAIMS.md):
//
//  1. The slot: a mknod of s.N (an O_EXCL create with no open). Of all the
//     processes that want to make generation N, one makes the name.
//  2. The content: the slot's owner creates g.N (O_EXCL) and writes it. No
//     other process has looked the name up, so no client has it cached
//     empty: the losers of step 1 looked up s.N.
//  3. The mark: the owner makes c.N, a regular file (mknod). Only then is
//     generation N committed, and read by anyone. The owner then removes
//     s.N; a process that makes it again later fails at step 2.
//
// A slot whose owner died or stalls before its mark is voided by a process
// that waited voidAfter for the mark: it makes c.N a FIFO (mknod). A
// name has one type, made once: the owner's mark and the void exclude each
// other, so a stalled owner that resumes finds a FIFO and knows it
// lost, however long it stalled. Marks are made in order, and a
// generation's content is computed from the newest committed one before
// it: the committed generations form one linear history.
//
// The names g.N and c.N, once made, exist until the farm is cleaned: old
// generations and their marks are "buried" by renaming a link to the
// segment's tomb over them (the inode goes, the name stays), never removed.
// So a process that stalled for any length of time cannot commit on an old
// view: the content and the mark it would make exist.
//
// No correctness depends on reading a file another client rewrote: a
// generation's content is read only once its mark exists, after its writer
// closed it, and never changes. The one file rewritten in place, the head
// hint (a record of fixed length, vfs.WriteInPlace), only saves lookups:
// one that is stale costs them.

// SegmentSize is the number of generations per segment directory.
const SegmentSize = 4096

// buryAfter is how many generations a generation stays readable before it is
// buried. A reader that falls further behind finds a tomb and starts over
// from the hint.
const buryAfter = 1024

// hintEvery: the head hint is rewritten every hintEvery generations.
const hintEvery = 256

const (
	chainMagic = "farm-chain v2 "
	genMagic   = "farm-gen v1 "
	tombText   = "farm-gen v1 buried\n"
)

// testHook, if set (by tests only), is called at each stage of a commit
// on the chain in chainDir (a lane's, or MISC/claims.*): "write" before
// its slot is taken, "mark" once the generation is written and before it
// is marked, "marked" once it is marked (committed); and, with the path
// looked at, "table" before a run start's or farm add's first look at a
// run table (tableID), "gone" before the look that decides whether a
// name that answered ENOENT is gone (goneOr), "inspect" before a repair's
// reading looks for the chain's newest generation. The simulator aims
// faults there.
var testHook func(stage, path string)

// fault, if set (by tests only), is asked before some of the claim path's
// filesystem calls whether the call fails, and with what error (nil: it
// runs as usual). The calls, by op: "lookup" (a generation's mark), "read"
// (a generation), "write" (a commit's slot), "mark" (its mark), "mark.reply"
// (asked after a mark that was made: an error is a lost reply), "bury" (a
// link to the tomb), "table.stat", "table.read".
var fault func(op string) error

// injected returns the error fault gives op, if any.
func injected(op string) error {
	if fault == nil {
		return nil
	}
	return fault(op)
}

// errBuried is returned when a generation has been buried.
var errBuried = errors.New("generation buried")

// chain is one farm's chain of generations.
//
// Every operation on the chain's files is relative to an open descriptor of
// their directory (openat, linkat, ...): with a network filesystem's entry
// cache off (close-to-open consistency), a path is looked up at the server
// one component at a time, and an absolute path into the farm costs five or
// more lookups where a name in an open directory costs one.
type chain struct {
	dir  string // MISC/claims.NONCE
	seq  int    // counter for our private names
	self string // unique among every process of every host: names our files

	fs   vfs.FS
	dfd  *vfs.File // dir, opened O_PATH; nil until needed
	sfd  *vfs.File // the segment directory sseg, opened O_PATH
	sseg int64

	// top is the newest generation known to be marked (committed or
	// voided); the next commit takes slot top+1. -1: none known.
	top int64

	// pending is the commit whose link was tried and whose outcome is not
	// known yet (settle); nil when there is none.
	pending *pendingCommit

	log       io.Writer // where a failure to bury is said, once; nil: not said
	tomb      int       // the tomb buried generations are linked to: tomb, tomb.1, ...
	buryFails int       // generations that could not be buried
	buryErr   error     // the first such failure
}

// pendingCommit is a commit whose slot s.n was taken and whose content
// g.n was written, and whose mark may have been made.
type pendingCommit struct {
	n int64
}

// openDir opens a directory for the *at calls only (O_PATH: no open at the
// server, and nothing to flush on close).
func openDir(fsys vfs.FS, path string) (*vfs.File, error) {
	return vfs.Open(fsys, unix.AT_FDCWD, path, unix.O_PATH|unix.O_DIRECTORY, 0)
}

// openDirAt opens the directory name in the directory open as d, as openDir.
func openDirAt(fsys vfs.FS, d int, name string) (*vfs.File, error) {
	return vfs.Open(fsys, d, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
}

// dirFD returns the chain directory's descriptor.
func (c *chain) dirFD() (int, error) {
	if c.dfd == nil {
		f, err := openDir(c.fs, c.dir)
		if err != nil {
			return -1, err
		}
		c.dfd = f
	}
	return c.dfd.Fd, nil
}

// segFD returns the descriptor of generation n's segment directory; with
// mk, it makes the directory if it is not there.
func (c *chain) segFD(n int64, mk bool) (int, error) {
	seg := n / SegmentSize
	if c.sfd != nil && c.sseg == seg {
		return c.sfd.Fd, nil
	}
	if c.sfd != nil {
		c.sfd.Close()
		c.sfd = nil
	}
	d, err := c.dirFD()
	if err != nil {
		return -1, err
	}
	name := segName(n)
	if mk {
		if err := c.fs.Mkdirat(d, name, 0o755); err != nil && err != unix.EEXIST {
			if err != unix.ENOENT {
				c.forget()
			}
			return -1, &os.PathError{Op: "mkdir", Path: filepath.Join(c.dir, name), Err: err}
		}
	}
	f, err := openDirAt(c.fs, d, name)
	if err != nil {
		if err != unix.ENOENT {
			// A stale handle (an NFS failover): look the chain
			// directory up again next time.
			c.forget()
		}
		return -1, &os.PathError{Op: "open", Path: filepath.Join(c.dir, name), Err: err}
	}
	c.sfd, c.sseg = f, seg
	return f.Fd, nil
}

// forget drops the open descriptors, after an error: the next operation
// opens the directories again by name (a directory that was removed and
// made again, or a stale NFS handle, is then seen as it is).
func (c *chain) forget() {
	if c.sfd != nil {
		c.sfd.Close()
		c.sfd = nil
	}
	if c.dfd != nil {
		c.dfd.Close()
		c.dfd = nil
	}
}

// close releases the chain's descriptors.
func (c *chain) close() {
	if c != nil {
		c.forget()
	}
}

func newNonce(fsys vfs.FS) string {
	return fmt.Sprintf("%016x", fsys.Rand())
}

// openChain opens the chain named by misc/chain; ErrNoState if there is none.
func openChain(fsys vfs.FS, misc string) (*chain, error) {
	b, err := readChainFile(fsys, misc)
	if err != nil {
		return nil, err
	}
	name, ok := parseChainFile(b)
	for try := 0; !ok && try < chainRereads && unfinished(b); try++ {
		// Empty or cut short: made by O_EXCL create a moment ago
		// (createChain) and not written yet, or cached so by this
		// client when it lost the race to make it. Read again, past
		// the caches; an empty file that stays so is damage (or the
		// placeholder of a repair, repair.go). Gone meanwhile: its
		// maker found the disk full and removed it (createChain).
		fsys.Sleep(context.Background(), 100*time.Millisecond)
		if b, err = readChainFile(fsys, misc); err != nil {
			return nil, err
		}
		name, ok = parseChainFile(b)
	}
	if !ok {
		return nil, &DamageError{Path: filepath.Join(misc, "chain"), Why: fmt.Sprintf("unreadable content %.40q", b)}
	}
	return newChain(fsys, filepath.Join(misc, name)), nil
}

// readChainFile reads misc/chain: ErrNoState if it is certainly gone, a
// transient error if it may only seem so.
func readChainFile(fsys vfs.FS, misc string) ([]byte, error) {
	b, err := vfs.ReadFile(fsys, filepath.Join(misc, "chain"))
	if os.IsNotExist(err) {
		if !mutated("no-state-ends-claims") && !gone(fsys, filepath.Join(misc, "chain")) {
			return nil, fsretry.Transient(err)
		}
		return nil, ErrNoState
	}
	if errors.Is(err, unix.EISDIR) {
		return nil, &DamageError{Path: filepath.Join(misc, "chain"), Why: "a directory, not a file"}
	}
	return b, err
}

// chainRereads is how many times openChain reads an empty MISC/chain again,
// 0.1 s apart, before it believes it.
var chainRereads = 20

// unfinished reports whether b, MISC/chain's content, may be one still
// being written: empty, or the start of a chain line with no newline yet.
func unfinished(b []byte) bool {
	s := string(b)
	return !strings.HasSuffix(s, "\n") && (strings.HasPrefix(s, chainMagic) || strings.HasPrefix(chainMagic, s))
}

// newChain returns the chain in directory dir; it does no I/O.
func newChain(fsys vfs.FS, dir string) *chain {
	return &chain{fs: fsys, dir: dir, self: newNonce(fsys), top: -1}
}

// parseChainFile reads MISC/chain's content: the name of the chain
// directory it names.
func parseChainFile(b []byte) (name string, ok bool) {
	s, ok := strings.CutPrefix(string(b), chainMagic)
	s, ok2 := strings.CutSuffix(s, "\n")
	if !ok || !ok2 || !strings.HasPrefix(s, "claims.") || strings.ContainsAny(s, "/ \n") {
		return "", false
	}
	return s, true
}

// createChain makes a new chain and names it in misc/chain, unless misc/chain
// exists: then it opens that one (another process made it first).
func createChain(fsys vfs.FS, misc string) (*chain, error) {
	name := "claims." + newNonce(fsys)
	dir := filepath.Join(misc, name)
	// A new name (a nonce): EEXIST is our own mkdir, its reply lost.
	if err := vfs.Mkdir(fsys, dir, 0o755); err != nil && (!errors.Is(err, unix.EEXIST) || mutated("own-mkdir-eexist-fatal")) {
		return nil, passing(fsys, misc, err)
	}
	if mutated("chain-file-by-link") {
		return linkChain(fsys, misc, name)
	}
	for try := 0; ; try++ {
		made, err := makeChainFile(fsys, misc, name)
		if err != nil {
			return nil, err
		}
		c, err := openChain(fsys, misc)
		if errors.Is(err, ErrNoState) && !made {
			// Another process made MISC/chain, then removed it
			// unwritten (its disk was full): make it again.
			if mutated("chain-made-once") {
				return nil, err
			}
			if try < chainRemakes {
				continue
			}
			// Not ErrNoState: the farm is being submitted.
			err = fsretry.Transient(fmt.Errorf("%s/chain was made by another process and removed unwritten %d times (its disk full?): free space on the farm's filesystem and run the command again", misc, try+1))
		}
		if err != nil {
			return nil, err
		}
		if c.dir != dir {
			vfs.Remove(fsys, dir) // another process's chain won
		}
		return c, nil
	}
}

// chainRemakes is how many times createChain makes MISC/chain again after
// another process made it and removed it unwritten.
const chainRemakes = 3

// makeChainFile makes MISC/chain naming the chain directory name, by
// O_EXCL create (one process makes it), written at once; a reader that
// finds it empty meanwhile reads again (openChain). It reports whether
// this call made it: false when another process had (EEXIST). On an error,
// misc/name goes unless MISC/chain may name it.
func makeChainFile(fsys vfs.FS, misc, name string) (bool, error) {
	dir := filepath.Join(misc, name)
	path := filepath.Join(misc, "chain")
	f, err := vfs.Open(fsys, unix.AT_FDCWD, path, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o644)
	named := false // MISC/chain may name dir: it stays
	if err == nil {
		_, err = f.Write([]byte(chainMagic + name + "\n"))
		cerr := f.Close()
		switch {
		case err != nil && (errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) || mutated("chain-write-lost-removes-chain")):
			// Not written (a full disk refuses a write): nobody can
			// have read a chain in it, so it goes, for the next
			// submit. Unless it cannot be removed: then dir stays.
			if rerr := vfs.Remove(fsys, path); rerr != nil && !mutated("chain-close-removes-dir") {
				named = true
			}
		case err != nil:
			// Any other error may be a lost reply of a write that
			// was made: others may be using the chain it names, so
			// both stay (if it was not made, MISC/chain stays empty,
			// which every command reports as damage, for farm
			// repair).
			named = true
		default:
			// A close that failed after the write (an NFS flush,
			// or its reply lost) may have left it readable to
			// others: it stays, and so does dir, which it names.
			err, named = cerr, true
		}
	} else if err == unix.EEXIST {
		return false, nil // another process's: read it
	}
	if err != nil {
		if !named || mutated("chain-close-removes-dir") {
			vfs.Remove(fsys, dir)
		}
		return false, passing(fsys, misc, &os.PathError{Op: "create", Path: path, Err: err})
	}
	return true, nil
}

// linkChain is createChain as it was before 0b47c1e: MISC/chain made by
// link() of a file written beside it, which is not exclusive on a
// distribute-replicate GlusterFS volume (the simulator's mutant
// chain-file-by-link).
func linkChain(fsys vfs.FS, misc, name string) (*chain, error) {
	path := filepath.Join(misc, "chain")
	tmp := path + ".tmp." + newNonce(fsys)
	err := vfs.WriteAtomic(fsys, tmp, 0o644, []byte(chainMagic+name+"\n"))
	if err == nil {
		err = fsys.Linkat(unix.AT_FDCWD, tmp, unix.AT_FDCWD, path)
		if err == unix.EEXIST {
			err = nil
		}
	}
	fsys.Unlinkat(unix.AT_FDCWD, tmp, 0)
	if err != nil {
		return nil, passing(fsys, misc, err)
	}
	return openChain(fsys, misc)
}

func segName(n int64) string { return fmt.Sprintf("%06d", n/SegmentSize) }

func genName(n int64) string { return "g." + strconv.FormatInt(n, 10) }

func markName(n int64) string { return "c." + strconv.FormatInt(n, 10) }

func slotName(n int64) string { return "s." + strconv.FormatInt(n, 10) }

func (c *chain) genPath(n int64) string {
	return filepath.Join(c.dir, segName(n), genName(n))
}

// mark is what a generation's mark says.
type mark int

const (
	unmarked  mark = iota // no mark (yet): not committed, or still being written
	committed             // a regular file: committed (or its tomb)
	voided                // anything else (a FIFO): voided
)

// marker looks up generation n's mark. Names are never removed and never
// change type, so a mark seen is always true; a missing one may be stale
// (a cached negative lookup), which makes a commit find its slot taken,
// no worse.
func (c *chain) marker(n int64) (mark, error) {
	d, err := c.segFD(n, false)
	if os.IsNotExist(err) {
		// The segment is not made yet (or the chain's directory is
		// gone, or a passing ENOENT: what latest makes of it, its
		// callers decide: Store.refresh, chain.noGeneration).
		return unmarked, nil
	}
	if err != nil {
		return unmarked, err
	}
	var st unix.Stat_t
	err = injected("lookup")
	if err == nil {
		err = c.fs.Fstatat(d, markName(n), &st, unix.AT_SYMLINK_NOFOLLOW)
	}
	switch {
	case err == nil && st.Mode&unix.S_IFMT == unix.S_IFREG:
		return committed, nil
	case err == nil:
		return voided, nil
	case err == unix.ENOENT:
		return unmarked, nil
	}
	c.forget()
	return unmarked, &os.PathError{Op: "lstat", Path: filepath.Join(c.dir, segName(n), markName(n)), Err: err}
}

// errInconsistent: a mark seen, then not seen: a stale cache answered one of
// the lookups. The caller reads again later.
var errInconsistent = fsretry.Transient(errors.New("the claim state's marks looked up inconsistently (a network filesystem's cache); reading again"))

// readAt reads the file name in the directory open as d.
func readAt(fsys vfs.FS, d int, name string) ([]byte, error) {
	f, err := vfs.Open(fsys, d, name, unix.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// What is read here (a generation, the head hint) is one line,
	// written whole before anyone reads it: a read that returns less than
	// asked and ends the line has read it all, without a second read to
	// be told EOF (a round trip to a file server).
	var b []byte
	buf := make([]byte, 4096)
	for {
		n, err := f.Read(buf)
		b = append(b, buf[:n]...)
		if err == io.EOF || err == nil && n > 0 && n < len(buf) && b[len(b)-1] == '\n' {
			return b, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// hint reads the head hint (-1 if none or unreadable).
func (c *chain) hint() int64 {
	d, err := c.dirFD()
	if err != nil {
		return -1
	}
	b, err := readAt(c.fs, d, "head")
	if err != nil {
		return -1
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// latest finds the newest committed generation, starting from from (a
// generation known to be marked, or -1). It returns -1 if the chain has
// none. The newest mark found, committed or voided, becomes c.top.
func (c *chain) latest(from int64) (int64, error) { return c.latestNear(from, 0) }

// latestNear is latest for a caller that expects the newest generation
// about near past from (the generations others committed between its own
// last two commits, say): it looks up from+near and, if that is marked,
// gallops on from there, else looks up the one below — two lookups when
// the guess is right, where a gallop from from costs 2·log2(near). The
// guess only orders the lookups: whatever it is, the answer is latest's
// (with lookups that agree; a cache that hides a mark may make either
// answer older, never below from, and a commit on it only loses).
func (c *chain) latestNear(from, near int64) (int64, error) {
	// The hint is read only by a process that knows no generation: from a
	// known one, a gallop finds the newest in 2·log2(distance) lookups.
	from = max(from, c.top)
	if from < 0 {
		if h := c.hint(); h >= 0 {
			if m, err := c.marker(h); err != nil {
				return 0, err
			} else if m != unmarked {
				from = h
			}
		}
	}
	lo, loMark, hi, err := c.guess(from, near) // lo marked (or -1), hi not (or -1)
	if err != nil {
		return 0, err
	}
	step := int64(1)
	for hi < 0 {
		m, err := c.marker(lo + step)
		if err != nil {
			return 0, err
		}
		if m == unmarked {
			hi = lo + step
			break
		}
		lo, loMark = lo+step, m
		step *= 2
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		m, err := c.marker(mid)
		if err != nil {
			return 0, err
		}
		if m != unmarked {
			lo, loMark = mid, m
		} else {
			hi = mid
		}
	}
	// lo is the newest mark; the newest committed generation is it or
	// the first below it that is not voided (voids are rare).
	c.top = max(c.top, lo)
	if loMark == committed {
		return lo, nil
	}
	for n := lo; n >= 0; n-- {
		m, err := c.marker(n)
		if err != nil {
			return 0, err
		}
		switch m {
		case committed:
			return n, nil
		case unmarked:
			// Marks are made in order: one below a mark seen is
			// there, whatever a cache said.
			return 0, errInconsistent
		}
	}
	return -1, nil
}

// guess looks up from+near, and the one below if that is not marked, for
// latestNear: it returns the highest generation found marked (lo, with
// its mark; from, not looked up, if none) and the lowest found not marked
// (hi; -1 if none). With no guess (near < 2, or from unknown) it looks up
// nothing.
func (c *chain) guess(from, near int64) (lo int64, loMark mark, hi int64, err error) {
	lo, loMark, hi = from, unmarked, -1
	if from < 0 || near < 2 {
		return lo, loMark, hi, nil
	}
	g := from + near
	m, err := c.marker(g)
	if err != nil || m != unmarked {
		return g, m, -1, err
	}
	if m, err = c.marker(g - 1); err != nil || m != unmarked {
		return g - 1, m, g, err
	}
	return lo, loMark, g - 1, nil
}

// nextSlot is the generation the next commit on generation gen (the newest
// committed one the caller read) takes: past every mark known.
func (c *chain) nextSlot(gen int64) int64 { return max(gen, c.top) + 1 }

// read returns generation n's content; errBuried if it was buried,
// os.ErrNotExist if it does not exist.
func (c *chain) read(n int64) ([]byte, error) {
	d, err := c.segFD(n, false)
	if err != nil {
		return nil, err
	}
	b, err := readAt(c.fs, d, genName(n))
	if ierr := injected("read"); ierr != nil {
		err = ierr
	}
	if err != nil {
		if err != unix.ENOENT {
			c.forget()
		}
		return nil, &os.PathError{Op: "open", Path: c.genPath(n), Err: err}
	}
	if string(b) == tombText {
		return nil, errBuried
	}
	return b, nil
}

// voidAfter is how long a process waits for the mark of a slot that
// another process took before it voids the slot: longer than any writer
// needs between its two steps, short enough that a writer that died there
// holds the farm's claims up for no longer. FARM_CLAIM_VOID_AFTER (a Go
// duration) sets it, for tests.
var voidAfter = func() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("FARM_CLAIM_VOID_AFTER")); err == nil && d > 0 {
		return d
	}
	return 20 * time.Second
}()

// commit tries to make generation n with content b (which holds nonce; the
// protocol does not need it, a reader of the chain may). It reports whether
// it made it; false with a nil error means another process took slot n
// first, or voided it before this commit was marked: see await. An error
// that Undecided reports means the mark may have been made: the commit
// stays pending, and the caller must call settle (after a pause) until it
// knows, never commit anew on the same base.
func (c *chain) commit(n int64, b []byte, nonce string) (bool, error) {
	c.dropPending()
	d, err := c.segFD(n, n%SegmentSize == 0)
	if err != nil {
		return false, c.checkGone(err)
	}
	if mutated("link-commit") {
		return c.linkCommit(d, n, b)
	}
	if testHook != nil {
		testHook("write", c.dir)
	}
	// Step 1, the slot.
	err = injected("write")
	if err == nil {
		err = c.fs.Mknodat(d, slotName(n), unix.S_IFREG|0o644)
	}
	if err == unix.EEXIST || err == unix.EIO && c.slotThere(d, n) {
		return false, nil
	}
	if err != nil {
		// If the slot was made and the reply lost, nobody can tell
		// whose it is: it is voided after voidAfter.
		return false, c.checkGone(&os.PathError{Op: "mknod", Path: filepath.Join(c.dir, segName(n), slotName(n)), Err: err})
	}
	// Step 2, the content.
	f, err := vfs.Open(c.fs, d, genName(n), unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW, 0o644)
	if err == unix.EEXIST {
		// Generation n was made by the owner of a slot that was
		// removed since (step 3): ours is too late.
		c.fs.Unlinkat(d, slotName(n), 0)
		return false, nil
	}
	if err == nil {
		_, err = f.Write(b)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		// Not written whole: void the slot at once, so that nobody
		// waits for it, and say why (a full disk is retried).
		c.void(d, n)
		c.fs.Unlinkat(d, slotName(n), 0)
		return false, c.checkGone(&os.PathError{Op: "write", Path: c.genPath(n), Err: err})
	}
	// Step 3, the mark.
	c.pending = &pendingCommit{n: n}
	if testHook != nil {
		testHook("mark", c.dir)
	}
	return c.decide(d, c.mark(d, n))
}

// slotThere reports whether generation n's slot, whose mknod answered EIO,
// is there: its name found, or answering EIO too. A GlusterFS name in
// split-brain (made by another client as a brick came back) answers EIO
// to every call until an administrator heals it; a slot so is taken, by
// a process that may have died before its mark, and is awaited and
// voided after voidAfter as any other. Tried again instead, from a fresh
// reading, it fails for good (the simulator, seed 16 on gluster).
func (c *chain) slotThere(d int, n int64) bool {
	if mutated("split-slot-tried-again") {
		return false
	}
	var st unix.Stat_t
	err := c.fs.Fstatat(d, slotName(n), &st, unix.AT_SYMLINK_NOFOLLOW)
	return err == nil || err == unix.EIO
}

// linkCommit is commit as it was before bef773f: generation n made by a
// link() of a file of its own onto its name, which is not exclusive on a
// distribute-replicate GlusterFS volume (the simulator's mutant
// link-commit).
func (c *chain) linkCommit(d int, n int64, b []byte) (bool, error) {
	c.seq++
	x := fmt.Sprintf("x.%s.%d", c.self, c.seq)
	if err := vfs.WriteAtomic(c.fs, filepath.Join(c.dir, segName(n), x), 0o644, b); err != nil {
		return false, c.checkGone(err)
	}
	err := c.fs.Linkat(d, x, d, genName(n))
	c.fs.Unlinkat(d, x, 0)
	if err == unix.EEXIST {
		return false, nil
	}
	if err != nil {
		return false, c.checkGone(err)
	}
	if err := c.fs.Mknodat(d, markName(n), unix.S_IFREG|0o644); err != nil && err != unix.EEXIST {
		return false, c.checkGone(err)
	}
	c.pending = &pendingCommit{n: n}
	return c.decided(true), nil
}

// mark makes generation n's mark, a regular file: mknod, which is an
// O_EXCL create with no open to close.
func (c *chain) mark(d int, n int64) error {
	err := injected("mark")
	if err == nil {
		err = c.fs.Mknodat(d, markName(n), unix.S_IFREG|0o644)
		if err == nil {
			err = injected("mark.reply")
		}
	}
	return err
}

// void makes generation n's mark a FIFO, unless it has a mark: the slot's
// owner can then never mark it committed. The mark and the void are both
// a mknod of the name, of two types: the server lets one of them make it,
// as it does two creates. (A directory would not do: on a
// distribute-replicate GlusterFS volume, a mkdir and a create of one name
// both succeeded in 1 of 4,000 races, issue 21.)
func (c *chain) void(d int, n int64) error {
	var err error
	if mutated("void-as-directory") {
		err = c.fs.Mkdirat(d, markName(n), 0o755) // as before 7b63338
	} else {
		err = c.fs.Mknodat(d, markName(n), unix.S_IFIFO|0o644)
	}
	if err != nil && err != unix.EEXIST {
		return &os.PathError{Op: "mknod", Path: filepath.Join(c.dir, segName(n), markName(n)), Err: err}
	}
	return nil
}

// await waits until generation n, whose slot another process took, is
// marked, and returns its mark. A slot left unmarked for voidAfter (its
// owner died or stalls between its two steps) is voided.
func (c *chain) await(ctx context.Context, n int64) (mark, error) {
	return c.awaitPaced(ctx, n, 0)
}

// awaitPaced is await for a claimer whose lost attempt took unit: the
// slot's owner has about that long to go (its content and its mark, the
// same calls), so the looks start a quarter of it apart, not 1 ms, and
// double up to 100 ms. On a filesystem of 1 ms a call it is await; on the
// cluster rig's saturated cores, where a call took 50–300 ms, a loser
// looked for the mark 3–4 times a generation (BENCHMARKS.md).
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
			// The slot's owner will not remove it: its commit is
			// decided. (If it does, when it resumes, no harm.)
			c.fs.Unlinkat(d, slotName(n), 0)
			if voids++; voids > 3 {
				// mknod says the mark exists, lookups that it
				// does not: a cache that does not let go.
				return unmarked, errInconsistent
			}
			// Whose mark came first is its type: look again, after
			// the pause.
		}
		if err := c.fs.Sleep(ctx, wait); err != nil {
			return unmarked, err
		}
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// settle goes on with the pending commit (see commit): it finds out
// whether its mark was made, and makes it if it certainly was not.
func (c *chain) settle() (bool, error) {
	p := c.pending
	if p == nil {
		return false, errors.New("no commit to settle")
	}
	d, err := c.segFD(p.n, false)
	if err != nil {
		return false, undecided(c.checkGone(err))
	}
	return c.decide(d, unix.EEXIST)
}

// decide finds out the outcome of the pending commit, whose mark was tried
// with the result merr, from the filesystem and not from merr: a mark that
// was made can report an error (its reply lost; a retried request answered
// EEXIST). A regular file is our mark (only a slot's owner makes one), a
// FIFO a void (our commit came too late), no mark at all a mark not made:
// it is made again. What cannot be looked up leaves the outcome open (Undecided).
func (c *chain) decide(d int, merr error) (bool, error) {
	p := c.pending
	if mutated("reply-decides") {
		return c.decided(merr == nil), nil
	}
	if merr == nil {
		return c.decided(true), nil
	}
	m, err := c.marker(p.n)
	switch {
	case err != nil:
		return false, undecided(err)
	case m == committed:
		return c.decided(true), nil
	case m == voided:
		return c.decided(false), nil
	}
	// No mark: it was not made. Make it again, unless its error says it
	// never can be.
	if merr == unix.ENOENT {
		if err := c.checkGone(merr); !fsretry.IsTransient(err) {
			c.dropPending()
			return false, err
		}
		if d, err = c.segFD(p.n, false); err != nil {
			return false, undecided(c.checkGone(err))
		}
	} else if merr != unix.EEXIST && !fsretry.IsTransient(merr) {
		c.dropPending()
		return false, &os.PathError{Op: "mknod", Path: filepath.Join(c.dir, segName(p.n), markName(p.n)), Err: merr}
	}
	if testHook != nil {
		testHook("mark", c.dir)
	}
	if err := c.mark(d, p.n); err != nil {
		return false, undecided(&os.PathError{Op: "mknod", Path: filepath.Join(c.dir, segName(p.n), markName(p.n)), Err: err})
	}
	return c.decided(true), nil
}

// decided ends the pending commit with its outcome, and returns it. The
// slot is removed: generation n is decided, and its content and mark are
// what stops anyone from making it again.
func (c *chain) decided(won bool) bool {
	p := c.pending
	c.pending = nil
	c.top = max(c.top, p.n)
	if sd, err := c.segFD(p.n, false); err == nil {
		// (The caller's descriptor may have been closed since:
		// forget.) A slot left behind
		// costs an inode, nothing else.
		c.fs.Unlinkat(sd, slotName(p.n), 0)
	}
	if won {
		if testHook != nil {
			testHook("marked", c.dir)
		}
		c.afterCommit(p.n)
	}
	return won
}

// dropPending forgets a pending commit whose outcome no longer matters
// (the caller gave up): if its mark was made, the generation is ours and
// its cases were never started.
func (c *chain) dropPending() { c.pending = nil }

// UndecidedError says a commit's mark may or may not have been made: the
// filesystem could not be asked. It is transient (fsretry).
type UndecidedError struct{ Err error }

func (e *UndecidedError) Error() string {
	return fmt.Sprintf("cannot tell whether a claim was committed: %v", e.Err)
}
func (e *UndecidedError) Unwrap() error { return e.Err }

func undecided(err error) error { return fsretry.Transient(&UndecidedError{err}) }

// checkGone says what err, an error of an operation in the chain's
// directories, means. The open descriptors are dropped (a stale handle is
// looked up again next time). An ENOENT is believed only if the chain
// directory is gone, looked up afresh from MISC: then the state is damaged.
// Otherwise it was a network filesystem's passing mistake (GlusterFS
// answers ENOENT to a link while a replica is down), retried as transient.
func (c *chain) checkGone(err error) error {
	c.forget()
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if mutated("enoent-is-damage") {
		return &DamageError{Path: c.dir, Why: "the chain directory is gone"}
	}
	if gone(c.fs, c.dir) {
		return &DamageError{Path: c.dir, Why: "the chain directory is gone"}
	}
	return fsretry.Transient(err)
}

// noGeneration is what latest's finding no generation on the chain c
// means: a *DamageError if its directory is gone; errInconsistent
// (transient: look again) if the chain is not certainly empty — a lookup
// that found no mark, no segment or no directory may have been a passing
// ENOENT (a GlusterFS brick down); nil if it certainly has no generation
// yet.
func (c *chain) noGeneration() error {
	// Not even when the marks found are all voids: a lookup of the one
	// after them may have been a passing ENOENT (the simulator, seed 610
	// on gluster-dht: a resubmit told "not submitted").
	if gone(c.fs, c.dir) {
		return &DamageError{Path: c.dir, Why: "the chain directory is gone"}
	}
	if !c.empty() {
		return errInconsistent
	}
	return nil
}

// empty reports whether the chain certainly has no generation yet, which
// latest found none of: its first mark, or its first segment, is gone
// (a lookup that found neither may have been a passing ENOENT).
func (c *chain) empty() bool {
	seg := filepath.Join(c.dir, segName(0))
	if mutated("one-look-is-gone") {
		return true
	}
	return gone(c.fs, filepath.Join(seg, markName(0))) || gone(c.fs, seg)
}

// gone reports whether the name path (a chain's directory, MISC/chain, a
// run's table) is certainly not there: looked up afresh goneLooks times,
// it is never found, and its parent is always found — or is
// itself gone (a farm never submitted has no MISC). (A GlusterFS client
// answers ENOENT now and then while a brick of the replica set is down —
// to one lookup in two in the simulator's model, SIMULATION.md —, which
// one look would take for damage, for a farm never submitted, or for a
// lane already closed. On a local disk the looks cost microseconds; where
// a brick stays down, the callers' retries over minutes are what
// protects.)
func gone(fsys vfs.FS, path string) bool {
	return goneAt(fsys, path, 3)
}

// goneAt is gone, looking up to depth parents up.
func goneAt(fsys vfs.FS, path string, depth int) bool {
	looks := goneLooks
	if mutated("one-look-is-gone") {
		looks = 1
	}
	parentFound := 0
	for i := 0; i < looks; i++ {
		if _, err := vfs.Stat(fsys, path); !errors.Is(err, fs.ErrNotExist) {
			return false
		}
		_, perr := vfs.Stat(fsys, filepath.Dir(path))
		switch {
		case perr == nil:
			parentFound++
		case !errors.Is(perr, fs.ErrNotExist):
			return false
		}
	}
	if parentFound == looks {
		// And not in its parent's listing, which a GlusterFS client
		// reads from a brick that is up (a passing ENOENT is a
		// lookup's): one in 256 of a brick's outages would otherwise
		// take a lane for gone (the simulator, seed 3609 on gluster).
		return !listed(fsys, path)
	}
	// The parent was not found, once or every time: gone only if it
	// is certainly gone too.
	return parentFound == 0 && depth > 0 && filepath.Dir(path) != path && goneAt(fsys, filepath.Dir(path), depth-1)
}

// goneLooks is how many lookups gone makes of a name: a passing ENOENT in
// every one of them, at one in two, is a chance in 256 (then the
// parent's listing decides).
const goneLooks = 8

// listed reports whether path's parent lists it, or cannot be listed now
// (then it may).
func listed(fsys vfs.FS, path string) bool {
	if mutated("gone-without-listing") {
		return false
	}
	names, err := vfs.ReadDirNames(fsys, filepath.Dir(path))
	return err != nil || slices.Contains(names, filepath.Base(path))
}

// writeNewAt writes b to a new file name in the directory open as d, in one
// write.
func writeNewAt(fsys vfs.FS, d int, name string, b []byte) error {
	return vfs.WriteNewAt(fsys, d, name, b, 0o644)
}

// afterCommit keeps the chain small: it buries the generation buryAfter
// back and now and then moves the head hint on. Failures are harmless (a
// generation left unburied costs an inode; an old hint costs lookups), but
// not silent: the first failure to bury is said in the log, and their
// count when the store is closed (Store.Close).
func (c *chain) afterCommit(n int64) {
	if k := n - buryAfter; k >= 0 {
		if err := c.bury(k); err != nil {
			c.buryFails++
			if c.buryErr == nil {
				c.buryErr = err
				if c.log != nil {
					fmt.Fprintf(c.log, "farm: could not bury generation %d of the claim state (%v): it keeps its inode; farm goes on\n", k, err)
				}
			}
		}
	}
	if n%hintEvery == 0 {
		if d, err := c.dirFD(); err == nil {
			writeHint(c.fs, d, n)
		}
	}
}

// writeHint makes the head hint say n: a record of 24 bytes written in
// place at offset 0, in one write, so that two committers writing at once
// leave one value or the other, whole — never a rename onto "head":
// renames of several clients onto one name can deadlock a GlusterFS
// distribute-replicate volume (vfs.WriteInPlace). A reader that finds the file empty (just made)
// or older than the newest hint has a hint that costs it lookups, no more.
func writeHint(fsys vfs.FS, d int, n int64) {
	vfs.WriteInPlace(fsys, d, "head", []byte(fmt.Sprintf("%-23d\n", n)))
}

// tombName is the name of the segment's tomb number i: tomb, tomb.1, ...
func tombName(i int) string {
	if i == 0 {
		return "tomb"
	}
	return "tomb." + strconv.Itoa(i)
}

// maxTombs bounds the tombs of a segment: SegmentSize links need few tombs
// even where a file may have only a few hundred links.
const maxTombs = 64

// bury replaces generation k and its mark by links to its segment's tomb:
// the names stay, so that nobody can ever make generation k again, and
// their inodes go.
func (c *chain) bury(k int64) error {
	var d int
	if c.sfd != nil && c.sseg == k/SegmentSize {
		d = c.sfd.Fd
	} else {
		// k's segment is the one before the open one.
		cd, err := c.dirFD()
		if err != nil {
			return err
		}
		sf, err := openDirAt(c.fs, cd, segName(k))
		if err != nil {
			return &os.PathError{Op: "open", Path: filepath.Join(c.dir, segName(k)), Err: err}
		}
		defer sf.Close()
		d = sf.Fd
	}
	if err := c.entomb(d, k, genName(k)); err != nil {
		return err
	}
	// A tomb is a regular file, as a committed generation's mark is; a
	// void stays a FIFO (voids are rare): an owner that resumes after
	// ever so long must find it one.
	var st unix.Stat_t
	if err := c.fs.Fstatat(d, markName(k), &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &os.PathError{Op: "lstat", Path: filepath.Join(c.dir, segName(k), markName(k)), Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil
	}
	return c.entomb(d, k, markName(k))
}

// entomb renames a new link to the tomb over name, in the directory open
// as d, generation k's segment. A tomb that has as many links as the
// filesystem allows (EMLINK) is left for the next one.
func (c *chain) entomb(d int, k int64, name string) error {
	c.seq++
	x := fmt.Sprintf("x.%s.%d", c.self, c.seq)
	for {
		tomb := tombName(c.tomb)
		err := injected("bury")
		if err == nil {
			err = c.fs.Linkat(d, tomb, d, x)
		}
		if err == unix.ENOENT {
			if werr := writeNewAt(c.fs, d, tomb, []byte(tombText)); werr != nil && werr != unix.EEXIST {
				return &os.PathError{Op: "create", Path: filepath.Join(c.dir, segName(k), tomb), Err: werr}
			}
			err = c.fs.Linkat(d, tomb, d, x)
		}
		if err == unix.EMLINK && c.tomb+1 < maxTombs {
			c.tomb++
			continue
		}
		if err != nil {
			return &os.LinkError{Op: "link", Old: filepath.Join(c.dir, segName(k), tomb), New: x, Err: err}
		}
		break
	}
	if err := c.fs.Renameat(d, x, d, name); err != nil {
		c.fs.Unlinkat(d, x, 0)
		return &os.LinkError{Op: "rename", Old: x, New: filepath.Join(c.dir, segName(k), name), Err: err}
	}
	return nil
}

// DamageError says the claim state cannot be read; 'farm repair' rebuilds it.
type DamageError struct {
	Path string
	Why  string
}

func (e *DamageError) Error() string {
	return fmt.Sprintf("the farm's claim state %s is damaged (%s)", e.Path, e.Why)
}
