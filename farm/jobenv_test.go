package farm

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/farm-hpc/farm/backend"
)

func TestParseJobEnvLookEvery(t *testing.T) {
	e, err := ParseJobEnv([]string{"FARM_RUN=2", "FARM_LOOK_EVERY=1500ms"})
	if err != nil || e.LookEvery != 1500*time.Millisecond {
		t.Errorf("FARM_LOOK_EVERY=1500ms: %s, %v", e.LookEvery, err)
	}
	if e, err := ParseJobEnv([]string{"FARM_RUN=2"}); err != nil || e.LookEvery != 0 {
		t.Errorf("unset: %s, %v; want 0 (the meta-job's default)", e.LookEvery, err)
	}
	for _, v := range []string{"60", "-1s", "0s", "soon"} {
		if _, err := ParseJobEnv([]string{"FARM_LOOK_EVERY=" + v}); err == nil || !strings.Contains(err.Error(), "FARM_LOOK_EVERY") {
			t.Errorf("FARM_LOOK_EVERY=%s: %v, want an error naming it", v, err)
		}
	}
}

// runningBackend is a fakeBackend whose jobs run, and that keeps the FARM_*
// environment of each submission.
type runningBackend struct {
	fakeBackend
	envs [][]string
}

func (b *runningBackend) Submit(ctx context.Context, req backend.SubmitRequest) ([]string, error) {
	b.envs = append(b.envs, req.Env)
	return b.fakeBackend.Submit(ctx, req)
}

func (b *runningBackend) Jobs(_ context.Context, ids []string) (map[string]backend.JobInfo, error) {
	out := map[string]backend.JobInfo{}
	for _, id := range ids {
		out[id] = backend.JobInfo{ID: id, State: backend.Running}
	}
	return out, nil
}

// TestSubmitSaysTheRunsJobs: each meta-job is told the run's meta-jobs
// (FARM_RUN_JOBS), those submitted before it to the run with its own: 3,
// then 5 once 2 more are added to the active run; a job reads it back.
func TestSubmitSaysTheRunsJobs(t *testing.T) {
	b := &runningBackend{}
	f, _ := newTestFarm(t, "true\ntrue\n", b)
	f.Config.WaitForCases = time.Minute // N kept above the cases
	for _, n := range []int{3, 2} {
		if err := f.Submit(context.Background(), SubmitOptions{N: n, Yes: true}); err != nil {
			t.Fatalf("submit %d: %v", n, err)
		}
	}
	if len(b.envs) != 2 {
		t.Fatalf("%d submissions, want 2", len(b.envs))
	}
	for i, want := range []int{3, 5} {
		e, err := ParseJobEnv(b.envs[i])
		if err != nil || e.RunJobs != want || e.Run != 1 {
			t.Errorf("submission %d: run %d, FARM_RUN_JOBS %d (%v); want run 1, %d", i+1, e.Run, e.RunJobs, err, want)
		}
	}
	if _, err := ParseJobEnv([]string{"FARM_RUN_JOBS=many"}); err == nil || !strings.Contains(err.Error(), "FARM_RUN_JOBS") {
		t.Errorf("FARM_RUN_JOBS=many: %v, want an error naming it", err)
	}
}

// TestSubmitGivesItsJobsTheStartHint: the jobs farm submit starts get the
// run's start hint (FARM_CLAIM_HINT), which ParseJobEnv reads back and
// with which a meta-job's store claims its first case.
func TestSubmitGivesItsJobsTheStartHint(t *testing.T) {
	ctx := context.Background()
	b := &directiveBackend{}
	f, _ := newTestFarm(t, "true\ntrue\ntrue\n", b)
	if err := f.Submit(ctx, SubmitOptions{N: 2}); err != nil {
		t.Fatal(err)
	}
	e, err := ParseJobEnv(b.reqs[0].Env)
	if err != nil || e.ClaimHint == "" || e.Run != 1 {
		t.Fatalf("the job's environment %q: %+v, %v", b.reqs[0].Env, e, err)
	}
	s := f.Store()
	defer s.Close()
	s.UseHint(e.ClaimHint)
	cases, err := s.Claim(ctx, 1, 1)
	if err != nil || len(cases) != 1 || s.Last().Run != 1 || s.Last().Gen < 0 {
		t.Fatalf("a claim with the hint: %v, %v; Last %+v", cases, err, s.Last())
	}
}
