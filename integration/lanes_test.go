package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A farm whose runs have lanes (casetable/lanes.go; FARM_CLAIM_LANES forces
// them for a few meta-jobs, as 16 or more get by default): 6 meta-jobs over
// 4 lanes run 3,000 cases exactly once, every lane claimed in; farm query
// counts the lanes' claims; a resubmit (3 lanes) reruns exactly the failed
// cases once, and closes run 1's lanes.
func TestLocalLanesRunExactlyOnceAndResubmit(t *testing.T) {
	t.Parallel()
	const n = 3000
	var table []string
	failing := map[int64]bool{}
	for i := 1; i <= n; i++ {
		if i%97 == 0 {
			table = append(table, "test -f ../fixed")
			failing[int64(i)] = true
		} else {
			table = append(table, "true")
		}
	}
	dir := newFarm(t, table, "0-00:10")
	if r := farmIn(t, dir, []string{"FARM_CLAIM_LANES=4"}, "submit", "6", "--backend", "local"); r.Code != 0 {
		t.Fatalf("submit: exit %d: %s %s", r.Code, r.Out, r.Err)
	}
	mustFarmCode(t, dir, exitNotAllOK, "wait", "--timeout", "5m")
	rec := readRecords(t, dir)
	for id := int64(1); id <= n; id++ {
		if rec.Starts[id] != 1 || rec.Ends[id] != 1 {
			t.Fatalf("run 1: case %d: %d starts, %d ends; want one run", id, rec.Starts[id], rec.Ends[id])
		}
	}
	lanes1, _ := filepath.Glob(filepath.Join(dir, "MISC", "lanes.1.*"))
	if len(lanes1) != 1 {
		t.Fatalf("run 1 made lane directories %v, want one", lanes1)
	}
	for l := 0; l < 4; l++ {
		// A lane claimed in has generations past its first.
		if ms, _ := filepath.Glob(filepath.Join(lanes1[0], fmt.Sprint(l), "000000", "c.*")); len(ms) < 2 {
			t.Errorf("lane %d of run 1 has %d marks: not claimed in", l, len(ms))
		}
	}
	q := queryJSON(t, dir)
	if q.Run != 1 || q.RunCases.Total != n || q.RunCases.Left != 0 {
		t.Errorf("farm query: run %d, %d cases, %d left; want run 1, %d, 0", q.Run, q.RunCases.Total, q.RunCases.Left, n)
	}

	os.WriteFile(filepath.Join(dir, "fixed"), nil, 0o644)
	if r := farmIn(t, dir, []string{"FARM_CLAIM_LANES=3"}, "resubmit", "3"); r.Code != 0 || !strings.Contains(r.Out, fmt.Sprintf("Resubmitting the %d case(s)", len(failing))) {
		t.Fatalf("resubmit: exit %d: %q %q", r.Code, r.Out, r.Err)
	}
	mustFarm(t, dir, "wait", "--timeout", "5m")
	rec = readRecords(t, dir)
	for id := int64(1); id <= n; id++ {
		want := 1
		if failing[id] {
			want = 2
		}
		if rec.Starts[id] != want {
			t.Errorf("case %d ran %d times, want %d", id, rec.Starts[id], want)
		}
	}
	for id, r := range statusJSON(t, dir) {
		if r.State != "succeeded" {
			t.Errorf("case %d: %+v", id, r)
		}
	}
	// Run 1's lanes are closed: each ends with a closing generation.
	for l := 0; l < 4; l++ {
		gens, _ := filepath.Glob(filepath.Join(lanes1[0], fmt.Sprint(l), "000000", "g.*"))
		closed := false
		for _, g := range gens {
			if b, _ := os.ReadFile(g); strings.HasSuffix(string(b), " closed\n") {
				closed = true
			}
		}
		if !closed {
			t.Errorf("lane %d of run 1 was not closed when run 2 started", l)
		}
	}
}

// queryJSON runs farm query --json.
func queryJSON(t *testing.T, dir string) (q struct {
	Run      int `json:"run"`
	RunCases struct {
		Total int64 `json:"total"`
		Left  int64 `json:"left"`
	} `json:"run_cases"`
}) {
	t.Helper()
	out := mustFarm(t, dir, "query", "--json")
	if err := json.Unmarshal([]byte(out), &q); err != nil {
		t.Fatalf("farm query --json: %v\n%s", err, out)
	}
	return q
}

// A run started for 16 meta-jobs gets 2 lanes with no setting
// (casetable.LanesFor), 16 start tickets and the lane that sweeps them
// (casetable/ticket.go), and its cases run exactly once.
func TestLocalSixteenMetaJobsGetLanes(t *testing.T) {
	t.Parallel()
	const n = 800
	table := make([]string, n)
	for i := range table {
		table[i] = "true"
	}
	dir := newFarm(t, table, "0-00:10")
	if r := farmIn(t, dir, []string{"FARM_CLAIM_LANES="}, "submit", "16", "--backend", "local"); r.Code != 0 {
		t.Fatalf("submit: exit %d: %s %s", r.Code, r.Out, r.Err)
	}
	mustFarm(t, dir, "wait", "--timeout", "5m")
	rec := readRecords(t, dir)
	for id := int64(1); id <= n; id++ {
		if rec.Starts[id] != 1 || rec.Ends[id] != 1 {
			t.Fatalf("case %d: %d starts, %d ends; want one run", id, rec.Starts[id], rec.Ends[id])
		}
	}
	lanes, _ := filepath.Glob(filepath.Join(dir, "MISC", "lanes.1.*", "index"))
	if len(lanes) != 1 {
		t.Fatalf("run 1 made lane indexes %v, want one", lanes)
	}
	b, err := os.ReadFile(lanes[0])
	if head := strings.SplitN(string(b), "\n", 2)[0]; err != nil || !strings.Contains(head, " lanes=3 ") || !strings.Contains(head, " tickets=16 ") {
		t.Fatalf("lane index %s: %q, %v; want 3 lanes (2 and the sweep) and 16 tickets", lanes[0], head, err)
	}
	marks, _ := filepath.Glob(filepath.Join(filepath.Dir(lanes[0]), "t.16", "c.*"))
	if len(marks) != 16 {
		t.Fatalf("%d of the 16 tickets marked, want all (claimed by their jobs, or swept)", len(marks))
	}
}
