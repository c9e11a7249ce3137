package casetable

import (
	"github.com/farm-hpc/farm/vfs"
	"golang.org/x/sys/unix"
)

// countingFS is the system's filesystem with every call shown to on
// before it is made (the benchmark in scale_bench_test.go puts it in
// defaultFS): on gets the call's kind and returns a function, if not nil,
// called after the call with its error. The kinds, as a file server would
// see them:
//
//	mknod      mknodat of a regular file: an exclusive create (a slot, a mark)
//	mknod.fifo mknodat of a FIFO: an exclusive create (a void)
//	create     an open with O_CREAT|O_EXCL: an exclusive create
//	open       any other open of a file
//	open.path  an O_PATH open of a directory (a lookup)
//	stat       fstatat of a name (a lookup)
//	fstat      fstat of an open file
//	read       read, pread, getdents
//	write      write, pwrite
//	close      close
//	unlink     unlinkat
//	rename     renameat
//	link       linkat
//	mkdir      mkdirat
//	fsync      fsync
type countingFS struct {
	vfs.OS
	on func(kind string) func(error)
}

func (c countingFS) do(kind string, call func() error) {
	done := c.on(kind)
	err := call()
	if done != nil {
		done(err)
	}
}

// openKind is the kind of an open with flags.
func openKind(flags int) string {
	switch {
	case flags&unix.O_PATH != 0:
		return "open.path"
	case flags&(unix.O_CREAT|unix.O_EXCL) == unix.O_CREAT|unix.O_EXCL:
		return "create"
	}
	return "open"
}

func (c countingFS) Openat(d int, name string, flags int, mode uint32) (fd int, err error) {
	c.do(openKind(flags), func() error { fd, err = c.OS.Openat(d, name, flags, mode); return err })
	return fd, err
}

func (c countingFS) Mknodat(d int, name string, mode uint32) (err error) {
	kind := "mknod"
	if mode&unix.S_IFMT == unix.S_IFIFO {
		kind = "mknod.fifo"
	}
	c.do(kind, func() error { err = c.OS.Mknodat(d, name, mode); return err })
	return err
}

func (c countingFS) Mkdirat(d int, name string, mode uint32) (err error) {
	c.do("mkdir", func() error { err = c.OS.Mkdirat(d, name, mode); return err })
	return err
}

func (c countingFS) Fstatat(d int, name string, st *unix.Stat_t, flags int) (err error) {
	c.do("stat", func() error { err = c.OS.Fstatat(d, name, st, flags); return err })
	return err
}

func (c countingFS) Fstat(fd int, st *unix.Stat_t) (err error) {
	c.do("fstat", func() error { err = c.OS.Fstat(fd, st); return err })
	return err
}

func (c countingFS) Unlinkat(d int, name string, flags int) (err error) {
	c.do("unlink", func() error { err = c.OS.Unlinkat(d, name, flags); return err })
	return err
}

func (c countingFS) Renameat(d int, from string, d2 int, to string) (err error) {
	c.do("rename", func() error { err = c.OS.Renameat(d, from, d2, to); return err })
	return err
}

func (c countingFS) Linkat(d int, from string, d2 int, to string) (err error) {
	c.do("link", func() error { err = c.OS.Linkat(d, from, d2, to); return err })
	return err
}

func (c countingFS) Read(fd int, b []byte) (n int, err error) {
	c.do("read", func() error { n, err = c.OS.Read(fd, b); return err })
	return n, err
}

func (c countingFS) Pread(fd int, b []byte, off int64) (n int, err error) {
	c.do("read", func() error { n, err = c.OS.Pread(fd, b, off); return err })
	return n, err
}

func (c countingFS) Write(fd int, b []byte) (n int, err error) {
	c.do("write", func() error { n, err = c.OS.Write(fd, b); return err })
	return n, err
}

func (c countingFS) Pwrite(fd int, b []byte, off int64) (n int, err error) {
	c.do("write", func() error { n, err = c.OS.Pwrite(fd, b, off); return err })
	return n, err
}

func (c countingFS) Fsync(fd int) (err error) {
	c.do("fsync", func() error { err = c.OS.Fsync(fd); return err })
	return err
}

func (c countingFS) Close(fd int) (err error) {
	c.do("close", func() error { err = c.OS.Close(fd); return err })
	return err
}

func (c countingFS) Getdents(fd int) (names []string, err error) {
	c.do("read", func() error { names, err = c.OS.Getdents(fd); return err })
	return names, err
}
