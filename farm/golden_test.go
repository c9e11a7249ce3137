package farm

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/status"
	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run 'go test ./farm -update' to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s (-want +got):\n%s", name, diff)
	}
}

// sampleSummary has one case in every state, over two runs.
func sampleSummary(t *testing.T) *status.Summary {
	dir := t.TempDir()
	t0 := time.Unix(1_700_000_000, 0)
	write := func(job string, run int, host string, fn func(w *status.Writer)) {
		w, err := status.CreateCap(filepath.Join(dir, "status."+job), job, 0, run, host, status.Capacity{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		fn(w)
		w.Close()
	}
	write("4001", 1, "node-a", func(w *status.Writer) {
		w.Start(1, t0)
		w.End(1, 0, t0, 1500*time.Millisecond)
		w.Start(2, t0)
		w.End(2, 3, t0, 250*time.Millisecond)
		w.Start(3, t0) // its job died: interrupted
	})
	write("4002", 1, "node-bb", func(w *status.Writer) {
		w.Start(10, t0)
		w.End(10, 0, t0, 12*time.Second)
		w.Start(4, t0) // running
	})
	write("4010", 2, "node-a", func(w *status.Writer) {
		w.Start(5, t0)
		w.Interrupted(5, 15, t0, 61*time.Second)
		w.Start(6, t0)
		w.End(6, 127, t0, 0)
	})
	sum, err := status.Load(dir, status.Options{Live: func(id string) bool { return id == "4002" }, Now: t0.Add(30 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

func TestStatusGolden(t *testing.T) {
	sum := sampleSummary(t)
	for name, opt := range map[string]StatusOptions{
		"status.golden":        {},
		"status-f.golden":      {FailedLast: true},
		"status-failed.golden": {FailedOnly: true},
	} {
		var b bytes.Buffer
		if err := printStatus(&b, sum, opt); err != nil {
			t.Fatal(err)
		}
		golden(t, name, b.Bytes())
	}
	var b bytes.Buffer
	if err := printStatus(&b, sum, StatusOptions{JSON: true, FailedLast: true}); err != nil {
		t.Fatal(err)
	}
	golden(t, "status.json.golden", b.Bytes())
	var rows []statusRow
	if err := json.Unmarshal(b.Bytes(), &rows); err != nil {
		t.Fatalf("Status --json is not JSON: %v", err)
	}
	want := []statusRow{
		{ID: 1, State: "succeeded", Status: 0, Seconds: 1.5, Job: "4001", Host: "node-a", Run: 1},
		{ID: 4, State: "running", Status: 0, Seconds: 30, Job: "4002", Host: "node-bb", Run: 1},
		{ID: 10, State: "succeeded", Status: 0, Seconds: 12, Job: "4002", Host: "node-bb", Run: 1},
		{ID: 2, State: "failed", Status: 3, Seconds: 0.25, Job: "4001", Host: "node-a", Run: 1},
		{ID: 3, State: "interrupted", Status: 0, Seconds: 0, Job: "4001", Host: "node-a", Run: 1},
		{ID: 5, State: "interrupted", Status: 15, Seconds: 61, Job: "4010", Host: "node-a", Run: 2},
		{ID: 6, State: "failed", Status: 127, Seconds: 0, Job: "4010", Host: "node-a", Run: 2},
	}
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("parsed JSON (-want +got):\n%s", diff)
	}
}

func TestListGolden(t *testing.T) {
	sum := sampleSummary(t)
	start := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	recs := []JobRecord{
		{Run: 1, Backend: "slurm", Kind: kindMeta, ID: "4001"},
		{Run: 1, Backend: "slurm", Kind: kindMeta, ID: "4002"},
		{Run: 1, Backend: "slurm", Kind: kindAuto, ID: "4003"},
		{Run: 2, Backend: "slurm", Kind: kindMeta, ID: "4010"},
	}
	infos := map[string]backend.JobInfo{
		"4001": {ID: "4001", State: backend.Failed, Start: start, End: start.Add(time.Hour)},
		"4002": {ID: "4002", State: backend.Running, Start: start, End: start.Add(2 * time.Hour)},
		"4003": {ID: "4003", State: backend.Completed, Start: start.Add(time.Hour), End: start.Add(time.Hour + time.Second)},
		"4010": {ID: "4010", State: backend.Timeout, Start: start.Add(2 * time.Hour), End: start.Add(3 * time.Hour)},
	}
	rows := listRows(recs, infos, sum, noTasks)
	var b bytes.Buffer
	if err := writeList(&b, rows, Text); err != nil {
		t.Fatal(err)
	}
	golden(t, "list.golden", b.Bytes())
	b.Reset()
	writeList(&b, rows, JSON)
	var back []listRow
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(rows, back); diff != "" {
		t.Errorf("list JSON round trip (-want +got):\n%s", diff)
	}
	if back[0].Cases != 3 || back[1].Running != 1 || back[3].Cases != 2 {
		t.Errorf("case counts: %+v", back)
	}
}

func TestQueryGolden(t *testing.T) {
	q := Query{
		Run:        2,
		Jobs:       JobCounts{Queued: 3, Running: 2, Finished: 7},
		RunCases:   CaseCounts{Total: 400, Succeeded: 150, Failed: 2, Interrupted: 1, Unfit: 3, Running: 2, Left: 242},
		FarmCases:  CaseCounts{Total: 1000, Succeeded: 750, Failed: 5, Interrupted: 1, Unfit: 4, Running: 2, Left: 238},
		PerMinute:  42.5,
		ETASeconds: 349,
		Busy: []JobBusy{
			{Job: "4011", CPUs: 8, BusyCPUs: 6, GPUs: 2, BusyGPUs: 1},
			{Job: "4012", CPUs: 192, BusyCPUs: 190},
			{Job: "4013", GPUs: 4, BusyGPUs: 4},
		},
	}
	var b bytes.Buffer
	if err := writeQuery(&b, q, Text); err != nil {
		t.Fatal(err)
	}
	b.WriteString(progressBar(q, 30) + "\n")
	done := q
	done.Jobs = JobCounts{Finished: 12}
	done.FarmCases = CaseCounts{Total: 1000, Succeeded: 1000}
	done.Busy = nil
	done.ETASeconds = -1
	b.WriteString(progressBar(done, 30) + "\n")
	golden(t, "query.golden", b.Bytes())

	b.Reset()
	writeQuery(&b, q, JSON)
	var back Query
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(q, back); diff != "" {
		t.Errorf("query JSON round trip (-want +got):\n%s", diff)
	}
}

// statusRow is one object of farm Status --json.
type statusRow struct {
	ID      int64   `json:"id"`
	State   string  `json:"state"`
	Status  int     `json:"status"`
	Seconds float64 `json:"seconds"`
	Job     string  `json:"job"`
	Host    string  `json:"host"`
	Run     int     `json:"run"`
}

// A case started twice in one run gets "starts" and "starts_run" in its
// JSON row; the other rows stay as they were.
func TestStatusJSONFlagsDuplicateStarts(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Unix(1_700_000_000, 0)
	for _, job := range []string{"7", "8"} {
		w, err := status.CreateCap(filepath.Join(dir, "status."+job), job, 0, 3, "node", status.Capacity{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if job == "7" {
			w.Start(1, t0)
			w.End(1, 0, t0, time.Second)
		}
		code := 0
		if job == "8" {
			code = 1 // job 7's success decides the row
		}
		w.Start(2, t0)
		w.End(2, code, t0, time.Second)
		w.Close()
	}
	sum, err := status.Load(dir, status.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := printStatus(&b, sum, StatusOptions{JSON: true}); err != nil {
		t.Fatal(err)
	}
	want := `[{"id":1,"state":"succeeded","status":0,"seconds":1,"max_rss_bytes":null,"cpu_seconds":null,"job":"7","host":"node","run":3,"attempts":1,"crashes":0},` +
		`{"id":2,"state":"succeeded","status":0,"seconds":1,"max_rss_bytes":null,"cpu_seconds":null,"job":"7","host":"node","run":3,"attempts":2,"crashes":0,"starts":2,"starts_run":3}]` + "\n"
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("Status --json (-want +got):\n%s", diff)
	}
}

// TestListOtherHost: farm list says which jobs run elsewhere.
func TestListOtherHost(t *testing.T) {
	sum := sampleSummary(t)
	other := "nodeA/e02f4ba5-dd84-4a53-9aef-3189c6d5d41e/pid:[4026532461]"
	recs := []JobRecord{
		{Run: 1, Backend: "local", Kind: kindMeta, ID: "1"},
		{Run: 1, Backend: "local", Kind: kindMeta, ID: "2"},
		{Run: 1, Backend: "local", Kind: kindMeta, ID: "3"},
	}
	infos := map[string]backend.JobInfo{
		"1": {ID: "1", State: backend.Running, OtherHost: other},
		"2": {ID: "2", State: backend.Completed, OtherHost: other},
		"3": {ID: "3", State: backend.Running},
	}
	rows := listRows(recs, infos, sum, noTasks)
	var b bytes.Buffer
	writeList(&b, rows, Text)
	want := "Job 1 runs on nodeA (host identity " + other + "), not here: its state is the one it last recorded.\n"
	if !strings.HasSuffix(b.String(), "\n"+want) || strings.Count(b.String(), "runs on") != 1 {
		t.Errorf("list:\n%s\nwant it to end with %q", b.String(), want)
	}
	b.Reset()
	writeList(&b, rows, JSON)
	var back []map[string]any
	json.Unmarshal(b.Bytes(), &back)
	if back[0]["other_host"] != other || back[1]["other_host"] != other {
		t.Errorf("JSON: %s", b.String())
	}
	if _, ok := back[2]["other_host"]; ok {
		t.Errorf("JSON has other_host for a job of this host: %s", b.String())
	}
}

// TestBarFitsTerminal: on a terminal the bar is redrawn in place in one
// column less than the terminal's width (a full-width line wraps on some
// terminals, and wrapping scrolls), keeping the rate and the ETA on an
// 80-column one; elsewhere it is a plain line, whole.
func TestBarFitsTerminal(t *testing.T) {
	q := Query{Run: 1, Jobs: JobCounts{Running: 2}, FarmCases: CaseCounts{Total: 1000, Succeeded: 400, Failed: 3}, PerMinute: 12.5, ETASeconds: 3600}
	full := progressBar(q, 30)
	if len(full) <= 80 {
		t.Fatalf("the bar %q is too short for the test", full)
	}
	for _, cols := range []int{200, 80, 60, 40, 10} {
		var b strings.Builder
		tty := &bar{w: &b, opt: WatchOptions{TTY: true, Columns: cols}}
		tty.draw(q)
		tty.draw(q)
		tty.done()
		draws := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\r\033[K")
		if len(draws) != 3 || draws[0] != "" || draws[1] != draws[2] || !strings.HasSuffix(b.String(), "\n") {
			t.Fatalf("%d columns: want two redraws in place and one newline, got %q", cols, b.String())
		}
		line := draws[1]
		if n := len([]rune(line)); n > cols-1 {
			t.Errorf("%d columns: a line of %d: %q", cols, n, line)
		}
		if cols == 200 && line != full {
			t.Errorf("200 columns: %q, want the whole bar %q", line, full)
		}
		if cols >= 60 && !strings.Contains(line, "12.5 cases/min, ETA 1h0m0s") {
			t.Errorf("%d columns: %q lost the rate or the ETA", cols, line)
		}
		if cols >= 60 && !strings.Contains(line, "403/1000") {
			t.Errorf("%d columns: %q lost the cases done", cols, line)
		}
	}
	var b strings.Builder
	plain := &bar{w: &b, opt: WatchOptions{Columns: 40}}
	plain.draw(q)
	plain.done()
	if b.String() != full+"\n" {
		t.Errorf("not on a terminal: %q, want the whole line %q", b.String(), full+"\n")
	}
}

// noTasks is the arrayOf of a farm whose engines have no arrays.
func noTasks(string) (string, bool) { return "", false }

// TestListRowsCountsArrayTasks: the cases of an array's tasks count for
// the array's record, as the engine reads its task IDs (backend.TaskIDs);
// a status file of a job that is itself recorded stays its own.
func TestListRowsCountsArrayTasks(t *testing.T) {
	recs := []JobRecord{{Run: 1, Backend: "x", Kind: kindMeta, ID: "7[]"}, {Run: 1, Backend: "x", Kind: kindMeta, ID: "8"}}
	sum := &status.Summary{Jobs: []status.Job{{ID: "7[1]", Ended: 2}, {ID: "7[2]", Ended: 3, Open: 1}, {ID: "8", Ended: 1}, {ID: "9[1]", Ended: 5}}}
	arrayOf := func(id string) (string, bool) {
		array, task, ok := strings.Cut(id, "[")
		return array + "[]", ok && task != "]"
	}
	rows := listRows(recs, map[string]backend.JobInfo{}, sum, arrayOf)
	if len(rows) != 2 || rows[0].Cases != 5 || rows[0].Running != 1 || rows[1].Cases != 1 {
		t.Errorf("rows = %+v; want 7[] with 5 cases (1 running), 8 with 1", rows)
	}
}

// TestStatusCrashedAndUnknowns: a case at the crash limit is "crashed" in
// the table and the JSON (as README says), and what is not known is "-"
// in the table and null in the JSON: the STATUS of a running case, and
// the STATUS and duration of one whose meta-job died under it (issue 34).
func TestStatusCrashedAndUnknowns(t *testing.T) {
	sum := sampleSummary(t) // case 3 crashed once; case 4 runs
	var b bytes.Buffer
	if err := printStatus(&b, sum, StatusOptions{MaxCrashes: 1}); err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, l := range strings.Split(b.String(), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			rows[f[0]] = strings.Join(f, " ")
		}
	}
	if got, want := rows["3"], "3 crashed - - 4001 node-a 1 1"; got != want {
		t.Errorf("case 3's row %q, want %q\n%s", got, want, b.String())
	}
	if got, want := rows["4"], "4 running - 30.000 4002 node-bb 1 0"; got != want {
		t.Errorf("case 4's row %q, want %q\n%s", got, want, b.String())
	}
	b.Reset()
	if err := printStatus(&b, sum, StatusOptions{JSON: true, MaxCrashes: 1}); err != nil {
		t.Fatal(err)
	}
	var objs []map[string]any
	if err := json.Unmarshal(b.Bytes(), &objs); err != nil {
		t.Fatalf("Status --json is not JSON: %v", err)
	}
	byID := map[float64]map[string]any{}
	for _, o := range objs {
		byID[o["id"].(float64)] = o
	}
	for _, tc := range []struct {
		id      float64
		state   string
		status  any
		seconds any
	}{
		{3, "crashed", nil, nil},
		{4, "running", nil, 30.0},
		{5, "interrupted", 15.0, 61.0},
		{2, "failed", 3.0, 0.25},
	} {
		o := byID[tc.id]
		if o["state"] != tc.state || o["status"] != tc.status || o["seconds"] != tc.seconds {
			t.Errorf("case %v: %v; want state %q, status %v, seconds %v", tc.id, o, tc.state, tc.status, tc.seconds)
		}
		if _, ok := o["status"]; !ok {
			t.Errorf("case %v has no \"status\" (want null when none): %v", tc.id, o)
		}
	}
	if byID[3]["crashed"] != true {
		t.Errorf("case 3: %v; want \"crashed\": true too", byID[3])
	}
}

// TestBusyJobsCountsWholeJobCases: a running case whose start record names
// no CPU and no GPU (it declares no needs) holds its whole job, so farm
// query counts every CPU and GPU of the job busy, not 0 (issue 34); the
// others count the CPUs and GPUs their records name.
func TestBusyJobsCountsWholeJobCases(t *testing.T) {
	jobs := []status.Job{
		{ID: "7", Capacity: status.Capacity{CPUs: 2}, Open: 1, OpenWhole: 1},
		{ID: "8", Capacity: status.Capacity{CPUs: 8, GPUs: 2}, Open: 2, OpenCPUs: []int{0, 1, 2}, OpenGPUs: []string{"0"}},
		{ID: "9", Capacity: status.Capacity{CPUs: 4, GPUs: 1}, Open: 2, OpenCPUs: []int{0}, OpenWhole: 1},
	}
	infos := map[string]backend.JobInfo{"7": {State: backend.Running}, "8": {State: backend.Running}, "9": {State: backend.Running}}
	var got []string
	for _, b := range busyJobs(jobs, infos) {
		got = append(got, b.String())
	}
	want := []string{"job 7: 2/2 CPUs busy", "job 8: 3/8 CPUs, 1/2 GPUs busy", "job 9: 4/4 CPUs, 1/1 GPUs busy"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("busy lines:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
