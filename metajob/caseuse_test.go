package metajob

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/farm-hpc/farm/layout"
)

// A case of the bash worker too short for its peak memory to be asked
// has its CPU time known, and no peak.
func TestForkRunnerUseOfAShortCase(t *testing.T) {
	r := newUseRunner(t, "/nonexistent/farm")
	defer r.close()
	if code, _, err := r.run(caseRequest{ID: "1", Comm: "true"}); code != 0 || err != nil {
		t.Fatalf("case: %d, %v", code, err)
	}
	if u := r.use(); u.RSS != 0 || !u.HasCPU || u.CPU > 1e8 {
		t.Errorf("use %+v", u)
	}
}

// A case that ran long enough ends replaced by the end program, which says
// what it used on the worker's fd 4 and exits with the case's STATUS, also
// when the script exits itself; in a bash without EPOCHREALTIME too (bash
// 4: SECONDS).
func TestForkRunnerUseOfALongCase(t *testing.T) {
	end := filepath.Join(t.TempDir(), "end")
	if err := os.WriteFile(end, []byte("#!/bin/sh\n[ \"$1\" = __case-end ] || exit 99\necho \"u 4242 1500000\" >&4\nexit $2\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, script := range []string{"", "unset EPOCHREALTIME\n" + workerScript} {
		r := newUseRunner(t, end)
		r.script = script
		for _, tc := range []struct {
			comm string
			code int
		}{{"sleep 1.1", 0}, {"sleep 1.1; exit 7", 7}, {"sleep 1.1; STATUS=3", 3}} {
			code, _, err := r.run(caseRequest{ID: "1", Comm: tc.comm})
			if code != tc.code || err != nil {
				t.Errorf("%q: status %d, %v; want %d", tc.comm, code, err, tc.code)
			}
			if u := r.use(); u.RSS != 4242 || !u.HasCPU || u.CPU != 1500*time.Millisecond {
				t.Errorf("%q: use %+v", tc.comm, u)
			}
		}
		r.close()
	}
}

// A program run as single_case.sh has what it used from its rusage.
func TestExecRunnerUse(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatal("this test runs python3, which is not installed: apt-get install python3")
	}
	dir := t.TempDir()
	prog := "#!/usr/bin/env python3\nb = b'x' * (50 << 20)\n"
	if err := os.WriteFile(filepath.Join(dir, layout.SingleCase), []byte(prog), 0o755); err != nil {
		t.Fatal(err)
	}
	r, err := newCaseRunner(dir, "/bin/bash", "", os.Environ(), os.Stderr, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	if code, _, err := r.run(caseRequest{ID: "1"}); code != 0 || err != nil {
		t.Fatalf("case: %d, %v", code, err)
	}
	if u := r.use(); u.RSS < 50<<10 || !u.HasCPU {
		t.Errorf("use %+v", u)
	}
}

func newUseRunner(tb testing.TB, endBin string) *forkRunner {
	dir := tb.TempDir()
	if err := os.WriteFile(filepath.Join(dir, layout.SingleCase), []byte("#!/bin/bash\neval \"$COMM\"\n"), 0o755); err != nil {
		tb.Fatal(err)
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		tb.Fatal("the case runner needs bash: ", err)
	}
	r, err := newForkRunner(dir, bash, os.Environ(), os.Stderr, nil)
	if err != nil {
		tb.Fatal(err)
	}
	r.endBin = endBin
	return r
}

// BenchmarkForkRunnerCase is the bash worker's cost of a trivial case
// (true), with the EXIT trap, the reading of the time and the worker's
// /proc/PID/stat read. Compare checkouts interleaved (BENCHMARKS.md).
func BenchmarkForkRunnerCase(b *testing.B) {
	r := newUseRunner(b, "/nonexistent/farm")
	defer r.close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if code, _, err := r.run(caseRequest{ID: "1", Comm: "true"}); code != 0 || err != nil {
			b.Fatalf("case: %d, %v", code, err)
		}
	}
}

// BenchmarkForkRunnerCaseFramed is BenchmarkForkRunnerCase with OUTPUT=job:
// its case writes a line, which the runner copies to the loop's file after
// the case's header, and each case begins with the files' offsets read.
// Its baseline is BenchmarkForkRunnerCaseWrites.
func BenchmarkForkRunnerCaseFramed(b *testing.B) {
	benchmarkWrites(b, true)
}

// BenchmarkForkRunnerCaseWrites: a case that writes a line, into the job's
// output (OUTPUT=stream; here a file in the test's directory).
func BenchmarkForkRunnerCaseWrites(b *testing.B) {
	benchmarkWrites(b, false)
}

func benchmarkWrites(b *testing.B, framed bool) {
	r := newUseRunner(b, "/nonexistent/farm")
	defer r.close()
	out, err := os.Create(filepath.Join(b.TempDir(), "job.out"))
	if err != nil {
		b.Fatal(err)
	}
	defer out.Close()
	r.out = out
	if framed {
		os.Mkdir(filepath.Join(r.dir, layout.OutputDir), 0o755)
		if r.frames, err = openCaseFrames(r.dir, layout.StatusFile("1", 0), 1, io.Discard); err != nil {
			b.Fatal(err)
		}
		defer r.frames.close()
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if framed {
			r.frames.begin(int64(i))
		}
		if code, _, err := r.run(caseRequest{ID: "1", Comm: "echo a line of output"}); code != 0 || err != nil {
			b.Fatalf("case: %d, %v", code, err)
		}
	}
}
