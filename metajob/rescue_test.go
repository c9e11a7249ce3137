package metajob

import (
	"bytes"
	"context"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/farm"
	"github.com/farm-hpc/farm/layout"
	"github.com/farm-hpc/farm/status"
	"github.com/farm-hpc/farm/tablefmt"
)

// stateBackend is a batch system whose jobs are in the states a test sets,
// and that counts the queries it is asked.
type stateBackend struct {
	states  map[string]backend.JobState
	queries atomic.Int64
}

func (b *stateBackend) Name() string                       { return "test" }
func (b *stateBackend) Capabilities() backend.Capabilities { return backend.Capabilities{} }
func (b *stateBackend) Submit(context.Context, backend.SubmitRequest) ([]string, error) {
	return nil, nil
}
func (b *stateBackend) Cancel(context.Context, []string, backend.CancelScope) ([]string, error) {
	return nil, nil
}
func (b *stateBackend) Self(context.Context, backend.SelfRequest) (backend.Self, error) {
	return backend.Self{}, nil
}
func (b *stateBackend) Jobs(_ context.Context, ids []string) (map[string]backend.JobInfo, error) {
	b.queries.Add(1)
	out := map[string]backend.JobInfo{}
	for _, id := range ids {
		st := b.states[id]
		if st == "" {
			st = backend.Running
		}
		out[id] = backend.JobInfo{ID: id, State: st}
	}
	return out, nil
}

// rescueFarm is a farm directory of a run 1 over a table of 20 cases,
// with meta-jobs 1..n of it, all on engine b, each with its rescuer
// (RESCUE_CHECK period, the fence 2 s) and its status file.
func rescueFarm(t *testing.T, n int, period time.Duration, b backend.Backend) (string, []*Metajob) {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{layout.MiscDir, layout.StatusDir} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var table strings.Builder
	for i := 1; i <= 20; i++ {
		fmt.Fprintf(&table, "%d echo %d\n", i, i)
	}
	os.WriteFile(filepath.Join(dir, "table.dat"), []byte(table.String()), 0o644)
	f := &farm.Farm{Dir: dir}
	f.Config.RescueCheck, f.Config.MaxCrashes = period, 5
	var ids []string
	for k := 1; k <= n; k++ {
		ids = append(ids, fmt.Sprint(k))
	}
	var jobs []*Metajob
	for _, id := range ids {
		m := &Metajob{Farm: f, Backend: b, log: &bytes.Buffer{}, rt: &runtimeGuard{}, pool: newPool(1, nil, backend.Alloc{})}
		table := "table.dat"
		m.table.Store(&table)
		m.Env.Run, m.Env.LookEvery = 1, 2*time.Second
		t.Cleanup(m.startOwner().end)
		m.self.ID = id
		sw, err := status.CreateCap(filepath.Join(dir, layout.StatusDir, layout.StatusFile(id, 0)), id, 0, 1, "node"+id, status.Capacity{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sw.Close() })
		m.sw = sw
		m.rescue = newRescuer(m)
		self := id
		m.rescue.runJobs = func() ([]string, error) {
			var others []string
			for _, o := range ids {
				if o != self {
					others = append(others, o)
				}
			}
			return others, nil
		}
		os.Mkdir(m.rescue.dir, 0o755)
		jobs = append(jobs, m)
	}
	return dir, jobs
}

// rescued are the cases m's rescues handed it.
func rescued(m *Metajob) []rescuedCase {
	return owned(m, func(o *owner) []rescuedCase { return o.rescued })
}

// rescuedNow is m's lease's look for its own rescue mark.
func rescuedNow(m *Metajob, held int, silent time.Duration) (bool, error) {
	var ok bool
	var err error
	m.do(func(o *owner) { ok, err = o.rescuedNow(held, silent) })
	return ok, err
}

// TestRescueChecksAreOnePerPeriod counts the scheduler queries made for
// rescue by 64 meta-jobs in an hour (simulated: each meta-job looks at its
// own times, every quarter period or so, as start does): one query a
// period for the whole farm, whoever makes it, 60 in the hour at
// RESCUE_CHECK=60 s — O(1) per period, not O(meta-jobs).
func TestRescueChecksAreOnePerPeriod(t *testing.T) {
	b := &stateBackend{}
	period := time.Minute
	_, jobs := rescueFarm(t, 64, period, b)
	for _, m := range jobs {
		m.jobsInRun.Store(64) // as the job records say: each tries a check with the chance 8/64
	}
	t0 := time.Unix(1_800_000_000, 0) // a period boundary
	next := make([]time.Time, len(jobs))
	for i := range next {
		next[i] = t0.Add(time.Duration(mrand.Int64N(int64(period / 4))))
	}
	ctx := context.Background()
	for now := t0; now.Before(t0.Add(time.Hour)); now = now.Add(100 * time.Millisecond) {
		for i, m := range jobs {
			if now.Before(next[i]) {
				continue
			}
			m.rescue.tick(ctx, now)
			step := period / 4
			next[i] = now.Add(step + time.Duration(mrand.Int64N(int64(step)/2+1)))
		}
	}
	// A period in which none of them tried (a chance of 2e-4 a period)
	// has no check: one or two such in the hour are allowed.
	if got := b.queries.Load(); got > 60 || got < 58 {
		t.Errorf("64 meta-jobs made %d scheduler queries for rescue in an hour, want 60 (one a period)", got)
	}
	t.Logf("64 meta-jobs, 1 hour, RESCUE_CHECK=%s: %d scheduler queries for rescue", period, b.queries.Load())
}

// TestRescueTakesTheDeadJobsCases: job 2 died (its engine says FAILED)
// running case 2 with cases 3 and 4 claimed and not started; job 1's check
// marks it, and once the fence has passed hands job 1 case 2 as its second
// attempt (why=rescue) and cases 3 and 4 as their first, recorded in job
// 1's status file. Job 3's check, later, marks nothing more: the rescue is
// one job's. Job 2, had it only been frozen, finds its mark at its next
// start and runs nothing more.
func TestRescueTakesTheDeadJobsCases(t *testing.T) {
	b := &stateBackend{states: map[string]backend.JobState{"2": backend.Failed}}
	dir, jobs := rescueFarm(t, 3, time.Minute, b)
	t0 := time.Now()
	dead := jobs[1]
	dead.sw.Claimed([]int64{1, 2, 3, 4}, t0, "", nil)
	dead.sw.Start(1, t0)
	dead.sw.End(1, 0, t0, time.Second)
	dead.sw.Start(2, t0)
	ctx := context.Background()
	// Job 2's lease looks for its mark: not rescued yet.
	if rescued, err := rescuedNow(dead, 1, 0); rescued || err != nil {
		t.Fatalf("job 2 rescued before any rescue (%v)", err)
	}
	jobs[0].rescue.tick(ctx, t0)
	if len(jobs[0].rescue.pending) != 1 {
		t.Fatalf("job 1 did not take the rescue: %s", jobs[0].log)
	}
	jobs[2].rescue.tick(ctx, t0.Add(time.Second)) // the same period: no check
	jobs[2].rescue.tick(ctx, t0.Add(time.Minute))
	if len(jobs[2].rescue.pending) != 0 {
		t.Fatal("job 3 took a rescue job 1 had taken")
	}
	jobs[0].rescue.collectDue(ctx, time.Now()) // before the fence: nothing yet
	if len(rescued(jobs[0])) != 0 {
		t.Fatal("cases handed over before the fence passed")
	}
	jobs[0].rescue.collectDue(ctx, time.Now().Add(jobs[0].rescue.wait()+time.Second))
	var got []string
	for _, rc := range rescued(jobs[0]) {
		got = append(got, fmt.Sprintf("%d/%d/%s/%s", rc.c.ID, rc.retry+1, rc.why, rc.from))
	}
	if want := "2/2/rescue/status.2 3/1/rescue/status.2 4/1/rescue/status.2"; strings.Join(got, " ") != want {
		t.Errorf("rescued %q, want %q\n%s", got, want, jobs[0].log)
	}
	jobs[0].sw.Flush()
	lo, err := status.ReadLeftovers(filepath.Join(dir, layout.StatusDir, "status.1"))
	if err != nil || fmt.Sprint(lo.Unstarted) != "[2 3 4]" {
		t.Errorf("job 1's status file holds %v (%v), want its C record of cases 2 3 4", lo.Unstarted, err)
	}
	// Job 2 resumes and renews its lease: it finds the mark, stops.
	if rescued, err := rescuedNow(dead, 1, 3*time.Second); !rescued || err != nil {
		t.Fatalf("job 2 not stopped after its cases were rescued (%v)", err)
	}
	if line := owned(dead, (*owner).supersededLine); !strings.Contains(line, "rescued by meta-job 1") {
		t.Errorf("job 2's last line: %q", line)
	}
}

// TestRescueLeavesACrashedCase: a case whose meta-jobs died under it
// MAX_CRASHES times is not rescued; the cases the job had not started are.
func TestRescueLeavesACrashedCase(t *testing.T) {
	b := &stateBackend{states: map[string]backend.JobState{"2": backend.Failed}}
	dir, jobs := rescueFarm(t, 2, time.Minute, b)
	jobs[0].Farm.Config.MaxCrashes = 2
	t0 := time.Now()
	// An earlier run's job died under case 2 once.
	w, _ := status.CreateCap(filepath.Join(dir, layout.StatusDir, "status.old"), "old", 0, 0, "n", status.Capacity{}, nil)
	w.Start(2, t0.Add(-time.Hour))
	w.Close()
	jobs[1].sw.Claimed([]int64{2, 3}, t0, "", nil)
	jobs[1].sw.Start(2, t0)
	ctx := context.Background()
	jobs[0].rescue.tick(ctx, t0)
	jobs[0].rescue.collectDue(ctx, time.Now().Add(jobs[0].rescue.wait()+time.Second))
	if got := rescued(jobs[0]); len(got) != 1 || got[0].c.ID != 3 {
		t.Errorf("rescued %+v, want case 3 only", got)
	}
	if !strings.Contains(fmt.Sprint(jobs[0].log), "not run again: case 2 (its meta-job died under it 2 times, MAX_CRASHES=2)") {
		t.Errorf("log: %s", jobs[0].log)
	}
}

// TestRescueMarkIsTakenOnce: the same job's two checks racing for one dead
// job's mark (the warden's first look and its tick) take it once; a job
// that ends before carrying out a rescue gives its mark back, and another
// job's check then takes it.
func TestRescueMarkIsTakenOnce(t *testing.T) {
	b := &stateBackend{states: map[string]backend.JobState{"2": backend.Failed}}
	_, jobs := rescueFarm(t, 3, time.Minute, b)
	jobs[1].sw.Claimed([]int64{5, 6}, time.Now(), "", nil)
	if !jobs[0].rescue.mark("status.2", "FAILED") {
		t.Fatal("the first mark failed")
	}
	if jobs[0].rescue.mark("status.2", "FAILED") {
		t.Fatal("the same job took the same mark twice")
	}
	if len(jobs[0].rescue.pending) != 1 {
		t.Fatalf("pending rescues %v, want one", jobs[0].rescue.pending)
	}
	jobs[0].rescue.halt()
	jobs[2].rescue.check(context.Background(), time.Now())
	if len(jobs[2].rescue.pending) != 1 {
		t.Fatalf("job 3 did not take the rescue job 1 gave back: %s", jobs[2].log)
	}
}

// TestRescueDecidesClaimsWithNoOutcome: job 2 recorded a claim before its
// commit and died before starting any of its cases (a kill just after the
// commit): job 1's rescue decides it from the claim state, committed, and
// runs its cases; a claim recorded with no outcome that did not commit (a
// token of another's commit) is not rescued.
func TestRescueDecidesClaimsWithNoOutcome(t *testing.T) {
	b := &stateBackend{states: map[string]backend.JobState{"2": backend.Failed}}
	dir, jobs := rescueFarm(t, 2, time.Minute, b)
	startRun(t, dir, 1)
	dead := jobs[1]
	st := dead.Farm.Store()
	defer st.Close()
	st.Job = "2"
	var token string
	st.Note = func(tok string, ids []int64, lost bool) error {
		token = tok
		return dead.noteClaim(tok, ids, lost)
	}
	ctx := context.Background()
	cases, err := st.Claim(ctx, 1, 3)
	if err != nil || len(cases) == 0 {
		t.Fatalf("claim: %v, %v", cases, err)
	}
	claimed := fmt.Sprint(caseIDsOf(cases))
	forged := token[:strings.Index(token, "#")+1] + "0123456789abcdef"
	dead.noteClaim(forged, []int64{19, 20}, false)
	dead.sw.Flush()
	lo, err := status.ReadLeftovers(filepath.Join(dir, layout.StatusDir, "status.2"))
	if err != nil || len(lo.Unstarted) != 0 || len(lo.Undecided) != 2 {
		t.Fatalf("job 2's leftovers %+v (%v): want two claims undecided, nothing else", lo, err)
	}
	jobs[0].rescue.tick(ctx, time.Now())
	jobs[0].rescue.collectDue(ctx, time.Now().Add(jobs[0].rescue.wait()+time.Second))
	var got []int64
	for _, rc := range rescued(jobs[0]) {
		got = append(got, rc.c.ID)
	}
	if fmt.Sprint(got) != claimed {
		t.Errorf("rescued %v, want the committed claim's cases %s only\n%s", got, claimed, jobs[0].log)
	}
}

// caseIDsOf are the IDs of cases.
func caseIDsOf(cases []tablefmt.Case) []int64 {
	ids := make([]int64, len(cases))
	for i, c := range cases {
		ids[i] = c.ID
	}
	return ids
}

// TestRescueTakenOverFromADeadRescuer: job 2 died holding cases 3 and 4;
// job 3 took their rescue (its mark) and died before carrying it out. Job
// 1's next check takes it over: it marks job 3's own file (were job 3 only
// frozen, it would start nothing) and status.2 again, as status.2~2, and
// runs cases 3 and 4 once the fence has passed. A later check takes
// nothing more.
func TestRescueTakenOverFromADeadRescuer(t *testing.T) {
	b := &stateBackend{states: map[string]backend.JobState{"2": backend.Failed}}
	dir, jobs := rescueFarm(t, 3, time.Minute, b)
	t0 := time.Now()
	jobs[1].sw.Claimed([]int64{3, 4}, t0, "", nil)
	jobs[1].sw.Flush()
	ctx := context.Background()
	jobs[2].rescue.tick(ctx, t0)
	if len(jobs[2].rescue.pending) != 1 {
		t.Fatalf("job 3 did not take the rescue: %s", jobs[2].log)
	}
	b.states["3"] = backend.Failed // dies before its fence passed
	jobs[0].rescue.tick(ctx, t0.Add(time.Minute))
	rdir := filepath.Join(dir, layout.MiscDir, rescueDir(1))
	for _, name := range []string{"status.2~2", "status.3"} {
		if _, err := os.Stat(filepath.Join(rdir, name)); err != nil {
			t.Errorf("no mark %s after the take-over: %v\n%s", name, err, jobs[0].log)
		}
	}
	if by, marked, err := jobs[2].rescue.markedBy("status.3"); !marked || by != "1" || err != nil {
		t.Errorf("job 3's own mark: by %q %v %v; want job 1's (its lease stops it)", by, marked, err)
	}
	jobs[0].rescue.collectDue(ctx, time.Now().Add(jobs[0].rescue.wait()+time.Second))
	var got []int64
	for _, rc := range rescued(jobs[0]) {
		got = append(got, rc.c.ID)
	}
	if fmt.Sprint(got) != "[3 4]" {
		t.Errorf("rescued %v, want [3 4]\n%s", got, jobs[0].log)
	}
	jobs[0].rescue.tick(ctx, t0.Add(2*time.Minute))
	if _, err := os.Stat(filepath.Join(rdir, "status.2~3")); err == nil {
		t.Errorf("the rescue taken over again after job 1 carried it out")
	}
}
