package status

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// Kind is the kind of a status record: the first field of its line.
type Kind byte

// The kinds of status records.
const (
	KindHeader      Kind = '#' // # farm-status v1 job=JOBID run=RUN host=HOST [restart=N] [cpus=N] [gpus=N]
	KindStart       Kind = 'S' // S ID START HOST [loop=N] [cpus=LIST] [gpus=LIST] [attempt=N why=WHY]
	KindEnd         Kind = 'E' // E ID STATUS START SECONDS HOST
	KindInterrupted Kind = 'I' // I ID SIGNAL START SECONDS HOST
	KindTimedOut    Kind = 'T' // T ID SIGNAL START SECONDS HOST
	KindUnfit       Kind = 'U' // U ID TIME REASON
	KindQuit        Kind = 'Q' // Q TIME [why=KEY] MESSAGE
	KindClaimed     Kind = 'C' // C TIME IDS [from=NAME] [next=ID:N,...] [claim=TOKEN | lost=TOKEN]
	// KindMETA is a line of META's own status files, "ID STATUS": the case
	// ended with STATUS. It is no first field (a META line starts with a
	// digit, no farm record does).
	KindMETA Kind = 'M'
)

// Record is one line of a status file, as ParseRecord reads it. Which
// fields are set depends on Kind; the others are zero. The byte slices
// alias the line given to ParseRecord. (With an error, a Record means
// nothing.)
type Record struct {
	Kind    Kind
	ID      int64   // S, E, I, U: the case ID
	Status  int     // E: the case's STATUS; I, T: the signal that stopped it
	Start   float64 // S, E, I, T: when the case started (Unix seconds)
	Seconds float64 // E, I, T: how long it ran
	Host    []byte  // S, E, I, T, header: the meta-job's host (may be empty)
	Time    float64 // Q: when the meta-job exited; U: when it took the case (Unix seconds)
	Message []byte  // Q: why it exited; U: why the case was not started (may be empty)
	Job     []byte  // header: the job ID
	Run     int     // header: the run
	Restart int     // header: the incarnation (restart=N), 0 if absent
	// Capacity is, in a header, what the meta-job packs its cases into
	// (cpus=N gpus=N), 0 for what it does not say.
	Capacity Capacity
	// Loop, CPUs and GPUs are, in an S record, where the case runs (loop=N
	// cpus=LIST gpus=LIST): its loop, 0 if not said, and its lists as
	// written ("0-3,8", "0,1"), empty if not said; Placement expands them.
	Loop       int
	CPUs, GPUs []byte
	// Attempt is, in an S record, which attempt of its case in the run the
	// start is (attempt=N), 0 if not said (its first); Why is why it was
	// made (why=retry: the attempt before it failed), empty if not said;
	// in a Q record, why the meta-job exited (why=no-cases), if said.
	Attempt int
	Why     []byte
	// From is, in an S or C record, the status file (its name in
	// STATUSES/, "status.JOBID") of the dead meta-job whose case this job
	// rescued (from=); empty if not said.
	From []byte
	// Nodes is, in an S record of a job of several nodes, the case's
	// nodes as written (nodes=LIST); empty if not said.
	Nodes []byte
	// Out and Err are, in an S record of a case whose output is kept
	// apart (out=N err=N: Framed), where its bytes start in its loop's
	// files (Placement).
	Out, Err int64
	Framed   bool
	// IDs is, in a C record, the cases the meta-job claimed, as written:
	// IDs and ranges of IDs separated by commas ("3-17,20"); ParseIDs
	// expands it.
	IDs []byte
	// Next is, in a C record of a rescue, the attempt each case past its
	// first is to be (next=ID:N,...), as written; ParseNext reads it.
	Next []byte
	// RSS and CPU are, in an E, I or T record, what the case used
	// (rss=KIB cpu=SECONDS): its largest process's peak resident memory
	// in KiB, 0 if not said, and its CPU time in seconds (HasCPU: said).
	RSS    int64
	CPU    float64
	HasCPU bool
	// Claim is, in a C record written before its claim's commit, the
	// token of the commit (claim=; casetable.Opts.Note), which the claim
	// state decides; Lost, in a C record written after such a commit was
	// decided lost, its token (lost=): the cases are not the job's.
	Claim, Lost []byte
}

// maxAttempt is the largest attempt= an S record holds: more is damage.
const maxAttempt = 1 << 20

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
// tabs); a Q record's MESSAGE and a U record's REASON are the rest of the
// line after TIME and one blank. The header's keys, and the KEY=VALUE
// fields after an S record's HOST, may come in any order; keys other than
// job, run, host, restart, cpus and gpus (header) and loop, cpus and gpus
// (S) are ignored. A line it rejects gets an error of one line that says
// what is wrong (quoting at most 40 bytes of the line).
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
	if j := skip(line, 0); j < len(line) && line[j] >= '0' && line[j] <= '9' {
		return parseMETA(line, j)
	}
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
	var ok bool
	switch r.Kind {
	case KindStart:
		const form = "S ID START HOST"
		if i = skip(line, i); i == len(line) {
			return r, short(line, form)
		}
		if r.ID, i, ok = intAt(line, i); !ok {
			return r, bad(line, i, form, "ID")
		}
		if i = skip(line, i); i == len(line) {
			return r, short(line, form)
		}
		if r.Start, i, ok = floatAt(line, i, maxTime); !ok {
			return r, bad(line, i, form, "START")
		}
	case KindEnd, KindInterrupted, KindTimedOut:
		var err error
		if i, err = r.parseEnded(line, i); err != nil {
			return r, err
		}
	case KindQuit, KindUnfit:
		err := r.parseMessage(line, i)
		return r, err
	case KindClaimed:
		err := r.parseClaimed(line, i)
		return r, err
	case KindHeader:
		return parseHeader(line, i)
	default:
		return r, fmt.Errorf("unknown record %s", quote(kind))
	}
	// The host, possibly empty, ends the line; in an S record, the
	// placement's fields may follow it.
	r.Host, i = field(line, i)
	f, i := field(line, i)
	if len(f) == 0 {
		return r, nil
	}
	if r.Kind != KindStart {
		return r, r.parseUse(line, f, i)
	}
	return r, r.parsePlacement(line, f, i)
}

// parseMessage reads the fields of a Q or U record from line[i:]: a U
// record's ID, then TIME, then the rest of the line after one blank, its
// MESSAGE or REASON. (Rare records: not on Load's hot path.)
func (r *Record) parseMessage(line []byte, i int) error {
	form := "Q TIME MESSAGE"
	var ok bool
	if r.Kind == KindUnfit {
		form = "U ID TIME REASON"
		if i = skip(line, i); i == len(line) {
			return short(line, form)
		}
		if r.ID, i, ok = intAt(line, i); !ok {
			return bad(line, i, form, "ID")
		}
	}
	if i = skip(line, i); i == len(line) {
		return short(line, form)
	}
	if r.Time, i, ok = floatAt(line, i, maxTime); !ok {
		return bad(line, i, form, "TIME")
	}
	if i < len(line) {
		r.Message = line[i+1:]
	}
	if k, rest, ok := bytes.Cut(r.Message, []byte(" ")); r.Kind == KindQuit && ok && bytes.HasPrefix(k, []byte("why=")) {
		r.Why, r.Message = k[len("why="):], rest // the reason's key (metajob's stop)
	}
	return nil
}

// parseClaimed reads the fields of a C record from line[i:]: TIME, IDS,
// then KEY=VALUE fields (from=JOB, next=, claim=, lost=; others are ignored). (Rare records: not
// on Load's hot path.)
func (r *Record) parseClaimed(line []byte, i int) error {
	const form = "C TIME IDS"
	var ok bool
	if i = skip(line, i); i == len(line) {
		return short(line, form)
	}
	if r.Time, i, ok = floatAt(line, i, maxTime); !ok {
		return bad(line, i, form, "TIME")
	}
	r.IDs, i = field(line, i)
	if len(r.IDs) == 0 {
		return short(line, form)
	}
	if _, err := ParseIDs(r.IDs); err != nil {
		return fmt.Errorf("C record: %v", err)
	}
	for f, j := field(line, i); len(f) > 0; f, j = field(line, j) {
		k, v, _ := bytes.Cut(f, []byte("="))
		switch string(k) {
		case "from":
			r.From = v
		case "next":
			if _, err := ParseNext(v); err != nil {
				return fmt.Errorf("C record: %v", err)
			}
			r.Next = v
		case "claim":
			r.Claim = v
		case "lost":
			r.Lost = v
		}
	}
	return nil
}

// ParseNext reads a C record's next= list: "ID:N" pairs separated by
// commas, N from 2.
func ParseNext(b []byte) (map[int64]int, error) {
	out := map[int64]int{}
	for _, f := range bytes.Split(b, []byte(",")) {
		id, n, ok := bytes.Cut(f, []byte(":"))
		a, ok1 := parseInt(id)
		k, ok2 := parseInt(n)
		if !ok || !ok1 || !ok2 || a < 0 || k < 2 || k > maxAttempt || len(out) >= MaxClaimedIDs {
			return nil, fmt.Errorf("bad next %s", quote(b))
		}
		out[a] = int(k)
	}
	return out, nil
}

// MaxClaimedIDs is the most cases a C record's IDS may stand for: a claim
// takes at most a few thousand (metajob.MaxBatch); more is damage.
const MaxClaimedIDs = 1 << 16

// ParseIDs expands a list of IDs and ranges of IDs ("3-17,20"), as a C
// record holds them, in the order written.
func ParseIDs(b []byte) ([]int64, error) {
	var out []int64
	for _, f := range bytes.Split(b, []byte(",")) {
		lo, hi, isRange := bytes.Cut(f, []byte("-"))
		a, ok := parseInt(lo)
		z := a
		if ok && isRange {
			z, ok = parseInt(hi)
		}
		if !ok || a < 0 || z < a || z-a >= MaxClaimedIDs || len(out)+int(z-a+1) > MaxClaimedIDs {
			return nil, fmt.Errorf("bad IDS %s", quote(b))
		}
		for id := a; id <= z; id++ {
			out = append(out, id)
		}
	}
	return out, nil
}

// AppendIDs appends ids as a C record writes them: runs of consecutive IDs
// as ranges ("3-17,20").
func AppendIDs(b []byte, ids []int64) []byte {
	for i := 0; i < len(ids); {
		j := i
		for j+1 < len(ids) && ids[j+1] == ids[j]+1 {
			j++
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, ids[i], 10)
		if j > i {
			b = append(b, '-')
			b = strconv.AppendInt(b, ids[j], 10)
		}
		i = j + 1
	}
	return b
}

// parsePlacement reads the KEY=VALUE fields of an S record after HOST:
// f, the first, and those of line from i.
func (r *Record) parsePlacement(line, f []byte, i int) error {
	for ; len(f) > 0; f, i = field(line, i) {
		eq := bytes.IndexByte(f, '=')
		if eq < 0 {
			return fmt.Errorf("S record: unexpected %s after HOST", quote(f))
		}
		k, v := f[:eq], f[eq+1:]
		switch string(k) {
		case "loop":
			n, ok := parseInt(v)
			if !ok || n < 0 || int64(int(n)) != n {
				return fmt.Errorf("S record: bad loop %s", quote(v))
			}
			r.Loop = int(n)
		case "cpus":
			if !checkCPUs(v) {
				return fmt.Errorf("S record: bad cpus %s", quote(v))
			}
			r.CPUs = v
		case "gpus":
			if !checkGPUs(v) {
				return fmt.Errorf("S record: bad gpus %s", quote(v))
			}
			r.GPUs = v
		case "attempt":
			n, ok := parseInt(v)
			if !ok || n < 1 || n > maxAttempt {
				return fmt.Errorf("S record: bad attempt %s", quote(v))
			}
			r.Attempt = int(n)
		case "why":
			r.Why = v
		case "from":
			r.From = v
		case "nodes":
			r.Nodes = v
		case "out", "err":
			n, ok := parseInt(v)
			if !ok || n < 0 {
				return fmt.Errorf("S record: bad %s %s", k, quote(v))
			}
			if k[0] == 'o' {
				r.Out = n
			} else {
				r.Err = n
			}
			r.Framed = true
		}
	}
	return nil
}

// parseUse reads the KEY=VALUE fields of an E, I or T record after HOST:
// f, the first, and those of line from i. Keys other than rss and cpu are
// ignored.
func (r *Record) parseUse(line, f []byte, i int) error {
	for ; len(f) > 0; f, i = field(line, i) {
		eq := bytes.IndexByte(f, '=')
		if eq < 0 {
			return fmt.Errorf("%c record: unexpected %s after HOST", r.Kind, quote(f))
		}
		k, v := f[:eq], f[eq+1:]
		switch string(k) {
		case "rss":
			n, ok := parseInt(v)
			if !ok || n < 0 {
				return fmt.Errorf("%c record: bad rss %s", r.Kind, quote(v))
			}
			r.RSS = n
		case "cpu":
			var x float64
			j, ok := 0, len(v) > 0
			if ok {
				x, j, ok = floatAt(v, 0, maxSeconds)
			}
			if !ok || j != len(v) || x < 0 {
				return fmt.Errorf("%c record: bad cpu %s", r.Kind, quote(v))
			}
			r.CPU, r.HasCPU = x, true
		}
	}
	return nil
}

// parseEnded reads the fields of an E, I or T record from line[i:], up to
// HOST, and returns the index past them. As in ParseRecord, the fields are
// read one by one, without a helper per field: this is Load's hot path, and
// such a helper made it some 15% slower.
func (r *Record) parseEnded(line []byte, i int) (int, error) {
	var ok bool
	form, status := "E ID STATUS START SECONDS HOST", "STATUS"
	switch r.Kind {
	case KindInterrupted:
		form, status = "I ID SIGNAL START SECONDS HOST", "SIGNAL"
	case KindTimedOut:
		form, status = "T ID SIGNAL START SECONDS HOST", "SIGNAL"
	}
	if i = skip(line, i); i == len(line) {
		return i, short(line, form)
	}
	if r.ID, i, ok = intAt(line, i); !ok {
		return i, bad(line, i, form, "ID")
	}
	if i = skip(line, i); i == len(line) {
		return i, short(line, form)
	}
	var st int64
	if st, i, ok = intAt(line, i); !ok || int64(int(st)) != st {
		return i, bad(line, i, form, status)
	}
	r.Status = int(st)
	if i = skip(line, i); i == len(line) {
		return i, short(line, form)
	}
	if r.Start, i, ok = floatAt(line, i, maxTime); !ok {
		return i, bad(line, i, form, "START")
	}
	if i = skip(line, i); i == len(line) {
		return i, short(line, form)
	}
	if r.Seconds, i, ok = floatAt(line, i, maxSeconds); !ok {
		return i, bad(line, i, form, "SECONDS")
	}
	return i, nil
}

// parseMETA parses a line of META's status files, "ID STATUS" (META's
// single_case.sh writes it with echo $ID $STATUS), from i, its first digit.
func parseMETA(line []byte, i int) (Record, error) {
	r := Record{Kind: KindMETA}
	bad := fmt.Errorf("bad line %s: a record is a letter and its fields, or META's \"ID STATUS\"", quote(line))
	var ok bool
	if r.ID, i, ok = intAt(line, i); !ok || r.ID < 1 || !endsField(line, i) {
		return r, bad
	}
	if i = skip(line, i); i == len(line) {
		return r, bad
	}
	var st int64
	if st, i, ok = intAt(line, i); !ok || int64(int32(st)) != st || !endsField(line, i) {
		return r, bad
	}
	r.Status = int(st)
	if f, _ := field(line, i); len(f) > 0 {
		return r, bad
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
		case "cpus", "gpus":
			n, ok := parseInt(v)
			if !ok || n < 0 || int64(int(n)) != n {
				return r, fmt.Errorf("header: bad %s %s", k, quote(v))
			}
			if k[0] == 'c' {
				r.Capacity.CPUs = int(n)
			} else {
				r.Capacity.GPUs = int(n)
			}
		}
	}
	for j, k := range [...]string{"job", "run", "host"} {
		if !seen[j] {
			return r, fmt.Errorf("header without %s=", k)
		}
	}
	return r, nil
}

// skip returns the index of the first non-blank of line at or after i.
func skip(line []byte, i int) int {
	for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
		i++
	}
	return i
}

// field returns the field of line at or after i (blanks skipped) and the
// index just past it; the field is empty at the end of the line.
func field(line []byte, i int) ([]byte, int) {
	i = skip(line, i)
	j := i
	for j < len(line) && line[j] != ' ' && line[j] != '\t' {
		j++
	}
	return line[i:j], j
}

// endsField reports whether a field of line ends at i.
func endsField(line []byte, i int) bool {
	return i == len(line) || line[i] == ' ' || line[i] == '\t'
}

// short is the error of a record with fields missing.
func short(line []byte, form string) error {
	return fmt.Errorf("short %c record %s: want %s", form[0], quote(line), form)
}

// bad is the error of field name, which starts at or before i, of a record
// of the given form.
func bad(line []byte, i int, form, name string) error {
	for i > 0 && line[i-1] != ' ' && line[i-1] != '\t' {
		i--
	}
	f, _ := field(line, i)
	return fmt.Errorf("%c record: bad %s %s", form[0], name, quote(f))
}

// quote quotes b for an error message: at most 40 bytes, on one line.
func quote(b []byte) string {
	if len(b) > 40 {
		return strconv.Quote(string(b[:40])) + "..."
	}
	return strconv.Quote(string(b))
}

// intAt parses the field of line at i (a non-blank) as a decimal integer:
// an optional '-' and digits. It returns the index past the digits.
func intAt(line []byte, i int) (int64, int, bool) {
	neg := line[i] == '-'
	if neg {
		i++
	}
	from := i
	var n uint64
	for ; i < len(line) && line[i]-'0' <= 9; i++ {
		if n > math.MaxInt64/10+1 {
			return 0, i, false
		}
		n = n*10 + uint64(line[i]-'0')
	}
	if i == from || !endsField(line, i) {
		return 0, i, false
	}
	switch {
	case neg && n <= 1<<63:
		return -int64(n), i, true // -(1<<63) wraps to itself: math.MinInt64
	case !neg && n <= math.MaxInt64:
		return int64(n), i, true
	}
	return 0, i, false
}

// parseInt parses b as intAt does.
func parseInt(b []byte) (int64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	n, i, ok := intAt(b, 0)
	return n, ok && i == len(b)
}

// pow10 holds the powers of ten that a float64 represents exactly.
var pow10 = [...]float64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15}

// floatAt parses the field of line at i (a non-blank) as a finite number
// of magnitude below limit, as strconv.ParseFloat would, and returns the
// index past it. The decimals Writer writes ("1700000000.123", "0.517": at
// most 15 digits) take a fast path that does not allocate and rounds as
// ParseFloat does: the digits make an integer below 2^53 and the power of
// ten is exact, so one division rounds once, correctly.
func floatAt(line []byte, i int, limit float64) (float64, int, bool) {
	start := i
	neg := line[i] == '-'
	if neg {
		i++
	}
	var m uint64
	from := i
	for i < len(line) && line[i]-'0' <= 9 {
		m = m*10 + uint64(line[i]-'0')
		i++
	}
	digits, frac := i-from, 0
	if i < len(line) && line[i] == '.' {
		i++
		from = i
		for i < len(line) && line[i]-'0' <= 9 {
			m = m*10 + uint64(line[i]-'0')
			i++
		}
		frac = i - from
		digits += frac
	}
	if !endsField(line, i) || digits > 15 {
		// Another form (m may have overflowed: unused).
		f, end := field(line, start)
		v, err := strconv.ParseFloat(string(f), 64)
		return v, end, err == nil && v < limit && v > -limit // false for NaN
	}
	if digits == 0 {
		return 0, i, false
	}
	f := float64(m) / pow10[frac]
	if neg {
		f = -f
	}
	return f, i, f < limit && f > -limit
}
