package metajob

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/farm-hpc/farm/internal/testreq"
	"github.com/farm-hpc/farm/layout"
	"github.com/farm-hpc/farm/status"
)

// TestCaseFramesKeepEachCasesBytes (OUTPUT=job): each case's standard
// output and error are found whole at the offsets its start record would
// say, up to the next case's, with the header before them when it wrote
// something; a case that writes nothing leaves nothing; a case that opens
// /dev/stderr afresh (which would truncate a file) truncates nothing; the
// job's own output gets none of it.
func TestCaseFramesKeepEachCasesBytes(t *testing.T) {
	if _, err := os.Stat("/bin/bash"); err != nil {
		testreq.Skip(t, "FARM_REQUIRE_LINUX", "no /bin/bash")
	}
	cases := []frameCase{
		{`printf 'one\ntwo\n'; printf 'e1\n' >&2`, "one\ntwo\n", "e1\n"},
		{`:`, "", ""},
		{`printf 'no newline'; echo truncates? >/dev/stderr`, "no newline", "truncates?\n"},
		{`head -c 200000 /dev/zero | tr '\0' x; echo; echo big >&2`, strings.Repeat("x", 200000) + "\n", "big\n"},
		{`echo "==> case 3 <=="; exit 3`, "==> case 3 <==\n", ""},
	}
	for _, kind := range []string{"sourced", "executed"} {
		t.Run(kind, func(t *testing.T) {
			var job bytes.Buffer
			r, cf, dir := outputRunner(t, kind, 2, &job)
			var places []status.Placement
			for i, c := range cases {
				p := cf.begin(int64(i + 1))
				if !p.Framed {
					t.Fatalf("case %d: not framed", i+1)
				}
				places = append(places, p)
				if _, _, err := r.run(caseRequest{ID: strconv.Itoa(i + 1), Comm: c.comm}); err != nil {
					t.Fatal(err)
				}
			}
			checkFrames(t, dir, places, cases)
			if job.Len() != 0 {
				t.Errorf("the job's output got %d bytes: %.80q", job.Len(), job.String())
			}
		})
	}
}

type frameCase struct{ comm, out, err string }

// checkFrames checks that each case's bytes are found where places say,
// in loop 2's files of job 7, with their headers.
func checkFrames(t *testing.T, dir string, places []status.Placement, cases []frameCase) {
	t.Helper()
	for s, name := range []string{"out", "err"} {
		data, err := os.ReadFile(filepath.Join(dir, layout.OutputDir, layout.CaseOutput(layout.StatusFile("7", 0), 2, s == 1)))
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range cases {
			from, to := places[i].Out, int64(len(data))
			want := c.out
			if s == 1 {
				from, want = places[i].Err, c.err
			}
			if i+1 < len(places) {
				to = places[i+1].Out
				if s == 1 {
					to = places[i+1].Err
				}
			}
			got := string(data[from:to])
			if want != "" {
				want = fmt.Sprintf("==> case %d <==\n", i+1) + want
			}
			if got != want {
				t.Errorf("case %d's std%s: %.60q, want %.60q", i+1, name, got, want)
			}
		}
	}
}

// outputRunner is a runner of loop k of job 7 with OUTPUT=job, its
// single_case.sh sourced or executed (kind), writing what is not the
// cases' to job.
func outputRunner(t *testing.T, kind string, k int, job io.Writer) (caseRunner, *caseFrames, string) {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("TMPDIR", t.TempDir())
	if err := os.Mkdir(filepath.Join(dir, layout.OutputDir), 0o755); err != nil {
		t.Fatal(err)
	}
	shebang := "#!/bin/bash"
	if kind == "executed" {
		shebang = "#!/usr/bin/env sh" // run as a program (a #!/bin/sh script is sourced: farm.SourcedByBash)
	}
	if err := os.WriteFile(filepath.Join(dir, layout.SingleCase), []byte(shebang+"\neval \"$COMM\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	jf, err := os.CreateTemp(t.TempDir(), "job")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { jf.Close() })
	r, err := newCaseRunner(dir, "/bin/bash", "", os.Environ(), jf, job)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := openCaseFrames(dir, layout.StatusFile("7", 0), k, job)
	if err != nil {
		t.Fatal(err)
	}
	switch r := r.(type) {
	case *forkRunner:
		r.frames = cf
	case *execRunner:
		r.frames = cf
	}
	t.Cleanup(func() { r.close(); cf.close() })
	return r, cf, dir
}

// TestCaseOutputOfABackgroundProcess (OUTPUT=job): a process a case left
// in the background is neither waited for nor cut off: the case ends at
// once, and what the process writes later is kept (with the case running
// then), on both runners.
func TestCaseOutputOfABackgroundProcess(t *testing.T) {
	for _, kind := range []string{"sourced", "executed"} {
		t.Run(kind, func(t *testing.T) {
			r, cf, dir := outputRunner(t, kind, 1, io.Discard)
			cf.begin(1)
			t0 := time.Now()
			if code, _, err := r.run(caseRequest{ID: "1", Comm: `echo first; (sleep 1.5; echo late; touch ` + dir + `/alive) &`}); code != 0 || err != nil {
				t.Fatalf("case 1: %d, %v", code, err)
			}
			if d := time.Since(t0); d > time.Second {
				t.Errorf("case 1 took %v: its background process was waited for", d)
			}
			cf.begin(2)
			r.run(caseRequest{ID: "2", Comm: `sleep 2.5; echo second`})
			if _, err := os.Stat(filepath.Join(dir, "alive")); err != nil {
				t.Errorf("the background process did not live to its end: %v", err)
			}
			b, _ := os.ReadFile(filepath.Join(dir, layout.OutputDir, layout.CaseOutput(layout.StatusFile("7", 0), 1, false)))
			if want := "==> case 1 <==\nfirst\n==> case 2 <==\nlate\nsecond\n"; string(b) != want {
				t.Errorf("stdout file %q, want %q", b, want)
			}
		})
	}
}

// TestCaseOutputWriteErrorDoesNotKillTheCase: a file of OUTPUT=job that
// cannot be written (an outage longer than the retries) loses bytes, not
// the case.
func TestCaseOutputWriteErrorDoesNotKillTheCase(t *testing.T) {
	for _, kind := range []string{"sourced", "executed"} {
		t.Run(kind, func(t *testing.T) {
			r, cf, dir := outputRunner(t, kind, 1, io.Discard)
			ro, err := os.Open(filepath.Join(dir, layout.SingleCase))
			if err != nil {
				t.Fatal(err)
			}
			defer ro.Close()
			cf.out.w.F = ro // writes fail (EBADF: not transient, not retried)
			cf.begin(1)
			if code, sig, err := r.run(caseRequest{ID: "1", Comm: `echo a; sleep 0.3; echo b; sleep 0.3; echo c; exit 0`}); code != 0 || sig != 0 || err != nil {
				t.Errorf("case: status %d, signal %d, %v; want 0", code, sig, err)
			}
		})
	}
}

// TestCaseHeaderKeptThroughAnOutage: a case's header that could not be
// written comes with its first bytes once the file works again, so that
// farm output finds them where its start record says.
func TestCaseHeaderKeptThroughAnOutage(t *testing.T) {
	dir := t.TempDir()
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		testreq.Skip(t, "FARM_REQUIRE_LINUX", "no /dev/full")
	}
	defer full.Close()
	good, err := os.OpenFile(filepath.Join(dir, "f"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	s := &caseStream{}
	var notes strings.Builder
	s.w.F, s.w.Retry, s.w.Notes, s.w.Name = good, 50*time.Millisecond, &notes, "f"
	if off, ok := s.begin(5); !ok || off != 0 {
		t.Fatalf("begin: %d, %v", off, ok)
	}
	s.w.F = full // the disk is full: this write, header and all (20 bytes), gives up
	s.Write([]byte("lost\n"))
	s.w.F = good // it works again
	s.Write([]byte("kept\n"))
	b, _ := os.ReadFile(filepath.Join(dir, "f"))
	if string(b) != "==> case 5 <==\nkept\n" {
		t.Errorf("file %q: want the case's header before its bytes, and nothing else", b)
	}
	if !strings.Contains(notes.String(), "farm: 20 bytes of f were lost") {
		t.Errorf("the job's output was told %q", notes.String())
	}
}
