// Package proc answers questions about processes on this host, and names
// the host (HostID) so that PIDs recorded on another are never judged here.
package proc

import (
	"bytes"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
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

// HostID identifies the host a process runs on as far as PIDs go: two
// processes with the same HostID see the same PIDs, so one can judge from
// a PID whether the other is alive. It is
//
//	HOSTNAME/BOOT_ID/pid:[INODE]
//
// the host name (bytes other than letters, digits, '.', '_' and '-' written
// %XX), the kernel's boot ID (/proc/sys/kernel/random/boot_id, new at every
// boot) and the PID namespace (the link /proc/self/ns/pid), for example
// "node7/e02f4ba5-dd84-4a53-9aef-3189c6d5d41e/pid:[4026531836]". Two
// processes with the same host name but another boot or another PID
// namespace (a container, a reboot, a simulated host) get different
// HostIDs. A part that cannot be read is "?". It is computed once per
// process.
func HostID() string { return hostID() }

var hostID = sync.OnceValue(func() string {
	name, _ := os.Hostname()
	boot := "?"
	if b, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil && len(bytes.TrimSpace(b)) > 0 {
		boot = escape(string(bytes.TrimSpace(b)))
	}
	ns := "?"
	if l, err := os.Readlink("/proc/self/ns/pid"); err == nil && l != "" {
		ns = l // "pid:[4026531836]"
	}
	if name == "" {
		name = "?"
	}
	return escape(name) + "/" + boot + "/" + ns
})

// EarlierBoot reports whether the HostID id names this host in an earlier
// boot: the same host name, another boot ID. Every process it names is
// gone. (Two machines given the same host name would look the same; on a
// cluster host names are unique.)
func EarlierBoot(id string) bool {
	name, rest, ok := strings.Cut(id, "/")
	boot, _, ok2 := strings.Cut(rest, "/")
	myName, myRest, _ := strings.Cut(HostID(), "/")
	myBoot, _, _ := strings.Cut(myRest, "/")
	return ok && ok2 && name == myName && boot != "?" && myBoot != "?" && boot != myBoot
}

// HostName returns the host name part of a HostID.
func HostName(id string) string {
	name, _, _ := strings.Cut(id, "/")
	if s, err := url.PathUnescape(name); err == nil {
		return s
	}
	return name
}

func escape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}
