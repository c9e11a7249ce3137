package sim

import (
	"fmt"
	"io"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// opcode is a call, a wait, or an event of the trace.
type opcode uint8

const (
	opNone opcode = iota
	opStart
	opOpenat
	opMknodat
	opMkdirat
	opFstatat
	opFstat
	opUnlinkat
	opRenameat
	opLinkat
	opRead
	opPread
	opWrite
	opPwrite
	opFsync
	opClose
	opGetdents
	opSleep
	opReply // frozen between a call's effect and its reply
	opHang  // waiting for an NFS server that is down
	opFIFO  // opening a FIFO: for ever
	evExit
	evCrash
	evKill
	evPanic
	evFreeze
	evOutage
	evFlush
	evLost
)

var opNames = [...]string{
	opNone: "-", opStart: "start", opOpenat: "openat", opMknodat: "mknodat", opMkdirat: "mkdirat",
	opFstatat: "fstatat", opFstat: "fstat", opUnlinkat: "unlinkat", opRenameat: "renameat", opLinkat: "linkat",
	opRead: "read", opPread: "pread", opWrite: "write", opPwrite: "pwrite", opFsync: "fsync", opClose: "close",
	opGetdents: "getdents", opSleep: "sleep", opReply: "reply", opHang: "hang", opFIFO: "fifo",
	evExit: "exit", evCrash: "crash", evKill: "kill", evPanic: "panic", evFreeze: "freeze", evOutage: "outage",
	evFlush: "flush", evLost: "lost",
}

func (o opcode) String() string { return opNames[o] }

// isCall says o is an FS call (not Sleep).
func (o opcode) isCall() bool { return o >= opOpenat && o <= opGetdents }

// mutates says o may change the server (and so may lose its reply after).
func (o opcode) mutates() bool {
	switch o {
	case opOpenat, opMknodat, opMkdirat, opUnlinkat, opRenameat, opLinkat, opWrite, opPwrite, opFsync, opClose:
		return true
	}
	return false
}

// lookup says o looks a name up or makes one: a brick down answers it
// ENOENT.
func (o opcode) lookup() bool {
	switch o {
	case opOpenat, opMknodat, opMkdirat, opFstatat, opLinkat:
		return true
	}
	return false
}

// fault is what the trace says befell a call.
type fault uint8

const (
	fNone      fault = iota
	fLost            // its reply lost after its effect
	fTransient       // failed without effect
	fSpurious        // brick down: ENOENT without effect
	fDown            // brick down: ENOTCONN without effect
	fNoSpace         // disk full
	fLinkRace        // a link onto an existing name that succeeded
	fSplit           // a split-brain name made, or met
	fCache           // answered from the client's cache, not as the server would
)

var faultNames = [...]string{
	fNone: "", fLost: "lost reply", fTransient: "transient", fSpurious: "brick down: spurious ENOENT",
	fDown: "brick down", fNoSpace: "disk full", fLinkRace: "link race", fSplit: "split-brain", fCache: "stale cache",
}

// event is one line of the trace, formatted only when asked for.
type event struct {
	t       time.Duration
	proc    int32 // -1: the world
	op      opcode
	fault   fault
	err     unix.Errno
	a, b, c int64
	r       int64
	s1, s2  string
}

// record appends e to the trace, at the time now.
func (w *World) record(e event) {
	e.t = w.now
	if n := w.opts.TraceLast; n > 0 && len(w.trace) >= 2*n {
		w.trace = append(w.trace[:0], w.trace[len(w.trace)-n:]...)
	}
	w.trace = append(w.trace, e)
}

// Trace is the world's trace, a line per event: every call (virtual time,
// process, call, arguments, answer, fault), sleep, start, end, crash,
// freeze and outage.
func (w *World) Trace() []string {
	out := make([]string, len(w.trace))
	for k := range w.trace {
		out[k] = w.format(&w.trace[k])
	}
	return out
}

// WriteTrace writes the last lastN lines of the trace to out (all of them
// if lastN <= 0).
func (w *World) WriteTrace(out io.Writer, lastN int) error {
	ev := w.trace
	if lastN > 0 && len(ev) > lastN {
		ev = ev[len(ev)-lastN:]
	}
	for k := range ev {
		if _, err := io.WriteString(out, w.format(&ev[k])+"\n"); err != nil {
			return err
		}
	}
	return nil
}

// format is e as a line.
func (w *World) format(e *event) string {
	who := "world"
	if e.proc >= 0 {
		who = w.procs[e.proc].name
	}
	s := fmt.Sprintf("%s %s %s", fmtTime(e.t), who, e.describe())
	if e.op.isCall() {
		s += " = " + e.result()
	}
	if e.fault != fNone {
		s += " [" + faultNames[e.fault] + "]"
	}
	return s
}

// describe is e's call or event with its arguments.
func (e *event) describe() string {
	switch e.op {
	case opOpenat:
		return fmt.Sprintf("openat(%s, %q, %s, %#o)", fdName(e.a), e.s1, openFlags(int(e.b)), e.c)
	case opMknodat, opMkdirat:
		return fmt.Sprintf("%s(%s, %q, %s)", e.op, fdName(e.a), e.s1, modeName(uint32(e.c)))
	case opFstatat:
		return fmt.Sprintf("fstatat(%s, %q)", fdName(e.a), e.s1)
	case opUnlinkat:
		return fmt.Sprintf("unlinkat(%s, %q, %#x)", fdName(e.a), e.s1, e.b)
	case opRenameat, opLinkat:
		return fmt.Sprintf("%s(%s, %q, %s, %q)", e.op, fdName(e.a), e.s1, fdName(e.b), e.s2)
	case opRead, opWrite:
		return fmt.Sprintf("%s(%d, %d bytes)", e.op, e.a, e.b)
	case opPread, opPwrite:
		return fmt.Sprintf("%s(%d, %d bytes, at %d)", e.op, e.a, e.b, e.c)
	case opFstat, opFsync, opClose, opGetdents:
		return fmt.Sprintf("%s(%d)", e.op, e.a)
	case opSleep, opHang:
		return fmt.Sprintf("%s %s", e.op, time.Duration(e.a))
	case evFreeze:
		if e.b == 1 {
			return fmt.Sprintf("frozen for %s before its reply", time.Duration(e.a))
		}
		return fmt.Sprintf("frozen for %s", time.Duration(e.a))
	case evCrash:
		return fmt.Sprintf("crashed at %s", opcode(e.a))
	case evOutage:
		what := "client cut off from every brick"
		if e.b < int64(len(outageNames)) {
			what = outageNames[e.b]
		}
		return fmt.Sprintf("outage (%s) for %s", what, time.Duration(e.a))
	case evFlush:
		return fmt.Sprintf("crashed: its %d unflushed writes reach the server", e.a)
	case evLost:
		return fmt.Sprintf("crashed: its %d unflushed writes are lost", e.a)
	case opFIFO:
		return "blocked for ever opening a FIFO"
	}
	return e.op.String()
}

var outageNames = [...]string{NoOutage: "none", Hang: "server down", BrickDown: "brick down", SoftTimeout: "server down, soft mount", DiskFull: "disk full"}

// result is a call's answer.
func (e *event) result() string {
	switch {
	case e.err != 0:
		return unix.ErrnoName(e.err)
	case e.op == opFstatat || e.op == opFstat:
		return fmt.Sprintf("{ino %d, %s, size %d}", e.r, modeName(uint32(e.b)), e.c)
	case e.op == opOpenat, e.op == opRead, e.op == opPread, e.op == opWrite, e.op == opPwrite:
		return fmt.Sprintf("%d", e.r)
	case e.op == opGetdents:
		return fmt.Sprintf("%d names", e.r)
	}
	return "0"
}

// fmtTime is a virtual time since Epoch, in seconds to the microsecond.
func fmtTime(t time.Duration) string {
	if t == never {
		return "never"
	}
	return fmt.Sprintf("%d.%06ds", t/time.Second, (t%time.Second)/time.Microsecond)
}

func fdName(fd int64) string {
	if fd == unix.AT_FDCWD {
		return "AT_FDCWD"
	}
	return fmt.Sprint(fd)
}

// modeName is a mode's type and permission bits.
func modeName(m uint32) string {
	t := map[uint32]string{unix.S_IFREG: "S_IFREG", unix.S_IFDIR: "S_IFDIR", unix.S_IFIFO: "S_IFIFO", 0: "0"}[m&unix.S_IFMT]
	if t == "" {
		t = fmt.Sprintf("%#o", m&unix.S_IFMT)
	}
	return fmt.Sprintf("%s|%#o", t, m&0o7777)
}

// openFlags names open's flags.
func openFlags(f int) string {
	names := []string{"O_RDONLY", "O_WRONLY", "O_RDWR", "O_ACCMODE"}[f&unix.O_ACCMODE : f&unix.O_ACCMODE+1]
	for _, fl := range []struct {
		bit  int
		name string
	}{
		{unix.O_CREAT, "O_CREAT"}, {unix.O_EXCL, "O_EXCL"}, {unix.O_TRUNC, "O_TRUNC"}, {unix.O_APPEND, "O_APPEND"},
		{unix.O_DIRECTORY, "O_DIRECTORY"}, {unix.O_NOFOLLOW, "O_NOFOLLOW"}, {unix.O_PATH, "O_PATH"},
		{unix.O_CLOEXEC, "O_CLOEXEC"}, {unix.O_NONBLOCK, "O_NONBLOCK"},
	} {
		if f&fl.bit != 0 {
			names = append(names, fl.name)
		}
	}
	return strings.Join(names, "|")
}
