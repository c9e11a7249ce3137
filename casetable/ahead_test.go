package casetable

import (
	"context"
	"path/filepath"
	"testing"
)

// A store alone on its chain keeps claiming one batch's worth; one that
// finds others committed since its last claim, or loses slots, is told to
// take more at a time, and comes back down when it is alone again.
func TestAheadGrowsWithOthersCommitsAndShrinksAlone(t *testing.T) {
	defer func(on bool) { aheadOn = on }(aheadOn)
	aheadOn = true
	dir := newFarm(t, 10000)
	ctx := context.Background()
	a := NewStore(dir, filepath.Join(dir, "MISC"))
	defer a.Close()
	b := NewStore(dir, filepath.Join(dir, "MISC"))
	defer b.Close()
	claim := func(s *Store) {
		t.Helper()
		if cases, err := s.Claim(ctx, 1, 1); err != nil || len(cases) != 1 {
			t.Fatalf("claim: %v, %v", cases, err)
		}
	}
	for range 5 {
		claim(a)
	}
	if got := a.Ahead(); got != 1 {
		t.Fatalf("Ahead %d for a store alone, want 1", got)
	}
	claim(a)
	for range 100 {
		claim(b)
	}
	claim(a) // 100 generations of b's to find: a gallop and a read
	grown := a.Ahead()
	if grown < 4 {
		t.Errorf("Ahead %d after 100 generations of another store, want 4 or more", grown)
	}
	if got := b.Ahead(); got > 2 {
		t.Errorf("Ahead %d for a store that found one other generation, want 1 or 2", got)
	}
	for range 8 {
		claim(a)
	}
	if got := a.Ahead(); got != 1 {
		t.Errorf("Ahead %d after 8 claims alone (was %d), want 1", got, grown)
	}
}
