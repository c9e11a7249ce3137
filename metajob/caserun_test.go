package metajob

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/farm-hpc/farm/farm"
	"github.com/farm-hpc/farm/internal/testreq"
	"github.com/farm-hpc/farm/layout"
)

// slowWriter takes its time over every write, as an output file on a busy
// network filesystem does.
type slowWriter struct {
	mu sync.Mutex
	b  strings.Builder
	n  int
}

func (w *slowWriter) Write(p []byte) (int, error) {
	time.Sleep(time.Millisecond)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n += len(p)
	if w.b.Len() < 1<<16 {
		w.b.Write(p)
	}
	return len(p), nil
}

func (w *slowWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestCaseRunnerReturnsWhileABackgroundProcessWrites: a case that leaves a
// process behind writing to its output without end has ended all the
// same; the runner returns its status instead of copying that output for
// ever, and the case's own output comes before what the meta-job writes
// next.
func TestCaseRunnerReturnsWhileABackgroundProcessWrites(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("TMPDIR", t.TempDir())
	if err := os.WriteFile(filepath.Join(dir, layout.SingleCase), []byte("#!/bin/bash\neval \"$COMM\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		testreq.Skip(t, "FARM_REQUIRE_LINUX", "no bash")
	}
	out := &slowWriter{}
	r, err := newForkRunner(dir, bash, os.Environ(), out, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	type result struct{ code int }
	done := make(chan result, 1)
	go func() {
		code, _, _ := r.run(caseRequest{ID: "1", Comm: `echo case-one-says-hello; cat /dev/zero & echo $! > bg.pid; sleep 0.2; exit 3`})
		done <- result{code}
	}()
	select {
	case res := <-done:
		if res.code != 3 {
			t.Errorf("case status %d, want 3", res.code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the runner did not return 30 s after the case ended, while a background process of the case wrote on")
	}
	b, err := os.ReadFile(filepath.Join(dir, "bg.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if pid > 0 {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	t.Logf("copied %d bytes", out.n)
	if got := out.String(); !strings.HasPrefix(got, "case-one-says-hello\n") {
		t.Errorf("output starts %.40q; want the case's own line first", got)
	}
	// The next case runs normally.
	if code, _, err := r.run(caseRequest{ID: "2", Comm: "exit 0"}); err != nil || code != 0 {
		t.Errorf("next case: status %d, %v", code, err)
	}
}

// TestCaseRunnerGoesOnWhenSingleCaseIsGoneForAMoment: a single_case.sh
// that cannot be read at the next batch (an editor or git replacing it)
// does not stop the meta-job: the cases go on with the copy it has, and an
// edit is picked up once the file is back.
func TestCaseRunnerGoesOnWhenSingleCaseIsGoneForAMoment(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("TMPDIR", t.TempDir())
	sc := filepath.Join(dir, layout.SingleCase)
	r, out := startRunner(t, dir, "/bin/bash", "#!/bin/bash\nexit 4\n")
	defer r.close()
	if code, _, _ := r.run(caseRequest{ID: "1", Comm: ""}); code != 4 {
		t.Fatalf("status %d, want 4", code)
	}
	os.Remove(sc)
	if err := r.refresh(); err != nil {
		t.Fatalf("refresh with single_case.sh gone: %v; want the copy kept", err)
	}
	if code, _, _ := r.run(caseRequest{ID: "2", Comm: ""}); code != 4 {
		t.Errorf("status %d with the copy, want 4", code)
	}
	if !strings.Contains(out.String(), "the cases go on with the copy") {
		t.Errorf("output %q does not say the copy is used", out.String())
	}
	if err := os.WriteFile(sc, []byte("#!/bin/bash\nexit 5\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := r.refresh(); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := r.run(caseRequest{ID: "3", Comm: ""}); code != 5 {
		t.Errorf("status %d after the edit, want 5", code)
	}
}

// TestCaseRunnerWithoutAUsableTMPDIR: when the node-local directory cannot
// be made, the runner says so and sources the farm's own single_case.sh.
func TestCaseRunnerWithoutAUsableTMPDIR(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("TMPDIR", filepath.Join(dir, "no-such-dir"))
	r, out := startRunner(t, dir, "/bin/bash", "#!/bin/bash\nexit 6\n")
	defer r.close()
	if code, _, err := r.run(caseRequest{ID: "1", Comm: ""}); err != nil || code != 6 {
		t.Errorf("status %d, %v; want 6 from the farm's own single_case.sh", code, err)
	}
	if !strings.Contains(out.String(), "sourcing single_case.sh from the farm directory instead") {
		t.Errorf("output %q does not say where single_case.sh comes from", out.String())
	}
}

// TestCaseRunnerIncompleteUTF8AtLineEnd: a command ending in an incomplete
// UTF-8 sequence, in a UTF-8 locale, runs and returns (the worker once
// read the newline after it as part of a character and waited for ever),
// and the cases run in the user's locale.
func TestCaseRunnerIncompleteUTF8AtLineEnd(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("TMPDIR", t.TempDir())
	if err := os.WriteFile(filepath.Join(dir, layout.SingleCase), []byte("#!/bin/bash\neval \"$COMM\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "LC_ALL=C.UTF-8")
	var out strings.Builder
	r, err := newForkRunner(dir, "/bin/bash", env, &out, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	type result struct{ code int }
	done := make(chan result, 2)
	go func() {
		c1, _, _ := r.run(caseRequest{ID: "1", Comm: "printf %s\\| caf\xe9"})
		c2, _, _ := r.run(caseRequest{ID: "2", Comm: `x="é"; echo "${#x} $LC_ALL"`})
		done <- result{c1 + c2}
	}()
	select {
	case res := <-done:
		if res.code != 0 {
			t.Errorf("statuses sum to %d, want 0", res.code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the runner did not return within 10 s: the worker waits for a line already sent")
	}
	if got := out.String(); got != "caf\xe9|1 C.UTF-8\n" {
		t.Errorf("output %q, want the bytes as given, then é as one character in the user's locale", got)
	}
}

// startRunner writes single_case.sh into dir and starts a fork runner on
// it with bash, its output to a slowWriter.
func startRunner(t *testing.T, dir, bash, script string) (*forkRunner, *slowWriter) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, layout.SingleCase), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	out := &slowWriter{}
	r, err := newForkRunner(dir, bash, os.Environ(), out, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r, out
}

// TestCaseRunnerCallsSingleCaseAsMETADoes: a bash single_case.sh gets the
// run's table and the case's line number as $1 and $2 and N_cases in its
// environment, as META's scripts call it (a program run directly gets them
// as FARM_TABLE and FARM_LINE, and no arguments); a script that ends without
// exit, as META's does, reports $STATUS; a STATUS that is not a number,
// or over 255, never counts as a success. The same for a script sourced
// by the bash worker and for one run as a program.
func TestCaseRunnerCallsSingleCaseAsMETADoes(t *testing.T) {
	const script = `#!/bin/bash
echo "args=${1-$FARM_TABLE}:${2-$FARM_LINE} n=$N_cases id=$ID comm=$COMM"
case $COMM in
exit*) eval "$COMM" ;;
keep) ;;
*) STATUS=$COMM ;;
esac
echo "the last command succeeds"
`
	statuses := []struct {
		comm string
		want int
	}{
		{"3", 3}, {"0", 0}, {"000", 0}, {"007", 7}, {"256", 255}, {"99999999999999999999", 255},
		{"abc", 1}, {"-1", 1}, {"exit 4", 4}, {"keep", 0},
	}
	check := func(t *testing.T, run func(caseRequest) (int, int, error), out func() string) {
		for i, s := range statuses {
			c := caseRequest{ID: strconv.Itoa(10 + i), Comm: s.comm, Table: "MISC/table.run2", Line: int64(i + 2), TableLines: 42}
			code, _, err := run(c)
			if err != nil || code != s.want {
				t.Errorf("STATUS=%q: status %d, %v; want %d", s.comm, code, err, s.want)
			}
			want := "args=MISC/table.run2:" + strconv.Itoa(i+2) + " n=42 id=" + c.ID + " comm=" + s.comm
			if !strings.Contains(out(), want) {
				t.Errorf("the script's output %q does not hold %q", out(), want)
			}
		}
	}
	t.Run("sourced", func(t *testing.T) {
		dir := t.TempDir()
		t.Setenv("TMPDIR", t.TempDir())
		r, out := startRunner(t, dir, "/bin/bash", script)
		defer r.close()
		check(t, r.run, out.String)
	})
	t.Run("executed", func(t *testing.T) {
		dir := t.TempDir()
		// Not a bash script by its first line: run as a program.
		sc := filepath.Join(dir, layout.SingleCase)
		if err := os.WriteFile(sc, []byte(strings.Replace(script, "#!/bin/bash", "#!/bin/dash", 1)+"exit ${STATUS:-0}\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := os.CreateTemp(t.TempDir(), "out")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		r, err := newCaseRunner(dir, "/bin/bash", "", os.Environ(), f, f)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := r.(*execRunner); !ok {
			t.Fatalf("runner %T, want an execRunner", r)
		}
		out := func() string { b, _ := os.ReadFile(f.Name()); return string(b) }
		// A program reports its exit status only: keep the cases that
		// exit with a status bash can give.
		statuses = statuses[:4]
		check(t, r.run, out)
	})
}

// TestExecRunnerNotExecutableAdvice (issue 21): a single_case.sh run as a
// program whose x bit was taken away after the meta-job started fails its
// case with the advice that works (chmod +x, or a bash script, which farm
// sources), a UserError, not with a bare "permission denied", which the
// CLI words as a problem with the farm directory's owner and modes.
func TestExecRunnerNotExecutableAdvice(t *testing.T) {
	dir := t.TempDir()
	sc := filepath.Join(dir, layout.SingleCase)
	if err := os.WriteFile(sc, []byte("#!/usr/bin/env python3\nprint('hi')\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := newCaseRunner(dir, "/bin/bash", "", os.Environ(), f, f)
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	if err := os.Chmod(sc, 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = r.run(caseRequest{ID: "1", Comm: "x"})
	want := `single_case.sh:1: "#!/usr/bin/env python3" is not bash's #! line, so farm runs single_case.sh as a program, and it is not executable: make it executable (chmod +x single_case.sh), or make it a bash script (#!/bin/bash), which farm sources; then 'farm resubmit N' runs the cases left`
	if err == nil || err.Error() != want || !farm.IsUserError(err) {
		t.Errorf("run = %v; want the UserError %q", err, want)
	}
}

// refreshCounter is a case runner that counts its refreshes.
type refreshCounter struct {
	nopRunner
	n *int
}

func (r refreshCounter) refresh() error { *r.n++; return nil }

// TestFirstBatchDoesNotLookAtSingleCaseAgain: a loop's runner copied
// single_case.sh when it was made, so the loop's first batch does not look
// at the file again; every batch after it does, once.
func TestFirstBatchDoesNotLookAtSingleCaseAgain(t *testing.T) {
	m, _, _ := lookFarm(t)
	refreshes := 0
	s := &loop{k: 2, runner: refreshCounter{n: &refreshes}, copied: true}
	m.do(func(o *owner) { o.queue, o.bs.max = nil, 2 })
	batches := func() int { return owned(m, func(o *owner) int { return o.batch }) }
	for i := 0; i < 4; i++ {
		if _, why, err := nextCase(m, s); why != going || err != nil {
			t.Fatalf("case %d: %q, %v", i+1, why, err)
		}
		if want := max(batches()-1, 0); refreshes != want {
			t.Fatalf("after %d cases of %d batches: %d refreshes, want %d", i+1, batches(), refreshes, want)
		}
	}
	if batches() < 2 {
		t.Fatalf("%d batches: want the cases to span 2 or more", batches())
	}
}
