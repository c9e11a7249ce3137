package harness

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// What 'farm add' tests read of the claim state: the generations of the
// farm's claim chain (casetable/CLAIMS.md), each of which says who made it
// and which cases it claimed (first=ID n=N, consecutive IDs of one table).

// claimRec is what a generation of the claim chain says it did.
type claimRec struct {
	by       string
	first, n int64
}

// chainRecords reads the farm's claim chain, generation by generation.
func chainRecords(t testing.TB, dir string) []claimRec {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "MISC", "chain"))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	seg := filepath.Join(dir, "MISC", f[len(f)-1], "000000")
	var out []claimRec
	for g := 0; ; g++ {
		b, err := os.ReadFile(filepath.Join(seg, "g."+strconv.Itoa(g)))
		if err != nil {
			if g < 2 {
				t.Fatalf("generation %d: %v", g, err)
			}
			return out
		}
		var r claimRec
		for _, kv := range strings.Fields(string(b)) {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "by":
				r.by = v
			case "first":
				r.first, _ = strconv.ParseInt(v, 10, 64)
			case "n":
				r.n, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		out = append(out, r)
	}
}

// CheckFirstClaimedFirst: after the generation that queued the --first
// batch (IDs ids[0]-ids[1], added by the nth farm add), every claim took
// cases of that batch until all of them were claimed.
func CheckFirstClaimedFirst(t testing.TB, dir string, nth int, ids [2]int64) {
	t.Helper()
	recs := chainRecords(t, dir)
	adds, at := 0, -1
	for i, r := range recs {
		if r.by == "farm-add" {
			if adds++; adds == nth {
				at = i
				break
			}
		}
	}
	if at < 0 {
		t.Fatalf("no generation %d by farm-add among %d", nth, len(recs))
	}
	left := ids[1] - ids[0] + 1
	for _, r := range recs[at+1:] {
		if left == 0 {
			break
		}
		if r.n == 0 {
			continue
		}
		if r.first < ids[0] || r.first+r.n-1 > ids[1] {
			t.Fatalf("after --first queued cases %d-%d, a claim took %d-%d while %d of them were left unclaimed", ids[0], ids[1], r.first, r.first+r.n-1, left)
		}
		left -= r.n
	}
	if left != 0 {
		t.Errorf("%d cases of the --first batch were never claimed, by the chain", left)
	}
}
