package casetable

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
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

// The test binary is also the repair processes of
// TestRepairProcessesRaceOneLiveChain (before TestMain runs).
func init() {
	if os.Getenv("CASETABLE_TEST_ROLE") == "repairer" {
		os.Exit(repairer())
	}
}

// repairer is one repair process: it opens the barrier (a FIFO, $BARRIER),
// says "ready", waits until the barrier gives EOF, and then does what farm repair
// does: reads the state and, unless it reads well, rebuilds it as run 1
// with nothing claimed of $CASES cases, deciding from that reading. It
// prints "rebuilt", "nothing" (the state read well) or "lost: ERROR".
func repairer() int {
	dir := os.Getenv("FARM_DIR")
	n, _ := strconv.ParseInt(os.Getenv("CASES"), 10, 64)
	// Opened before "ready": the test holds the FIFO's writer open until
	// both are ready, so the open returns at once and the barrier is the
	// EOF (an open after the writer closed would block for ever).
	fh, err := os.Open(os.Getenv("BARRIER"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("ready")
	io.Copy(io.Discard, fh)
	fh.Close()
	ctx := context.Background()
	st := NewStore(dir, filepath.Join(dir, "MISC"))
	st.Job = "repair"
	rd, err := st.Inspect(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if rd.Err == nil {
		fmt.Println("nothing")
		return 0
	}
	err = st.RepairFrom(ctx, rd, State{Run: 1, Table: "table.dat", Cases: n})
	var race *RepairRaceError
	switch {
	case err == nil:
		fmt.Println("rebuilt")
	case errors.As(err, &race):
		fmt.Println("lost: " + err.Error())
	default:
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// An error while listing MISC for the chains to close fails the repair,
// after retrying a transient one: it does not start a new chain beside one
// it could not see. MISC/chain is left as it was, and the next repair can
// do the work.
func TestRepairFailsWhenMISCCannotBeListed(t *testing.T) {
	ctx := context.Background()
	for _, errno := range []syscall.Errno{syscall.EIO, syscall.EACCES, syscall.ENOTDIR} {
		t.Run(errno.Error(), func(t *testing.T) {
			dir := newFarm(t, 10)
			misc := filepath.Join(dir, "MISC")
			if _, err := NewStore(dir, misc).Claim(ctx, 1, 3); err != nil {
				t.Fatal(err)
			}
			chainFile := filepath.Join(misc, "chain")
			os.WriteFile(chainFile, []byte("nonsense\n"), 0o644)
			calls := 0
			listFault = func(path string) error {
				if path != misc {
					return nil
				}
				calls++
				return errno
			}
			defer func() { listFault = nil }()
			var log strings.Builder
			rep := NewStore(dir, misc)
			rep.Retry, rep.Log = 300*time.Millisecond, &log
			err := rep.Repair(ctx, State{Run: 1, Table: "table.dat", Offset: 0, Cases: 10, Claimed: 10})
			if err == nil || !errors.Is(err, errno) {
				t.Fatalf("repair with MISC unlistable (%v): %v; want that error", errno, err)
			}
			if errno == syscall.EIO && (calls < 2 || !strings.Contains(log.String(), "retrying")) {
				t.Errorf("a transient error was not retried: %d calls, log %q", calls, log.String())
			}
			if errno != syscall.EIO && calls != 1 {
				t.Errorf("a permanent error was retried: %d calls", calls)
			}
			if b, _ := os.ReadFile(chainFile); string(b) != "nonsense\n" {
				t.Errorf("the failed repair changed MISC/chain to %q", b)
			}
			// It gave its right up: once MISC can be listed, a repair
			// works, and closes the chain the failed one made.
			listFault = nil
			if err := NewStore(dir, misc).Repair(ctx, State{Run: 1, Table: "table.dat", Offset: 0, Cases: 10, Claimed: 10}); err != nil {
				t.Fatalf("repair after the failed one: %v", err)
			}
			cur, _, _, _ := openChain(vfs.OS{}, misc)
			if live := liveChains(t, misc); len(live) != 1 || cur == nil || live[0] != cur.dir {
				t.Errorf("after the second repair, live chains %v; want only MISC/chain's", live)
			}
		})
	}
}

// A repair commits only on the generation it decided from: a commit by
// anyone else after its reading (a resubmit starting a run, a meta-job,
// another repair) makes it change nothing.
func TestRepairCommitsOnlyOnTheGenerationItRead(t *testing.T) {
	ctx := context.Background()
	dir := newFarm(t, 10)
	misc := filepath.Join(dir, "MISC")
	rd, err := NewStore(dir, misc).Inspect(ctx)
	if err != nil || rd.Err != nil {
		t.Fatalf("inspect: %v %v", err, rd.Err)
	}
	other := NewStore(dir, misc)
	if err := other.Update(ctx, func(s *State) error { s.Run, s.Claimed = 2, 0; return nil }); err != nil {
		t.Fatal(err)
	}
	err = NewStore(dir, misc).RepairFrom(ctx, rd, State{Run: 1, Table: "table.dat", Cases: 10, Claimed: 10})
	var race *RepairRaceError
	if !errors.As(err, &race) {
		t.Fatalf("repair after the state moved on: %v; want a RepairRaceError", err)
	}
	if s, err := NewStore(dir, misc).Read(ctx); err != nil || s.Run != 2 {
		t.Fatalf("after the refused repair: %+v %v; want run 2 as the other commit left it", s, err)
	}
}

// A repair that replaces a damaged MISC/chain closes a run that a store
// holding the old chain started after the repair's reading (a resubmit
// since before the damage), and its state names that run, with its IDs:
// the run is never moved back (the simulator's seed 348156). A second
// repair, from the chain closed already, reads the same from the closing.
func TestRepairClosesARunStartedOnTheOldChain(t *testing.T) {
	ctx := context.Background()
	dir := newFarm(t, 10)
	misc := filepath.Join(dir, "MISC")
	held := NewStore(dir, misc)
	defer held.Close()
	if _, err := held.Read(ctx); err != nil {
		t.Fatal(err)
	}
	chainFile := filepath.Join(misc, "chain")
	os.WriteFile(chainFile, []byte("nonsense\n"), 0o644)
	rep := NewStore(dir, misc)
	rd, err := rep.Inspect(ctx)
	if err != nil || rd.Err == nil {
		t.Fatalf("inspect of a damaged MISC/chain: %v %v; want damage", err, rd.Err)
	}
	if err := held.Update(ctx, func(s *State) error { s.Run, s.Claimed, s.MaxID = 2, 0, 12; return nil }); err != nil {
		t.Fatalf("a commit on the held chain: %v", err)
	}
	old := held.chainDir()
	if err := rep.RepairFrom(ctx, rd, State{Run: 1, Table: "table.dat", Cases: 10, Claimed: 10, MaxID: 10}); err != nil {
		t.Fatal(err)
	}
	s, err := NewStore(dir, misc).Read(ctx)
	if err != nil || s.Run != 2 || s.MaxID != 12 || s.Claimed != s.Cases {
		t.Fatalf("after the repair: %+v %v; want run 2 closed, MaxID 12", s, err)
	}
	if err := held.Update(ctx, func(s *State) error { s.Claimed++; return nil }); err == nil && held.Last().Chain != s.Chain {
		t.Errorf("the held store committed on the closed chain")
	}
	// The closing says the run it closed, for a repair that finds the
	// chain closed already (its closer died before naming its new one).
	closings, _ := filepath.Glob(filepath.Join(old, "*", "g.*"))
	found := false
	for _, g := range closings {
		b, _ := os.ReadFile(g)
		found = found || strings.Contains(string(b), " run=2 maxid=12 nonce=") && strings.HasSuffix(string(b), " closed\n")
	}
	if !found {
		t.Errorf("no closing generation in %v says run 2 and MaxID 12", closings)
	}
	c, _, _, err := openChain(vfs.OS{}, misc)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	os.WriteFile(chainFile, []byte("nonsense again\n"), 0o644)
	if err := NewStore(dir, misc).Repair(ctx, State{Run: 1, Table: "table.dat", Cases: 10, Claimed: 10, MaxID: 10}); err != nil {
		t.Fatal(err)
	}
	if s, err := NewStore(dir, misc).Read(ctx); err != nil || s.Run != 2 || s.MaxID != 12 {
		t.Fatalf("after the second repair: %+v %v; want run 2, MaxID 12", s, err)
	}
}

// Two repairs that read the same unusable state: one replaces the chain,
// the other changes nothing and says which repair holds the right; every
// chain but the new one is closed.
func TestRepairTwoFromOneReadingOneWins(t *testing.T) {
	ctx := context.Background()
	for _, damage := range []string{"chain-garbage", "chain-deleted", "dir-deleted"} {
		t.Run(damage, func(t *testing.T) {
			dir := newFarm(t, 10)
			misc := filepath.Join(dir, "MISC")
			ch, _, _, _ := openChain(vfs.OS{}, misc)
			switch damage {
			case "chain-garbage":
				os.WriteFile(filepath.Join(misc, "chain"), []byte("nonsense\n"), 0o644)
			case "chain-deleted":
				os.Remove(filepath.Join(misc, "chain"))
			case "dir-deleted":
				os.RemoveAll(ch.dir)
			}
			a, b := NewStore(dir, misc), NewStore(dir, misc)
			ra, err := a.Inspect(ctx)
			if err != nil {
				t.Fatal(err)
			}
			rb, err := b.Inspect(ctx)
			if err != nil {
				t.Fatal(err)
			}
			st := State{Run: 1, Table: "table.dat", Cases: 10, Claimed: 10}
			if err := a.RepairFrom(ctx, ra, st); err != nil {
				t.Fatalf("first repair: %v", err)
			}
			err = b.RepairFrom(ctx, rb, st)
			var race *RepairRaceError
			if !errors.As(err, &race) {
				t.Fatalf("second repair from the same reading: %v; want a RepairRaceError", err)
			}
			live := liveChains(t, misc)
			cur, _, _, _ := openChain(vfs.OS{}, misc)
			if len(live) != 1 || live[0] != cur.dir {
				t.Fatalf("live chains %v, MISC/chain names %s; want only that one", live, cur.dir)
			}
			if s, err := NewStore(dir, misc).Read(ctx); err != nil || s.Run != 1 || s.Claimed != 10 {
				t.Fatalf("after the repairs: %+v %v", s, err)
			}
		})
	}
}

// liveChains returns the chain directories in misc whose newest generation
// does not close them.
func liveChains(t *testing.T, misc string) []string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(misc, "claims.*"))
	if err != nil {
		t.Fatal(err)
	}
	var live []string
	for _, d := range dirs {
		c := newChain(vfs.OS{}, d)
		n, err := c.latestNear(-1, 0)
		if err != nil {
			t.Fatal(err)
		}
		b, err := c.read(n)
		c.close()
		if n < 0 || err != nil || !strings.HasSuffix(string(b), " closed\n") {
			live = append(live, d)
		}
	}
	return live
}

// damageChain damages the claim state of misc in the way damage names:
// chain-garbage, chain-deleted, dir-deleted or generation-garbage.
func damageChain(t *testing.T, misc, damage string) {
	t.Helper()
	ch, _, _, err := openChain(vfs.OS{}, misc)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.close()
	last, _ := ch.latestNear(-1, 0)
	switch damage {
	case "chain-garbage":
		os.WriteFile(filepath.Join(misc, "chain"), []byte("nonsense\n"), 0o644)
	case "chain-deleted":
		os.Remove(filepath.Join(misc, "chain"))
	case "dir-deleted":
		os.RemoveAll(ch.dir)
	case "generation-garbage":
		os.WriteFile(ch.segPath(last, genName(last)), []byte("x\n"), 0o644)
	}
}

// raceRepairers runs two repairer processes (CASETABLE_TEST_ROLE=repairer)
// on the farm dir of n cases, released at once from a FIFO barrier once
// both are ready, and returns what each wrote.
func raceRepairers(t *testing.T, trial int, dir string, n int) []string {
	t.Helper()
	fifo := filepath.Join(t.TempDir(), "go.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	hold, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var outs []*strings.Builder
	var cmds []*exec.Cmd
	var dones []chan struct{}
	for i := 0; i < 2; i++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "CASETABLE_TEST_ROLE=repairer", "FARM_DIR="+dir, "BARRIER="+fifo, fmt.Sprintf("CASES=%d", n))
		cmd.Stderr = os.Stderr
		pipe, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(pipe)
		if l, _ := r.ReadString('\n'); l != "ready\n" {
			t.Fatalf("repairer said %q", l)
		}
		out := &strings.Builder{}
		done := make(chan struct{})
		go func() { io.Copy(out, r); close(done) }()
		outs = append(outs, out)
		cmds = append(cmds, cmd)
		dones = append(dones, done)
	}
	hold.Close() // both have the FIFO open: released together, at its EOF
	said := make([]string, len(cmds))
	for i, cmd := range cmds {
		<-dones[i] // all read before Wait closes the pipe
		if err := cmd.Wait(); err != nil {
			t.Fatalf("trial %d: repairer %d: %v", trial, i, err)
		}
		said[i] = outs[i].String()
	}
	return said
}

// TestRepairProcessesRaceOneLiveChain: a claimer is stopped (SIGSTOP)
// inside a commit on the chain; the state is damaged (four ways); two
// repair processes are released at once from a barrier. Exactly one
// rebuilds the state, the other says it lost (or, if it read after the
// first ended, finds the state well); exactly one chain is live, the one
// MISC/chain names. Then the claimer is resumed: it cannot go on in its
// old chain, so it claims every case of the rebuilt state in the live one.
func TestRepairProcessesRaceOneLiveChain(t *testing.T) {
	const trials, n = 16, 50
	outcomes := map[string]int{}
	for trial := 0; trial < trials; trial++ {
		damage := []string{"chain-garbage", "chain-deleted", "dir-deleted", "generation-garbage"}[trial%4]
		dir := newFarm(t, n)
		misc := filepath.Join(dir, "MISC")
		stalled := stalledClaimer(t, dir, dir+"/out.stalled", "write", 1+trial%3, func(script string, env ...string) *exec.Cmd {
			cmd := exec.Command("sh", "-c", script)
			cmd.Env = append(os.Environ(), env...)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			return cmd
		})
		damageChain(t, misc, damage)
		var what []string
		rebuilt := 0
		for _, out := range raceRepairers(t, trial, dir, n) {
			o := strings.TrimSpace(out)
			switch {
			case o == "rebuilt":
				rebuilt++
			case o == "nothing", strings.HasPrefix(o, "lost: "):
			default:
				t.Errorf("trial %d: a repairer said %q", trial, o)
			}
			if i := strings.Index(o, ":"); i > 0 {
				o = o[:i]
			}
			what = append(what, o)
			outcomes[o]++
		}
		if rebuilt != 1 {
			t.Errorf("trial %d (%s): %d repairs rebuilt the state (%v), want 1", trial, damage, rebuilt, what)
		}
		live := liveChains(t, misc)
		cur, _, _, err := openChain(vfs.OS{}, misc)
		if err != nil || len(live) != 1 || live[0] != cur.dir {
			t.Fatalf("trial %d (%s): live chains %v, MISC/chain names %v (%v); want exactly that one live", trial, damage, live, cur, err)
		}
		syscall.Kill(stalled.Process.Pid, syscall.SIGCONT)
		if err := stalled.Wait(); err != nil {
			t.Fatalf("trial %d (%s): the resumed claimer: %v", trial, damage, err)
		}
		s, err := NewStore(dir, misc).Read(context.Background())
		if err != nil || s.Claimed != n {
			t.Errorf("trial %d (%s): after the resumed claimer, the live chain's state is %+v (%v): want all %d cases claimed in it", trial, damage, s, err, n)
		}
		if live := liveChains(t, misc); len(live) != 1 {
			t.Errorf("trial %d (%s): after the resumed claimer, live chains %v", trial, damage, live)
		}
		t.Logf("trial %d (%s): %v", trial, damage, what)
	}
	t.Logf("outcomes: %v", outcomes)
}
