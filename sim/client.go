package sim

import (
	"context"
	"hash/fnv"
	"path"
	"time"

	"github.com/farm-hpc/farm/vfs"
	"golang.org/x/sys/unix"
)

// client is a process's filesystem client (or, with no process, the
// test's Root): its descriptors, what it caches of the server, what it
// has written and not flushed. Its exported methods are vfs.FS: each is a
// scheduling point, then the faults drawn for it, then its effect on the
// server (ops.go), then its trace.
type client struct {
	w     *World
	p     *Proc // nil: Root
	fds   []*file
	look  map[*inode]*dirCache // lookups cached, by directory
	data  map[*inode]dataCopy  // files' content cached
	dirty []dirtyFile          // writes not flushed (CloseToOpen), in order

	// About the call under way:
	noSpace unix.Errno // ENOSPC or EDQUOT: the disk is full
	mark    fault      // what the trace says of it, if no fault was drawn
	on      string     // the name it is on (beginOn), "" if an open file's
}

// file is an open file description.
type file struct {
	ino   *inode
	flags int
	off   int64
}

func newClient(w *World, p *Proc) *client {
	c := &client{w: w, p: p, fds: make([]*file, 3, 8)}
	if p != nil {
		c.look = map[*inode]*dirCache{}
		c.data = map[*inode]dataCopy{}
	}
	return c
}

// call is the fault drawn for a call.
type call struct {
	kind fault
	err  unix.Errno // the answer of a fault that comes before any effect
	cut  unix.Errno // a lost reply of an outage that cuts the client off: its answer
}

// early says the call fails before any effect.
func (f call) early() bool { return f.err != 0 }

// begin is a call's scheduling point and its draw of faults.
func (c *client) begin(op opcode) call {
	p := c.p
	if p == nil {
		return call{}
	}
	p.check()
	p.park(op, c.w.now)
	w := c.w
	for w.model.Outage == Hang && w.faulting() && w.now < w.outageUntil {
		w.record(event{proc: p.id, op: opHang, a: int64(w.outageUntil - w.now)})
		p.park(opHang, w.outageUntil)
	}
	return c.decide(op)
}

// beginOn is begin for a call on name (a path, or a name in a directory):
// on a distributed volume, an outage spares the names of the other
// replica sets (Model.Sets).
func (c *client) beginOn(op opcode, name string) call {
	c.on = path.Base(name)
	defer func() { c.on = "" }()
	return c.begin(op)
}

// spared says whether the call under way is on a name that a distributed
// volume's outage does not touch: one hashed to another replica set.
func (c *client) spared() bool {
	w := c.w
	if w.model.Sets < 2 || c.on == "" || c.on == "." || c.on == "/" {
		return false
	}
	h := fnv.New32a()
	h.Write([]byte(c.on))
	return int(h.Sum32()%uint32(w.model.Sets)) != w.outageSet
}

// decide draws the faults of a call op, now.
func (c *client) decide(op opcode) call {
	w, m := c.w, &c.w.model
	if !w.faulting() {
		return call{}
	}
	if w.now < w.outageUntil {
		switch m.Outage {
		case BrickDown:
			if w.outageCut {
				// The client cut off from every brick: ENOTCONN, a
				// change made or not.
				w.stats.OutageFails++
				if op.mutates() && w.rng.IntN(2) == 0 {
					return call{kind: fLost, cut: unix.ENOTCONN}
				}
				return call{kind: fDown, err: unix.ENOTCONN}
			}
			if w.rng.IntN(2) == 0 && !c.spared() {
				w.stats.OutageFails++
				if op.lookup() {
					return call{kind: fSpurious, err: unix.ENOENT}
				}
				return call{kind: fDown, err: unix.ENOTCONN}
			}
		case SoftTimeout:
			w.stats.OutageFails++
			if op.mutates() && w.rng.IntN(2) == 0 {
				return call{kind: fLost, cut: unix.ETIMEDOUT}
			}
			return call{kind: fDown, err: unix.ETIMEDOUT}
		case DiskFull:
			c.noSpace = w.outageErr
		}
	}
	k := c.p.factor(op)
	if m.Transient != nil && w.roll(min(1, w.faults.Transient*k)) {
		w.stats.Transients++
		w.outageAtFault(k)
		return call{kind: fTransient, err: m.Transient[w.rng.IntN(len(m.Transient))]}
	}
	held := m.CloseToOpen && (op == opWrite || op == opPwrite) // never sent: no reply to lose
	if m.LostReply != nil && op.mutates() && !held && w.roll(min(1, w.faults.LostReply*k)) {
		w.stats.LostReplies++
		w.outageAtFault(k)
		return call{kind: fLost}
	}
	return call{}
}

// outageAtFault begins an outage window at a call's fault, if the model
// has them and the dice say so (Faults.OutageAtFault, times the call's
// aim k).
func (w *World) outageAtFault(k float64) {
	if w.model.Outage != NoOutage && w.now >= w.outageUntil && w.roll(min(1, w.faults.OutageAtFault*k)) {
		w.beginOutage()
	}
}

// reply is the answer of a call op that took effect with err, and whose
// reply was lost if f says so; excl says op was an exclusive create.
func (c *client) reply(f call, op opcode, err unix.Errno, excl bool) unix.Errno {
	if f.kind != fLost {
		return err
	}
	if f.cut != 0 {
		return f.cut
	}
	w, m := c.w, &c.w.model
	if err == 0 && w.rng.IntN(2) == 0 {
		switch {
		case excl && m.LostCreateEEXIST:
			return unix.EEXIST
		case (op == opUnlinkat || op == opRenameat) && m.LostRemoveENOENT:
			return unix.ENOENT
		}
	}
	return m.LostReply[w.rng.IntN(len(m.LostReply))]
}

// end records the call e with its fault f; the process may then crash or
// freeze between the call's effect and its reply.
func (c *client) end(e event, f call) {
	p := c.p
	mark, noSpace := c.mark, c.noSpace
	c.mark, c.noSpace = 0, 0
	if p == nil {
		return
	}
	w := c.w
	e.proc, e.fault = p.id, f.kind
	if e.fault == fNone {
		e.fault = mark
		if noSpace != 0 && e.err == noSpace {
			e.fault = fNoSpace
			w.stats.OutageFails++
		}
	}
	w.stats.Calls++
	w.record(e)
	switch {
	case !w.faulting():
	case !p.noCrash && w.roll(w.faults.Crash): // after the effect, before the reply
		p.op, p.cause = opReply, cmdCrash
		panic(crashPanic)
	case w.roll(w.faults.Freeze):
		w.freeze(p, 1)
		p.park(opReply, p.wakeAt)
	}
}

// errOf is err as an error: nil for 0.
func errOf(err unix.Errno) error {
	if err == 0 {
		return nil
	}
	return err
}

func (c *client) Openat(d int, name string, flags int, mode uint32) (int, error) {
	f := c.beginOn(opOpenat, name)
	fd, err := -1, f.err
	if !f.early() {
		fd, err = c.openat(d, name, flags, mode)
		if f.kind == fLost && err == 0 {
			c.fds[fd], fd = nil, -1 // the descriptor the reply would have given
		}
		err = c.reply(f, opOpenat, err, flags&(unix.O_CREAT|unix.O_EXCL) == unix.O_CREAT|unix.O_EXCL)
	}
	c.end(event{op: opOpenat, a: int64(d), b: int64(flags), c: int64(mode), s1: name, r: int64(fd), err: err}, f)
	return fd, errOf(err)
}

func (c *client) Mknodat(d int, name string, mode uint32) error {
	f := c.beginOn(opMknodat, name)
	err := f.err
	if !f.early() {
		err = c.reply(f, opMknodat, c.mknodat(d, name, mode), true)
	}
	c.end(event{op: opMknodat, a: int64(d), c: int64(mode), s1: name, err: err}, f)
	return errOf(err)
}

func (c *client) Mkdirat(d int, name string, mode uint32) error {
	f := c.beginOn(opMkdirat, name)
	err := f.err
	if !f.early() {
		err = c.reply(f, opMkdirat, c.mkdirat(d, name, mode), true)
	}
	c.end(event{op: opMkdirat, a: int64(d), c: int64(mode), s1: name, err: err}, f)
	return errOf(err)
}

func (c *client) Fstatat(d int, name string, st *unix.Stat_t, flags int) error {
	f := c.beginOn(opFstatat, name)
	err := f.err
	if !f.early() {
		err = c.fstatat(d, name, st, flags)
	}
	e := event{op: opFstatat, a: int64(d), s1: name, err: err}
	if err == 0 {
		e.r, e.b, e.c = int64(st.Ino), int64(st.Mode), st.Size
	}
	c.end(e, f)
	return errOf(err)
}

func (c *client) Fstat(fd int, st *unix.Stat_t) error {
	f := c.begin(opFstat)
	err := f.err
	if !f.early() {
		err = c.fstat(fd, st)
	}
	e := event{op: opFstat, a: int64(fd), err: err}
	if err == 0 {
		e.r, e.b, e.c = int64(st.Ino), int64(st.Mode), st.Size
	}
	c.end(e, f)
	return errOf(err)
}

func (c *client) Unlinkat(d int, name string, flags int) error {
	f := c.beginOn(opUnlinkat, name)
	err := f.err
	if !f.early() {
		err = c.reply(f, opUnlinkat, c.unlinkat(d, name, flags), false)
	}
	c.end(event{op: opUnlinkat, a: int64(d), b: int64(flags), s1: name, err: err}, f)
	return errOf(err)
}

func (c *client) Renameat(od int, oname string, nd int, nname string) error {
	f := c.beginOn(opRenameat, nname)
	err := f.err
	if !f.early() {
		err = c.reply(f, opRenameat, c.renameat(od, oname, nd, nname), false)
	}
	c.end(event{op: opRenameat, a: int64(od), b: int64(nd), s1: oname, s2: nname, err: err}, f)
	return errOf(err)
}

func (c *client) Linkat(od int, oname string, nd int, nname string) error {
	f := c.beginOn(opLinkat, nname)
	err := f.err
	if !f.early() {
		err = c.reply(f, opLinkat, c.linkat(od, oname, nd, nname), true)
	}
	c.end(event{op: opLinkat, a: int64(od), b: int64(nd), s1: oname, s2: nname, err: err}, f)
	return errOf(err)
}

func (c *client) Read(fd int, b []byte) (int, error)              { return c.rw(opRead, fd, b, 0) }
func (c *client) Pread(fd int, b []byte, off int64) (int, error)  { return c.rw(opPread, fd, b, off) }
func (c *client) Write(fd int, b []byte) (int, error)             { return c.rw(opWrite, fd, b, 0) }
func (c *client) Pwrite(fd int, b []byte, off int64) (int, error) { return c.rw(opPwrite, fd, b, off) }

// rw is Read, Pread, Write or Pwrite (op).
func (c *client) rw(op opcode, fd int, b []byte, off int64) (int, error) {
	f := c.begin(op)
	n, err := 0, f.err
	if !f.early() {
		switch op {
		case opRead, opPread:
			n, err = c.read(fd, b, off, op == opPread)
		default:
			n, err = c.write(fd, b, off, op == opPwrite)
		}
		if f.kind == fLost {
			n, err = 0, c.reply(f, op, err, false)
		}
	}
	c.end(event{op: op, a: int64(fd), b: int64(len(b)), c: off, r: int64(n), err: err}, f)
	return n, errOf(err)
}

func (c *client) Fsync(fd int) error {
	f := c.begin(opFsync)
	err := f.err
	if f.early() {
		c.lose(fd) // the writes that failed are gone (LWN 752063)
	} else {
		err = c.reply(f, opFsync, c.fsync(fd), false)
	}
	c.end(event{op: opFsync, a: int64(fd), err: err}, f)
	return errOf(err)
}

func (c *client) Close(fd int) error {
	f := c.begin(opClose)
	err := f.err
	if f.early() {
		c.lose(fd)
		if _, e := c.file(fd); e == 0 {
			c.fds[fd] = nil // closed all the same, as Linux does
		}
	} else {
		err = c.reply(f, opClose, c.close(fd), false)
	}
	c.end(event{op: opClose, a: int64(fd), err: err}, f)
	return errOf(err)
}

func (c *client) Getdents(fd int) ([]string, error) {
	f := c.begin(opGetdents)
	names, err := []string(nil), f.err
	if !f.early() {
		names, err = c.getdents(fd)
	}
	c.end(event{op: opGetdents, a: int64(fd), r: int64(len(names)), err: err}, f)
	return names, errOf(err)
}

// GetdentsTyped is Getdents with each name's type, as Linux's d_type.
func (c *client) GetdentsTyped(fd int) ([]vfs.Dirent, error) {
	f := c.begin(opGetdents)
	var ents []vfs.Dirent
	err := f.err
	if !f.early() {
		ents, err = c.getdentsTyped(fd)
	}
	c.end(event{op: opGetdents, a: int64(fd), r: int64(len(ents)), err: err}, f)
	return ents, errOf(err)
}

// Now is the virtual time.
func (c *client) Now() time.Time { return Epoch.Add(c.w.now) }

// Sleep is a scheduling point after which the process is not runnable
// until d has passed. ctx is looked at only when it is called.
func (c *client) Sleep(ctx context.Context, d time.Duration) error {
	p := c.p
	if p == nil {
		panic("sim: Root().Sleep: the test's view of the world cannot sleep")
	}
	p.check()
	if err := ctx.Err(); err != nil {
		return err
	}
	until := c.w.now + max(d, 0)
	if until < c.w.now { // overflow: for ever
		until = never
	}
	c.w.record(event{proc: p.id, op: opSleep, a: int64(d)})
	if ctx.Done() != nil { // one that can be cancelled (World.next looks)
		p.asleep = ctx
	}
	p.park(opSleep, until)
	p.asleep = nil
	return ctx.Err() // cancelled while asleep: woken then, as a timer's select is
}

// Rand is a number from the world's PRNG.
func (c *client) Rand() uint64 { return c.w.rng.Uint64() }

var _ vfs.FS = (*client)(nil)
