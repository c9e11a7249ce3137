package casetable

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/farm-hpc/farm/vfs"
)

// The test binary doubles as the worker processes of the concurrency tests.
func TestMain(m *testing.M) {
	// A claimer stopped inside its commit (the stall tests) holds the
	// others up for voidAfter: 1 s here, for them and their claimers.
	if os.Getenv("FARM_CLAIM_VOID_AFTER") == "" {
		os.Setenv("FARM_CLAIM_VOID_AFTER", "1s")
		voidAfter = time.Second
	}
	switch os.Getenv("CASETABLE_TEST_ROLE") {
	case "claimer":
		os.Exit(claimer())
	}
	os.Exit(m.Run())
}

// claimer claims cases until none is left, writing each ID to its own file.
// CLAIM_BATCH sets how many cases it claims at a time (default: 1 to 8 at
// random); after each claim it works 0.5 ms a case, or CLAIM_WORK.
// CASETABLE_STOP_AT=STAGE:N stops it (SIGSTOP to itself, after
// saying "stopped" on stdout) at the Nth time a commit reaches STAGE
// ("write": state read and the next computed, nothing written; "mark": the
// next generation's slot taken and written, not yet marked; "marked":
// marked, its claim committed and not yet returned).
func claimer() int {
	dir, out := os.Getenv("FARM_DIR"), os.Getenv("OUT")
	st := NewStore(dir, filepath.Join(dir, "MISC"))
	st.Job = testHost() + "/" + strconv.Itoa(os.Getpid())
	if stage, nth, ok := strings.Cut(os.Getenv("CASETABLE_STOP_AT"), ":"); ok {
		n, _ := strconv.Atoi(nth)
		seen := 0
		testHook = func(s, _ string) {
			if s != stage {
				return
			}
			if seen++; seen == n {
				fmt.Println("stopped")
				syscall.Kill(os.Getpid(), syscall.SIGSTOP)
				// The stop reaches this thread a moment later (the
				// signal may be taken by another): wait for it here,
				// not in the next step of the commit.
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	if spec := os.Getenv("CASETABLE_FAULTS"); spec != "" {
		f, err := parseFaults(spec)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fault = f
	}
	fh, err := os.Create(out)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	w := bufio.NewWriter(fh)
	batch, _ := strconv.Atoi(os.Getenv("CLAIM_BATCH"))
	run := 1
	if v, err := strconv.Atoi(os.Getenv("CLAIM_RUN")); err == nil {
		run = v
	}
	for {
		k := batch
		if k == 0 {
			k = 1 + rand.IntN(8)
		}
		cases, err := st.Claim(context.Background(), run, k)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if len(cases) == 0 {
			break
		}
		for _, c := range cases {
			fmt.Fprintln(w, c.ID)
		}
		// Some work per case, as a meta-job has: a claimer that claims
		// again at once always wins against one that must first read
		// what it lost to.
		work := 500 * time.Microsecond * time.Duration(len(cases))
		if d, err := time.ParseDuration(os.Getenv("CLAIM_WORK")); err == nil {
			work = d
		}
		time.Sleep(work)
	}
	w.Flush()
	fh.Close()
	return 0
}

// testHost is $HOST, else the host name (a UTS namespace's own).
func testHost() string {
	if h := os.Getenv("HOST"); h != "" {
		return h
	}
	h, _ := os.Hostname()
	return h
}

// newFarm makes a farm dir with a numbered table of n cases and run 1 set up.
func newFarm(t testing.TB, n int) (dir string) {
	t.Helper()
	return newFarmAt(t, t.TempDir(), n)
}

// newFarmAt makes the farm of newFarm in the existing directory dir.
func newFarmAt(t testing.TB, dir string, n int) string {
	t.Helper()
	os.Mkdir(filepath.Join(dir, "MISC"), 0o755)
	fh, err := os.Create(filepath.Join(dir, "table.dat"))
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriterSize(fh, 1<<20)
	for i := 1; i <= n; i++ {
		if i%100 == 50 {
			w.WriteString("# a comment line\n\n")
		}
		fmt.Fprintf(w, "%d echo case %d\n", i, i)
	}
	w.Flush()
	// Flush the table to disk now, so that writeback of a large table does
	// not slow down the claims a benchmark measures.
	fh.Sync()
	fh.Close()
	startLaneRun(t, dir, 1, 1)
	return dir
}

// runAll starts every command and waits for all of them.
func runAll(t *testing.T, cmds []*exec.Cmd) {
	t.Helper()
	for _, c := range cmds {
		c.Stderr = os.Stderr
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("%v: %v", c.Args, err)
		}
	}
}

// checkClaimedOnce reads the IDs the claimers wrote to outs and checks that
// each of cases 1..n was claimed exactly once. It returns which outs claimed
// anything.
func checkClaimedOnce(t *testing.T, n int, outs []string) (busy []bool) {
	t.Helper()
	seen := make([]int, n+1)
	for _, out := range outs {
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Fields(string(b))
		busy = append(busy, len(lines) > 0)
		for _, l := range lines {
			id, _ := strconv.Atoi(l)
			seen[id]++
		}
	}
	for id := 1; id <= n; id++ {
		if seen[id] != 1 {
			t.Errorf("case %d claimed %d times", id, seen[id])
		}
	}
	return busy
}

func TestClaimEightProcessesNoDuplicatesNoGaps(t *testing.T) {
	const n, procs = 5000, 8
	dir := newFarm(t, n)
	var cmds []*exec.Cmd
	var outs []string
	for i := 0; i < procs; i++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		out := fmt.Sprintf("%s/out.%d", dir, i)
		// Two simulated hosts: the cross-host farm lock is exercised too,
		// not just the per-host lock.
		cmd.Env = append(os.Environ(), "CASETABLE_TEST_ROLE=claimer", "FARM_DIR="+dir,
			fmt.Sprintf("HOST=host%d", i%2), "OUT="+out)
		cmds = append(cmds, cmd)
		outs = append(outs, out)
	}
	runAll(t, cmds)
	busy := 0
	for _, b := range checkClaimedOnce(t, n, outs) {
		if b {
			busy++
		}
	}
	if busy < 2 {
		t.Errorf("only %d of %d processes claimed anything: no real concurrency", busy, procs)
	}
}

// stalledClaimer starts a claimer that stops itself at stage (see claimer)
// after nth commits, through start (a command maker: this host or another),
// and returns it once it has stopped.
func stalledClaimer(t *testing.T, dir, out, stage string, nth int, start func(script string, env ...string) *exec.Cmd) *exec.Cmd {
	t.Helper()
	cmd := start("exec "+os.Args[0]+" -test.run=^$", "CASETABLE_TEST_ROLE=claimer", "FARM_DIR="+dir, "OUT="+out,
		"CLAIM_BATCH=1", fmt.Sprintf("CASETABLE_STOP_AT=%s:%d", stage, nth))
	cmd.Stderr = os.Stderr
	pipe, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line := make(chan string, 1)
	go func() { l, _ := bufio.NewReader(pipe).ReadString('\n'); line <- l }()
	select {
	case l := <-line:
		if l != "stopped\n" {
			t.Fatalf("stalled claimer said %q", l)
		}
	case <-time.After(30 * time.Second):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		t.Fatal("the claimer never reached its stop")
	}
	// It stopped itself; make sure the kernel has it stopped.
	for i := 0; i < 100; i++ {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
		if f := strings.Fields(string(b)); len(f) > 2 && f[2] == "T" {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return cmd
}

// stallTrials: a claimer stopped before, inside or right after a commit
// (SIGSTOP), for as long as the others take to claim every case, then
// resumed, must not claim a case twice or move the cursor back: inside, its
// commit fails and it reads on. Meanwhile the state can be read without
// waiting for it. trials per stage: FARM_FAULT_FROZEN_TRIALS (make
// faults), else def. host names the claimer's host in the summary line
// written to $FARM_FAULT_FIGURES (make faults) if set.
func stallTrials(t *testing.T, host string, def, n int, start func(script string, env ...string) *exec.Cmd) {
	trials := def
	if v, err := strconv.Atoi(os.Getenv("FARM_FAULT_FROZEN_TRIALS")); err == nil && v > 0 {
		trials = v
	}
	t0 := time.Now()
	dups, back := map[string]int{}, map[string]int{}
	stages := []string{"write", "mark", "marked"}
	for _, stage := range stages {
		t.Run(stage, func(t *testing.T) {
			for trial := 0; trial < trials; trial++ {
				d, b := stallTrial(t, n, stage, 1+trial%5, start)
				dups[stage] += d
				back[stage] += b
			}
			t.Logf("%d trials, %d with a case claimed twice, %d with the cursor moved back", trials, dups[stage], back[stage])
		})
	}
	if p := os.Getenv("FARM_FAULT_FIGURES"); p != "" {
		line := fmt.Sprintf("frozen-claimer-%s-host trials=%d points=before(write),inside(link),after(linked) claimers=1+3 cases=%d/trial dup-claims=%d cursor-back=%d failed=%t seconds=%.0f",
			host, trials*len(stages), n, dups["write"]+dups["mark"]+dups["marked"], back["write"]+back["mark"]+back["marked"], t.Failed(), time.Since(t0).Seconds())
		if f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644); err == nil {
			fmt.Fprintln(f, line)
			f.Close()
		}
	}
}

// stallTrial is one trial of stallTrials: the claimer stopped at stage
// of its nth commit. It returns 1, 0 whether a case was claimed twice, and
// whether the cursor moved back.
func stallTrial(t *testing.T, n int, stage string, nth int, start func(script string, env ...string) *exec.Cmd) (dup, back int) {
	dir := newFarm(t, n)
	stalled := stalledClaimer(t, dir, dir+"/out.stalled", stage, nth, start)
	var cmds []*exec.Cmd
	outs := []string{dir + "/out.stalled"}
	for i := 0; i < 3; i++ {
		out := fmt.Sprintf("%s/out.%d", dir, i)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "CASETABLE_TEST_ROLE=claimer", "FARM_DIR="+dir, "OUT="+out)
		cmds = append(cmds, cmd)
		outs = append(outs, out)
	}
	runAll(t, cmds)
	// Every case is claimed; the stalled claimer still sits where it
	// stopped. Readers do not wait for it.
	st := NewStore(dir, filepath.Join(dir, "MISC"))
	defer st.Close()
	t0 := time.Now()
	s, err := st.Read(context.Background())
	if d := time.Since(t0); err != nil || d > 2*time.Second {
		t.Fatalf("Read with a claimer stopped in its commit: %v after %s", err, d)
	}
	if s.Claimed != int64(n) && s.Claimed != int64(n-1) {
		t.Errorf("claimed %d of %d before the stalled claimer resumed", s.Claimed, n)
	}
	syscall.Kill(stalled.Process.Pid, syscall.SIGCONT)
	if err := stalled.Wait(); err != nil {
		t.Fatalf("the resumed claimer: %v", err)
	}
	before := t.Failed()
	checkClaimedOnce(t, n, outs)
	if !before && t.Failed() {
		dup = 1
	}
	s2, _ := st.Read(context.Background())
	if s2.Claimed != int64(n) || s2.Gen < s.Gen {
		t.Errorf("after the resumed claimer: claimed %d of %d, generation %d (was %d)", s2.Claimed, n, s2.Gen, s.Gen)
		if s2.Gen < s.Gen || s2.Claimed < s.Claimed {
			back = 1
		}
	}
	return dup, back
}

func TestStalledClaimerCannotUndoOrDuplicate(t *testing.T) {
	stallTrials(t, "same", 20, 200, func(script string, env ...string) *exec.Cmd {
		cmd := exec.Command("sh", "-c", script)
		cmd.Env = append(os.Environ(), env...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		return cmd
	})
}

// TestStalledClaimerBehindBuriedGenerations: while it is stopped, so many
// commits happen that the generation it read is buried: it must find its
// way to the newest, still claiming nothing twice.
func TestStalledClaimerBehindBuriedGenerations(t *testing.T) {
	const n = 3 * buryAfter
	dir := newFarm(t, n)
	stalled := stalledClaimer(t, dir, dir+"/out.stalled", "mark", 1, func(script string, env ...string) *exec.Cmd {
		cmd := exec.Command("sh", "-c", script)
		cmd.Env = append(os.Environ(), env...)
		return cmd
	})
	var cmds []*exec.Cmd
	outs := []string{dir + "/out.stalled"}
	for i := 0; i < 2; i++ {
		out := fmt.Sprintf("%s/out.%d", dir, i)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "CASETABLE_TEST_ROLE=claimer", "FARM_DIR="+dir, "OUT="+out, "CLAIM_BATCH=1")
		cmds = append(cmds, cmd)
		outs = append(outs, out)
	}
	runAll(t, cmds)
	syscall.Kill(stalled.Process.Pid, syscall.SIGCONT)
	if err := stalled.Wait(); err != nil {
		t.Fatalf("the resumed claimer: %v", err)
	}
	checkClaimedOnce(t, n, outs)
	// The early generations are buried: one inode (the tomb) between them.
	ch := laneChain(t, dir, 0)
	if _, err := ch.read(5); err != errBuried {
		t.Errorf("generation 5 of %d: %v, want it buried", n, err)
	}
}

func TestClaimSkipsToNextRunAndEnds(t *testing.T) {
	dir := newFarm(t, 3)
	st := NewStore(dir, filepath.Join(dir, "MISC"))
	defer st.Close()
	ctx := context.Background()
	var ids []int64
	for {
		cases, err := st.Claim(ctx, 1, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(cases) == 0 {
			break
		}
		for _, c := range cases {
			ids = append(ids, c.ID)
		}
	}
	if fmt.Sprint(ids) != "[1 2 3]" {
		t.Errorf("claimed %v", ids)
	}
	// A meta-job of an old run gets nothing once a new run started.
	startLaneRun(t, dir, 2, 1)
	if cases, err := st.Claim(ctx, 1, 1); len(cases) > 0 || err != nil {
		t.Errorf("old run claimed: %v err=%v", cases, err)
	}
	if cases, _ := st.Claim(ctx, 2, 1); len(cases) != 1 || cases[0].ID != 1 {
		t.Errorf("new run claimed %v", cases)
	}
	s, _ := NewStore(dir, filepath.Join(dir, "MISC")).Read(ctx)
	if s.Claimed != 1 || s.Run != 2 {
		t.Errorf("state %+v", s)
	}
}

func TestDamagedStateIsReportedAndRepaired(t *testing.T) {
	ctx := context.Background()
	for _, damage := range []string{"garbage", "empty", "chain-deleted", "chain-garbage", "dir-deleted"} {
		t.Run(damage, func(t *testing.T) {
			dir := newFarm(t, 10)
			misc := filepath.Join(dir, "MISC")
			st := NewStore(dir, misc)
			if _, err := st.Claim(ctx, 1, 3); err != nil {
				t.Fatal(err)
			}
			ch, _, _, _ := openChain(vfs.OS{}, misc)
			n, _ := ch.latestNear(-1, 0)
			switch damage {
			case "garbage":
				os.WriteFile(ch.segPath(n, genName(n)), []byte("\x00\x01garbage"), 0o644)
			case "empty":
				os.WriteFile(ch.segPath(n, genName(n)), nil, 0o644)
			case "chain-deleted":
				os.Remove(filepath.Join(misc, "chain"))
			case "chain-garbage":
				os.WriteFile(filepath.Join(misc, "chain"), []byte("nonsense\n"), 0o644)
			case "dir-deleted":
				os.RemoveAll(ch.dir)
			}
			_, err := NewStore(dir, misc).Read(ctx)
			var de *DamageError
			if damage == "chain-deleted" {
				if !errors.Is(err, ErrNoState) {
					t.Errorf("read: %v, want ErrNoState", err)
				}
			} else if !errors.As(err, &de) {
				t.Errorf("read: %v, want a DamageError", err)
			}
			// The old store, which knows the chain, cannot go on either
			// once a repair made a new one (or its chain is damaged).
			rep := NewStore(dir, misc)
			if err := rep.Repair(ctx, State{Run: 1, Table: "table.dat", Cases: 10}); err != nil {
				t.Fatalf("repair: %v", err)
			}
			s, err := NewStore(dir, misc).Read(ctx)
			if err != nil || s.Run != 1 || s.Claimed != 10 || len(s.Sets) != 0 {
				t.Fatalf("after repair: %+v %v; want run 1 closed", s, err)
			}
			cases, err := st.Claim(ctx, 1, 20)
			if err != nil {
				t.Fatalf("claim after repair: %v", err)
			}
			if len(cases) != 0 {
				t.Errorf("claim after repair got %v, want none (the repair closed the run)", cases)
			}
			if cases, err := NewStore(dir, misc).Claim(ctx, 1, 20); err != nil || len(cases) != 0 {
				t.Errorf("a new store's claim after repair: %v, %v; want none", cases, err)
			}
		})
	}
}

func benchmarkClaim(b *testing.B, n int) {
	dir := newFarm(b, n)
	st := NewStore(dir, filepath.Join(dir, "MISC"))
	defer st.Close()
	ctx := context.Background()
	// Start the lane's cursor deep in the table: the cost must not
	// depend on it.
	if _, err := st.Claim(ctx, 1, 1); err != nil {
		b.Fatal(err)
	}
	ls := st.laneStore()
	ls.update(ctx, func(s *State) error {
		b, _ := os.ReadFile(filepath.Join(dir, "table.dat"))
		mid := len(b) / 2
		s.Offset = int64(mid + bytes.IndexByte(b[mid:], '\n') + 1)
		return nil
	}, new(commitInfo))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i > 0 && i%(n/4) == 0 {
			b.StopTimer()
			ls.update(ctx, func(s *State) error { s.Offset = 0; return nil }, new(commitInfo))
			b.StartTimer()
		}
		if cases, err := st.Claim(ctx, 1, 1); err != nil || len(cases) != 1 {
			b.Fatalf("claim %d: %v err=%v", i, cases, err)
		}
	}
}

func BenchmarkClaim1e3(b *testing.B) { benchmarkClaim(b, 1000) }
func BenchmarkClaim1e7(b *testing.B) { benchmarkClaim(b, 10_000_000) }

// laneChain opens the chain of lane l of the current run's first set.
func laneChain(t testing.TB, dir string, l int) *chain {
	t.Helper()
	misc := filepath.Join(dir, "MISC")
	s := NewStore(dir, misc)
	defer s.Close()
	if err := s.refresh(); err != nil || len(s.cur.Sets) == 0 {
		t.Fatalf("the run record: %+v, %v", s.cur, err)
	}
	c := newChain(vfs.OS{}, filepath.Join(misc, s.cur.Sets[0].Dir, strconv.Itoa(l)))
	t.Cleanup(c.close)
	return c
}
