package casetable

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/farm-hpc/farm/fsretry"
	"github.com/farm-hpc/farm/tablefmt"
	"github.com/farm-hpc/farm/vfs"
	"golang.org/x/sys/unix"
)

// tableCheck is a run's table, open for a lane's claims and checked unchanged.
type tableCheck struct {
	fs      vfs.FS
	farm    string // the farm directory
	table   *vfs.File
	rd      tablefmt.Reader // table's lines (rd.Name: its name, as the state records it)
	dirFD   *vfs.File       // the farm directory, for stat
	fpIno   uint64          // an inode number of fpTable that its fingerprint vouched for
	fpTable string
	checked tableID // the table check found unchanged in this claim; zero: none yet
}

// drop closes the table and the directory the check keeps open (ESTALE, or
// for good), if s is not nil (the main chain's store has no table).
func (s *tableCheck) drop() {
	if s != nil {
		s.checked = tableID{}
		vfs.CloseFile(&s.table)
		s.rd.Reset(nil, "")
		vfs.CloseFile(&s.dirFD)
	}
}

// open makes s.table the open table of st (again, if fresh).
func (s *tableCheck) open(table string, fresh bool) error {
	if s.table != nil && s.rd.Name == table && !fresh {
		return nil
	}
	vfs.CloseFile(&s.table)
	path := filepath.Join(s.farm, table)
	f, err := vfs.Open(s.fs, unix.AT_FDCWD, path, unix.O_RDONLY, 0)
	if err != nil {
		return tableErr(s.fs, "open", path, err)
	}
	s.table = f
	s.rd.Reset(f, table)
	return nil
}

// TableChangedError: the run's table is not the file the run started with
// (its size or its inode differ): nothing more is claimed from it.
type TableChangedError struct {
	Table         string
	Run           int
	Size, WasSize int64
	MidLine       int64 // if not 0: the claim's byte offset, found not to start a line
}

// Error says what changed, and what to do.
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

// tableRecheck is check's wait before a second look: longer than FUSE and
// GlusterFS clients keep a file's attributes (about a second).
var tableRecheck = 1500 * time.Millisecond

// check opens st's table if needed and checks, once a claim, that it is the file the
// run started with (same); a difference is looked at again, past attribute caches.
func (s *tableCheck) check(st *State) error {
	was := s.table
	if err := s.open(st.Table, false); err != nil {
		return err
	}
	id := tableID{st.Table, st.TSize, st.TIno, st.TFP}
	if st.TSize <= 0 || s.checked == id {
		return nil // not recorded (a state 'farm repair' rebuilt), or checked
	}
	var size int64
	var ino uint64
	var err error
	if s.table != was {
		size, ino, err = s.table.ID() // opened just now: the file its path names
	} else {
		size, ino, err = s.stat(st.Table)
	}
	ok, err := s.same(st, size, ino, err)
	if err == nil && !ok {
		s.fs.Sleep(context.Background(), tableRecheck)
		if err = s.open(st.Table, true); err == nil {
			size, ino, err = s.table.ID()
		}
		ok, err = s.same(st, size, ino, err)
	}
	if ok {
		s.checked = id
	} else if err == nil {
		err = &TableChangedError{Table: st.Table, Run: st.Run, Size: size, WasSize: st.TSize}
	}
	return err
}

// same reports whether the file of size and inode ino (err: their reading's) is st's
// table: same size, and inode or, as some Lustre, NFS and FUSE mounts vary it, fingerprint.
func (s *tableCheck) same(st *State, size int64, ino uint64, err error) (bool, error) {
	if err != nil || size != st.TSize {
		return false, err
	}
	if st.TIno == 0 || ino == st.TIno || (ino == s.fpIno && st.Table == s.fpTable) {
		return true, nil
	}
	if st.TFP == "" {
		return false, nil
	}
	if err := s.open(st.Table, true); err != nil {
		return false, err
	}
	if fp, err := tablefmt.Fingerprint(s.table, size); err == nil && fp == st.TFP {
		s.fpIno, s.fpTable = ino, st.Table
		return true, nil
	}
	return false, nil
}

// tableID is a run's table as its claim state records it.
type tableID struct {
	name string
	size int64
	ino  uint64
	fp   string
}

// stat returns the size and inode of table, from the farm directory's descriptor.
func (s *tableCheck) stat(table string) (int64, uint64, error) {
	if s.dirFD == nil {
		fd, err := vfs.OpenDir(s.fs, s.farm)
		if err != nil {
			return 0, 0, tableErr(s.fs, "open", s.farm, err)
		}
		s.dirFD = fd
	}
	var st unix.Stat_t
	err := s.fs.Fstatat(s.dirFD.Fd, table, &st, 0)
	if err != nil {
		return 0, 0, tableErr(s.fs, "stat", filepath.Join(s.farm, table), err)
	}
	return st.Size, st.Ino, nil
}

// tableErr is the error of op on a run's table at path: an ENOENT is passing
// unless it is certainly gone (it is never removed while the run claims).
func tableErr(fsys vfs.FS, op, path string, err error) error {
	if err = (&os.PathError{Op: op, Path: path, Err: err}); mutated("table-enoent-ends-claims") {
		return err
	}
	return passing(fsys, path, err)
}

// goneOr is, for err, a call's on path: whether path is certainly gone (gone confirms
// an ENOENT), else err, an ENOENT transient; one look decides both (two could disagree).
func goneOr(fsys vfs.FS, path string, err error) (bool, error) {
	if !errors.Is(err, unix.ENOENT) || fsretry.IsTransient(err) {
		return false, err
	}
	testHook("gone", path)
	if gone(fsys, path) {
		return true, nil
	}
	if mutated("gone-looked-twice") && gone(fsys, path) {
		return false, err // a second look, which said gone
	}
	return false, fsretry.Transient(err)
}

// passing marks err, a call's on path, transient if an ENOENT and path is not certainly gone.
func passing(fsys vfs.FS, path string, err error) error {
	if isGone, perr := goneOr(fsys, path, err); !isGone {
		return perr
	}
	return err
}

// tableIDOn returns what a run records of its table at path: its size, inode and fingerprint.
func tableIDOn(fsys vfs.FS, path string) (size int64, ino uint64, fp string, err error) {
	f, err := vfs.Open(fsys, unix.AT_FDCWD, path, unix.O_RDONLY, 0)
	if err != nil {
		return 0, 0, "", &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer f.Close()
	if size, ino, err = f.ID(); err == nil {
		fp, err = tablefmt.Fingerprint(f, size)
	}
	return size, ino, fp, err
}
