package slurm

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/backend/backendtest"
	"github.com/farm-hpc/farm/internal/testslurm"
)

// Tests against the real Slurm of this machine (integration/slurm-up). They
// skip, with one loud line, when no Slurm answers — unless
// FARM_REQUIRE_SLURM=1, where they fail.

// slurmGate asks once per test binary whether Slurm is available.
var slurmGate = testslurm.Gate{Available: Available}

func needSlurm(t *testing.T) {
	t.Helper()
	slurmGate.Need(t)
}

func TestConformanceSlurm(t *testing.T) {
	needSlurm(t)
	backendtest.Run(t, func(t *testing.T, dir string) backend.Backend { return New(dir) })
}

// TestSlurmArrays checks, on the real Slurm, what the conformance suite
// cannot see: the cluster's MaxArraySize is read, a SIMPLE request larger
// than the array size is split into several arrays, pending tasks (listed
// by squeue as one "ID_[2-5]" line) are found by task ID, and a pending-only
// cancel of an array returns its ID.
func TestSlurmArrays(t *testing.T) {
	needSlurm(t)
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "OUTPUT"), 0o755)
	script := filepath.Join(dir, "task.sh")
	os.WriteFile(script, []byte("#!/bin/bash\n#SBATCH -t 1\necho \"$SLURM_ARRAY_JOB_ID $SLURM_ARRAY_TASK_ID\" >> tasks.txt\n"), 0o755)
	out := func(id string) string { return filepath.Join(dir, "OUTPUT", "slurm-"+id+".out") }

	if n := New(dir).maxArraySize(ctx); n != 1001 {
		t.Errorf("MaxArraySize read as %d, want 1001 (integration/SLURM.md)", n)
	}

	b := &Backend{Dir: dir, MaxArraySize: 3} // arrays of at most 2 tasks
	var all []string
	defer func() { b.Cancel(context.Background(), all, backend.AllActive) }()
	ids, err := b.Submit(ctx, backend.SubmitRequest{Dir: dir, Script: script, Name: "farm-slurmtest-array", Count: 5, Array: true, Output: out})
	all = append(all, ids...)
	if err != nil || len(ids) != 3 {
		t.Fatalf("Submit of 5 tasks in arrays of 2 = %v, %v; want 3 arrays", ids, err)
	}
	m := waitInactive(t, b, ids)
	for _, want := range []string{ids[0], ids[0] + "_1", ids[0] + "_2", ids[1] + "_1", ids[1] + "_2", ids[2], ids[2] + "_1"} {
		if m[want].State != backend.Completed {
			t.Errorf("%s = %s, want COMPLETED (all: %v)", want, m[want].State, m)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "tasks.txt")); strings.Count(string(got), "\n") != 5 {
		t.Errorf("tasks ran:\n%s", got)
	}

	// Pending tasks: held back by --begin.
	ids, err = New(dir).Submit(ctx, backend.SubmitRequest{Dir: dir, Script: script, Name: "farm-slurmtest-array", Count: 4, Array: true, Output: out, Args: []string{"--begin=now+1hour"}})
	all = append(all, ids...)
	if err != nil || len(ids) != 1 {
		t.Fatalf("Submit = %v, %v", ids, err)
	}
	a := ids[0]
	m, err = b.Jobs(ctx, []string{a, a + "_3", a + "_9"})
	if err != nil {
		t.Fatal(err)
	}
	if m[a].State != backend.Pending || m[a+"_3"].State != backend.Pending || m[a+"_9"].State != backend.Gone {
		t.Errorf("pending array: %v; want %s and %s_3 PENDING, %s_9 GONE", m, a, a, a)
	}
	got, err := b.Cancel(ctx, []string{a}, backend.PendingOnly)
	if err != nil || len(got) != 1 || got[0] != a {
		t.Errorf("Cancel(pendingOnly) of a pending array = %v, %v", got, err)
	}
	if m, _ := b.Jobs(ctx, []string{a}); m[a].State != backend.Cancelled {
		t.Errorf("after the cancel, array %s is %s", a, m[a].State)
	}
}

// TestSlurmSubmitFailure: sbatch's own message reaches the user.
func TestSlurmSubmitFailure(t *testing.T) {
	needSlurm(t)
	t.Parallel()
	dir := t.TempDir()
	script := filepath.Join(dir, "job.sh")
	os.WriteFile(script, []byte("#!/bin/bash\n#SBATCH -t 1\ntrue\n"), 0o755)
	ids, err := New(dir).Submit(context.Background(), backend.SubmitRequest{Dir: dir, Script: script, Name: "farm-slurmtest-fail", Count: 2, Args: []string{"--mem=100000G"}})
	if len(ids) != 0 {
		New(dir).Cancel(context.Background(), ids, backend.AllActive)
		t.Errorf("IDs %v from a failed submission", ids)
	}
	if err == nil || !strings.HasPrefix(err.Error(), "Something wrong with sbatch farm submission") || !strings.Contains(err.Error(), "Memory specification can not be satisfied") {
		t.Errorf("error %v: want the META message with sbatch's own", err)
	}
}

func waitInactive(t *testing.T, b *Backend, ids []string) map[string]backend.JobInfo {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		m, err := b.Jobs(context.Background(), ids)
		if err != nil {
			t.Fatal(err)
		}
		active := false
		for _, id := range ids {
			active = active || m[id].State.Active()
		}
		if !active {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("jobs still active after 90 s: %v", m)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
