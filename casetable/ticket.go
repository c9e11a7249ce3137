package casetable

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/farm-hpc/farm/fsretry"
	"github.com/farm-hpc/farm/tablefmt"
	"github.com/farm-hpc/farm/vfs"
	"golang.org/x/sys/unix"
)

// Start tickets (issue 39; CLAIMS.md, "Start tickets"). A set made for a run
// of many meta-jobs sets its first cases apart, one a ticket: meta-job j's
// first claim takes ticket j mod T with no chain commit, so that a herd of
// meta-jobs started together does not queue on the lanes' slots. Ticket J is
// two names in the set's t.T directory, each made once by mknod:
//
//   - s.J, its slot: the process whose mknod of it succeeded (a reply, not an
//     EEXIST) owns the ticket; no other makes c.J a regular file.
//   - c.J, its mark: a regular file made by the slot's owner claims the case;
//     a FIFO made by anyone voids the ticket. A name has one type, made once.
//
// A voided ticket's case is the sweep lane's (the set's last lane): a chain
// like the others, picked once they are exhausted, whose cursor passes the
// tickets' blocks in order; its claim voids each ticket it passes and takes
// the cases of those it finds voided, not those claimed. Closing a set voids
// every ticket not marked before closing its lanes.

const sweepVoids = 64 // the sweep makes about this many calls on tickets at most in one commit

// ticketsOn: FARM_CLAIM_TICKETS=0 makes sets with no tickets (a benchmark's before).
var ticketsOn = os.Getenv("FARM_CLAIM_TICKETS") != "0"

// ticketBlocks is how many of a set's nblocks blocks of size cases are
// tickets for jobs meta-jobs: jobs/size (whole blocks), at most half.
func ticketBlocks(jobs int, size, nblocks int64) int64 {
	if !ticketsOn || jobs < minLaneJobs {
		return 0
	}
	return min(int64(jobs)/size, nblocks/2)
}

// ticketDir is the name, in a set's directory, of its tickets' directory.
func ticketDir(tickets int64) string { return "t." + strconv.FormatInt(tickets, 10) }

// ticketDirOf reports the tickets of a set whose tickets' directory is name.
func ticketDirOf(name string) (int64, bool) {
	n, ok := strings.CutPrefix(name, "t.")
	t, err := strconv.ParseInt(n, 10, 64)
	return t, ok && err == nil && t > 0
}

// ticketPath is the path of ticket j's slot (kind "s") or mark ("c").
func ticketPath(dir string, tickets int64, kind string, j int64) string {
	return filepath.Join(dir, ticketDir(tickets), kind+"."+strconv.FormatInt(j, 10))
}

// Kinds of a ticket's mark.
const (
	ticketOpen    = iota // no mark (or one not yet seen)
	ticketClaimed        // a regular file: its slot's owner claimed the case
	ticketVoid           // a FIFO
)

// ticketMark looks at a ticket's mark (one lookup): its kind, or the lookup's error.
func ticketMark(fsys vfs.FS, mark string) (int, error) {
	var st unix.Stat_t
	err := fsys.Fstatat(unix.AT_FDCWD, mark, &st, unix.AT_SYMLINK_NOFOLLOW)
	switch {
	case errors.Is(err, unix.ENOENT):
		return ticketOpen, nil
	case err != nil:
		return 0, fsretry.Transient(&os.PathError{Op: "lstat", Path: mark, Err: err})
	case st.Mode&unix.S_IFMT == unix.S_IFREG && !mutated("ticket-void-as-claim"):
		return ticketClaimed, nil
	}
	return ticketVoid, nil
}

// makeMark makes a ticket's mark of type typ (S_IFREG: a claim, S_IFIFO: a
// void) and returns the kind it has then: decided from the filesystem, not
// from the reply (an EEXIST may answer a retried request of its own).
// A mark made and not seen yet (a client's stale entry) is a transient error.
func makeMark(fsys vfs.FS, mark string, typ uint32) (int, error) {
	err := fsys.Mknodat(unix.AT_FDCWD, mark, typ|0o644)
	if err == nil {
		if typ == unix.S_IFREG {
			return ticketClaimed, nil
		}
		return ticketVoid, nil
	}
	if mutated("ticket-eexist-won") && err == unix.EEXIST {
		return ticketClaimed, nil // the reply trusted
	}
	if err == unix.ENOENT { // the tickets' directory: passing, unless it is gone (damage)
		return ticketOpen, passing(fsys, filepath.Dir(mark), &os.PathError{Op: "mknod", Path: mark, Err: err})
	}
	kind, lerr := ticketMark(fsys, mark)
	if lerr == nil && kind == ticketOpen {
		lerr = fsretry.Transient(&os.PathError{Op: "mknod", Path: mark, Err: err})
	}
	return kind, lerr
}

// kindOf is the kind of a ticket's mark of type dt, as a listing says it (DT_UNKNOWN: not said).
func kindOf(dt uint8) (int, bool) {
	switch {
	case dt == unix.DT_REG || dt == unix.DT_FIFO && mutated("ticket-void-as-claim"):
		return ticketClaimed, true
	case dt == unix.DT_FIFO:
		return ticketVoid, true
	}
	return ticketOpen, false
}

// listTickets lists L's tickets' marks with their kinds (as far as the listing says them).
func (L *laneSet) listTickets(fsys vfs.FS) (map[int64]uint8, error) {
	tdir := filepath.Join(L.dir, ticketDir(L.x.tickets))
	marks, err := readMarks(fsys, tdir)
	if err != nil {
		return nil, passing(fsys, tdir, err)
	}
	return marks, nil
}

// readMarks lists the marks in the tickets' directory tdir, by ticket, with
// their types as the listing gives them; the listing's own error.
func readMarks(fsys vfs.FS, tdir string) (map[int64]uint8, error) {
	ents, err := vfs.ReadDirTyped(fsys, tdir)
	if err != nil {
		return nil, err
	}
	marks := make(map[int64]uint8, len(ents))
	for _, e := range ents {
		if n, ok := strings.CutPrefix(e.Name, "c."); ok {
			if j, err := strconv.ParseInt(n, 10, 64); err == nil {
				marks[j] = e.Type
			}
		}
	}
	return marks, nil
}

// voidTicket voids ticket j of L unless its owner claimed it: whether it is
// void (the sweep's to claim), and whether it made a call to tell. A mark
// listed with its type (marks: listTickets's) is not looked at again.
func (L *laneSet) voidTicket(fsys vfs.FS, marks map[int64]uint8, j int64) (void, called bool, err error) {
	if kind, ok := kindOf(marks[j]); ok {
		return kind == ticketVoid, false, nil
	}
	kind, err := makeMark(fsys, ticketPath(L.dir, L.x.tickets, "c", j), unix.S_IFIFO)
	return kind == ticketVoid, true, err
}

// claimTicket is a store's first claim in L: its ticket's case, or none (it
// claims in the lanes then) if another has the ticket or the slot's outcome is
// not known. An error is the table's (changed, unreadable), or an undecided mark.
func (s *Store) claimTicket(ctx context.Context, L *laneSet) ([]tablefmt.Case, error) {
	L.ticketTried = true
	j := int64(homeLane(s.fs, s.Job, int(L.x.tickets)))
	c, err := L.ticketCase(s, j)
	if err != nil {
		var tc *TableChangedError
		if errors.As(err, &tc) {
			return nil, err
		}
		return nil, nil // the lanes read the table with their retries
	}
	if err := s.fs.Mknodat(unix.AT_FDCWD, ticketPath(L.dir, L.x.tickets, "s", j), unix.S_IFREG|0o644); err != nil {
		if err != unix.EEXIST {
			L.voidTicket(s.fs, nil, j) // perhaps its own, a reply lost: nobody's (else the sweep voids it)
		}
		return nil, nil
	}
	token := ticketToken(s.misc, L, j)
	ids := []int64{c.ID}
	if s.Note != nil {
		if err := s.Note(token, ids, false); err != nil {
			L.voidTicket(s.fs, nil, j)
			return nil, err
		}
	}
	r := fsretry.Retrier{Limit: s.Retry, Log: s.log(), Clock: s.fs}
	var kind int
	mark := ticketPath(L.dir, L.x.tickets, "c", j)
	err = r.Do(ctx, func() (err error) {
		kind, err = makeMark(s.fs, mark, unix.S_IFREG)
		return err
	})
	switch {
	case err != nil:
		return nil, fmt.Errorf("claiming start ticket %s: %w", mark, err) // ClaimWon decides it
	case kind != ticketClaimed:
		if s.Note != nil {
			s.Note(token, ids, true)
		}
		return nil, nil
	}
	return []tablefmt.Case{c}, nil
}

// ticketCase reads ticket j's case: case j of the table, in block j/block,
// the table checked to be the file the set was made over.
func (L *laneSet) ticketCase(s *Store, j int64) (tablefmt.Case, error) {
	x := L.x
	if L.tab == nil {
		L.tab = &tableCheck{fs: s.fs, farm: s.Dir}
	}
	defer L.tab.drop() // the lanes open the table themselves
	st := State{Run: s.opened.Run, Table: L.set.Table, TSize: x.tsize, TIno: x.tino, TFP: x.tfp}
	if err := L.tab.check(&st); err != nil {
		return tablefmt.Case{}, err
	}
	b := j / x.block
	off, lines := x.starts[b], x.lines[b]
	for k := int64(0); ; k++ {
		c, after, n, ok, err := L.tab.rd.Case(off, x.tsize)
		if err != nil {
			return c, err
		}
		if !ok || b+1 < x.nblocks && after > x.starts[b+1] {
			return c, &DamageError{Path: filepath.Join(L.dir, "index"), Why: fmt.Sprintf("block %d holds no case %d", b, j)}
		}
		off, lines = after, lines+n
		if k == j%x.block {
			c.Line, c.Table = lines, L.set.Table
			return c, nil
		}
	}
}

// ticketToken names ticket j of L for Opts.Note: "DIR/t.T@J#ticket".
func ticketToken(misc string, L *laneSet, j int64) string {
	rel, _ := filepath.Rel(misc, filepath.Join(L.dir, ticketDir(L.x.tickets)))
	return rel + "@" + strconv.FormatInt(j, 10) + "#ticket"
}

// ticketWon decides a noted ticket (ClaimWon): claimed if its mark is a
// regular file; else it voids it, so that its owner, stalled, cannot claim it after.
func (s *Store) ticketWon(ctx context.Context, dir string, j int64) (bool, error) {
	mark := filepath.Join(s.misc, dir, "c."+strconv.FormatInt(j, 10))
	r := fsretry.Retrier{Limit: s.Retry, Log: s.log(), Clock: s.fs}
	var kind int
	err := r.Do(ctx, func() (err error) {
		kind, err = makeMark(s.fs, mark, unix.S_IFIFO)
		return err
	})
	return kind == ticketClaimed, err
}

// voidTickets voids, in the tickets' directory tdir, every one of its tickets
// not marked (claimed or void): closing their set.
func voidTickets(ctx context.Context, r *fsretry.Retrier, fsys vfs.FS, tdir string, tickets int64) error {
	var marked map[int64]uint8
	gone := false
	if err := r.Do(ctx, func() (err error) {
		marked, err = readMarks(fsys, tdir)
		gone, err = goneOr(fsys, tdir, err) // removed (a start that lost): nothing to void
		return err
	}); err != nil || gone {
		return err
	}
	for j := int64(0); j < tickets; j++ {
		if _, ok := marked[j]; ok || mutated("close-leaves-tickets") {
			continue
		}
		mark := filepath.Join(tdir, "c."+strconv.FormatInt(j, 10))
		if err := r.Do(ctx, func() (err error) {
			_, err = makeMark(fsys, mark, unix.S_IFIFO)
			// makeMark's ENOENT, not transient, is tdir found gone: removed
			// since the listing (a start that lost), closed as well.
			gone = errors.Is(err, unix.ENOENT) && !fsretry.IsTransient(err) && !mutated("tickets-gone-fails-close")
			if gone {
				return nil
			}
			return err
		}); err != nil {
			return fmt.Errorf("voiding start ticket %s: %w", mark, err)
		}
		if gone {
			return nil
		}
	}
	return nil
}

// closeTickets voids the tickets of set t, if it has any (its index says).
func (s *Store) closeTickets(ctx context.Context, r *fsretry.Retrier, run int, t Set) error {
	var L *laneSet
	if err := r.Do(ctx, func() (err error) {
		L, err = s.openSet(run, t, true)
		return err
	}); err != nil || L.x.tickets == 0 {
		return err
	}
	return voidTickets(ctx, r, s.fs, filepath.Join(L.dir, ticketDir(L.x.tickets)), L.x.tickets)
}

// ticketsClaimed counts the tickets of L that their owners claimed (Read):
// a listing of their directory, and a lookup of each mark it gives no type.
func (L *laneSet) ticketsClaimed(fsys vfs.FS) (int64, error) {
	marks, err := L.listTickets(fsys)
	if err != nil {
		return 0, err
	}
	var n int64
	for j, dt := range marks {
		kind, ok := kindOf(dt)
		if !ok {
			if kind, err = ticketMark(fsys, ticketPath(L.dir, L.x.tickets, "c", j)); err != nil {
				return 0, err
			}
		}
		if kind == ticketClaimed {
			n++
		}
	}
	return n, nil
}

// sweeping is the sweep lane's walk through the tickets in one claim.
type sweeping struct {
	L     *laneSet
	fs    vfs.FS
	marks map[int64]uint8 // the marks listed, with their types
	k     int             // the next case's place in its block
	calls int             // calls made on tickets' marks
}

// startSweep starts a sweep's walk from st's cursor: the tickets' marks
// listed (a listing spares the calls on those it gives with their type),
// and the cursor's place in its block.
func (ls *chainStore) startSweep(L *laneSet, st *State) (*sweeping, error) {
	marks, err := L.listTickets(ls.fs)
	if err != nil {
		return nil, err
	}
	w := &sweeping{L: L, fs: ls.fs, marks: marks}
	if x := L.x; st.Block < x.tblocks() {
		for o := x.starts[st.Block]; o < st.Offset; w.k++ {
			_, after, _, ok, err := ls.tab.rd.Case(o, st.TSize)
			if err != nil || !ok {
				return nil, cmp.Or(err, error(&DamageError{Path: filepath.Join(L.dir, "index"), Why: "a sweep's cursor past its block"}))
			}
			o = after
		}
	}
	return w, nil
}

// full reports whether the walk made its calls' worth, at a block's start.
func (w *sweeping) full() bool { return w.k == 0 && w.calls >= sweepVoids }

// take voids the ticket of the next case, in block b, unless its owner
// claimed it: whether the case is the sweep's.
func (w *sweeping) take(b int64) (bool, error) {
	void, called, err := w.L.voidTicket(w.fs, w.marks, b*w.L.x.block+int64(w.k))
	w.k++
	if called {
		w.calls++
	}
	return void, err
}

// sweepEarly reports whether this claimer sweeps the tickets now, its home
// lane exhausted while others have cases: the first such claimer of the
// set, by mknod of its "sweeper" name, so that the sweep is done before the
// run's other claimers, their lanes exhausted in turn, all come to it at
// the end. A hint: any claimer may sweep at any time.
func (L *laneSet) sweepEarly(fsys vfs.FS) bool {
	if L.sweepTried {
		return false
	}
	L.sweepTried = true
	return fsys.Mknodat(unix.AT_FDCWD, filepath.Join(L.dir, "sweeper"), unix.S_IFREG|0o644) == nil
}
