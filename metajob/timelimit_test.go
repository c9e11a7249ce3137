package metajob

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/farm-hpc/farm/farm"
	"github.com/farm-hpc/farm/internal/testreq"
	"github.com/farm-hpc/farm/layout"
	"github.com/farm-hpc/farm/status"
)

// limitRunners are both runners over a farm directory whose single_case.sh
// runs $COMM: the bash worker (sourced) and a program started per case.
func limitRunners(t *testing.T) map[string]caseRunner {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		testreq.Skip(t, "FARM_REQUIRE_LINUX", "no bash")
	}
	t.Setenv("TMPDIR", t.TempDir())
	out := map[string]caseRunner{}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, layout.SingleCase), []byte("#!/bin/bash\neval \"$COMM\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	fr, err := newForkRunner(dir, bash, os.Environ(), &slowWriter{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out["fork"] = fr
	// A program: an sh script, executed.
	dir2 := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir2, layout.SingleCase), []byte("#!/bin/sh\neval \"$COMM\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out["exec"] = &execRunner{dir: dir2, argv: []string{filepath.Join(dir2, layout.SingleCase)}, env: os.Environ(), out: os.Stderr}
	t.Cleanup(func() {
		for _, r := range out {
			r.close()
		}
	})
	return out
}

// TestCaseTimerEndsTheWholeGroup: a case past its limit is ended with what
// it started in the background, at the limit (SIGTERM), or at the limit
// plus the grace (SIGKILL) when it ignores SIGTERM; a case within its limit
// runs in its group and is left alone; and the runner's next case runs.
func TestCaseTimerEndsTheWholeGroup(t *testing.T) {
	for name, r := range limitRunners(t) {
		pidFile := filepath.Join(t.TempDir(), "pid")
		m := &Metajob{log: &slowWriter{}, Farm: &farm.Farm{Config: farm.Config{CaseKillGrace: 200 * time.Millisecond}}}
		for _, c := range []struct {
			comm     string
			limit    time.Duration
			want     syscall.Signal
			min, max time.Duration
		}{
			{"sleep 1000 & echo $! > " + pidFile + "; sleep 1000", 300 * time.Millisecond, syscall.SIGTERM, 300 * time.Millisecond, 2 * time.Second},
			{"trap '' TERM; sleep 1000 & echo $! > " + pidFile + "; while :; do sleep 0.05; done", 300 * time.Millisecond, syscall.SIGKILL, 500 * time.Millisecond, 3 * time.Second},
			// A case that ends before its limit: the limit far above its
			// 0.1 s, which a loaded machine (CI's) stretched past 300 ms.
			{"sleep 0.1 & echo $! > " + pidFile + "; wait", 3 * time.Second, 0, 0, 2 * time.Second},
		} {
			os.Remove(pidFile)
			start := time.Now()
			timer := m.startTimer(r, 1, start, c.limit)
			code, _, err := r.run(caseRequest{ID: "1", Comm: c.comm, Group: true})
			d := time.Since(start)
			sent := timer.end()
			if err != nil || sent != c.want || d < c.min || d > c.max {
				t.Errorf("%s: %q: code %d, %v after %v, signal %v; want signal %v within [%v, %v]", name, c.comm, code, err, d, sent, c.want, c.min, c.max)
			}
			b, _ := os.ReadFile(pidFile)
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatalf("%s: the case wrote no PID: %q", name, b)
			}
			gone := false
			for end := time.Now().Add(2 * time.Second); !gone && time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
				gone = syscall.Kill(pid, 0) != nil || zombie(pid)
			}
			if !gone {
				syscall.Kill(pid, syscall.SIGKILL)
				t.Errorf("%s: %q: its background process %d outlived it", name, c.comm, pid)
			}
			if g := r.group(); g != 0 {
				t.Errorf("%s: group %d once the case ended", name, g)
			}
		}
		if code, _, err := r.run(caseRequest{ID: "2", Comm: "exit 3"}); code != 3 || err != nil {
			t.Errorf("%s: the next case: %d, %v", name, code, err)
		}
	}
}

// zombie reports whether pid is a zombie (ended, not yet reaped by init).
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && i+2 < len(b) && b[i+2] == 'Z'
}

// TestMedianLimit: a limit that is a multiple of the median applies from
// MedianAfter succeeded cases on, from the job's own or the farm's record,
// whichever counts more, never under the floor.
func TestMedianLimit(t *testing.T) {
	var ml medianLimit
	for i := 0; i < MedianAfter-1; i++ {
		ml.succeeded(time.Second)
	}
	if med, n := ml.get(status.Cutoff{}); n != 0 || med != 0 {
		t.Fatalf("%d own cases: median %v of %d, want none", MedianAfter-1, med, n)
	}
	ml.succeeded(3 * time.Second)
	if med, n := ml.get(status.Cutoff{}); n != MedianAfter || med != 1 {
		t.Fatalf("median %v of %d, want 1 of %d", med, n, MedianAfter)
	}
	if med, n := ml.get(status.Cutoff{Median: 7, Succeeded: 1000}); n != 1000 || med != 7 {
		t.Fatalf("with the farm's record: median %v of %d, want 7 of 1000", med, n)
	}
}

// TestGracesFinish: the SIGKILLs still due when the meta-job ends are
// waited for: sent when due, or not at all once the group has ended by
// itself.
func TestGracesFinish(t *testing.T) {
	var gs graces
	var killed atomic.Int32
	lone := exec.Command("sleep", "1000")
	lone.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := lone.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- lone.Wait() }()
	born, _ := procStart(lone.Process.Pid)
	gs.add(lone.Process.Pid, born, 300*time.Millisecond, func() { killed.Add(1) })
	start := time.Now()
	gs.finish(&slowWriter{})
	if d := time.Since(start); killed.Load() != 1 || d < 250*time.Millisecond {
		t.Errorf("finish: %d kills after %v; want 1 when due (300 ms)", killed.Load(), d)
	}
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		lone.Process.Kill()
		t.Fatal("the group outlived its SIGKILL")
	}
	// A group that has ended: nothing to wait for.
	gs.add(lone.Process.Pid, born, time.Hour, nil)
	start = time.Now()
	gs.finish(&slowWriter{})
	if d := time.Since(start); d > time.Second {
		t.Errorf("finish waited %v for a group that had ended", d)
	}
}
