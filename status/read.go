package status

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/farm-hpc/farm/layout"
)

// Attempt is one attempt of a case that a status file records, settled:
// ReadFile decides once what became of it, for every reader of status
// files (Load, farm report).
type Attempt struct {
	ID int64
	// State is Unfit (a U record), Running or Interrupted (started and not
	// ended: see ReadOptions), Interrupted (an I record), TimedOut (a T
	// record), Failed or Succeeded (an E record, or one of META's "ID
	// STATUS" lines).
	State State
	// Status is the STATUS of an attempt that ended, the signal of one
	// interrupted by an I record or ended by a T record; 0 otherwise.
	Status int
	// Start is when the case started (as its E or I record says, else its
	// S record); for an unfit case, when it was taken; 0 for META's.
	Start float64
	// Seconds is how long it ran: as its E or I record says (as written:
	// it may be negative in a damaged file); for a running case, up to
	// ReadOptions.Now; 0 if not known.
	Seconds float64
	// Use is what it used, as its E, I or T record says (RSS 0, HasCPU
	// false: not said).
	Use Use
	// Started says the file holds the attempt's start record: each S
	// record is the start of exactly one attempt.
	Started bool
	// NoEnd says it is interrupted with no record of its end: its
	// meta-job died (or was superseded by a restart) while it ran.
	NoEnd bool
	// Untimed says it is one of META's "ID STATUS" lines (a farm adopted
	// from META): it ended, and no time or host is known.
	Untimed bool
	// Host is the host its E or I record names, possibly empty. It
	// aliases ReadFile's buffer: it is valid only during the call.
	Host []byte
	// Loop is its S record's loop (0: not said).
	Loop int
	// Framed says its output is kept apart (OUTPUT=job), from Out and
	// Err in its loop's files on, as its S record says (Placement).
	Framed   bool
	Out, Err int64
	// Attempt is its S record's attempt= (0: not said, a first attempt):
	// from 2, a retry of the case after its attempt before it, in the same
	// run and by the same meta-job, failed (RETRIES); or, with Rescue, a
	// rerun of a case whose meta-job died while it ran it.
	Attempt int
	// Rescue says its S record is why=rescue: the attempt before it, in
	// the same run, was cut short by the death of its meta-job, and
	// another meta-job of the run ran it again (metajob/rescue.go).
	Rescue bool
	// AfterTimeout says its S record is why=timeout: a retry of a case
	// whose attempt before it timed out (RETRY_TIMEOUTS).
	AfterTimeout bool
	// seq is its S record's place among the file's S records, from 1
	// (Frames orders a loop's by it).
	seq uint32
	// note is the number in the file (File.notes) of its S record's
	// placement, or of its U record's reason; 0 if none.
	note uint32
}

// Ended says the attempt is an E, I or T record: it ended, with times.
func (a *Attempt) Ended() bool {
	return !a.Untimed && !a.NoEnd && (a.State == Succeeded || a.State == Failed || a.State == Interrupted || a.State == TimedOut)
}

// File is what a status file says of its meta-job.
type File struct {
	// Job is the job ID (its header's, else its name's), Restart its
	// incarnation (its name's: see layout.StatusFile).
	Job     string
	Restart int
	// Run, Host and Capacity are its header's.
	Run      int
	Host     string
	Capacity Capacity
	// Header: the file has farm's header. META: it is one of META's (its
	// first record an "ID STATUS" line), kept by farm adopt.
	Header, META bool
	// Quitted: the meta-job exited by itself (a Q record), at QuitAt,
	// saying Quit (possibly empty), for the reason QuitWhy names
	// (metajob's stop: no-cases, no-runtime, ...; empty if not said).
	Quitted bool
	Quit    string
	QuitWhy string
	QuitAt  float64
	// First is the earliest start of a case (S records), 0 if none; Last
	// the latest time the file records (starts, ends, Q and U records).
	First, Last float64

	// The file's notes (placements, reasons) by their keys, numbered
	// from 1 in the order first seen: notes[n-1] is note n's key.
	notes   []string
	noteNum map[string]uint32
	key     []byte // scratch for a note's key
	// noteCPUs are the CPUs of each note read so far (by number - 1): a
	// placement's count, 0 for a reason (CPUsGiven).
	noteCPUs []int
}

// ReadOptions tell ReadFile how to settle the cases a file leaves open.
type ReadOptions struct {
	// Live, LiveAsOf and Now are as in Options. A case started and not
	// ended is running if its meta-job may still run it: the file is not
	// superseded, its meta-job has not exited by itself, and Live says its
	// job runs, or the case started at or after LiveAsOf. It is
	// interrupted otherwise.
	Live     func(jobID string) bool
	LiveAsOf time.Time
	Now      time.Time // zero: the clock
	// Superseded says the file is an earlier incarnation of a job
	// restarted under the same ID: nothing in it runs.
	Superseded bool
	// Warn, if set, is told of each line that could not be parsed (by its
	// number, from 1), which is skipped.
	Warn func(line int, err error)
}

// ReadFile reads the status file name and calls fn with each attempt it
// records, settled: the attempts that ended and the unfit cases in the
// order of their records (an E or I record ends the latest open start of
// its case), then the cases started and not ended, by ID, running or
// interrupted (see ReadOptions). fn is also given the file as read so far
// (its header comes before any attempt); the Attempt is valid only during
// the call. An error of fn ends the reading and is returned.
//
// A line being written (the last, without its newline) is left for later,
// and so is a line too long to be a record. An error opening or reading
// the file is returned; so is a directory in its place.
func ReadFile(name string, opt ReadOptions, fn func(*File, *Attempt) error) (*File, error) {
	f, err := openFile(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rp := replay{fn: fn}
	rp.file.Job, rp.file.Restart, _ = layout.ParseStatusFile(filepath.Base(name))
	if err := rp.read(f, opt.Warn); err != nil {
		return nil, err
	}
	if err := rp.settle(opt, rp.fn); err != nil {
		return nil, err
	}
	return &rp.file, nil
}

// openFile opens the status file name. An error opening it is returned,
// and so is a directory in its place.
func openFile(name string) (*os.File, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		f.Close()
		return nil, dirError(name)
	}
	return f, nil
}

// dirError is the error of a directory in the place of status file name.
func dirError(name string) error {
	return fmt.Errorf("%s is a directory, not a status file: move it out of %s", name, filepath.Dir(name))
}

// read replays the complete lines of a status file from r: a line being
// written (the last, without its newline) is left out, and so is a line
// too long to be a record; damaged lines are told to warn, if set, and
// skipped. An error reading r is returned, and so is fn's.
func (rp *replay) read(r io.Reader, warn func(int, error)) error {
	br := bufio.NewReaderSize(r, 256<<10)
	for lineNo := 1; ; lineNo++ {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			for err == bufio.ErrBufferFull { // skip absurdly long lines
				_, err = br.ReadSlice('\n')
			}
			continue
		}
		if len(line) > 0 && line[len(line)-1] == '\n' {
			if err := rp.line(line, lineNo, warn); err != nil {
				return err
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// replay holds the state of reading one status file.
type replay struct {
	file File
	fn   func(*File, *Attempt) error
	open []openCase // started, not yet ended (in the order started): one per loop, normally
	a    Attempt    // the attempt handed to fn
	s    uint32     // the S records so far
	// claims, if set, keeps what the meta-job claimed and did not start,
	// for Leftovers: none of Load's readers sets it.
	claims *claims
}

// openCase is a case started and not yet ended in one status file.
type openCase struct {
	id      int64
	start   float64
	loop    int
	note    uint32
	attempt int
	rescue  bool
	timeout bool // why=timeout
	framed  bool
	out     int64
	err     int64
	seq     uint32
}

// line reads one complete line; a damaged one is told to warn, if set.
func (rp *replay) line(line []byte, lineNo int, warn func(int, error)) error {
	r, err := ParseRecord(line)
	if err == nil {
		var done bool
		if done, err = rp.record(&r); done {
			return err // fn's
		}
	}
	if err != nil && warn != nil {
		warn(lineNo, err)
	}
	return nil
}

// record replays one record. It reports done with fn's error once fn has
// been called; else err is what is wrong with the record.
func (rp *replay) record(r *Record) (done bool, err error) {
	f := &rp.file
	switch r.Kind {
	case KindHeader:
		if rp.claims != nil {
			rp.claims.header(r) // as written: even one refused below
		}
		if f.META {
			return false, errors.New("a farm header in a file of META's \"ID STATUS\" lines")
		}
		f.Header, f.Run, f.Host, f.Capacity = true, r.Run, string(r.Host), r.Capacity
		if len(r.Job) > 0 {
			f.Job = string(r.Job)
		}
	case KindMETA:
		// A file of META's, kept by farm adopt (no header before it): its
		// "ID STATUS" lines are cases that ended, in run 0, before farm.
		// In a file of farm's own, they come from a single_case.sh written
		// for META that writes them itself: farm's E record says the same.
		if f.Header {
			return false, nil
		}
		f.META = true
		rp.a = Attempt{ID: r.ID, State: outcome(r.Status), Status: r.Status, Untimed: true}
		return true, rp.fn(f, &rp.a)
	case KindQuit:
		f.Quitted, f.Quit, f.QuitWhy, f.QuitAt = true, string(r.Message), string(r.Why), r.Time
		f.later(r.Time)
	case KindStart:
		o := openCase{id: r.ID, start: r.Start, loop: r.Loop, attempt: r.Attempt, rescue: r.Attempt > 1 && string(r.Why) == WhyRescue,
			timeout: r.Attempt > 1 && string(r.Why) == WhyTimeout, framed: r.Framed, out: r.Out, err: r.Err}
		rp.s++
		o.seq = rp.s
		if len(r.CPUs)|len(r.GPUs)|r.Loop != 0 {
			o.note = f.placeNote(r)
		}
		rp.open = append(rp.open, o)
		if rp.claims != nil {
			rp.claims.started(r.ID)
		}
		if f.First == 0 || r.Start < f.First {
			f.First = r.Start
		}
		f.later(r.Start)
	case KindClaimed:
		// What it held: not an attempt (Leftovers reads them).
		if rp.claims != nil {
			rp.claims.claimed(r)
		}
		f.later(r.Time)
	case KindUnfit:
		// Taken and not started: an attempt without a start.
		if rp.claims != nil {
			rp.claims.started(r.ID)
		}
		f.later(r.Time)
		rp.a = Attempt{ID: r.ID, State: Unfit, Start: r.Time, note: f.reasonNote(r.Message)}
		return true, rp.fn(f, &rp.a)
	case KindEnd, KindInterrupted, KindTimedOut:
		return true, rp.ended(r)
	}
	return false, nil
}

// ended replays an E, I or T record: the end of the latest open start of
// its case, if any.
func (rp *replay) ended(r *Record) error {
	f := &rp.file
	rp.a = Attempt{ID: r.ID, State: outcome(r.Status), Status: r.Status, Start: r.Start, Seconds: r.Seconds, Host: r.Host,
		Use: Use{RSS: r.RSS, CPU: time.Duration(r.CPU * float64(time.Second)), HasCPU: r.HasCPU}}
	switch r.Kind {
	case KindInterrupted:
		rp.a.State = Interrupted
	case KindTimedOut:
		rp.a.State = TimedOut
	}
	for i := len(rp.open) - 1; i >= 0; i-- {
		if o := rp.open[i]; o.id == r.ID {
			rp.a.Started, rp.a.Loop, rp.a.note, rp.a.Attempt, rp.a.Rescue, rp.a.AfterTimeout = true, o.loop, o.note, o.attempt, o.rescue, o.timeout
			rp.a.Framed, rp.a.Out, rp.a.Err, rp.a.seq = o.framed, o.out, o.err, o.seq
			// Not slices.Delete, which clears the freed element, and
			// no copy when it is the last, as it is but in a job of
			// several loops: this is Load's hot path.
			if n := len(rp.open) - 1; i < n {
				copy(rp.open[i:], rp.open[i+1:])
			}
			rp.open = rp.open[:len(rp.open)-1]
			break
		}
	}
	f.later(r.Start + max(r.Seconds, 0))
	return rp.fn(f, &rp.a)
}

// later makes t the file's Last if it is later. (Not the builtin max,
// which orders NaNs and signed zeros: slower, on Load's hot path, and
// ParseRecord reads no NaN.)
func (f *File) later(t float64) {
	if t > f.Last {
		f.Last = t
	}
}

// outcome is the state of a case that ended with status.
func outcome(status int) State {
	if status == 0 {
		return Succeeded
	}
	return Failed
}

// settle hands fn the cases left open so far, by ID: running if the
// meta-job may still run them, else interrupted (see ReadOptions). They
// stay open: Tail settles them again after reading more.
func (rp *replay) settle(opt ReadOptions, fn func(*File, *Attempt) error) error {
	f := &rp.file
	if len(rp.open) == 0 {
		return nil
	}
	slices.SortStableFunc(rp.open, func(a, b openCase) int { return cmp.Compare(a.id, b.id) })
	mayRun := !opt.Superseded && !f.Quitted && !f.META
	live := mayRun && opt.Live != nil && opt.Live(f.Job)
	now, asOf := unixSeconds(opt.Now), unixSeconds(opt.LiveAsOf)
	if opt.Now.IsZero() {
		now = unixSeconds(time.Now())
	}
	for _, o := range rp.open {
		rp.a = Attempt{ID: o.id, State: Interrupted, Start: o.start, Started: true, NoEnd: true, Loop: o.loop, note: o.note, Attempt: o.attempt, Rescue: o.rescue, AfterTimeout: o.timeout,
			Framed: o.framed, Out: o.out, Err: o.err, seq: o.seq}
		if live || (mayRun && asOf > 0 && o.start >= asOf) {
			rp.a.State, rp.a.NoEnd, rp.a.Seconds = Running, false, max(0, now-o.start)
		}
		if err := fn(f, &rp.a); err != nil {
			return err
		}
	}
	return nil
}

// unixSeconds is t in Unix seconds, to the millisecond; 0 for a zero t.
func unixSeconds(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixMilli()) / 1e3
}

// placeNote returns the note of the placement of S record r, 0 if it
// says none. Its key is "S" LOOP " " CPUS " " GPUS, the lists as written.
func (f *File) placeNote(r *Record) uint32 {
	if r.Loop == 0 && len(r.CPUs) == 0 && len(r.GPUs) == 0 {
		return 0
	}
	k := strconv.AppendInt(append(f.key[:0], 'S'), int64(r.Loop), 10)
	k = append(append(k, ' '), r.CPUs...)
	k = append(append(k, ' '), r.GPUs...)
	f.key = k
	return f.intern(k)
}

// reasonNote returns the note of an unfit reason, 0 if it is empty. Its
// key is "U" REASON.
func (f *File) reasonNote(reason []byte) uint32 {
	if len(reason) == 0 {
		return 0
	}
	f.key = append(append(f.key[:0], 'U'), reason...)
	return f.intern(f.key)
}

// intern returns the number of the note of key in the file, numbering it
// if it is new.
func (f *File) intern(k []byte) uint32 {
	if n, ok := f.noteNum[string(k)]; ok {
		return n
	}
	key := string(k)
	if f.noteNum == nil {
		f.noteNum = map[string]uint32{}
	}
	f.notes = append(f.notes, key)
	n := uint32(len(f.notes))
	f.noteNum[key] = n
	return n
}
