package slurm

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/farm-hpc/farm/backend"
)

// Unit tests: no Slurm needed. Fake sbatch/squeue/scontrol scripts in $PATH
// stand in for Slurm where a command must run.

func TestMapState(t *testing.T) {
	for in, want := range map[string]backend.JobState{
		"PENDING": backend.Pending, "REQUEUED": backend.Pending, "REQUEUE_HOLD": backend.Pending, "SPECIAL_EXIT": backend.Pending,
		"RUNNING": backend.Running, "CONFIGURING": backend.Running, "COMPLETING": backend.Running, "SUSPENDED": backend.Running,
		"STOPPED": backend.Running, "SIGNALING": backend.Running, "STAGE_OUT": backend.Running, "RESIZING": backend.Running,
		"COMPLETED": backend.Completed, "CANCELLED": backend.Cancelled, "CANCELLED by 0": backend.Cancelled,
		"TIMEOUT": backend.Timeout, "FAILED": backend.Failed,
		"NODE_FAIL": backend.Failed, "OUT_OF_MEMORY": backend.Failed, "PREEMPTED": backend.Failed, "BOOT_FAIL": backend.Failed,
		"DEADLINE": backend.Failed, "REVOKED": backend.Failed, "SOMETHING_NEW": backend.Failed,
		"PD": backend.Pending, "R": backend.Running, "CG": backend.Running, "CD": backend.Completed, "CA": backend.Cancelled, "TO": backend.Timeout,
		" running ": backend.Running,
	} {
		if got := MapState(in); got != want {
			t.Errorf("MapState(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestParseTime(t *testing.T) {
	want := time.Date(2026, 11, 22, 4, 19, 16, 0, time.Local)
	if got := ParseTime("2026-11-22T04:19:16"); !got.Equal(want) {
		t.Errorf("ParseTime = %s, want %s", got, want)
	}
	if got := ParseTime(" 2026-11-22T04:19:16\n"); !got.Equal(want) {
		t.Errorf("ParseTime with spaces = %s", got)
	}
	for _, s := range []string{"N/A", "Unknown", "None", "INVALID", "", "0:47", "2026-11-22"} {
		if got := ParseTime(s); !got.IsZero() {
			t.Errorf("ParseTime(%q) = %s, want zero", s, got)
		}
	}
}

func TestTaskMatches(t *testing.T) {
	for _, tc := range []struct {
		expr, task string
		want       bool
	}{
		{"4", "4", true}, {"4", "5", false},
		{"1-12", "1", true}, {"1-12", "12", true}, {"1-12", "13", false},
		{"3,5-7", "6", true}, {"3,5-7", "4", false}, {"3,5-7", "3", true},
		{"1-3%1", "2", true}, {"1-3%1", "4", false},
		{"1-9:2", "5", true}, {"1-9:2", "4", false},
		{"[2-4]", "3", true},
		{"", "1", false}, {"1-3", "x", false},
	} {
		if got := backend.TaskMatches(tc.expr, tc.task); got != tc.want {
			t.Errorf("backend.TaskMatches(%q, %q) = %t, want %t", tc.expr, tc.task, got, tc.want)
		}
	}
}

func TestParseSbatch(t *testing.T) {
	for in, want := range map[string]string{"123\n": "123", "123;cluster\n": "123", "warning\n77\n": "77"} {
		if got, err := parseSbatch(in); err != nil || got != want {
			t.Errorf("parseSbatch(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "Submitted batch job 12\n", "abc"} {
		if _, err := parseSbatch(in); err == nil {
			t.Errorf("parseSbatch(%q): no error", in)
		}
	}
}

func TestParseMaxArraySize(t *testing.T) {
	cfg := "Configuration data as of 2026-11-22T04:00:00\nMailProg                = /bin/true\nMaxArraySize            = 1001\nMaxJobCount             = 10000\n"
	if n, ok := parseMaxArraySize(cfg); !ok || n != 1001 {
		t.Errorf("parseMaxArraySize = %d, %t", n, ok)
	}
	if _, ok := parseMaxArraySize("MaxJobCount = 5\n"); ok {
		t.Error("found MaxArraySize where there is none")
	}
}

// A snapshot of squeue -h -t all -j 20,21,30,31,40 -o squeueFormat: array 20
// with one task running, two done and the rest pending; plain jobs 21 (done)
// and 30 (timeout); array 31 whose pending tasks were cancelled while task 1
// runs; array 40 all finished, one task failed.
const snapshot = `20|4-12|20|PENDING|2026-11-22T05:00:00|2026-11-22T06:00:00
20|3|23|RUNNING|2026-11-22T04:46:26|2026-11-22T04:47:26
20|1|21|COMPLETED|2026-11-22T04:46:25|2026-11-22T04:46:26
20|2|22|COMPLETED|2026-11-22T04:46:25|2026-11-22T04:46:27
30|N/A|30|TIMEOUT|2026-11-22T04:40:00|2026-11-22T04:41:14
31|N/A|31|CANCELLED|N/A|2026-11-22T04:46:30
31|1|32|RUNNING|2026-11-22T04:46:20|2026-11-22T04:47:20
40|1|41|COMPLETED|2026-11-22T04:46:20|2026-11-22T04:46:21
40|2|40|FAILED|2026-11-22T04:46:20|2026-11-22T04:46:22

`

func TestParseSqueueAndSumUp(t *testing.T) {
	rows, err := parseSqueue(snapshot)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 9 {
		t.Fatalf("%d rows, want 9", len(rows))
	}
	if !rows[0].Start.IsZero() || !rows[0].End.IsZero() {
		t.Errorf("a pending row keeps the scheduler's guessed times: %+v", rows[0])
	}
	if rows[1].Task != "3" || !rows[1].single() || rows[0].single() || rows[4].Task != "" {
		t.Errorf("task fields: %+v %+v %+v", rows[0], rows[1], rows[4])
	}
	asked := []string{"20", "21", "30", "31", "40", "20_7", "20_2", "20_99", "99", "bogus"}
	m := newQueue(asked, rows).Infos()
	ts := func(s string) time.Time { return ParseTime(s) }
	want := map[string]backend.JobInfo{
		"20":    {State: backend.Running, Start: ts("2026-11-22T04:46:25"), End: ts("2026-11-22T04:47:26")},
		"20_1":  {State: backend.Completed, Start: ts("2026-11-22T04:46:25"), End: ts("2026-11-22T04:46:26")},
		"20_2":  {State: backend.Completed, Start: ts("2026-11-22T04:46:25"), End: ts("2026-11-22T04:46:27")},
		"20_3":  {State: backend.Running, Start: ts("2026-11-22T04:46:26"), End: ts("2026-11-22T04:47:26")},
		"20_7":  {State: backend.Pending}, // in the pending group 4-12
		"20_99": {State: backend.Gone},
		"21":    {State: backend.Completed, Start: ts("2026-11-22T04:46:25"), End: ts("2026-11-22T04:46:26")}, // task 20_1 by its own job ID
		"30":    {State: backend.Timeout, Start: ts("2026-11-22T04:40:00"), End: ts("2026-11-22T04:41:14")},
		"31":    {State: backend.Running, Start: ts("2026-11-22T04:46:20"), End: ts("2026-11-22T04:47:20")},
		"31_1":  {State: backend.Running, Start: ts("2026-11-22T04:46:20"), End: ts("2026-11-22T04:47:20")},
		"40":    {State: backend.Failed, Start: ts("2026-11-22T04:46:20"), End: ts("2026-11-22T04:46:22")},
		"40_1":  {State: backend.Completed, Start: ts("2026-11-22T04:46:20"), End: ts("2026-11-22T04:46:21")},
		"40_2":  {State: backend.Failed, Start: ts("2026-11-22T04:46:20"), End: ts("2026-11-22T04:46:22")},
		"99":    {State: backend.Gone},
		"bogus": {State: backend.Gone},
	}
	for id, w := range want {
		w.ID = id
		got, ok := m[id]
		if !ok {
			t.Errorf("no entry for %s", id)
			continue
		}
		if got.ID != w.ID || got.State != w.State || !got.Start.Equal(w.Start) || !got.End.Equal(w.End) {
			t.Errorf("%s = %+v, want %+v", id, got, w)
		}
	}
	if len(m) != len(want) {
		t.Errorf("%d entries, want %d: %v", len(m), len(want), m)
	}
	q := newQueue(asked, rows)
	if a := q.Jobs["31"]; !a.Cancelled || a.Pending || !a.Running {
		t.Errorf("array 31 flags %+v: want cancelled and running, nothing pending", a)
	}
	if a := q.Jobs["20"]; !a.Pending || !a.Running {
		t.Errorf("array 20 flags %+v: want pending and running", a)
	}
}

func TestParseSqueueRejectsGarbage(t *testing.T) {
	for _, out := range []string{"20|1|RUNNING\n", "x|N/A|x|RUNNING|N/A|N/A\n", "slurm_load_jobs error: Socket timed out\n"} {
		if _, err := parseSqueue(out); err == nil {
			t.Errorf("parseSqueue(%q): no error", out)
		}
	}
	if rows, err := parseSqueue("CLUSTER: c1\n\n"); err != nil || len(rows) != 0 {
		t.Errorf("cluster header: %v %v", rows, err)
	}
}

// fakeBin puts executable scripts named after Slurm commands first in $PATH.
func fakeBin(t *testing.T, scripts map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range scripts {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/bash\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", dir+":/usr/bin:/bin")
	return dir
}

func TestSelfFromEnvironment(t *testing.T) {
	ctx := context.Background()
	calls := filepath.Join(t.TempDir(), "calls")
	fakeBin(t, map[string]string{"squeue": `echo "$*" >> ` + calls + `; echo 2026-11-22T04:19:16`})
	for _, k := range []string{"SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", "SLURM_JOB_END_TIME", "SLURM_RESTART_COUNT"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	b := New(t.TempDir())
	if _, err := b.Self(ctx, backend.SelfRequest{Env: os.Getenv}); err == nil || !strings.Contains(err.Error(), "not inside a Slurm job") {
		t.Errorf("Self outside a job: %v", err)
	}

	t.Setenv("SLURM_JOB_ID", "42")
	t.Setenv("SLURM_JOB_END_TIME", "1800000000")
	s, err := b.Self(ctx, backend.SelfRequest{Env: os.Getenv})
	if err != nil || s.ID != "42" || !s.End.Equal(time.Unix(1800000000, 0)) || s.Restart != 0 {
		t.Errorf("Self = %+v, %v; want job 42 ending at $SLURM_JOB_END_TIME, restart 0", s, err)
	}
	// Requeued after a node failure: same ID, SLURM_RESTART_COUNT set.
	t.Setenv("SLURM_RESTART_COUNT", "2")
	if s, err = b.Self(ctx, backend.SelfRequest{Env: os.Getenv}); err != nil || s.ID != "42" || s.Restart != 2 {
		t.Errorf("Self of a restarted job = %+v, %v; want job 42, restart 2", s, err)
	}
	os.Unsetenv("SLURM_RESTART_COUNT")
	if _, err := os.Stat(calls); err == nil {
		t.Errorf("Self asked squeue although SLURM_JOB_END_TIME is set")
	}

	// An array task, without SLURM_JOB_END_TIME (Slurm 22.05): squeue is
	// asked for the task by its array ID.
	os.Unsetenv("SLURM_JOB_END_TIME")
	t.Setenv("SLURM_JOB_ID", "45")
	t.Setenv("SLURM_ARRAY_JOB_ID", "44")
	t.Setenv("SLURM_ARRAY_TASK_ID", "2")
	s, err = b.Self(ctx, backend.SelfRequest{Env: os.Getenv})
	if err != nil || s.ID != "44_2" || !s.End.Equal(ParseTime("2026-11-22T04:19:16")) {
		t.Errorf("Self = %+v, %v; want 44_2 with squeue's end time", s, err)
	}
	if got, _ := os.ReadFile(calls); strings.TrimSpace(string(got)) != "-h -j 44_2 -o %e" {
		t.Errorf("squeue called with %q", got)
	}
	// A SIMPLE-mode task does not need its end: no squeue call.
	os.Remove(calls)
	if s, err = b.Self(ctx, backend.SelfRequest{Env: os.Getenv, NoEnd: true}); err != nil || s.ID != "44_2" || !s.End.IsZero() {
		t.Errorf("Self with NoEnd = %+v, %v; want 44_2 and no end", s, err)
	}
	if _, err := os.Stat(calls); err == nil {
		t.Errorf("Self with NoEnd asked squeue")
	}

	// squeue failing leaves the end unknown, not an error.
	fakeBin(t, map[string]string{"squeue": `echo "slurm_load_jobs error: Unable to contact slurm controller" >&2; exit 1`})
	s, err = b.Self(ctx, backend.SelfRequest{Env: os.Getenv})
	if err != nil || s.ID != "44_2" || !s.End.IsZero() {
		t.Errorf("Self with squeue down = %+v, %v; want the ID and a zero end", s, err)
	}
}

func TestJobsIsOneSqueueCall(t *testing.T) {
	calls := filepath.Join(t.TempDir(), "calls")
	fakeBin(t, map[string]string{"squeue": `echo "$*" >> ` + calls + `
echo "7|N/A|7|RUNNING|2026-11-22T04:46:20|2026-11-22T05:46:20"
echo "SQUEUE_USERS=$SQUEUE_USERS TIME=$SLURM_TIME_FORMAT" >&2`})
	t.Setenv("SQUEUE_USERS", "somebody-else")
	t.Setenv("SLURM_TIME_FORMAT", "relative")
	var ids []string
	for i := 1; i <= 2000; i++ {
		ids = append(ids, strconv.Itoa(1000+i))
	}
	ids = append(ids, "7")
	m, err := New("").Jobs(context.Background(), ids)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(calls)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 1 {
		t.Fatalf("%d squeue calls for %d jobs, want 1", len(lines), len(ids))
	}
	if !strings.HasPrefix(lines[0], "-h -t all -j ") || !strings.HasSuffix(lines[0], " -o "+squeueFormat) {
		t.Errorf("squeue called with %.100q", lines[0])
	}
	if m["7"].State != backend.Running || len(m) != len(ids) {
		t.Errorf("Jobs: 7 = %+v, %d entries", m["7"], len(m))
	}
}

func TestSqueueEnvironment(t *testing.T) {
	t.Setenv("SQUEUE_USERS", "somebody-else")
	t.Setenv("SCANCEL_STATE", "PENDING")
	t.Setenv("SLURM_TIME_FORMAT", "relative")
	env := strings.Join(queryEnv(), "\n") + "\n"
	if strings.Contains(env, "SQUEUE_USERS") || strings.Contains(env, "SCANCEL_STATE") || strings.Contains(env, "relative") || !strings.Contains(env, "SLURM_TIME_FORMAT=standard\n") {
		t.Errorf("query environment keeps filters or time format:\n%s", env)
	}
	t.Setenv("SLURM_ARRAY_JOB_ID", "5")
	t.Setenv("SLURM_ARRAY_TASK_ID", "3")
	t.Setenv("USERVAR", "kept")
	env = strings.Join(submitEnv(nil, []string{"FARM_RUN=2"}), "\n") + "\n"
	if strings.Contains(env, "SLURM_ARRAY_") || !strings.Contains(env, "USERVAR=kept\n") || !strings.Contains(env, "FARM_RUN=2\n") {
		t.Errorf("submit environment:\n%s", env)
	}
}

func TestSqueueFailureIsAnError(t *testing.T) {
	fakeBin(t, map[string]string{"squeue": `echo "slurm_load_jobs error: Unable to contact slurm controller (connect failure)" >&2; exit 1`})
	m, err := New("").Jobs(context.Background(), []string{"5", "6"})
	if err == nil || !strings.Contains(err.Error(), "Unable to contact slurm controller") {
		t.Errorf("Jobs with squeue failing = %v, %v; want an error with squeue's message", m, err)
	}
	// One purged job: squeue exits 1 with "Invalid job id specified".
	fakeBin(t, map[string]string{"squeue": `echo "slurm_load_jobs error: Invalid job id specified" >&2; exit 1`})
	m, err = New("").Jobs(context.Background(), []string{"5"})
	if err != nil || m["5"].State != backend.Gone {
		t.Errorf("Jobs of a purged job = %v, %v; want GONE", m, err)
	}
}

func TestSqueueHangTimesOut(t *testing.T) {
	fakeBin(t, map[string]string{"squeue": `sleep 30`})
	b := &Backend{CallTimeout: 300 * time.Millisecond}
	start := time.Now()
	_, err := b.Jobs(context.Background(), []string{"5"})
	var ce *CommandError
	if err == nil || !errors.As(err, &ce) || ce.Timeout != 300*time.Millisecond || !strings.Contains(err.Error(), "no answer within 300ms") {
		t.Errorf("Jobs with squeue hanging: %v; want a timeout error", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the 300ms timeout took %s", d)
	}
	fakeBin(t, map[string]string{"squeue": `exec sleep 30`})
	_, err = b.Cancel(context.Background(), []string{"5"}, backend.AllActive)
	if err == nil {
		t.Error("Cancel with squeue hanging: no error")
	}
}

func TestSubmitCommandLineAndFailure(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "sbatch.log")
	fakeBin(t, map[string]string{"sbatch": `n=$(( $(cat ` + log + ` 2>/dev/null | wc -l) + 1 ))
echo "$* | FARM_RUN=$FARM_RUN ARRAY=${SLURM_ARRAY_JOB_ID:-none}" >> ` + log + `
if [ $n -eq 3 ]; then echo "sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified" >&2; exit 1; fi
echo $((100 + n))`})
	t.Setenv("SLURM_ARRAY_JOB_ID", "9") // as if submitted from an array task
	req := backend.SubmitRequest{
		Dir: dir, Script: filepath.Join(dir, "job_script.sh"), Name: "farm-x-meta", Count: 4,
		Env: []string{"FARM_RUN=1"}, Args: []string{"--mem=1G"}, After: []string{"7", "8"},
		Output: func(id string) string { return filepath.Join(dir, "OUTPUT", "slurm-"+id+".out") },
	}
	ids, err := New(dir).Submit(context.Background(), req)
	if len(ids) != 2 || ids[0] != "101" || ids[1] != "102" {
		t.Errorf("IDs %v, want the two submitted before the failure", ids)
	}
	if err == nil || !strings.HasPrefix(err.Error(), "Something wrong with sbatch farm submission") || !strings.Contains(err.Error(), "Invalid account or account/partition") {
		t.Errorf("error %v: want the META message with sbatch's stderr", err)
	}
	b, _ := os.ReadFile(log)
	first, _, _ := strings.Cut(string(b), "\n")
	want := "--parsable --chdir " + dir + " --export=ALL --open-mode=append --job-name farm-x-meta -o " + dir + "/OUTPUT/slurm-%j.out --mem=1G --dependency=afterany:7:8 " + dir + "/job_script.sh | FARM_RUN=1 ARRAY=none"
	if first != want {
		t.Errorf("sbatch called with\n%s\nwant\n%s", first, want)
	}
}

// TestSubmitInterruptedLetsTheCallInFlightFinish: a Submit whose context
// is cancelled while sbatch runs lets that sbatch finish (its job
// submitted at the controller, as a real sbatch's may already be) and
// returns its ID with the context's error, and starts no further sbatch.
// The sbatch runs in a process group of its own: a Ctrl-C at the
// terminal, which signals the foreground group, does not kill it.
func TestSubmitInterruptedLetsTheCallInFlightFinish(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "submitted")
	started := filepath.Join(dir, "started")
	fakeBin(t, map[string]string{"sbatch": `n=$(( $(cat ` + log + ` 2>/dev/null | wc -l) + 301 ))
echo $n >> ` + log + `
[ "$(ps -o pgid= $$ | tr -d ' ')" = "$$" ] || echo "not a group leader" >> ` + log + `
: > ` + started + `
sleep 1
echo $n`})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for {
			if _, err := os.Stat(started); err == nil {
				cancel()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	ids, err := New(dir).Submit(ctx, backend.SubmitRequest{Dir: dir, Script: "s.sh", Count: 3})
	if strings.Join(ids, " ") != "301" || !errors.Is(err, context.Canceled) {
		t.Errorf("Submit interrupted during its first sbatch = %v, %v; want [301] and context.Canceled", ids, err)
	}
	if err == nil || !strings.Contains(err.Error(), "stopped before sbatch call 2 of 3 (1 job(s) submitted before it)") {
		t.Errorf("error %v", err)
	}
	if b, _ := os.ReadFile(log); string(b) != "301\n" {
		t.Errorf("sbatch log %q, want one call, in a group of its own", b)
	}
}

func TestSubmitArrayChunks(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "sbatch.log")
	fakeBin(t, map[string]string{
		"sbatch":   `echo "$*" >> ` + log + `; echo $(( 200 + $(wc -l < ` + log + `) ))`,
		"scontrol": `echo "MaxArraySize            = 4"`,
	})
	req := backend.SubmitRequest{Dir: dir, Script: "s.sh", Count: 7, Array: true,
		Output: func(id string) string { return "OUTPUT/slurm-" + id + ".out" }}
	ids, err := New(dir).Submit(context.Background(), req)
	if err != nil || strings.Join(ids, " ") != "201 202 203" {
		t.Fatalf("Submit = %v, %v; want 3 arrays", ids, err)
	}
	b, _ := os.ReadFile(log)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	for i, want := range []string{"--array=1-3 s.sh", "--array=1-3 s.sh", "--array=1-1 s.sh"} {
		if !strings.HasSuffix(lines[i], want) || !strings.Contains(lines[i], "-o OUTPUT/slurm-%A_%a.out") {
			t.Errorf("sbatch call %d: %q, want ... -o OUTPUT/slurm-%%A_%%a.out ... %s", i+1, lines[i], want)
		}
	}
	// Arrays disabled (MaxArraySize=0): one plain job per case.
	os.Remove(log)
	ids, err = (&Backend{Dir: dir, MaxArraySize: 1}).Submit(context.Background(), backend.SubmitRequest{Dir: dir, Script: "s.sh", Count: 2, Array: true})
	if err != nil || len(ids) != 2 {
		t.Fatalf("Submit without arrays = %v, %v", ids, err)
	}
	if b, _ := os.ReadFile(log); strings.Contains(string(b), "--array") {
		t.Errorf("arrays used although disabled:\n%s", b)
	}
}

func TestAvailableReasons(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	if got := Available(context.Background()); got != "sbatch not found" {
		t.Errorf("Available without sbatch = %q", got)
	}
	fakeBin(t, map[string]string{"sbatch": "exit 0", "scontrol": `echo "Slurmctld(primary) at head is DOWN"; exit 1`})
	if got := Available(context.Background()); got != "no Slurm controller answers" {
		t.Errorf("Available with the controller down = %q", got)
	}
	fakeBin(t, map[string]string{"sbatch": "exit 0", "scontrol": `exec sleep 30`})
	old := pingTimeout
	pingTimeout = 300 * time.Millisecond
	start := time.Now()
	got := Available(context.Background())
	pingTimeout = old // the answering controller below gets the usual time (a loaded machine starts a script in more than 300 ms)
	if !strings.HasPrefix(got, "no Slurm controller answers") {
		t.Errorf("Available with the controller hanging = %q", got)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Available took %s with a 300ms ping timeout", d)
	}
	fakeBin(t, map[string]string{"sbatch": "exit 0", "scontrol": `echo "Slurmctld(primary) at vm is UP"`})
	if got := Available(context.Background()); got != "" {
		t.Errorf("Available with the controller up = %q", got)
	}
}

func TestChunksStayUnderTheArgumentLimit(t *testing.T) {
	var ids []string
	for i := 0; i < 30000; i++ {
		ids = append(ids, strconv.Itoa(1000000+i))
	}
	lists := chunks(ids, maxJobList)
	if len(lists) != 3 {
		t.Errorf("%d lists for 30,000 IDs of 7 digits, want 3", len(lists))
	}
	var back []string
	for _, l := range lists {
		if len(l) > maxJobList {
			t.Errorf("list of %d bytes", len(l))
		}
		back = append(back, strings.Split(l, ",")...)
	}
	if strings.Join(back, ",") != strings.Join(ids, ",") {
		t.Error("chunks lost or reordered IDs")
	}
	if got := chunks(nil, 10); len(got) != 0 {
		t.Errorf("chunks(nil) = %q", got)
	}
	if got := chunks([]string{"1", "22", "333"}, 4); strings.Join(got, " ") != "1,22 333" {
		t.Errorf("chunks = %q", got)
	}
}

func TestTaskCount(t *testing.T) {
	for expr, want := range map[string]int{"": 1, "4": 1, "3-12": 10, "[3-12]": 10, "1,4-7:3": 3, "1-100%5": 100, "5-20": 16} {
		if got := backend.TaskCount(expr); got != want {
			t.Errorf("backend.TaskCount(%q) = %d, want %d", expr, got, want)
		}
	}
}
