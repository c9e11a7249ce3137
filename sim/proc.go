package sim

import (
	"context"
	"fmt"
	"runtime/debug"
	"slices"
	"strconv"
	"time"

	"github.com/farm-hpc/farm/vfs"
)

// Proc is a simulated process: a goroutine that runs one function with a
// filesystem client of its own (FS), one scheduling point at a time.
type Proc struct {
	w       *World
	name    string
	id      int32
	fn      func(*Proc)
	fs      *client
	wake    chan cmd        // the scheduler's word at each scheduling point
	op      opcode          // what it waits at
	wakeAt  time.Duration   // when it may run again
	frozen  bool            // its wait is a freeze
	asleep  context.Context // the context of its Sleep under way: a cancel wakes it (World.next)
	noCrash bool
	aim     float64 // Aim's factor of its calls' fault rates (0: 1)
	aimAt   []opcode
	spare   int     // AimAfter: aimed calls still spared
	next    float64 // AimNext's factor for its next call (0: none)
	slow    float64 // Slow's factor (0: 1)
	started bool    // its goroutine is running
	cause   cmd     // cmdCrash or cmdKill once told to die
	fate    fate

	panicValue any
	stack      []byte
}

// cmd is what the scheduler tells a process at a scheduling point.
type cmd uint8

const (
	cmdRun   cmd = iota // go on
	cmdCrash            // die: a fault
	cmdKill             // die: the run is over
)

// fate is how a process ended.
type fate uint8

const (
	running fate = iota
	returned
	crashed
	killed
	panicked
)

// crashSignal is the panic that unwinds a process told to die.
type crashSignal string

const crashPanic crashSignal = "sim: process crashed (this panic must not be recovered)"

// Name is p's name.
func (p *Proc) Name() string { return p.name }

// FS is p's filesystem client: its descriptors, caches, faults and clock.
// Only p may call it, and only from its own goroutine.
func (p *Proc) FS() vfs.FS { return p.fs }

// NoCrash makes p immune to Faults.Crash (a reader, say); it still
// freezes. It returns p.
func (p *Proc) NoCrash() *Proc {
	p.noCrash = true
	return p
}

// Aim multiplies the rates of the faults that befall p's calls (lost
// replies, transient errors, and outages begun at one) by k, to aim
// faults at a rare actor (a command among many meta-jobs), whose few
// calls the world's rates reach seldom: at the calls named (as the trace
// names them: "mknodat", "linkat", ...), or all. It returns p.
func (p *Proc) Aim(k float64, calls ...string) *Proc {
	p.aim, p.aimAt = k, nil
	for _, name := range calls {
		o := slices.Index(opNames[:], name)
		if o < 0 || !opcode(o).isCall() {
			panic("sim: Aim: no call " + strconv.Quote(name))
		}
		p.aimAt = append(p.aimAt, opcode(o))
	}
	return p
}

// AimAfter spares p's first n aimed calls (Aim): the faults then land
// past them, at the n+1-th or later (a command's commit after the
// exclusive creates of its lanes). It returns p.
func (p *Proc) AimAfter(n int) *Proc {
	p.spare = n
	return p
}

// AimNext multiplies the fault rates of p's next call whose faults are
// drawn (not one an outage fails), whichever it is, by k, once (then Aim's, if any, apply again): a fault aimed at one
// moment of one process (its first look after an ENOENT, say). Only p
// may call it, from its own goroutine. It returns p.
func (p *Proc) AimNext(k float64) *Proc {
	p.next = k
	return p
}

// Slow makes p's calls take about k times as long as others' (k > 1): a
// process on a loaded node (a login node, a node swapping), whose calls
// the others' overtake. It returns p.
func (p *Proc) Slow(k float64) *Proc {
	p.slow = k
	return p
}

// factor is what the fault rates of p's call op are multiplied by:
// AimNext's, once; Aim's factor if op is aimed at and not spared
// (AimAfter); else 1. Called once
// a call.
func (p *Proc) factor(op opcode) float64 {
	if k := p.next; k > 0 {
		p.next = 0
		return k
	}
	if p.aim <= 0 || p.aimAt != nil && !slices.Contains(p.aimAt, op) {
		return 1
	}
	if p.spare > 0 {
		p.spare--
		return 1
	}
	return p.aim
}

// Crashed says whether p died of a crash fault.
func (p *Proc) Crashed() bool { return p.fate == crashed }

// Done says whether p has ended: returned, crashed, or killed at the end
// of a Run that failed.
func (p *Proc) Done() bool { return p.fate != running }

// main is p's goroutine: it waits for its first turn, runs fn, and hands
// the turn back for good.
func (p *Proc) main() {
	defer p.exit()
	if c := <-p.wake; c != cmdRun {
		p.cause = c
		panic(crashPanic)
	}
	p.fn(p)
}

// exit records how p ended and gives the scheduler its turn back.
func (p *Proc) exit() {
	v := recover()
	switch {
	case v == nil: // returned, or runtime.Goexit
		p.fate = returned
	case v == any(crashPanic) && p.cause == cmdKill:
		p.fate = killed
	case v == any(crashPanic):
		p.fate = crashed
	default:
		p.fate, p.panicValue, p.stack = panicked, v, debug.Stack()
	}
	p.w.back <- struct{}{}
}

// park hands the turn to the scheduler, p waiting at op until until, and
// returns when p's turn comes again; it panics (unwinding p) if p is told
// to die instead.
func (p *Proc) park(op opcode, until time.Duration) {
	p.op, p.wakeAt = op, until
	p.w.back <- struct{}{}
	if c := <-p.wake; c != cmdRun {
		p.cause = c
		panic(crashPanic)
	}
}

// check panics if p is unwinding (told to die: its calls have no effect)
// or is not the process running (its FS called from elsewhere).
func (p *Proc) check() {
	if p.cause != cmdRun {
		panic(crashPanic)
	}
	if p.w.cur != p {
		panic(fmt.Sprintf("sim: the FS of process %s called while it is not running (from another goroutine, or another process)", p.name))
	}
}

// where says what p waits at.
func (p *Proc) where() string {
	at := fmtTime(p.wakeAt)
	switch {
	case !p.started:
		return "not started"
	case p.frozen:
		return fmt.Sprintf("frozen at %s until %s", p.op, at)
	case p.op == opFIFO:
		return "blocked for ever opening a FIFO"
	case p.op == opSleep:
		return "sleeping until " + at
	case p.op == opHang:
		return "waiting for the server until " + at
	}
	return fmt.Sprintf("at %s", p.op)
}
