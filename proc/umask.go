package proc

import (
	"bytes"
	"os"
	"strconv"
	"sync"
	"syscall"
)

// Umask returns this process's file-mode creation mask. Files farm writes
// whole and renames into place are created private and then given their
// mode explicitly, which the umask does not touch: their mode must be
// masked with this, as a plain create would be.
func Umask() os.FileMode { return umask() }

// Unshared are the mode bits farm never gives a file or directory it
// makes: write for the group and for others. Under a umask of 000 (or
// 002) a farm directory writable by others would let any local user
// replace single_case.sh or a job record.
const Unshared os.FileMode = 0o022

// NewMode is the mode of a file or directory farm makes with perm (0o666
// for a file, 0o777 for a directory or a script): perm under this
// process's umask, as a plain create would give it, and never wider than
// 0755/0644 whatever the umask (NewMode(0o777) is 0755 under umask 000,
// 0700 under 077). For a file or directory created with a mode given
// explicitly (chmod, fchmod), which the umask does not touch.
func NewMode(perm os.FileMode) os.FileMode { return perm.Perm() &^ (Umask() | Unshared) }

var umask = sync.OnceValue(func() os.FileMode {
	// Linux 4.7 and later show it without changing it.
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range bytes.Split(b, []byte("\n")) {
			if v, ok := bytes.CutPrefix(line, []byte("Umask:")); ok {
				if n, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 8, 32); err == nil {
					return os.FileMode(n)
				}
			}
		}
	}
	// Setting it is the only other way to read it; sync.OnceValue runs
	// this before any file is created through it.
	m := syscall.Umask(0o22)
	syscall.Umask(m)
	return os.FileMode(m)
})
