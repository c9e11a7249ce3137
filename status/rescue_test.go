package status

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestIDsRoundTrip(t *testing.T) {
	for _, ids := range [][]int64{{1}, {3, 4, 5, 6}, {3, 4, 5, 9, 11, 12}, {7, 5, 6}} {
		b := AppendIDs(nil, ids)
		got, err := ParseIDs(b)
		if err != nil || !slices.Equal(got, ids) {
			t.Errorf("%v -> %q -> %v, %v", ids, b, got, err)
		}
	}
	if got := string(AppendIDs(nil, []int64{3, 4, 5, 9, 11, 12})); got != "3-5,9,11-12" {
		t.Errorf("AppendIDs: %q", got)
	}
	for _, bad := range []string{"", "a", "5-3", "1,,2", "-1", "1-100000000"} {
		if _, err := ParseIDs([]byte(bad)); err == nil {
			t.Errorf("ParseIDs(%q) accepted", bad)
		}
	}
}

func TestClaimedAndRescueRecordsParse(t *testing.T) {
	r, err := ParseRecord([]byte("C 1700000000.500 3-5,9 from=status.17 next=4:2,9:3\n"))
	if err != nil || r.Kind != KindClaimed || r.Time != 1700000000.5 || string(r.IDs) != "3-5,9" || string(r.From) != "status.17" || string(r.Next) != "4:2,9:3" {
		t.Fatalf("C record: %+v %v", r, err)
	}
	for _, bad := range []string{"C 1 3 next=4", "C 1 3 next=4:1", "C 1 3 next=x:2", "C 1 3 next="} {
		if _, err := ParseRecord([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, err := ParseRecord([]byte("C 1700000000.500 3-x\n")); err == nil {
		t.Error("a C record with bad IDS was accepted")
	}
	if _, err := ParseRecord([]byte("C 1700000000.500\n")); err == nil {
		t.Error("a C record without IDS was accepted")
	}
	var b []byte
	b = appendStartAt(b, 7, time.Unix(1700000000, 0), "n1", Placement{Retry: 1, Why: WhyRescue, From: "status.3"})
	if got, want := string(b), "S 7 1700000000.000 n1 attempt=2 why=rescue from=status.3\n"; got != want {
		t.Fatalf("S record %q, want %q", got, want)
	}
	r, err = ParseRecord(b)
	if err != nil || r.Attempt != 2 || string(r.Why) != WhyRescue || string(r.From) != "status.3" {
		t.Fatalf("S record read back: %+v %v", r, err)
	}
}

// TestLeftovers: what a dead meta-job held, from its status file: the case
// it was running, and the cases claimed and neither started nor unfit.
func TestLeftovers(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Unix(1_700_000_000, 0)
	write(t, dir, "5", 2, func(w *Writer) {
		w.Claimed([]int64{1, 2, 3, 4}, t0, "", nil)
		w.Start(1, t0)
		w.End(1, 0, t0, time.Second)
		w.Unfit(2, t0, "it needs 4 CPUs")
		w.Start(3, t0)
		w.Claimed([]int64{9, 10}, t0, "status.8", map[int64]int{10: 2})
	})
	// A line being written is not read.
	fh, _ := os.OpenFile(filepath.Join(dir, "status.5"), os.O_APPEND|os.O_WRONLY, 0)
	fh.WriteString("S 4 17")
	fh.Close()
	lo, err := ReadLeftovers(filepath.Join(dir, "status.5"))
	if err != nil {
		t.Fatal(err)
	}
	want := Leftovers{Job: "5", Run: 2, Open: []OpenCase{{ID: 3, Start: 1_700_000_000, Attempt: 1}}, Unstarted: []int64{4, 9, 10}, Next: map[int64]int{10: 2}, RescuedFrom: map[string]bool{"status.8": true}}
	if diff := cmp.Diff(want, lo); diff != "" {
		t.Errorf("leftovers (-want +got):\n%s", diff)
	}
}

// TestRescueAttemptsMerge: a case whose meta-job died under it, rerun in
// the same run by the job that rescued it, counts once in the run, with
// two attempts and one crash, and is not a duplicate start; whichever file
// is read first. A rescue of a case whose first attempt ended after all
// (its job was only cut off) is a case that ran twice: a duplicate.
func TestRescueAttemptsMerge(t *testing.T) {
	for _, names := range [][2]string{{"1", "2"}, {"2", "1"}} {
		dir := t.TempDir()
		t0 := time.Unix(1_700_000_000, 0)
		dead, rescuer := names[0], names[1]
		write(t, dir, dead, 1, func(w *Writer) {
			w.Claimed([]int64{10, 11, 12}, t0, "", nil)
			w.Start(10, t0)
			w.End(10, 0, t0, time.Second)
			w.Start(11, t0.Add(time.Second)) // died under it
			w.Start(13, t0)                  // ran to its end, though its job was presumed dead
			w.End(13, 0, t0, time.Second)
		})
		write(t, dir, rescuer, 1, func(w *Writer) {
			from := "status." + dead
			w.Claimed([]int64{11, 12, 13}, t0.Add(time.Minute), from, map[int64]int{11: 2, 13: 2})
			w.StartAt(11, t0.Add(time.Minute), Placement{Retry: 1, Why: WhyRescue, From: from})
			w.End(11, 0, t0.Add(time.Minute), time.Second)
			w.StartAt(12, t0.Add(time.Minute), Placement{From: from})
			w.End(12, 3, t0.Add(time.Minute), time.Second)
			w.StartAt(13, t0.Add(time.Minute), Placement{Retry: 1, Why: WhyRescue, From: from})
			w.End(13, 0, t0.Add(time.Minute), time.Second)
			w.Quit("no-cases", "No cases left; exiting.")
		})
		sum, err := Load(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := *sum.RunCounts[1], (Counts{Succeeded: 3, Failed: 1}); got != want {
			t.Errorf("%v: run 1 counts %+v, want %+v", names, got, want)
		}
		c := sum.Get(11)
		if c.State != Succeeded || c.Attempts != 2 || c.Crashes != 1 {
			t.Errorf("%v: case 11 %+v: want succeeded, 2 attempts, 1 crash", names, c)
		}
		if c := sum.Get(12); c.State != Failed || c.Attempts != 1 {
			t.Errorf("%v: case 12 %+v: want failed, 1 attempt", names, c)
		}
		var dups []int64
		for _, d := range sum.Duplicates {
			dups = append(dups, d.ID)
			if !d.Rescued || !strings.Contains(d.Warning(), "ran 2 times in run 1") {
				t.Errorf("%v: duplicate %+v: want a rescue's, said so: %s", names, d, d.Warning())
			}
		}
		if !slices.Equal(dups, []int64{13}) {
			t.Errorf("%v: duplicates %v, want case 13 only (it ran twice)", names, dups)
		}
	}
}

// TestRescueOfARescueMerges: job 1 died running case 5, job 2 rescued it
// (attempt 2) and died running it too, job 3 rescued it from job 2
// (attempt 3) and it succeeded: in any order of the files, the run counts
// it once, succeeded, with 3 attempts, 2 crashes, and no duplicate.
func TestRescueOfARescueMerges(t *testing.T) {
	for _, order := range [][3]string{{"1", "2", "3"}, {"3", "2", "1"}, {"2", "3", "1"}} {
		dir := t.TempDir()
		t0 := time.Unix(1_700_000_000, 0)
		write(t, dir, order[0], 1, func(w *Writer) { w.Start(5, t0) })
		write(t, dir, order[1], 1, func(w *Writer) {
			w.StartAt(5, t0.Add(time.Minute), Placement{Retry: 1, Why: WhyRescue, From: "status." + order[0]})
		})
		write(t, dir, order[2], 1, func(w *Writer) {
			w.StartAt(5, t0.Add(2*time.Minute), Placement{Retry: 2, Why: WhyRescue, From: "status." + order[1]})
			w.End(5, 0, t0.Add(2*time.Minute), time.Second)
			w.Quit("no-cases", "No cases left; exiting.")
		})
		sum, err := Load(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := *sum.RunCounts[1], (Counts{Succeeded: 1}); got != want {
			t.Errorf("%v: run 1 counts %+v, want %+v", order, got, want)
		}
		if c := sum.Get(5); c.State != Succeeded || c.Attempts != 3 || c.Crashes != 2 {
			t.Errorf("%v: case 5 %+v: want succeeded, 3 attempts, 2 crashes", order, c)
		}
		if len(sum.Duplicates) != 0 {
			t.Errorf("%v: duplicates %+v", order, sum.Duplicates)
		}
	}
}
