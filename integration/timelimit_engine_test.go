package integration

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Time limits of cases on the batch systems: the same as on the local
// backend (TestLocalCaseTimeLimit), kept by the meta-job. These tests run
// where Slurm or Grid Engine is up (integration/slurm-up, sge-up), and skip
// loudly elsewhere (FARM_REQUIRE_SLURM, FARM_REQUIRE_SGE make them fail).

func TestSlurmCaseTimeLimit(t *testing.T) { testCaseTimeLimit(t, slurmEngine) }
func TestSGECaseTimeLimit(t *testing.T)   { testCaseTimeLimit(t, sgeEngine) }

// testCaseTimeLimit: a case with #FARM time=5s that runs sleep 1000 with a
// background grandchild is ended at its limit, the grandchild with it
// (checked when the case ran on this host), and recorded timed out; the
// meta-job's next case runs.
func testCaseTimeLimit(t *testing.T, e engine) {
	e.need(t)
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "grandchild")
	dir := e.farm(t, []string{`sh -c 'sleep 1000 & echo $! > ` + pidFile + `; sleep 1000' #FARM time=5s`, "true"}, "0-00:10")
	setConfig(t, dir, "CASE_KILL_GRACE", "2")
	mustFarm(t, dir, "submit", "1", "--backend", e.name)
	mustFarmCode(t, dir, exitNotAllOK, "wait", "--timeout", "4m")
	st := statusJSON(t, dir)
	if c := st[1]; c.State != "timed out" || c.Status != 15 || c.Seconds < 5 || c.Seconds > 6 {
		t.Errorf("case 1: %+v; want timed out by signal 15 after 5 to 6 s", c)
	}
	if c := st[2]; c.State != "succeeded" {
		t.Errorf("case 2: %+v", c)
	}
	host, _ := os.Hostname()
	b, err := os.ReadFile(pidFile)
	pid, perr := strconv.Atoi(strings.TrimSpace(string(b)))
	switch {
	case err != nil || perr != nil:
		t.Errorf("the case wrote no PID: %q %v", b, err)
	case st[1].Host != host && st[1].Host != strings.SplitN(host, ".", 2)[0]:
		t.Logf("case 1 ran on %s, not here (%s): its grandchild is not looked for", st[1].Host, host)
	default:
		if !awaitGone(pid, 5*time.Second) {
			t.Errorf("case 1's background grandchild %d outlived it", pid)
		}
	}
}

func TestSlurmJobLimitInterruptsCaseWithLimit(t *testing.T) {
	testJobLimitInterruptsCaseWithLimit(t, slurmEngine)
}
func TestSGEJobLimitInterruptsCaseWithLimit(t *testing.T) {
	testJobLimitInterruptsCaseWithLimit(t, sgeEngine)
}

// testJobLimitInterruptsCaseWithLimit: a case with a time limit longer than
// its job's runs in a process group of its own, and the job's time limit
// still ends it: it is interrupted, not timed out.
func testJobLimitInterruptsCaseWithLimit(t *testing.T, e engine) {
	e.need(t)
	t.Parallel()
	dir := e.farm(t, []string{"true", "sleep 300 #FARM time=1h"}, "1")
	mustFarm(t, dir, "submit", "1", "--backend", e.name)
	mustFarmCode(t, dir, exitNotAllOK, "wait", "--timeout", "4m")
	st := statusJSON(t, dir)
	if c := st[2]; c.State != "interrupted" {
		t.Errorf("case 2: %+v; want interrupted by its job's time limit", c)
	}
}
