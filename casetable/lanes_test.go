package casetable

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/farm-hpc/farm/tablefmt"
	"github.com/farm-hpc/farm/vfs"
	"golang.org/x/sys/unix"
)

// startLaneRun starts run (over table.dat, as it is) with lanes lanes, as
// farm's startRun does: the current run's lanes closed, the new run's
// made, then the commit on the main chain.
func startLaneRun(t testing.TB, dir string, run, lanes int) State {
	t.Helper()
	return startLaneRunFor(t, dir, run, lanes, 0)
}

// startLaneRunFor is startLaneRun for a run started for jobs meta-jobs.
// It returns the run record.
func startLaneRunFor(t testing.TB, dir string, run, lanes, jobs int) State {
	t.Helper()
	misc := filepath.Join(dir, "MISC")
	st := NewStore(dir, misc)
	defer st.Close()
	ctx := context.Background()
	cur, err := st.Read(ctx)
	if err != nil && err != ErrNoState {
		t.Fatal(err)
	}
	if err := st.closeSets(ctx, cur); err != nil {
		t.Fatal(err)
	}
	id := State{Table: "table.dat"}
	if id.TSize, id.TIno, id.TFP, err = tableIDOn(vfs.OS{}, filepath.Join(dir, "table.dat")); err != nil {
		t.Fatal(err)
	}
	n, err := CountCases(filepath.Join(dir, "table.dat"))
	if err != nil {
		t.Fatal(err)
	}
	set, err := makeSet(vfs.OS{}, dir, misc, run, id, n, lanes, jobs)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Update(ctx, func(s *State) error {
		s.startRun(RunSpec{Run: run, Table: "table.dat", Cases: n}, []Set{set})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if set.Lanes != lanes {
		t.Fatalf("run %d got %d lanes, want %d", run, set.Lanes, lanes)
	}
	return st.Last()
}

// CountCases counts the case lines of a table (a test helper).
func CountCases(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, l := range strings.Split(string(b), "\n") {
		if tablefmt.IsCase([]byte(l)) {
			n++
		}
	}
	return n, nil
}

// newLaneFarm is newFarm whose run 1 has lanes.
func newLaneFarm(t testing.TB, n, lanes int) string {
	t.Helper()
	dir := newFarm(t, n)
	startLaneRun(t, dir, 2, lanes)
	return dir
}

// In one process, a store claims every case of a run with 4 lanes in
// batches of 1 to 40: every case once, each with its own line's number and
// command, the lanes going through the table close to its order, and Read
// counting the lanes' claims.
func TestLanesClaimEveryCaseWithItsLine(t *testing.T) {
	const n = 3000
	dir := newLaneFarm(t, n, 4)
	// The table's real line of each case.
	lineOf := map[int64]int64{}
	b, _ := os.ReadFile(filepath.Join(dir, "table.dat"))
	for i, l := range strings.Split(string(b), "\n") {
		if id, _, ok := strings.Cut(l, " "); ok && tablefmt.IsCase([]byte(l)) {
			v, _ := strconv.ParseInt(id, 10, 64)
			lineOf[v] = int64(i + 1)
		}
	}
	st := NewStore(dir, filepath.Join(dir, "MISC"))
	defer st.Close()
	st.Job = "job-a"
	seen := map[int64]int{}
	maxLag := int64(0)
	claims := 0
	for k := 1; ; k = k%40 + 1 {
		cases, err := st.Claim(context.Background(), 2, k)
		if err != nil {
			t.Fatal(err)
		}
		if len(cases) == 0 {
			break
		}
		claims++
		for _, c := range cases {
			seen[c.ID]++
			if c.Line != lineOf[c.ID] {
				t.Fatalf("case %d has line %d, its line is %d", c.ID, c.Line, lineOf[c.ID])
			}
			if want := fmt.Sprintf("echo case %d", c.ID); c.Command != want {
				t.Fatalf("case %d runs %q, want %q", c.ID, c.Command, want)
			}
			// One claimer goes through its lane's blocks, then the
			// others': a case is never far past the ones before it.
			maxLag = max(maxLag, c.ID-int64(len(seen)))
		}
		if last := st.Last(); last.Run != 2 || len(last.Sets) != 1 || last.Sets[0].Lanes != 4 {
			t.Fatalf("Last after a lane claim: run %d, sets %+v", last.Run, last.Sets)
		}
	}
	for id := int64(1); id <= n; id++ {
		if seen[id] != 1 {
			t.Errorf("case %d claimed %d times", id, seen[id])
		}
	}
	r, err := NewStore(dir, filepath.Join(dir, "MISC")).Read(context.Background())
	if err != nil || r.Claimed != n || r.Cases != n {
		t.Errorf("Read: %d of %d claimed (%v), want %d of %d", r.Claimed, r.Cases, err, n, n)
	}
	t.Logf("%d claims; a case at most %d IDs ahead of the count claimed", claims, maxLag)
}

// 8 claimer processes on two simulated hosts, 4 lanes: every case exactly
// once, and every lane claimed in.
func TestLanesEightProcessesExactlyOnce(t *testing.T) {
	const n, procs = 5000, 8
	dir := newLaneFarm(t, n, 4)
	var cmds []*exec.Cmd
	var outs []string
	for i := 0; i < procs; i++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		out := fmt.Sprintf("%s/out.%d", dir, i)
		cmd.Env = append(os.Environ(), "CASETABLE_TEST_ROLE=claimer", "FARM_DIR="+dir, "CLAIM_RUN=2",
			fmt.Sprintf("HOST=host%d", i%2), "OUT="+out)
		cmds = append(cmds, cmd)
		outs = append(outs, out)
	}
	runAll(t, cmds)
	checkClaimedOnce(t, n, outs)
	st := NewStore(dir, filepath.Join(dir, "MISC"))
	defer st.Close()
	main, err := st.Read(context.Background())
	if err != nil || main.Claimed != n {
		t.Fatalf("Read: %d claimed (%v), want %d", main.Claimed, err, n)
	}
	for l := 0; l < 4; l++ {
		ls := newLaneStore(&Opts{Dir: dir}, vfs.OS{}, filepath.Join(dir, "MISC"), filepath.Join(dir, "MISC", main.Sets[0].Dir, strconv.Itoa(l)))
		if err := ls.refresh(); err != nil {
			t.Fatal(err)
		}
		if ls.gen < 1 || ls.cur.Claimed == 0 {
			t.Errorf("lane %d: generation %d, %d claimed: not claimed in", l, ls.gen, ls.cur.Claimed)
		}
		ls.close()
	}
}

// A claimer stopped before, inside and right after a commit in a lane,
// while a new run starts (closing the lanes), claims nothing in its old
// run once resumed, beyond the commit it had made: a lane, once closed,
// takes no commit, however long its claimer stalled.
func TestLanesStalledClaimerClaimsNothingAfterNextRun(t *testing.T) {
	here := func(script string, env ...string) *exec.Cmd {
		c := exec.Command("sh", "-c", script)
		c.Env = append(os.Environ(), env...)
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		return c
	}
	for _, stage := range []string{"write", "mark", "marked"} {
		for _, nth := range []int{1, 3} {
			t.Run(fmt.Sprintf("%s-%d", stage, nth), func(t *testing.T) {
				const n = 400
				dir := newLaneFarm(t, n, 4)
				out := dir + "/out.stalled"
				stalled := stalledClaimer(t, dir, out, stage, nth, func(script string, env ...string) *exec.Cmd {
					return here(script, append(env, "CLAIM_RUN=2")...)
				})
				// Run 3 starts: run 2's lanes are closed.
				startLaneRun(t, dir, 3, 4)
				syscall.Kill(stalled.Process.Pid, syscall.SIGCONT)
				if err := stalled.Wait(); err != nil {
					t.Fatalf("the resumed claimer: %v", err)
				}
				b, _ := os.ReadFile(out)
				got := len(strings.Fields(string(b)))
				// CLAIM_BATCH=1: nth-1 claims done before the stop,
				// and the nth too if it stopped after its mark.
				want := nth - 1
				if stage == "marked" {
					want = nth
				}
				if got != want {
					t.Errorf("stopped at %s of commit %d, the claimer claimed %d cases in run 2, want %d (none after run 3 started)", stage, nth, got, want)
				}
			})
		}
	}
}

// A repair closes every lane: a claimer of the old run claims nothing
// after it, and Read counts the closed lanes as claimed.
func TestRepairClosesLanes(t *testing.T) {
	const n = 600
	dir := newLaneFarm(t, n, 3)
	misc := filepath.Join(dir, "MISC")
	a := NewStore(dir, misc)
	defer a.Close()
	a.Job = "a"
	if cases, err := a.Claim(context.Background(), 2, 10); err != nil || len(cases) != 10 {
		t.Fatalf("claim: %d cases, %v", len(cases), err)
	}
	r := NewStore(dir, misc)
	defer r.Close()
	cur, err := r.Read(context.Background())
	if err != nil || cur.Claimed != 10 {
		t.Fatalf("Read: %d claimed, %v", cur.Claimed, err)
	}
	rebuilt := cur
	rebuilt.Sets = nil
	if err := r.Repair(context.Background(), rebuilt); err != nil {
		t.Fatal(err)
	}
	if cases, err := a.Claim(context.Background(), 2, 10); err != nil || len(cases) != 0 {
		t.Fatalf("a claim after the repair got %d cases (%v), want none", len(cases), err)
	}
	// The lanes themselves are closed.
	for l := 0; l < 3; l++ {
		ls := newLaneStore(&Opts{Dir: dir}, vfs.OS{}, misc, filepath.Join(misc, cur.Sets[0].Dir, strconv.Itoa(l)))
		if err := ls.refresh(); err != errClosed {
			t.Errorf("lane %d after the repair: %v, want it closed", l, err)
		}
		ls.close()
	}
	// Read of the old state's lanes: closed ones count as claimed whole.
	s2 := NewStore(dir, misc)
	defer s2.Close()
	main := cur
	main.Claimed = 0 // what the main chain holds: the lanes hold the claims
	if got, err := s2.readLanes(main); err != nil || got.Claimed != n {
		t.Errorf("the closed lanes read as %d claimed (%v), want %d", got.Claimed, err, n)
	}
}

// The index of a table with comments, blank lines, a last line without a
// newline and lines longer than the reader's buffer: every block starts at
// a case, with the lines before it.
func TestLaneIndexBlocks(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	var starts, lines []int64
	line := 0
	for i := 1; i <= 100; i++ {
		if i%7 == 0 {
			b.WriteString("# comment\n\n")
			line += 2
		}
		if (i-1)%16 == 0 {
			starts = append(starts, int64(b.Len()))
			lines = append(lines, int64(line))
		}
		cmd := "echo " + strconv.Itoa(i)
		if i == 50 {
			cmd += " " + strings.Repeat("x", 3<<20)
		}
		fmt.Fprintf(&b, "%d %s", i, cmd)
		if i < 100 {
			b.WriteString("\n")
		}
		line++
	}
	os.WriteFile(filepath.Join(dir, "t"), []byte(b.String()), 0o644)
	misc := filepath.Join(dir, "MISC")
	os.Mkdir(misc, 0o755)
	set, err := makeSet(vfs.OS{}, dir, misc, 1, State{Table: "t", TSize: int64(b.Len())}, 100, 4, 0)
	if err != nil {
		t.Fatal(err)
	}
	index, _ := os.ReadFile(filepath.Join(misc, set.Dir, "index"))
	x, err := parseIndex(index, false)
	if err != nil {
		t.Fatal(err)
	}
	if x.cases != 100 || x.block != 16 || fmt.Sprint(x.starts) != fmt.Sprint(starts) || fmt.Sprint(x.lines) != fmt.Sprint(lines) {
		t.Fatalf("index: %d cases, blocks of %d, starts %v lines %v; want 100, 16, %v, %v", x.cases, x.block, x.starts, x.lines, starts, lines)
	}
	y, err := parseIndex(x.marshal(), false)
	if err != nil || fmt.Sprint(y) != fmt.Sprint(x) {
		t.Fatalf("index read back: %v %v", y, err)
	}
	sum := int64(0)
	for l := 0; l < 4; l++ {
		sum += x.laneCases(l)
	}
	if sum != 100 {
		t.Errorf("the lanes hold %d cases, want 100", sum)
	}
}

// A damaged lane (its newest generation unreadable) is reported by Read
// as damage, seen by Inspect, and repaired: every lane closed, the main
// chain's state rebuilt; the farm then reads well.
func TestDamagedLaneIsReportedAndRepaired(t *testing.T) {
	const n = 300
	dir := newLaneFarm(t, n, 2)
	misc := filepath.Join(dir, "MISC")
	a := NewStore(dir, misc)
	defer a.Close()
	a.Job = "a"
	if _, err := a.Claim(context.Background(), 2, 5); err != nil {
		t.Fatal(err)
	}
	main := NewStore(dir, misc)
	defer main.Close()
	if err := main.refresh(); err != nil {
		t.Fatal(err)
	}
	gens, _ := filepath.Glob(filepath.Join(misc, main.cur.Sets[0].Dir, "*", "000000", "g.1"))
	if len(gens) != 1 {
		t.Fatalf("one lane should have a generation 1: %v", gens)
	}
	os.Chmod(gens[0], 0o644)
	if err := os.WriteFile(gens[0], []byte("garbage\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var de *DamageError
	if _, err := NewStore(dir, misc).Read(context.Background()); !errorsAs(err, &de) {
		t.Fatalf("Read of a farm with a damaged lane: %v, want a DamageError", err)
	}
	r := NewStore(dir, misc)
	defer r.Close()
	rd, err := r.Inspect(context.Background())
	if err != nil || !errorsAs(rd.Err, &de) {
		t.Fatalf("Inspect: %v, %v; want the lane's damage", err, rd.Err)
	}
	st := rd.State
	st.Sets = nil
	if err := r.RepairFrom(context.Background(), rd, st); err != nil {
		t.Fatal(err)
	}
	got, err := NewStore(dir, misc).Read(context.Background())
	if err != nil || len(got.Sets) != 0 || got.Claimed != got.Cases {
		t.Fatalf("after the repair: %+v, %v", got, err)
	}
	if cases, err := a.Claim(context.Background(), 2, 5); err != nil || len(cases) != 0 {
		t.Errorf("a claimer of the repaired run got %d cases (%v), want none", len(cases), err)
	}
}

// A repair that read the state before a resubmit started run 3 (with
// lanes) loses its compare-and-swap and says nothing was repaired — but it
// has closed run 3's lanes: run 3 can claim nothing.
func TestLanesRepairLosingToANewRunLeavesItsLanesOpen(t *testing.T) {
	dir := newLaneFarm(t, 400, 4) // run 2, 4 lanes
	misc := filepath.Join(dir, "MISC")
	ctx := context.Background()
	rep := NewStore(dir, misc)
	defer rep.Close()
	rd, err := rep.Inspect(ctx) // farm repair --force reads the state
	if err != nil {
		t.Fatal(err)
	}
	startLaneRun(t, dir, 3, 4) // a resubmit starts run 3 meanwhile
	err = rep.RepairFrom(ctx, rd, State{Run: 2, Table: "table.dat", Cases: 400, Claimed: 400})
	var race *RepairRaceError
	if !errors.As(err, &race) {
		t.Fatalf("repair: %v; want a RepairRaceError", err)
	}
	r := NewStore(dir, misc)
	defer r.Close()
	st, err := r.Read(ctx)
	t.Logf("after the refused repair: run %d claimed %d of %d (err %v)", st.Run, st.Claimed, st.Cases, err)
	c := NewStore(dir, misc)
	defer c.Close()
	c.Job = "job-x"
	cases, err := c.Claim(ctx, 3, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Errorf("run 3 stands (the repair was refused) but a claim in it gets no case: the refused repair closed its lanes")
	}
}

// CloseRun of a run with lanes: the lanes closed, then the run record's
// sets forgotten: Read counts every case once, as claimed.
func TestLanesClosedRunCountsEveryCaseOnce(t *testing.T) {
	dir := newLaneFarm(t, 400, 4)
	misc := filepath.Join(dir, "MISC")
	ctx := context.Background()
	s := NewStore(dir, misc)
	defer s.Close()
	if err := s.CloseRun(ctx, 2, "table.dat"); err != nil {
		t.Fatal(err)
	}
	st, err := s.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Claimed != st.Cases || st.Cases != 400 || len(st.Sets) != 0 {
		t.Errorf("after CloseRun: Read says %d of %d claimed, sets %+v", st.Claimed, st.Cases, st.Sets)
	}
	if err := s.CloseRun(ctx, 1, "table.dat"); !errors.Is(err, ErrMoved) {
		t.Errorf("CloseRun of an older run: %v, want ErrMoved", err)
	}
}

func caseIDs(cs []tablefmt.Case) []int64 {
	var r []int64
	for _, c := range cs {
		r = append(r, c.ID)
	}
	return r
}

// A lookup of a lane's marks answered ENOENT twice (a network filesystem's
// passing error) is not damage.
func TestLanesSpuriousENOENTIsNotDamage(t *testing.T) {
	dir := newLaneFarm(t, 400, 4)
	misc := filepath.Join(dir, "MISC")
	ctx := context.Background()
	s := NewStore(dir, misc)
	defer s.Close()
	if _, err := s.Read(ctx); err != nil { // main chain read, no fault
		t.Fatal(err)
	}
	r := NewStore(dir, misc)
	defer r.Close()
	if err := r.refresh(); err != nil {
		t.Fatal(err)
	}
	n := 0
	fault = func(op string) error {
		if op == "lookup" && n < 2 {
			n++
			return unix.ENOENT
		}
		return nil
	}
	defer func() { fault = nil }()
	_, err := r.readLanes(r.cur)
	var de *DamageError
	if errors.As(err, &de) {
		t.Errorf("one passing ENOENT on a lane's mark: %v", err)
	}
}

// TestLanesFor: no lanes under 16 meta-jobs, 2 up to 95, then one per 32,
// at most MaxLanes; FARM_CLAIM_LANES overrides.
func TestLanesFor(t *testing.T) {
	t.Setenv("FARM_CLAIM_LANES", "")
	for _, c := range []struct{ jobs, want int }{
		{1, 1}, {8, 1}, {15, 1}, {16, 2}, {63, 2}, {64, 2}, {95, 2}, {96, 3}, {128, 4}, {1024, 32}, {2048, 64}, {100000, MaxLanes},
	} {
		if got := LanesFor(c.jobs); got != c.want {
			t.Errorf("LanesFor(%d) = %d, want %d", c.jobs, got, c.want)
		}
	}
	t.Setenv("FARM_CLAIM_LANES", "5")
	if got := LanesFor(1); got != 5 {
		t.Errorf("with FARM_CLAIM_LANES=5, LanesFor(1) = %d", got)
	}
}

// jobInLane is a job name whose home lane, in a 4-lane run, is l.
func jobInLane(l int) string {
	return "job" + strconv.Itoa(100+l)
}

// TestHomeLanesAreEven: the meta-jobs of one submission (consecutive job
// IDs, or an array's tasks) are spread evenly over the lanes, and a name
// without digits still gets a lane.
func TestHomeLanesAreEven(t *testing.T) {
	for _, c := range []struct {
		name  func(i int) string
		jobs  int
		lanes int
	}{
		{func(i int) string { return strconv.Itoa(48213 + i) }, 128, 4},    // Slurm, one sbatch each
		{func(i int) string { return strconv.Itoa(48213 + i) }, 128, 128},  // a lane each
		{func(i int) string { return "48213_" + strconv.Itoa(i) }, 100, 3}, // Slurm array tasks
		{func(i int) string { return "911." + strconv.Itoa(i+1) }, 64, 8},  // Grid Engine array tasks
		{func(i int) string { return strconv.Itoa(i + 1) }, 33, 2},         // the local engine
		{func(i int) string { return strconv.Itoa(98765432101234 + i) }, 40, 4},
		{func(i int) string { return "999999999999999999999" + strconv.Itoa(1000+i) }, 300, 7}, // past int64
	} {
		n := make([]int, c.lanes)
		for i := 0; i < c.jobs; i++ {
			l := homeLane(vfs.OS{}, c.name(i), c.lanes)
			if l < 0 || l >= c.lanes {
				t.Fatalf("homeLane(%q, %d) = %d", c.name(i), c.lanes, l)
			}
			n[l]++
		}
		lo, hi := slices.Min(n), slices.Max(n)
		if hi-lo > 1 {
			t.Errorf("%d jobs like %q over %d lanes: %v meta-jobs a lane, want even", c.jobs, c.name(0), c.lanes, n)
		}
	}
	for _, job := range []string{"", "repair", "adopt"} {
		if l := homeLane(vfs.OS{}, job, 5); l < 0 || l >= 5 {
			t.Errorf("homeLane(%q, 5) = %d", job, l)
		}
	}
}

// A meta-job's first claim (FirstBatch) takes a fair first share of its
// lane — its cases over twice the lane's meta-jobs as the run was started
// (32 when the index does not say), 1 to 16 — and one case on the main
// chain; the claims after it take what they ask.
func TestFirstBatchIsAFairShareOfTheLane(t *testing.T) {
	ctx := context.Background()
	defer func(on bool) { ticketsOn = on }(ticketsOn)
	ticketsOn = false // a first claim is a ticket's otherwise (TestStartTickets)
	for _, c := range []struct {
		cases, lanes, jobs, want int
	}{
		{3000, 4, 0, 11},   // 750 a lane, 32 meta-jobs a lane: 750/64
		{3000, 4, 128, 11}, // the same, said
		{3000, 4, 16, 16},  // 750/8, at most 16
		{400, 4, 64, 3},    // 100 a lane, 16 meta-jobs a lane: 100/32
		{400, 4, 4096, 1},  // at least 1
	} {
		dir := newFarm(t, c.cases)
		startLaneRunFor(t, dir, 2, c.lanes, c.jobs)
		st := NewStore(dir, filepath.Join(dir, "MISC"))
		st.Job = "17"
		got, err := st.Claim(ctx, 2, FirstBatch)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != c.want {
			t.Errorf("%d cases, %d lanes, %d meta-jobs: the first claim took %d cases, want %d", c.cases, c.lanes, c.jobs, len(got), c.want)
		}
		if next, err := st.Claim(ctx, 2, 3); err != nil || len(next) != 3 {
			t.Errorf("the claim after it took %d cases (%v), want 3", len(next), err)
		}
		st.Close()
	}
	// No lanes: one case.
	dir := newFarm(t, 100)
	st := NewStore(dir, filepath.Join(dir, "MISC"))
	defer st.Close()
	if got, err := st.Claim(ctx, 1, FirstBatch); err != nil || len(got) != 1 {
		t.Errorf("on the main chain the first claim took %d cases (%v), want 1", len(got), err)
	}
}

// The lane index keeps the meta-jobs the run was started for (jobs=N), and
// still reads an index written without it; a bad value is refused.
func TestLaneIndexJobs(t *testing.T) {
	x := &laneIndex{lanes: 4, block: 16, cases: 100, jobs: 130,
		starts: []int64{0, 160, 320, 480, 640, 800, 960}, lines: []int64{0, 16, 32, 48, 64, 80, 96}}
	x.nblocks = 7
	b := x.marshal()
	if !strings.Contains(string(b), " jobs=130\n") {
		t.Fatalf("header %q: no jobs=130", strings.SplitN(string(b), "\n", 2)[0])
	}
	y, err := parseIndex(b, false)
	if err != nil || y.jobs != 130 {
		t.Fatalf("read back: jobs %v, %v", y, err)
	}
	if got := y.firstShare(0); got != 1 { // 32 cases, 33 meta-jobs a lane
		t.Errorf("first share %d, want 1", got)
	}
	old := strings.Replace(string(b), " jobs=130", "", 1)
	if y, err := parseIndex([]byte(old), false); err != nil || y.jobs != 0 {
		t.Errorf("an index without jobs=: %v, %v", y, err)
	}
	for _, bad := range []string{" jobs=x", " jobs="} {
		if _, err := parseIndex([]byte(strings.Replace(string(b), " jobs=130", bad, 1)), false); err == nil {
			t.Errorf("an index with%s read without an error", bad)
		}
	}
}

// TestDamagedLaneIndexIsAnError: a lane index whose header counts are
// damaged (huge, or more lanes than blocks) is an error to read, not an
// allocation that panics or exhausts memory (found in review).
func TestDamagedLaneIndexIsAnError(t *testing.T) {
	x := &laneIndex{lanes: 2, block: 16, cases: 40, nblocks: 3,
		starts: []int64{0, 160, 320}, lines: []int64{0, 16, 32}}
	good := string(x.marshal())
	if _, err := parseIndex([]byte(good), false); err != nil {
		t.Fatalf("the good index: %v", err)
	}
	head := strings.SplitN(good, "\n", 2)[0]
	for _, bad := range []string{
		strings.NewReplacer("blocks=3", "blocks=1000000000000", "cases=40", "cases=1000000000000", "block=16", "block=1").Replace(head),
		strings.Replace(head, "lanes=2", "lanes=1000000000000", 1),
		strings.Replace(head, "lanes=2", "lanes=4", 1),
	} {
		b := []byte(strings.Replace(good, head, bad, 1))
		if _, err := parseIndex(b, false); err == nil {
			t.Errorf("index with header %q read without an error", bad)
		}
	}
}
