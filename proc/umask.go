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
