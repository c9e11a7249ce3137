package tablefmt

import (
	"math/rand/v2"
	"runtime"
	"testing"
)

// The duplicate check keeps what a plain map keeps, for dense, shuffled,
// clustered and sparse IDs in any order.
func TestIDSetIsASet(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var ids []int64
	for id := int64(1); id <= 50000; id++ {
		ids = append(ids, id)
	}
	for range 5000 {
		ids = append(ids, 1e9+rng.Int64N(100000), rng.Int64N(1<<62)+1)
	}
	for _, order := range []string{"in order", "shuffled", "reversed"} {
		switch order {
		case "shuffled":
			rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
		case "reversed":
			for i, j := 0, len(ids)-1; i < j; i, j = i+1, j-1 {
				ids[i], ids[j] = ids[j], ids[i]
			}
		}
		var s idSet
		seen := map[int64]bool{}
		for _, id := range ids {
			if got := s.add(id); got != seen[id] {
				t.Fatalf("%s: add(%d) = %v, want %v", order, id, got, seen[id])
			}
			seen[id] = true
		}
		for id := range seen {
			if !s.add(id) {
				t.Fatalf("%s: %d was lost", order, id)
			}
		}
	}
	// Cases 1..N live in the bitset, at 2 bits each at most.
	var s idSet
	for id := int64(1); id <= 1<<18; id++ {
		s.add(id)
	}
	if len(s.far) != 0 || len(s.bits) > 2*(1<<18/64)+1024 {
		t.Errorf("1..2^18: %d words in the bitset, %d in the map", len(s.bits), len(s.far))
	}
}

// Validating a table of two cases with IDs 1,000,000,000 and
// 2,000,000,000 allocates what a table of cases 1 and 2 does (issue 10:
// 250 MB, half of it touched).
func TestValidateHugeIDsAllocatesLittle(t *testing.T) {
	alloc := func(table string) uint64 {
		p := writeTable(t, table)
		least := ^uint64(0)
		for range 3 {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			info, err := Validate(p)
			runtime.ReadMemStats(&after)
			if err != nil || info.Cases != 2 {
				t.Fatalf("%q: %+v, %v", table, info, err)
			}
			least = min(least, after.TotalAlloc-before.TotalAlloc)
		}
		return least
	}
	small := alloc("1 a\n2 b\n")
	for _, table := range []string{"1000000000 a\n2000000000 b\n", "2000000000 a\n1000000000 b\n", "1 a\n9000000000000000000 b\n"} {
		got := alloc(table)
		t.Logf("%q: %d KiB (cases 1 and 2: %d KiB)", table, got>>10, small>>10)
		if got > small+64<<10 {
			t.Errorf("%q: Validate allocated %d KiB, cases 1 and 2 %d KiB", table, got>>10, small>>10)
		}
	}
}
