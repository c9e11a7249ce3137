package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLocalClaimStateRemovedMidRun: the claim state's chain directories
// where the meta-jobs claim (the run's lanes) removed while they run is
// reported within seconds as damage,
// naming what is gone and the command that mends it; the advice works:
// once the jobs have ended, farm repair and farm resubmit run every case
// that did not succeed, each succeeding once.
func TestLocalClaimStateRemovedMidRun(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, repeat("sleep 0.3", 60), "0-00:10")
	if r := farmIn(t, dir, nil, "submit", "2", "--backend", "local"); r.Code != 0 {
		t.Fatal(r.Err)
	}
	t.Cleanup(func() { farmIn(t, dir, nil, "kill") })
	waitFor(t, 30*time.Second, "4 cases to end", func() bool {
		rec := readRecords(t, dir)
		return len(rec.Ends) >= 4
	})
	chains, _ := filepath.Glob(filepath.Join(dir, "MISC", "lanes.*", "[0-9]*"))
	if len(chains) != 1 {
		t.Fatalf("lanes %v, want one (2 meta-jobs)", chains)
	}
	if err := os.RemoveAll(chains[0]); err != nil {
		t.Fatal(err)
	}
	// The meta-jobs end within seconds (they retried for 5 minutes on
	// 709e888): farm wait returns well within its 40 s.
	if r := farmIn(t, dir, nil, "wait", "--timeout", "40s"); r.Code != exitNotAllOK {
		outs, _ := filepath.Glob(filepath.Join(dir, "OUTPUT", "*.out"))
		for _, o := range outs {
			b, _ := os.ReadFile(o)
			t.Logf("%s:\n%s", o, b)
		}
		t.Fatalf("farm wait: exit %d (%s)", r.Code, r.Err)
	}
	outs, _ := filepath.Glob(filepath.Join(dir, "OUTPUT", "*.out"))
	said := 0
	for _, o := range outs {
		b, _ := os.ReadFile(o)
		if strings.Contains(string(b), "is damaged (the chain directory is gone)") && strings.Contains(string(b), "'farm repair'") {
			said++
		}
	}
	if said == 0 {
		t.Errorf("no meta-job's output says the claim state is damaged and names farm repair")
	}
	mustFarm(t, dir, "repair")
	if r := farmIn(t, dir, nil, "resubmit", "2"); r.Code != 0 {
		t.Fatalf("resubmit after the repair: %s", r.Err)
	}
	mustFarm(t, dir, "wait", "--timeout", "2m")
	st := statusJSON(t, dir)
	for id := int64(1); id <= 60; id++ {
		if st[id].State != "succeeded" {
			t.Errorf("case %d: %+v", id, st[id])
		}
	}
	total := 0
	for _, n := range readRecords(t, dir).Ends {
		total += n
	}
	if total != 60 {
		t.Errorf("%d end records for 60 cases, want each case run once (a meta-job that meets the damage ends between cases)", total)
	}
}
