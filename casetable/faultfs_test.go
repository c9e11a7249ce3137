package casetable

import (
	"path/filepath"
	"strings"
	"sync"

	"github.com/farm-hpc/farm/vfs"
	"golang.org/x/sys/unix"
)

// fault, if set, gives the error some claim-path calls fail with (nil: none),
// by op: "lookup" (a mark), "read" (a generation), "write" (a slot), "mark",
// "mark.reply" (a mark made, its reply lost), "bury" (a link to a tomb),
// "table.stat" and "table.read" (a claim's looks at its table). faultFS, the
// filesystem of NewStore's stores in the tests, fails them (parseFaults).
var fault func(op string) error

func init() { defaultFS = faultFS{} }

// faultFS is the system's filesystem with the calls fault names failing.
type faultFS struct{ vfs.OS }

// listFault, if set, gives the error a listing of the directory path fails with (nil: none).
var listFault func(path string) error

// tableFDs holds the descriptors of tables open (their reads are "table.read"),
// dirFDs those of directories open to be listed, with their paths.
var tableFDs, dirFDs sync.Map

// failed is the error fault gives op, if any.
func failed(op string) error {
	if fault == nil {
		return nil
	}
	return fault(op)
}

func (f faultFS) Fstatat(d int, name string, st *unix.Stat_t, flags int) error {
	op := ""
	switch {
	case strings.HasPrefix(name, "c.") && flags == unix.AT_SYMLINK_NOFOLLOW:
		op = "lookup" // chain.marker (bury's look at a mark follows links: not one)
	case d != unix.AT_FDCWD && flags == 0 && !strings.HasPrefix(name, "c."):
		op = "table.stat" // tableCheck.stat
	}
	if err := failed(op); op != "" && err != nil {
		return err
	}
	return f.OS.Fstatat(d, name, st, flags)
}

func (f faultFS) Openat(d int, name string, flags int, mode uint32) (int, error) {
	if strings.HasPrefix(name, "g.") && flags&unix.O_CREAT == 0 {
		if err := failed("read"); err != nil {
			return -1, err
		}
	}
	fd, err := f.OS.Openat(d, name, flags, mode)
	if err == nil && strings.HasPrefix(filepath.Base(name), "table.") {
		tableFDs.Store(fd, true)
	} else if err == nil && flags&(unix.O_DIRECTORY|unix.O_PATH) == unix.O_DIRECTORY {
		dirFDs.Store(fd, name)
	}
	return fd, err
}

func (f faultFS) Close(fd int) error {
	tableFDs.Delete(fd)
	dirFDs.Delete(fd)
	return f.OS.Close(fd)
}

func (f faultFS) Getdents(fd int) ([]string, error) {
	if path, ok := dirFDs.Load(fd); ok && listFault != nil {
		if err := listFault(path.(string)); err != nil {
			return nil, err
		}
	}
	return f.OS.Getdents(fd)
}

func (f faultFS) Pread(fd int, b []byte, off int64) (int, error) {
	if _, ok := tableFDs.Load(fd); ok {
		if err := failed("table.read"); err != nil {
			return 0, err
		}
	}
	return f.OS.Pread(fd, b, off)
}

func (f faultFS) Mknodat(d int, name string, mode uint32) error {
	reg := mode&unix.S_IFMT == unix.S_IFREG
	switch {
	case reg && strings.HasPrefix(name, "s."):
		if err := failed("write"); err != nil {
			return err
		}
	case reg && strings.HasPrefix(name, "c."):
		if err := failed("mark"); err != nil {
			return err
		}
		if err := f.OS.Mknodat(d, name, mode); err != nil {
			return err
		}
		return failed("mark.reply")
	}
	return f.OS.Mknodat(d, name, mode)
}

func (f faultFS) Linkat(d int, old string, d2 int, name string) error {
	if strings.HasPrefix(old, "tomb") {
		if err := failed("bury"); err != nil {
			return err
		}
	}
	return f.OS.Linkat(d, old, d2, name)
}
