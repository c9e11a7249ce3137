package casetable

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/farm-hpc/farm/internal/kv"
)

// State is a generation of the claim state (chain.go), in internal/kv's
// format: on the main chain the run record, which only commands change; in a
// lane's chain the lane's cursor (CLAIMS.md, The run record; Lanes).
type State struct {
	Run     int    // run number: 1 for submit, +1 for every resubmit
	Table   string // the run's own table (a lane's: its set's), relative to the farm directory
	Simple  bool   // SIMPLE mode: one case per job
	Cases   int64  // cases of the run (its own table's and farm add's); a lane's: in its blocks
	MaxID   int64  // largest case ID of the farm's table.dat
	Total   int64  // cases in the farm's table.dat
	Repair  string // set by each 'farm repair' to a value of its own: a meta-job tells a rebuilt state by it
	Sets    []Set  // what the run claims, in order (farm add --first puts one ahead); none: closed
	Claimed int64  // cases claimed: the run's as Read returns it (not stored there); a lane's

	// A lane's cursor (InLane): its lane and block, the byte offset of
	// Table's next line and the lines before it; Table's size, inode and
	// fingerprint as the run saw it, which a claim checks.
	InLane bool
	Lane   int
	Block  int64
	Offset int64
	Lines  int64
	TSize  int64
	TIno   uint64
	TFP    string

	Gen   int64  // the generation this state was read from, -1 for none (not stored)
	Chain string // the chain Gen is of (not stored): a repair's new one counts from 0 again
}

// Set is a set of lanes over one table (lanes.go): the run's own, or one 'farm add' gave it.
type Set struct {
	Dir   string // its directory in MISC (lanes.RUN.NONCE)
	Lanes int    // its lanes
	Cases int64  // the cases of its table
	Table string // its table, relative to the farm directory
}

// OwnSet is the set of the run's own table; zero if it has none (closed).
func (st *State) OwnSet() Set {
	for _, t := range st.Sets {
		if t.Table == st.Table {
			return t
		}
	}
	return Set{}
}

// ErrNoState is returned when the farm has never been submitted.
var ErrNoState = errors.New("the farm has not been submitted yet")

// commitInfo is who made a generation and what it claimed, for the record (the protocol: nonce).
type commitInfo struct {
	by    string // job ID, or the command that made it
	first int64  // first case ID claimed, 0 if none
	n     int    // cases claimed
	nonce string
	ids   []int64 // the cases claimed, for Opts.Note (not stored)
	// empties: the claim takes the last of its lane's cases (not stored): if
	// it loses, the winner's generation is read before the loser pauses.
	empties bool
}

// marshal writes s as generation gen's record: a run record, or a lane's cursor (InLane).
func (s *State) marshal(b []byte, gen int64, ci commitInfo) []byte {
	b = append(b, genMagic...)
	b = kv.AppendInt(b, "gen", gen)
	b = kv.AppendInt(b, "run", int64(s.Run))
	b = kv.Append(b, "table", s.Table)
	if s.InLane {
		b = kv.AppendInt(b, "lane", int64(s.Lane))
		b = kv.AppendInt(b, "block", s.Block)
		b = kv.AppendInt(b, "offset", s.Offset)
		b = kv.AppendInt(b, "line", s.Lines)
		b = kv.AppendInt(b, "tsize", s.TSize)
		b = kv.AppendUint(b, "tino", s.TIno)
		b = kv.Append(b, "tfp", recordValue(s.TFP, " \n"))
		b = kv.AppendInt(b, "cases", s.Cases)
		b = kv.AppendInt(b, "claimed", s.Claimed)
	} else {
		b = kv.AppendBool(b, "simple", s.Simple)
		b = kv.AppendInt(b, "cases", s.Cases)
		b = kv.AppendInt(b, "maxid", s.MaxID)
		b = kv.AppendInt(b, "total", s.Total)
		if s.Repair != "" && !strings.ContainsAny(s.Repair, " \n") {
			b = kv.Append(b, "repair", s.Repair)
		}
		for _, t := range s.Sets {
			b = kv.Append(b, "set", fmt.Sprintf("%s:%d:%d:%s", t.Dir, t.Lanes, t.Cases, t.Table))
		}
	}
	b = kv.Append(b, "by", recordValue(ci.by, " \n="))
	b = kv.AppendInt(b, "first", ci.first)
	b = kv.AppendInt(b, "n", int64(ci.n))
	b = kv.Append(b, "nonce", ci.nonce)
	return append(b, '\n')
}

// recordValue is v as a record's value: "-" if it is empty or holds one of bad.
func recordValue(v, bad string) string {
	if v == "" || strings.ContainsAny(v, bad) {
		return "-"
	}
	return v
}

// errClosed: the generation closes its chain (a repair made a new one).
var errClosed = errors.New("chain closed")

// unmarshal reads a generation's record into s.
func (s *State) unmarshal(b []byte) error {
	rest, ok := strings.CutPrefix(string(b), genMagic)
	if !ok || !strings.HasSuffix(rest, "\n") {
		return errors.New("not a generation record")
	}
	seen := 0 // run= and table= fields
	r := kv.NewReader(rest)
	for r.Next() {
		if r.Word() {
			if r.Key() == "closed" {
				return errClosed
			}
			return fmt.Errorf("bad field %q", r.Key())
		}
		if f := stateFields[r.Key()]; f != nil {
			f(s, r)
		}
		if r.Key() == "run" || r.Key() == "table" {
			seen++
		}
	}
	if err := r.Err(); err != nil {
		return err
	}
	if seen != 2 || s.Run < 0 {
		return errors.New("missing run or table")
	}
	if s.InLane && (s.Lane < 0 || s.Block < 0 || s.Offset < 0) {
		return errors.New("bad lane cursor")
	}
	return nil
}

// stateFields reads a record's fields into a State, by key (not the commit info's).
var stateFields = map[string]func(*State, *kv.Reader){
	"gen":     func(s *State, r *kv.Reader) { s.Gen = r.Int() },
	"run":     func(s *State, r *kv.Reader) { s.Run = r.Atoi() },
	"table":   func(s *State, r *kv.Reader) { s.Table = r.Value() },
	"simple":  func(s *State, r *kv.Reader) { s.Simple = r.Bool() },
	"lane":    func(s *State, r *kv.Reader) { s.InLane, s.Lane = true, r.Atoi() },
	"block":   func(s *State, r *kv.Reader) { s.Block = r.Int() },
	"offset":  func(s *State, r *kv.Reader) { s.Offset = r.Int() },
	"line":    func(s *State, r *kv.Reader) { s.Lines = r.Int() },
	"tsize":   func(s *State, r *kv.Reader) { s.TSize = r.Int() },
	"tino":    func(s *State, r *kv.Reader) { s.TIno = r.Uint() },
	"cases":   func(s *State, r *kv.Reader) { s.Cases = r.Int() },
	"total":   func(s *State, r *kv.Reader) { s.Total = r.Int() },
	"maxid":   func(s *State, r *kv.Reader) { s.MaxID = r.Int() },
	"claimed": func(s *State, r *kv.Reader) { s.Claimed = r.Int() },
	"repair":  func(s *State, r *kv.Reader) { s.Repair = r.Value() },
	"tfp": func(s *State, r *kv.Reader) {
		if v := r.Value(); v != "-" {
			s.TFP = v
		}
	},
	"set": func(s *State, r *kv.Reader) { // DIR:LANES:CASES:TABLE
		var t Set
		var err1, err2 error
		if f := strings.SplitN(r.Value(), ":", 4); len(f) == 4 {
			t.Dir, t.Table = f[0], f[3]
			t.Lanes, err1 = strconv.Atoi(f[1])
			t.Cases, err2 = strconv.ParseInt(f[2], 10, 64)
		}
		if t.Dir == "" || strings.Contains(t.Dir, "/") || t.Table == "" || err1 != nil || err2 != nil || t.Lanes < 1 || t.Cases < 0 {
			r.Fail(errors.New("not DIR:LANES:CASES:TABLE"))
		}
		s.Sets = append(s.Sets, t)
	},
}
