package casetable

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// State is the farm's shared claim state, kept in one small file that is
// only read and written under the farm lock. Its cursor is a byte offset into
// the current run's table, so a claim costs the same on any table size.
type State struct {
	Run    int    // run number: 1 for submit, +1 for every resubmit
	Table  string // the run's table, relative to the farm directory
	Simple bool   // SIMPLE mode: one case per job
	Offset int64  // byte offset of the next unread line of Table
	Cases  int64  // cases in Table
	MaxID  int64  // largest case ID of the farm's table.dat
	Total  int64  // cases in the farm's table.dat

	Claimed int64   // cases claimed in this run
	Done    int64   // cases finished farm-wide, over all runs
	Cutoff  float64 // runtime-aware exit threshold in seconds; 0 = unknown
	Next    int64   // Done count at which Cutoff is next recomputed
}

// ErrNoState is returned when the farm has never been submitted.
var ErrNoState = errors.New("the farm has not been submitted yet")

func (s *State) marshal(b []byte) []byte {
	b = fmt.Appendf(b, "run=%d table=%s simple=%t offset=%d cases=%d maxid=%d total=%d claimed=%d done=%d cutoff=%s next=%d\n",
		s.Run, s.Table, s.Simple, s.Offset, s.Cases, s.MaxID, s.Total, s.Claimed, s.Done,
		strconv.FormatFloat(s.Cutoff, 'g', -1, 64), s.Next)
	return b
}

func (s *State) unmarshal(b []byte) error {
	for _, kv := range strings.Fields(string(b)) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("bad field %q", kv)
		}
		var err error
		switch k {
		case "run":
			s.Run, err = strconv.Atoi(v)
		case "table":
			s.Table = v
		case "simple":
			s.Simple, err = strconv.ParseBool(v)
		case "offset":
			s.Offset, err = strconv.ParseInt(v, 10, 64)
		case "cases":
			s.Cases, err = strconv.ParseInt(v, 10, 64)
		case "total":
			s.Total, err = strconv.ParseInt(v, 10, 64)
		case "maxid":
			s.MaxID, err = strconv.ParseInt(v, 10, 64)
		case "claimed":
			s.Claimed, err = strconv.ParseInt(v, 10, 64)
		case "done":
			s.Done, err = strconv.ParseInt(v, 10, 64)
		case "cutoff":
			s.Cutoff, err = strconv.ParseFloat(v, 64)
		case "next":
			s.Next, err = strconv.ParseInt(v, 10, 64)
		}
		if err != nil {
			return fmt.Errorf("bad field %q: %v", kv, err)
		}
	}
	if s.Run < 1 || s.Table == "" {
		return errors.New("missing run or table")
	}
	return nil
}

// Store reads and writes the state file of a farm under its lock.
type Store struct {
	Dir  string // farm directory
	Lock *Lock

	path  string
	table *os.File // cached: a run's table never changes while it runs
	tname string
	buf   []byte
}

// NewStore returns the claim store of the farm in dir, whose internal state
// lives in misc (normally dir/MISC).
func NewStore(dir, misc, host string) (*Store, error) {
	l, err := NewLock(filepath.Join(misc, "lock"), host)
	if err != nil {
		return nil, err
	}
	return &Store{Dir: dir, Lock: l, path: filepath.Join(misc, "state")}, nil
}

// Close releases the store's files.
func (s *Store) Close() error {
	if s.table != nil {
		s.table.Close()
		s.table = nil
	}
	return s.Lock.Close()
}

// read opens the state file afresh (close-to-open consistency on NFS).
func (s *Store) read() (State, error) {
	var st State
	b, err := os.ReadFile(s.path)
	if os.IsNotExist(err) {
		return st, ErrNoState
	}
	if err != nil {
		return st, err
	}
	if err := st.unmarshal(b); err != nil {
		return st, fmt.Errorf("%s is damaged (%v); resubmit the farm to start a new run", s.path, err)
	}
	return st, nil
}

// stateSize is the fixed size of the state file. Every write rewrites it
// whole in one write(2) at offset 0, in place: a rename over the old file
// would make ext4 flush it (auto_da_alloc), costing ~0.4 ms a claim, and a
// single write of a few hundred bytes cannot be torn by a killed process.
const stateSize = 256

func (s *Store) write(st *State) error {
	s.buf = st.marshal(s.buf[:0])
	if len(s.buf) > stateSize {
		return fmt.Errorf("state record too long (%d bytes)", len(s.buf))
	}
	line := len(s.buf) - 1
	for len(s.buf) < stateSize {
		s.buf = append(s.buf, ' ')
	}
	s.buf[line], s.buf[stateSize-1] = ' ', '\n'
	f, err := os.OpenFile(s.path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(s.buf, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Read returns the current state, taking the lock.
func (s *Store) Read(ctx context.Context) (State, error) {
	var st State
	err := s.Update(ctx, func(cur *State) error { st = *cur; return errSkipWrite })
	return st, err
}

var errSkipWrite = errors.New("skip write")

// Update runs fn on the state under the lock and writes the result back. If
// the farm has no state yet, fn gets a zero State.
func (s *Store) Update(ctx context.Context, fn func(*State) error) error {
	if err := s.Lock.Lock(ctx); err != nil {
		return err
	}
	defer func() {
		if err := s.Lock.Unlock(); err != nil {
			// Our lock was broken as stale while we held it: say so, as
			// another process may have claimed at the same time.
			fmt.Fprintf(os.Stderr, "farm: warning: %v\n", err)
		}
	}()
	st, err := s.read()
	if err != nil && err != ErrNoState {
		return err
	}
	if err := fn(&st); err != nil {
		if err == errSkipWrite {
			return nil
		}
		return err
	}
	return s.write(&st)
}

// Claim hands out the next unclaimed case of run, or ok=false when the run
// has none left (or a newer run has started). before, if not nil, is called
// first under the same lock: the meta-job uses it to update the farm-wide
// counters, and returns ErrStop to claim nothing (its changes are kept).
func (s *Store) Claim(ctx context.Context, run int, before func(*State) error) (c Case, ok bool, err error) {
	err = s.Update(ctx, func(st *State) error {
		if st.Run == 0 {
			return ErrNoState
		}
		if before != nil {
			if err := before(st); err == ErrStop {
				return nil // keep before's changes, claim nothing
			} else if err != nil {
				return err
			}
		}
		if st.Run != run {
			return nil
		}
		var next int64
		c, next, ok, err = s.readCase(st)
		if err != nil || !ok {
			st.Offset = next
			return err
		}
		st.Offset = next
		st.Claimed++
		return nil
	})
	return c, ok, err
}

// ErrStop, returned by Claim's before function, ends the claim with no case
// while keeping the state changes made so far.
var ErrStop = errors.New("stop claiming")

// readCase reads the first case line at or after st.Offset, returning it and
// the offset just past it.
func (s *Store) readCase(st *State) (Case, int64, bool, error) {
	if s.table == nil || s.tname != st.Table {
		if s.table != nil {
			s.table.Close()
		}
		f, err := os.Open(filepath.Join(s.Dir, st.Table))
		if err != nil {
			return Case{}, st.Offset, false, err
		}
		s.table, s.tname = f, st.Table
	}
	off := st.Offset
	if cap(s.buf) < 4096 {
		s.buf = make([]byte, 4096)
	}
	for {
		line, next, err := readLineAt(s.table, off, &s.buf)
		if err == io.EOF {
			return Case{}, off, false, nil
		}
		if err != nil {
			return Case{}, off, false, err
		}
		off = next
		line = trimEOL(line)
		if !isCase(line) {
			continue
		}
		id, cmd, _, perr := splitID(line)
		if perr != nil {
			return Case{}, off, false, fmt.Errorf("%s at byte %d: %v", st.Table, next, perr)
		}
		return Case{ID: id, Command: cmd}, off, true, nil
	}
}

// readLineAt reads the line starting at off. The returned slice aliases *buf.
func readLineAt(f *os.File, off int64, buf *[]byte) (line []byte, next int64, err error) {
	b := (*buf)[:cap(*buf)]
	n := 0
	for {
		m, rerr := f.ReadAt(b[n:], off+int64(n))
		if i := bytes.IndexByte(b[n:n+m], '\n'); i >= 0 {
			end := n + i + 1
			*buf = b
			return b[:end], off + int64(end), nil
		}
		n += m
		if rerr == io.EOF {
			*buf = b
			if n == 0 {
				return nil, off, io.EOF
			}
			return b[:n], off + int64(n), nil // last line without newline
		}
		if rerr != nil {
			return nil, off, rerr
		}
		if n == len(b) {
			nb := make([]byte, 2*len(b))
			copy(nb, b)
			b = nb
		}
	}
}
