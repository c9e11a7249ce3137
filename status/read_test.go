package status

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// readAll reads the status file body (written as name in a new directory)
// with opt, and returns its attempts, their hosts copied, and the file.
func readAll(t *testing.T, name, body string, opt ReadOptions) ([]Attempt, *File) {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(strings.TrimLeft(body, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	var out []Attempt
	f, err := ReadFile(path, opt, func(_ *File, a *Attempt) error {
		c := *a
		c.Host = append([]byte(nil), a.Host...)
		out = append(out, c)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out, f
}

var attemptOpts = cmpopts.IgnoreUnexported(Attempt{})

func unixAt(s float64) time.Time { return time.UnixMilli(int64(s * 1e3)) }

// TestReadFileSettlesAttempts: ReadFile decides, once, what became of each
// attempt: a case started and not ended in a live job is running (for as
// long as it has run), in a dead one interrupted with no record of its
// end; an ended case has its STATUS, an interrupted one its signal; the
// open cases come last, by ID.
func TestReadFileSettlesAttempts(t *testing.T) {
	const body = `
# farm-status v1 job=7 run=2 host=n1
S 1 1700000000.000 n1
E 1 0 1700000000.000 1.500 n1
S 2 1700000002.000 n1
E 2 3 1700000002.000 2.000 n1
S 3 1700000005.000 n1
I 3 15 1700000005.000 4.000 n1
S 5 1700000010.000 n1 loop=2
S 4 1700000011.000 n1 loop=1
U 6 1700000012.000 it needs 8 CPUs, the job has 4
`
	ended := []Attempt{
		{ID: 1, State: Succeeded, Start: 1700000000, Seconds: 1.5, Started: true, Host: []byte("n1")},
		{ID: 2, State: Failed, Status: 3, Start: 1700000002, Seconds: 2, Started: true, Host: []byte("n1")},
		{ID: 3, State: Interrupted, Status: 15, Start: 1700000005, Seconds: 4, Started: true, Host: []byte("n1")},
		{ID: 6, State: Unfit, Start: 1700000012},
	}
	for _, c := range []struct {
		name string
		opt  ReadOptions
		open []Attempt
	}{
		{"live job", ReadOptions{Live: func(job string) bool { return job == "7" }, Now: unixAt(1700000020)}, []Attempt{
			{ID: 4, State: Running, Start: 1700000011, Seconds: 9, Started: true, Loop: 1},
			{ID: 5, State: Running, Start: 1700000010, Seconds: 10, Started: true, Loop: 2},
		}},
		{"dead job", ReadOptions{Live: func(string) bool { return false }, Now: unixAt(1700000020)}, []Attempt{
			{ID: 4, State: Interrupted, Start: 1700000011, Started: true, NoEnd: true, Loop: 1},
			{ID: 5, State: Interrupted, Start: 1700000010, Started: true, NoEnd: true, Loop: 2},
		}},
		{"live job, superseded by a restart", ReadOptions{Live: func(string) bool { return true }, Superseded: true, LiveAsOf: unixAt(1700000000), Now: unixAt(1700000020)}, []Attempt{
			{ID: 4, State: Interrupted, Start: 1700000011, Started: true, NoEnd: true, Loop: 1},
			{ID: 5, State: Interrupted, Start: 1700000010, Started: true, NoEnd: true, Loop: 2},
		}},
		{"job asked before case 4 started", ReadOptions{LiveAsOf: unixAt(1700000010.5), Now: unixAt(1700000020)}, []Attempt{
			{ID: 4, State: Running, Start: 1700000011, Seconds: 9, Started: true, Loop: 1},
			{ID: 5, State: Interrupted, Start: 1700000010, Started: true, NoEnd: true, Loop: 2},
		}},
	} {
		got, f := readAll(t, "status.7", body, c.opt)
		if diff := cmp.Diff(append(append([]Attempt(nil), ended...), c.open...), got, attemptOpts); diff != "" {
			t.Errorf("%s: attempts differ (-want +got):\n%s", c.name, diff)
		}
		if f.Job != "7" || f.Run != 2 || f.Host != "n1" || !f.Header || f.First != 1700000000 || f.Last != 1700000012 {
			t.Errorf("%s: file %+v", c.name, f)
		}
	}
}

// TestReadFileQuitJobRunsNothing: a meta-job that exited by itself (a Q
// record, written once every loop ended) runs no case, whatever the batch
// system says of its job.
func TestReadFileQuitJobRunsNothing(t *testing.T) {
	got, f := readAll(t, "status.8", `
# farm-status v1 job=8 run=1 host=n
S 1 1700000000.000 n
Q 1700000009.000 no case left
`, ReadOptions{Live: func(string) bool { return true }, LiveAsOf: unixAt(1600000000)})
	if len(got) != 1 || got[0].State != Interrupted || !got[0].NoEnd {
		t.Errorf("attempts %+v: want case 1 interrupted, with no record of its end", got)
	}
	if !f.Quitted || f.Quit != "no case left" || f.QuitAt != 1700000009 || f.Last != 1700000009 {
		t.Errorf("file %+v: want its Q record", f)
	}
}

// TestReadFileStartedTwice: a case started twice in one file is two
// attempts, each with its start (an E record ends the latest): the
// duplicate start is Load's to report, as it always has (status.JOB named
// in its warning), and the first attempt, never ended, is interrupted.
func TestReadFileStartedTwice(t *testing.T) {
	const body = `
# farm-status v1 job=9 run=1 host=n
S 5 1700000000.000 n
S 5 1700000001.000 n
E 5 0 1700000001.000 1.000 n
`
	got, _ := readAll(t, "status.9", body, ReadOptions{})
	want := []Attempt{
		{ID: 5, State: Succeeded, Start: 1700000001, Seconds: 1, Started: true, Host: []byte("n")},
		{ID: 5, State: Interrupted, Start: 1700000000, Started: true, NoEnd: true},
	}
	if diff := cmp.Diff(want, got, attemptOpts); diff != "" {
		t.Errorf("attempts differ (-want +got):\n%s", diff)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "status.9"), []byte(strings.TrimLeft(body, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Load(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	wantDup := []Duplicate{{ID: 5, Run: 1, Starts: 2, Files: []string{filepath.Join(filepath.Base(dir), "status.9")}}}
	if diff := cmp.Diff(wantDup, s.Duplicates); diff != "" {
		t.Errorf("duplicates differ (-want +got):\n%s", diff)
	}
	if c := s.Get(5); c.State != Succeeded || c.Starts != 2 || c.StartsRun != 1 {
		t.Errorf("case 5: %+v; want succeeded, started twice in run 1", c)
	}
	if len(s.Warnings) != 1 || !strings.Contains(s.Warnings[0], "case 5 started 2 times in run 1 (") {
		t.Errorf("warnings %q", s.Warnings)
	}
}

// TestReadFileMETALines: META's "ID STATUS" lines are ended cases with no
// times in a file of META's, and nothing in a file of farm's (its E
// records say the same); a farm header after them is a damaged line.
func TestReadFileMETALines(t *testing.T) {
	got, f := readAll(t, "status.meta-3", "1 0\n2 4\n# farm-status v1 job=3 run=1 host=n\n", ReadOptions{Warn: func(line int, err error) {
		if line != 3 {
			t.Errorf("line %d: %v; want only line 3 (the header) refused", line, err)
		}
	}})
	want := []Attempt{{ID: 1, State: Succeeded, Untimed: true}, {ID: 2, State: Failed, Status: 4, Untimed: true}}
	if diff := cmp.Diff(want, got, attemptOpts); diff != "" || !f.META || f.Header {
		t.Errorf("META's file %+v: attempts differ (-want +got):\n%s", f, diff)
	}
	got, _ = readAll(t, "status.4", "# farm-status v1 job=4 run=1 host=n\nS 1 1700000000.000 n\n1 0\nE 1 0 1700000000.000 1.000 n\n", ReadOptions{})
	if len(got) != 1 || got[0].Untimed {
		t.Errorf("farm's file with a META line: %+v; want case 1 once, from its E record", got)
	}
}
