// Package tablefmt is the format of table.dat and of the tables farm
// makes from it (a run's, farm add's): reading, numbering, validation,
// a line's #FARM needs, and the record of the table a run was taken from
// (Source). It knows nothing of claims: casetable hands out the cases of
// these tables to meta-jobs.
//
// A table is a text file with one case per line. Blank lines and lines whose
// first non-blank character is '#' are not cases. CRLF line endings are
// tolerated. A numbered table has "ID command" on every case line, with ID a
// positive integer unique in the table; an unnumbered table is numbered
// 1, 2, 3, ... in line order by Number, each line kept whole (a number it
// starts with is the case's first parameter). Whether a user's table is
// numbered is META's rule (METARule): its first case lines (up to
// RuleLines of them) start with 1, 2, 3, ... in order. Tables farm wrote
// (numbered by it, or taken as numbered) are read as numbered (HasIDs).
// Every case line that enters a farm is checked by one function,
// checkCase.
package tablefmt

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/farm-hpc/farm/atomicfile"
)

// Case is one line of a table: an independent computation.
type Case struct {
	ID      int64  // the case ID, stable across resubmits
	Command string // the line without its ID field
	Line    int64  // its line number in the run's table (from 1), when claimed; 0 if not known
	Table   string // the table Line is in, relative to the farm ("": the run's own), when claimed
	Needs   Needs  // what it declares it needs (ParseNeeds); Command is without it
}

// LineError is a problem with one line of a table file. Its message names the
// file and line so that users can find and fix it.
type LineError struct {
	File string
	Line int
	Msg  string
}

func (e *LineError) Error() string {
	return fmt.Sprintf("%s:%d: %s", filepath.Base(e.File), e.Line, e.Msg)
}

// ErrEmptyTable is returned for a table that has no case lines.
var ErrEmptyTable = errors.New("table has no cases")

// Info describes a validated table.
type Info struct {
	Cases    int   // number of case lines
	MaxID    int64 // largest case ID
	Numbered bool  // the table already carried IDs before Prepare ran
	// NotIDs, for a table METARule found not numbered whose first case
	// line starts with a number (startsWithID), is the first case line
	// that does not start with the next of 1, 2, 3, ...: farm numbers
	// every line, and that number is the case's first parameter, which
	// the user should hear of (nil: the table is numbered, or its first
	// line does not start with a number).
	NotIDs *NotIDs
}

// NotIDs is where a table whose lines start with numbers stops being
// numbered 1, 2, 3, ... (Info.NotIDs).
type NotIDs struct {
	Line  int    // its line in the file
	Want  int    // the ID it would need (its place among the case lines)
	Field string // its first field (at most 40 bytes)
}

// Numbering says how a table's first fields are read.
type Numbering int

const (
	// METARule is META's rule for a user's table: it is numbered
	// ("ID command" on every case line) only when its first case lines,
	// up to RuleLines of them (all of them in a shorter table), start
	// with 1, 2, 3, ... in order; the case lines after those must then
	// carry IDs too (any unique positive ones). Else farm numbers every
	// line and keeps it whole: "101 0.5" is case 1 with COMM "101 0.5".
	METARule Numbering = iota
	// HasIDs reads every case line as "ID command": a table farm has
	// numbered or taken as numbered (table.dat once the farm ran, its own
	// run tables).
	HasIDs
	// TableIDs is HasIDs for a table the config's TABLE_IDS=1 says
	// carries IDs; its errors say so.
	TableIDs
)

// ids reports whether how reads every case line as "ID command".
func (how Numbering) ids() bool { return how != METARule }

// RuleLines is how many case lines METARule looks at, as META's
// submit.run does.
const RuleLines = 100

// isCase reports whether a (CR-trimmed) line holds a case.
func isCase(line []byte) bool {
	t := bytes.TrimLeft(line, " \t")
	return len(t) > 0 && t[0] != '#' && len(bytes.TrimSpace(t)) > 0
}

// MaxCommand is the longest command (a case line without its ID) a case
// may have, in bytes. The command reaches single_case.sh in the environment
// variable COMM, and Linux refuses to start a program whose environment
// holds a string longer than 128 KiB with its terminating NUL
// (MAX_ARG_STRLEN, 32 pages of 4 KiB): every program the case would start,
// its own or single_case.sh's, would fail with E2BIG, "Argument list too
// long" (only a case of shell builtins alone would run).
const MaxCommand = 128<<10 - len("COMM=") - 1

// tooLong is the error of a case line whose command (n bytes) is longer
// than MaxCommand.
func tooLong(path string, line, n int) *LineError {
	return &LineError{File: path, Line: line, Msg: fmt.Sprintf("the command is %d bytes long, more than the %d a case may have (it reaches single_case.sh in the environment variable COMM, which Linux limits to 128 KiB); shorten the line, e.g. put long data in a file the command reads", n, MaxCommand)}
}

// checkCase is the one check of a case line, for every way a line enters
// a farm: table.dat at submit (validate), a resubmit's table (scanKept),
// the lines 'farm add' adds (NumberAdded), the table 'farm adopt' takes
// (validate). line (its end of line removed) is line n of file; with
// numbered it is "ID command", else the whole line is the command. It
// refuses, with file and line, what would not run as written: a NUL or
// another control character (a tab aside: bash drops a NUL, and binary
// junk is not a table), a malformed ID, a command longer than
// MaxCommand, a NeedsMark part that does not read (ParseNeeds). Bytes
// that are not UTF-8 are not refused: a Linux file name is bytes, and
// bash runs them as written. It returns the ID (0 when not numbered)
// and the command, trimmed.
func checkCase(file string, n int, line []byte, numbered bool) (int64, string, error) {
	return checkCaseHint(file, n, line, numbered, "")
}

// checkCaseHint is checkCase whose error for a malformed ID ends with
// idHint, which says why the line needs one.
func checkCaseHint(file string, n int, line []byte, numbered bool, idHint string) (int64, string, error) {
	for i, c := range line {
		if c >= 0x20 && c != 0x7f || c == '\t' {
			continue
		}
		what := fmt.Sprintf("a control character (byte 0x%02x)", c)
		if c == 0 {
			what = "a NUL byte"
		}
		return 0, "", &LineError{File: file, Line: n, Msg: fmt.Sprintf("%s at column %d: a case line must be text; remove it", what, i+1)}
	}
	var id int64
	var cmd string
	if numbered {
		var err error
		if id, cmd, _, err = splitID(line); err != nil {
			return 0, "", &LineError{File: file, Line: n, Msg: err.Error() + "; fix the line" + idHint}
		}
	} else {
		cmd = string(bytes.TrimSpace(line))
	}
	if len(cmd) > MaxCommand {
		return 0, "", tooLong(file, n, len(cmd))
	}
	if strings.Contains(cmd, NeedsMark) {
		if _, _, err := ParseNeeds(cmd); err != nil {
			return 0, "", needsError(file, n, err)
		}
	}
	return id, cmd, nil
}

// needsBad is ParseNeeds' error for cmd, if any.
func needsBad(cmd string) error {
	_, _, err := ParseNeeds(cmd)
	return err
}

// needsError is the error of line n of path whose NeedsMark part does not
// read: "table.dat:7: #FARM: unknown key "cpu" (known: ...); fix the line".
func needsError(path string, n int, err error) *LineError {
	return &LineError{File: path, Line: n, Msg: err.Error() + "; fix the line"}
}

// startsWithID reports whether a case line's first field starts as an ID
// does, well formed or not: with a digit, or a sign and a digit ("1",
// "-1", "+2", "1a", "2.5"). A table not numbered whose first case line
// starts so gets a note (Info.NotIDs): its numbers are parameters.
func startsWithID(line []byte) bool {
	t := firstField(line)
	if len(t) > 1 && (t[0] == '-' || t[0] == '+') {
		t = t[1:]
	}
	return len(t) > 0 && t[0] >= '0' && t[0] <= '9'
}

// splitID splits a numbered case line into its ID and command. ok is false
// when the first field is not made of digits.
func splitID(line []byte) (id int64, cmd string, digits bool, err error) {
	t := bytes.TrimLeft(line, " \t")
	end := bytes.IndexAny(t, " \t")
	field := t
	if end >= 0 {
		field = t[:end]
	}
	digits = len(field) > 0
	for _, c := range field {
		if c < '0' || c > '9' {
			digits = false
			break
		}
	}
	if !digits {
		return 0, "", false, fmt.Errorf("malformed case ID %q: a numbered table needs \"ID command\" on every case line, with ID a positive integer", truncate(field))
	}
	id, perr := strconv.ParseInt(string(field), 10, 64)
	if perr != nil || id < 1 {
		return 0, "", true, fmt.Errorf("malformed case ID %q: IDs must be positive integers", truncate(field))
	}
	if end < 0 || len(bytes.TrimSpace(t[end:])) == 0 {
		return 0, "", true, fmt.Errorf("case %d has an ID but no command", id)
	}
	return id, string(bytes.TrimSpace(t[end:])), true, nil
}

func truncate(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "..."
	}
	return string(b)
}

// IsCase reports whether line, with its end of line or without, is a case
// line: not blank, not a comment. (A line longer than a reader's buffer
// is told by its start.)
func IsCase(line []byte) bool { return isCase(trimEOL(line)) }

// ParseCase reads line, a line of a numbered table with its end of line
// or without: its case's ID, command and needs, and false if the line is
// no case (blank, a comment). A needs part that does not read (which
// Validate refuses) leaves the command as written, with nothing declared:
// bash takes it for a comment.
func ParseCase(line []byte) (c Case, ok bool, err error) {
	line = trimEOL(line)
	if !isCase(line) {
		return Case{}, false, nil
	}
	id, cmd, _, err := splitID(line)
	if err != nil {
		return Case{}, false, err
	}
	c.ID = id
	c.Command, c.Needs, _ = ParseNeeds(cmd)
	return c, true, nil
}

// trimEOL removes a trailing "\n" and "\r".
func trimEOL(line []byte) []byte {
	line = bytes.TrimSuffix(line, []byte("\n"))
	return bytes.TrimSuffix(line, []byte("\r"))
}

// eachLine calls fn for every line of r with its 1-based number.
func eachLine(r io.Reader, fn func(n int, line []byte) error) error {
	br := bufio.NewReaderSize(r, 1<<20)
	for n := 1; ; n++ {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A very long line: collect it whole.
			buf := append([]byte(nil), line...)
			for err == bufio.ErrBufferFull {
				line, err = br.ReadSlice('\n')
				buf = append(buf, line...)
			}
			line = buf
		}
		if len(line) > 0 {
			if ferr := fn(n, trimEOL(line)); ferr != nil {
				return ferr
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

// idSet records which IDs were seen, to report duplicates, in memory that
// grows with the number of IDs, not with the largest: one bit per ID, in
// a bitset over 0..64*len(bits)-1 while the IDs seen fill a fair part of
// it (the usual 1..N), and in a map of 64-bit words for the others (IDs
// 1,000,000,000 and 2,000,000,000 cost a word each, not 250 MB).
type idSet struct {
	bits []uint64
	n    int64            // IDs added
	far  map[int64]uint64 // words beyond bits, by id>>6
}

// add puts id (>= 0) in the set and reports whether it was already there.
// The line of the first is found by a second pass (firstLineOf), which only
// errors pay for.
func (s *idSet) add(id int64) (dup bool) {
	w := id >> 6
	if w >= int64(len(s.bits)) {
		// The bitset may span 2 IDs for every ID seen, and 64 Ki more.
		if most := 2*s.n/64 + 1024; w < most {
			s.grow(min(max(w+1, 2*int64(len(s.bits))), most))
		}
	}
	bit := uint64(1) << (id & 63)
	s.n++
	if w < int64(len(s.bits)) {
		dup = s.bits[w]&bit != 0
		s.bits[w] |= bit
	} else {
		if s.far == nil {
			s.far = map[int64]uint64{}
		}
		old := s.far[w]
		dup = old&bit != 0
		s.far[w] = old | bit
	}
	if dup {
		s.n--
	}
	return dup
}

// grow makes the bitset n words long, and moves there the words of far it
// now covers.
func (s *idSet) grow(n int64) {
	from := int64(len(s.bits))
	nb := make([]uint64, n)
	copy(nb, s.bits)
	s.bits = nb
	if int64(len(s.far)) < n-from {
		for w, v := range s.far {
			if w < n {
				s.bits[w] = v
				delete(s.far, w)
			}
		}
		return
	}
	for w := from; w < n && len(s.far) > 0; w++ {
		if v, ok := s.far[w]; ok {
			s.bits[w] = v
			delete(s.far, w)
		}
	}
}

// firstLineOf finds the first line of path that carries case id.
func firstLineOf(path string, id int64) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	found := 0
	errStop := errors.New("stop")
	eachLine(f, func(n int, line []byte) error {
		if !isCase(line) {
			return nil
		}
		if got, _, _, err := splitID(line); err == nil && got == id {
			found = n
			return errStop
		}
		return nil
	})
	return found
}

// Validate checks a table without changing it: it is numbered or not by
// METARule, and every case line must pass checkCase; in a numbered table
// every case line must carry a unique positive ID.
func Validate(path string) (Info, error) {
	return ValidateAs(path, METARule)
}

// ValidateAs is Validate with the numbering how.
func ValidateAs(path string, how Numbering) (Info, error) {
	f, err := os.Open(path)
	if err != nil {
		return Info{}, err
	}
	defer f.Close()
	return validate(path, f, how)
}

// ValidateSource is ValidateAs that also returns the Source of what it
// read (its SHA-256 lets NumberChecked and Snapshot make sure they read
// the table validated, without validating it again).
func ValidateSource(path string, how Numbering) (Info, Source, error) {
	in, hr, s, err := openSource(path)
	if err != nil {
		return Info{}, Source{}, err
	}
	defer in.Close()
	info, err := validate(path, hr, how)
	if err != nil {
		return info, Source{}, err
	}
	return info, hr.source(s), nil
}

// seqID reports whether a case line starts with the ID k, written as
// farm writes it (METARule: "1", not "01" or "+1").
func seqID(line []byte, k int) bool {
	return string(firstField(line)) == strconv.Itoa(k)
}

// noIDAfterIDs is the error of case line n of path, which starts with no
// number after k case lines that start with 1, 2, ..., k: IDs that farm
// wrote (farm add, import-metaq) and a line added by hand. META's rule
// would number every line, the IDs becoming first parameters, and every
// case would run something else: refused instead.
func noIDAfterIDs(path string, n, k int, line []byte) error {
	return &LineError{File: path, Line: n, Msg: fmt.Sprintf("this case line has no ID, but the %d case line(s) before it start with their IDs 1 to %d: give it the next ID (%d %s), or remove the IDs of every line to let farm number the table", k, k, k+1, truncate(bytes.TrimSpace(line)))}
}

// heldLine is a case line validate holds until METARule has decided.
type heldLine struct {
	n    int
	line []byte
}

// validate is ValidateAs of the table path, read from r. Under METARule
// it holds the first case lines (at most RuleLines) while they go 1, 2,
// 3, ...: once one does not, or RuleLines did, or the table ends, the
// table is decided, and the lines held are checked, in order.
func validate(path string, r io.Reader, how Numbering) (Info, error) {
	var info Info
	var ids idSet
	var held []heldLine
	decided := how.ids()
	info.Numbered = how.ids()
	hint := ", or remove all IDs to let farm number the table"
	switch how {
	case HasIDs:
		hint = " (every case line of this table needs its ID)"
	case TableIDs:
		hint = " (config has TABLE_IDS=1: the first field of every case line is its ID), or remove TABLE_IDS from config to let farm number the table"
	}
	check := func(n int, line []byte) error {
		id, _, err := checkCaseHint(path, n, line, info.Numbered, hint)
		if err != nil || !info.Numbered {
			return err
		}
		if ids.add(id) {
			prev := firstLineOf(path, id)
			return &LineError{File: path, Line: n, Msg: fmt.Sprintf("duplicate case ID %d (first used on line %d); every case needs its own ID", id, prev)}
		}
		info.MaxID = max(info.MaxID, id)
		return nil
	}
	decide := func(numbered bool) error {
		decided, info.Numbered = true, numbered
		for _, h := range held {
			if err := check(h.n, h.line); err != nil {
				return err
			}
		}
		if numbered { // the lines after RuleLines
			hint = fmt.Sprintf(" (its first %d case lines are numbered 1, 2, 3, ..., so every case line needs its ID), or remove all IDs to let farm number the table", RuleLines)
		}
		held = nil
		return nil
	}
	err := eachLine(r, func(n int, line []byte) error {
		if !isCase(line) {
			return nil
		}
		info.Cases++
		if decided {
			return check(n, line)
		}
		if !seqID(line, len(held)+1) {
			if len(held) > 0 && !startsWithID(line) {
				return noIDAfterIDs(path, n, len(held), line)
			}
			if len(held) > 0 || startsWithID(line) {
				info.NotIDs = &NotIDs{Line: n, Want: len(held) + 1, Field: truncate(firstField(line))}
			}
			if err := decide(false); err != nil {
				return err
			}
			return check(n, line)
		}
		held = append(held, heldLine{n, bytes.Clone(line)})
		if len(held) == RuleLines {
			return decide(true)
		}
		return nil
	})
	if err == nil && !decided {
		err = decide(len(held) > 0)
	}
	if err != nil {
		return Info{}, err
	}
	if info.Cases == 0 {
		return info, fmt.Errorf("%s: %w; put one command per line", filepath.Base(path), ErrEmptyTable)
	}
	if !info.Numbered {
		info.MaxID = int64(info.Cases)
	}
	return info, nil
}

// Prepare validates the table at path (METARule) and, if it carries no
// IDs, numbers it in place: the numbered table is written to a temporary
// file and renamed over the original, which is first kept as
// path+".orig".
func Prepare(path string) (Info, error) {
	info, err := Validate(path)
	if err != nil || info.Numbered {
		return info, err
	}
	if err := Number(path, path+".orig"); err != nil {
		return info, err
	}
	return info, nil
}

// Number rewrites the unnumbered table at path as "ID command" lines,
// keeping comment and blank lines, and leaves a copy of the original at
// backup (unless backup is ""). A path that is a symbolic link is
// followed: its target is numbered in place (written beside it and renamed
// over it), and the link stays as it was.
func Number(path, backup string) error {
	_, err := NumberChecked(path, backup, "")
	return err
}

// ErrChanged is the error of a table that changed while farm read it:
// what it read is not what it had checked.
var ErrChanged = errors.New("the table changed while it was read")

// NumberChecked is Number that makes sure it numbers the table that was
// validated: if want is not "", the SHA-256 of what it reads must be want
// (Source.Hash of ValidateSource), or it writes nothing and returns
// ErrChanged. It returns the SHA-256 of what it wrote.
func NumberChecked(path, backup, want string) (string, error) {
	path, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", err
	}
	in, hr, _, err := openSource(path)
	if err != nil {
		return "", err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return "", err
	}
	out := sha256.New()
	err = atomicfile.Write(path, st.Mode().Perm(), func(bw *bufio.Writer) error {
		w := bufio.NewWriter(io.MultiWriter(bw, out))
		id := int64(0)
		var num []byte
		err := eachLine(hr, func(n int, line []byte) error {
			if isCase(line) {
				id++
				num = strconv.AppendInt(num[:0], id, 10)
				w.Write(num)
				w.WriteByte(' ')
				w.Write(bytes.TrimSpace(line))
			} else {
				w.Write(line)
			}
			return w.WriteByte('\n')
		})
		if err == nil {
			err = w.Flush()
		}
		if err == nil && want != "" && hr.source(Source{}).Hash != want {
			err = ErrChanged
		}
		return err
	}, backup)
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(out.Sum(nil)), nil
}

// errFound stops FindCases' reading once every case is found.
var errFound = errors.New("found")

// FindCases reads the cases of a numbered table whose IDs are in ids, with
// their line numbers, stopping at the last one wanted. An ID not in the
// table is missing from the result. A line that does not read before it is
// an error naming it.
func FindCases(path string, ids []int64) (map[int64]Case, error) {
	want := make(map[int64]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	out := make(map[int64]Case, len(ids))
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	err = eachLine(f, func(n int, line []byte) error {
		if !isCase(line) {
			return nil
		}
		id, cmd, _, err := splitID(line)
		if err != nil {
			return &LineError{File: path, Line: n, Msg: err.Error() + "; fix the line"}
		}
		if !want[id] {
			return nil
		}
		c := Case{ID: id, Line: int64(n)}
		c.Command, c.Needs, _ = ParseNeeds(cmd)
		out[id] = c
		if len(out) == len(want) {
			return errFound
		}
		return nil
	})
	if err != nil && err != errFound {
		return nil, err
	}
	return out, nil
}

// ReadCases calls fn for every case of a numbered table, in file order,
// its command without its NeedsMark part, which is in Needs. A line that
// does not read, its NeedsMark part included, is an error naming it.
func ReadCases(path string, fn func(c Case) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return eachLine(f, func(n int, line []byte) error {
		if !isCase(line) {
			return nil
		}
		id, cmd, _, err := splitID(line)
		if err != nil {
			return &LineError{File: path, Line: n, Msg: err.Error() + "; fix the line"}
		}
		cmd, needs, err := ParseNeeds(cmd)
		if err != nil {
			return needsError(path, n, err)
		}
		return fn(Case{ID: id, Command: cmd, Needs: needs})
	})
}

// FindCase returns case id of the table at path, with its line number: in
// a numbered table (read with how) the line that carries the ID, in an
// unnumbered one the id-th case line (the ID farm submit would give it). Its command is
// without its NeedsMark part, which is in Needs; a part that does not read
// is an error naming the line.
func FindCase(path string, id int64, how Numbering) (Case, error) {
	numbered, err := IsNumbered(path, how)
	if err != nil {
		return Case{}, err
	}
	f, err := os.Open(path)
	if err != nil {
		return Case{}, err
	}
	defer f.Close()
	var found Case
	var k, maxID int64
	errFound := errors.New("found")
	err = eachLine(f, func(n int, line []byte) error {
		if !isCase(line) {
			return nil
		}
		k++
		c := Case{ID: k, Command: string(bytes.TrimSpace(line)), Line: int64(n)}
		if numbered {
			cid, cmd, _, err := splitID(line)
			if err != nil {
				return &LineError{File: path, Line: n, Msg: err.Error() + "; fix the line"}
			}
			c.ID, c.Command = cid, cmd
		}
		maxID = max(maxID, c.ID)
		if c.ID == id {
			var err error
			if c.Command, c.Needs, err = ParseNeeds(c.Command); err != nil {
				return needsError(path, n, err)
			}
			found = c
			return errFound
		}
		return nil
	})
	if err == errFound {
		return found, nil
	}
	if err != nil {
		return Case{}, err
	}
	if k == 0 {
		return Case{}, fmt.Errorf("%s: %w; put one command per line", filepath.Base(path), ErrEmptyTable)
	}
	return Case{}, fmt.Errorf("%s has no case %d (its IDs go up to %d)", filepath.Base(path), id, maxID)
}

// ReadIDsLenient calls fn with the ID of every case of the numbered table
// at path, in file order, as ReadCases reads them, but goes on past a line
// that does not read or repeats an ID (a table edited since it was
// checked): such a line is skipped (so is one whose NeedsMark part does
// not read), a repeated ID counted at its first line only. It returns how many lines it skipped and the error of the
// first; err is an error reading the file.
func ReadIDsLenient(path string, fn func(id int64)) (skipped int, first *LineError, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, nil, err
	}
	defer f.Close()
	var ids idSet
	bad := func(e *LineError) {
		skipped++
		if first == nil {
			first = e
		}
	}
	err = eachLine(f, func(n int, line []byte) error {
		if !isCase(line) {
			return nil
		}
		id, cmd, _, err := splitID(line)
		switch {
		case err != nil:
			bad(&LineError{File: path, Line: n, Msg: err.Error()})
		case strings.Contains(cmd, NeedsMark) && needsBad(cmd) != nil:
			bad(&LineError{File: path, Line: n, Msg: needsBad(cmd).Error()})
		case ids.add(id):
			if first != nil { // the line of the first use is looked up once
				skipped++
				return nil
			}
			bad(&LineError{File: path, Line: n, Msg: fmt.Sprintf("duplicate case ID %d (first used on line %d)", id, firstLineOf(path, id))})
		default:
			fn(id)
		}
		return nil
	})
	return skipped, first, err
}

// IsNumbered reports whether the table at path is numbered when read
// with how: under METARule, whether its first case lines (up to
// RuleLines) start with 1, 2, 3, ... (it reads no further); under HasIDs
// or TableIDs,
// whether it has a case line. false for a table with no case line.
func IsNumbered(path string, how Numbering) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	k := 0
	numbered := false
	errStop := errors.New("stop")
	err = eachLine(f, func(n int, line []byte) error {
		if !isCase(line) {
			return nil
		}
		k++
		numbered = how.ids() || seqID(line, k)
		if !numbered || how.ids() || k == RuleLines {
			return errStop
		}
		return nil
	})
	if err == errStop {
		err = nil
	}
	return numbered, err
}
