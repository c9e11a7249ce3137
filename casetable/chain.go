package casetable

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/farm-hpc/farm/fsretry"
	"golang.org/x/sys/unix"
)

// The claim state is a chain of immutable generations (CLAIMS.md in this directory):
//
//	MISC/chain                      names the chain directory; made once, by link()
//	MISC/claims.NONCE/              the chain directory
//	MISC/claims.NONCE/head          a hint: a recent generation number
//	MISC/claims.NONCE/SEG/g.N       generation N (SEG = N / SegmentSize)
//	MISC/claims.NONCE/SEG/tomb      what buried generations are links to
//
// Generation N+1 is committed by writing it to a private file and link()ing
// that to the name g.N+1, which fails if the name exists: link is atomic at
// the server of every network filesystem, so of all the processes that read
// generation N and want to follow it, exactly one succeeds. A name, once
// made, exists until the farm is cleaned: old generations are "buried" by
// renaming a link to the segment's tomb over them (the inode goes, the name
// stays), never removed. So a process that stalled for any length of time
// cannot commit on an old view: the name it would make exists.
//
// Nothing is ever rewritten in place, and no correctness depends on reading a
// file another client rewrote: a generation's content never changes once it
// has a name, and a hint that is stale costs only lookups.

// SegmentSize is the number of generations per segment directory.
const SegmentSize = 4096

// buryAfter is how many generations a generation stays readable before it is
// buried. A reader that falls further behind finds a tomb and starts over
// from the hint.
const buryAfter = 1024

// hintEvery: the head hint is rewritten every hintEvery generations.
const hintEvery = 256

const (
	chainMagic = "farm-chain v1 "
	genMagic   = "farm-gen v1 "
	tombText   = "farm-gen v1 buried\n"
)

// testHook, if set (by tests only), is called at each stage of a commit:
// "write" before the generation is written, "link" before it is linked,
// "linked" once it is linked (and the private file unlinked).
var testHook func(stage string)

// fault, if set (by tests only), is asked before some of the claim path's
// filesystem calls whether the call fails, and with what error (nil: it
// runs as usual). The calls, by op: "lookup" (a generation's name), "read"
// (a generation), "write" (a commit's private file), "link" (its link to
// the generation's name), "link.reply" (asked after a link that worked: an
// error is a lost reply), "nlink" (the stat of the private file that tells
// whether the link was made), "bury" (a link to the tomb), "table.stat",
// "table.read".
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

	dfd  *os.File // dir, opened O_PATH; nil until needed
	sfd  *os.File // the segment directory sseg, opened O_PATH
	sseg int64

	// pending is the commit whose link was tried and whose outcome is not
	// known yet (settle); nil when there is none.
	pending *pendingCommit

	log       io.Writer // where a failure to bury is said, once; nil: not said
	tomb      int       // the tomb buried generations are linked to: tomb, tomb.1, ...
	buryFails int       // generations that could not be buried
	buryErr   error     // the first such failure
}

// pendingCommit is a commit whose private file tmp, holding generation n
// with nonce, was written and whose link to g.n may have been made.
type pendingCommit struct {
	n     int64
	tmp   string
	nonce string
}

// openDir opens a directory for the *at calls only (O_PATH: no open at the
// server, and nothing to flush on close).
func openDir(path string) (*os.File, error) {
	return os.OpenFile(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
}

// openDirAt opens the directory name in the directory open as d, as openDir.
func openDirAt(d int, name string) (*os.File, error) {
	fd, err := unix.Openat(d, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

// dirFD returns the chain directory's descriptor.
func (c *chain) dirFD() (int, error) {
	if c.dfd == nil {
		f, err := openDir(c.dir)
		if err != nil {
			return -1, err
		}
		c.dfd = f
	}
	return int(c.dfd.Fd()), nil
}

// segFD returns the descriptor of generation n's segment directory; with
// mk, it makes the directory if it is not there.
func (c *chain) segFD(n int64, mk bool) (int, error) {
	seg := n / SegmentSize
	if c.sfd != nil && c.sseg == seg {
		return int(c.sfd.Fd()), nil
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
		if err := unix.Mkdirat(d, name, 0o755); err != nil && err != unix.EEXIST {
			if err != unix.ENOENT {
				c.forget()
			}
			return -1, &os.PathError{Op: "mkdir", Path: filepath.Join(c.dir, name), Err: err}
		}
	}
	f, err := openDirAt(d, name)
	if err != nil {
		if err != unix.ENOENT {
			// A stale handle (an NFS failover): look the chain
			// directory up again next time.
			c.forget()
		}
		return -1, &os.PathError{Op: "open", Path: filepath.Join(c.dir, name), Err: err}
	}
	c.sfd, c.sseg = f, seg
	return int(f.Fd()), nil
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

func newNonce() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return hex.EncodeToString(b[:])
}

// openChain opens the chain named by misc/chain; ErrNoState if there is none.
func openChain(misc string) (*chain, error) {
	b, err := os.ReadFile(filepath.Join(misc, "chain"))
	if os.IsNotExist(err) {
		return nil, ErrNoState
	}
	if errors.Is(err, unix.EISDIR) {
		return nil, &DamageError{Path: filepath.Join(misc, "chain"), Why: "a directory, not a file"}
	}
	if err != nil {
		return nil, err
	}
	name, ok := parseChainFile(b)
	if !ok {
		return nil, &DamageError{Path: filepath.Join(misc, "chain"), Why: fmt.Sprintf("unreadable content %.40q", b)}
	}
	return &chain{dir: filepath.Join(misc, name), self: newNonce()}, nil
}

func parseChainFile(b []byte) (string, bool) {
	s, ok := strings.CutPrefix(string(b), chainMagic)
	s, ok2 := strings.CutSuffix(s, "\n")
	if !ok || !ok2 || !strings.HasPrefix(s, "claims.") || strings.ContainsAny(s, "/ \n") {
		return "", false
	}
	return s, true
}

// createChain makes a new chain and names it in misc/chain, unless misc/chain
// exists: then it opens that one (another process made it first).
func createChain(misc string) (*chain, error) {
	name := "claims." + newNonce()
	dir := filepath.Join(misc, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	tmp := filepath.Join(misc, "chain.tmp."+newNonce())
	if err := os.WriteFile(tmp, []byte(chainMagic+name+"\n"), 0o644); err != nil {
		os.Remove(tmp)
		os.Remove(dir)
		return nil, err
	}
	err := os.Link(tmp, filepath.Join(misc, "chain"))
	os.Remove(tmp)
	if err != nil && !os.IsExist(err) {
		os.Remove(dir)
		return nil, err
	}
	c, oerr := openChain(misc)
	if oerr != nil {
		return nil, oerr
	}
	if c.dir != dir {
		os.Remove(dir) // another process's chain won
	}
	return c, nil
}

func segName(n int64) string { return fmt.Sprintf("%06d", n/SegmentSize) }

func genName(n int64) string { return "g." + strconv.FormatInt(n, 10) }

func (c *chain) genPath(n int64) string {
	return filepath.Join(c.dir, segName(n), genName(n))
}

// exists reports whether generation n has been made. Names are never
// removed, so a yes is always true; a no may be stale (a cached negative
// lookup), which only makes the caller's commit fail and retry.
func (c *chain) exists(n int64) (bool, error) {
	d, err := c.segFD(n, false)
	if os.IsNotExist(err) {
		return false, nil // the segment is not made yet
	}
	if err != nil {
		return false, err
	}
	fd, err := unix.Openat(d, genName(n), unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if ierr := injected("lookup"); ierr != nil {
		if err == nil {
			unix.Close(fd)
		}
		fd, err = -1, ierr
	}
	if err == nil {
		unix.Close(fd)
		return true, nil
	}
	if err == unix.ENOENT {
		return false, nil
	}
	c.forget()
	return false, &os.PathError{Op: "lstat", Path: c.genPath(n), Err: err}
}

// readAt reads the file name in the directory open as d.
func readAt(d int, name string) ([]byte, error) {
	fd, err := unix.Openat(d, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	var b []byte
	buf := make([]byte, 512)
	for {
		n, err := f.Read(buf)
		b = append(b, buf[:n]...)
		if err == io.EOF {
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
	b, err := readAt(d, "head")
	if err != nil {
		return -1
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// latest finds the newest generation, starting from from (a generation known
// to exist, or -1). It returns -1 if the chain has none.
func (c *chain) latest(from int64) (int64, error) {
	// The hint is read only by a process that knows no generation: from a
	// known one, a gallop finds the newest in 2·log2(distance) lookups.
	if from < 0 {
		if h := c.hint(); h >= 0 {
			if ok, err := c.exists(h); err != nil {
				return 0, err
			} else if ok {
				from = h
			}
		}
	}
	lo := from // exists (or -1)
	step := int64(1)
	hi := int64(-1) // does not exist
	for hi < 0 {
		ok, err := c.exists(lo + step)
		if err != nil {
			return 0, err
		}
		if !ok {
			hi = lo + step
			break
		}
		lo += step
		step *= 2
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		ok, err := c.exists(mid)
		if err != nil {
			return 0, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, nil
}

// read returns generation n's content; errBuried if it was buried,
// os.ErrNotExist if it does not exist.
func (c *chain) read(n int64) ([]byte, error) {
	d, err := c.segFD(n, false)
	if err != nil {
		return nil, err
	}
	b, err := readAt(d, genName(n))
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

// commit tries to make generation n with content b (which must hold a nonce
// of the caller's, so that the caller can recognise its own generation). It
// reports whether it made it; false with a nil error means another process
// made generation n first. An error that Undecided reports means the link
// may have been made: the commit stays pending, and the caller must call
// settle (after a pause) until it knows, never commit anew on the same
// base: a new commit with a new nonce would take its own generation, if
// the first link was made, for another's.
func (c *chain) commit(n int64, b []byte, nonce string) (bool, error) {
	c.dropPending()
	d, err := c.segFD(n, n%SegmentSize == 0)
	if err != nil {
		return false, c.checkGone(err)
	}
	c.seq++
	tmp := fmt.Sprintf("t.%s.%d", c.self, c.seq)
	if testHook != nil {
		testHook("write")
	}
	err = injected("write")
	if err == nil {
		err = writeNewAt(d, tmp, b)
	}
	if err != nil {
		unix.Unlinkat(d, tmp, 0)
		return false, c.checkGone(&os.PathError{Op: "write", Path: filepath.Join(c.dir, segName(n), tmp), Err: err})
	}
	c.pending = &pendingCommit{n: n, tmp: tmp, nonce: nonce}
	if testHook != nil {
		testHook("link")
	}
	lerr := injected("link")
	if lerr == nil {
		lerr = unix.Linkat(d, tmp, d, genName(n), 0)
		if lerr == nil {
			lerr = injected("link.reply")
		}
	}
	if lerr == nil {
		return c.decided(d, true), nil
	}
	return c.decide(d, lerr)
}

// settle goes on with the pending commit (see commit): it finds out
// whether its link was made, and links it again if it certainly was not.
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

// decide finds out the outcome of the pending commit, whose link failed
// with lerr or whose outcome is not known, from the filesystem and not
// from lerr: a link that worked can report an error (its reply lost; a
// retried request answered EEXIST). The private file has a second link
// exactly when the link was made (st_nlink, as procmail's lockfile
// decides it); where attributes are cached, the generation's content says
// it: our nonce, another's, or no such name (the link was not made; it is
// tried again). Anything that cannot be read leaves the outcome open
// (Undecided).
func (c *chain) decide(d int, lerr error) (bool, error) {
	p := c.pending
	var st unix.Stat_t
	serr := injected("nlink")
	if serr == nil {
		serr = unix.Fstatat(d, p.tmp, &st, unix.AT_SYMLINK_NOFOLLOW)
	}
	if serr == nil && st.Nlink >= 2 {
		return c.decided(d, true), nil
	}
	got, rerr := c.read(p.n)
	switch {
	case rerr == nil && bytes.Contains(got, []byte(" nonce="+p.nonce)):
		return c.decided(d, true), nil
	case rerr == nil, errors.Is(rerr, errBuried):
		// Made by another. (A generation buried before we could look
		// is one we cannot tell: if it was ours, its cases count as
		// never started, and a resubmit runs them.)
		c.decided(d, false)
		return false, nil
	case errors.Is(rerr, fs.ErrNotExist) && serr == nil:
		// The name is not there, and the private file has one link:
		// the link was not made. Link again, unless its error says it
		// never can be.
		if lerr == unix.EEXIST {
			lerr = nil // a name cached as present that is not
		}
		if lerr != nil && !fsretry.IsTransient(lerr) && lerr != unix.ENOENT {
			c.dropPending()
			return false, &os.LinkError{Op: "link", Old: p.tmp, New: c.genPath(p.n), Err: lerr}
		}
		if lerr == unix.ENOENT {
			if err := c.checkGone(lerr); !fsretry.IsTransient(err) {
				c.dropPending()
				return false, err
			}
			var err error
			if d, err = c.segFD(p.n, false); err != nil {
				return false, undecided(c.checkGone(err))
			}
		}
		if testHook != nil {
			testHook("link")
		}
		err := injected("link")
		if err == nil {
			err = unix.Linkat(d, p.tmp, d, genName(p.n), 0)
			if err == nil {
				err = injected("link.reply")
			}
		}
		if err == nil {
			return c.decided(d, true), nil
		}
		return false, undecided(&os.LinkError{Op: "link", Old: p.tmp, New: c.genPath(p.n), Err: err})
	}
	err := rerr
	if serr != nil {
		err = serr
	}
	if errors.Is(err, fs.ErrNotExist) {
		err = c.checkGone(err)
		if !fsretry.IsTransient(err) {
			c.dropPending()
			return false, err
		}
	}
	return false, undecided(err)
}

// decided ends the pending commit with its outcome, and returns it.
func (c *chain) decided(d int, won bool) bool {
	p := c.pending
	c.pending = nil
	if sd, err := c.segFD(p.n, false); err == nil {
		d = sd // d may have been closed since (forget)
	}
	unix.Unlinkat(d, p.tmp, 0)
	if won {
		if testHook != nil {
			testHook("linked")
		}
		c.afterCommit(p.n)
	}
	return won
}

// dropPending forgets a pending commit whose outcome no longer matters
// (the caller gave up), leaving its private file: if the link was made,
// the generation is ours and its cases were never started.
func (c *chain) dropPending() { c.pending = nil }

// UndecidedError says a commit's link may or may not have been made: the
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
	_, derr := os.Stat(c.dir)
	_, merr := os.Stat(filepath.Dir(c.dir))
	if errors.Is(derr, fs.ErrNotExist) && merr == nil {
		return &DamageError{Path: c.dir, Why: "the chain directory is gone"}
	}
	return fsretry.Transient(err)
}

// writeNewAt writes b to a new file name in the directory open as d, in one
// write.
func writeNewAt(d int, name string, b []byte) error {
	fd, err := unix.Openat(d, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), name)
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
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
		d, err := c.dirFD()
		if err != nil {
			return
		}
		tmp := "head.tmp." + c.self
		if writeNewAt(d, tmp, []byte(strconv.FormatInt(n, 10)+"\n")) == nil {
			if unix.Renameat(d, tmp, d, "head") != nil {
				unix.Unlinkat(d, tmp, 0)
			}
		} else {
			unix.Unlinkat(d, tmp, 0)
		}
	}
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

// bury replaces generation k by a link to its segment's tomb: the name
// stays, so that nobody can ever make generation k again. A tomb that has
// as many links as the filesystem allows (EMLINK) is left for the next
// one.
func (c *chain) bury(k int64) error {
	var d int
	if c.sfd != nil && c.sseg == k/SegmentSize {
		d = int(c.sfd.Fd())
	} else {
		// k's segment is the one before the open one.
		cd, err := c.dirFD()
		if err != nil {
			return err
		}
		sf, err := openDirAt(cd, segName(k))
		if err != nil {
			return &os.PathError{Op: "open", Path: filepath.Join(c.dir, segName(k)), Err: err}
		}
		defer sf.Close()
		d = int(sf.Fd())
	}
	c.seq++
	x := fmt.Sprintf("x.%s.%d", c.self, c.seq)
	for {
		tomb := tombName(c.tomb)
		err := injected("bury")
		if err == nil {
			err = unix.Linkat(d, tomb, d, x, 0)
		}
		if err == unix.ENOENT {
			if werr := writeNewAt(d, tomb, []byte(tombText)); werr != nil && werr != unix.EEXIST {
				return &os.PathError{Op: "create", Path: filepath.Join(c.dir, segName(k), tomb), Err: werr}
			}
			err = unix.Linkat(d, tomb, d, x, 0)
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
	if err := unix.Renameat(d, x, d, genName(k)); err != nil {
		unix.Unlinkat(d, x, 0)
		return &os.LinkError{Op: "rename", Old: x, New: c.genPath(k), Err: err}
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
