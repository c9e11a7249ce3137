package farm

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/casetable"
	"github.com/farm-hpc/farm/layout"
	"github.com/farm-hpc/farm/slurm"
)

// fakeBackend submits nothing real: its jobs have ended as soon as they
// are submitted, or its Submit fails.
type fakeBackend struct {
	next int
	fail bool
}

func (b *fakeBackend) Name() string { return "fake" }
func (b *fakeBackend) Submit(_ context.Context, req backend.SubmitRequest) ([]string, error) {
	if b.fail {
		return nil, errors.New("sbatch: error: Batch job submission failed")
	}
	var ids []string
	for i := 0; i < req.Count; i++ {
		b.next++
		ids = append(ids, strconv.Itoa(100+b.next))
	}
	return ids, nil
}
func (b *fakeBackend) Jobs(_ context.Context, ids []string) (map[string]backend.JobInfo, error) {
	out := map[string]backend.JobInfo{}
	for _, id := range ids {
		out[id] = backend.JobInfo{ID: id, State: backend.Completed}
	}
	return out, nil
}
func (b *fakeBackend) Capabilities() backend.Capabilities {
	return backend.Capabilities{Scripts: anyScripts}
}
func (b *fakeBackend) Cancel(context.Context, []string, backend.CancelScope) ([]string, error) {
	return nil, nil
}
func (b *fakeBackend) Self(context.Context, backend.SelfRequest) (backend.Self, error) {
	return backend.Self{}, nil
}

// fixed is an Opener that opens b, whatever the name asked for.
type fixed struct{ b backend.Backend }

func (o fixed) Open(context.Context, string, string) (backend.Backend, error) { return o.b, nil }

// A run is started by a commit before its jobs are submitted and recorded.
// A resubmit that finds a run with cases left and no job recorded refuses:
// another command is submitting that run's jobs. A submission that failed
// altogether closes its run, so the next resubmit is not refused; one whose
// command was killed first is closed by 'farm repair --abandoned'.
func TestResubmitRefusesARunWhoseJobsAreNotRecordedYet(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "farm")
	if err := Init(dir, slurm.Templates()); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, layout.Table), []byte("true\ntrue\nfalse\n"), 0o644)
	f, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	state := func() casetable.State {
		t.Helper()
		st, err := f.readState(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}

	// sbatch fails: run 1 started, none of its jobs; it is closed.
	failing := &fakeBackend{fail: true}
	f.backends = fixed{failing}
	if err := f.Submit(ctx, SubmitOptions{N: 2}); err == nil || !strings.Contains(err.Error(), "submission failed") {
		t.Fatalf("submit with a failing sbatch: %v", err)
	}
	if st := state(); st.Run != 1 || st.Claimed != st.Cases || st.Cases != 3 {
		t.Fatalf("after a failed submission, state %+v; want run 1 closed", st)
	}
	f.backends = fixed{&fakeBackend{}}
	if err := f.Resubmit(ctx, SubmitOptions{N: 2}); err != nil {
		t.Fatalf("resubmit after a failed submission: %v", err)
	}
	if st := state(); st.Run != 2 || st.Claimed != 0 {
		t.Fatalf("after the resubmit, state %+v; want run 2", st)
	}

	// A command started run 3 and was killed before it recorded its jobs
	// (or is still submitting them).
	store := f.Store()
	if err := store.Update(ctx, func(st *casetable.State) error {
		st.Run, st.Claimed = 3, 0
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	store.Close()
	err = f.Resubmit(ctx, SubmitOptions{N: 2})
	if err == nil || !IsUserError(err) || !strings.Contains(err.Error(), "run 3 was started moments ago") || !strings.Contains(err.Error(), "nothing was submitted") {
		t.Fatalf("resubmit while run 3 has no job recorded: %v", err)
	}
	if st := state(); st.Run != 3 {
		t.Fatalf("the refused resubmit changed the state: %+v", st)
	}
	// --force cannot tell a killed command from one still submitting:
	// it refuses; --abandoned, the user's word that it was killed, closes
	// the run.
	err = f.Repair(ctx, RepairForce)
	if err == nil || !IsUserError(err) || !strings.Contains(err.Error(), "run 3 was started moments ago") || !strings.Contains(err.Error(), "nothing was repaired") {
		t.Fatalf("repair --force while run 3 has no job recorded: %v", err)
	}
	if err := f.Repair(ctx, RepairAbandoned); err != nil {
		t.Fatal(err)
	}
	if err := f.Resubmit(ctx, SubmitOptions{N: 2}); err != nil {
		t.Fatalf("resubmit after 'farm repair --force': %v", err)
	}
	// The closed run 3 is not started again: a run is never moved back.
	if st := state(); st.Run != 4 || st.Claimed != 0 {
		t.Fatalf("after repair and resubmit, state %+v; want run 4", st)
	}
}

// TestResubmitTableKeepsNeeds: table.dat_ carries each case's #FARM part
// as table.dat has it, so that resubmitted cases declare what they need;
// a bad #FARM part is refused by submit, naming the line, before anything
// is written.
func TestResubmitTableKeepsNeeds(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "farm")
	if err := Init(dir, slurm.Templates()); err != nil {
		t.Fatal(err)
	}
	bad := "./run a #FARM cpus=4\n./run b #FARM cpu=2\n"
	os.WriteFile(filepath.Join(dir, layout.Table), []byte(bad), 0o644)
	f, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	f.backends = fixed{&fakeBackend{}}
	err = f.Submit(ctx, SubmitOptions{N: 1})
	if want := `table.dat:2: #FARM: unknown key "cpu" (known: cpus, gpus, mem, min_time, nodes, time); fix the line`; err == nil || err.Error() != want {
		t.Fatalf("submit of a bad #FARM part: %v; want %s", err, want)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, layout.Table)); string(b) != bad {
		t.Errorf("the refused submit changed table.dat: %q", b)
	}
	if _, err := os.Stat(filepath.Join(dir, layout.Table+".orig")); !os.IsNotExist(err) {
		t.Errorf("the refused submit numbered table.dat: %v", err)
	}

	os.WriteFile(filepath.Join(dir, layout.Table), []byte("./run a #FARM cpus=4 gpus=1 mem=8G min_time=30m\n# c\n./run b\n./run c  #FARM\tmem=512\n"), 0o644)
	// The jobs are submitted, and end without running a case: every case
	// goes to table.dat_.
	if err := f.Submit(ctx, SubmitOptions{N: 1}); err != nil {
		t.Fatal(err)
	}
	if err := f.Resubmit(ctx, SubmitOptions{N: 1}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(f.Path(layout.RetryTable))
	if want := "1 ./run a #FARM cpus=4 gpus=1 mem=8G min_time=30m\n2 ./run b\n3 ./run c  #FARM\tmem=512\n"; err != nil || string(b) != want {
		t.Errorf("%s reads %q, %v; want %q", layout.RetryTable, b, err, want)
	}
}

// A repair of a damaged MISC/chain while a resubmit that held the chain
// since before the damage starts run 2 on it: the repair closes run 2
// too, says so, and names run 2 (never run 1 again) in its new chain.
func TestRepairSaysARunStartedOnTheDamagedChainIsClosed(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "farm")
	if err := Init(dir, slurm.Templates()); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, layout.Table), []byte("true\ntrue\nfalse\n"), 0o644)
	var out strings.Builder
	f, err := Open(dir, Options{Out: &out})
	if err != nil {
		t.Fatal(err)
	}
	f.backends = fixed{&fakeBackend{}}
	if err := f.Submit(ctx, SubmitOptions{N: 2}); err != nil {
		t.Fatal(err)
	}
	held := f.Store()
	defer held.Close()
	if _, err := held.Read(ctx); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "MISC", "chain"), []byte("overwritten by a stray script\n"), 0o644)
	if err := held.Update(ctx, func(st *casetable.State) error {
		st.Run, st.Claimed = 2, 0
		return nil
	}); err != nil {
		t.Fatalf("run 2 on the held chain: %v", err)
	}
	out.Reset()
	if err := f.Repair(ctx, RepairIfDamaged); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "Run 2 was started while this repair ran") {
		t.Errorf("farm repair said %q; want it to name run 2, closed", out.String())
	}
	st, err := f.readState(ctx)
	if err != nil || st.Run != 2 || st.Claimed != st.Cases {
		t.Fatalf("after the repair: %+v %v; want run 2, closed", st, err)
	}
}
