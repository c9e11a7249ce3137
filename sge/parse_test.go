package sge

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/farm-hpc/farm/backend"
)

// qstatSample is `qstat -xml -r -u root` of gridengine 8.1.9 (cut down): a
// running plain job with h_rt, two running tasks of array 10, its pending
// tasks 3-6, a held plain job.
const qstatSample = `<?xml version='1.0'?>
<job_info  xmlns:xsd="http://arc.liv.ac.uk/repos/darcs/sge/source/dist/util/resources/schemas/qstat/qstat.xsd">
  <queue_info>
    <job_list state="running">
      <JB_job_number>9</JB_job_number>
      <state>r</state>
      <JAT_start_time>2026-11-23T02:28:33</JAT_start_time>
      <hard_request name="h_rt" resource_contribution="0.000000">600</hard_request>
    </job_list>
    <job_list state="running">
      <JB_job_number>10</JB_job_number>
      <state>r</state>
      <JAT_start_time>2026-11-23T02:28:34</JAT_start_time>
      <tasks>1</tasks>
    </job_list>
    <job_list state="running">
      <JB_job_number>10</JB_job_number>
      <state>dr</state>
      <JAT_start_time>2026-11-23T02:28:34</JAT_start_time>
      <tasks>2</tasks>
    </job_list>
  </queue_info>
  <job_info>
    <job_list state="pending">
      <JB_job_number>10</JB_job_number>
      <state>qw</state>
      <tasks>3-6:1</tasks>
    </job_list>
    <job_list state="pending">
      <JB_job_number>12</JB_job_number>
      <state>hqw</state>
    </job_list>
  </job_info>
</job_info>`

func TestParseQstat(t *testing.T) {
	rows, err := parseQstat(qstatSample)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		got = append(got, fmt.Sprintf("%s/%s/%s", r.Num, r.Task, r.State))
	}
	want := []string{"9//RUNNING", "10/1/RUNNING", "10/2/RUNNING", "10/3-6:1/PENDING", "12//PENDING"}
	if !slices.Equal(got, want) {
		t.Errorf("rows %v, want %v", got, want)
	}
	start := time.Date(2026, 11, 23, 2, 28, 33, 0, time.Local)
	if !rows[0].Start.Equal(start) || !rows[0].End.Equal(start.Add(10*time.Minute)) {
		t.Errorf("job 9: start %s end %s; want %s and 10 minutes later (h_rt)", rows[0].Start, rows[0].End, start)
	}
	if !rows[1].End.IsZero() || !rows[3].Start.IsZero() {
		t.Errorf("an end without h_rt, or a start for a pending job: %+v %+v", rows[1], rows[3])
	}
	if _, err := parseQstat("error: can't unpack"); err == nil {
		t.Error("qstat output that is not XML: no error")
	}
	if _, err := parseQstat(strings.Replace(qstatSample, "<JB_job_number>12<", "<JB_job_number>x<", 1)); err == nil {
		t.Error("a bad job number: no error")
	}
}

func TestParseQsubAndNames(t *testing.T) {
	for out, want := range map[string]string{"8\n": "8", "8.1-3:1\n": "8", "Your job 8 (\"x\") has been submitted\n8\n": "8"} {
		if got, err := parseQsub(out); err != nil || got != want {
			t.Errorf("parseQsub(%q) = %q, %v; want %q", out, got, err, want)
		}
	}
	for _, bad := range []string{"", "Unable to run job", "8.1"} {
		if got, err := parseQsub(bad); err == nil {
			t.Errorf("parseQsub(%q) = %q, want an error", bad, got)
		}
	}
	for in, want := range map[string]string{"farm-my farm-meta": "farm-my_farm-meta", "1abc": "j1abc", "a/b:c@d": "a_b_c_d", "": "j"} {
		if got := jobName(in); got != want {
			t.Errorf("jobName(%q) = %q, want %q", in, got, want)
		}
	}
	if n, ok := parseMaxArrayTasks("max_aj_instances 2000\nmax_aj_tasks 75000\n"); !ok || n != 75000 {
		t.Errorf("max_aj_tasks read as %d, %t", n, ok)
	}
	if n, ok := parseMaxArrayTasks("max_aj_tasks 0\n"); !ok || n < 1e9 {
		t.Errorf("max_aj_tasks 0 (no limit) read as %d, %t", n, ok)
	}
}

// acctLine is an accounting record of gridengine 8.1.9 with the given job
// number, task, submission/start/end times, failed code and exit status.
func acctLine(num, task int, sub, start, end int64, failed, exit int) string {
	return fmt.Sprintf("all.q:vm:root:root:t:%d:sge:0:%d:%d:%d:%d:%d:1:0.001:0.005:4660.0:0:0:0:0:594:0:0:0.0:32:0:0:0:7:4:NONE:defaultdepartment:NONE:1:%d:0.007:0.0:0.00003:NONE:0.0:NONE:5087232.0:0:0",
		num, sub, start, end, failed, exit, task)
}

func TestRecordStates(t *testing.T) {
	for _, tc := range []struct {
		failed, exit int
		marked       bool
		want         backend.JobState
	}{
		{0, 0, false, backend.Completed},
		{0, 0, true, backend.Completed}, // ended before the qdel
		{0, 3, false, backend.Failed},
		{37, 137, false, backend.Timeout},
		{100, 137, true, backend.Cancelled},
		{100, 137, false, backend.Failed},
	} {
		r, ok := parseRecord(acctLine(5, 0, 100, 101, 102, tc.failed, tc.exit))
		if !ok {
			t.Fatal("record not read")
		}
		if got := r.state(tc.marked); got != tc.want {
			t.Errorf("failed %d exit %d marked %t: %s, want %s", tc.failed, tc.exit, tc.marked, got, tc.want)
		}
	}
	if _, ok := parseRecord("# Version: 8.1.9"); ok {
		t.Error("a comment read as a record")
	}
	if r, _ := parseRecord(acctLine(5, 0, 1795400858000, 1795400858000, 1795400864000, 0, 0)); r.End.Unix() != 1795400864 {
		t.Errorf("milliseconds read as %s", r.End)
	}
}

// TestReadAccounting: the latest record of each wanted job and task is
// found across chunk boundaries, and the backward read stops once records
// end well before the wanted jobs were submitted.
func TestReadAccounting(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "accounting")
	var b strings.Builder
	b.WriteString("# Version: 8.1.9\n")
	// A record of job 30003 where no record of it can be (it ends before
	// the jobs below it were submitted): found only by a read that does
	// not stop.
	b.WriteString(acctLine(30003, 0, 1, 1, 2, 0, 0) + "\n")
	// 30,000 old jobs (about 6 MB, several chunks), then the farm's.
	for i := 1; i <= 30000; i++ {
		b.WriteString(acctLine(i, 0, int64(i), int64(i), int64(i+1), 0, 0) + "\n")
	}
	base := int64(100000)
	b.WriteString(acctLine(30001, 0, base, base, base+5, 0, 1) + "\n")    // first run of 30001
	b.WriteString(acctLine(30002, 1, base, base, base+6, 0, 0) + "\n")    // array task 1
	b.WriteString(acctLine(30002, 2, base, base, base+7, 37, 137) + "\n") // task 2 cut at h_rt
	b.WriteString(acctLine(30001, 0, base, base+8, base+9, 0, 0) + "\n")  // 30001 restarted: its latest record
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	recs, err := readAccounting(p, map[string]bool{"30001": true, "30002": true, "7": true})
	if err != nil {
		t.Fatal(err)
	}
	if r := recs["30001"]; len(r) != 1 || r[0].Exit != 0 || r[0].End.Unix() != base+9 {
		t.Errorf("30001: %+v; want its latest record only", r)
	}
	if r := recs["30002"]; len(r) != 2 {
		t.Errorf("30002: %+v; want both tasks", r)
	}
	// Job 7 ended long before 30001 was submitted: wanted with them, it
	// is still found (the stop rule needs a job numbered below 7).
	if r := recs["7"]; len(r) != 1 {
		t.Errorf("7: %+v, want its record", r)
	}
	// With 30001 and 30003 wanted, the read stops once records end an
	// hour before job 30000 (numbered below both) was submitted: it does
	// not reach the stray record at the file's start.
	recs, err = readAccounting(p, map[string]bool{"30001": true, "30003": true})
	if err != nil || len(recs["30001"]) != 1 || len(recs["30003"]) != 0 {
		t.Errorf("30001 and an unknown 30003: %v, %v", recs, err)
	}
}

// TestSettle: the final states of jobs qstat no longer lists, from their
// records and Cancel's marks: a job deleted while pending (marked, no
// record) is CANCELLED, an unknown one GONE, an array sums up its tasks and
// has an entry per task.
func TestSettle(t *testing.T) {
	b := &Backend{Dir: t.TempDir()}
	b.mark("21")
	q := backend.NewQueue([]string{"20", "21", "22", "23", "23.2"})
	rec := func(num string, task, failed, exit int) record {
		return record{Num: num, Task: task, Start: time.Unix(100, 0), End: time.Unix(200, 0), Failed: failed, Exit: exit}
	}
	b.settle(q, map[string][]record{
		"20": {rec("20", 0, 0, 0)},
		"23": {rec("23", 1, 0, 0), rec("23", 2, 37, 137)},
	})
	for id, want := range map[string]backend.JobState{"20": backend.Completed, "21": backend.Cancelled, "22": backend.Gone, "23": backend.Timeout, "23.2": backend.Timeout} {
		if got := q.Jobs[id].State(); got != want {
			t.Errorf("%s: %s, want %s", id, got, want)
		}
	}
	if q.Tasks["23.1"].State != backend.Completed || q.Tasks["23.2"].State != backend.Timeout {
		t.Errorf("tasks of 23: %v", q.Tasks)
	}
}

func TestSelfFromEnvironment(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	b := &Backend{}
	s, err := b.Self(t.Context(), backend.SelfRequest{NoEnd: true, Env: env(map[string]string{"JOB_ID": "8", "SGE_TASK_ID": "3", "NSLOTS": "4", "RESTARTED": "1", "SGE_HGR_gpu": "0 1"})})
	if err != nil || s.ID != "8.3" || s.Restart != 1 || s.Alloc.CPUs != 4 || !slices.Equal(s.Alloc.GPUs, []string{"0", "1"}) {
		t.Errorf("Self = %+v, %v", s, err)
	}
	s, err = b.Self(t.Context(), backend.SelfRequest{NoEnd: true, Env: env(map[string]string{"JOB_ID": "9", "SGE_TASK_ID": "undefined", "NSLOTS": "1"})})
	if err != nil || s.ID != "9" || s.Restart != 0 || s.Alloc.CPUs != 1 || s.Alloc.GPUs != nil {
		t.Errorf("Self of a plain job = %+v, %v", s, err)
	}
	for _, bad := range []map[string]string{{}, {"JOB_ID": "x"}, {"JOB_ID": "9", "SGE_TASK_ID": "1-3"}} {
		if _, err := b.Self(t.Context(), backend.SelfRequest{NoEnd: true, Env: env(bad)}); err == nil {
			t.Errorf("Self with %v: no error", bad)
		}
	}
	end := selfEnd(`<detailed_job_info><djob_info><element>
<JB_hard_resource_list><qstat_l_requests><CE_name>h_rt</CE_name><CE_doubleval>3723.000000</CE_doubleval></qstat_l_requests></JB_hard_resource_list>
<JB_ja_tasks><ulong_sublist><JAT_task_number>1</JAT_task_number><JAT_start_time>1795400913</JAT_start_time></ulong_sublist></JB_ja_tasks>
</element></djob_info></detailed_job_info>`, "undefined")
	if end.Unix() != 1795400913+3723 {
		t.Errorf("selfEnd = %s (%d)", end, end.Unix())
	}
}

func TestSubmitEnvDropsJobVariables(t *testing.T) {
	env := submitEnv([]string{"PATH=/bin", "JOB_ID=4", "SGE_TASK_ID=2", "CUDA_VISIBLE_DEVICES=0", "SGE_HGR_gpu=0", "VAR=1"}, []string{"FARM_RUN=1"})
	if want := []string{"PATH=/bin", "VAR=1", "FARM_RUN=1"}; !slices.Equal(env, want) {
		t.Errorf("submitEnv = %v, want %v", env, want)
	}
}

// TestAllocated: the core-seconds of the ended jobs asked for, from the
// accounting file: slots × (end - start) of each job's latest record, an
// array's tasks under their own IDs; a job without a record (running) is
// left out; no accounting file is ErrNoAccounting.
func TestAllocated(t *testing.T) {
	p := filepath.Join(t.TempDir(), "accounting")
	four := strings.Replace(acctLine(50, 0, 100, 110, 140, 0, 0), ":NONE:1:0:", ":NONE:4:0:", 1)
	lines := []string{
		"# Version: 8.1.9",
		four,                                 // 4 slots × 30 s
		acctLine(51, 1, 100, 101, 111, 0, 0), // task 1: 10 s
		acctLine(51, 2, 100, 101, 121, 0, 0), // task 2: 20 s
		acctLine(52, 0, 100, 101, 105, 0, 0), // not asked for
		acctLine(53, 3, 100, 101, 104, 0, 0), // a task of 53 not asked for
		acctLine(53, 4, 100, 101, 106, 0, 0),
	}
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := &Backend{Dir: t.TempDir(), Accounting: p}
	got, err := b.Allocated(context.Background(), []string{"50", "51", "53.4", "54", "x;y"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"50": 120, "51.1": 10, "51.2": 20, "53.4": 5}
	if len(got) != len(want) {
		t.Errorf("Allocated = %v, want %v", got, want)
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("%s: %v core-seconds, want %v", id, got[id], w)
		}
	}
	b.Accounting = filepath.Join(t.TempDir(), "none")
	if _, err := b.Allocated(context.Background(), []string{"50"}); !errors.Is(err, backend.ErrNoAccounting) {
		t.Errorf("no accounting file: %v, want ErrNoAccounting", err)
	}
}
