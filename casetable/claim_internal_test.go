package casetable

import (
	"context"
	"math/bits"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/farm-hpc/farm/vfs"
	"github.com/google/go-cmp/cmp"
)

// The bound of backoff's pause doubles with the attempts lost from the
// unit (at least 1 ms) and never exceeds 10 s, nor overflows, whatever the
// unit (an attempt stopped for hours) and the attempts lost.
func TestBackoffLimit(t *testing.T) {
	for _, c := range []struct {
		lost int
		unit time.Duration
		want time.Duration
	}{
		{1, 0, time.Millisecond},
		{1, 10 * time.Millisecond, 10 * time.Millisecond},
		{2, 10 * time.Millisecond, 20 * time.Millisecond},
		{5, 10 * time.Millisecond, 160 * time.Millisecond},
		{9, 10 * time.Millisecond, 2560 * time.Millisecond},
		{11, 10 * time.Millisecond, 10 * time.Second},
		{0, 3 * time.Millisecond, 3 * time.Millisecond},
		{25, 3 * time.Hour, 10 * time.Second},
		{1 << 30, 1<<63 - 1, 10 * time.Second},
		{64, time.Millisecond, 10 * time.Second},
	} {
		if got := backoffLimit(c.lost, c.unit); got != c.want {
			t.Errorf("backoffLimit(%d, %v) = %v, want %v", c.lost, c.unit, got, c.want)
		}
	}
}

// latestNear finds what latest finds, whatever the guess: right, too
// high, too low, or far off.
func TestLatestNearAnswersAsLatest(t *testing.T) {
	const gens = 40
	ch := chainOf(t, gens)
	want, err := ch.latestNear(-1, 0)
	if err != nil || want != gens-1 {
		t.Fatalf("latest(-1) = %d, %v; want %d", want, err, gens-1)
	}
	for from := int64(0); from < gens; from++ {
		for near := int64(0); near < 90; near++ {
			ch.top = -1
			got, err := ch.latestNear(from, near)
			if err != nil || got != want || ch.top != want {
				t.Fatalf("latestNear(%d, %d) = %d (top %d), %v; want %d", from, near, got, ch.top, err, want)
			}
		}
	}
}

// latestNear's lookups grow with how far its guess is off, not with how far
// the newest is from what the caller knew: 2·log2 of the error and a few
// more, too high or too low (a store's claim after many others' commits).
func TestLatestNearLookupsFollowTheGuess(t *testing.T) {
	const gens, from = 300, 20
	ch := chainOf(t, gens)
	var stats int
	cc := newChain(countingFS{on: func(kind string) func(error) {
		if kind == "stat" {
			stats++
		}
		return nil
	}}, ch.dir)
	t.Cleanup(cc.close)
	want := int64(gens - 1)
	for _, off := range []int64{0, 1, -1, 3, -3, 10, -10, 40, -40} {
		cc.top, stats = -1, 0
		got, err := cc.latestNear(from, want-from+off)
		if err != nil || got != want {
			t.Fatalf("latestNear(%d, guess off by %d) = %d, %v; want %d", from, off, got, err, want)
		}
		e := max(off, -off)
		if most := 2*bits.Len64(uint64(e)) + 3; stats > most {
			t.Errorf("guess off by %d: %d lookups, want at most %d", off, stats, most)
		}
	}
}

// storeOf is a store of a new farm's claim state (closed when the test ends), and its MISC.
func storeOf(t *testing.T) (*Store, string) {
	t.Helper()
	dir := t.TempDir()
	misc := filepath.Join(dir, "MISC")
	if err := os.Mkdir(misc, 0o755); err != nil {
		t.Fatal(err)
	}
	st := NewStore(dir, misc)
	t.Cleanup(func() { st.Close() })
	return st, misc
}

// chainOf commits gens generations in a new farm's chain and returns the
// chain, opened afresh (closed when the test ends).
func chainOf(t *testing.T, gens int) *chain {
	t.Helper()
	st, misc := storeOf(t)
	for i := 0; i < gens; i++ {
		if err := st.Update(context.Background(), func(s *State) error { s.Claimed++; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	ch, _, _, err := openChain(vfs.OS{}, misc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ch.close)
	return ch
}

// TestGenerationRecord: a generation's record, as written (the format of
// claim states on disk; internal/kv writes it), and read back whole.
func TestGenerationRecord(t *testing.T) {
	st := State{Run: 3, Table: "MISC/table.run3.7.ab", Cases: 300, MaxID: 310, Total: 310, Repair: "r1",
		Sets: []Set{{Dir: "lanes.3.beef", Lanes: 1, Cases: 10, Table: "MISC/table.run3.add.x"}, {Dir: "lanes.3.cafe", Lanes: 4, Cases: 290, Table: "MISC/table.run3.7.ab"}}}
	b := st.marshal(nil, 12, commitInfo{by: "farm-add", nonce: "n0"})
	want := "farm-gen v1 gen=12 run=3 table=MISC/table.run3.7.ab simple=false cases=300 maxid=310 total=310 repair=r1 set=lanes.3.beef:1:10:MISC/table.run3.add.x set=lanes.3.cafe:4:290:MISC/table.run3.7.ab by=farm-add first=0 n=0 nonce=n0\n"
	if string(b) != want {
		t.Fatalf("wrote\n%q\nwant\n%q", b, want)
	}
	var back State
	if err := back.unmarshal(b); err != nil {
		t.Fatal(err)
	}
	st.Gen = 12
	if diff := cmp.Diff(st, back); diff != "" {
		t.Errorf("read back (-want +got):\n%s", diff)
	}
	// A lane's cursor.
	lc := State{Run: 3, Table: "MISC/table.run3.7.ab", InLane: true, Lane: 2, Block: 6, Offset: 4096, Lines: 120, TSize: 9000, TIno: 77, TFP: "f00d", Cases: 80, Claimed: 20}
	b = lc.marshal(nil, 5, commitInfo{by: "job7", first: 201, n: 5, nonce: "n1"})
	want = "farm-gen v1 gen=5 run=3 table=MISC/table.run3.7.ab lane=2 block=6 offset=4096 line=120 tsize=9000 tino=77 tfp=f00d cases=80 claimed=20 by=job7 first=201 n=5 nonce=n1\n"
	if string(b) != want {
		t.Fatalf("wrote\n%q\nwant\n%q", b, want)
	}
	back = State{}
	if err := back.unmarshal(b); err != nil {
		t.Fatal(err)
	}
	lc.Gen = 5
	if diff := cmp.Diff(lc, back); diff != "" {
		t.Errorf("a lane's cursor read back (-want +got):\n%s", diff)
	}
	if err := back.unmarshal([]byte(genMagic + "gen=1 run=1 table=t offset=zz\n")); err == nil || !strings.Contains(err.Error(), `bad field "offset=zz"`) {
		t.Errorf("a bad offset: %v", err)
	}
	if err := back.unmarshal(closing(4, State{Run: 2, MaxID: 9}, "n1")); err != errClosed || back.Run != 2 || back.MaxID != 9 {
		t.Errorf("a closing: %v, run %d, maxid %d; want errClosed, 2, 9", err, back.Run, back.MaxID)
	}
}

// A store that lost slots in a claim pauses longer from its next claim's
// first loss on (the doublings carried), and comes back down by one
// doubling a claim it makes without losing.
func TestBackoffCarriedAcrossClaims(t *testing.T) {
	s := &chainStore{con: contention{own: -1}}
	for i, c := range []struct{ lost, carry int }{
		{0, 0}, {5, 4}, {0, 3}, {2, 4}, {0, 3}, {0, 2}, {0, 1}, {0, 0}, {0, 0}, {1, 0},
	} {
		s.contended(int64(i), c.lost)
		if s.con.carry != c.carry {
			t.Fatalf("claim %d, %d lost: %d doublings carried, want %d", i, c.lost, s.con.carry, c.carry)
		}
	}
	for range 20 {
		s.contended(0, 9)
	}
	if s.con.carry != maxCarry {
		t.Errorf("after 20 claims of 9 slots lost: %d doublings carried, want at most %d", s.con.carry, maxCarry)
	}
}

// pauseFS is the system's filesystem on a clock that only its Sleep moves:
// it records the pauses and waits none; Rand is always r.
type pauseFS struct {
	vfs.OS
	now    time.Time
	pauses []time.Duration
	r      uint64
}

func (f *pauseFS) Now() time.Time { return f.now }
func (f *pauseFS) Rand() uint64   { return f.r }
func (f *pauseFS) Sleep(ctx context.Context, d time.Duration) error {
	f.pauses = append(f.pauses, d)
	f.now = f.now.Add(d)
	return ctx.Err()
}

// A claim's first lost commit pauses below the bound of the doublings its
// store carries: with 5 carried and an attempt of no time (a unit of 1
// ms), below 32 ms, not 1 ms. (Rand is fixed just below 32 ms: the pause
// is 32 ms less 1 ns with the carry, 1 ms less 1 ns without.)
func TestBackoffCarriedIntoTheNextClaim(t *testing.T) {
	for _, c := range []struct {
		carry int
		want  time.Duration
	}{{5, 32*time.Millisecond - 1}, {0, time.Millisecond - 1}} {
		a, misc := storeOf(t)
		f := &pauseFS{now: time.Unix(1e9, 0), r: uint64(32*time.Millisecond - 1)}
		b := NewStoreOn(f, filepath.Dir(misc), misc)
		t.Cleanup(func() { b.Close() })
		claim := func(s *Store) {
			if err := s.Update(context.Background(), func(s *State) error { s.Claimed++; return nil }); err != nil {
				t.Fatal(err)
			}
		}
		claim(a)
		claim(b) // b knows the newest generation: its next claim tries the next
		claim(a) // which a takes first
		b.con.carry = c.carry
		f.pauses = nil
		claim(b)
		if len(f.pauses) == 0 || f.pauses[0] != c.want {
			t.Errorf("%d doublings carried: the lost commit's pauses %v; want the first %v", c.carry, f.pauses, c.want)
		}
	}
}

// latestNear finds what latest finds over voids too (FIFO marks, a void the
// newest mark), from any mark known, with the chain's top set past from
// (a store that saw voids), whatever the guess.
func TestLatestNearOverVoids(t *testing.T) {
	st, misc := storeOf(t)
	commit := func(k int) {
		for range k {
			if err := st.Update(context.Background(), func(s *State) error { s.Claimed++; return nil }); err != nil {
				t.Fatal(err)
			}
		}
	}
	void := func(ns ...int64) {
		for _, n := range ns {
			d, err := st.ch.segFD(n, false)
			if err == nil {
				err = st.ch.void(d, n)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	commit(20)   // 0..19
	void(20, 21) // voids between commits
	st.gen = -1  // read afresh: the next commits pass the voids
	commit(10)   // 22..31
	void(32, 33) // the newest marks voids
	const want, top = 31, 33
	ch, _, _, err := openChain(vfs.OS{}, misc)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.close()
	for from := int64(0); from <= top; from++ {
		for near := int64(0); near < 50; near++ {
			for _, known := range []int64{-1, from / 2} {
				ch.top, ch.known = -1, known
				if from%3 == 0 {
					ch.top = min(from+2, top) // a store that saw marks past from
				}
				got, err := ch.latestNear(from, near)
				if err != nil || got != want || ch.top != top {
					t.Fatalf("latestNear(%d, %d), top %d known %d = %d (top %d), %v; want %d (top %d)",
						from, near, min(from+2, top), known, got, ch.top, err, want, top)
				}
			}
		}
	}
}

// A claimer whose commit would have taken its lane's last case, and lost,
// reads the generation that beat it before it pauses: if that took the last
// case, its claim ends with no pause (the end of a run: BENCHMARKS.md); if
// cases are left, it pauses once and claims one. b claims on the generation
// it made last, one behind a's (each claim takes one case).
func TestLostLastCaseEndsWithoutPause(t *testing.T) {
	for _, c := range []struct {
		cases  int
		pauses int
		got    int
	}{{3, 0, 0}, {4, 1, 1}} {
		dir := newLaneFarm(t, c.cases, 1)
		misc := filepath.Join(dir, "MISC")
		a := NewStore(dir, misc)
		t.Cleanup(func() { a.Close() })
		f := &pauseFS{now: time.Unix(1e9, 0), r: uint64(time.Millisecond - 1)}
		b := NewStoreOn(f, dir, misc)
		t.Cleanup(func() { b.Close() })
		lost := 0
		b.Note = func(_ string, _ []int64, l bool) error {
			if l {
				lost++
			}
			return nil
		}
		claim := func(s *Store) int {
			cases, err := s.Claim(context.Background(), 2, 1)
			if err != nil {
				t.Fatal(err)
			}
			return len(cases)
		}
		if claim(a)+claim(b)+claim(a) != 3 {
			t.Fatalf("%d cases: the first three claims took other than 3", c.cases)
		}
		f.pauses = nil
		got := claim(b)
		if lost != 1 || len(f.pauses) != c.pauses || got != c.got {
			t.Errorf("%d cases, b's claim on a generation one behind: %d commits lost, pauses %v, %d cases claimed; want 1 lost, %d pauses, %d cases",
				c.cases, lost, f.pauses, got, c.pauses, c.got)
		}
	}
}
