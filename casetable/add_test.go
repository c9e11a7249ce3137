package casetable

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// addCases gives run the cases first..last with farm add's Enqueue (first:
// ahead of the others) and returns the table it wrote.
func addCases(t *testing.T, s *Store, run int, first, last int64, ahead bool) string {
	t.Helper()
	var b strings.Builder
	for id := first; id <= last; id++ {
		fmt.Fprintf(&b, "%d echo added %d\n", id, id)
	}
	q, err := s.Enqueue(context.Background(), run, fmt.Sprint(first), []byte(b.String()), last-first+1, last, ahead)
	if err != nil || q.Run != run {
		t.Fatalf("enqueue %d-%d: %+v, %v", first, last, q, err)
	}
	return q.Table
}

// TestAddedSets: the sets farm add gives a run are claimed after the
// run's own, in order; one added first is claimed before what the run has
// left unclaimed, which is claimed after it. The sets survive the
// generation's round trip. A store whose last claim found nothing sees a
// set added since.
func TestAddedSets(t *testing.T) {
	ctx := context.Background()
	dir := newFarm(t, 6)
	misc := filepath.Join(dir, "MISC")
	a, b := NewStore(dir, misc), NewStore(dir, misc)
	defer a.Close()
	defer b.Close()
	claim := func(s *Store, most int) []int64 {
		t.Helper()
		cases, err := s.Claim(ctx, 1, most)
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for _, c := range cases {
			ids = append(ids, c.ID)
		}
		return ids
	}
	// Near a run's end a claim takes 1 case (share): one at a time.
	if got := claim(a, 2); fmt.Sprint(got) != "[1]" {
		t.Fatalf("first claim %v", got)
	}
	later := addCases(t, b, 1, 7, 9, false)
	first := addCases(t, b, 1, 10, 11, true)
	st, err := NewStore(dir, misc).Read(ctx)
	if err != nil || st.Cases != 11 || st.Claimed != 1 || len(st.Sets) != 3 || st.Sets[0].Table != first || st.Sets[1].Table != "table.dat" || st.Sets[2].Table != later {
		t.Fatalf("state after the adds: %+v, %v", st, err)
	}
	if _, moved, err := a.Look(ctx, false); err != nil || !moved { // a meta-job's look
		t.Fatalf("Look after the adds: moved %v, %v; want true", moved, err)
	}
	var got []int64
	for {
		ids := claim(a, 3)
		if len(ids) == 0 {
			break
		}
		got = append(got, ids...)
	}
	if diff := cmp.Diff([]int64{10, 11, 2, 3, 4, 5, 6, 7, 8, 9}, got); diff != "" {
		t.Errorf("claim order (-want +got):\n%s", diff)
	}
	// a found nothing left; b adds more; a's next claim has them.
	addCases(t, b, 1, 12, 12, false)
	if got := claim(a, 5); fmt.Sprint(got) != "[12]" {
		t.Errorf("after a new set, the store that found nothing claimed %v; want [12]", got)
	}
	claim(a, 1) // nothing: a reads the newest
	if _, moved, err := a.Look(ctx, false); moved || err != nil {
		t.Errorf("Look says moved (%v) after the store read the newest generation", err)
	}
	b.Update(ctx, func(s *State) error { return nil })
	if _, moved, err := a.Look(ctx, false); !moved || err != nil {
		t.Errorf("Look says not moved (%v) after another store committed", err)
	}
	var back State
	if err := back.unmarshal(st.marshal(nil, 3, commitInfo{})); err != nil || !cmp.Equal(back.Sets, st.Sets) {
		t.Errorf("sets' round trip: %+v, %v; want %+v", back.Sets, err, st.Sets)
	}
	for _, bad := range []string{"set=a:1:2", "set=a/b:1:2:t", "set=a:0:2:t", "set=a:1:-1:t", "set=:1:2:t"} {
		if err := back.unmarshal([]byte(genMagic + "gen=1 run=1 table=t " + bad + "\n")); err == nil {
			t.Errorf("a bad %s read", bad)
		}
	}
}

// TestAddedSetsWithLanes: in a run with lanes, a set added --first is
// claimed ahead of the run's own cases — also by a store that opens the
// run only after the add — and one added after them once they are used
// up; every case exactly once.
func TestAddedSetsWithLanes(t *testing.T) {
	ctx := context.Background()
	dir := newFarm(t, 400)
	misc := filepath.Join(dir, "MISC")
	startLaneRun(t, dir, 2, 4)
	b := NewStore(dir, misc)
	defer b.Close()
	a := NewStore(dir, misc)
	defer a.Close()
	seen := map[int64]int{}
	take := func(s *Store, most int) []int64 {
		t.Helper()
		cs, err := s.Claim(ctx, 2, most)
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for _, c := range cs {
			seen[c.ID]++
			ids = append(ids, c.ID)
		}
		return ids
	}
	take(a, 8)
	addCases(t, b, 2, 401, 410, true)
	addCases(t, b, 2, 411, 415, false)
	if st, err := b.Read(ctx); err != nil || len(st.Sets) != 3 || st.Sets[0].Lanes != 1 {
		t.Fatalf("the run record after the adds: %+v, %v; want 3 sets, the first of one lane (10 cases: one block)", st, err)
	}
	c := NewStore(dir, misc) // a meta-job that starts now
	defer c.Close()
	if got := take(c, 4); len(got) == 0 || got[0] <= 400 {
		t.Errorf("a late store's first claim: %v; want the --first set's cases", got)
	}
	for {
		ga, gc := take(a, 16), take(c, 16)
		if len(ga)+len(gc) == 0 {
			break
		}
	}
	for id := int64(1); id <= 415; id++ {
		if seen[id] != 1 {
			t.Errorf("case %d claimed %d times", id, seen[id])
		}
	}
}

// TestReadDoesNotHideAnAddedSet: a claimer whose store reads the run
// record (a meta-job's re-check after a silence) after farm add gave the
// run a set still claims that set once its own cases are used up, and its
// Look says so (WAIT_FOR_CASES). In review of the one claim path, the
// reading moved the store's main chain past the add, whose set it never
// opened: its Moved said false, and the added cases stayed unclaimed.
func TestReadDoesNotHideAnAddedSet(t *testing.T) {
	ctx := context.Background()
	dir := newFarm(t, 4)
	misc := filepath.Join(dir, "MISC")
	a, b := NewStore(dir, misc), NewStore(dir, misc)
	defer a.Close()
	defer b.Close()
	if cs, err := a.Claim(ctx, 1, 1); err != nil || len(cs) != 1 {
		t.Fatalf("first claim: %v %v", cs, err)
	}
	addCases(t, b, 1, 5, 6, false)
	if _, err := a.Read(ctx); err != nil {
		t.Fatal(err)
	}
	if _, moved, err := a.Look(ctx, false); !moved || err != nil {
		t.Errorf("Look says not moved (%v) after a reading of a record with a set the store has not opened", err)
	}
	var got []int64
	for i := 0; i < 10; i++ {
		cs, err := a.Claim(ctx, 1, 4)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			got = append(got, c.ID)
		}
	}
	if fmt.Sprint(got) != "[2 3 4 5 6]" {
		t.Errorf("claimed %v after the reading; want [2 3 4 5 6], the added set's too", got)
	}
}
