package casetable

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as the worker processes of the concurrency tests.
func TestMain(m *testing.M) {
	switch os.Getenv("CASETABLE_TEST_ROLE") {
	case "claimer":
		os.Exit(claimer())
	case "holder":
		os.Exit(holder())
	}
	os.Exit(m.Run())
}

// claimer claims cases until none is left, writing each ID to its own file.
func claimer() int {
	dir, host, out := os.Getenv("FARM_DIR"), testHost(), os.Getenv("OUT")
	st, err := NewStore(dir, filepath.Join(dir, "MISC"), host)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if d, err := time.ParseDuration(os.Getenv("CASETABLE_STALE")); err == nil {
		st.Lock.StaleAfter = d
	}
	fh, err := os.Create(out)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	w := bufio.NewWriter(fh)
	for {
		c, ok, err := st.Claim(context.Background(), 1, nil)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if !ok {
			break
		}
		fmt.Fprintln(w, c.ID)
	}
	w.Flush()
	fh.Close()
	return 0
}

// holder takes the lock, says so, and waits to be killed.
func holder() int {
	dir := os.Getenv("FARM_DIR")
	l, err := NewLock(filepath.Join(dir, "MISC", "lock"), testHost())
	if err != nil {
		return 1
	}
	if err := l.Lock(context.Background()); err != nil {
		return 1
	}
	fmt.Println("locked")
	time.Sleep(time.Hour)
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
	st, err := NewStore(dir, filepath.Join(dir, "MISC"), "testhost")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Update(context.Background(), func(s *State) error {
		s.Run, s.Table = 1, "table.dat"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
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

func TestForeignHostLockIsJudgedByAgeOnly(t *testing.T) {
	dir := newFarm(t, 1)
	path := filepath.Join(dir, "MISC", "lock")
	// A lock from another host whose PID is not alive here: a PID check
	// would wrongly call it stale. It must be honoured until it has stayed
	// unchanged for StaleAfter.
	if err := os.WriteFile(path, []byte("otherhost 999999999 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, _ := NewLock(path, "thishost")
	l.StaleAfter = 700 * time.Millisecond
	defer l.Close()
	start := time.Now()
	if err := l.Lock(context.Background()); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited < l.StaleAfter {
		t.Errorf("a foreign lock was broken after %s, before StaleAfter %s", waited, l.StaleAfter)
	}
	l.Unlock()

	// A foreign lock that keeps changing (a live host claiming) is never broken.
	os.WriteFile(path, []byte("otherhost 42 start\n"), 0o644)
	stop := make(chan struct{})
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				os.Remove(path)
				return
			default:
			}
			os.WriteFile(path+".x", []byte(fmt.Sprintf("otherhost 42 %d\n", i)), 0o644)
			os.Rename(path+".x", path)
			time.Sleep(100 * time.Millisecond)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := l.Lock(ctx)
	close(stop)
	if err == nil {
		t.Errorf("took a lock that another host kept renewing")
	}
}

func TestKilledHolderOnThisHostIsRecoveredAtOnce(t *testing.T) {
	dir := newFarm(t, 1)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "CASETABLE_TEST_ROLE=holder", "FARM_DIR="+dir, "HOST=thishost")
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "locked\n" {
		t.Fatalf("holder said %q", line)
	}
	l, _ := NewLock(filepath.Join(dir, "MISC", "lock"), "thishost")
	l.StaleAfter = time.Hour // recovery must not come from age
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	if err := l.Lock(ctx); err == nil {
		t.Fatal("took the lock while its holder lives")
	}
	cancel()
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := l.Lock(ctx); err != nil {
		t.Fatalf("lock of a killed holder not recovered: %v", err)
	}
	t.Logf("recovered in %s", time.Since(start))
	if err := l.Unlock(); err != nil {
		t.Error(err)
	}
}

func TestClaimSkipsToNextRunAndEnds(t *testing.T) {
	dir := newFarm(t, 3)
	st, _ := NewStore(dir, filepath.Join(dir, "MISC"), "h")
	defer st.Close()
	ctx := context.Background()
	var ids []int64
	for {
		c, ok, err := st.Claim(ctx, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		ids = append(ids, c.ID)
	}
	if fmt.Sprint(ids) != "[1 2 3]" {
		t.Errorf("claimed %v", ids)
	}
	// A meta-job of an old run gets nothing once a new run started.
	st.Update(ctx, func(s *State) error { s.Run, s.Offset, s.Claimed = 2, 0, 0; return nil })
	if _, ok, err := st.Claim(ctx, 1, nil); ok || err != nil {
		t.Errorf("old run claimed: ok=%v err=%v", ok, err)
	}
	if c, ok, _ := st.Claim(ctx, 2, nil); !ok || c.ID != 1 {
		t.Errorf("new run claimed %v %v", c, ok)
	}
	s, _ := st.Read(ctx)
	if s.Claimed != 1 || s.Run != 2 {
		t.Errorf("state %+v", s)
	}
}

func benchmarkClaim(b *testing.B, n int) {
	dir := newFarm(b, n)
	st, _ := NewStore(dir, filepath.Join(dir, "MISC"), "h")
	defer st.Close()
	ctx := context.Background()
	// Start the cursor deep in the table: the cost must not depend on it.
	st.Update(ctx, func(s *State) error {
		b, _ := os.ReadFile(filepath.Join(dir, "table.dat"))
		mid := len(b) / 2
		s.Offset = int64(mid + bytes.IndexByte(b[mid:], '\n') + 1)
		return nil
	})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i > 0 && i%(n/4) == 0 {
			b.StopTimer()
			st.Update(ctx, func(s *State) error { s.Offset = 0; return nil })
			b.StartTimer()
		}
		if _, ok, err := st.Claim(ctx, 1, nil); err != nil || !ok {
			b.Fatalf("claim %d: ok=%v err=%v", i, ok, err)
		}
	}
}

func BenchmarkClaim1e3(b *testing.B) { benchmarkClaim(b, 1000) }
func BenchmarkClaim1e7(b *testing.B) { benchmarkClaim(b, 10_000_000) }
