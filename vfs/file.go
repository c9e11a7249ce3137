package vfs

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// File is a descriptor open on an FS, with os.File's reading semantics
// (io.EOF at the end of the file). A nil *File is none.
type File struct {
	FS   FS
	Fd   int
	Name string // for messages
}

// Open opens name in the directory open as d (unix.AT_FDCWD: name is a
// path); its error is the FS's.
func Open(fsys FS, d int, name string, flags int, mode uint32) (*File, error) {
	fd, err := fsys.Openat(d, name, flags|unix.O_CLOEXEC, mode)
	if err != nil {
		return nil, err
	}
	return &File{FS: fsys, Fd: fd, Name: name}, nil
}

// OpenDir opens the directory path for the *at calls only (O_PATH: no open
// at the server, nothing to flush on close); its error is the FS's.
func OpenDir(fsys FS, path string) (*File, error) {
	return Open(fsys, unix.AT_FDCWD, path, unix.O_PATH|unix.O_DIRECTORY, 0)
}

// OpenDirAt opens the directory name in the directory open as d, as
// OpenDir, not if name is a symbolic link.
func OpenDirAt(fsys FS, d int, name string) (*File, error) {
	return Open(fsys, d, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
}

// CloseFile closes *f, if open, and makes it nil.
func CloseFile(f **File) {
	if *f != nil {
		(*f).Close()
		*f = nil
	}
}

// Read reads into b; io.EOF at the end of the file, as os.File.Read.
func (f *File) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	n, err := f.FS.Read(f.Fd, b)
	if err == nil && n == 0 {
		return 0, io.EOF
	}
	return n, err
}

// ReadAt reads len(b) bytes at off, as os.File.ReadAt: fewer only with
// an error, io.EOF at the end of the file.
func (f *File) ReadAt(b []byte, off int64) (int, error) {
	n := 0
	for n < len(b) {
		m, err := f.FS.Pread(f.Fd, b[n:], off+int64(n))
		if err != nil {
			return n, err
		}
		if m == 0 {
			return n, io.EOF
		}
		n += m
	}
	return n, nil
}

// Write writes b at the descriptor's offset.
func (f *File) Write(b []byte) (int, error) { return f.FS.Write(f.Fd, b) }

// WriteAt writes b at off.
func (f *File) WriteAt(b []byte, off int64) (int, error) { return f.FS.Pwrite(f.Fd, b, off) }

// Stat is fstat(2).
func (f *File) Stat() (unix.Stat_t, error) {
	var st unix.Stat_t
	err := f.FS.Fstat(f.Fd, &st)
	return st, err
}

// ID returns the file's size and inode number (fstat(2)); its error is an
// *os.PathError.
func (f *File) ID() (int64, uint64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, 0, &os.PathError{Op: "fstat", Path: f.Name, Err: err}
	}
	return st.Size, st.Ino, nil
}

// Sync is fsync(2).
func (f *File) Sync() error { return f.FS.Fsync(f.Fd) }

// Close closes the descriptor.
func (f *File) Close() error { return f.FS.Close(f.Fd) }
