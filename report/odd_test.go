package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeStatuses writes status files into a new directory: name -> lines.
func writeStatuses(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(strings.TrimLeft(body, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func at(s float64) time.Time { return time.UnixMilli(int64(s * 1e3)) }

// TestRestartedJob: the open case of a job's dead incarnation ends where
// the new incarnation started, not at the new one's (expected) end; only
// the new incarnation's row gets the job's start and end; the new one's
// open case, the job running, is running.
func TestRestartedJob(t *testing.T) {
	dir := writeStatuses(t, map[string]string{
		"status.7": `
# farm-status v1 job=7 run=1 host=a
S 1 1700000000.000 a
E 1 0 1700000000.000 10.000 a
S 2 1700000010.000 a
`,
		"status.7.r1": `
# farm-status v1 job=7 run=1 host=b restart=1
S 3 1700000100.000 b
`,
	})
	d, err := Build(Input{StatusDir: dir, Now: at(1700000200), Jobs: map[string]JobInfo{"7": {Start: at(1700000090), End: at(1700086400), Live: true}}})
	if err != nil {
		t.Fatal(err)
	}
	tl := d.Timeline
	if tl.T1 != 1700000200 {
		t.Errorf("the timeline ends at %.0f, want now (1700000200): a live job's expected end is not drawn", tl.T1)
	}
	if len(tl.Rows) != 2 {
		t.Fatalf("%d rows, want one per incarnation", len(tl.Rows))
	}
	old, cur := tl.Rows[0], tl.Rows[1]
	if old.Start != 0 || old.End != 0 || cur.Start != 1700000090 || cur.End != 0 {
		t.Errorf("the dead incarnation's row has start %v end %v, the live one's %v %v; want none, and 1700000090 and none (it runs)", old.Start, old.End, cur.Start, cur.End)
	}
	if b := old.Bars[1]; b.ID != 2 || b.State != Interrupted || b.End != 1700000090 {
		t.Errorf("case 2 of the dead incarnation: %+v; want interrupted, ended at the restart (1700000090)", b)
	}
	if b := cur.Bars[0]; b.ID != 3 || b.State != Running || b.End != 1700000200 {
		t.Errorf("case 3 of the running incarnation: %+v; want running until now", b)
	}
}

// TestOddRecords: records farm reads but rarely sees — META's "ID STATUS"
// lines of an adopted farm, an end without a start, a case of 0 s, a loop
// number far beyond any machine's CPUs and an end a thousand years on —
// are drawn without panicking and without figures of absurd size.
func TestOddRecords(t *testing.T) {
	dir := writeStatuses(t, map[string]string{
		"status.5": "1 0\n2 3\n3 0\n", // META's own, adopted
		"status.8": `
# farm-status v1 job=8 run=2 host=n
E 4 0 1700000000.000 0.000 n
S 5 1700000001.000 n loop=70000
E 5 0 1700000001.000 2.000 n
E 6 0 1700000003.000 31536000000.000 n
`,
	})
	d, err := Build(Input{StatusDir: dir, Now: at(1700000300)})
	if err != nil {
		t.Fatal(err)
	}
	h := d.Histogram
	if h.Untimed != 3 || h.Zero != 1 {
		t.Errorf("histogram: %d untimed, %d of 0 s; want META's 3 and case 4", h.Untimed, h.Zero)
	}
	var exit3 int64
	for _, s := range d.Statuses {
		if s.Kind == "exit" && s.Code == 3 {
			exit3 = s.Cases
		}
	}
	if exit3 != 1 {
		t.Errorf("statuses %+v: META's case 2, exit 3, is not counted", d.Statuses)
	}
	if len(d.Timeline.Rows) > 3 {
		t.Errorf("%d timeline rows: want job 8's (no row for META's file, no lane per loop number not used)", len(d.Timeline.Rows))
	}
	if n := len(d.Throughput.Succeeded); n > 600 {
		t.Errorf("%d throughput bins for one case of a thousand years", n)
	}
	var b strings.Builder
	if err := WriteHTML(&b, d, "odd"); err != nil {
		t.Fatal(err)
	}
	if b.Len() > 1<<20 {
		t.Errorf("a page of %d bytes for 6 cases", b.Len())
	}
}

// TestControlCharactersInSVG: a host name or exit message with control
// characters or invalid UTF-8 still makes a well-formed SVG.
func TestControlCharactersInSVG(t *testing.T) {
	dir := writeStatuses(t, map[string]string{
		"status.9": "# farm-status v1 job=9 run=1 host=h\x01\xff\nS 1 1700000000.000 h\x01\xff\nE 1 2 1700000000.000 1.000 h\x01\xff\nQ 1700000002.000 bye \x1b[31mred\n",
	})
	d, err := Build(Input{StatusDir: dir, Now: at(1700000300)})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := WriteSVG(&b, Figures(d)); err != nil {
		t.Fatal(err)
	}
	checkWellFormed(t, b.String())
}

// TestStartedAfterTheQuery: a case started after the batch system was
// asked is running (its job started since), as farm Status says, not
// interrupted; one started before, in a job not running, is interrupted.
func TestStartedAfterTheQuery(t *testing.T) {
	dir := writeStatuses(t, map[string]string{
		"status.11": "# farm-status v1 job=11 run=1 host=a\nS 1 1700000100.000 a\n",
		"status.12": "# farm-status v1 job=12 run=1 host=a\nS 2 1700000050.000 a\n",
	})
	d, err := Build(Input{StatusDir: dir, Now: at(1700000200), LiveAsOf: at(1700000090)})
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64]string{}
	for _, r := range d.Timeline.Rows {
		for _, b := range r.Bars {
			got[b.ID] = b.State
		}
	}
	if got[1] != Running || got[2] != Interrupted {
		t.Errorf("states %v: want case 1 (started after the query) running, case 2 interrupted", got)
	}
}
