package rigtest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/farm-hpc/farm/integration/harness"
)

// waitOrTell polls cond until it holds or d passes; then it fails the test
// with what the rig's Slurm and processes looked like (rigState), so that
// a wait that times out in CI says why.
func waitOrTell(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; the rig then:\n%s", d, what, rigState())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// jobsGone waits until no job of the farm in dir is in Slurm's queue any
// more (pending, running or completing), so that the next farm's jobs find
// the nodes free: a farm's meta-jobs have said "No cases left; exiting."
// well before Slurm has ended their jobs, and a job that does not end (a
// process stuck on the filesystem after a brick's restart) would otherwise
// show as the next farm's jobs not starting.
func jobsGone(t *testing.T, dir string) {
	t.Helper()
	ids := harness.JobIDs(dir)
	if len(ids) == 0 {
		return
	}
	waitOrTell(t, time.Minute, fmt.Sprintf("the farm's jobs %s to leave Slurm's queue", strings.Join(ids, ",")), func() bool {
		out, err := exec.Command("squeue", "-h", "-j", strings.Join(ids, ","), "-o", "%i").Output()
		return err == nil && strings.TrimSpace(string(out)) == ""
	})
}

// rigState is what a failed wait reports: Slurm's jobs and nodes, and the
// processes that are stopped or in uninterruptible sleep (a meta-job
// stopped and not continued, or one stuck on a filesystem request).
func rigState() string {
	var b strings.Builder
	for _, c := range [][]string{
		{"squeue", "-t", "all", "-o", "%.8i %.10P %.9T %.8M %.12N %r"},
		{"sinfo", "-N", "-o", "%N %P %T %E"},
	} {
		out, err := exec.Command(c[0], c[1:]...).CombinedOutput()
		fmt.Fprintf(&b, "$ %s\n%s", strings.Join(c, " "), out)
		if err != nil {
			fmt.Fprintf(&b, "(%v)\n", err)
		}
	}
	b.WriteString("processes stopped (T) or in uninterruptible sleep (D):\n")
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		s, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) STATE ...: comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(s, ')')
		if i < 0 || i+2 >= len(s) {
			continue
		}
		state := s[i+2]
		if state != 'T' && state != 'D' {
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "cmdline"))
		wchan, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "wchan"))
		fmt.Fprintf(&b, "  %s %c %s [%s]\n", filepath.Base(filepath.Dir(p)), state,
			strings.ReplaceAll(strings.TrimSpace(string(cmd)), "\x00", " "), wchan)
	}
	return b.String()
}
