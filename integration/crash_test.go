package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// killsItsMetajob is a case that kills its own meta-job (kill -9, as the
// out-of-memory killer or a node's loss would end it): it walks up its
// parents to the process whose second argument is "metajob".
const killsItsMetajob = `p=$$; while [ "$p" -gt 1 ]; do ` +
	`if [ "$(tr '\0' '\n' < /proc/$p/cmdline | sed -n 2p)" = metajob ]; then kill -9 $p; exit 0; fi; ` +
	`p=$(awk '{print $4}' /proc/$p/stat); done; exit 3`

// A case that kills its meta-job every time stops -auto at the crash
// limit: with MAX_CRASHES=2 it crashes in run 1 and in run 2, the autojob
// then ends the chain with its line (no run 3), and farm Status --json
// shows it crashed after 2 attempts; every other case succeeded once.
func TestLocalAutoStopsAtTheCrashLimit(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, append([]string{killsItsMetajob}, repeat("sleep 0.2", 6)...), "0-00:10")
	setConfig(t, dir, "MAX_CRASHES", "2")
	// Without rescue within the run: the crash limit across runs, by
	// -auto (TestLocalRescueStopsAtTheCrashLimit has it within a run).
	setConfig(t, dir, "RESCUE_CHECK", "0")
	mustFarm(t, dir, "submit", "2", "-auto", "--backend", "local")
	r := mustFarmCode(t, dir, exitNotAllOK, "wait", "--timeout", "2m")
	if want := "7 cases: 6 succeeded, 0 failed, 1 interrupted, 0 never ran, 0 unfit; 1 of them crashed (MAX_CRASHES)\n"; !strings.HasSuffix(r.Out, want) {
		t.Errorf("wait said %q; want it to end %q", r.Out, want)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "farm.log"))
	log := string(b)
	if want := "Only failed or crashed cases left (0 failed, 1 crashed: their meta-job died under them MAX_CRASHES=2 times); cannot auto-resubmit; exiting."; !strings.Contains(log, want) {
		t.Errorf("farm.log does not say %q:\n%s", want, log)
	}
	if !strings.Contains(log, "resubmit: run 2") || strings.Contains(log, "resubmit: run 3") {
		t.Errorf("want exactly one resubmit (run 2):\n%s", log)
	}
	// farm.log says what the resubmit ran, with the cases' attempts.
	if want := "resubmit: run 2 runs the 1 case(s) that failed, were interrupted, were unfit or never ran; attempts so far: 1 once"; !strings.Contains(log, want) {
		t.Errorf("farm.log does not say %q:\n%s", want, log)
	}
	// farm Status calls it crashed, as README does: in its table (with no
	// STATUS and no duration known: its meta-job died under it) and in
	// its JSON (null for both).
	st := statusJSON(t, dir)
	if c := st[1]; c.State != "crashed" || c.Attempts != 2 || c.Crashes != 2 || !c.Crashed {
		t.Errorf("case 1: %+v; want crashed, 2 attempts, 2 crashes", c)
	}
	if c := statusObjects(t, dir)[1]; c["status"] != nil || c["seconds"] != nil {
		t.Errorf("case 1: %v; want \"status\": null, \"seconds\": null", c)
	}
	if row := strings.Fields(strings.Split(mustFarm(t, dir, "Status"), "\n")[1]); len(row) < 4 || row[1] != "crashed" || row[2] != "-" || row[3] != "-" {
		t.Errorf("farm Status row of case 1: %q; want crashed, STATUS -, SECONDS -", row)
	}
	if out := mustFarm(t, dir, "Status", "--failed"); !strings.Contains(out, "\n1   crashed ") {
		t.Errorf("farm Status --failed:\n%s\nwant case 1, crashed", out)
	}
	for id := int64(2); id <= 7; id++ {
		if c := st[id]; c.State != "succeeded" || c.Crashes != 0 || c.Crashed {
			t.Errorf("case %d: %+v; want succeeded, no crash", id, c)
		}
	}
	// resubmit leaves it out and says how to run it.
	r = farmIn(t, dir, nil, "resubmit", "1", "--backend", "local")
	if want := "nothing to resubmit: the 1 case(s) left are crashed"; r.Code == 0 || !strings.Contains(r.Err, want) {
		t.Errorf("resubmit: exit %d, %q; want an error saying %q", r.Code, r.Err, want)
	}
}

// A case cut off by its meta-job's time limit is interrupted, not crashed:
// the meta-job catches the engine's SIGTERM and records it (an I record).
func TestLocalTimeLimitIsNotACrash(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, []string{"sleep 60"}, "0:03")
	setConfig(t, dir, "MAX_CRASHES", "1")
	mustFarmShort(t, dir, "submit", "1", "--backend", "local")
	mustFarmCode(t, dir, exitNotAllOK, "wait", "--timeout", "1m")
	st := statusJSON(t, dir)
	if c := st[1]; c.State != "interrupted" || c.Attempts != 1 || c.Crashes != 0 || c.Crashed {
		t.Errorf("case 1: %+v; want interrupted, 1 attempt, no crash", c)
	}
}
