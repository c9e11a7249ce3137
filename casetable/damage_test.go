package casetable

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/farm-hpc/farm/vfs"
)

// TestDamagedLaneDoesNotStopTheRun: the newest generation of one lane of
// a run of 4 is overwritten with garbage mid-run. The claimers claim every
// case of the other lanes, each once, and none of the damaged lane's after
// the damage (passing a generation nobody can read is not provably safe:
// it may be a close, or have claimed up to MaxClaim cases); only once
// nothing else is left does a claim return the damage, naming the
// generation (the meta-job then ends with farm repair's advice).
func TestDamagedLaneDoesNotStopTheRun(t *testing.T) {
	ctx := context.Background()
	dir := newFarm(t, 640)
	misc := filepath.Join(dir, "MISC")
	rec := startLaneRun(t, dir, 1, 4)
	seen := map[int64]int{}
	take := func(s *Store) ([]int64, error) {
		cs, err := s.Claim(ctx, 1, 16)
		var ids []int64
		for _, c := range cs {
			seen[c.ID]++
			ids = append(ids, c.ID)
		}
		return ids, err
	}
	// job2 claims in lane 2, its home (the job's number modulo the
	// lanes), and stops; job6 (home lane 2 too, which it has not read
	// yet) and job1 go on after the damage.
	lane := filepath.Join(misc, rec.Sets[0].Dir, "2")
	ch := newChain(vfs.OS{}, lane)
	w := NewStore(dir, misc)
	w.Job = "job2"
	for range 3 {
		if _, err := take(w); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	a, b := NewStore(dir, misc), NewStore(dir, misc)
	a.Job, b.Job = "job6", "job1"
	defer a.Close()
	defer b.Close()
	// Lane 2's newest generation: garbage; the one before it is sound.
	n, err := ch.latestNear(-1, 0)
	if err != nil || n < 1 {
		t.Fatalf("lane 2's newest generation: %d, %v", n, err)
	}
	before := len(seen)
	if err := os.WriteFile(ch.segPath(n, genName(n)), []byte("\x00\x01garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	ch.close()
	var damage error
	for _, s := range []*Store{a, b} {
		for {
			ids, err := take(s)
			if err != nil {
				damage = err
				for id := int64(1); id <= 640; id++ {
					if (id-1)/16%4 != 2 && seen[id] == 0 {
						t.Fatalf("a claim returned %v while case %d of an undamaged lane was unclaimed", err, id)
					}
				}
				break
			}
			if len(ids) == 0 {
				t.Fatalf("a claim found nothing left and no damage (store %p, %d claimed, damage so far %v)", s, len(seen), damage)
			}
		}
	}
	var de *DamageError
	if !errors.As(damage, &de) || !strings.Contains(de.Path, filepath.Join(rec.Sets[0].Dir, "2")) || !strings.HasSuffix(de.Path, "g."+strconv.FormatInt(n, 10)) && !strings.Contains(de.Error(), "g.") {
		t.Fatalf("the last claim's error: %v; want a DamageError naming lane 2's generation %d", damage, n)
	}
	for id, k := range seen {
		if k != 1 {
			t.Errorf("case %d claimed %d times", id, k)
		}
	}
	// Every case of lanes 0, 1 and 3 was claimed (blocks of 16, lane
	// l holding block b when b mod 4 = l); lane 2's only until the damage.
	for id := int64(1); id <= 640; id++ {
		if (id-1)/16%4 != 2 && seen[id] != 1 {
			t.Errorf("case %d of an undamaged lane claimed %d times", id, seen[id])
		}
	}
	if len(seen) <= before || len(seen) >= 640 {
		t.Errorf("%d cases claimed in all (%d before the damage); want all but some of lane 2's", len(seen), before)
	}
}
