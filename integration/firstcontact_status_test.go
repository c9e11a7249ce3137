package integration

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"
)

// What a new user meets in the first hour (issue 34), through the binary.

// statusObjects runs farm Status --json and returns each case's object by
// its ID, as decoded JSON: a null stays nil, told apart from a 0.
func statusObjects(t *testing.T, dir string) map[float64]map[string]any {
	t.Helper()
	var objs []map[string]any
	if err := json.Unmarshal([]byte(mustFarm(t, dir, "Status", "--json")), &objs); err != nil {
		t.Fatal(err)
	}
	m := map[float64]map[string]any{}
	for _, o := range objs {
		m[o["id"].(float64)] = o
	}
	return m
}

// TestLocalRunningCaseNullsAndWholeJobBusy: while a case that declares no
// needs runs, it holds its whole job: farm query counts all the job's CPUs
// busy (not 0/2); farm Status --json gives it "status": null (it has none
// yet) and its seconds so far, and the table a "-" STATUS.
func TestLocalRunningCaseNullsAndWholeJobBusy(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, []string{"sleep 30"}, "0-00:10")
	mustFarm(t, dir, "submit", "1", "--backend", "local")
	t.Cleanup(func() {
		farmIn(t, dir, nil, "kill")
		farmIn(t, dir, nil, "wait", "--timeout", "30s")
	})
	type busy struct {
		Job      string
		CPUs     int
		BusyCPUs int `json:"busy_cpus"`
	}
	var q struct {
		Busy      []busy
		FarmCases struct{ Running int64 } `json:"farm_cases"`
	}
	waitFor(t, 20*time.Second, "the case running, and its job's capacity said", func() bool {
		q.Busy = nil
		json.Unmarshal([]byte(mustFarm(t, dir, "query", "--json")), &q)
		return q.FarmCases.Running == 1 && len(q.Busy) == 1
	})
	if b := q.Busy[0]; b.CPUs < 1 || b.BusyCPUs != b.CPUs {
		t.Errorf("query --json busy %+v; want every CPU of the job busy: its case holds the whole job", b)
	}
	text := mustFarm(t, dir, "query")
	if want := regexp.MustCompile(`(?m)^job \S+: (\d+)/(\d+) CPUs busy$`); !want.MatchString(text) {
		t.Errorf("query says\n%s\nwant a line job ID: N/N CPUs busy", text)
	} else if m := want.FindStringSubmatch(text); m[1] != m[2] {
		t.Errorf("query says %q; want all of the job's CPUs busy", m[0])
	}
	c := statusObjects(t, dir)[1]
	if v, ok := c["status"]; !ok || v != nil {
		t.Errorf("running case: %v; want \"status\": null", c)
	}
	if s, ok := c["seconds"].(float64); !ok || s < 0 || s > 60 {
		t.Errorf("running case: %v; want its seconds since its start", c)
	}
	if f := strings.Fields(strings.Split(mustFarm(t, dir, "Status"), "\n")[1]); len(f) < 4 || f[1] != "running" || f[2] != "-" || f[3] == "-" {
		t.Errorf("Status row %q; want running, STATUS -, its seconds so far", f)
	}
}

// TestWaitOnAFarmNeverSubmitted: farm wait says what farm query says, that
// the farm was never submitted, and exits 1 (it could not do what was
// asked), not "0 cases".
func TestWaitOnAFarmNeverSubmitted(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, []string{"true", "true"}, "0-00:10")
	if out := mustFarm(t, dir, "query"); !strings.Contains(out, "not been submitted") {
		t.Errorf("query says %q", out)
	}
	r := farmIn(t, dir, nil, "wait", "--timeout", "10s")
	if r.Code != 1 || r.Out != "" || r.Err != "farm: the farm has not been submitted yet: nothing to wait for ('farm submit N' submits it)\n" {
		t.Errorf("wait: exit %d, stdout %q, stderr %q; want exit 1 and that it was never submitted", r.Code, r.Out, r.Err)
	}
}

// TestSubmitCapsNAtTheCases: farm submit N (and resubmit N) with N above
// the cases submits one meta-job per case and says so, as META does; in
// WHOLE_NODE mode one per NWHOLE cases; with WAIT_FOR_CASES it keeps N.
func TestSubmitCapsNAtTheCases(t *testing.T) {
	t.Parallel()
	t.Run("meta", func(t *testing.T) {
		t.Parallel()
		dir := newFarm(t, []string{"true", "exit 2", "exit 3"}, "0-00:10")
		out := mustFarm(t, dir, "submit", "10", "--backend", "local")
		if !strings.Contains(out, "3 cases: submitting 3 meta-jobs, not 10 ") || !strings.Contains(out, "Submitted 3 meta-jobs for run 1") {
			t.Errorf("submit 10 on 3 cases said %q", out)
		}
		mustFarmCode(t, dir, exitNotAllOK, "wait", "--timeout", "1m")
		out = mustFarm(t, dir, "resubmit", "10", "--backend", "local")
		if !strings.Contains(out, "2 cases: submitting 2 meta-jobs, not 10 ") || !strings.Contains(out, "Submitted 2 meta-jobs for run 2") {
			t.Errorf("resubmit 10 on 2 cases said %q", out)
		}
		mustFarmCode(t, dir, exitNotAllOK, "wait", "--timeout", "1m")
		if n := countJobs(t, dir); n != 5 {
			t.Errorf("farm list has %d jobs, want 3 + 2", n)
		}
	})
	t.Run("whole-node", func(t *testing.T) {
		t.Parallel()
		dir := newFarm(t, []string{"true", "true", "true"}, "0-00:10")
		appendFile(t, dir, "config", "WHOLE_NODE=1\nNWHOLE=2\n")
		out := mustFarm(t, dir, "submit", "10", "--backend", "local")
		if !strings.Contains(out, "3 cases, 2 at once in each meta-job (WHOLE_NODE, NWHOLE=2): submitting 2 meta-jobs, not 10 ") || !strings.Contains(out, "Submitted 2 meta-jobs") {
			t.Errorf("submit 10 on 3 cases, NWHOLE=2, said %q", out)
		}
		mustFarm(t, dir, "wait", "--timeout", "1m")
	})
	t.Run("wait-for-cases", func(t *testing.T) {
		t.Parallel()
		dir := newFarm(t, []string{"true"}, "0-00:10")
		setConfig(t, dir, "WAIT_FOR_CASES", "0.5")
		out := mustFarm(t, dir, "submit", "3", "--backend", "local")
		if strings.Contains(out, "not 3") || !strings.Contains(out, "Submitted 3 meta-jobs") {
			t.Errorf("submit 3 on 1 case with WAIT_FOR_CASES said %q; want 3 meta-jobs", out)
		}
		mustFarm(t, dir, "wait", "--timeout", "1m")
	})
}

// countJobs is the number of jobs farm list --json lists.
func countJobs(t *testing.T, dir string) int {
	t.Helper()
	var jobs []json.RawMessage
	if err := json.Unmarshal([]byte(mustFarm(t, dir, "list", "--json")), &jobs); err != nil {
		t.Fatal(err)
	}
	return len(jobs)
}
