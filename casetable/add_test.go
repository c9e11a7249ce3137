package casetable

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// addTable writes a run table of cases first..last (numbered) in dir and
// returns it as a Queued.
func addTable(t *testing.T, dir, name string, first, last int64) Queued {
	t.Helper()
	var b strings.Builder
	for id := first; id <= last; id++ {
		fmt.Fprintf(&b, "%d echo added %d\n", id, id)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	size, ino, fp, err := TableID(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return Queued{Table: name, TSize: size, TIno: ino, TFP: fp}
}

// TestQueuedTables: tables queued to a run are claimed after the run's
// own, in order; one queued first is claimed before what the run has left
// unclaimed, which is claimed after it, from where its cursor was. The
// queue survives the generation's round trip. A store whose last claim
// found nothing (deciding on its own last generation) sees cases queued
// since.
func TestQueuedTables(t *testing.T) {
	ctx := context.Background()
	dir := newFarm(t, 6)
	misc := filepath.Join(dir, "MISC")
	size, ino, fp, _ := TableID(filepath.Join(dir, "table.dat"))
	a, b := NewStore(dir, misc), NewStore(dir, misc)
	defer a.Close()
	defer b.Close()
	if err := b.Update(ctx, func(s *State) error { s.TSize, s.TIno, s.TFP, s.Cases = size, ino, fp, 6; return nil }); err != nil {
		t.Fatal(err)
	}
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
	later, first := addTable(t, dir, "later", 7, 9), addTable(t, dir, "first", 10, 11)
	if err := b.Update(ctx, func(s *State) error { s.Enqueue(later, 3, false); s.Enqueue(first, 2, true); return nil }); err != nil {
		t.Fatal(err)
	}
	st, err := NewStore(dir, misc).Read(ctx)
	if err != nil || st.Cases != 11 || len(st.Queue) != 2 || st.Table != "first" || st.Queue[0].Table != "table.dat" || st.Queue[0].Offset == 0 || st.Queue[1] != later {
		t.Fatalf("state after the adds: %+v, %v", st, err)
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
	// a found nothing left; b queues more; a's next claim has them.
	more := addTable(t, dir, "more", 12, 12)
	if err := b.Update(ctx, func(s *State) error { s.Enqueue(more, 1, false); return nil }); err != nil {
		t.Fatal(err)
	}
	if got := claim(a, 5); fmt.Sprint(got) != "[12]" {
		t.Errorf("after a new queued table, the store that found nothing claimed %v; want [12]", got)
	}
	claim(a, 1) // nothing: a reads the newest
	if a.Moved() {
		t.Errorf("Moved is true after the store read the newest generation")
	}
	b.Update(ctx, func(s *State) error { return nil })
	if !a.Moved() {
		t.Errorf("Moved is false after another store committed")
	}
	var back State
	if err := back.unmarshal(st.marshal(nil, 3, commitInfo{})); err != nil || !cmp.Equal(back.Queue, st.Queue) {
		t.Errorf("queue round trip: %+v, %v; want %+v", back.Queue, err, st.Queue)
	}
	if err := back.unmarshal([]byte(genMagic + "gen=1 run=1 table=t offset=0 queue=a:1:2\n")); err == nil {
		t.Errorf("a bad queue= read: %v", err)
	}
}

// TestQueuedTablesWithLanes: in a run with lanes (its main chain's cursor
// at its table's end, as startRun leaves it), a table queued --first is
// claimed ahead of the lanes' cases — also by a store that opens the
// lanes only after the cursor moved to it — and one queued after them
// once the lanes are used up; every case exactly once.
func TestQueuedTablesWithLanes(t *testing.T) {
	ctx := context.Background()
	dir := newFarm(t, 400)
	misc := filepath.Join(dir, "MISC")
	startLaneRun(t, dir, 2, 4)
	b := NewStore(dir, misc)
	defer b.Close()
	b.Update(ctx, func(s *State) error { s.Offset = s.TSize; return nil })
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
	first, later := addTable(t, dir, "first", 401, 410), addTable(t, dir, "later", 411, 415)
	if err := b.Update(ctx, func(s *State) error { s.Enqueue(later, 5, false); s.Enqueue(first, 10, true); return nil }); err != nil {
		t.Fatal(err)
	}
	c := NewStore(dir, misc) // a meta-job that starts now
	defer c.Close()
	if got := take(c, 4); len(got) == 0 || got[0] != 401 {
		t.Errorf("a late store's first claim: %v; want the --first table's cases from 401", got)
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
