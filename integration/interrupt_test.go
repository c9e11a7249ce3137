package integration

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLocalWaitInterrupted: Ctrl-C (SIGINT) on 'farm wait' exits 130 and
// says the jobs go on, and they do: the farm then finishes.
func TestLocalWaitInterrupted(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, []string{"sleep 3", "true"}, "0-00:10")
	mustFarm(t, dir, "submit", "1", "--backend", "local")
	cmd := exec.Command(bin(t), "wait")
	cmd.Dir, cmd.Env = dir, os.Environ()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 130 {
		t.Fatalf("farm wait after SIGINT: %v, want exit 130; stderr %q", err, stderr.String())
	}
	if got := strings.TrimSpace(stderr.String()); !strings.HasPrefix(got, "farm: interrupted: the farm's jobs go on") || strings.Count(got, "\n") != 0 {
		t.Errorf("stderr %q: want one line saying the jobs go on", got)
	}
	if out := mustFarm(t, dir, "wait", "--timeout", "2m"); !strings.Contains(out, "2 cases: 2 succeeded") {
		t.Errorf("after the interrupted wait, wait said %q", out)
	}
}
