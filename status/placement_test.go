package status

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/farm-hpc/farm/layout"
	"github.com/google/go-cmp/cmp"
)

// The records of issue 13 (a header's capacity, an S record's placement,
// the U record) and what ParseRecord reads of them.
func TestParsePlacementRecords(t *testing.T) {
	b := func(s string) []byte { return []byte(s) }
	for _, tc := range []struct {
		line string
		want Record
	}{
		{"# farm-status v1 job=17 run=3 host=node1 cpus=8 gpus=2\n", Record{Kind: KindHeader, Job: b("17"), Run: 3, Host: b("node1"), Capacity: Capacity{CPUs: 8, GPUs: 2}}},
		{"# farm-status v1 gpus=1 job=17 run=3 host=node1 restart=1\n", Record{Kind: KindHeader, Job: b("17"), Run: 3, Host: b("node1"), Restart: 1, Capacity: Capacity{GPUs: 1}}},
		{"S 4 1700000000.123 node1 loop=3 cpus=0-3,8 gpus=0,1\n", Record{Kind: KindStart, ID: 4, Start: 1700000000.123, Host: b("node1"), Loop: 3, CPUs: b("0-3,8"), GPUs: b("0,1")}},
		{"S 4 100 - gpus=GPU-5c3e,MIG-1/2\tloop=12 future=x\r\n", Record{Kind: KindStart, ID: 4, Start: 100, Host: b("-"), Loop: 12, GPUs: b("GPU-5c3e,MIG-1/2")}},
		{"S 4 100 h cpus=7 cpus=0-1,3-65535\n", Record{Kind: KindStart, ID: 4, Start: 100, Host: b("h"), CPUs: b("0-1,3-65535")}},
		{"S 4 100 h cpus= gpus= loop=0\n", Record{Kind: KindStart, ID: 4, Start: 100, Host: b("h"), CPUs: b(""), GPUs: b("")}},
		{"S 4 100 h attempt=3 why=retry\n", Record{Kind: KindStart, ID: 4, Start: 100, Host: b("h"), Attempt: 3, Why: b("retry")}},
		{"S 4 100 h loop=2 out=17 err=0\n", Record{Kind: KindStart, ID: 4, Start: 100, Host: b("h"), Loop: 2, Out: 17, Framed: true}},
		{"U 7 1700000000.500 needs 16 CPUs, the job has 8\n", Record{Kind: KindUnfit, ID: 7, Time: 1700000000.5, Message: b("needs 16 CPUs, the job has 8")}},
		{"U\t7\t0\r\n", Record{Kind: KindUnfit, ID: 7}},
		{"U 7 0  two blanks\n", Record{Kind: KindUnfit, ID: 7, Message: b(" two blanks")}},
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
		{"S 1 2 h cpus=x\n", `S record: bad cpus "x"`},
		{"S 1 2 h attempt=0\n", `S record: bad attempt "0"`},
		{"S 1 2 h out=-1 err=0\n", `S record: bad out "-1"`},
		{"S 1 2 h out=0 err=x\n", `S record: bad err "x"`},
		{"S 1 2 h attempt=x why=retry\n", `S record: bad attempt "x"`},
		{"S 1 2 h cpus=3-1\n", `S record: bad cpus "3-1"`},
		{"S 1 2 h cpus=1,1\n", `S record: bad cpus "1,1"`},
		{"S 1 2 h cpus=2,0\n", `S record: bad cpus "2,0"`},
		{"S 1 2 h cpus=0-3,2\n", `S record: bad cpus "0-3,2"`},
		{"S 1 2 h cpus=0,\n", `S record: bad cpus "0,"`},
		{"S 1 2 h cpus=,0\n", `S record: bad cpus ",0"`},
		{"S 1 2 h cpus=0,,1\n", `S record: bad cpus "0,,1"`},
		{"S 1 2 h cpus=1-\n", `S record: bad cpus "1-"`},
		{"S 1 2 h cpus=-1\n", `S record: bad cpus "-1"`},
		{"S 1 2 h cpus=+1\n", `S record: bad cpus "+1"`},
		{"S 1 2 h cpus=65536\n", `S record: bad cpus "65536"`},
		{"S 1 2 h cpus=0-99999999999999999999\n", `S record: bad cpus "0-99999999999999999999"`},
		{"S 1 2 h gpus=,\n", `S record: bad gpus ","`},
		{"S 1 2 h gpus=0,,1\n", `S record: bad gpus "0,,1"`},
		{"S 1 2 h gpus=0,\n", `S record: bad gpus "0,"`},
		{"S 1 2 h loop=x\n", `S record: bad loop "x"`},
		{"S 1 2 h loop=-1\n", `S record: bad loop "-1"`},
		{"S 1 2 h loop=\n", `S record: bad loop ""`},
		{"S 1 2 h loop=99999999999999999999\n", `S record: bad loop "99999999999999999999"`},
		{"S 1 2 h loop=1 cpus\n", `S record: unexpected "cpus" after HOST`},
		{"E 1 0 2 3 h loop\n", `E record: unexpected "loop" after HOST`},
		{"I 1 9 2 3 h cpus\n", `I record: unexpected "cpus" after HOST`},
		{"E 1 0 2 3 h rss=x\n", `E record: bad rss "x"`},
		{"E 1 0 2 3 h rss=-1\n", `E record: bad rss "-1"`},
		{"T 1 9 2 3 h cpu=\n", `T record: bad cpu ""`},
		{"E 1 0 2 3 h cpu=-0.5\n", `E record: bad cpu "-0.5"`},
		{"E 1 0 2 3 h cpu=1x\n", `E record: bad cpu "1x"`},
		{"# farm-status v1 job=1 run=1 host=h cpus=-1\n", `header: bad cpus "-1"`},
		{"# farm-status v1 job=1 run=1 host=h gpus=two\n", `header: bad gpus "two"`},
		{"U\n", `short U record "U": want U ID TIME REASON`},
		{"U 1\n", `short U record "U 1": want U ID TIME REASON`},
		{"U x 1 why\n", `U record: bad ID "x"`},
		{"U 1 x why\n", `U record: bad TIME "x"`},
		{"U 1 NaN why\n", `U record: bad TIME "NaN"`},
	} {
		_, err := ParseRecord([]byte(tc.line))
		if err == nil || err.Error() != tc.err {
			t.Errorf("ParseRecord(%q) = %v, want the error %q", tc.line, err, tc.err)
		}
	}
}

// CreateCap, StartAt and Unfit write the records of the package comment,
// exactly, and they read back.
//
// Over 80 lines: most of it is the exact text of two status files and the
// placements they read back as, written out in full because that exact
// text is what the test holds; split up, each write would sit away from
// the record it must make.
func TestWriterPlacementRecords(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, layout.StatusFile("42", 1))
	w, err := CreateCap(path, "42", 1, 7, "node 1", Capacity{CPUs: 8, GPUs: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.UnixMilli(1_700_000_000_123)
	w.StartAt(9, t0, Placement{Loop: 3, CPUs: []int{0, 1, 2, 3, 8}, GPUs: []string{"0", "1"}})
	w.End(9, 0, t0, time.Second)
	w.StartAt(10, t0, Placement{})
	w.StartAt(11, t0, Placement{CPUs: []int{8, 3, 2, 1, 0, 3, -1, 70000, 5}})
	w.StartAt(12, t0, Placement{GPUs: []string{"", "GPU a,b", "MIG\n1"}})
	w.StartAt(13, t0, Placement{CPUs: []int{-5, MaxCPU + 1}, GPUs: []string{""}}) // nothing to say
	w.StartAt(16, t0, Placement{Framed: true, Out: 0, Err: 1 << 40})
	w.Unfit(14, t0, "needs 16 CPUs,\nthe job has 8")
	w.Unfit(15, t0, "")
	w.Close()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := "# farm-status v1 job=42 run=7 host=node_1 restart=1 cpus=8 gpus=2\n" +
		"S 9 1700000000.123 node_1 loop=3 cpus=0-3,8 gpus=0,1\n" +
		"E 9 0 1700000000.123 1.000 node_1\n" +
		"S 10 1700000000.123 node_1\n" +
		"S 11 1700000000.123 node_1 cpus=0-3,5,8\n" +
		"S 12 1700000000.123 node_1 gpus=GPU_a_b,MIG_1\n" +
		"S 13 1700000000.123 node_1\n" +
		"S 16 1700000000.123 node_1 out=0 err=1099511627776\n" +
		"U 14 1700000000.123 needs 16 CPUs, the job has 8\n" +
		"U 15 1700000000.123 \n"
	if diff := cmp.Diff(want, string(data)); diff != "" {
		t.Errorf("status file (-want +got):\n%s", diff)
	}
	var places []Placement
	for _, line := range bytes.SplitAfter(data, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		r, err := ParseRecord(line)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		switch r.Kind {
		case KindHeader:
			if r.Capacity != (Capacity{CPUs: 8, GPUs: 2}) {
				t.Errorf("header capacity %+v", r.Capacity)
			}
		case KindStart:
			places = append(places, r.Placement())
		case KindUnfit:
			if r.ID == 14 && string(r.Message) != "needs 16 CPUs, the job has 8" {
				t.Errorf("U record reason %q", r.Message)
			}
		}
	}
	wantPlaces := []Placement{
		{Loop: 3, CPUs: []int{0, 1, 2, 3, 8}, GPUs: []string{"0", "1"}},
		{},
		{CPUs: []int{0, 1, 2, 3, 5, 8}},
		{GPUs: []string{"GPU_a_b", "MIG_1"}},
		{},
		{Framed: true, Out: 0, Err: 1 << 40},
	}
	if diff := cmp.Diff(wantPlaces, places); diff != "" {
		t.Errorf("placements read back (-want +got):\n%s", diff)
	}

	// Without a host, the S record says "-" rather than leave its fields
	// to be read as HOST.
	path = filepath.Join(dir, layout.StatusFile("43", 0))
	w, err = CreateCap(path, "43", 0, 1, "", Capacity{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.StartAt(1, t0, Placement{Loop: 1})
	w.StartAt(2, t0, Placement{})
	w.Close()
	data, _ = os.ReadFile(path)
	want = "# farm-status v1 job=43 run=1 host=\n" +
		"S 1 1700000000.123 - loop=1\n" +
		"S 2 1700000000.123 \n"
	if diff := cmp.Diff(want, string(data)); diff != "" {
		t.Errorf("status file without a host (-want +got):\n%s", diff)
	}
}

// FuzzPlacement: whatever placement, capacity and reason a meta-job gives
// the writer, it writes one line that ParseRecord reads back as what was
// meant: the CPUs in range in ascending order, each once; the GPUs that
// have a name, made one field each; the reason on one line.
func FuzzPlacement(f *testing.F) {
	f.Add(int64(4), int64(1_700_000_000_123), int64(3), []byte{0, 4, 0, 5, 0, 6, 0, 7, 0, 12}, "0;1", "needs 16 CPUs\nthe job has 8", int64(8), int64(2), "node1")
	f.Add(int64(-1), int64(0), int64(-3), []byte{0xff, 0xff, 0, 0, 0, 1}, ";GPU a,b;", "", int64(-1), int64(0), "")
	f.Fuzz(func(t *testing.T, id, startMs, loop int64, cpuBytes []byte, gpus, reason string, capCPUs, capGPUs int64, host string) {
		host = oneField(host)
		var cpus []int
		for i := 0; i+1 < len(cpuBytes); i += 2 {
			c := int(binary.BigEndian.Uint16(cpuBytes[i:])) - 4 // some below 0
			if cpuBytes[i] == 0xff {
				c += 1 << 8 // some above MaxCPU
			}
			cpus = append(cpus, c)
		}
		p := Placement{Loop: int(loop), CPUs: cpus, GPUs: strings.Split(gpus, ";")}
		start := time.UnixMilli(startMs)
		wantStart := float64(start.UnixMilli()) / 1e3

		var want Placement
		if p.Loop > 0 {
			want.Loop = p.Loop
		}
		for _, c := range cpus {
			if c >= 0 && c <= MaxCPU {
				want.CPUs = append(want.CPUs, c)
			}
		}
		slices.Sort(want.CPUs)
		want.CPUs = slices.Compact(want.CPUs)
		for _, g := range p.GPUs {
			if g != "" {
				b := []byte(g)
				for i, c := range b {
					if strings.IndexByte(" \t\r\n,", c) >= 0 {
						b[i] = '_'
					}
				}
				want.GPUs = append(want.GPUs, string(b))
			}
		}
		wantHost := host
		if host == "" && (want.Loop > 0 || len(want.CPUs) > 0 || len(want.GPUs) > 0) {
			wantHost = "-"
		}

		parse := func(b []byte, kind Kind) Record {
			t.Helper()
			if bytes.Count(b, []byte("\n")) != 1 {
				t.Fatalf("the writer wrote %q: not one line", b)
			}
			checkParse(t, b)
			r, err := ParseRecord(b)
			if err != nil || r.Kind != kind {
				t.Fatalf("the writer wrote %q, ParseRecord says %c %v", b, r.Kind, err)
			}
			return r
		}
		line := appendStartAt(nil, id, start, host, p)
		r := parse(line, KindStart)
		if r.ID != id || r.Start != wantStart || string(r.Host) != wantHost {
			t.Fatalf("%q read back as %+v; want start %v, host %q", line, r, wantStart, wantHost)
		}
		if diff := cmp.Diff(want, r.Placement()); diff != "" {
			t.Fatalf("%q: placement of %+v read back (-want +got):\n%s", line, p, diff)
		}

		c := Capacity{CPUs: int(capCPUs), GPUs: int(capGPUs)}
		line = appendHeader(nil, "1", 0, 1, host, c)
		wantCap := Capacity{CPUs: max(0, c.CPUs), GPUs: max(0, c.GPUs)}
		if r := parse(line, KindHeader); r.Capacity != wantCap {
			t.Fatalf("%q read back as capacity %+v, want %+v", line, r.Capacity, wantCap)
		}

		line = appendUnfit(nil, id, start, reason)
		wantWhy := strings.NewReplacer("\n", " ", "\r", " ").Replace(reason)
		if r := parse(line, KindUnfit); r.ID != id || r.Time != wantStart || string(r.Message) != wantWhy {
			t.Fatalf("%q read back as %+v", line, r)
		}
	})
}

// checkPlacement checks, for a line ParseRecord accepted as an S record,
// that the placement it read is what strings and strconv read of the line's
// fields: the last loop=, cpus= and gpus= after HOST.
func checkPlacement(t *testing.T, line []byte, fields []string, r Record) {
	t.Helper()
	var want Placement
	for _, f := range fields[min(4, len(fields)):] {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "loop":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				t.Fatalf("ParseRecord(%q) took loop=%s", line, v)
			}
			want.Loop = n
		case "cpus":
			want.CPUs = nil
			prev := -1
			for _, item := range strings.Split(v, ",") {
				if v == "" {
					break
				}
				lo, hi, isRange := strings.Cut(item, "-")
				a, err1 := strconv.Atoi(lo)
				b, err2 := a, error(nil)
				if isRange {
					b, err2 = strconv.Atoi(hi)
				}
				if err1 != nil || err2 != nil || lo[0] == '+' || (isRange && hi[0] == '+') || a <= prev || b < a || b > MaxCPU {
					t.Fatalf("ParseRecord(%q) took cpus=%s", line, v)
				}
				for c := a; c <= b; c++ {
					want.CPUs = append(want.CPUs, c)
				}
				prev = b
			}
		case "gpus":
			want.GPUs = nil
			if v != "" {
				want.GPUs = strings.Split(v, ",")
			}
			if slices.Contains(want.GPUs, "") {
				t.Fatalf("ParseRecord(%q) took gpus=%s", line, v)
			}
		}
	}
	if diff := cmp.Diff(want, r.Placement()); diff != "" {
		t.Fatalf("ParseRecord(%q): placement (-strconv +got):\n%s", line, diff)
	}
}
