package farm

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/layout"
	"github.com/farm-hpc/farm/status"
	"github.com/farm-hpc/farm/tablefmt"
	"github.com/google/go-cmp/cmp"
)

// unfitSummary is a meta-job (5001, running, 8 CPUs and 2 GPUs) that
// placed some cases and left two unfit.
func unfitSummary(t *testing.T) *status.Summary {
	dir := t.TempDir()
	t0 := time.Unix(1_700_000_000, 0)
	w, err := status.CreateCap(filepath.Join(dir, "status.5001"), "5001", 0, 1, "node-a", status.Capacity{CPUs: 8, GPUs: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.StartAt(1, t0, status.Placement{Loop: 1, CPUs: []int{0, 1, 2, 3}, GPUs: []string{"0"}})
	w.End(1, 0, t0, 2*time.Second)
	w.Unfit(2, t0, "needs 16 CPUs, the job has 8")
	w.StartAt(3, t0, status.Placement{Loop: 2, CPUs: []int{4, 5}, GPUs: []string{"GPU-5c3e"}})
	w.End(3, 1, t0, 500*time.Millisecond)
	w.Start(4, t0)
	w.End(4, 0, t0, time.Second)
	w.Unfit(5, t0, "needs 0-02:00:00 of run time, 0-00:40:00 left")
	w.StartAt(6, t0, status.Placement{Loop: 1, CPUs: []int{0, 1, 2, 3}})
	w.Close()
	sum, err := status.Load(dir, status.Options{Live: func(id string) bool { return id == "5001" }, Now: t0.Add(30 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

// farm Status shows unfit cases, and why in a last column (only then);
// --failed and -f count them with the cases that did not succeed; --json
// says where each case ran and why an unfit one did not; --meta has no
// line for them (they have no STATUS).
func TestStatusShowsUnfitCasesAndPlacements(t *testing.T) {
	sum := unfitSummary(t)
	for _, tc := range []struct {
		opt  StatusOptions
		want string
	}{
		{StatusOptions{}, "" +
			"ID  STATE        STATUS  SECONDS  JOB   HOST    REASON\n" +
			"1   succeeded    0       2.000    5001  node-a\n" +
			"2   unfit        -       -        5001  node-a  needs 16 CPUs, the job has 8\n" +
			"3   failed       1       0.500    5001  node-a\n" +
			"4   succeeded    0       1.000    5001  node-a\n" +
			"5   unfit        -       -        5001  node-a  needs 0-02:00:00 of run time, 0-00:40:00 left\n" +
			"6   running      -       30.000   5001  node-a\n"},
		{StatusOptions{FailedOnly: true}, "" +
			"ID  STATE        STATUS  SECONDS  JOB   HOST    REASON\n" +
			"2   unfit        -       -        5001  node-a  needs 16 CPUs, the job has 8\n" +
			"3   failed       1       0.500    5001  node-a\n" +
			"5   unfit        -       -        5001  node-a  needs 0-02:00:00 of run time, 0-00:40:00 left\n"},
		{StatusOptions{FailedLast: true}, "" +
			"ID  STATE        STATUS  SECONDS  JOB   HOST    REASON\n" +
			"1   succeeded    0       2.000    5001  node-a\n" +
			"4   succeeded    0       1.000    5001  node-a\n" +
			"6   running      -       30.000   5001  node-a\n" +
			"2   unfit        -       -        5001  node-a  needs 16 CPUs, the job has 8\n" +
			"3   failed       1       0.500    5001  node-a\n" +
			"5   unfit        -       -        5001  node-a  needs 0-02:00:00 of run time, 0-00:40:00 left\n"},
		{StatusOptions{META: true, FailedLast: true}, "1 0\n4 0\n3 1\n"},
		{StatusOptions{JSON: true}, `[` +
			`{"id":1,"state":"succeeded","status":0,"seconds":2,"max_rss_bytes":null,"cpu_seconds":null,"job":"5001","host":"node-a","run":1,"attempts":1,"crashes":0,"loop":1,"cpus":[0,1,2,3],"gpus":["0"]},` +
			`{"id":2,"state":"unfit","status":null,"seconds":null,"max_rss_bytes":null,"cpu_seconds":null,"job":"5001","host":"node-a","run":1,"attempts":0,"crashes":0,"reason":"needs 16 CPUs, the job has 8"},` +
			`{"id":3,"state":"failed","status":1,"seconds":0.5,"max_rss_bytes":null,"cpu_seconds":null,"job":"5001","host":"node-a","run":1,"attempts":1,"crashes":0,"loop":2,"cpus":[4,5],"gpus":["GPU-5c3e"]},` +
			`{"id":4,"state":"succeeded","status":0,"seconds":1,"max_rss_bytes":null,"cpu_seconds":null,"job":"5001","host":"node-a","run":1,"attempts":1,"crashes":0},` +
			`{"id":5,"state":"unfit","status":null,"seconds":null,"max_rss_bytes":null,"cpu_seconds":null,"job":"5001","host":"node-a","run":1,"attempts":0,"crashes":0,"reason":"needs 0-02:00:00 of run time, 0-00:40:00 left"},` +
			`{"id":6,"state":"running","status":null,"seconds":30,"max_rss_bytes":null,"cpu_seconds":null,"job":"5001","host":"node-a","run":1,"attempts":1,"crashes":0,"loop":1,"cpus":[0,1,2,3]}` +
			"]\n"},
	} {
		var b bytes.Buffer
		if err := printStatus(&b, sum, tc.opt); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, b.String()); diff != "" {
			t.Errorf("%+v (-want +got):\n%s", tc.opt, diff)
		}
	}
	// A farm without unfit cases has no REASON column (status.golden), and
	// --failed says what it looks for.
	var b bytes.Buffer
	printStatus(&b, sampleSummary(t), StatusOptions{})
	if strings.Contains(b.String(), "REASON") {
		t.Errorf("a REASON column without unfit cases:\n%s", b.String())
	}
	dir := t.TempDir()
	w, _ := status.CreateCap(filepath.Join(dir, "status.1"), "1", 0, 1, "h", status.Capacity{}, nil)
	w.Start(1, time.Unix(1_700_000_000, 0))
	w.End(1, 0, time.Unix(1_700_000_000, 0), time.Second)
	w.Close()
	ok, _ := status.Load(dir, status.Options{})
	b.Reset()
	printStatus(&b, ok, StatusOptions{FailedOnly: true})
	if want := "ID  STATE        STATUS  SECONDS  JOB  HOST\n(no failed, interrupted or unfit case)\n"; b.String() != want {
		t.Errorf("--failed with every case succeeded:\n%s\nwant\n%s", b.String(), want)
	}
}

// writeStatus writes the status file of job in run of farm f, packing
// cases into 8 CPUs.
func writeStatus(t *testing.T, f *Farm, job string, run int, fn func(w *status.Writer)) {
	t.Helper()
	w, err := status.CreateCap(f.Path(layout.StatusDir, "status."+job), job, 0, run, "node1", status.Capacity{CPUs: 8}, nil)
	if err != nil {
		t.Fatal(err)
	}
	fn(w)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// tableIDs returns the IDs of the cases of the table at path.
func tableIDs(t *testing.T, path string) []int64 {
	t.Helper()
	var ids []int64
	if err := tablefmt.ReadCases(path, func(c tablefmt.Case) error { ids = append(ids, c.ID); return nil }); err != nil {
		t.Fatal(err)
	}
	return ids
}

// farm wait counts unfit cases and is not done while any is left; farm
// resubmit runs again every case that did not succeed, unfit ones too.
func TestWaitAndResubmitCountUnfitCases(t *testing.T) {
	ctx := context.Background()
	f, out := newTestFarm(t, strings.Repeat("true\n", 7), &fakeBackend{})
	if err := f.Submit(ctx, SubmitOptions{N: 1}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1_700_000_000, 0)
	// Job 101 of run 1: 1 succeeds, 2 fails, 3 is cut off, 4 and 5 are
	// unfit; 6 and 7 never run.
	writeStatus(t, f, "101", 1, func(w *status.Writer) {
		w.StartAt(1, t0, status.Placement{Loop: 1, CPUs: []int{0}})
		w.End(1, 0, t0, time.Second)
		w.StartAt(2, t0, status.Placement{Loop: 1, CPUs: []int{0}})
		w.End(2, 1, t0, time.Second)
		w.Unfit(4, t0, "needs 16 CPUs, the job has 8")
		w.Unfit(5, t0, "needs 16 CPUs, the job has 8")
		w.StartAt(3, t0, status.Placement{Loop: 1, CPUs: []int{0}})
	})
	p, err := f.Wait(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.String(), "7 cases: 1 succeeded, 1 failed, 1 interrupted, 2 never ran, 2 unfit"; got != want || p.Done() {
		t.Errorf("wait: %q (done %t), want %q, not done", got, p.Done(), want)
	}
	q, _, err := f.query(ctx, t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	wantCases := CaseCounts{Total: 7, Succeeded: 1, Failed: 1, Interrupted: 1, Unfit: 2, Running: 0, Left: 2}
	if diff := cmp.Diff(wantCases, q.FarmCases); diff != "" {
		t.Errorf("query, farm-wide (-want +got):\n%s", diff)
	}
	// (No meta-job really claimed: the claim state says none is taken.)
	if diff := cmp.Diff(CaseCounts{Total: 7, Succeeded: 1, Failed: 1, Interrupted: 1, Unfit: 2, Left: 7}, q.RunCases); diff != "" {
		t.Errorf("query, run 1 (-want +got):\n%s", diff)
	}
	if q.Busy != nil {
		t.Errorf("query: busy %+v of a job that has ended", q.Busy)
	}

	out.Reset()
	if err := f.Resubmit(ctx, SubmitOptions{N: 1}); err != nil {
		t.Fatal(err)
	}
	if want := "Resubmitting the 6 case(s) that failed, were interrupted, were unfit or never ran (table.dat_)."; !strings.HasPrefix(out.String(), want) {
		t.Errorf("resubmit said %q, want %q", out, want)
	}
	if diff := cmp.Diff([]int64{2, 3, 4, 5, 6, 7}, tableIDs(t, f.Path(layout.RetryTable))); diff != "" {
		t.Errorf("table.dat_ (-want +got):\n%s", diff)
	}
	// Run 2 runs them: 4 succeeds, 5 is unfit again, 2 fails again.
	writeStatus(t, f, "102", 2, func(w *status.Writer) {
		w.StartAt(4, t0.Add(time.Hour), status.Placement{Loop: 1, CPUs: []int{0}})
		w.End(4, 0, t0.Add(time.Hour), time.Second)
		w.Unfit(5, t0.Add(time.Hour), "needs 16 CPUs, the job has 8")
		for _, id := range []int64{2, 3, 6, 7} {
			w.Start(id, t0.Add(time.Hour))
			w.End(id, int(id%2), t0.Add(time.Hour), time.Second)
		}
	})
	if p, err = f.Wait(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if got, want := p.String(), "7 cases: 4 succeeded, 2 failed, 0 interrupted, 0 never ran, 1 unfit"; got != want {
		t.Errorf("wait after run 2: %q, want %q", got, want)
	}
	out.Reset()
	if err := f.Resubmit(ctx, SubmitOptions{N: 1}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int64{3, 5, 7}, tableIDs(t, f.Path(layout.RetryTable))); diff != "" {
		t.Errorf("table.dat_ of run 3 (-want +got):\n%s", diff)
	}
}

// The -auto job resubmits while unfit cases are left, as it does for
// interrupted ones; a run in which nothing succeeded stops it, so a case
// that fits no job is not taken again for ever.
func TestAutojobResubmitsUnfitCases(t *testing.T) {
	ctx := context.Background()
	f, out := newTestFarm(t, "true\ntrue\ntrue\n", &fakeBackend{})
	if err := f.Submit(ctx, SubmitOptions{N: 1}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1_700_000_000, 0)
	writeStatus(t, f, "101", 1, func(w *status.Writer) {
		w.Start(1, t0)
		w.End(1, 0, t0, time.Second)
		w.Start(2, t0)
		w.End(2, 1, t0, time.Second)
		w.Unfit(3, t0, "needs 2 GPUs, the job has 0")
	})
	out.Reset()
	if err := f.Autojob(ctx, JobEnv{Run: 1, Auto: true, AutoN: 1}, "100"); err != nil {
		t.Fatal(err)
	}
	if want := "2 case(s) left (1 failed, 0 interrupted, 0 never ran, 1 unfit); resubmitting with N=1.\n"; !strings.HasPrefix(out.String(), want) {
		t.Errorf("autojob said %q, want %q first", out, want)
	}
	if st, _ := f.readState(ctx); st.Run != 2 {
		t.Fatalf("state %+v, want run 2", st)
	}
	writeStatus(t, f, "102", 2, func(w *status.Writer) {
		w.Start(2, t0)
		w.End(2, 1, t0, time.Second)
		w.Unfit(3, t0, "needs 2 GPUs, the job has 0")
	})
	out.Reset()
	if err := f.Autojob(ctx, JobEnv{Run: 2, Auto: true, AutoN: 1}, "100"); err != nil {
		t.Fatal(err)
	}
	if want := "No case succeeded in run 2; cannot auto-resubmit; exiting (1 failed, 0 interrupted, 0 never ran, 1 unfit).\n"; out.String() != want {
		t.Errorf("autojob said %q, want %q", out, want)
	}
}

// busyBackend says every job runs.
type busyBackend struct{ fakeBackend }

func (b *busyBackend) Jobs(_ context.Context, ids []string) (map[string]backend.JobInfo, error) {
	out := map[string]backend.JobInfo{}
	for _, id := range ids {
		out[id] = backend.JobInfo{ID: id, State: backend.Running}
	}
	return out, nil
}

// farm query says, for each running meta-job whose header says its
// capacity, how much of it its running cases hold; not for a job without
// one, nor for an earlier incarnation of a restarted job.
func TestQueryShowsBusyCPUsAndGPUs(t *testing.T) {
	ctx := context.Background()
	f, _ := newTestFarm(t, strings.Repeat("true\n", 20), &busyBackend{})
	if err := f.Submit(ctx, SubmitOptions{N: 4}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now().Add(-time.Minute)
	create := func(job string, restart int, c status.Capacity) *status.Writer {
		w, err := status.CreateCap(f.Path(layout.StatusDir, layout.StatusFile(job, restart)), job, restart, 1, "node1", c, nil)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	w := create("101", 0, status.Capacity{CPUs: 8, GPUs: 2})
	w.StartAt(1, t0, status.Placement{Loop: 1, CPUs: []int{0, 1, 2, 3}, GPUs: []string{"0"}})
	w.StartAt(2, t0, status.Placement{Loop: 2, CPUs: []int{4, 5}})
	w.StartAt(3, t0, status.Placement{Loop: 3, CPUs: []int{6}})
	w.End(3, 0, t0, time.Second)
	w.Unfit(4, t0, "needs 16 CPUs, the job has 8")
	w.Close()
	w = create("102", 0, status.Capacity{}) // says nothing: not shown
	w.Start(5, t0)
	w.Close()
	w = create("103", 0, status.Capacity{CPUs: 4, GPUs: 1}) // its restart runs
	w.StartAt(6, t0, status.Placement{Loop: 1, CPUs: []int{0, 1, 2, 3}, GPUs: []string{"0"}})
	w.Close()
	w = create("103", 1, status.Capacity{CPUs: 4, GPUs: 1})
	w.StartAt(7, t0, status.Placement{Loop: 1, CPUs: []int{0}})
	w.Close()
	w = create("104", 0, status.Capacity{CPUs: 192})
	w.Close()
	q, _, err := f.query(ctx, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	want := []JobBusy{
		{Job: "101", CPUs: 8, BusyCPUs: 6, GPUs: 2, BusyGPUs: 1},
		{Job: "103", CPUs: 4, BusyCPUs: 1, GPUs: 1, BusyGPUs: 0},
		{Job: "104", CPUs: 192},
	}
	if diff := cmp.Diff(want, q.Busy); diff != "" {
		t.Errorf("busy (-want +got):\n%s", diff)
	}
	var b bytes.Buffer
	writeQuery(&b, q, Text)
	wantText := "job 101: 6/8 CPUs, 1/2 GPUs busy\njob 103: 1/4 CPUs, 0/1 GPUs busy\njob 104: 0/192 CPUs busy\n"
	if !strings.HasSuffix(b.String(), "\n"+wantText) {
		t.Errorf("query:\n%s\nwant it to end with\n%s", b.String(), wantText)
	}
	if diff := cmp.Diff(CaseCounts{Total: 20, Succeeded: 1, Unfit: 1, Interrupted: 1, Running: 4, Left: 13}, q.FarmCases); diff != "" {
		t.Errorf("farm-wide (-want +got):\n%s", diff)
	}
	b.Reset()
	writeQuery(&b, q, JSON)
	if want := `"busy":[{"job":"101","cpus":8,"busy_cpus":6,"gpus":2,"busy_gpus":1},{"job":"103","cpus":4,"busy_cpus":1,"gpus":1,"busy_gpus":0},{"job":"104","cpus":192,"busy_cpus":0,"gpus":0,"busy_gpus":0}]`; !strings.Contains(b.String(), want) {
		t.Errorf("query --json:\n%s\nwant %s", b.String(), want)
	}
	if want := `"run_cases":{"total":20,"succeeded":1,"failed":0,"interrupted":1,"unfit":1,"running":4,"left":20}`; !strings.Contains(b.String(), want) {
		t.Errorf("query --json:\n%s\nwant %s", b.String(), want)
	}
}
