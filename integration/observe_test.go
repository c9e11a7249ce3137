package integration

import (
	"crypto/sha256"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLocalQueryListKillPruneJSON(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, repeat("sleep 30", 6), "0-00:10")
	// Two meta-jobs can run; the third stays pending: all slots taken. The
	// slots are the farm's own (TMPDIR holds the slot files): the jobs of
	// the tests running meanwhile must not take them.
	r := farmIn(t, dir, []string{"FARM_LOCAL_SLOTS=2", "TMPDIR=" + t.TempDir()}, "submit", "3", "--backend", "local")
	if r.Code != 0 {
		t.Fatal(r.Err)
	}
	waitFor(t, 20*time.Second, "two cases running", func() bool {
		var q struct {
			Jobs      struct{ Queued, Running, Finished int }
			FarmCases struct{ Total, Running, Left int64 } `json:"farm_cases"`
		}
		json.Unmarshal([]byte(mustFarm(t, dir, "query", "--json")), &q)
		return q.Jobs.Running == 2 && q.Jobs.Queued == 1 && q.FarmCases.Running == 2 && q.FarmCases.Total == 6 && q.FarmCases.Left == 4
	})
	var jobs []struct {
		ID, State, Kind string
		Run             int
		Running         int64
	}
	if err := json.Unmarshal([]byte(mustFarm(t, dir, "list", "--json")), &jobs); err != nil {
		t.Fatal(err)
	}
	states := map[string]int{}
	for _, j := range jobs {
		states[j.State]++
		if j.Run != 1 || j.Kind != "meta" {
			t.Errorf("job %+v", j)
		}
	}
	if states["RUNNING"] != 2 || states["PENDING"] != 1 {
		t.Errorf("list states %v", states)
	}
	out := mustFarm(t, dir, "prune")
	if !strings.Contains(out, "Cancelled 1 job(s)") {
		t.Errorf("prune said %q", out)
	}
	if r := farmIn(t, dir, nil, "clean", "--yes"); r.Code != 1 || !strings.Contains(r.Err, "pending or running") {
		t.Errorf("clean while running: exit %d %q", r.Code, r.Err)
	}
	out = mustFarm(t, dir, "kill")
	if !strings.Contains(out, "Cancelled 2 job(s)") {
		t.Errorf("kill said %q", out)
	}
	mustFarmCode(t, dir, exitNotAllOK, "wait", "--timeout", "30s")
	st := statusJSON(t, dir)
	n := 0
	for _, c := range st {
		if c.State != "interrupted" {
			t.Errorf("case %+v after kill, want interrupted", c)
		}
		n++
	}
	if n != 2 {
		t.Errorf("%d cases with records, want the 2 that ran", n)
	}
	log, _ := os.ReadFile(filepath.Join(dir, "farm.log"))
	for _, want := range []string{"submit: run 1", "prune: cancelled 1", "kill: cancelled 2"} {
		if !strings.Contains(string(log), want) {
			t.Errorf("farm.log lacks %q:\n%s", want, log)
		}
	}
}

func TestLocalCleanKeepsUserFilesByteIdentical(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, []string{"echo a > a.txt", "exit 1"}, "0-00:10")
	writeFinal(t, dir)
	mustFarm(t, dir, "submit", "1", "--backend", "local")
	mustFarmCode(t, dir, exitNotAllOK, "wait", "--timeout", "1m")
	kept := []string{"job_script.sh", "single_case.sh", "resubmit_script.sh", "final.sh", "config", "table.dat"}
	sums := map[string][32]byte{}
	for _, k := range kept {
		b, err := os.ReadFile(filepath.Join(dir, k))
		if err != nil {
			t.Fatal(err)
		}
		sums[k] = sha256.Sum256(b)
	}
	before, _ := os.ReadDir(dir)
	out := mustFarm(t, dir, "clean")
	for _, want := range []string{"Would delete", "STATUSES/", "OUTPUT/", "MISC/", "RUN*/ (2 case directories", "farm.log", "Nothing was deleted"} {
		if !strings.Contains(out, want) {
			t.Errorf("clean listing lacks %q:\n%s", want, out)
		}
	}
	after, _ := os.ReadDir(dir)
	if len(after) != len(before) {
		t.Fatalf("clean without --yes deleted something: %d -> %d entries", len(before), len(after))
	}
	mustFarm(t, dir, "clean", "--yes")
	left, _ := os.ReadDir(dir)
	var names []string
	for _, e := range left {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "config farm.log final.sh job_script.sh resubmit_script.sh single_case.sh table.dat" {
		t.Errorf("after clean --yes: %v", names)
	}
	for _, k := range kept {
		b, _ := os.ReadFile(filepath.Join(dir, k))
		if sha256.Sum256(b) != sums[k] {
			t.Errorf("%s changed", k)
		}
	}
	// The cleaned farm can be submitted again from scratch.
	mustFarm(t, dir, "submit", "1", "--backend", "local")
	mustFarmCode(t, dir, exitNotAllOK, "wait", "--timeout", "1m")
}

func TestLocalQueryWatchEndsAtHundredPercent(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, repeat("sleep 0.2", 20), "0-00:10")
	mustFarm(t, dir, "submit", "2", "--backend", "local")
	out := mustFarm(t, dir, "query", "--watch", "--interval", "300ms")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 3 {
		t.Fatalf("watch printed %d lines, want several refreshes:\n%s", len(lines), out)
	}
	last := lines[len(lines)-1]
	if !strings.Contains(last, "100.0%") || !strings.Contains(last, "20/20 cases") || !strings.Contains(last, "no job active") {
		t.Errorf("last line %q", last)
	}
	if strings.Contains(lines[0], "100.0%") {
		t.Errorf("the first refresh already showed 100%%: %q", lines[0])
	}
}
