package casetable

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
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

// Reading is one reading of the claim state for a repair to decide from (CLAIMS.md, Damage).
type Reading struct {
	State State // the newest generation's state, when Err is nil
	Err   error // nil, ErrNoState (no MISC/chain, or no generation) or a *DamageError

	file   []byte // MISC/chain's content; nil: missing
	isDir  bool   // MISC/chain is a directory
	ino    uint64 // its inode number
	dir    string // the chain directory it names; "": none
	next   int64  // the slot a repair commits in first: past dir's newest mark (chain.nextSlot)
	usable bool   // dir is there and not closed: repair commits on it
}

// RepairRaceError says a repair changed nothing: the claim state changed
// after it was read, or another repair holds the right to replace it.
type RepairRaceError struct {
	Token string // the other repair's right (MISC/repair.KEY), if that is why
}

// Error says which, and names the other repair's right.
func (e *RepairRaceError) Error() string {
	if e.Token != "" {
		return fmt.Sprintf("another 'farm repair' is rebuilding the claim state, or has rebuilt it (it made %s)", e.Token)
	}
	return "the claim state changed while 'farm repair' ran (another 'farm repair', a 'farm submit' or 'farm resubmit' started a run, farm add added cases, or a run was closed)"
}

// Inspect reads the claim state for a repair, retrying transient errors for
// s.Retry; it returns errors other than those Reading.Err holds.
func (s *Store) Inspect(ctx context.Context) (Reading, error) {
	r := fsretry.Retrier{Limit: s.Retry, Log: s.log(), Clock: s.fs}
	var rd Reading
	err := r.Do(ctx, func() error { rd = Reading{}; return s.inspect(&rd) })
	return rd, err
}

// inspect is one try of Inspect: MISC/chain, then the newest generation of
// the chain it names and its lanes (a damaged lane is damage to the run), into rd.
func (s *Store) inspect(rd *Reading) error {
	c, b, ino, err := openChain(s.fs, s.misc)
	rd.file, rd.ino = b, ino
	switch {
	case errors.Is(err, ErrNoState):
		rd.Err = ErrNoState
		return nil
	case b == nil && errors.As(err, new(*DamageError)): // a directory
		rd.file, rd.isDir = []byte{}, true
	}
	if err != nil {
		return rd.damaged(err)
	}
	defer c.close()
	rd.dir = c.dir
	testHook("inspect", rd.dir)
	n, err := c.latestNear(-1, 0)
	if err != nil {
		return err
	}
	if n < 0 && !mutated("inspect-trusts-no-generation") {
		// A passing ENOENT is not an empty chain (seed 112017 on gluster).
		if err := c.noGeneration(); err != nil {
			return rd.damaged(err)
		}
	}
	rd.next, rd.usable = c.nextSlot(n), true
	if n < 0 {
		rd.Err = ErrNoState
		return nil
	}
	cs := chainStore{ch: c} // its load reads generation n as a claim's store does
	switch err := cs.load(n); {
	case os.IsNotExist(err):
		// Retried if passing; if the chain is gone, damage not to commit on.
		rd.usable = false
		return rd.damaged(c.checkGone(err))
	case err == errClosed:
		rd.usable, rd.Err = false, &DamageError{Path: rd.dir, Why: "closed by a 'farm repair' that did not finish"}
		return nil
	case err != nil:
		return rd.damaged(err) // a generation that does not parse is damage
	}
	rd.State = cs.cur
	sum, err := s.readLanes(cs.cur)
	if err == nil {
		rd.State = sum
	}
	return rd.damaged(err)
}

// damaged makes err rd.Err if it is a *DamageError (then nil), else returns it.
func (rd *Reading) damaged(err error) error {
	var de *DamageError
	if errors.As(err, &de) {
		rd.Err = de
		return nil
	}
	return err
}

// Repair makes st the claim state, deciding from what it reads now (farm adopt).
func (s *Store) Repair(ctx context.Context, st State) error {
	rd, err := s.Inspect(ctx)
	if err != nil {
		return err
	}
	return s.RepairFrom(ctx, rd, st)
}

// RepairFrom makes st the claim state if it is still as rd read it, else
// returns a *RepairRaceError (CLAIMS.md, Damage; CLAIMS-APPENDIX.md, the races):
// on rd's chain, after its newest mark, in the first slot not voided, or on a new one.
func (s *Store) RepairFrom(ctx context.Context, rd Reading, st State) error {
	st.Repair = newNonce(s.fs) // a meta-job that resumes tells the rebuilt state by it
	r := fsretry.Retrier{Limit: s.Retry, Log: s.log(), Clock: s.fs}
	if !rd.usable {
		return s.replaceChain(ctx, &r, rd, st)
	}
	// A later run's lanes stay open: its start makes the commit fail.
	upTo := rd.State.Run
	if mutated("repair-closes-new-run-lanes") {
		upTo = 0 // every lane, a later run's too
	}
	if err := s.closeAllLanes(ctx, &r, upTo); err != nil {
		return err
	}
	c := newChain(s.fs, rd.dir)
	nonce := newNonce(s.fs)
	n, won, err := c.commitFrom(ctx, &r, rd.next, func(n int64) []byte { return s.repairRecord(st, n, nonce) })
	if err == nil && !won {
		err = &RepairRaceError{} // lost to a commit on what it read
	}
	if err != nil {
		c.close()
		return err
	}
	s.adoptChain(c, st, n)
	return nil
}

// replaceChain is RepairFrom where rd found no chain to commit on: with the right,
// a new chain of st, every other chain and every lane closed, named in MISC/chain.
func (s *Store) replaceChain(ctx context.Context, r *fsretry.Retrier, rd Reading, st State) error {
	if rd.file == nil { // missing: named by a placeholder, which one process only can make
		if err := r.Do(ctx, func() error { return s.placeholder(&rd) }); err != nil {
			return err
		}
	}
	token, err := s.takeRight(ctx, r, rd)
	if err != nil {
		return err
	}
	// Its chain before the others are closed: of two repairs with rights,
	// the later closer closes the other's (seed 336877 on nfs).
	var c *chain
	if err := r.Do(ctx, func() (err error) {
		c, err = makeChain(s.fs, filepath.Join(s.misc, "claims."+newNonce(s.fs)), func(nonce string) []byte {
			return s.repairRecord(st, 0, nonce)
		})
		return passing(s.fs, s.misc, err)
	}); err != nil {
		return s.giveUpRight(token, err)
	}
	gen, err := s.closeRest(ctx, r, c, &st)
	if err != nil {
		c.close()
		return s.giveUpRight(token, err)
	}
	path := filepath.Join(s.misc, "chain") // named in MISC/chain by a rename over what rd read
	if err := r.Do(ctx, func() error {
		if rd.isDir { // a directory put aside first
			if err := vfs.Rename(s.fs, path, path+".damaged."+newNonce(s.fs)); err != nil && !os.IsNotExist(err) {
				return err
			}
		}
		return passing(s.fs, s.misc, vfs.WriteAtomic(s.fs, path, 0o644, []byte(chainMagic+filepath.Base(c.dir)+"\n")))
	}); err != nil {
		c.close() // the rename may be made all the same (a lost reply): the right stays taken
		return fmt.Errorf("%w (see 'farm query'; if it still reports damage, remove %s and run 'farm repair' again)", err, token)
	}
	s.adoptChain(c, st, gen)
	return nil
}

// giveUpRight gives up the right token after err, before MISC/chain was
// replaced: what the repair read is still current, for the next one.
func (s *Store) giveUpRight(token string, err error) error {
	rerr := vfs.Remove(s.fs, filepath.Join(s.misc, filepath.Base(token)))
	if rerr != nil && !os.IsNotExist(rerr) {
		return fmt.Errorf("%w (MISC/chain unchanged: remove %s and run 'farm repair' again)", err, token)
	}
	return fmt.Errorf("%w (MISC/chain unchanged: run 'farm repair' again)", err)
}

// closeRest closes every chain in MISC but the new one c, then every lane; a
// run or IDs newer than *st's found closed go to *st and to c as its generation
// 1 (seed 348156 on local), which it returns (else 0).
func (s *Store) closeRest(ctx context.Context, r *fsretry.Retrier, c *chain, st *State) (int64, error) {
	last, err := s.closeIn(ctx, r, s.misc, func(name string) bool {
		return strings.HasPrefix(name, "claims.") && filepath.Join(s.misc, name) != c.dir
	})
	if err == nil { // no run can start but on a chain held since the damage, closed now
		err = s.closeAllLanes(ctx, r, 0)
	}
	if err != nil || last.Run <= st.Run && last.MaxID <= st.MaxID || mutated("repair-forgets-closed-run") {
		return 0, err
	}
	st.Run, st.MaxID = max(st.Run, last.Run), max(st.MaxID, last.MaxID)
	nonce := newNonce(s.fs)
	n, won, err := c.commitFrom(ctx, r, 1, func(n int64) []byte { return s.repairRecord(*st, n, nonce) })
	if err == nil && !won { // lost only to another repair's closing c
		err = &RepairRaceError{}
	}
	return n, err
}

// adoptChain makes c the store's chain and st, its generation gen, its state.
func (s *Store) adoptChain(c *chain, st State, gen int64) {
	s.setChain(c)
	st.Gen, st.Chain = gen, filepath.Base(c.dir)
	s.gen, s.cur = gen, st
}

// repairRecord is st as generation n's record, committed by this repair.
func (s *Store) repairRecord(st State, n int64, nonce string) []byte {
	return st.marshal(nil, n, commitInfo{by: cmp.Or(s.Job, "repair"), nonce: nonce})
}

// commitFrom commits gen(n) as generation n, from next on past voids, retried by r: a
// commit of unknown outcome is settled, not made again, unless its chain is gone; a
// slot another took is awaited. It returns n, and false if another committed it.
func (c *chain) commitFrom(ctx context.Context, r *fsretry.Retrier, next int64, gen func(n int64) []byte) (int64, bool, error) {
	for n := next; ; n++ {
		won, err := c.commit(n, gen(n))
		for err != nil && fsretry.IsTransient(err) && !errors.As(err, new(*DamageError)) && r.Again(ctx, err) {
			if errors.Is(err, errUndecided) {
				won, err = c.settle()
			} else {
				won, err = c.commit(n, gen(n))
			}
		}
		m := voided
		if err == nil && !won {
			m, err = c.awaitPaced(ctx, n, 0)
		}
		if err != nil || won || m != voided {
			return n, won, err
		}
	}
}

// placeholder makes the missing MISC/chain an empty file by mknod (one
// right; damage to others), and rd its reading; a *RepairRaceError if it exists.
func (s *Store) placeholder(rd *Reading) error {
	path := filepath.Join(s.misc, "chain")
	err := s.fs.Mknodat(unix.AT_FDCWD, path, unix.S_IFREG|0o644)
	if err == unix.EEXIST {
		return &RepairRaceError{}
	} else if err != nil {
		return passing(s.fs, s.misc, &os.PathError{Op: "mknod", Path: path, Err: err})
	}
	sb, err := vfs.Stat(s.fs, path)
	*rd = Reading{file: []byte{}, ino: sb.Ino}
	return err
}

// takeRight makes MISC/repair.KEY, whose O_EXCL create gives the right to
// replace what rd read in MISC/chain (KEY: the chain it named, else what it
// held, hashed), and returns its path; a *RepairRaceError if another repair made it.
func (s *Store) takeRight(ctx context.Context, r *fsretry.Retrier, rd Reading) (string, error) {
	name := "repair." + filepath.Base(rd.dir)
	if rd.dir == "" {
		h, kind := sha256.Sum256(rd.file), "x"
		if rd.isDir {
			kind = "d"
		}
		name = fmt.Sprintf("repair.%s%s-%d", kind, hex.EncodeToString(h[:8]), rd.ino)
	}
	path, rel := filepath.Join(s.misc, name), filepath.Join(layout.MiscDir, name)
	err := r.Do(ctx, func() error {
		f, err := vfs.Open(s.fs, unix.AT_FDCWD, path, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o644)
		if err != nil {
			return passing(s.fs, s.misc, &os.PathError{Op: "open", Path: path, Err: err})
		}
		// The name is the right; its content is for the record, unchecked.
		// (NFS recognises a retransmitted exclusive create: no EEXIST.)
		fmt.Fprintf(f, "farm repair of MISC/chain %.200q by %s\n", rd.file, cmp.Or(s.Job, "repair"))
		f.Close()
		return nil
	})
	if os.IsExist(err) {
		return "", &RepairRaceError{Token: rel}
	}
	return rel, err
}

// closeIn closes the chain of each directory under dir whose names picks take,
// one a level, and returns the newest run and largest MaxID they held; any
// error fails it (a chain left open could go on beside a new one).
func (s *Store) closeIn(ctx context.Context, r *fsretry.Retrier, dir string, picks ...func(string) bool) (State, error) {
	var last State
	var names []string
	if err := r.Do(ctx, func() (err error) {
		names, err = vfs.ReadDirNames(s.fs, dir)
		switch {
		case dir == s.misc: // MISC itself: unlisted, a chain could stay open beside a new one
			return passing(s.fs, dir, err)
		case errors.Is(err, unix.ENOTDIR):
			return nil // a file of that name
		}
		_, err = goneOr(s.fs, dir, err) // a set removed by a run start that lost
		return err
	}); err != nil {
		return last, fmt.Errorf("listing the chains to close: %w", err)
	}
	for _, name := range names {
		var was State
		var err error
		switch path := filepath.Join(dir, name); {
		case !picks[0](name):
			continue
		case len(picks) > 1:
			if was, err = s.closeIn(ctx, r, path, picks[1:]...); err != nil {
				return last, err
			}
		default:
			if tickets, ok := ticketDirOf(name); ok {
				if err = voidTickets(ctx, r, s.fs, path, tickets); err != nil {
					return last, fmt.Errorf("closing the start tickets %s: %w", path, err)
				}
				continue
			}
			if err = r.Do(ctx, func() (err error) {
				st, err := vfs.Stat(s.fs, path) // gone since the listing: closed enough
				if removed, err := goneOr(s.fs, path, err); removed || err != nil || !vfs.IsDir(&st) {
					return err
				}
				was, err = closeChain(ctx, r, s.fs, path)
				return err
			}); err != nil {
				return last, fmt.Errorf("closing the chain %s: %w", path, err)
			}
		}
		last.Run, last.MaxID = max(last.Run, was.Run), max(last.MaxID, was.MaxID)
	}
	return last, nil
}

// closeChain commits a generation closing the chain in dir, recording and returning the run and
// MaxID of the one before (zero if none reads); a directory removed meanwhile is closed enough.
func closeChain(ctx context.Context, r *fsretry.Retrier, fsys vfs.FS, dir string) (last State, err error) {
	c := newChain(fsys, dir)
	defer c.close()
	defer func() {
		if errors.Is(err, syscall.ENOENT) { // gone: closed; else there, a passing ENOENT
			if err = fsretry.Transient(err); gone(fsys, dir) {
				err = nil
			}
		}
	}()
	for {
		n, err := c.latestNear(-1, 0)
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
		_, won, err := c.commitFrom(ctx, r, c.nextSlot(n), func(n int64) []byte { return closing(n, last, nonce) })
		switch {
		case errors.As(err, new(*DamageError)) && !errors.Is(err, errUndecided):
			// Its directory gone: settled as an ENOENT. (Undecided: tried again from a new reading.)
			return State{}, &os.PathError{Op: "close", Path: c.dir, Err: syscall.ENOENT}
		case err != nil:
			return State{}, err
		case won:
			return last, nil
		}
		// Lost to a commit (a stalled claimer that resumed): close after it.
	}
}

// closing is the record of generation n closing a chain whose last state was last.
func closing(n int64, last State, nonce string) []byte {
	b := kv.AppendInt([]byte(genMagic), "gen", n)
	if last.Run > 0 {
		b = kv.AppendInt(b, "run", int64(last.Run))
		b = kv.AppendInt(b, "maxid", last.MaxID)
	}
	b = kv.Append(b, "nonce", nonce)
	return append(b, " closed\n"...)
}
