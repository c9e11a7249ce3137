package metajob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/casetable"
	"github.com/farm-hpc/farm/farm"
	"github.com/farm-hpc/farm/status"
	"github.com/farm-hpc/farm/tablefmt"
)

// lookFarm is a farm of 100 cases whose run 1 a meta-job (of two loops'
// worth of CPUs) claimed 4 of: next hands out case 1, 3 stay queued.
func lookFarm(t *testing.T) (*Metajob, *loop, string) {
	t.Helper()
	dir := t.TempDir()
	misc := filepath.Join(dir, "MISC")
	if err := os.Mkdir(misc, 0o755); err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	for i := 1; i <= 100; i++ { // enough that a claim of 4 is not cut near the end
		fmt.Fprintf(&table, "%d echo %d\n", i, i)
	}
	if err := os.WriteFile(filepath.Join(dir, "table.dat"), []byte(table.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	startRun(t, dir, 1)
	var err error
	m := &Metajob{Farm: &farm.Farm{Dir: dir}, store: casetable.NewStore(dir, misc), log: &bytes.Buffer{}, pool: newPool(2, nil, backend.Alloc{}), rt: &runtimeGuard{}}
	t.Cleanup(func() { m.store.Close() })
	if m.sw, err = status.CreateCap(filepath.Join(dir, "status.1"), "1", 0, 1, "host", status.Capacity{CPUs: 2}, m.log); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.sw.Close() })
	m.Env.Run = 1
	m.stop.ch = make(chan struct{}) // a test may close it: a stop signal
	t.Cleanup(m.startOwner().end)
	s := &loop{k: 1, runner: nopRunner{}}
	var cases []tablefmt.Case
	var why stop
	m.do(func(o *owner) {
		o.bs.max = 4
		if cases, why, err = o.claim(context.Background(), m.rt, 4); len(cases) == 4 {
			o.queue = cases[1:]
		}
	})
	if err != nil || why != going || len(cases) != 4 {
		t.Fatalf("claim: %d cases, %q, %v", len(cases), why, err)
	}
	return m, s, dir
}

// nextCase is loop s's next case from m's owner, or why the loop ends,
// or an error.
func nextCase(m *Metajob, s *loop) (tablefmt.Case, stop, error) {
	t := m.next(context.Background(), s)
	return t.c, t.why, t.err
}

// owned is what f returns, run by m's owner.
func owned[T any](m *Metajob, f func(o *owner) T) T {
	var v T
	m.do(func(o *owner) { v = f(o) })
	return v
}

// nopRunner is a case runner that runs nothing.
type nopRunner struct{}

func (nopRunner) run(caseRequest) (int, int, error) { return 0, 0, nil }
func (nopRunner) refresh() error                    { return nil }
func (nopRunner) bind([]int)                        {}
func (nopRunner) use() status.Use                   { return status.Use{} }
func (nopRunner) scratch() string                   { return "" }
func (nopRunner) lastGroup() int                    { return 0 }
func (nopRunner) group() int                        { return 0 }
func (nopRunner) close()                            {}

// startRun starts run over the farm in dir's table.dat (of 100 cases), as
// farm submit and resubmit do.
func startRun(t *testing.T, dir string, run int) {
	t.Helper()
	st := casetable.NewStore(dir, filepath.Join(dir, "MISC"))
	defer st.Close()
	ctx := context.Background()
	cur, err := st.Read(ctx)
	if errors.Is(err, casetable.ErrNoState) {
		cur.Gen = -1
	} else if err != nil {
		t.Fatal(err)
	}
	if err := st.StartRun(ctx, casetable.RunSpec{Base: cur.Gen, Chain: cur.Chain, Run: run, Table: "table.dat", Cases: 100}); err != nil {
		t.Fatal(err)
	}
}

// later makes m's clock read d after its last news of its run, by the
// wall clock only (as after a frozen VM).
func later(m *Metajob, d time.Duration) {
	m.do(func(o *owner) {
		at := o.news.at.Round(0).Add(d)
		m.clock = func() time.Time { return at }
	})
}

// lookEvery sets m's cadence, FARM_LOOK_EVERY.
func lookEvery(m *Metajob, d time.Duration) {
	m.do(func(*owner) { m.Env.LookEvery = d })
}

func TestLookCostsNothingWithinTheThreshold(t *testing.T) {
	m, s, dir := lookFarm(t)
	later(m, casetable.LookEvery-time.Second)
	// Run 2 started: a read of the claim state would see it, and the
	// meta-job would stop. It does not read.
	startRun(t, dir, 2)
	for _, want := range []int64{2, 3, 4} {
		c, why, err := nextCase(m, s)
		if err != nil || why != going || c.ID != want {
			t.Fatalf("next: case %d, %q, %v; want case %d", c.ID, why, err, want)
		}
	}
}

func TestLookAfterASilenceGoesOnInTheCurrentRun(t *testing.T) {
	m, s, dir := lookFarm(t)
	// Another meta-job claimed meanwhile, and the cutoff was updated: the
	// run is still run 1.
	other := casetable.NewStore(dir, filepath.Join(dir, "MISC"))
	defer other.Close()
	if cases, err := other.Claim(context.Background(), 1, 3); err != nil || len(cases) != 3 {
		t.Fatalf("other claim: %v %v", cases, err)
	}
	lookEvery(m, 5*time.Second)
	later(m, 6*time.Second)
	c, why, err := nextCase(m, s)
	if err != nil || why != going || c.ID != 2 {
		t.Fatalf("next: case %d, %q, %v; want case 2", c.ID, why, err)
	}
	news, clock := owned(m, func(o *owner) runNews { return o.news }), owned(m, func(*owner) time.Time { return m.clock() })
	if news.at != clock {
		t.Errorf("news at %v, want the look's %v", news.at, clock)
	}
	if now, err := other.Read(context.Background()); err != nil || news.run.Gen != now.Gen || news.run.Run != 1 {
		t.Errorf("news of run %d's record at generation %d, want the newest, %d (%v)", news.run.Run, news.run.Gen, now.Gen, err)
	}
}

func TestLookFindsTheRunSuperseded(t *testing.T) {
	m, s, dir := lookFarm(t)
	startRun(t, dir, 2)
	later(m, 12*time.Minute)
	c, why, err := nextCase(m, s)
	if err != nil || why != stopSuperseded {
		t.Fatalf("next: case %d, %q, %v; want %q", c.ID, why, err, stopSuperseded)
	}
	if queue, left := owned(m, func(o *owner) []tablefmt.Case { return o.queue }), owned(m, func(o *owner) int { return o.left }); len(queue) != 0 || left != 3 {
		t.Errorf("queue %v, left %d; want none queued, 3 left", queue, left)
	}
	// The other loops: one about to start the case it holds, one waiting
	// for its turn (woken: the pool stopped), one asking for a case.
	if ok, why, _ := m.stillStarts(context.Background(), s, tablefmt.Case{ID: 9}, want{}); ok || why != stopSuperseded {
		t.Errorf("stillStarts: %v %q", ok, why)
	}
	if _, ok := m.pool.acquire(m.pool.ticket(), want{cpus: 1}, 0); ok {
		t.Error("a loop waiting for its turn was not stopped")
	} else if why := m.notStarted(s); why != stopSuperseded {
		t.Errorf("a loop stopped while waiting for its turn ends with %q", why)
	}
	if _, why, _ := nextCase(m, s); why != stopSuperseded {
		t.Errorf("next again: %q", why)
	}
	line := owned(m, (*owner).supersededLine)
	for _, want := range []string{"run 1 was superseded by run 2", "for 12m0s", "the 5 cases it had claimed but not started were left to run 2; exiting."} {
		if !strings.Contains(line, want) {
			t.Errorf("line %q lacks %q", line, want)
		}
	}
	if why, err := jobEnd([]loopEnd{{stopSuperseded, nil}, {stopNoCases, nil}}); why != stopSuperseded || err != nil {
		t.Errorf("jobEnd: %q %v", why, err)
	}
}

func TestLookFindsTheRunRepaired(t *testing.T) {
	for _, how := range []string{"same chain", "new chain", "same chain, same table"} {
		t.Run(how, func(t *testing.T) {
			m, s, dir := lookFarm(t)
			if how == "new chain" {
				// No chain to be found: repair closes the old one and
				// starts another, whose generations start again.
				if err := os.Remove(filepath.Join(dir, "MISC", "chain")); err != nil {
					t.Fatal(err)
				}
			}
			st := casetable.NewStore(dir, filepath.Join(dir, "MISC"))
			defer st.Close()
			// As farm repair closes run 1 (farm.closedRun).
			rebuilt := casetable.State{Run: 1, Table: "table.dat", Offset: 1000, Lines: -1, Cases: 100, MaxID: 100, Total: 100, Claimed: 100}
			if how == "same chain, same table" {
				// The run's table as the meta-job knew it (a run on
				// table.dat itself): only the repair's own mark tells
				// the state rebuilt (review).
				cur, err := st.Read(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				rebuilt = cur
				rebuilt.Offset, rebuilt.Claimed = 1000, cur.Cases
			}
			if err := st.Repair(context.Background(), rebuilt); err != nil {
				t.Fatal(err)
			}
			later(m, 2*time.Minute)
			if _, why, err := nextCase(m, s); why != stopSuperseded || err != nil {
				t.Fatalf("next: %q %v", why, err)
			}
			if line := owned(m, (*owner).supersededLine); !strings.Contains(line, "the claim state of run 1 was rebuilt (farm repair)") || !strings.Contains(line, "left to the next run") {
				t.Errorf("line %q", line)
			}
		})
	}
}

func TestLookReadFailureEndsTheJob(t *testing.T) {
	m, s, dir := lookFarm(t)
	if err := os.WriteFile(filepath.Join(dir, "MISC", "chain"), []byte("garbage\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m.do(func(*owner) { m.store.Close() }) // forget the chain it had open
	later(m, 2*time.Minute)
	if c, why, err := nextCase(m, s); err == nil || why != going {
		t.Fatalf("next: case %d, %q, %v; want an error", c.ID, why, err)
	} else if !strings.Contains(err.Error(), "looking at the claim state of run 1 (last news of it 2m0s ago)") {
		t.Errorf("error: %v", err)
	}
}

func TestNewsIsDatedFromBeforeTheClaim(t *testing.T) {
	m, s, _ := lookFarm(t)
	// The job freezes for 10 minutes inside its next claim, once the
	// claim has committed (the store then holds its generation).
	t0 := time.Now().Round(0)
	var cases []tablefmt.Case
	var why stop
	var err error
	var newsAt time.Time
	m.do(func(o *owner) {
		o.queue = nil
		c0 := m.store.ClaimedInRun()
		m.clock = func() time.Time {
			if m.store.ClaimedInRun() > c0 {
				return t0.Add(10 * time.Minute)
			}
			return t0
		}
		cases, why, err = o.claim(context.Background(), m.rt, 4)
		newsAt = o.news.at
		// So the first case of the batch is not started before a look.
		o.queue = cases
	})
	if err != nil || why != going || len(cases) == 0 {
		t.Fatalf("claim: %v, %q, %v", cases, why, err)
	}
	if newsAt != t0 {
		t.Fatalf("news of the claim dated %v, want %v: before it, not after the freeze", newsAt, t0)
	}
	if c, why, err := nextCase(m, s); err != nil || why != going || c.ID != 5 {
		t.Fatalf("next: case %d, %q, %v; want case 5", c.ID, why, err)
	}
	if at := owned(m, func(o *owner) time.Time { return o.news.at }); at != t0.Add(10*time.Minute) {
		t.Errorf("news at %v after the first case: no look", at)
	}
}

// TestSupersededByKeepsAddedTables: a set 'farm add' gave the run (first
// or not) is not a rebuilt state; a repair (a new own table, its mark) and
// a newer run are.
func TestSupersededByKeepsAddedTables(t *testing.T) {
	own := casetable.Set{Dir: "lanes.2.a", Lanes: 1, Cases: 10, Table: "MISC/table.run2.1.a"}
	last := casetable.State{Run: 2, Table: own.Table, Sets: []casetable.Set{own}, Gen: 10}
	moved := last
	moved.Gen = 11
	moved.Sets = []casetable.Set{{Dir: "lanes.2.b", Lanes: 1, Cases: 3, Table: "MISC/table.run2.add.1.b"}, own}
	if why := supersededBy(2, last, moved); why != "" {
		t.Errorf("a --first add: %q; want the run still current", why)
	}
	if why := supersededBy(2, moved, moved); why != "" {
		t.Errorf("the same state: %q", why)
	}
	rebuilt := casetable.State{Run: 2, Table: "table.dat", Gen: 0, Repair: "r1"}
	if why := supersededBy(2, moved, rebuilt); !strings.Contains(why, "rebuilt") {
		t.Errorf("a repair: %q", why)
	}
	newer := moved
	newer.Run = 3
	if why := supersededBy(2, moved, newer); !strings.Contains(why, "superseded by run 3") {
		t.Errorf("a new run: %q", why)
	}
}

// TestFrozenAfterItsLastLookStartsNothing: a meta-job that went silent
// after stillStarts's look — frozen between it and the case's start
// record — looks again once the record is written, before the case runs:
// its run superseded meanwhile, the case does not run, and is recorded
// interrupted (the next run ran it). Without the silence, the look is only
// at the clock.
func TestFrozenAfterItsLastLookStartsNothing(t *testing.T) {
	m, s, dir := lookFarm(t)
	c, why, err := nextCase(m, s)
	if err != nil || why != going {
		t.Fatalf("next: %q, %v", why, err)
	}
	if ok, why, err := m.stillStarts(context.Background(), s, c, want{}); !ok {
		t.Fatalf("stillStarts: %q, %v", why, err)
	}
	if why, err := m.startsAfterRecord(context.Background()); why != going || err != nil {
		t.Fatalf("startsAfterRecord with news of the run: %q, %v", why, err)
	}
	// Frozen here for 12 minutes, while run 2 started.
	startRun(t, dir, 2)
	later(m, 12*time.Minute)
	if why, err := m.startsAfterRecord(context.Background()); why != stopSuperseded || err != nil {
		t.Errorf("startsAfterRecord after the silence: %q, %v; want %q", why, err, stopSuperseded)
	}
}

// TestLookFindsASetAddedFirst: 'farm add --first' gives the run a set
// while the meta-job holds none of its cases queued. Within LookEvery of
// its last look its next claim is from the run's own set (it looked at
// nothing); once the look is due, the claim after it takes the added set
// first: the one poller serves --first.
func TestLookFindsASetAddedFirst(t *testing.T) {
	m, s, dir := lookFarm(t)
	m.do(func(o *owner) { o.queue = nil })
	add := casetable.NewStore(dir, filepath.Join(dir, "MISC"))
	defer add.Close()
	if q, err := add.Enqueue(context.Background(), 1, "x", []byte("101 echo first 101\n102 echo first 102\n"), 2, 102, true); err != nil || q.Run != 1 {
		t.Fatalf("enqueue: %+v, %v", q, err)
	}
	lookEvery(m, 5*time.Second)
	later(m, time.Second)
	c, why, err := nextCase(m, s)
	if err != nil || why != going || c.ID >= 101 {
		t.Fatalf("next within LookEvery: case %d, %q, %v; want one of the run's own (no look)", c.ID, why, err)
	}
	m.do(func(o *owner) { o.queue = nil })
	later(m, 6*time.Second)
	c, why, err = nextCase(m, s)
	if err != nil || why != going || c.ID != 101 {
		t.Fatalf("next once the look was due: case %d, %q, %v; want 101, the --first set's", c.ID, why, err)
	}
}

// TestClaimOfNothingAfterARepairSupersedes: a claim that finds nothing
// because a repair rebuilt the run's state (same run, no set) ends the run
// for the job at once: the cases its loops hold do not start (review: the
// claim took the rebuilt record as news, and every look after it compared
// the rebuilt record with itself).
func TestClaimOfNothingAfterARepairSupersedes(t *testing.T) {
	m, s, dir := lookFarm(t)
	st := casetable.NewStore(dir, filepath.Join(dir, "MISC"))
	defer st.Close()
	cur, err := st.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rebuilt := cur
	rebuilt.Sets = nil
	if err := st.Repair(context.Background(), rebuilt); err != nil {
		t.Fatal(err)
	}
	var cases []tablefmt.Case
	var why stop
	m.do(func(o *owner) { cases, why, err = o.claim(context.Background(), m.rt, 4) })
	if len(cases) != 0 || why != stopSuperseded || err != nil {
		t.Fatalf("claim after the repair: %v, %q, %v; want none, %q", cases, why, err, stopSuperseded)
	}
	if c, why, _ := nextCase(m, s); why != stopSuperseded {
		t.Errorf("next after it: case %d, %q; want %q (the held cases stay unstarted)", c.ID, why, stopSuperseded)
	}
	if left := owned(m, func(o *owner) int { return o.left }); left != 3 {
		t.Errorf("left %d, want the 3 held", left)
	}
}

// TestFailedLookIsNotALook: a look whose reading fails leaves the next
// caller to look again, not to start a case on it (review: another loop
// started its case within LookEvery of the failed look).
func TestFailedLookIsNotALook(t *testing.T) {
	m, s, dir := lookFarm(t)
	if err := os.WriteFile(filepath.Join(dir, "MISC", "chain"), []byte("garbage\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m.do(func(*owner) { m.store.Close() }) // forget the chain it had open
	lookEvery(m, 5*time.Second)
	later(m, 6*time.Second)
	for i := range 2 {
		if c, why, err := nextCase(m, s); err == nil {
			t.Fatalf("next %d after the failed look: case %d, %q; want the reading's error", i+1, c.ID, why)
		}
	}
}

// TestLookAfterASilenceTellsAChainGone: after a silence the look reads the
// run record afresh, so the main chain's directory removed meanwhile is
// damage, not a mark not found (review: the one lookup took it for a run
// not moved on, and the job started its held cases).
func TestLookAfterASilenceTellsAChainGone(t *testing.T) {
	m, s, dir := lookFarm(t)
	chains, _ := filepath.Glob(filepath.Join(dir, "MISC", "claims.*"))
	if len(chains) != 1 {
		t.Fatalf("main chains %v, want one", chains)
	}
	if err := os.RemoveAll(chains[0]); err != nil {
		t.Fatal(err)
	}
	later(m, 12*time.Minute)
	c, why, err := nextCase(m, s)
	var de *casetable.DamageError
	if !errors.As(err, &de) {
		t.Fatalf("next after the silence: case %d, %q, %v; want the damage", c.ID, why, err)
	}
	if !strings.Contains(err.Error(), "'farm repair' rebuilds it") {
		t.Errorf("the damage met by a look gives no advice: %v", err)
	}
}
