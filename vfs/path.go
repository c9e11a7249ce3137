package vfs

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// The functions below are os's of the same names, over an FS: their
// errors are *os.PathError or *os.LinkError, as os's are, wrapping the
// FS's unix.Errno (os.IsNotExist and errors.Is(err, fs.ErrNotExist)
// work on them).

func pathErr(op, path string, err error) error {
	if err == nil {
		return nil
	}
	return &os.PathError{Op: op, Path: path, Err: err}
}

// ReadFile reads the file path whole.
func ReadFile(fsys FS, path string) ([]byte, error) {
	b, err := ReadFileAt(fsys, unix.AT_FDCWD, path)
	return b, pathErr("open", path, err)
}

// ReadFileAt reads the file name in the directory open as d, whole; its
// error is the FS's.
func ReadFileAt(fsys FS, d int, name string) ([]byte, error) {
	fd, err := fsys.Openat(d, name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer fsys.Close(fd)
	var st unix.Stat_t
	size := 512
	if fsys.Fstat(fd, &st) == nil && st.Size > 0 && st.Size < 1<<30 {
		size = int(st.Size) + 1 // one byte for the read that finds the end
	}
	b := make([]byte, 0, size)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := fsys.Read(fd, b[len(b):cap(b)])
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return b, nil
		}
		b = b[:len(b)+n]
	}
}

// ReadHead reads the start of the file path: one read of 4 KiB at most (a
// header); an error only if it read nothing.
func ReadHead(fsys FS, path string) ([]byte, error) {
	f, err := Open(fsys, unix.AT_FDCWD, path, unix.O_RDONLY, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer f.Close()
	b := make([]byte, 4096)
	n, err := f.Read(b)
	if n == 0 && err != nil {
		return nil, err
	}
	return b[:n], nil
}

// ReadFileIno reads the file path whole and returns its inode number, from
// one open; a directory's is returned with EISDIR.
func ReadFileIno(fsys FS, path string) ([]byte, uint64, error) {
	f, err := Open(fsys, unix.AT_FDCWD, path, unix.O_RDONLY, 0)
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

// ReadLineAt reads the file name, one line written whole, in the directory
// open as d. A short read that ends the line has read it all, with no second
// read to be told EOF (a round trip to a file server).
func ReadLineAt(fsys FS, d int, name string) ([]byte, error) {
	f, err := Open(fsys, d, name, unix.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
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

// ReadDirNames lists the names in the directory path (not . and ..),
// sorted or not as the FS gives them.
func ReadDirNames(fsys FS, path string) ([]string, error) {
	fd, err := fsys.Openat(unix.AT_FDCWD, path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, pathErr("open", path, err)
	}
	defer fsys.Close(fd)
	names, err := fsys.Getdents(fd)
	return names, pathErr("readdirent", path, err)
}

// A Dirent is a name a directory's listing gave, with its type (unix.DT_*;
// DT_UNKNOWN if the listing did not say it).
type Dirent struct {
	Name string
	Type uint8
}

// TypedLister is an FS whose listings say each name's type (getdents(2)'s d_type).
type TypedLister interface {
	GetdentsTyped(fd int) ([]Dirent, error)
}

// ReadDirTyped lists the names in the directory path with their types: DT_UNKNOWN
// for all if fsys does not say them. A name's type is its, if it is said: a
// listing may lack names made since (a client's cache), never a wrong type.
func ReadDirTyped(fsys FS, path string) ([]Dirent, error) {
	tl, ok := fsys.(TypedLister)
	if !ok {
		names, err := ReadDirNames(fsys, path)
		ents := make([]Dirent, len(names))
		for i, n := range names {
			ents[i] = Dirent{Name: n, Type: unix.DT_UNKNOWN}
		}
		return ents, err
	}
	fd, err := fsys.Openat(unix.AT_FDCWD, path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, pathErr("open", path, err)
	}
	defer fsys.Close(fd)
	ents, err := tl.GetdentsTyped(fd)
	return ents, pathErr("readdirent", path, err)
}

// Stat is lstat(2) of path (a symbolic link is not followed).
func Stat(fsys FS, path string) (unix.Stat_t, error) {
	var st unix.Stat_t
	err := fsys.Fstatat(unix.AT_FDCWD, path, &st, unix.AT_SYMLINK_NOFOLLOW)
	return st, pathErr("lstat", path, err)
}

// IsDir reports whether st is a directory's.
func IsDir(st *unix.Stat_t) bool { return st.Mode&unix.S_IFMT == unix.S_IFDIR }

// Mkdir makes the directory path.
func Mkdir(fsys FS, path string, mode uint32) error {
	return pathErr("mkdir", path, fsys.Mkdirat(unix.AT_FDCWD, path, mode))
}

// Remove removes the file or empty directory path.
func Remove(fsys FS, path string) error {
	err := fsys.Unlinkat(unix.AT_FDCWD, path, 0)
	if err == unix.EISDIR || err == unix.EPERM {
		if derr := fsys.Unlinkat(unix.AT_FDCWD, path, unix.AT_REMOVEDIR); derr != unix.ENOTDIR {
			err = derr
		}
	}
	return pathErr("remove", path, err)
}

// RemoveAll removes path and all it holds; a path that is not there is no
// error.
func RemoveAll(fsys FS, path string) error {
	st, err := Stat(fsys, path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if IsDir(&st) {
		names, err := ReadDirNames(fsys, path)
		if err != nil {
			return err
		}
		for _, n := range names {
			if err := RemoveAll(fsys, filepath.Join(path, n)); err != nil {
				return err
			}
		}
	}
	if err := Remove(fsys, path); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}

// Rename renames from to to.
func Rename(fsys FS, from, to string) error {
	if err := fsys.Renameat(unix.AT_FDCWD, from, unix.AT_FDCWD, to); err != nil {
		return &os.LinkError{Op: "rename", Old: from, New: to, Err: err}
	}
	return nil
}

// WriteNewAt writes b to a new file name in the directory open as d (an
// O_EXCL create: EEXIST if it is there), in one write; its error is the
// FS's.
func WriteNewAt(fsys FS, d int, name string, b []byte, mode uint32) error {
	fd, err := fsys.Openat(d, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
	if err != nil {
		return err
	}
	if _, err := fsys.Write(fd, b); err != nil {
		fsys.Close(fd)
		return err
	}
	return fsys.Close(fd)
}

// WriteAtomic replaces the file path whole with b, as package atomicfile
// does: b is written to a new file of a random name beside it, synced and
// renamed over path; the file gets mode (less the umask, on the system).
func WriteAtomic(fsys FS, path string, mode uint32, b []byte) error {
	dir, base := filepath.Split(path)
	tmp := filepath.Join(dir, fmt.Sprintf(".%s.tmp%016x", strings.TrimPrefix(base, "."), fsys.Rand()))
	fd, err := fsys.Openat(unix.AT_FDCWD, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, mode)
	if err == unix.EEXIST {
		// Nobody else knows the name: our own create, its reply lost
		// and its request retried.
		fd, err = fsys.Openat(unix.AT_FDCWD, tmp, unix.O_WRONLY|unix.O_TRUNC|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return pathErr("open", tmp, err)
	}
	_, err = fsys.Write(fd, b)
	if err == nil {
		err = fsys.Fsync(fd)
	}
	var st unix.Stat_t
	if err == nil {
		err = fsys.Fstat(fd, &st)
	}
	if cerr := fsys.Close(fd); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Renameat(unix.AT_FDCWD, tmp, unix.AT_FDCWD, path)
		if err != nil && holds(fsys, path, st.Ino) {
			// Renamed all the same, its reply lost (a retried request
			// answers ENOENT): path holds our file. Only that decides
			// it: the temporary name looked up missing may be a
			// passing ENOENT (GlusterFS, a brick down; the simulator,
			// seed 580690 on gluster-dht), the rename not made.
			err = nil
		}
	}
	if err != nil {
		fsys.Unlinkat(unix.AT_FDCWD, tmp, 0)
		return pathErr("write", path, err)
	}
	return nil
}

// holds reports whether the name path is the file of inode ino.
func holds(fsys FS, path string, ino uint64) bool {
	var st unix.Stat_t
	return fsys.Fstatat(unix.AT_FDCWD, path, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Ino == ino
}

// WriteInPlace writes rec at offset 0 of the file name in the directory
// open as d (unix.AT_FDCWD: name is a path), in one write; best effort: a
// record that many processes may rewrite at once (the claim chain's head
// hint, dt_cutoff), of one fixed length, so that two writes leave one or
// the other whole and none needs truncating.
//
// Never by a rename onto name: renames of several clients onto one name
// deadlocked a GlusterFS distribute-replicate volume (on the rig's dht
// volume, 4 meta-jobs hung in rename(2) onto one such record for good, and
// so did an mv onto it from the head, 2026-11-27; GlusterFS issue 3089: a
// rename is a link, an unlink and locks between them, and two renames onto
// one name can wait for each other's locks until the client's frame
// timeout, 30 minutes). And the file is made only by an O_EXCL create: two
// clients that both make a name with O_CREAT alone can each be told they
// did, on a replicated GlusterFS volume, and leave the replicas with two
// files of one name (a gfid split-brain).
func WriteInPlace(fsys FS, d int, name string, rec []byte) {
	const flags = unix.O_WRONLY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := fsys.Openat(d, name, flags, 0)
	if err == unix.ENOENT {
		fd, err = fsys.Openat(d, name, flags|unix.O_CREAT|unix.O_EXCL, 0o644)
		if err == unix.EEXIST {
			fd, err = fsys.Openat(d, name, flags, 0)
		}
	}
	if err != nil {
		return
	}
	fsys.Pwrite(fd, rec, 0)
	fsys.Close(fd)
}
