package status

import (
	"bufio"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// rec is one case's attempt in a status file written by writeFile.
type rec struct {
	id     int64
	status int
	noEnd  bool // started, never ended (the job died)
}

// writeFile writes a status file of job in run, with a start and (unless
// noEnd) an end record for each of recs, and the job's exit.
func writeFile(t testing.TB, dir, job string, run int, recs []rec) {
	t.Helper()
	fh, err := os.Create(filepath.Join(dir, "status."+job))
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(fh)
	fmt.Fprintf(w, "# farm-status v1 job=%s run=%d host=node%s\n", job, run, job)
	for i, r := range recs {
		start := 1_700_000_000 + int64(run)*100_000 + int64(i)
		fmt.Fprintf(w, "S %d %d.250 node%s\n", r.id, start, job)
		if !r.noEnd {
			fmt.Fprintf(w, "E %d %d %d.250 1.5 node%s\n", r.id, r.status, start, job)
		}
	}
	fmt.Fprintln(w, "Q 1 No cases left; exiting.")
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	fh.Close()
}

// allocated returns the bytes allocated while loading dir with opt (the
// least of three loads), and the summary.
func allocated(t *testing.T, dir string, opt Options) (uint64, *Summary) {
	t.Helper()
	least := ^uint64(0)
	var sum *Summary
	for range 3 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		s, err := Load(dir, opt)
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatal(err)
		}
		least, sum = min(least, after.TotalAlloc-before.TotalAlloc), s
	}
	return least, sum
}

// kept loads dir with opt, and returns the summary, the bytes of heap the
// load kept (after a garbage collection) and those it allocated.
func kept(t *testing.T, dir string, opt Options) (sum *Summary, heap int64, total uint64) {
	t.Helper()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	sum, err := Load(dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.GC() // and the batches the pool kept
	runtime.ReadMemStats(&after)
	return sum, int64(after.HeapAlloc) - int64(before.HeapAlloc), after.TotalAlloc - before.TotalAlloc
}

// The summary of a one-case farm whose case ID is 2,000,000,000 allocates
// about what that of case 1 does, with and without the table's hints
// (issue 10: it took 26 GB).
func TestHugeCaseIDAllocatesLittle(t *testing.T) {
	one := t.TempDir()
	writeFile(t, one, "1", 1, []rec{{id: 1, status: 3}})
	base, _ := allocated(t, one, Options{MaxID: 1, Cases: 1})
	t.Logf("case 1: %d KiB", base>>10)
	const id = 2_000_000_000
	for _, id := range []int64{id, 1<<31 + 5, 1 << 62} {
		dir := t.TempDir()
		writeFile(t, dir, "1", 1, []rec{{id: id, status: 3}})
		for _, opt := range []Options{{}, {MaxID: id, Cases: 1}, {MaxID: id}, {MaxID: id, Cases: id}} {
			got, sum := allocated(t, dir, opt)
			t.Logf("case %d, MaxID %d, Cases %d: %d KiB", id, opt.MaxID, opt.Cases, got>>10)
			// A page of 8192 cases is 120 KiB.
			if got > base+200<<10 {
				t.Errorf("case %d, MaxID %d, Cases %d: loading allocated %d KiB, case 1 %d KiB", id, opt.MaxID, opt.Cases, got>>10, base>>10)
			}
			var cases []Case
			sum.Each(func(c Case) error { cases = append(cases, c); return nil })
			want := []Case{{ID: id, State: Failed, Status: 3, Seconds: 1.5, Job: "1", Host: "node1", Run: 1, Attempts: 1}}
			if diff := cmp.Diff(want, cases); diff != "" {
				t.Errorf("cases (-want +got):\n%s", diff)
			}
			if c := sum.Get(id); c.State != Failed {
				t.Errorf("Get(%d) = %+v", id, c)
			}
			if maxID, _, maxSt, _, _, _ := sum.Widths(); maxID != id || maxSt != 3 {
				t.Errorf("Widths: max ID %d, max STATUS %d", maxID, maxSt)
			}
		}
	}
}

// reference computes the outcome of each case from the attempts of runs
// (no running cases, at most one attempt of a case per run): a success
// wins, the latest run's otherwise.
func reference(runs map[int][]rec) map[int64]Case {
	out := map[int64]Case{}
	for run := 1; run <= len(runs); run++ {
		for _, r := range runs[run] {
			c := Case{ID: r.id, State: Failed, Status: r.status, Seconds: 1.5, Run: run}
			switch {
			case r.noEnd:
				c.State, c.Status, c.Seconds = Interrupted, 0, 0
			case r.status == 0:
				c.State = Succeeded
			}
			if old, ok := out[r.id]; ok && old.State == Succeeded && c.State != Succeeded {
				continue
			}
			out[r.id] = c
		}
	}
	return out
}

// Dense, offset, clustered and sparse IDs, loaded with and without hints
// of the table, give the same cases in ID order as a plain map does; a
// case started twice in one run is found wherever its records lie.
func TestSummaryOfAnyIDs(t *testing.T) {
	ids := anyIDs()
	dir := t.TempDir()
	want := writeTwoRuns(t, dir, ids)
	for _, opt := range []Options{{}, {MaxID: 30000, Cases: 30000}, {MaxID: 1<<63 - 1, Cases: int64(len(ids))}, {MaxID: 1e12 + 20000, Cases: 20000}} {
		sum, err := Load(dir, opt)
		if err != nil {
			t.Fatal(err)
		}
		want.check(t, sum, opt)
	}
}

// anyIDs returns case IDs of every kind, in random order: dense from 1,
// dense far from 0, clustered, sparse over the int64s, the largest, and a
// negative one.
func anyIDs() []int64 {
	rng := rand.New(rand.NewPCG(10, 10))
	seen := map[int64]bool{}
	var ids []int64
	add := func(id int64) {
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	for id := int64(1); id <= 30000; id++ { // dense, as farm numbers them
		add(id)
	}
	for id := int64(1e12); id < 1e12+20000; id++ { // dense, far from 0
		add(id)
	}
	for range 3000 { // clustered: every third ID of a range
		add(5e9 + 3*rng.Int64N(20000))
	}
	for range 5000 { // sparse over the int64s
		add(rng.Int64N(1<<63-1) + 1)
	}
	add(1<<63 - 1)
	add(-7) // a damaged record's ID still sorts
	rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	return ids
}

// summaryWant is what the summary of the status files of writeTwoRuns
// must hold.
type summaryWant struct {
	cases  []Case // in ID order, without job, host and starts
	totals Counts
	maxSt  int
	dup    []rec          // the cases started twice in run 2
	isDup  map[int64]bool // their IDs
}

// writeTwoRuns writes to dir the status files of two runs over cases ids,
// and returns what their summary must hold.
//
// Run 1: 4 jobs share the cases; every fifth fails, every 97th is cut
// off. Run 2: one job reruns the cases that did not succeed, and some
// that did (which fail now); it is started twice in run 2 by a second
// job, which must never be.
func writeTwoRuns(t *testing.T, dir string, ids []int64) summaryWant {
	t.Helper()
	runs := map[int][]rec{}
	files := make([][]rec, 4)
	for i, id := range ids {
		r := rec{id: id}
		if i%5 == 0 {
			r.status = 1 + i%7
		}
		if i%97 == 0 {
			r.noEnd = true
		}
		runs[1] = append(runs[1], r)
		files[i%4] = append(files[i%4], r)
	}
	for j, f := range files {
		writeFile(t, dir, fmt.Sprint(10+j), 1, f)
	}
	var again []rec
	for i, r := range runs[1] {
		if r.status != 0 || r.noEnd || i%11 == 0 {
			again = append(again, rec{id: r.id, status: i % 2})
		}
	}
	runs[2] = again
	writeFile(t, dir, "20", 2, again)
	dup := []rec{again[3], again[len(again)/2], again[len(again)-1]}
	writeFile(t, dir, "21", 2, dup)

	want := summaryWant{dup: dup, isDup: map[int64]bool{}}
	for _, c := range reference(runs) {
		want.cases = append(want.cases, c)
	}
	sort.Slice(want.cases, func(i, j int) bool { return want.cases[i].ID < want.cases[j].ID })
	for _, c := range want.cases {
		want.totals.Add(c.State)
		want.maxSt = max(want.maxSt, c.Status)
	}
	for _, r := range dup {
		want.isDup[r.id] = true
	}
	return want
}

// check compares sum, loaded with opt, with what it must hold.
func (want summaryWant) check(t *testing.T, sum *Summary, opt Options) {
	var got []Case
	sum.Each(func(c Case) error {
		if c.Run == 2 && want.isDup[c.ID] && (c.Starts != 2 || c.StartsRun != 2) {
			t.Errorf("case %d: starts %d in run %d, want 2 in run 2", c.ID, c.Starts, c.StartsRun)
		}
		c.Job, c.Host, c.Starts, c.StartsRun = "", "", 0, 0
		got = append(got, c)
		return nil
	})
	if len(got) != len(want.cases) {
		t.Errorf("MaxID %d, Cases %d: %d cases, want %d", opt.MaxID, opt.Cases, len(got), len(want.cases))
	}
	for i, bad := 0, 0; i < min(len(got), len(want.cases)) && bad < 5; i++ {
		if g, w := got[i], want.cases[i]; g.ID != w.ID || g.State != w.State || g.Status != w.Status || g.Run != w.Run || math.Abs(g.Seconds-w.Seconds) > 0.001 {
			t.Errorf("MaxID %d, Cases %d: case %d is %+v, want %+v", opt.MaxID, opt.Cases, i, g, w)
			bad++
		}
	}
	for _, c := range want.cases[:200] {
		if g := sum.Get(c.ID); g.State != c.State || g.Run != c.Run {
			t.Errorf("Get(%d) = %+v, want %+v", c.ID, g, c)
		}
	}
	for _, id := range []int64{0, 30001, 1e12 - 1, 1e12 + 20000, 5e9 + 1} {
		if g := sum.Get(id); g.State != NeverRan || g.ID != id {
			t.Errorf("Get(%d) = %+v, want never ran", id, g)
		}
	}
	if got := sum.Totals(); got != want.totals {
		t.Errorf("totals %+v, want %+v", got, want.totals)
	}
	if maxID, _, maxSt, _, _, _ := sum.Widths(); maxID != 1<<63-1 || maxSt != want.maxSt {
		t.Errorf("Widths: max ID %d, max STATUS %d", maxID, maxSt)
	}
	if len(sum.Duplicates) != len(want.dup) {
		t.Errorf("duplicates %+v, want cases %v in run 2", sum.Duplicates, want.dup)
	}
}

// A case started while its range was kept sparse, and again in the same
// run once the range has a page, is a duplicate start; so is a sparse case
// started twice in one run, whatever the order of the runs.
func TestStartedAgainAfterItsRangeGotAPage(t *testing.T) {
	s := &Summary{RunCounts: map[int]*Counts{}, Jobs: make([]Job, 1), jobRun: []int{1}}
	const base = 1 << 40
	s.merge(attempt{id: base + 5, state: Failed, status: 2, started: true}, 0, 1)
	if s.cases.page(base+5) != nil {
		t.Fatal("a lone case has a page")
	}
	for i := int64(100); i < 100+firstScan; i++ {
		s.merge(attempt{id: base + i, state: Succeeded, started: true}, 0, 1)
	}
	if s.cases.page(base+5) == nil || len(s.cases.far) != 0 {
		t.Fatalf("the range has no page after %d cases (%d kept sparse)", firstScan, len(s.cases.far))
	}
	s.merge(attempt{id: base + 5, state: Succeeded, started: true}, 0, 1)
	s.merge(attempt{id: base + 100, state: Succeeded, started: true}, 0, 2)
	// A sparse case started in runs 2, 1, 300, 1, 300 (out of order, as
	// files are read in parallel): twice in runs 1 and 300.
	for _, run := range []int{2, 1, 300, 1, 300} {
		s.merge(attempt{id: 1 << 50, state: Failed, status: 1, started: true}, 0, run)
	}
	s.cases.done()
	want := map[runCase]int{{1, base + 5}: 2, {1, 1 << 50}: 2, {300, 1 << 50}: 2}
	if diff := cmp.Diff(want, s.dupStarts); diff != "" {
		t.Errorf("duplicate starts (-want +got):\n%s", diff)
	}
	if c := s.Get(base + 5); c.State != Succeeded {
		t.Errorf("case %d: %+v", base+5, c)
	}
}

// N cases with IDs spread thinly over the int64s cost a bounded number of
// bytes each.
func TestSparseIDsCostPerCase(t *testing.T) {
	const n = 100_000
	rng := rand.New(rand.NewPCG(1, 2))
	var recs []rec
	for range n {
		recs = append(recs, rec{id: rng.Int64N(1<<62) + 1})
	}
	dir := t.TempDir()
	writeFile(t, dir, "1", 1, recs)
	for _, opt := range []Options{{}, {MaxID: 1 << 62, Cases: n}} {
		sum, heap, total := kept(t, dir, opt)
		per := heap / n
		t.Logf("MaxID %d: %d bytes a case kept, %d allocated", opt.MaxID, per, total/n)
		if per > 150 {
			t.Errorf("MaxID %d: %d bytes a case", opt.MaxID, per)
		}
		if got := sum.Totals(); got.Succeeded != n {
			t.Errorf("totals %+v", got)
		}
		runtime.KeepAlive(sum)
	}
}

// The pages of a dense farm cost 15 bytes a case, as parallel slices would.
func TestDenseIDsCostPerCase(t *testing.T) {
	const n = 200_000
	dir := t.TempDir()
	for j := 0; j < 4; j++ {
		var recs []rec
		for id := int64(j + 1); id <= n; id += 4 {
			recs = append(recs, rec{id: id})
		}
		writeFile(t, dir, fmt.Sprint(j), 1, recs)
	}
	for _, opt := range []Options{{MaxID: n, Cases: n}, {}} {
		sum, heap, total := kept(t, dir, opt)
		per := float64(heap) / n
		t.Logf("MaxID %d: %.1f bytes a case kept, %d allocated", opt.MaxID, per, total/n)
		if per > 16 {
			t.Errorf("MaxID %d: %.1f bytes a case", opt.MaxID, per)
		}
		if got := sum.Totals(); got.Succeeded != n {
			t.Errorf("totals %+v", got)
		}
		runtime.KeepAlive(sum)
	}
}

// Attempts and crashes are counted alike for cases kept one by one (sparse
// IDs) and in pages, and survive a range's move from the one to the other.
func TestAttemptsAndCrashesOfSparseAndPromotedCases(t *testing.T) {
	dir := t.TempDir()
	const n = 6000 // more than firstScan: the ranges are promoted while loading
	var crash, fail, ok []rec
	for k := int64(0); k < n; k++ {
		id := 1_000_000_000 + 3*k
		crash = append(crash, rec{id: id, noEnd: true})
		fail = append(fail, rec{id: id, status: 2})
		ok = append(ok, rec{id: id})
	}
	sparse := rec{id: 1 << 50, noEnd: true}
	writeFile(t, dir, "1", 1, append(crash, sparse)) // the job exited with its cases open: crashes
	writeFile(t, dir, "2", 2, append(fail, rec{id: 1 << 50, noEnd: true}))
	writeFile(t, dir, "3", 3, ok)
	sum, err := Load(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	bad := 0
	sum.Each(func(c Case) error {
		want := Case{State: Succeeded, Attempts: 3, Crashes: 1}
		if c.ID == 1<<50 {
			want = Case{State: Interrupted, Attempts: 2, Crashes: 2}
		}
		if c.State != want.State || c.Attempts != want.Attempts || c.Crashes != want.Crashes {
			if bad++; bad <= 5 {
				t.Errorf("case %d: %v, %d attempts, %d crashes; want %v, %d, %d", c.ID, c.State, c.Attempts, c.Crashes, want.State, want.Attempts, want.Crashes)
			}
		}
		return nil
	})
	if got := sum.Totals(); got.Succeeded != n || got.Interrupted != 1 {
		t.Errorf("totals %+v; want %d succeeded, 1 interrupted", got, n)
	}
	if len(sum.cases.order) == 0 {
		t.Errorf("no range was promoted to a page: the test tests only far cases")
	}
	// The 6,000 succeeded since their crash: only case 2^50 is crashed.
	for limit, want := range map[int]Counts{0: {}, 1: {Interrupted: 1}, 2: {Interrupted: 1}, 3: {}} {
		if got := sum.Crashed(limit); got != want {
			t.Errorf("Crashed(%d) = %+v, want %+v", limit, got, want)
		}
	}
}
