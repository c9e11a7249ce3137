// Package backendtest is the conformance suite every engine runs: what
// backend.Backend promises, checked against a real batch system. It runs real jobs on the backend under test: tiny bash
// job scripts, not the farm binary, so that a failure points at the backend
// and not at the meta-job loop.
//
// Use it from a backend's tests:
//
//	func TestConformance(t *testing.T) {
//		backendtest.Run(t, func(t *testing.T, dir string) backend.Backend {
//			return local.New(dir, local.Options{})
//		})
//	}
package backendtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/layout"
)

// Timeouts of the suite. A job that should start or end within JobTimeout
// fails its subtest if it does not.
var (
	// JobTimeout is how long a subtest waits for a job to reach a state.
	JobTimeout = 90 * time.Second
	// CancelTimeout bounds one Cancel call: more than an engine's cancel
	// command (its call timeout, 30 s) and its wait for the jobs to settle
	// (Grid Engine's 20 s) together, which a loaded qmaster can take (a
	// qstat past the old 30 s, 2026-11-30, load average 10-25).
	CancelTimeout = 60 * time.Second
)

// Environment variables the suite sets: one in the submitting environment
// (SubmitRequest.Environ), one through SubmitRequest.Env.
const (
	envSubmitter = "FARM_BACKENDTEST_SUBMITTER"
	envRequest   = "FARM_BACKENDTEST_REQUEST"
)

// Run runs the conformance subtests against the backends that newBackend
// makes, one per farm directory. Its subtests run in parallel with each
// other.
//
// The job scripts carry a run-time of one minute in the engine's dialect
// (Capabilities().Scripts[0], if it has one) and the requests a TimeLimit
// of one minute; only an engine with Capabilities().EnforcesTimeLimit is expected to enforce a shorter
// TimeLimit (subtest TimeLimit), as Slurm's minimum is one minute and it
// enforces limits only every ~30 s.
func Run(t *testing.T, newBackend func(t *testing.T, dir string) backend.Backend) {
	for _, st := range []struct {
		name string
		fn   func(t *testing.T, h *harness)
	}{
		{"Self", testSelf},
		{"SubmitDistinctIDsAndCompleted", testSubmitCompleted},
		{"ExitCodeGivesFailed", testFailed},
		{"EnvironmentOutputAndDir", testEnvironment},
		{"AfterWaitsForDependency", testAfter},
		{"CancelAllStopsRunningJob", testCancelAll},
		{"CancelPendingOnlyLeavesRunningJob", testCancelPending},
		{"ArrayOneTaskPerJob", testArray},
		{"UnknownJobsAreGone", testGone},
		{"TimeLimit", testTimeLimit},
	} {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			st.fn(t, newHarness(t, newBackend))
		})
	}
}

// harness is one farm directory with its backend, and the jobs a subtest
// submitted (cancelled at its end, and shown if it fails).
type harness struct {
	t   *testing.T
	dir string
	b   backend.Backend
	ids []string
}

func newHarness(t *testing.T, newBackend func(t *testing.T, dir string) backend.Backend) *harness {
	t.Helper()
	dir := t.TempDir()
	if d, err := filepath.EvalSymlinks(dir); err == nil {
		dir = d
	}
	for _, sub := range []string{layout.OutputDir, layout.StatusDir, layout.MiscDir} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	h := &harness{t: t, dir: dir, b: newBackend(t, dir)}
	t.Cleanup(func() {
		if t.Failed() {
			h.diagnose()
		}
		if len(h.ids) > 0 {
			ctx, cancel := context.WithTimeout(context.Background(), CancelTimeout)
			defer cancel()
			h.b.Cancel(ctx, h.ids, backend.AllActive)
		}
	})
	return h
}

// diagnose logs what the backend says of the subtest's jobs and the jobs'
// output files.
func (h *harness) diagnose() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	infos, err := h.b.Jobs(ctx, h.ids)
	h.t.Logf("diagnostics: Jobs(%v) = %s, err %v", h.ids, fmtInfos(infos), err)
	files, _ := filepath.Glob(filepath.Join(h.dir, layout.OutputDir, "*"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		h.t.Logf("diagnostics: %s:\n%s", f, b)
	}
}

func fmtInfos(m map[string]backend.JobInfo) string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		in := m[k]
		fmt.Fprintf(&b, "%s:%s ", k, in.State)
	}
	return strings.TrimSpace(b.String())
}

// script writes a job script named name with body and returns its path.
func (h *harness) script(name, body string) string {
	h.t.Helper()
	p := filepath.Join(h.dir, name)
	text := "#!/bin/bash\n" + body + "\n"
	if sc := h.b.Capabilities().Scripts; len(sc) > 0 {
		text = "#!/bin/bash\n" + sc[0].RunTimeLine(time.Minute) + "\n" + body + "\n"
	}
	if err := os.WriteFile(p, []byte(text), 0o755); err != nil {
		h.t.Fatal(err)
	}
	return p
}

// request is a request for count jobs of script.
func (h *harness) request(script string, count int) backend.SubmitRequest {
	return backend.SubmitRequest{
		Dir:       h.dir,
		Script:    script,
		Name:      "farm-backendtest-" + strings.TrimSuffix(filepath.Base(script), ".sh"),
		Count:     count,
		Environ:   append(os.Environ(), envSubmitter+"=from-the-submitter"),
		Env:       []string{envRequest + "=from-the-request"},
		TimeLimit: time.Minute,
		Output:    func(id string) string { return filepath.Join(h.dir, layout.OutputDir, backend.OutputName(h.b, id)) },
	}
}

// submit submits req and checks the answer: no error and, unless req.Array
// on an engine with arrays, req.Count distinct IDs.
func (h *harness) submit(req backend.SubmitRequest) []string {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ids, err := h.b.Submit(ctx, req)
	h.ids = append(h.ids, ids...)
	if err != nil {
		h.t.Fatalf("Submit(%d jobs of %s): %v (IDs %v)", req.Count, filepath.Base(req.Script), err, ids)
	}
	distinct := map[string]bool{}
	for _, id := range ids {
		if id == "" || distinct[id] {
			h.t.Fatalf("Submit returned IDs %q: want distinct, non-empty IDs", ids)
		}
		distinct[id] = true
	}
	if (!req.Array || !h.b.Capabilities().Arrays) && len(ids) != req.Count {
		h.t.Fatalf("Submit of %d jobs returned %d IDs: %q", req.Count, len(ids), ids)
	}
	if req.Array && (len(ids) < 1 || len(ids) > req.Count) {
		h.t.Fatalf("Submit of an array of %d returned %d IDs: %q", req.Count, len(ids), ids)
	}
	return ids
}

// jobs asks the backend for ids and checks that every ID has an entry.
func (h *harness) jobs(ids []string) map[string]backend.JobInfo {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	infos, err := h.b.Jobs(ctx, ids)
	if err != nil {
		h.t.Fatalf("Jobs(%v): %v", ids, err)
	}
	for _, id := range ids {
		in, ok := infos[id]
		if !ok {
			h.t.Fatalf("Jobs(%v) has no entry for %s: %s", ids, id, fmtInfos(infos))
		}
		if in.State == "" {
			h.t.Fatalf("Jobs(%v): %s has an empty state", ids, id)
		}
	}
	return infos
}

// waitJobs polls Jobs until cond holds for ids.
func (h *harness) waitJobs(ids []string, what string, cond func(map[string]backend.JobInfo) bool) map[string]backend.JobInfo {
	h.t.Helper()
	deadline := time.Now().Add(JobTimeout)
	for {
		infos := h.jobs(ids)
		if cond(infos) {
			return infos
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("after %s, still waiting for %s: %s", JobTimeout, what, fmtInfos(infos))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitEnded waits until no job in ids is active.
func (h *harness) waitEnded(ids []string) map[string]backend.JobInfo {
	h.t.Helper()
	return h.waitJobs(ids, "the jobs to end", func(m map[string]backend.JobInfo) bool {
		for _, id := range ids {
			if m[id].State.Active() {
				return false
			}
		}
		return true
	})
}

// waitFile waits until the job-made file exists.
func (h *harness) waitFile(name string) {
	h.t.Helper()
	deadline := time.Now().Add(JobTimeout)
	for {
		if _, err := os.Stat(filepath.Join(h.dir, name)); err == nil {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("after %s, %s was not made by the job", JobTimeout, name)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (h *harness) cancel(ids []string, scope backend.CancelScope) []string {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), CancelTimeout)
	defer cancel()
	start := time.Now()
	got, err := h.b.Cancel(ctx, ids, scope)
	if err != nil {
		h.t.Fatalf("Cancel(%v, pendingOnly=%t): %v", ids, scope == backend.PendingOnly, err)
	}
	h.t.Logf("Cancel(%v, pendingOnly=%t) = %v in %s", ids, scope == backend.PendingOnly, got, time.Since(start).Round(time.Millisecond))
	return got
}

// waitRelease is a job-script fragment: wait (at most two minutes) for the
// test to create the file release.
const waitRelease = `for i in $(seq 1200); do [ -e release ] && break; sleep 0.1; done`

// testSelf: inside a job, Backend.Self gives the ID that Submit returned,
// the job's end time (about the time limit after its start), and what the
// job was given: at least one CPU (the suite's jobs ask for no more), no
// GPU named "", no negative memory.
func testSelf(t *testing.T, h *harness) {
	script := h.script("self.sh", `env -0 > env.tmp && mv env.tmp env.dump
`+waitRelease)
	ids := h.submit(h.request(script, 1))
	h.waitFile("env.dump")
	defer os.WriteFile(filepath.Join(h.dir, "release"), nil, 0o644)
	b, err := os.ReadFile(filepath.Join(h.dir, "env.dump"))
	if err != nil {
		t.Fatal(err)
	}
	// The job's environment, as the job sees it.
	env := map[string]string{}
	for _, kv := range bytes.Split(b, []byte{0}) {
		if k, v, ok := strings.Cut(string(kv), "="); ok && k != "" {
			env[k] = v
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	self, err := h.b.Self(ctx, backend.SelfRequest{Env: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatalf("Self() inside job %s: %v", ids[0], err)
	}
	if self.ID != ids[0] {
		t.Errorf("Self().ID = %q inside job %q", self.ID, ids[0])
	}
	// The job started less than JobTimeout ago with a one-minute limit.
	now := time.Now()
	if self.End.IsZero() {
		t.Errorf("Self().End is zero; want the job's start plus its one-minute limit")
	} else if self.End.Before(now.Add(-5*time.Second)) || self.End.After(now.Add(time.Minute+5*time.Second)) {
		t.Errorf("Self().End = %s, now %s: want within the job's one-minute limit", self.End, now)
	}
	if a := self.Alloc; a.CPUs < 1 || a.MemMB < 0 || slices.Contains(a.GPUs, "") {
		t.Errorf("Self().Alloc = %+v inside job %s: want at least one CPU, no GPU named \"\", no negative memory", a, ids[0])
	}
}

// testSubmitCompleted: Submit N returns N distinct IDs; Jobs reports each
// one, and each moves to COMPLETED with its start and end times.
func testSubmitCompleted(t *testing.T, h *harness) {
	script := h.script("ok.sh", "exit 0")
	ids := h.submit(h.request(script, 3))
	infos := h.waitEnded(ids)
	for _, id := range ids {
		in := infos[id]
		if in.State != backend.Completed {
			t.Errorf("job %s (exit 0) ended %s, want %s", id, in.State, backend.Completed)
		}
		if in.ID != id {
			t.Errorf("Jobs()[%q].ID = %q", id, in.ID)
		}
		if in.Start.IsZero() || in.End.IsZero() || in.End.Before(in.Start) {
			t.Errorf("job %s: start %s, end %s; want both, start first", id, in.Start, in.End)
		}
	}
}

// testFailed: a job script that exits non-zero ends FAILED.
func testFailed(t *testing.T, h *harness) {
	script := h.script("fail.sh", "exit 3")
	ids := h.submit(h.request(script, 1))
	if in := h.waitEnded(ids)[ids[0]]; in.State != backend.Failed {
		t.Errorf("job %s (exit 3) ended %s, want %s", ids[0], in.State, backend.Failed)
	}
}

// testEnvironment: a job sees req.Env and the submitting environment, runs
// in req.Dir, and its stdout goes to req.Output(its ID).
func testEnvironment(t *testing.T, h *harness) {
	script := h.script("env.sh", `echo "request=$`+envRequest+` submitter=$`+envSubmitter+` dir=$(pwd -P)"`)
	ids := h.submit(h.request(script, 2))
	h.waitEnded(ids)
	want := fmt.Sprintf("request=from-the-request submitter=from-the-submitter dir=%s\n", h.dir)
	for _, id := range ids {
		p := filepath.Join(h.dir, layout.OutputDir, backend.OutputName(h.b, id))
		b, err := os.ReadFile(p)
		if err != nil {
			t.Errorf("job %s: no output file: %v", id, err)
			continue
		}
		if !strings.Contains(string(b), want) {
			t.Errorf("job %s printed %q, want a line %q", id, b, want)
		}
	}
}

// testAfter: a job submitted with After stays pending while the other job
// runs and starts only after it ended.
func testAfter(t *testing.T, h *harness) {
	first := h.script("first.sh", `touch first.started
`+waitRelease+`
date +%s.%N > first.end`)
	second := h.script("second.sh", `date +%s.%N > second.start`)
	a := h.submit(h.request(first, 1))
	h.waitFile("first.started")
	req := h.request(second, 1)
	req.After = a
	b := h.submit(req)
	// While the first runs, the second waits.
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		m := h.jobs([]string{a[0], b[0]})
		if m[a[0]].State != backend.Running || m[b[0]].State != backend.Pending {
			t.Fatalf("while the first job runs: %s, want %s RUNNING and %s PENDING", fmtInfos(m), a[0], b[0])
		}
	}
	os.WriteFile(filepath.Join(h.dir, "release"), nil, 0o644)
	m := h.waitEnded([]string{a[0], b[0]})
	if m[a[0]].State != backend.Completed || m[b[0]].State != backend.Completed {
		t.Fatalf("jobs ended %s, want both COMPLETED", fmtInfos(m))
	}
	firstEnd, secondStart := readFloat(t, h, "first.end"), readFloat(t, h, "second.start")
	if secondStart < firstEnd {
		t.Errorf("the dependent job started at %.3f, before the first ended at %.3f", secondStart, firstEnd)
	}
}

func readFloat(t *testing.T, h *harness, name string) float64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(h.dir, name))
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return v
}

// testCancelAll: Cancel stops a running job, returns its ID, and the job is
// no longer active once Cancel returns; a second Cancel cancels nothing.
func testCancelAll(t *testing.T, h *harness) {
	script := h.script("long.sh", "touch long.started\nsleep 300")
	ids := h.submit(h.request(script, 1))
	h.waitFile("long.started")
	h.waitJobs(ids, "the job to run", func(m map[string]backend.JobInfo) bool { return m[ids[0]].State == backend.Running })
	got := h.cancel(ids, backend.AllActive)
	if !slices.Equal(got, ids) {
		t.Errorf("Cancel(%v) = %v, want the running job", ids, got)
	}
	m := h.jobs(ids)
	if m[ids[0]].State.Active() {
		t.Errorf("right after Cancel, job %s is %s; want it ended", ids[0], m[ids[0]].State)
	}
	m = h.waitEnded(ids)
	if m[ids[0]].State != backend.Cancelled {
		t.Errorf("cancelled job %s ended %s, want %s", ids[0], m[ids[0]].State, backend.Cancelled)
	}
	if got := h.cancel(ids, backend.AllActive); len(got) != 0 {
		t.Errorf("Cancel of an ended job = %v, want none", got)
	}
}

// testCancelPending: Cancel(pendingOnly) cancels a pending job and leaves a
// running one running. The pending job is made pending for certain by a
// dependency on the running one.
func testCancelPending(t *testing.T, h *harness) {
	run := h.script("running.sh", "touch running.started\n"+waitRelease)
	pend := h.script("pending.sh", "touch pending.ran")
	a := h.submit(h.request(run, 1))
	h.waitFile("running.started")
	req := h.request(pend, 1)
	req.After = a
	p := h.submit(req)
	both := []string{a[0], p[0]}
	h.waitJobs(both, "one job running and one pending", func(m map[string]backend.JobInfo) bool {
		return m[a[0]].State == backend.Running && m[p[0]].State == backend.Pending
	})
	got := h.cancel(both, backend.PendingOnly)
	if !slices.Equal(got, p) {
		t.Errorf("Cancel(%v, pendingOnly) = %v, want only the pending job %s", both, got, p[0])
	}
	m := h.jobs(both)
	if m[p[0]].State.Active() {
		t.Errorf("right after Cancel(pendingOnly), the pending job is %s; want it ended", m[p[0]].State)
	}
	time.Sleep(time.Second)
	m = h.jobs(both)
	if m[a[0]].State != backend.Running {
		t.Errorf("after Cancel(pendingOnly), the running job is %s; want it still RUNNING", m[a[0]].State)
	}
	os.WriteFile(filepath.Join(h.dir, "release"), nil, 0o644)
	m = h.waitEnded(both)
	if m[a[0]].State != backend.Completed || m[p[0]].State != backend.Cancelled {
		t.Errorf("jobs ended %s; want %s COMPLETED and %s CANCELLED", fmtInfos(m), a[0], p[0])
	}
	if _, err := os.Stat(filepath.Join(h.dir, "pending.ran")); err == nil {
		t.Errorf("the cancelled pending job ran")
	}
}

// testArray: an Array request of N runs N jobs (one per task, each with its
// own output file) and returns at most N IDs; Jobs of the returned IDs has
// an entry for every task's own ID (the ID in its output file name, as Self
// gives it), all COMPLETED.
func testArray(t *testing.T, h *harness) {
	const n = 3
	script := h.script("task.sh", "echo task-ran >> tasks.txt")
	req := h.request(script, n)
	req.Array = true
	ids := h.submit(req)
	m := h.waitEnded(ids)
	for _, id := range ids {
		if m[id].State != backend.Completed {
			t.Errorf("array job %s ended %s, want COMPLETED", id, m[id].State)
		}
	}
	b, _ := os.ReadFile(filepath.Join(h.dir, "tasks.txt"))
	if got := strings.Count(string(b), "task-ran"); got != n {
		t.Errorf("%d tasks ran, want %d", got, n)
	}
	// The output files are named as the engine names them
	// (backend.OutputName): the task's ID between a prefix and a suffix.
	pre, suf, _ := strings.Cut(backend.OutputName(h.b, "\x00"), "\x00")
	files, _ := filepath.Glob(filepath.Join(h.dir, layout.OutputDir, pre+"*"+suf))
	if len(files) != n {
		t.Fatalf("%d output files %v, want one per task (%d)", len(files), files, n)
	}
	tasks, hasTasks := h.b.(backend.TaskIDs)
	if h.b.Capabilities().Arrays && !hasTasks {
		t.Errorf("the engine has arrays but does not read its task IDs (backend.TaskIDs)")
	}
	for _, f := range files {
		task := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), pre), suf)
		if hasTasks && !slices.Contains(ids, task) {
			if array, ok := tasks.ArrayOf(task); !ok || !slices.Contains(ids, array) {
				t.Errorf("ArrayOf(%q) = %q, %t; want one of the IDs Submit returned, %v", task, array, ok, ids)
			}
		}
		in, ok := m[task]
		if !ok {
			t.Errorf("Jobs(%v) has no entry for task %s (output %s): %s", ids, task, f, fmtInfos(m))
		} else if in.State != backend.Completed {
			t.Errorf("task %s is %s, want COMPLETED", task, in.State)
		}
	}
}

// testGone: IDs the backend does not know are reported Gone, alone or
// together; Jobs of no IDs is empty.
func testGone(t *testing.T, h *harness) {
	for _, ids := range [][]string{{"999999999"}, {"999999998", "999999999"}} {
		m := h.jobs(ids)
		for _, id := range ids {
			if m[id].State != backend.Gone {
				t.Errorf("Jobs(%v)[%s] = %s, want %s", ids, id, m[id].State, backend.Gone)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := h.b.Jobs(ctx, nil)
	if err != nil || len(m) != 0 {
		t.Errorf("Jobs(nil) = %v, %v; want an empty answer", m, err)
	}
	if got, err := h.b.Cancel(ctx, []string{"999999999"}, backend.AllActive); err != nil || len(got) != 0 {
		t.Errorf("Cancel of an unknown job = %v, %v; want nothing cancelled, no error", got, err)
	}
}

// testTimeLimit: a job that outlives req.TimeLimit is stopped and ends
// TIMEOUT, on engines that enforce TimeLimit themselves; on other
// backends the job script's own limit applies (checked by the integration
// tests).
func testTimeLimit(t *testing.T, h *harness) {
	if !h.b.Capabilities().EnforcesTimeLimit {
		t.Skipf("the %s backend takes the run-time from the job script (at least one minute): see the integration tests", h.b.Name())
	}
	script := h.script("timeout.sh", "touch timeout.started\nsleep 300")
	req := h.request(script, 1)
	req.TimeLimit = 2 * time.Second
	start := time.Now()
	ids := h.submit(req)
	m := h.waitEnded(ids)
	if m[ids[0]].State != backend.Timeout {
		t.Errorf("job over its time limit ended %s, want %s", m[ids[0]].State, backend.Timeout)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("a 2 s time limit took %s to stop the job", d)
	}
}
