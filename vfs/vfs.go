// Package vfs is the filesystem, the clock and the randomness of farm's
// claim protocol (casetable): every call the protocol makes to the world
// outside its process goes through an FS. OS is the real one, the
// system's calls and clock; the simulator (package sim) gives each of its
// simulated processes another, an in-memory filesystem on a virtual clock
// whose every call is a point where its scheduler may switch processes or
// inject a fault.
//
// The calls are the system's, descriptor-relative (openat, mknodat, ...),
// with the system's errors (unix.Errno, compared with ==): the protocol
// is written against what a file server answers, and an FS answers the
// same. A path with dirfd unix.AT_FDCWD is absolute or relative to the
// working directory, as for the system.
package vfs

import (
	"context"
	"time"

	"golang.org/x/sys/unix"
)

// FS is what the claim protocol calls. Descriptors are ints, as the
// system's; a descriptor opened by one FS means nothing to another.
type FS interface {
	Openat(dirfd int, name string, flags int, mode uint32) (int, error)
	Mknodat(dirfd int, name string, mode uint32) error // a regular file or a FIFO, never a device
	Mkdirat(dirfd int, name string, mode uint32) error
	Fstatat(dirfd int, name string, st *unix.Stat_t, flags int) error
	Fstat(fd int, st *unix.Stat_t) error
	Unlinkat(dirfd int, name string, flags int) error // flags: 0 or unix.AT_REMOVEDIR
	Renameat(olddirfd int, oldname string, newdirfd int, newname string) error
	Linkat(olddirfd int, oldname string, newdirfd int, newname string) error
	Read(fd int, b []byte) (int, error)              // 0, nil at the end of the file
	Pread(fd int, b []byte, off int64) (int, error)  // 0, nil at the end of the file
	Write(fd int, b []byte) (int, error)             // at the descriptor's offset (or the end: O_APPEND)
	Pwrite(fd int, b []byte, off int64) (int, error) // at off
	Fsync(fd int) error
	Close(fd int) error
	// Getdents lists the names in the directory open as fd (not . and
	// ..), all at once.
	Getdents(fd int) ([]string, error)

	// Now is the time; Sleep waits for d, or until ctx is done
	// (ctx.Err() then).
	Now() time.Time
	Sleep(ctx context.Context, d time.Duration) error
	// Rand is a random number: nonces, and the choices the protocol
	// spreads processes with.
	Rand() uint64
}
