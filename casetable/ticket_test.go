package casetable

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// TestStartTickets: in a run started for 64 meta-jobs, a meta-job's first
// claim is its ticket's case (case J+1, J its job number modulo the
// tickets), in 11 calls with the start hint; a job whose ticket another has
// claims in the lanes; a ticket nobody took is swept once the lanes are
// used up; every case is claimed once, and Read counts them all.
func TestStartTickets(t *testing.T) {
	ctx := context.Background()
	dir, hint := hintFarm(t, 200, 64)
	ids, _, calls := firstClaim(t, dir, "job.5", hint, 1)
	if !slices.Equal(ids, []int64{6}) || calls > 11 {
		t.Fatalf("job 5's first claim: cases %v in %d calls, want [6] (its ticket's) in 12 at most", ids, calls)
	}
	t.Logf("a ticket's first claim: %d calls", calls)
	ids, _, _ = firstClaim(t, dir, "other.69", hint, 1) // 69 mod 64: job 5's ticket, taken
	if len(ids) == 0 || ids[0] <= 64 {
		t.Fatalf("a job whose ticket is taken claimed %v, want a lane's cases (after the 64 tickets')", ids)
	}
	seen := map[int64]int{6: 1}
	for _, id := range ids {
		seen[id]++
	}
	var jobs []string
	for j := range 20 { // 20 meta-jobs, each claiming till none is left
		jobs = append(jobs, "job."+strconv.Itoa(10+j))
	}
	claimAllOnce(t, dir, jobs, 7, 200, seen)
	s := NewStore(dir, filepath.Join(dir, "MISC"))
	defer s.Close()
	if st, err := s.Read(ctx); err != nil || st.Claimed != 200 {
		t.Fatalf("Read: %d claimed (%v), want 200", st.Claimed, err)
	}
}

// TestStartTicketsClosedByTheNextRun: a run's start voids the last run's
// tickets not taken, so that a meta-job of the last run started late (or
// stalled before its first claim) claims nothing of it; Read counts the
// closed run's cases whole.
func TestStartTicketsClosedByTheNextRun(t *testing.T) {
	ctx := context.Background()
	dir, hint := hintFarm(t, 200, 64)
	if ids, _, _ := firstClaim(t, dir, "job.3", hint, 1); !slices.Equal(ids, []int64{4}) {
		t.Fatalf("job 3 claimed %v, want its ticket's case 4", ids)
	}
	late := NewStore(dir, filepath.Join(dir, "MISC"))
	defer late.Close()
	late.Job = "job.9"
	if err := late.findSets(ctx, 1, false); err != nil { // its sets opened, then it stalls
		t.Fatal(err)
	}
	s := NewStore(dir, filepath.Join(dir, "MISC"))
	defer s.Close()
	cur, err := s.Read(ctx)
	if err != nil || cur.Claimed != 1 {
		t.Fatalf("Read: %d claimed (%v), want 1", cur.Claimed, err)
	}
	if err := s.StartRun(ctx, RunSpec{Base: cur.Gen, Chain: cur.Chain, Run: 2, Table: "table.dat", Cases: 200, MaxID: 200, Jobs: 64}); err != nil {
		t.Fatal(err)
	}
	if cases, err := late.Claim(ctx, 1, FirstBatch); err != nil || len(cases) != 0 {
		t.Fatalf("a run 1 meta-job after run 2 started claimed %v (%v), want none", caseIDs(cases), err)
	}
	tdir := filepath.Join(dir, "MISC", cur.Sets[0].Dir, ticketDir(64))
	for j := range 64 {
		kind, err := ticketMark(s.fs, filepath.Join(tdir, "c."+strconv.Itoa(j)))
		if want := map[bool]int{true: ticketClaimed, false: ticketVoid}[j == 3]; err != nil || kind != want {
			t.Errorf("ticket %d: mark %d (%v), want %d", j, kind, err, want)
		}
	}
}

// TestStartTicketNotedAndWon: a ticket's claim is noted before its mark;
// ClaimWon says it won. A slot's owner stalled before its mark is decided
// lost by ClaimWon, which voids the ticket: the owner, resumed, claims
// nothing, and the sweep hands the case out once.
func TestStartTicketNotedAndWon(t *testing.T) {
	ctx := context.Background()
	dir, hint := hintFarm(t, 200, 64)
	var tokens []string
	s := NewStore(dir, filepath.Join(dir, "MISC"))
	defer s.Close()
	s.Job, s.Note = "job.7", func(token string, ids []int64, lost bool) error {
		if !lost {
			tokens = append(tokens, token)
		}
		return nil
	}
	s.UseHint(hint)
	cases, err := s.Claim(ctx, 1, FirstBatch)
	if err != nil || !slices.Equal(caseIDs(cases), []int64{8}) || len(tokens) != 1 {
		t.Fatalf("claimed %v (%v), noted %q; want case 8, noted once", caseIDs(cases), err, tokens)
	}
	if won, err := s.ClaimWon(ctx, tokens[0]); !won || err != nil {
		t.Fatalf("ClaimWon(%s) = %v, %v; want true", tokens[0], won, err)
	}
	// Job 12's process took its slot and stalled; a rescuer decides its noted claim.
	tdir := filepath.Join(dir, "MISC", s.Last().Sets[0].Dir, ticketDir(64))
	if err := unix.Mknod(filepath.Join(tdir, "s.12"), unix.S_IFREG|0o644, 0); err != nil {
		t.Fatal(err)
	}
	token := filepath.Join(s.Last().Sets[0].Dir, ticketDir(64)) + "@12#ticket"
	if won, err := s.ClaimWon(ctx, token); won || err != nil {
		t.Fatalf("ClaimWon of a slot with no mark = %v, %v; want false", won, err)
	}
	if kind, err := makeMark(s.fs, filepath.Join(tdir, "c.12"), unix.S_IFREG); kind != ticketVoid || err != nil {
		t.Fatalf("the stalled owner's mark: kind %d (%v), want void", kind, err)
	}
	if _, err := os.Lstat(filepath.Join(tdir, "c.12")); err != nil {
		t.Fatal(err)
	}
	// Jobs 100 and 101 (tickets 36, 37) claim the rest, the sweep too:
	// the first whose home lane ran out swept early (its "sweeper" mark).
	claimAllOnce(t, dir, []string{"a.100", "a.101"}, 16, 200, map[int64]int{8: 1})
	if _, err := os.Lstat(filepath.Join(filepath.Dir(tdir), "sweeper")); err != nil {
		t.Errorf("no early sweeper: %v", err)
	}
}

// claimAllOnce has stores of jobs, one after the other, claim most cases at
// a time in run 1 of dir until none is left, and fails t unless, with the
// claims seen before, each of cases 1..n was claimed once.
func claimAllOnce(t *testing.T, dir string, jobs []string, most int, n int64, seen map[int64]int) {
	t.Helper()
	for _, job := range jobs {
		c := NewStore(dir, filepath.Join(dir, "MISC"))
		c.Job = job
		for {
			cases, err := c.Claim(context.Background(), 1, most)
			if err != nil {
				t.Fatal(err)
			}
			if len(cases) == 0 {
				break
			}
			for _, id := range caseIDs(cases) {
				seen[id]++
			}
		}
		c.Close()
	}
	for id := int64(1); id <= n; id++ {
		if seen[id] != 1 {
			t.Errorf("case %d claimed %d times", id, seen[id])
		}
	}
}
