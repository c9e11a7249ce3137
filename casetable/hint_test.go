package casetable

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/farm-hpc/farm/vfs"
)

// hintFarm makes a farm of n cases whose run 1 StartRun started for jobs
// meta-jobs, as farm submit does, and returns it and the run's start hint.
func hintFarm(t *testing.T, n, jobs int) (dir, hint string) {
	t.Helper()
	dir = t.TempDir()
	os.Mkdir(filepath.Join(dir, "MISC"), 0o755)
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "%d echo case %d\n", i, i)
	}
	if err := os.WriteFile(filepath.Join(dir, "table.dat"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	s := NewStore(dir, filepath.Join(dir, "MISC"))
	defer s.Close()
	if err := s.StartRun(context.Background(), RunSpec{Base: -1, Run: 1, Table: "table.dat",
		Cases: int64(n), MaxID: int64(n), Jobs: jobs}); err != nil {
		t.Fatal(err)
	}
	if s.Hint() == "" {
		t.Fatal("StartRun won and gave no hint")
	}
	return dir, s.Hint()
}

// firstClaim is a first claim in run of a new store of job given hint: its
// cases, the record Last gives after it, and the filesystem calls it made.
func firstClaim(t *testing.T, dir, job, hint string, run int) ([]int64, State, int) {
	t.Helper()
	calls := 0
	fsys := countingFS{on: func(string) func(error) { calls++; return nil }}
	s := NewStoreOn(fsys, dir, filepath.Join(dir, "MISC"))
	defer s.Close()
	s.Job, s.Log = job, os.Stderr
	s.UseHint(hint)
	cases, err := s.Claim(context.Background(), run, FirstBatch)
	if err != nil {
		t.Fatal(err)
	}
	return caseIDs(cases), s.Last(), calls
}

// record is the run record as a store without a hint reads it.
func record(t *testing.T, dir string) State {
	s := NewStore(dir, filepath.Join(dir, "MISC"))
	defer s.Close()
	st, _, err := s.Look(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestStartHintSparesTheRecord: a first claim with the run's start hint
// reads neither MISC/chain nor the main chain, claims as one without, and
// its Last is the record the run started with.
func TestStartHintSparesTheRecord(t *testing.T) {
	for _, jobs := range []int{1, 64} { // one lane; two
		dir, hint := hintFarm(t, 200, jobs)
		plainDir, _ := hintFarm(t, 200, jobs)
		ids, last, calls := firstClaim(t, dir, "job.1", hint, 1)
		plainIDs, plainLast, plainCalls := firstClaim(t, plainDir, "job.1", "", 1)
		if !slices.Equal(ids, plainIDs) || len(ids) == 0 {
			t.Fatalf("jobs %d: hinted claim got %v, one without a hint %v", jobs, ids, plainIDs)
		}
		if rec := record(t, dir); last.Run != 1 || last.Gen != rec.Gen || last.Chain != rec.Chain ||
			!slices.Equal(last.Sets, rec.Sets) || last.Table != rec.Table || last.Repair != rec.Repair {
			t.Fatalf("jobs %d: Last after a hinted claim %+v, the record %+v", jobs, last, rec)
		}
		if plainLast.Gen != last.Gen || calls > plainCalls-10 {
			t.Fatalf("jobs %d: a hinted first claim made %d calls, one without %d", jobs, calls, plainCalls)
		}
		t.Logf("jobs %d: first claim %d calls with the hint, %d without", jobs, calls, plainCalls)
	}
}

// TestStartHintWrongCostsOneLookup: a hint changed by a byte, one naming a
// set no record names, or garbage, is not claimed from: the claim is the one
// without a hint, for one lookup more at most.
func TestStartHintWrongCostsOneLookup(t *testing.T) {
	dir, hint := hintFarm(t, 200, 64)
	st, _, err := parseHint(hint)
	if err != nil {
		t.Fatal(err)
	}
	// A set of run 1 no record names (a racing start that lost), over other cases.
	other := State{Table: "other.dat"}
	os.WriteFile(filepath.Join(dir, "other.dat"), []byte("1001 echo x\n1002 echo y\n"), 0o644)
	other.TSize, other.TIno, other.TFP, _ = tableIDOn(vfs.OS{}, filepath.Join(dir, "other.dat"))
	set, err := makeSet(vfs.OS{}, dir, filepath.Join(dir, "MISC"), 1, other, 2, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	forged := st
	forged.Sets = []Set{set}
	forged.Table = set.Table
	wrong := map[string]string{
		"a byte changed": reHint(st, func(b []byte) []byte { return []byte(strings.Replace(string(b), "by=", "by=x", 1)) }),
		"an unnamed set": reHint(forged, nil),
		"garbage":        "1.not-base64!",
		"truncated":      hint[:len(hint)/2],
	}
	for what, h := range wrong {
		plainDir, _ := hintFarm(t, 200, 64)
		ids, last, calls := firstClaim(t, dir, "job.1", h, 1)
		plainIDs, _, plainCalls := firstClaim(t, plainDir, "job.1", "", 1)
		if !slices.Equal(ids, plainIDs) || len(ids) == 0 || slices.Max(ids) > 200 {
			t.Fatalf("%s: claimed %v, without a hint %v", what, ids, plainIDs)
		}
		if last.Chain == "" || calls > plainCalls+1 {
			t.Fatalf("%s: %d calls, %d without a hint; Last %+v", what, calls, plainCalls, last)
		}
		// The next first claim of this farm claims the next cases.
		dir, _ = hintFarm(t, 200, 64)
	}
}

// reHint is the hint of st's record, edited by edit if not nil, with no name vouching for it.
func reHint(st State, edit func([]byte) []byte) string {
	b := st.marshal(nil, st.Gen, commitInfo{by: "submit", nonce: "0123456789abcdef"})
	if edit != nil {
		b = edit(b)
	}
	return hintVersion + base64.RawURLEncoding.EncodeToString(append([]byte(st.Chain+" "+fmt.Sprint(st.Gen)+"\n"), b...))
}

// TestStartHintOfASupersededRun: a meta-job of run 1 started with its hint
// once run 2 started claims nothing (its lanes are closed); one of run 2
// given run 1's hint claims run 2's cases, as without a hint.
func TestStartHintOfASupersededRun(t *testing.T) {
	dir, hint := hintFarm(t, 100, 64)
	rec := record(t, dir)
	s := NewStore(dir, filepath.Join(dir, "MISC"))
	err := s.StartRun(context.Background(), RunSpec{Base: rec.Gen, Chain: rec.Chain, Run: 2, Table: "table.dat", Cases: 100, Jobs: 64})
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	if ids, last, _ := firstClaim(t, dir, "job.1", hint, 1); len(ids) != 0 || last.Run != 2 {
		t.Fatalf("run 1's job with its hint after run 2 started: %v, Last of run %d", ids, last.Run)
	}
	if ids, last, _ := firstClaim(t, dir, "job.2", hint, 2); len(ids) == 0 || last.Run != 2 {
		t.Fatalf("run 2's job with run 1's hint: %v, Last of run %d", ids, last.Run)
	}
}
