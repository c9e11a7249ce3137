package casetable

import (
	"io"
	"os"
	"slices"

	"golang.org/x/sys/unix"
)

// The filesystem calls of the claim path (chain.go, claim.go) go through
// the wrappers below, so that a benchmark can see each of them: onCall,
// if set, is called before the call with its kind, and the function it
// returns, if not nil, after it with its error. Unset (always, outside the
// benchmark in scale_bench_test.go) a wrapper costs one nil check.
//
// The kinds, as a file server would see them:
//
//	mknod      mknodat of a regular file: an exclusive create (a slot, a mark)
//	mknod.fifo mknodat of a FIFO: an exclusive create (a void)
//	create     an open with O_CREAT|O_EXCL: an exclusive create
//	open       any other open of a file
//	open.path  an O_PATH open of a directory (a lookup)
//	stat       fstatat or stat of a name (a lookup)
//	fstat      fstat of an open file
//	read       read or pread (one os.File.ReadAt, which repeats pread only
//	           when it reads short, counts once)
//	write      write
//	close      close
//	unlink     unlinkat, os.Remove
//	rename     renameat
//	link       linkat
//	mkdir      mkdirat, os.Mkdir
//
// The test-only fault injection (fault, injected) is separate, and asked
// where it always was.
var onCall func(kind string) func(error)

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

func sysMknodat(d int, name string, mode uint32) error {
	if onCall != nil {
		kind := "mknod"
		if mode&unix.S_IFMT == unix.S_IFIFO {
			kind = "mknod.fifo"
		}
		done := onCall(kind)
		err := unix.Mknodat(d, name, mode, 0)
		if done != nil {
			done(err)
		}
		return err
	}
	return unix.Mknodat(d, name, mode, 0)
}

func sysOpenat(d int, name string, flags int, mode uint32) (int, error) {
	if onCall != nil {
		done := onCall(openKind(flags))
		fd, err := unix.Openat(d, name, flags, mode)
		if done != nil {
			done(err)
		}
		return fd, err
	}
	return unix.Openat(d, name, flags, mode)
}

func sysFstatat(d int, name string, st *unix.Stat_t, flags int) error {
	if onCall != nil {
		done := onCall("stat")
		err := unix.Fstatat(d, name, st, flags)
		if done != nil {
			done(err)
		}
		return err
	}
	return unix.Fstatat(d, name, st, flags)
}

func sysUnlinkat(d int, name string) error {
	if onCall != nil {
		done := onCall("unlink")
		err := unix.Unlinkat(d, name, 0)
		if done != nil {
			done(err)
		}
		return err
	}
	return unix.Unlinkat(d, name, 0)
}

func sysRenameat(d int, from string, d2 int, to string) error {
	if onCall != nil {
		done := onCall("rename")
		err := unix.Renameat(d, from, d2, to)
		if done != nil {
			done(err)
		}
		return err
	}
	return unix.Renameat(d, from, d2, to)
}

func sysLinkat(d int, from string, d2 int, to string) error {
	if onCall != nil {
		done := onCall("link")
		err := unix.Linkat(d, from, d2, to, 0)
		if done != nil {
			done(err)
		}
		return err
	}
	return unix.Linkat(d, from, d2, to, 0)
}

func sysMkdirat(d int, name string, mode uint32) error {
	if onCall != nil {
		done := onCall("mkdir")
		err := unix.Mkdirat(d, name, mode)
		if done != nil {
			done(err)
		}
		return err
	}
	return unix.Mkdirat(d, name, mode)
}

// sysOpenFile is os.OpenFile (os.Open is sysOpenFile(path, os.O_RDONLY, 0)).
func sysOpenFile(path string, flag int, perm os.FileMode) (*os.File, error) {
	if onCall != nil {
		done := onCall(openKind(flag))
		f, err := os.OpenFile(path, flag, perm)
		if done != nil {
			done(err)
		}
		return f, err
	}
	return os.OpenFile(path, flag, perm)
}

func sysStat(path string) (os.FileInfo, error) {
	if onCall != nil {
		done := onCall("stat")
		fi, err := os.Stat(path)
		if done != nil {
			done(err)
		}
		return fi, err
	}
	return os.Stat(path)
}

func sysMkdir(path string, perm os.FileMode) error {
	if onCall != nil {
		done := onCall("mkdir")
		err := os.Mkdir(path, perm)
		if done != nil {
			done(err)
		}
		return err
	}
	return os.Mkdir(path, perm)
}

func sysRemove(path string) error {
	if onCall != nil {
		done := onCall("unlink")
		err := os.Remove(path)
		if done != nil {
			done(err)
		}
		return err
	}
	return os.Remove(path)
}

// sysReadFile is os.ReadFile, made of the wrappers when onCall is set: an
// open, an fstat (for the size), reads until EOF and a close, as
// os.ReadFile makes them (its buffer sizes too).
func sysReadFile(path string) ([]byte, error) {
	if onCall == nil {
		return os.ReadFile(path)
	}
	f, err := sysOpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer sysClose(f)
	var statSize int64
	if fi, err := sysFstat(f); err == nil {
		statSize = fi.Size()
	}
	const minBuf = 512
	size := 0
	if int64(int(statSize)) == statSize {
		size = int(statSize)
	}
	size = max(size+1, minBuf) // one byte for the final read at EOF
	b := make([]byte, 0, size)
	for {
		n, err := sysRead(f, b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return b, err
		}
		if rem := cap(b) - len(b); rem == 0 || (statSize == 0 && rem < minBuf) {
			b = slices.Grow(b, minBuf)
		}
	}
}

func sysRead(f *os.File, b []byte) (int, error) {
	if onCall != nil {
		done := onCall("read")
		n, err := f.Read(b)
		if done != nil {
			done(err)
		}
		return n, err
	}
	return f.Read(b)
}

func sysReadAt(f *os.File, b []byte, off int64) (int, error) {
	if onCall != nil {
		done := onCall("read")
		n, err := f.ReadAt(b, off)
		if done != nil {
			done(err)
		}
		return n, err
	}
	return f.ReadAt(b, off)
}

func sysWrite(f *os.File, b []byte) (int, error) {
	if onCall != nil {
		done := onCall("write")
		n, err := f.Write(b)
		if done != nil {
			done(err)
		}
		return n, err
	}
	return f.Write(b)
}

func sysClose(f *os.File) error {
	if onCall != nil {
		done := onCall("close")
		err := f.Close()
		if done != nil {
			done(err)
		}
		return err
	}
	return f.Close()
}

func sysFstat(f *os.File) (os.FileInfo, error) {
	if onCall != nil {
		done := onCall("fstat")
		fi, err := f.Stat()
		if done != nil {
			done(err)
		}
		return fi, err
	}
	return f.Stat()
}

// sysReadDirNames lists the names in the directory path: an open, a read
// of its entries (one getdents for a small directory, counted as one
// read) and a close.
func sysReadDirNames(path string) ([]string, error) {
	f, err := sysOpenFile(path, os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	defer sysClose(f)
	var done func(error)
	if onCall != nil {
		done = onCall("read")
	}
	names, err := f.Readdirnames(-1)
	if done != nil {
		done(err)
	}
	return names, err
}
