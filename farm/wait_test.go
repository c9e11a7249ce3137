package farm

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/layout"
)

// autoBackend plays a farm whose -auto job (job 1) resubmits and ends
// between Wait's reading of the job records and its asking for their
// states: asked for job 1 the first time, it records job 2 (the new run's
// meta-job) and says job 1 has ended. Job 2 runs for its first two
// queries, then completes.
type autoBackend struct {
	f           *Farm
	t           *testing.T
	asked2      int
	resubmitted bool
}

func (b *autoBackend) Name() string { return "fake" }
func (b *autoBackend) Submit(context.Context, backend.SubmitRequest) ([]string, error) {
	return nil, nil
}
func (b *autoBackend) Capabilities() backend.Capabilities {
	return backend.Capabilities{Scripts: anyScripts}
}
func (b *autoBackend) Cancel(context.Context, []string, backend.CancelScope) ([]string, error) {
	return nil, nil
}
func (b *autoBackend) Self(context.Context, backend.SelfRequest) (backend.Self, error) {
	return backend.Self{}, nil
}
func (b *autoBackend) Jobs(ctx context.Context, ids []string) (map[string]backend.JobInfo, error) {
	out := map[string]backend.JobInfo{}
	for _, id := range ids {
		switch id {
		case "1":
			if !b.resubmitted {
				b.resubmitted = true
				if err := b.f.recordJobs(ctx, []JobRecord{{Run: 2, Backend: "fake", Kind: kindMeta, ID: "2"}}); err != nil {
					b.t.Fatal(err)
				}
			}
			out[id] = backend.JobInfo{ID: id, State: backend.Completed}
		case "2":
			b.asked2++
			st := backend.Running
			if b.asked2 > 2 {
				st = backend.Completed
			}
			out[id] = backend.JobInfo{ID: id, State: st}
		}
	}
	return out, nil
}

func TestWaitSeesJobsSubmittedByAJobThatJustEnded(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{layout.MiscDir, layout.StatusDir} {
		os.MkdirAll(filepath.Join(dir, d), 0o755)
	}
	os.WriteFile(filepath.Join(dir, layout.Table), []byte("1 true\n"), 0o644)
	f := &Farm{Dir: dir}
	b := &autoBackend{f: f, t: t}
	f.backends = fixed{b}
	if err := f.recordJobs(context.Background(), []JobRecord{{Run: 1, Backend: "fake", Kind: kindAuto, ID: "1"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Wait(context.Background(), time.Minute); err != nil {
		t.Fatal(err)
	}
	if b.asked2 < 3 {
		t.Errorf("Wait returned after asking %d times for job 2, which the -auto job submitted as it ended; want it to wait for job 2 to complete (the third answer)", b.asked2)
	}
}
