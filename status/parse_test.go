package status

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/farm-hpc/farm/layout"
	"github.com/google/go-cmp/cmp"
)

func TestParseRecord(t *testing.T) {
	b := func(s string) []byte { return []byte(s) }
	for _, tc := range []struct {
		line string
		want Record
	}{
		{"# farm-status v1 job=17 run=3 host=node1\n", Record{Kind: KindHeader, Job: b("17"), Run: 3, Host: b("node1")}},
		{"# farm-status v1 job=17 run=3 host=node1 restart=2\n", Record{Kind: KindHeader, Job: b("17"), Run: 3, Host: b("node1"), Restart: 2}},
		{"#\tfarm-status v1  host=h\trun=-1 job=a=b future=x\r\n", Record{Kind: KindHeader, Job: b("a=b"), Run: -1, Host: b("h")}},
		{"# farm-status v1 job= run=0 host=", Record{Kind: KindHeader, Job: b(""), Host: b("")}},
		{"S 4 1700000000.123 node1\n", Record{Kind: KindStart, ID: 4, Start: 1700000000.123, Host: b("node1")}},
		{"S 4 100\n", Record{Kind: KindStart, ID: 4, Start: 100, Host: b("")}},
		{"S 4 100.000 \n", Record{Kind: KindStart, ID: 4, Start: 100, Host: b("")}},
		{"  S\t-9223372036854775808\t1e3 h\r\n", Record{Kind: KindStart, ID: math.MinInt64, Start: 1000, Host: b("h")}},
		{"S 007 .5 h", Record{Kind: KindStart, ID: 7, Start: 0.5, Host: b("h")}},
		{"E 4 0 1700000000.123 0.517 node1\n", Record{Kind: KindEnd, ID: 4, Start: 1700000000.123, Seconds: 0.517, Host: b("node1")}},
		{"E 9223372036854775807 -2 -0.5 -1.000 \xff\n", Record{Kind: KindEnd, ID: math.MaxInt64, Status: -2, Start: -0.5, Seconds: -1, Host: b("\xff")}},
		{"I 5 15 1700000000.000 3.250 n\n", Record{Kind: KindInterrupted, ID: 5, Status: 15, Start: 1700000000, Seconds: 3.25, Host: b("n")}},
		{"Q 1700000000.500 No cases left; exiting.\n", Record{Kind: KindQuit, Time: 1700000000.5, Message: b("No cases left; exiting.")}},
		{"Q 0\n", Record{Kind: KindQuit}},
		{"Q 0  two  blanks \r\n", Record{Kind: KindQuit, Message: b(" two  blanks ")}},
	} {
		got, err := ParseRecord([]byte(tc.line))
		if err != nil {
			t.Errorf("ParseRecord(%q): %v", tc.line, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("ParseRecord(%q) (-want +got):\n%s", tc.line, diff)
		}
	}
	for _, tc := range []struct{ line, err string }{
		{"", "empty line"},
		{"\n", "empty line"},
		{"\r\n", "empty line"},
		{" \t\n", "blank line"},
		{"X 1 2 h\n", `unknown record "X"`},
		{"Start 1 2 h\n", `unknown record "Start"`},
		{"E 5 zero\n", `E record: bad STATUS "zero"`},
		{"E 5 0 1\n", `short E record "E 5 0 1": want E ID STATUS START SECONDS HOST`},
		{"S\n", "short S record"},
		{"S 1\n", "short S record"},
		{"I 1 2 3\n", "short I record"},
		{"Q\n", "short Q record"},
		{"S x 1 h\n", `S record: bad ID "x"`},
		{"S +1 1 h\n", `S record: bad ID "+1"`},
		{"S - 1 h\n", `S record: bad ID "-"`},
		{"S 9223372036854775808 1 h\n", "bad ID"},
		{"S -9223372036854775809 1 h\n", "bad ID"},
		{"S 1 NaN h\n", `S record: bad START "NaN"`},
		{"S 1 +Inf h\n", "bad START"},
		{"S 1 1e400 h\n", "bad START"},
		{"S 1 1e16 h\n", "bad START"},
		{"S 1 1.2.3 h\n", "bad START"},
		{"S 1 . h\n", "bad START"},
		{"E 1 x 1 1 h\n", `E record: bad STATUS "x"`},
		{"I 1 x 1 1 h\n", `I record: bad SIGNAL "x"`},
		{"E 1 0 1 1e11 h\n", `E record: bad SECONDS "1e11"`},
		{"E 1 0 1 nan h\n", "bad SECONDS"},
		{"Q x why\n", `Q record: bad TIME "x"`},
		{"S 1 2 h extra\n", `S record: unexpected "extra" after HOST`},
		{"E 1 0 2 3 h h\n", `E record: unexpected "h" after HOST`},
		{"# a comment\n", "not a \"# farm-status v1\" header"},
		{"#\n", "not a \"# farm-status v1\" header"},
		{"# farm-status v2 job=1 run=1 host=h\n", `status file version "v2": this farm reads v1`},
		{"# farm-status v1 job=1 run=x host=h\n", `header: bad run "x"`},
		{"# farm-status v1 job=1 run=1 host=h restart=-1\n", `header: bad restart "-1"`},
		{"# farm-status v1 job=1 host=h\n", "header without run="},
		{"# farm-status v1 job=1 run=1 host=h junk\n", `header: "junk" is not KEY=VALUE`},
		{"S 1 " + strings.Repeat("9", 100) + " h\n", `S record: bad START "9999999999999999999999999999999999999999"...`},
	} {
		_, err := ParseRecord([]byte(tc.line))
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("ParseRecord(%q) = %v, want an error with %q", tc.line, err, tc.err)
		}
	}
}

// What Writer writes, ParseRecord reads back.
func TestWriterRecordsParseBack(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, layout.StatusFile("42", 3))
	w, err := CreateCap(path, "42", 3, 7, "node 1", Capacity{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.UnixMilli(1_700_000_000_123)
	w.Start(9, t0)
	w.End(9, 2, t0, 1517*time.Millisecond)
	w.Start(10, t0)
	w.Interrupted(10, 15, t0, time.Minute)
	w.Quit("fast-failure", "Too many\nfailed")
	w.Quit("", "No cases left; exiting.")
	w.Close()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range bytes.SplitAfter(data, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		r, err := ParseRecord(line)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if r.Kind == KindQuit {
			r.Time = 0 // time.Now()
		}
		got = append(got, fmt.Sprintf("%c id=%d st=%d start=%.3f secs=%.3f host=%s time=%v msg=%q why=%s job=%s run=%d restart=%d",
			r.Kind, r.ID, r.Status, r.Start, r.Seconds, r.Host, r.Time, r.Message, r.Why, r.Job, r.Run, r.Restart))
	}
	want := []string{
		`# id=0 st=0 start=0.000 secs=0.000 host=node_1 time=0 msg="" why= job=42 run=7 restart=3`,
		`S id=9 st=0 start=1700000000.123 secs=0.000 host=node_1 time=0 msg="" why= job= run=0 restart=0`,
		`E id=9 st=2 start=1700000000.123 secs=1.517 host=node_1 time=0 msg="" why= job= run=0 restart=0`,
		`S id=10 st=0 start=1700000000.123 secs=0.000 host=node_1 time=0 msg="" why= job= run=0 restart=0`,
		`I id=10 st=15 start=1700000000.123 secs=60.000 host=node_1 time=0 msg="" why= job= run=0 restart=0`,
		`Q id=0 st=0 start=0.000 secs=0.000 host= time=0 msg="Too many failed" why=fast-failure job= run=0 restart=0`,
		`Q id=0 st=0 start=0.000 secs=0.000 host= time=0 msg="No cases left; exiting." why= job= run=0 restart=0`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
}

// FuzzParseRecord: ParseRecord never panics; a line it rejects gets an
// error of one short line; a number it accepts is the number strconv
// reads; and every record the writer makes of the other arguments parses
// back to the values written.
func FuzzParseRecord(f *testing.F) {
	f.Add([]byte("E 4 0 1700000000.123 0.517 node1\n"), int64(4), int64(0), int64(1_700_000_000_123), int64(517_000_000), "node1", "job1", "No cases left; exiting.")
	f.Fuzz(func(t *testing.T, line []byte, id, status, startMs, durNs int64, host, job, why string) {
		checkParse(t, line)
		checkRoundTrip(t, id, int(status), startMs, time.Duration(durNs), host, job, why)
	})
}

func checkParse(t *testing.T, line []byte) {
	r, err := ParseRecord(line)
	if err != nil {
		msg := err.Error()
		if msg == "" || strings.ContainsAny(msg, "\n\r") || len(msg) > 400 {
			t.Fatalf("ParseRecord(%q): error %q is not one short line", line, msg)
		}
		return
	}
	// Fields as strconv sees them.
	fields := strings.FieldsFunc(strings.TrimSuffix(strings.TrimSuffix(string(line), "\n"), "\r"), func(r rune) bool { return r == ' ' || r == '\t' })
	float := func(name string, i int, got float64) {
		t.Helper()
		want, err := strconv.ParseFloat(fields[i], 64)
		if err != nil || want != got || math.IsNaN(got) || math.IsInf(got, 0) {
			t.Fatalf("ParseRecord(%q): %s %v, strconv says %v (%v)", line, name, got, want, err)
		}
	}
	integer := func(name string, i int, got int64) {
		t.Helper()
		if want, err := strconv.ParseInt(fields[i], 10, 64); err != nil || want != got {
			t.Fatalf("ParseRecord(%q): %s %v, strconv says %v (%v)", line, name, got, want, err)
		}
	}
	switch r.Kind {
	case KindStart:
		integer("ID", 1, r.ID)
		float("START", 2, r.Start)
		checkPlacement(t, line, fields, r)
	case KindUnfit:
		integer("ID", 1, r.ID)
		float("TIME", 2, r.Time)
	case KindEnd, KindInterrupted, KindTimedOut:
		integer("ID", 1, r.ID)
		integer("STATUS", 2, int64(r.Status))
		float("START", 3, r.Start)
		float("SECONDS", 4, r.Seconds)
	case KindQuit:
		float("TIME", 1, r.Time)
	case KindMETA:
		integer("ID", 0, r.ID)
		integer("STATUS", 1, int64(r.Status))
	case KindHeader:
	default:
		t.Fatalf("ParseRecord(%q): kind %q", line, r.Kind)
	}
}

func checkRoundTrip(t *testing.T, id int64, status int, startMs int64, d time.Duration, host, job, why string) {
	host, job = oneField(host), oneField(job)
	start := time.UnixMilli(startMs)
	wantStart := float64(start.UnixMilli()) / 1e3
	wantSecs, _ := strconv.ParseFloat(strconv.FormatFloat(d.Seconds(), 'f', 3, 64), 64)
	parse := func(b []byte, kind Kind) Record {
		t.Helper()
		if bytes.Count(b, []byte("\n")) != 1 {
			t.Fatalf("the writer wrote %q: not one line", b)
		}
		r, err := ParseRecord(b)
		if err != nil || r.Kind != kind {
			t.Fatalf("the writer wrote %q, ParseRecord says %c %v", b, r.Kind, err)
		}
		return r
	}
	restart := int(uint64(id) % 5)
	line := appendHeader(nil, job, restart, status, host, Capacity{})
	if r := parse(line, KindHeader); string(r.Job) != job || r.Run != status || string(r.Host) != host || r.Restart != restart {
		t.Fatalf("%q read back as %+v", line, r)
	}
	line = appendStart(nil, id, start, host)
	if r := parse(line, KindStart); r.ID != id || r.Start != wantStart || string(r.Host) != host {
		t.Fatalf("%q read back as %+v; want start %v", line, r, wantStart)
	}
	for _, kind := range []Kind{KindEnd, KindInterrupted, KindTimedOut} {
		line = appendEnd(nil, byte(kind), id, status, start, d, host, Use{})
		r := parse(line, kind)
		if r.ID != id || r.Status != status || r.Start != wantStart || r.Seconds != wantSecs || math.Abs(r.Seconds-d.Seconds()) > 0.0005001 || string(r.Host) != host {
			t.Fatalf("%q read back as %+v; want start %v, seconds %v", line, r, wantStart, wantSecs)
		}
	}
	line = appendQuit(nil, start, "no-cases", why)
	wantWhy := strings.NewReplacer("\n", " ", "\r", " ").Replace(why)
	if r := parse(line, KindQuit); r.Time != wantStart || string(r.Message) != wantWhy || string(r.Why) != "no-cases" {
		t.Fatalf("%q read back as %+v", line, r)
	}
}

var benchLines = [][]byte{
	[]byte("S 1234567 1700000000.123 node042\n"),
	[]byte("E 1234567 0 1700000000.123 0.517 node042\n"),
}

func BenchmarkParseRecord(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := ParseRecord(benchLines[i&1]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAggregateLine is Load's work per record, without the I/O: the
// replay that settles attempts (ReadFile's) and their batching.
func BenchmarkAggregateLine(b *testing.B) { benchmarkAggregate(b, benchLines) }

// benchmarkAggregate replays lines, in turn, as Load does.
func benchmarkAggregate(b *testing.B, lines [][]byte) {
	b.ReportAllocs()
	p := fileParser{b: &batch{attempts: make([]attempt, 0, batchSize)}}
	rp := replay{fn: func(f *File, a *Attempt) error {
		p.add(f, a)
		if len(p.b.attempts) == batchSize {
			p.b.attempts = p.b.attempts[:0]
		}
		return nil
	}}
	fail := func(_ int, err error) { b.Fatal(err) }
	for i := 0; i < b.N; i++ {
		if err := rp.line(lines[i&1], i+1, fail); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTailLines is Tail's work per record.
func BenchmarkTailLines(b *testing.B) {
	b.ReportAllocs()
	buf := bytes.Repeat(append(append([]byte(nil), benchLines[0]...), benchLines[1]...), 1000)
	t := NewTail("")
	tf := t.newFile("1", 0)
	for i := 0; i < b.N; i += 2000 {
		tf.lines(buf)
		t.ends = t.ends[:0]
	}
}

// BenchmarkDurations is Durations' work per record, from a file in the
// page cache.
func BenchmarkDurations(b *testing.B) {
	b.ReportAllocs()
	dir := b.TempDir()
	buf := bytes.Repeat(append(append([]byte(nil), benchLines[0]...), benchLines[1]...), 100_000)
	if err := os.WriteFile(filepath.Join(dir, "status.1"), buf, 0o644); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i += 200_000 {
		if d, err := Durations(dir); err != nil || len(d) != 100_000 {
			b.Fatal(len(d), err)
		}
	}
}

// An E, I or T record says what the case used, when known (rss= cpu=), and
// reads back; one without reads as not known, and keys it does not know
// are ignored.
func TestEndRecordUse(t *testing.T) {
	t0 := time.UnixMilli(1700000000250)
	for _, tc := range []struct {
		host string
		u    Use
		line string
	}{
		{"n1", Use{}, "E 3 0 1700000000.250 1.500 n1\n"},
		{"n1", Use{RSS: 215040, CPU: 2012 * time.Millisecond, HasCPU: true}, "E 3 0 1700000000.250 1.500 n1 rss=215040 cpu=2.012\n"},
		{"", Use{CPU: 0, HasCPU: true}, "E 3 0 1700000000.250 1.500 - cpu=0.000\n"},
		{"n1", Use{RSS: 4096}, "E 3 0 1700000000.250 1.500 n1 rss=4096\n"},
	} {
		line := appendEnd(nil, 'E', 3, 0, t0, 1500*time.Millisecond, tc.host, tc.u)
		if string(line) != tc.line {
			t.Errorf("appendEnd(%+v) = %q, want %q", tc.u, line, tc.line)
		}
		r, err := ParseRecord(line)
		if err != nil {
			t.Fatal(err)
		}
		if r.RSS != tc.u.RSS || r.HasCPU != tc.u.HasCPU || r.CPU != tc.u.CPU.Seconds() {
			t.Errorf("%q read back rss=%d cpu=%v (%v)", line, r.RSS, r.CPU, r.HasCPU)
		}
	}
	r, err := ParseRecord([]byte("E 3 0 1700000000.250 1.500 n1 rss=7 later=x cpu=1\n"))
	if err != nil || r.RSS != 7 || r.CPU != 1 || !r.HasCPU {
		t.Errorf("with an unknown key: %+v, %v", r, err)
	}
}
