package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLocalStatusFlagsCaseStartedTwiceInARun: farm claims a case once per
// run, so two start records of one case in one run must never be; if they
// ever are, farm Status (and query and wait, which read the same records)
// says so on stderr, naming the case, the run, the starts and the files,
// and farm Status --json marks the case's row. A forged status file plays
// the second start.
func TestLocalStatusFlagsCaseStartedTwiceInARun(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, repeat("true", 6), "0-00:10")
	env := privateSlots(t, filepath.Dir(dir))
	if r := farmIn(t, dir, env, "submit", "2", "--backend", "local"); r.Code != 0 {
		t.Fatalf("submit: %s %s", r.Out, r.Err)
	}
	if r := farmIn(t, dir, env, "wait", "--timeout", "1m"); r.Code != 0 {
		t.Fatalf("wait: exit %d %s %s", r.Code, r.Out, r.Err)
	}
	if r := farmIn(t, dir, nil, "Status"); r.Code != 0 || r.Err != "" {
		t.Fatalf("Status of a farm where every case ran once: exit %d, stderr %q", r.Code, r.Err)
	}
	// Which job ran case 3?
	var first string
	files, _ := filepath.Glob(filepath.Join(dir, "STATUSES", "status.*"))
	for _, f := range files {
		if b, _ := os.ReadFile(f); strings.Contains(string(b), "\nS 3 ") {
			first = filepath.Base(f)
		}
	}
	if first == "" {
		t.Fatal("no status file shows case 3 started")
	}
	now := float64(time.Now().UnixMilli()) / 1e3
	forged := fmt.Sprintf("# farm-status v1 job=999 run=1 host=forged\nS 3 %.3f forged\nE 3 0 %.3f 0.001 forged\nQ %.3f No cases left; exiting.\n", now, now, now)
	if err := os.WriteFile(filepath.Join(dir, "STATUSES", "status.999"), []byte(forged), 0o644); err != nil {
		t.Fatal(err)
	}
	want := "farm: warning: case 3 started 2 times in run 1 (STATUSES/" + first + ", STATUSES/status.999): farm claims a case once per run; please report this\n"

	r := farmIn(t, dir, nil, "Status")
	if r.Code != 0 || r.Err != want {
		t.Errorf("farm Status: exit %d, stderr %q; want exit 0 and %q", r.Code, r.Err, want)
	}
	if strings.Count(r.Out, "\n") != 7 { // the header and the 6 cases
		t.Errorf("farm Status lists:\n%s", r.Out)
	}
	for id, row := range statusJSON(t, dir) {
		if id == 3 && (row.Starts != 2 || row.StartsRun != 1) || id != 3 && (row.Starts != 0 || row.StartsRun != 0) {
			t.Errorf("Status --json row of case %d: %+v", id, row)
		}
	}
	out := mustFarm(t, dir, "Status", "--json")
	if n := strings.Count(out, `"starts":`); n != 1 || !strings.Contains(out, `"run":1,"attempts":2,"crashes":0,"starts":2,"starts_run":1}`) {
		t.Errorf("Status --json has %d \"starts\" fields, want 1 in case 3's row:\n%s", n, out)
	}
	for _, cmd := range [][]string{{"query"}, {"wait"}} {
		if r := farmIn(t, dir, nil, cmd...); r.Code != 0 || r.Err != want {
			t.Errorf("farm %s: exit %d, stderr %q; want exit 0 and %q", cmd[0], r.Code, r.Err, want)
		}
	}
}
