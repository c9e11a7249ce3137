package casetable

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/farm-hpc/farm/vfs"
)

// The bound of backoff's pause doubles with the attempts lost from the
// unit (at least 1 ms) and never exceeds 2 s, nor overflows, whatever the
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
		{9, 10 * time.Millisecond, 2 * time.Second},
		{0, 3 * time.Millisecond, 3 * time.Millisecond},
		{25, 3 * time.Hour, 2 * time.Second},
		{1 << 30, 1<<63 - 1, 2 * time.Second},
		{64, time.Millisecond, 2 * time.Second},
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
	want, err := ch.latest(-1)
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

// The head hint says a recent generation, every hintEvery: written in
// place, a longer number over a shorter one and a shorter over a longer
// leave a number that reads whole; a file that is not there is made.
func TestHeadHintInPlace(t *testing.T) {
	ch := chainOf(t, 2*hintEvery+3)
	if got := ch.hint(); got != 2*hintEvery {
		t.Errorf("hint after %d generations = %d, want %d", 2*hintEvery+3, got, 2*hintEvery)
	}
	d, err := ch.dirFD()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int64{123456789012, 7, 99} {
		writeHint(vfs.OS{}, d, n)
		if got := ch.hint(); got != n {
			t.Errorf("hint after writeHint(%d) = %d", n, got)
		}
	}
	if err := os.Remove(filepath.Join(ch.dir, "head")); err != nil {
		t.Fatal(err)
	}
	writeHint(vfs.OS{}, d, 5)
	if got := ch.hint(); got != 5 {
		t.Errorf("hint after the file was removed and written = %d, want 5", got)
	}
}

// chainOf commits gens generations in a new farm's chain and returns the
// chain, opened afresh (closed when the test ends).
func chainOf(t *testing.T, gens int) *chain {
	t.Helper()
	dir := t.TempDir()
	misc := filepath.Join(dir, "MISC")
	if err := os.Mkdir(misc, 0o755); err != nil {
		t.Fatal(err)
	}
	st := NewStore(dir, misc)
	defer st.Close()
	for i := 0; i < gens; i++ {
		if err := st.Update(context.Background(), func(s *State) error { s.Claimed++; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	ch, err := openChain(vfs.OS{}, misc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ch.close)
	return ch
}
