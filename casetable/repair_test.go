package casetable

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// An error while listing MISC for the chains to close fails the repair,
// after retrying a transient one: it does not start a new chain beside one
// it could not see. MISC/chain is left as it was.
func TestRepairFailsWhenMISCCannotBeListed(t *testing.T) {
	ctx := context.Background()
	for _, errno := range []syscall.Errno{syscall.EIO, syscall.EACCES} {
		t.Run(errno.Error(), func(t *testing.T) {
			dir := newFarm(t, 10)
			misc := filepath.Join(dir, "MISC")
			if _, err := NewStore(dir, misc).Claim(ctx, 1, 3, nil); err != nil {
				t.Fatal(err)
			}
			chainFile := filepath.Join(misc, "chain")
			os.WriteFile(chainFile, []byte("nonsense\n"), 0o644)
			calls := 0
			readDir = func(name string) ([]os.DirEntry, error) {
				calls++
				return nil, &os.PathError{Op: "readdirent", Path: name, Err: errno}
			}
			defer func() { readDir = os.ReadDir }()
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
			if errno == syscall.EACCES && calls != 1 {
				t.Errorf("a permanent error was retried: %d calls", calls)
			}
			if b, _ := os.ReadFile(chainFile); string(b) != "nonsense\n" {
				t.Errorf("the failed repair changed MISC/chain to %q", b)
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

// Two repairs that read the same unusable state: one replaces the chain,
// the other changes nothing and says which repair holds the right; every
// chain but the new one is closed.
func TestRepairTwoFromOneReadingOneWins(t *testing.T) {
	ctx := context.Background()
	for _, damage := range []string{"chain-garbage", "chain-deleted", "dir-deleted"} {
		t.Run(damage, func(t *testing.T) {
			dir := newFarm(t, 10)
			misc := filepath.Join(dir, "MISC")
			ch, _ := openChain(misc)
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
			cur, _ := openChain(misc)
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
		c := &chain{dir: d, self: newNonce()}
		n, err := c.latest(-1)
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
