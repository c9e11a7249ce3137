package vfs

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"time"

	"golang.org/x/sys/unix"
)

// OS is the system: its calls, its clock, crypto/rand. It costs the
// protocol one interface call per system call (BENCHMARKS.md, "The
// filesystem interface").
type OS struct{}

func (OS) Openat(d int, name string, flags int, mode uint32) (int, error) {
	for {
		fd, err := unix.Openat(d, name, flags|unix.O_CLOEXEC, mode)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

func (OS) Mknodat(d int, name string, mode uint32) error { return unix.Mknodat(d, name, mode, 0) }
func (OS) Mkdirat(d int, name string, mode uint32) error { return unix.Mkdirat(d, name, mode) }
func (OS) Fstatat(d int, name string, st *unix.Stat_t, flags int) error {
	return unix.Fstatat(d, name, st, flags)
}
func (OS) Fstat(fd int, st *unix.Stat_t) error          { return unix.Fstat(fd, st) }
func (OS) Unlinkat(d int, name string, flags int) error { return unix.Unlinkat(d, name, flags) }
func (OS) Renameat(d int, from string, d2 int, to string) error {
	return unix.Renameat(d, from, d2, to)
}
func (OS) Linkat(d int, from string, d2 int, to string) error {
	return unix.Linkat(d, from, d2, to, 0)
}

func (OS) Read(fd int, b []byte) (int, error) {
	for {
		n, err := unix.Read(fd, b)
		if err != unix.EINTR {
			return max(n, 0), err
		}
	}
}

func (OS) Pread(fd int, b []byte, off int64) (int, error) {
	for {
		n, err := unix.Pread(fd, b, off)
		if err != unix.EINTR {
			return max(n, 0), err
		}
	}
}

func (OS) Write(fd int, b []byte) (int, error) {
	for {
		n, err := unix.Write(fd, b)
		if err != unix.EINTR {
			return max(n, 0), err
		}
	}
}

func (OS) Pwrite(fd int, b []byte, off int64) (int, error) {
	for {
		n, err := unix.Pwrite(fd, b, off)
		if err != unix.EINTR {
			return max(n, 0), err
		}
	}
}

func (OS) Fsync(fd int) error { return unix.Fsync(fd) }
func (OS) Close(fd int) error { return unix.Close(fd) }

func (o OS) Getdents(fd int) ([]string, error) {
	ents, err := o.GetdentsTyped(fd)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name
	}
	return names, nil
}

// GetdentsTyped lists the directory open as fd with each name's type, as
// the filesystem says it (DT_UNKNOWN where it does not).
func (OS) GetdentsTyped(fd int) ([]Dirent, error) {
	var ents []Dirent
	buf := make([]byte, 8192)
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return ents, nil
		}
		for b := buf[:n]; len(b) >= 19; { // struct linux_dirent64: ino 8, off 8, reclen 2, type 1, name
			reclen := int(binary.NativeEndian.Uint16(b[16:18]))
			if reclen < 19 || reclen > len(b) {
				break
			}
			name := b[19:reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			if s := string(name); s != "." && s != ".." && binary.NativeEndian.Uint64(b[:8]) != 0 { // 0: a name removed
				ents = append(ents, Dirent{Name: s, Type: b[18]})
			}
			b = b[reclen:]
		}
	}
}

func (OS) Now() time.Time { return time.Now() }

func (OS) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (OS) Rand() uint64 {
	var b [8]byte
	if _, err := crand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return binary.LittleEndian.Uint64(b[:])
}
