// Package proc answers questions about processes on this host.
package proc

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// Alive reports whether pid runs on this host and is not a zombie.
func Alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil && err != syscall.EPERM {
		return false
	}
	state, _, ok := stat(pid)
	if !ok {
		return true // no /proc: trust kill(0)
	}
	return state != 'Z' && state != 'X'
}

// StartTicks returns the start time of pid in clock ticks since boot, which
// tells a process from a later one that reuses its PID. It is 0 if unknown.
func StartTicks(pid int) uint64 {
	_, start, _ := stat(pid)
	return start
}

// AliveSince reports whether pid runs and is the same process that had
// start ticks start (0 skips that check).
func AliveSince(pid int, start uint64) bool {
	if !Alive(pid) {
		return false
	}
	if start == 0 {
		return true
	}
	now := StartTicks(pid)
	return now == 0 || now == start
}

func stat(pid int) (state byte, start uint64, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, 0, false
	}
	f := bytes.Fields(b[i+2:])
	// Fields after the command: state is field 3 of the whole line, starttime field 22.
	if len(f) < 20 {
		return f[0][0], 0, true
	}
	start, _ = strconv.ParseUint(string(f[19]), 10, 64)
	return f[0][0], start, true
}
