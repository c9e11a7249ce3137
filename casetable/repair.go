package casetable

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/farm-hpc/farm/fsretry"
	"github.com/farm-hpc/farm/internal/kv"
	"github.com/farm-hpc/farm/layout"
	"github.com/farm-hpc/farm/vfs"
	"golang.org/x/sys/unix"
)

// Repair and its races (CLAIMS.md, "Damage").
//
// A repair decides from one reading of the claim state (Inspect) and
// changes it only if that reading still holds, by a compare-and-swap:
//
//   - If MISC/chain names a chain directory that is there and not closed,
//     the rebuilt state is committed as the generation after the newest one
//     read, and nowhere else: if anyone committed meanwhile (another repair,
//     a resubmit that started a run, a meta-job), the commit fails and the
//     repair changes nothing.
//   - Otherwise (MISC/chain missing, unreadable, naming a directory that is
//     gone or a chain that is closed) a new chain must replace it. The right
//     to replace what MISC/chain held is a name made by O_EXCL create,
//     MISC/repair.KEY, KEY naming what was read (the chain directory it
//     names, or the hash and inode of the unreadable file): of the repairs
//     that read the same thing, one makes the name, the others refuse. The
//     name stays once MISC/chain is replaced, so a repair that read it an
//     hour ago cannot make it later (a repair that fails before replacing
//     it removes its name: what it read is still current). MISC/chain is
//     only ever replaced by the holder of the name for what it holds, so
//     it still holds what the winner read when the winner replaces it. A
//     missing MISC/chain is first made into an empty placeholder (O_EXCL
//     create), so that "missing" has a name too. The winner makes its new
//     chain, with the rebuilt state as its generation 0, before anyone can
//     see it; closes every other chain directory in MISC (a closing
//     generation, itself a commit: a process that holds the chain cannot
//     commit on it after that; it records the run and MaxID of the state
//     it closes), failing on any error while it lists or closes them; and
//     only then renames its chain's name over MISC/chain. A run started on
//     an old chain after the reading (by a resubmit that held it since
//     before the damage) is closed by the closing, and generation 1 of the
//     new chain closes it too: its run and IDs are never moved back.
//
// Primitives relied on: the chain's commit (a name that cannot be made
// twice, whatever primitive chain.commit uses), O_EXCL create (the
// repair's right, the placeholder), rename() replacing a name atomically.
// No link().

// Reading is one reading of the claim state, for a repair to decide from
// (Store.Inspect).
type Reading struct {
	// State is the newest generation's state, when Err is nil.
	State State
	// Err is nil, ErrNoState (no MISC/chain, or a chain with no
	// generation) or a *DamageError.
	Err error

	file   []byte // MISC/chain's content; nil: missing
	isDir  bool   // MISC/chain is a directory
	ino    uint64 // its inode number
	dir    string // the chain directory it names; "": none
	gen    int64  // dir's newest generation; -1: none
	top    int64  // dir's newest mark, committed or voided (chain.top)
	usable bool   // dir is there and not closed: repair commits on it
}

// RepairRaceError says that a repair changed nothing because the claim
// state changed after it was read, or another repair holds the right to
// replace it.
type RepairRaceError struct {
	Token string // the other repair's right (MISC/repair.KEY), if that is why
}

func (e *RepairRaceError) Error() string {
	if e.Token != "" {
		return fmt.Sprintf("another 'farm repair' is rebuilding the claim state, or has rebuilt it (it made %s)", e.Token)
	}
	return "the claim state changed while 'farm repair' ran (another 'farm repair', a 'farm submit' or 'farm resubmit' started a run, farm add added cases, or a run was closed)"
}

// readDir lists a directory for a repair; tests replace it.
var readDir = vfs.ReadDirNames

// Inspect reads the claim state for a repair. An error other than those
// Reading.Err holds is returned (transient ones are retried for s.Retry).
func (s *Store) Inspect(ctx context.Context) (Reading, error) {
	r := fsretry.Retrier{Limit: s.Retry, Log: s.log(), Clock: s.fs}
	for {
		rd, err := s.inspect()
		if err == nil || !r.Again(ctx, err) {
			return rd, err
		}
	}
}

func (s *Store) inspect() (Reading, error) {
	rd := Reading{gen: -1}
	path := filepath.Join(s.misc, "chain")
	b, ino, err := readFileIno(s.fs, path)
	switch {
	case errors.Is(err, unix.EISDIR):
		rd.isDir, rd.ino = true, ino
		rd.file = []byte{}
		rd.Err = &DamageError{Path: path, Why: "a directory, not a file"}
		return rd, nil
	case os.IsNotExist(err) && fsretry.IsTransient(passing(s.fs, path, err)):
		return rd, fsretry.Transient(err) // a passing ENOENT: read again
	case os.IsNotExist(err):
		rd.Err = ErrNoState
		return rd, nil
	case err != nil:
		return rd, err
	}
	rd.file, rd.ino = b, ino
	name, ok := parseChainFile(b)
	if !ok {
		rd.Err = &DamageError{Path: path, Why: fmt.Sprintf("unreadable content %.40q", b)}
		return rd, nil
	}
	rd.dir = filepath.Join(s.misc, name)
	if _, err := vfs.Stat(s.fs, rd.dir); err != nil {
		if isGone, err := goneOr(s.fs, rd.dir, err); !isGone {
			return rd, err // a passing ENOENT: read again
		}
		rd.Err = &DamageError{Path: rd.dir, Why: "the chain directory is gone"}
		return rd, nil
	}
	c := newChain(s.fs, rd.dir)
	defer c.close()
	if testHook != nil {
		testHook("inspect", rd.dir)
	}
	n, err := c.latest(-1)
	if err != nil {
		return rd, err
	}
	if n < 0 && !mutated("inspect-trusts-no-generation") {
		// Looked up afresh, as a claimer does (Store.refresh): a
		// passing ENOENT of the chain's directory or first segment
		// is not a chain with no generation (the simulator, seed
		// 112017 on gluster: a forced repair that took it for one
		// closed every lane, a starting run's too, then lost).
		if err := c.noGeneration(); err != nil {
			if de := (*DamageError)(nil); errors.As(err, &de) {
				rd.Err = de
				return rd, nil
			}
			return rd, err
		}
	}
	rd.gen, rd.top, rd.usable = n, c.top, true
	if n < 0 {
		rd.Err = ErrNoState
		return rd, nil
	}
	return rd, s.inspectGen(&rd, c, n)
}

// inspectGen reads generation n of the chain c, the newest, into rd.
func (s *Store) inspectGen(rd *Reading, c *chain, n int64) error {
	g, err := c.read(n)
	if os.IsNotExist(err) {
		return c.checkGone(err) // a passing ENOENT, retried; or damage
	}
	if err != nil {
		return err
	}
	var st State
	switch err := st.unmarshal(g); {
	case err == errClosed:
		rd.usable = false
		rd.Err = &DamageError{Path: rd.dir, Why: "closed by a 'farm repair' that did not finish"}
	case err != nil:
		rd.Err = &DamageError{Path: c.genPath(n), Why: err.Error()}
	default:
		st.Gen, st.Chain = n, filepath.Base(c.dir)
		rd.State = st
		// A run reads well only if its lanes do; a damaged lane is
		// repaired as the main chain is (the repair closes every lane,
		// then commits on this chain).
		var de *DamageError
		sum, err := s.readLanes(st)
		switch {
		case errors.As(err, &de):
			rd.Err = de
		case err != nil:
			return err
		default:
			rd.State = sum
		}
	}
	return nil
}

// readFileIno reads a file and returns its inode number, from one open.
func readFileIno(fsys vfs.FS, path string) ([]byte, uint64, error) {
	f, err := vfs.Open(fsys, unix.AT_FDCWD, path, unix.O_RDONLY, 0)
	if err != nil {
		return nil, 0, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer f.Close()
	sb, err := f.Stat()
	if err != nil {
		return nil, 0, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if sb.Mode&unix.S_IFMT == unix.S_IFDIR {
		return nil, sb.Ino, &os.PathError{Op: "read", Path: path, Err: unix.EISDIR}
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, 0, &os.PathError{Op: "read", Path: path, Err: err}
	}
	return b, sb.Ino, nil
}

// Repair makes st the claim state, deciding from what it reads now: for a
// caller that decided nothing from an earlier reading (farm adopt).
func (s *Store) Repair(ctx context.Context, st State) error {
	rd, err := s.Inspect(ctx)
	if err != nil {
		return err
	}
	return s.RepairFrom(ctx, rd, st)
}

// RepairFrom makes st the claim state if the state is still as rd read it:
// it commits st as the generation after the one rd read, or, if rd found
// no chain to commit on, replaces the chain by a new one whose generation 0
// is st, after closing every old one (see the top of this file). If the
// state changed since rd, or another repair holds the right to replace it,
// it changes nothing and returns a *RepairRaceError.
func (s *Store) RepairFrom(ctx context.Context, rd Reading, st State) error {
	st.Repair = newNonce(s.fs) // a meta-job that resumes tells the rebuilt state by it
	r := fsretry.Retrier{Limit: s.Retry, Log: s.log(), Clock: s.fs}
	if rd.usable {
		// The rebuilt state has no set: the lanes of the run read and
		// of every run before it are closed first, so that no claimer,
		// however stalled, claims in one after the repair. Not a later
		// run's: one started since the reading makes the commit below
		// fail, and its lanes must stay open. (A reading whose newest
		// generation is damaged names no run: every lane is closed; no
		// run can start while the state reads as damaged.)
		upTo := rd.State.Run
		if mutated("repair-closes-new-run-lanes") {
			upTo = 0 // every lane, a later run's too
		}
		if err := s.closeAllLanes(ctx, &r, upTo); err != nil {
			return err
		}
		return s.repairOn(ctx, rd, st)
	}
	return s.replaceChain(ctx, &r, rd, st)
}

// replaceChain is RepairFrom where rd found no chain to commit on: it
// replaces MISC/chain by a new chain whose generation 0 is st, if it gets
// the right to (the top of this file).
func (s *Store) replaceChain(ctx context.Context, r *fsretry.Retrier, rd Reading, st State) error {
	if rd.file == nil {
		// MISC/chain is missing: name that, by a placeholder that only
		// one process can make.
		var err error
		for {
			rd, err = s.placeholder()
			if err == nil || !r.Again(ctx, err) {
				break
			}
		}
		if err != nil {
			return err
		}
	}
	token, err := s.takeRight(ctx, r, rd)
	if err != nil {
		return err
	}
	// The right is ours: MISC/chain holds what rd read until we replace
	// it. If we fail before we replace it, we give the right up: what we
	// read is still what MISC/chain holds, so the next repair may act on
	// it (and closes the chain we made, as any other).
	giveUp := func(err error) error {
		if rerr := vfs.Remove(s.fs, filepath.Join(s.misc, filepath.Base(token))); rerr != nil && !os.IsNotExist(rerr) {
			return fmt.Errorf("%w (MISC/chain unchanged: remove %s and run 'farm repair' again)", err, token)
		}
		return fmt.Errorf("%w (MISC/chain unchanged: run 'farm repair' again)", err)
	}
	// Its chain first, then every other closed: of two repairs that
	// hold rights (one read MISC/chain before a damage, one after), the
	// later closer closes the other's chain, made before: at most one
	// new chain stays open (the simulator, seed 336877 on nfs).
	var c *chain
	if err := r.Do(ctx, func() (err error) {
		c, err = s.newChain(st)
		return err
	}); err != nil {
		return giveUp(err)
	}
	last, err := s.closeOthers(ctx, r, c.dir)
	if err == nil {
		// Every lane too: MISC/chain names no readable state, so no
		// run can start but on a chain held since before it was
		// damaged, closed now.
		err = s.closeAllLanes(ctx, r, 0)
	}
	gen := int64(0)
	if err == nil && (last.Run > st.Run || last.MaxID > st.MaxID) && !mutated("repair-forgets-closed-run") {
		// A run started, or IDs taken, on a chain after the reading and
		// before its closing (by a 'farm resubmit' or 'farm add' that
		// held it since before MISC/chain was damaged) is closed with
		// the rest, never moved back: generation 1 of the new chain,
		// which nobody knows yet, says so (seed 348156 on local).
		st.Run, st.MaxID, gen = max(st.Run, last.Run), max(st.MaxID, last.MaxID), 1
		err = s.commitFirst(ctx, r, c, st)
	}
	if err != nil {
		c.close()
		return giveUp(err)
	}
	if err := r.Do(ctx, func() error { return s.install(rd, c.dir) }); err != nil {
		// The rename may have happened all the same (a lost reply):
		// the right stays taken.
		c.close()
		return fmt.Errorf("%w (see 'farm query'; if it still reports damage, remove %s and run 'farm repair' again)", err, token)
	}
	s.setChain(c)
	st.Gen, st.Chain = gen, filepath.Base(c.dir)
	s.gen, s.cur = gen, st
	return nil
}

// commitFirst commits st as generation 1 of the new chain c: a repair's
// other closing it first (a *RepairRaceError) is the only way to lose.
func (s *Store) commitFirst(ctx context.Context, r *fsretry.Retrier, c *chain, st State) error {
	nonce := newNonce(s.fs)
	won, err := c.commitRetried(ctx, r, 1, st.marshal(nil, 1, commitInfo{by: s.by(), nonce: nonce}), nonce)
	if err == nil && !won {
		err = &RepairRaceError{}
	}
	return err
}

// commitRetried is commit (of a repair: generation next, content b), its
// transient errors retried by r: a commit whose outcome the filesystem
// cannot tell yet is settled, not made again; one that failed before its
// mark (its slot taken by us or not) is tried again.
func (c *chain) commitRetried(ctx context.Context, r *fsretry.Retrier, next int64, b []byte, nonce string) (bool, error) {
	won, err := c.commit(next, b, nonce)
	for err != nil && fsretry.IsTransient(err) && r.Again(ctx, err) {
		if errors.As(err, new(*UndecidedError)) {
			won, err = c.settle()
		} else {
			won, err = c.commit(next, b, nonce)
		}
	}
	return won, err
}

// repairOn commits st on rd's chain, as the generation after rd's.
func (s *Store) repairOn(ctx context.Context, rd Reading, st State) error {
	c := newChain(s.fs, rd.dir)
	next := max(rd.gen, rd.top) + 1 // the slot after what rd read
	nonce := newNonce(s.fs)
	b := st.marshal(nil, next, commitInfo{by: s.by(), nonce: nonce})
	r := fsretry.Retrier{Limit: s.Retry, Log: s.log(), Clock: s.fs}
	var won bool
	for {
		var err error
		won, err = c.commitRetried(ctx, &r, next, b, nonce)
		if err != nil {
			c.close()
			return err
		}
		if won {
			break
		}
		// The slot was taken: by a process that commits on what we
		// read (the state moved on: we lost), or by one that died or
		// stalls before its mark, voided after a while (the state is
		// as we read it: we try the next slot).
		m, err := c.await(ctx, next)
		if err != nil {
			c.close()
			return err
		}
		if m != voided {
			break
		}
		next++
		b = st.marshal(nil, next, commitInfo{by: s.by(), nonce: nonce})
	}
	if !won {
		c.close()
		return &RepairRaceError{}
	}
	s.setChain(c)
	st.Gen, st.Chain = next, filepath.Base(c.dir)
	s.gen, s.cur = next, st
	return nil
}

func (s *Store) by() string {
	if s.Job != "" {
		return s.Job
	}
	return "repair"
}

// placeholder makes the missing MISC/chain an empty file of our own, by
// O_EXCL create, and returns the reading of it; a *RepairRaceError if
// MISC/chain exists. (Empty, so that whoever reads it, at any moment,
// reads what we read: the same content and inode, so the same right.
// Every command reads it as damage.)
func (s *Store) placeholder() (Reading, error) {
	path := filepath.Join(s.misc, "chain")
	f, err := vfs.Open(s.fs, unix.AT_FDCWD, path, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o644)
	if err == unix.EEXIST {
		return Reading{}, &RepairRaceError{}
	}
	if err != nil {
		return Reading{}, passing(s.fs, s.misc, &os.PathError{Op: "open", Path: path, Err: err})
	}
	defer f.Close()
	sb, err := f.Stat()
	if err != nil {
		return Reading{}, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	return Reading{file: []byte{}, ino: sb.Ino, gen: -1}, nil
}

// rightName is the name whose O_EXCL create gives the right to replace
// what rd read in MISC/chain.
func rightName(rd Reading) string {
	if rd.dir != "" {
		return "repair." + filepath.Base(rd.dir)
	}
	h := sha256.Sum256(rd.file)
	kind := "x"
	if rd.isDir {
		kind = "d"
	}
	return fmt.Sprintf("repair.%s%s-%d", kind, hex.EncodeToString(h[:8]), rd.ino)
}

// takeRight makes MISC/repair.KEY for what rd read, and returns its path;
// a *RepairRaceError if another repair made it.
func (s *Store) takeRight(ctx context.Context, r *fsretry.Retrier, rd Reading) (string, error) {
	path := filepath.Join(s.misc, rightName(rd))
	rel := filepath.Join(layout.MiscDir, filepath.Base(path))
	err := r.Do(ctx, func() error {
		f, err := vfs.Open(s.fs, unix.AT_FDCWD, path, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o644)
		if err != nil {
			return passing(s.fs, s.misc, &os.PathError{Op: "open", Path: path, Err: err})
		}
		// The name is the right. Its content, what MISC/chain held, is
		// for the record only: a failure to write it changes nothing.
		// (A retransmitted exclusive create is recognised by the NFS
		// server's verifier, so a lost reply does not turn into EEXIST.)
		fmt.Fprintf(f, "farm repair of MISC/chain %.200q by %s\n", rd.file, s.by())
		f.Close()
		return nil
	})
	if os.IsExist(err) {
		return "", &RepairRaceError{Token: rel}
	}
	return rel, err
}

// newChain makes a new chain directory whose generation 0 is st. Nobody
// can know it before it is named in MISC/chain.
func (s *Store) newChain(st State) (*chain, error) {
	name := "claims." + newNonce(s.fs)
	c := newChain(s.fs, filepath.Join(s.misc, name))
	// A new name (a nonce): EEXIST is our own mkdir, its reply lost.
	if err := vfs.Mkdir(s.fs, c.dir, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
		return nil, passing(s.fs, s.misc, err)
	}
	nonce := newNonce(s.fs)
	won, err := c.commit(0, st.marshal(nil, 0, commitInfo{by: s.by(), nonce: nonce}), nonce)
	if err == nil && !won {
		// Nobody else knows the new chain: its slot 0 answered EEXIST
		// to our own mknod, a retried request whose first made it
		// (a lost reply). Made afresh, under another name.
		err = fsretry.Transient(fmt.Errorf("%s: the filesystem answered that generation 0 of a new chain exists (a reply lost, its request retried)", c.dir))
	}
	if err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

// closeOthers closes every chain directory in MISC but keep, and returns the newest
// run and the largest MaxID of the states they held when closed
// (closeChain). Any error while listing MISC or closing a chain fails it:
// a chain left open could go on beside the new one.
func (s *Store) closeOthers(ctx context.Context, r *fsretry.Retrier, keep string) (State, error) {
	var last State
	var names []string
	if err := r.Do(ctx, func() (err error) {
		names, err = readDir(s.fs, s.misc)
		return passing(s.fs, s.misc, err)
	}); err != nil {
		return last, fmt.Errorf("listing the chains to close: %w", err)
	}
	for _, name := range names {
		dir := filepath.Join(s.misc, name)
		if !strings.HasPrefix(name, "claims.") || dir == keep {
			continue
		}
		var st unix.Stat_t
		removed := false // since the listing
		if err := r.Do(ctx, func() (err error) {
			st, err = vfs.Stat(s.fs, dir)
			removed, err = goneOr(s.fs, dir, err)
			return err
		}); err != nil {
			return last, fmt.Errorf("closing the chain %s: %w", dir, err)
		}
		if removed || !vfs.IsDir(&st) {
			continue
		}
		var was State
		if err := r.Do(ctx, func() (err error) {
			was, err = closeChainDir(s.fs, dir)
			return err
		}); err != nil {
			return last, fmt.Errorf("closing the chain %s: %w", dir, err)
		}
		last.Run, last.MaxID = max(last.Run, was.Run), max(last.MaxID, was.MaxID)
	}
	return last, nil
}

// closeChainDir closes the chain in dir, as closeChain; a directory
// removed meanwhile is closed enough.
func closeChainDir(fsys vfs.FS, dir string) (State, error) {
	c := newChain(fsys, dir)
	defer c.close()
	last, err := closeChain(c)
	if errors.Is(err, syscall.ENOENT) {
		if gone(fsys, dir) {
			return State{}, nil
		}
		return State{}, fsretry.Transient(err) // it is there: a passing ENOENT
	}
	return last, err
}

// closeChain commits a generation that closes the chain c: whoever reads it
// opens MISC/chain again, and nobody can commit on the chain after it. It
// returns the run and MaxID of the generation before the closing, which
// the closing records (run= and maxid= before "closed", which farm reads
// as the end of the record), so that a chain closed already, by a repair
// that died or whose reply was lost, says them too; zero if none reads.
func closeChain(c *chain) (last State, err error) {
	for {
		n, err := c.latest(-1)
		if err != nil {
			return State{}, err
		}
		last = State{}
		if n >= 0 {
			b, err := c.read(n)
			if err != nil && !errors.Is(err, errBuried) && !os.IsNotExist(err) {
				return State{}, err
			}
			if err == nil {
				var st State
				switch st.unmarshal(b) {
				case errClosed:
					return State{Run: st.Run, MaxID: st.MaxID}, nil
				case nil:
					last = State{Run: st.Run, MaxID: st.MaxID}
				}
			}
		}
		nonce := newNonce(c.fs)
		next := c.nextSlot(n)
		won, err := c.commit(next, closing(next, last, nonce), nonce)
		if errors.As(err, new(*UndecidedError)) {
			return State{}, err // transient: the caller tries again, from a new reading
		}
		if err != nil {
			var de *DamageError
			if errors.As(err, &de) {
				return State{}, &os.PathError{Op: "close", Path: c.dir, Err: syscall.ENOENT}
			}
			return State{}, err
		}
		if won {
			return last, nil
		}
		// Another process took the slot (a stalled claimer that
		// resumed): once it is marked, close after it.
		if _, err := c.await(context.Background(), next); err != nil {
			return State{}, err
		}
	}
}

// closing is the record of generation n that closes a chain whose last
// state was last.
func closing(n int64, last State, nonce string) []byte {
	b := kv.AppendInt([]byte(genMagic), "gen", n)
	if last.Run > 0 {
		b = kv.AppendInt(b, "run", int64(last.Run))
		b = kv.AppendInt(b, "maxid", last.MaxID)
	}
	b = kv.Append(b, "nonce", nonce)
	return append(b, " closed\n"...)
}

// install names the chain directory dir in MISC/chain, replacing what rd
// read there (which only the holder of rd's right may replace).
func (s *Store) install(rd Reading, dir string) error {
	path := filepath.Join(s.misc, "chain")
	if rd.isDir {
		aside := path + ".damaged." + newNonce(s.fs)
		if err := vfs.Rename(s.fs, path, aside); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return passing(s.fs, s.misc, vfs.WriteAtomic(s.fs, path, 0o644, []byte(chainMagic+filepath.Base(dir)+"\n")))
}
