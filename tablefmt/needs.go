package tablefmt

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/farm-hpc/farm/slurm"
)

// NeedsMark starts what a case declares it needs, at the end of its table
// line: "COMMAND #FARM cpus=4 gpus=1 mem=8G min_time=30m nodes=2". bash takes it
// for a comment, so a single_case.sh written for META that evals the line
// runs it as before; numbering leaves it where it is.
const NeedsMark = "#FARM"

// Needs is what a case declares it needs with NeedsMark. A field not
// declared has its zero value (GPUs: -1), and the meta-job applies its
// default (one CPU in WHOLE_NODE mode, else the whole job).
type Needs struct {
	Declared bool          // the line has a NeedsMark part
	CPUs     int           // cpus=N, N >= 1, per node; 0: not declared
	GPUs     int           // gpus=N, N >= 0, per node; -1: not declared
	MemMB    int64         // mem=SIZE (K, M, G, T; M if no unit), in MiB, per node; 0: not declared
	MinTime  time.Duration // min_time=TIME (Slurm's formats, or 90s, 30m, 2h); 0: not declared
	Nodes    int           // nodes=N, N >= 1: N nodes of the job, each with CPUs, GPUs and MemMB; 0: not declared
	// Time is time=TIME (as min_time), the case's time limit: farm ends
	// it past that (metajob); 0: not declared. It is no resource: a part
	// that gives only time= leaves Declared false.
	Time time.Duration
}

// MaxMinTime is the longest min_time a case may declare.
const MaxMinTime = 365 * 24 * time.Hour

// needsKeys lists the keys a NeedsMark part may give, as errors list them.
const needsKeys = "(known: cpus, gpus, mem, min_time, nodes, time)"

// ParseNeeds splits a case's command (the line without its ID) into the
// command to run and what it declares it needs: the last NeedsMark that
// starts a blank-separated field and the key=value fields after it. A
// command without one has Needs{GPUs: -1}. An unknown key or a bad value
// is an error of one line that says what is wrong and what is allowed.
//
// The mark is the field "#FARM" itself, after the start of the command or
// a blank (space or tab) and before a blank or the end: "echo a#FARM" and
// "#FARMS" are not marks, and such a command declares nothing. The
// command returned is command up to the mark, without the white space
// that ends it (a prefix of command; a command read from a table line
// ends with none either); on an error it is command whole, with
// Needs{GPUs: -1}. The keys, each at most once:
//
//	cpus=N      N >= 1
//	gpus=N      N >= 0
//	mem=SIZE    > 0: a number of MiB, or with a unit K, M, G or T (of 1024,
//	            any case, optionally followed by B): 512, 512M, 8G, 8gb
//	min_time=T  > 0 and at most 365 days: Slurm's MM, MM:SS, HH:MM:SS,
//	            D-HH, D-HH:MM, D-HH:MM:SS, or 90s, 30m, 2h (Go's units)
//	nodes=N     N >= 1 (cpus, gpus and mem are then per node)
//	time=T      as min_time: the case's time limit
func ParseNeeds(command string) (string, Needs, error) {
	none := Needs{GPUs: -1}
	at := lastMark(command)
	if at < 0 {
		return command, none, nil
	}
	cmd := strings.TrimRightFunc(command[:at], unicode.IsSpace)
	if cmd == "" {
		return command, none, errors.New("a case needs a command before " + NeedsMark)
	}
	fields := strings.FieldsFunc(command[at+len(NeedsMark):], func(r rune) bool { return r == ' ' || r == '\t' })
	if len(fields) == 0 {
		return command, none, fmt.Errorf("%s: no key=value after it %s", NeedsMark, needsKeys)
	}
	n := Needs{GPUs: -1}
	keys := []string{"cpus", "gpus", "mem", "min_time", "nodes", "time"}
	seen := make([]bool, len(keys))
	for _, f := range fields {
		key, val, ok := strings.Cut(f, "=")
		if !ok {
			return command, none, fmt.Errorf("%s: %s is not key=value %s", NeedsMark, quote(f), needsKeys)
		}
		i := slices.Index(keys, key)
		if i < 0 {
			return command, none, fmt.Errorf("%s: unknown key %s %s", NeedsMark, quote(key), needsKeys)
		}
		if seen[i] {
			return command, none, fmt.Errorf("%s: %s is given twice; give each key once %s", NeedsMark, key, needsKeys)
		}
		seen[i] = true
		if val == "" {
			return command, none, fmt.Errorf("%s: %s= has no value %s", NeedsMark, key, needsKeys)
		}
		var good bool
		var want string
		switch key {
		case "cpus":
			n.CPUs, good = count(val, 1)
			want = "a whole number of CPUs, 1 or more"
		case "gpus":
			n.GPUs, good = count(val, 0)
			want = "a whole number of GPUs, 0 or more"
		case "mem":
			n.MemMB, good = parseMemMB(val)
			want = "a size above 0: a number of MiB, or with a unit K, M, G or T (of 1024), e.g. 512M or 8G"
		case "min_time":
			n.MinTime, good = parseMinTime(val)
			want = "a time above 0 and at most 365 days: Slurm's MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS, or 90s, 30m, 2h"
		case "nodes":
			n.Nodes, good = count(val, 1)
			want = "a whole number of nodes, 1 or more"
		case "time":
			n.Time, good = parseMinTime(val)
			want = "a time limit above 0 and at most 365 days: Slurm's MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS, or 90s, 30m, 2h"
		}
		n.Declared = n.Declared || key != "time"
		if !good {
			return command, none, fmt.Errorf("%s: bad %s=%s: want %s", NeedsMark, key, quote(val), want)
		}
	}
	return cmd, n, nil
}

// lastMark returns the index in command of its last NeedsMark that is a
// field of its own, or -1.
func lastMark(command string) int {
	blank := func(c byte) bool { return c == ' ' || c == '\t' }
	for end := len(command); ; {
		i := strings.LastIndex(command[:end], NeedsMark)
		if i < 0 {
			return -1
		}
		after := i + len(NeedsMark)
		if (i == 0 || blank(command[i-1])) && (after == len(command) || blank(command[after])) {
			return i
		}
		end = i
	}
}

// quote is s quoted as %q quotes it, cut to about 40 bytes and
// "..." if longer: errors quote what they found, and stay one short line
// however many bytes of it need escapes.
func quote(s string) string {
	n, width := 0, 0
	for n < len(s) {
		_, w := utf8.DecodeRuneInString(s[n:])
		q := len(strconv.Quote(s[n:n+w])) - 2
		if width+q > 40 {
			return strconv.Quote(s[:n] + "...")
		}
		n, width = n+w, width+q
	}
	return strconv.Quote(s)
}

// count reads a whole number of at least least: digits only (no sign),
// within 32 bits.
func count(v string, least int) (int, bool) {
	if !allDigits(v) {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < int64(least) {
		return 0, false
	}
	return int(n), true
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// parseMemMB reads a size above 0 in MiB, rounded up: digits, then a unit
// K, M, G or T (binary, any case) optionally followed by B, or none for
// MiB.
func parseMemMB(v string) (int64, bool) {
	s := strings.ToUpper(v)
	kib := int64(1024) // KiB per unit: MiB if none
	if u := strings.TrimSuffix(s, "B"); u != "" && strings.IndexByte("KMGT", u[len(u)-1]) >= 0 {
		kib = map[byte]int64{'K': 1, 'M': 1 << 10, 'G': 1 << 20, 'T': 1 << 30}[u[len(u)-1]]
		s = u[:len(u)-1]
	}
	if !allDigits(s) {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 || n > math.MaxInt64/kib {
		return 0, false
	}
	kb := n * kib
	return kb/1024 + min(kb%1024, 1), true
}

// parseMinTime reads a time above 0 and at most MaxMinTime: in Slurm's
// formats (slurm.ParseDuration, without its quotes and UNLIMITED), or ending
// with a unit as Go writes durations (90s, 30m, 2h, 1h30m).
func parseMinTime(v string) (time.Duration, bool) {
	var d time.Duration
	var err error
	switch last := v[len(v)-1]; {
	case strings.ContainsAny(v, `"'+`):
		return 0, false
	case last >= '0' && last <= '9':
		d, err = slurm.ParseDuration(v)
	case v[0] == '-':
		return 0, false
	default:
		d, err = time.ParseDuration(v)
	}
	return d, err == nil && d > 0 && d <= MaxMinTime
}

// maxNeedsParts bounds the distinct NeedsMark parts EachNeeds parses
// once each.
const maxNeedsParts = 1024

// EachNeeds calls fn with the ID and the needs of each case line of the
// numbered table at path that has a NeedsMark part, in file order: what
// sizing a farm's cases reads (farm query, farm report). A line without
// the mark costs no parse; equal parts are parsed once (the first
// maxNeedsParts distinct ones); a line whose ID or part does not read is
// skipped (farm submit and farm add refuse it). An error of fn ends the
// reading and is returned, as is one reading the file.
func EachNeeds(path string, fn func(id int64, n Needs) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	parts := map[string]Needs{}
	return eachLine(f, func(_ int, line []byte) error {
		line = bytes.TrimSpace(line)
		at := lastMarkBytes(line)
		if at < 0 || line[0] == '#' {
			return nil // no mark, or a comment line
		}
		if n, ok := parts[string(line[at:])]; ok {
			if id, ok := leadingID(line[:at]); ok {
				return fn(id, n)
			}
			return nil
		}
		id, cmd, _, err := splitID(line)
		if err != nil {
			return nil
		}
		_, n, err := ParseNeeds(cmd)
		if err != nil {
			return nil
		}
		if len(parts) < maxNeedsParts {
			parts[string(line[at:])] = n
		}
		return fn(id, n)
	})
}

// lastMarkBytes is lastMark of a line as bytes.
func lastMarkBytes(line []byte) int {
	blank := func(c byte) bool { return c == ' ' || c == '\t' }
	mark := []byte(NeedsMark)
	for end := len(line); ; {
		i := bytes.LastIndex(line[:end], mark)
		if i < 0 {
			return -1
		}
		after := i + len(mark)
		if (i == 0 || blank(line[i-1])) && (after == len(line) || blank(line[after])) {
			return i
		}
		end = i
	}
}

// leadingID reads the ID of a case line's start, up to its NeedsMark
// part (its ID, blanks, a command, blanks): ok false unless it is digits
// of a positive ID followed by a command.
func leadingID(start []byte) (int64, bool) {
	end := bytes.IndexAny(start, " \t")
	if end <= 0 || len(bytes.TrimSpace(start[end:])) == 0 {
		return 0, false
	}
	var id int64
	for _, c := range start[:end] {
		if c < '0' || c > '9' || id > (math.MaxInt64-9)/10 {
			return 0, false
		}
		id = 10*id + int64(c-'0')
	}
	return id, id > 0
}
