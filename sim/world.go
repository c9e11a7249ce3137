package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/farm-hpc/farm/vfs"
	"golang.org/x/sys/unix"
)

// Epoch is the virtual time at which every world starts.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// never is a wake-up that never comes.
const never = time.Duration(math.MaxInt64)

var (
	// ErrLimit is the error (wrapped) of a Run that reached its step or
	// time limit; the message names the limit and the processes left.
	ErrLimit = errors.New("sim: limit reached")
	// ErrBlocked is the error (wrapped) of a Run whose processes left can
	// never run again (blocked for ever: opening a FIFO).
	ErrBlocked = errors.New("sim: no process can ever run")
)

// World is a simulated cluster: one file server, its processes and their
// clients, a virtual clock and one PRNG. Its methods are for the test, and
// are called while no process runs (before and after Run, and in its
// hooks), but Go, which a process may call too.
type World struct {
	seed   uint64
	model  Model
	rng    *rand.Rand
	now    time.Duration
	faults Faults
	opts   Options

	root    *inode // the server's root directory
	nextIno uint64

	procs []*Proc // every process, in the order started
	live  []*Proc // those not ended, in the same order
	ready []*Proc // scratch for next
	cur   *Proc   // the process running, nil when none
	back  chan struct{}

	outageUntil time.Duration // end of the outage window under way (or last)
	outageErr   unix.Errno    // DiskFull's answer in this window
	outageCut   bool          // BrickDown's window cuts the client off from every brick
	outageSet   int           // the replica set whose brick is down (Model.Sets)

	onStep  func()
	onCrash func(*Proc)
	failure error // a process panicked

	trace    []event
	stats    Stats
	rootView *client
}

// New makes a world with the model m whose every choice is drawn from
// seed: the same seed, model, options and processes make the same run.
func New(seed uint64, m Model) *World {
	w := &World{
		seed:  seed,
		model: m,
		rng:   rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		back:  make(chan struct{}),
	}
	w.root = w.newInode(unix.S_IFDIR | 0o755)
	w.root.nlink = 2
	w.root.parent = w.root
	w.rootView = newClient(w, nil)
	return w
}

// Go starts a process named name that runs fn, with a client of its own
// (p.FS). It is runnable at once: it first runs when the scheduler picks
// it. A process may start others (a batch system restarting one).
func (w *World) Go(name string, fn func(p *Proc)) *Proc {
	p := &Proc{w: w, name: name, id: int32(len(w.procs)), fn: fn, wake: make(chan cmd), op: opStart, wakeAt: w.now}
	p.fs = newClient(w, p)
	w.procs = append(w.procs, p)
	w.live = append(w.live, p)
	w.record(event{proc: p.id, op: opStart})
	return p
}

// Root is the test's view of the file server: no cache, no fault, no
// scheduling, its own descriptors, the server's content (not what a
// client holds unflushed). Use it before Run, in the hooks and after Run,
// never from a process. Its Sleep panics.
func (w *World) Root() vfs.FS { return w.rootView }

// OnStep sets fn to be called after every step, while no process runs:
// invariants checked at every step.
func (w *World) OnStep(fn func()) { w.onStep = fn }

// OnCrash sets fn to be called when a process crashed (Faults.Crash),
// after it unwound, while no process runs: fn may start another (World.Go)
// in its place. Its memory is gone, its files stay.
func (w *World) OnCrash(fn func(p *Proc)) { w.onCrash = fn }

// Now is the virtual time.
func (w *World) Now() time.Time { return Epoch.Add(w.now) }

// Current is the process whose call or hook is running: the caller's own,
// for code that runs in a process (nil outside one).
func (w *World) Current() *Proc { return w.cur }

// OutageEnd is when the filesystem's outage under way ends, or the last
// one ended (Epoch if there was none): what a user who watches the
// filesystem work again can know.
func (w *World) OutageEnd() time.Time { return Epoch.Add(w.outageUntil) }

// Stats are what the world did so far.
func (w *World) Stats() Stats {
	s := w.stats
	s.Elapsed = w.now
	return s
}

// Run runs the processes until each has returned or crashed, with o's
// faults and limits. A limit reached (ErrLimit), processes that can never
// run again (ErrBlocked) or a process's panic is an error; the processes
// left are then killed (unwound without effect). Run may be called again,
// with processes started since.
func (w *World) Run(o Options) error {
	w.setOptions(o)
	w.failure = nil
	defer w.killAll()
	for len(w.live) > 0 {
		p, err := w.next()
		if err != nil {
			return err
		}
		w.step(p)
		if w.failure != nil {
			return w.failure
		}
	}
	return nil
}

// setOptions takes o, with its defaults.
func (w *World) setOptions(o Options) {
	if o.MaxSteps <= 0 {
		o.MaxSteps = 10_000_000
	}
	if o.MaxTime <= 0 {
		o.MaxTime = 30 * 24 * time.Hour
	}
	if o.Faults.FreezeMax <= 0 {
		o.Faults.FreezeMax = 5 * time.Minute
	}
	if o.Faults.OutageMax <= 0 {
		o.Faults.OutageMax = 10 * time.Second
	}
	w.opts, w.faults = o, o.Faults
	w.outageUntil = min(w.outageUntil, w.now) // a Run's faults are its own: no outage carried over
}

// next picks the process to run next: one of those that can run now, by
// the PRNG, after moving the clock to the earliest wake-up if none can.
// A freeze drawn for it puts it back to sleep, and another is picked.
func (w *World) next() (*Proc, error) {
	for {
		switch {
		case w.stats.Steps >= w.opts.MaxSteps:
			return nil, w.stuck(ErrLimit, fmt.Sprintf("step limit %d", w.opts.MaxSteps))
		case w.now > w.opts.MaxTime:
			return nil, w.stuck(ErrLimit, fmt.Sprintf("virtual time limit %s", w.opts.MaxTime))
		}
		ready, soon := w.ready[:0], never
		for _, p := range w.live {
			if p.asleep != nil && !p.frozen && p.wakeAt > w.now && p.asleep.Err() != nil {
				p.wakeAt = w.now // its Sleep's context cancelled
			}
			if p.wakeAt <= w.now {
				ready = append(ready, p)
			} else {
				soon = min(soon, p.wakeAt)
			}
		}
		w.ready = ready
		if len(ready) == 0 {
			switch {
			case soon == never:
				return nil, w.stuck(ErrBlocked, "every process left is blocked for ever")
			case soon > w.opts.MaxTime:
				return nil, w.stuck(ErrLimit, fmt.Sprintf("virtual time limit %s", w.opts.MaxTime))
			}
			w.now = soon
			continue
		}
		p := ready[0]
		if len(ready) > 1 {
			p = ready[w.rng.IntN(len(ready))]
		}
		if w.faulting() && w.roll(w.faults.Freeze) {
			w.freeze(p, 0)
			continue
		}
		if p.slow > 1 && p.op.isCall() && w.rng.Float64()*p.slow > 1 {
			// A slow process's call: not yet done (Proc.Slow).
			p.wakeAt = w.now + w.logUniform(w.model.MinLatency, w.model.MaxLatency)
			continue
		}
		return p, nil
	}
}

// freeze stalls p from now for a drawn time; after says it is between a
// call's effect and its reply (1) or not (0).
func (w *World) freeze(p *Proc, after int64) {
	d := w.logUniform(time.Millisecond, w.faults.FreezeMax)
	p.wakeAt, p.frozen = w.now+d, true
	w.stats.Freezes++
	w.record(event{proc: p.id, op: evFreeze, a: int64(d), b: after})
}

// step gives p its turn: a crash drawn for it, or the latency of the call
// it waits at, then its run to its next scheduling point.
func (w *World) step(p *Proc) {
	c := cmdRun
	switch {
	case !p.noCrash && w.faulting() && w.roll(w.faults.Crash):
		c = cmdCrash
	case p.op.isCall():
		w.now += w.logUniform(w.model.MinLatency, w.model.MaxLatency)
	}
	p.frozen = false
	w.maybeOutage()
	w.stats.Steps++
	w.cur = p
	if !p.started {
		p.started = true
		go p.main()
	}
	p.wake <- c
	<-w.back
	w.cur = nil
	if p.fate != running {
		w.ended(p)
	}
	if w.onStep != nil {
		w.onStep()
	}
}

// maybeOutage begins an outage window, if the model has them and the
// dice say so.
func (w *World) maybeOutage() {
	if w.model.Outage == NoOutage || w.now < w.outageUntil || !w.faulting() || !w.roll(w.faults.Outage) {
		return
	}
	w.beginOutage()
}

// BeginOutage begins an outage window now, as if one had begun at a
// fault of the call under way: if the model has outages, the faults are
// on, and none is under way. A test aims it at a rare moment (a command's
// first look at a file it has just made), where the world's rates seldom
// put one. It reports whether one began.
func (w *World) BeginOutage() bool {
	if w.model.Outage == NoOutage || w.now < w.outageUntil || !w.faulting() {
		return false
	}
	w.beginOutage()
	return true
}

// beginOutage begins an outage window now.
func (w *World) beginOutage() {
	d := w.logUniform(100*time.Millisecond, w.faults.OutageMax)
	w.outageUntil = w.now + d
	w.outageErr = unix.ENOSPC
	if w.rng.IntN(2) == 0 {
		w.outageErr = unix.EDQUOT
	}
	w.outageCut = w.model.Outage == BrickDown && w.rng.IntN(2) == 0
	if w.model.Sets > 1 {
		w.outageSet = w.rng.IntN(w.model.Sets)
	}
	w.stats.Outages++
	kind := int64(w.model.Outage)
	if w.outageCut {
		kind = int64(len(outageNames)) // "client cut off"
	}
	w.record(event{proc: -1, op: evOutage, a: int64(d), b: kind})
}

// ended takes p, which has just ended, out of the running.
func (w *World) ended(p *Proc) {
	w.remove(p)
	switch p.fate {
	case returned:
		w.record(event{proc: p.id, op: evExit})
		p.fs.exitWrites()
	case crashed:
		w.stats.Crashes++
		w.record(event{proc: p.id, op: evCrash, a: int64(p.op)})
		p.fs.crashWrites()
		if w.onCrash != nil {
			w.onCrash(p)
		}
	case panicked:
		w.record(event{proc: p.id, op: evPanic})
		w.failure = fmt.Errorf("sim (seed %d, %s): process %s panicked at %s: %v\n%s",
			w.seed, w.model.Name, p.name, fmtTime(w.now), p.panicValue, p.stack)
	}
}

// remove takes p out of w.live.
func (w *World) remove(p *Proc) {
	for i, q := range w.live {
		if q == p {
			w.live = append(w.live[:i], w.live[i+1:]...)
			return
		}
	}
}

// killAll ends every process left, without effect: those that have begun
// unwind (their deferred FS calls panic at once), the others never begin.
func (w *World) killAll() {
	for len(w.live) > 0 {
		p := w.live[0]
		if p.started {
			w.cur = p
			p.wake <- cmdKill
			<-w.back
			w.cur = nil
		}
		p.fate = killed
		w.remove(p)
		w.record(event{proc: p.id, op: evKill})
	}
}

// stuck is the error kind with why, naming the processes left and where
// each is.
func (w *World) stuck(kind error, why string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s at %s, step %d (seed %d, %s); processes left:", why, fmtTime(w.now), w.stats.Steps, w.seed, w.model.Name)
	for i, p := range w.live {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, " %s (%s)", p.name, p.where())
	}
	return fmt.Errorf("%w: %s", kind, b.String())
}
