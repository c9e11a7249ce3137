package harness

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// What 'farm add' tests read of the claim state (casetable/CLAIMS.md): the
// run record, the newest generation of the main chain, names the run's
// sets of lanes in claim order (set=DIR:LANES:CASES:TABLE); each
// generation of a lane's chain says which cases it claimed (first=ID n=N).

// lastGeneration reads the newest committed generation of the chain in dir.
func lastGeneration(t testing.TB, dir string) string {
	t.Helper()
	segs, _ := filepath.Glob(filepath.Join(dir, "[0-9][0-9][0-9][0-9][0-9][0-9]"))
	best, bestN := "", int64(-1)
	for _, seg := range segs {
		gens, _ := filepath.Glob(filepath.Join(seg, "g.*"))
		for _, g := range gens {
			n, err := strconv.ParseInt(strings.TrimPrefix(filepath.Base(g), "g."), 10, 64)
			// Committed only: its mark a regular file (a void's is a FIFO).
			if fi, merr := os.Lstat(filepath.Join(seg, "c."+strconv.FormatInt(n, 10))); err == nil && merr == nil && fi.Mode().IsRegular() && n > bestN {
				best, bestN = g, n
			}
		}
	}
	b, err := os.ReadFile(best)
	if err != nil {
		t.Fatalf("the newest generation of %s: %v", dir, err)
	}
	return string(b)
}

// claimRec is what a lane's generation says it claimed, by whom, and when
// it was made (its mtime).
type claimRec struct {
	at       time.Time
	by       string
	first, n int64
}

// laneClaims reads the claims of every lane of the set in MISC/dir.
func laneClaims(t testing.TB, misc, dir string, lanes int) (claims []claimRec) {
	t.Helper()
	for l := 0; l < lanes; l++ {
		gens, _ := filepath.Glob(filepath.Join(misc, dir, strconv.Itoa(l), "*", "g.*"))
		for _, g := range gens {
			fi, err := os.Stat(g)
			b, err2 := os.ReadFile(g)
			if err != nil || err2 != nil {
				continue // buried meanwhile
			}
			r := claimRec{at: fi.ModTime()}
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
			if r.n > 0 {
				claims = append(claims, r)
			}
		}
	}
	return claims
}

// CheckFirstClaimedFirst: the set of the cases 'farm add --first' added
// (IDs ids[0]-ids[1]) is the first the run record names, its lanes claimed
// them all, and a meta-job that claimed in it claimed in no other set
// until its last case was claimed: from its first look at the record after
// the add, it took the set's cases before any other (its claims' order is
// their generations' times: a meta-job leaves a set only once it read the
// set's last claim, made before its own next one).
func CheckFirstClaimedFirst(t testing.TB, dir string, ids [2]int64) {
	t.Helper()
	misc := filepath.Join(dir, "MISC")
	b, err := os.ReadFile(filepath.Join(misc, "chain"))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	type set struct {
		dir   string
		lanes int
		table string
	}
	var sets []set
	for _, kv := range strings.Fields(lastGeneration(t, filepath.Join(misc, f[len(f)-1]))) {
		if v, ok := strings.CutPrefix(kv, "set="); ok {
			p := strings.SplitN(v, ":", 4)
			if len(p) == 4 {
				l, _ := strconv.Atoi(p[1])
				sets = append(sets, set{p[0], l, p[3]})
			}
		}
	}
	if len(sets) == 0 || firstID(t, filepath.Join(dir, sets[0].table)) != ids[0] {
		t.Fatalf("the run record's first set is not the --first cases' (%d-%d): %+v", ids[0], ids[1], sets)
	}
	var n int64
	var done time.Time
	began := map[string]time.Time{} // each meta-job's first claim in the set
	for _, c := range laneClaims(t, misc, sets[0].dir, sets[0].lanes) {
		n += c.n
		if c.at.After(done) {
			done = c.at
		}
		if at, ok := began[c.by]; !ok || c.at.Before(at) {
			began[c.by] = c.at
		}
	}
	if n != ids[1]-ids[0]+1 {
		t.Fatalf("the --first set's lanes claimed %d cases, want %d", n, ids[1]-ids[0]+1)
	}
	for _, s := range sets[1:] {
		for _, c := range laneClaims(t, misc, s.dir, s.lanes) {
			if at, ok := began[c.by]; ok && c.at.After(at) && c.at.Before(done) {
				t.Errorf("%s claimed cases %d-%d of another set %v after its first claim of the --first set, before the set's last claim (%v after)", c.by, c.first, c.first+c.n-1, c.at.Sub(at).Round(time.Millisecond), done.Sub(at).Round(time.Millisecond))
			}
		}
	}
}

// firstID is the ID of the first case of a run table.
func firstID(t testing.TB, path string) int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if id, _, ok := strings.Cut(sc.Text(), " "); ok {
			if n, err := strconv.ParseInt(id, 10, 64); err == nil {
				return n
			}
		}
	}
	return 0
}
