package casetable

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// noted is what a store's Opts.Note was told.
type noted struct {
	token string
	ids   []int64
	lost  bool
}

// TestNoteBeforeCommitAndClaimWon: a claim in a lane is noted, with its
// cases, before its commit; ClaimWon then finds it committed by its
// token; a token of the same generation with another nonce (a commit
// another process made) is not won, nor one of a generation nobody
// marked, which ClaimWon voids after voidAfter, as a claimer would.
func TestNoteBeforeCommitAndClaimWon(t *testing.T) {
	dir := newLaneFarm(t, 20, 2) // run 2
	ctx := context.Background()
	st := NewStore(dir, filepath.Join(dir, "MISC"))
	defer st.Close()
	var notes []noted
	st.Note = func(token string, ids []int64, lost bool) error {
		notes = append(notes, noted{token, slices.Clone(ids), lost})
		return nil
	}
	cases, err := st.Claim(ctx, 2, 3)
	if err != nil || len(cases) == 0 {
		t.Fatalf("claim: %d cases, %v", len(cases), err)
	}
	if len(notes) != 1 || notes[0].lost || !slices.Equal(notes[0].ids, caseIDs(cases)) {
		t.Fatalf("notes %+v: want one, before the commit, of cases %v", notes, caseIDs(cases))
	}
	tok := notes[0].token
	if !strings.HasPrefix(tok, "lanes.2.") || !strings.Contains(tok, "@1#") {
		t.Errorf("token %q: want lanes.2.NONCE/LANE@1#NONCE (generation 1 of the lane)", tok)
	}
	if won, err := st.ClaimWon(ctx, tok); !won || err != nil {
		t.Errorf("ClaimWon(%q) = %v, %v; want true: the claim committed", tok, won, err)
	}
	other := tok[:strings.Index(tok, "#")+1] + "0000000000000000"
	if won, err := st.ClaimWon(ctx, other); won || err != nil {
		t.Errorf("ClaimWon(%q) = %v, %v; want false: another nonce's", other, won, err)
	}
	defer func(d time.Duration) { voidAfter = d }(voidAfter)
	voidAfter = 50 * time.Millisecond
	unmarked := strings.Replace(tok[:strings.Index(tok, "#")+1], "@1#", "@2#", 1) + "0000000000000000"
	if won, err := st.ClaimWon(ctx, unmarked); won || err != nil {
		t.Errorf("ClaimWon(%q) = %v, %v; want false: voided", unmarked, won, err)
	}
	for _, bad := range []string{"", "lanes.1.x/0@x#y", "../x@1#y", "claims.x@1#y", "lanes.1.x/0@0#y"} {
		if _, err := st.ClaimWon(ctx, bad); err == nil {
			t.Errorf("ClaimWon(%q): no error", bad)
		}
	}
	// The next claim in that lane, whose store has not seen the void, tries
	// generation 2, loses it (noted lost: its content is there, its mark the
	// void), and takes generation 3.
	notes = nil
	cases, err = st.Claim(ctx, 2, 3)
	if err != nil || len(notes) != 3 || !strings.Contains(notes[0].token, "@2#") || notes[0].lost ||
		notes[1].token != notes[0].token || !notes[1].lost || !strings.Contains(notes[2].token, "@3#") || notes[2].lost {
		t.Fatalf("next claim: %v, notes %+v; want generation 2 noted, then noted lost, then generation 3 noted", err, notes)
	}
	if !slices.Equal(notes[2].ids, caseIDs(cases)) {
		t.Errorf("noted %v, claimed %v", notes[2].ids, caseIDs(cases))
	}
	for i, want := range []bool{false, true} {
		if won, err := st.ClaimWon(ctx, notes[2*i].token); won != want || err != nil {
			t.Errorf("ClaimWon(%q) = %v, %v; want %v", notes[2*i].token, won, err, want)
		}
	}
}

// TestNoteErrorFailsTheClaim: a claim whose note cannot be made (its
// record not written: a full disk) is not committed; the next claim
// takes the same cases.
func TestNoteErrorFailsTheClaim(t *testing.T) {
	dir := newLaneFarm(t, 20, 1)
	ctx := context.Background()
	st := NewStore(dir, filepath.Join(dir, "MISC"))
	defer st.Close()
	st.Retry = time.Millisecond
	full := errors.New("no space left on device")
	st.Note = func(string, []int64, bool) error { return full }
	if cases, err := st.Claim(ctx, 2, 3); !errors.Is(err, full) || len(cases) != 0 {
		t.Fatalf("claim with its note failing: %v, %v; want the note's error and no case", caseIDs(cases), err)
	}
	st.Note = nil
	cases, err := st.Claim(ctx, 2, 3)
	if err != nil || len(cases) == 0 || cases[0].ID != 1 {
		t.Errorf("claim after: %v, %v; want the cases from 1", caseIDs(cases), err)
	}
}
