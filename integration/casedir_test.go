package integration

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/farm-hpc/farm/integration/harness"
)

// TestLocalKill9MetajobCaseDirRemoved: a meta-job killed with kill -9
// leaves its node-local directory ($TMPDIR/farm-case-*, the copy of
// single_case.sh); the next meta-job on this host removes it, and removes
// its own when it ends.
func TestLocalKill9MetajobCaseDirRemoved(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	env := []string{"TMPDIR=" + tmp}
	caseDirs := func() []string {
		m, _ := filepath.Glob(filepath.Join(tmp, "farm-case-*"))
		return m
	}
	dir := newFarm(t, []string{`if [ -e ../once ]; then true; else touch ../once; sleep 300; fi`, "true"}, "0-00:10")
	if r := farmIn(t, dir, env, "submit", "1", "--backend", "local"); r.Code != 0 {
		t.Fatalf("submit: %s", r.Err)
	}
	t.Cleanup(func() { farmIn(t, dir, nil, "kill") })
	// Killed once it made ../once: its second run ends at once.
	waitFor(t, 30*time.Second, "case 1 to start", func() bool {
		_, err := os.Stat(filepath.Join(dir, "once"))
		return err == nil
	})
	leaked := caseDirs()
	if len(leaked) != 1 {
		t.Fatalf("case directories %v, want the meta-job's one", leaked)
	}
	pgid := jobPGID(t, dir, harness.JobIDs(dir)[0])
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	mustFarmCode(t, dir, exitNotAllOK, "wait", "--timeout", "1m")
	if _, err := os.Stat(leaked[0]); err != nil {
		t.Fatalf("the killed meta-job's directory is already gone (%v): the test shows nothing", err)
	}
	if r := farmIn(t, dir, env, "resubmit", "1"); r.Code != 0 {
		t.Fatalf("resubmit: %s", r.Err)
	}
	mustFarm(t, dir, "wait", "--timeout", "1m")
	if left := caseDirs(); len(left) != 0 {
		t.Errorf("case directories left: %v", left)
	}
}
