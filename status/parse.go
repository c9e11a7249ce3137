package status

import (
	"errors"
	"fmt"
	"math"
	"strconv"
)

// Kind is the kind of a status record: the first field of its line.
type Kind byte

// The kinds of status records.
const (
	KindHeader      Kind = '#' // # farm-status v1 job=JOBID run=RUN host=HOST [restart=N]
	KindStart       Kind = 'S' // S ID START HOST
	KindEnd         Kind = 'E' // E ID STATUS START SECONDS HOST
	KindInterrupted Kind = 'I' // I ID SIGNAL START SECONDS HOST
	KindQuit        Kind = 'Q' // Q TIME MESSAGE
)

// Record is one line of a status file, as ParseRecord reads it. Which
// fields are set depends on Kind; the others are zero. The byte slices
// alias the line given to ParseRecord.
type Record struct {
	Kind    Kind
	ID      int64   // S, E, I: the case ID
	Status  int     // E: the case's STATUS; I: the signal that stopped it
	Start   float64 // S, E, I: when the case started (Unix seconds)
	Seconds float64 // E, I: how long it ran
	Host    []byte  // S, E, I, header: the meta-job's host (may be empty)
	Time    float64 // Q: when the meta-job exited (Unix seconds)
	Message []byte  // Q: why it exited (may be empty)
	Job     []byte  // header: the job ID
	Run     int     // header: the run
	Restart int     // header: the incarnation (restart=N), 0 if absent
}

// ParseRecord accepts times and durations below these magnitudes: the
// times Writer records (a time.Time's UnixMilli) are within ±9.3e15 s, its
// durations (a time.Duration) within ±9.3e9 s. Anything beyond is damage,
// and would overflow what farm computes from it.
const (
	maxTime    = 1e16
	maxSeconds = 1e10
)

var errEmptyLine = errors.New("empty line")

// ParseRecord parses one line of a status file, with or without its
// line ending ("\n" or "\r\n"). Fields are separated by blanks (spaces or
// tabs); a Q record's MESSAGE is the rest of the line after TIME and one
// blank. The header's keys may come in any order; keys other than job,
// run, host and restart are ignored. A line it rejects gets an error of one
// line that says what is wrong (quoting at most 40 bytes of the line).
//
// ParseRecord does not allocate, except for the error of a line it rejects
// and for numbers in a form Writer does not write (such as "1e3"), which it
// reads with strconv.ParseFloat.
func ParseRecord(line []byte) (Record, error) {
	if n := len(line); n > 0 && line[n-1] == '\n' {
		line = line[:n-1]
	}
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	var r Record
	kind, i := field(line, 0)
	if len(kind) == 0 {
		if i == 0 {
			return r, errEmptyLine
		}
		return r, errors.New("blank line")
	}
	if len(kind) != 1 {
		return r, fmt.Errorf("unknown record %s", quote(kind))
	}
	r.Kind = Kind(kind[0])
	var f []byte
	var ok bool
	switch r.Kind {
	case KindStart:
		if f, i = field(line, i); len(f) == 0 {
			return r, short(line, "S ID START HOST")
		}
		if r.ID, ok = parseInt(f); !ok {
			return r, bad("ID", f, "S")
		}
		if f, i = field(line, i); len(f) == 0 {
			return r, short(line, "S ID START HOST")
		}
		if r.Start, ok = parseFloat(f, maxTime); !ok {
			return r, bad("START", f, "S")
		}
	case KindEnd, KindInterrupted:
		form := "E ID STATUS START SECONDS HOST"
		status := "STATUS"
		if r.Kind == KindInterrupted {
			form = "I ID SIGNAL START SECONDS HOST"
			status = "SIGNAL"
		}
		if f, i = field(line, i); len(f) == 0 {
			return r, short(line, form)
		}
		if r.ID, ok = parseInt(f); !ok {
			return r, bad("ID", f, form[:1])
		}
		if f, i = field(line, i); len(f) == 0 {
			return r, short(line, form)
		}
		st, ok := parseInt(f)
		if !ok || int64(int(st)) != st {
			return r, bad(status, f, form[:1])
		}
		r.Status = int(st)
		if f, i = field(line, i); len(f) == 0 {
			return r, short(line, form)
		}
		if r.Start, ok = parseFloat(f, maxTime); !ok {
			return r, bad("START", f, form[:1])
		}
		if f, i = field(line, i); len(f) == 0 {
			return r, short(line, form)
		}
		if r.Seconds, ok = parseFloat(f, maxSeconds); !ok {
			return r, bad("SECONDS", f, form[:1])
		}
	case KindQuit:
		if f, i = field(line, i); len(f) == 0 {
			return r, short(line, "Q TIME MESSAGE")
		}
		if r.Time, ok = parseFloat(f, maxTime); !ok {
			return r, bad("TIME", f, "Q")
		}
		if i < len(line) {
			r.Message = line[i+1:]
		}
		return r, nil
	case KindHeader:
		return parseHeader(line, i)
	default:
		return r, fmt.Errorf("unknown record %s", quote(kind))
	}
	// The host, possibly empty, ends the line.
	r.Host, i = field(line, i)
	if f, _ = field(line, i); len(f) > 0 {
		return r, fmt.Errorf("%c record: unexpected %s after HOST", r.Kind, quote(f))
	}
	return r, nil
}

// parseHeader parses the rest of a header line, from i (just past "#").
func parseHeader(line []byte, i int) (Record, error) {
	r := Record{Kind: KindHeader}
	magic, i := field(line, i)
	version, i := field(line, i)
	if string(magic) != "farm-status" {
		return r, errors.New("a line starting with # that is not a \"# farm-status v1\" header")
	}
	if string(version) != "v1" {
		return r, fmt.Errorf("status file version %s: this farm reads v1", quote(version))
	}
	var seen [3]bool // job, run, host
	for {
		var f []byte
		if f, i = field(line, i); len(f) == 0 {
			break
		}
		eq := -1
		for j, c := range f {
			if c == '=' {
				eq = j
				break
			}
		}
		if eq < 0 {
			return r, fmt.Errorf("header: %s is not KEY=VALUE", quote(f))
		}
		k, v := f[:eq], f[eq+1:]
		switch string(k) {
		case "job":
			r.Job, seen[0] = v, true
		case "run":
			n, ok := parseInt(v)
			if !ok || int64(int(n)) != n {
				return r, fmt.Errorf("header: bad run %s", quote(v))
			}
			r.Run, seen[1] = int(n), true
		case "host":
			r.Host, seen[2] = v, true
		case "restart":
			n, ok := parseInt(v)
			if !ok || n < 0 || int64(int(n)) != n {
				return r, fmt.Errorf("header: bad restart %s", quote(v))
			}
			r.Restart = int(n)
		}
	}
	for j, k := range [...]string{"job", "run", "host"} {
		if !seen[j] {
			return r, fmt.Errorf("header without %s=", k)
		}
	}
	return r, nil
}

// field returns the field of line at or after i (blanks skipped) and the
// index just past it; the field is empty at the end of the line.
func field(line []byte, i int) ([]byte, int) {
	for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
		i++
	}
	j := i
	for j < len(line) && line[j] != ' ' && line[j] != '\t' {
		j++
	}
	return line[i:j], j
}

// short is the error of a record with fields missing.
func short(line []byte, form string) error {
	return fmt.Errorf("short %c record %s: want %s", form[0], quote(line), form)
}

// bad is the error of a field that does not parse.
func bad(name string, f []byte, kind string) error {
	return fmt.Errorf("%s record: bad %s %s", kind, name, quote(f))
}

// quote quotes b for an error message: at most 40 bytes, on one line.
func quote(b []byte) string {
	if len(b) > 40 {
		return strconv.Quote(string(b[:40])) + "..."
	}
	return strconv.Quote(string(b))
}

// parseInt parses a decimal integer: an optional '-' and digits.
func parseInt(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' || n > math.MaxInt64/10+1 {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	switch {
	case neg && n <= 1<<63:
		return -int64(n), true // -(1<<63) wraps to itself: math.MinInt64
	case !neg && n <= math.MaxInt64:
		return int64(n), true
	}
	return 0, false
}

// pow10 holds the powers of ten that a float64 represents exactly.
var pow10 = [...]float64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15}

// parseFloat parses a finite number of magnitude below limit, as
// strconv.ParseFloat would. The decimals Writer writes ("1700000000.123",
// "0.517": at most 15 digits) take a fast path that does not allocate and
// rounds as ParseFloat does: the digits make an integer below 2^53 and the
// power of ten is exact, so one division rounds once, correctly.
func parseFloat(b []byte, limit float64) (float64, bool) {
	i, neg := 0, len(b) > 0 && b[0] == '-'
	if neg {
		i = 1
	}
	var m uint64
	from := i
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		m = m*10 + uint64(b[i]-'0')
		i++
	}
	digits, frac := i-from, 0
	if i < len(b) && b[i] == '.' {
		i++
		from = i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			m = m*10 + uint64(b[i]-'0')
			i++
		}
		frac = i - from
		digits += frac
	}
	if i < len(b) || digits > 15 {
		return parseFloatSlow(b, limit) // m may have overflowed: unused
	}
	if digits == 0 {
		return 0, false
	}
	f := float64(m) / pow10[frac]
	if neg {
		f = -f
	}
	return f, f < limit && f > -limit
}

func parseFloatSlow(b []byte, limit float64) (float64, bool) {
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil || math.IsNaN(f) || f >= limit || f <= -limit {
		return 0, false
	}
	return f, true
}
