package status

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// leftoverFiles are status files with what makes Leftovers tricky, and
// what ReadLeftovers reads in each: what its own replay read before it
// became ReadFile's, but for a line of 64 to 256 KiB, which it skipped.
var leftoverFiles = []struct {
	name, text string
	want       Leftovers
}{
	{"empty", "", Leftovers{}},
	{"header only", "# farm-status v1 job=7 run=3 host=n1 restart=2\n",
		Leftovers{Job: "7", Run: 3, Restart: 2}},
	{"header without a job ID", "# farm-status v1 job= run=3 host=n1\n", Leftovers{Run: 3}},
	{"no header", "C 1700000000.000 1-3\nS 2 1700000000.000 n1\n",
		Leftovers{Open: []OpenCase{{ID: 2, Start: 1_700_000_000, Attempt: 1}}, Unstarted: []int64{1, 3}}},
	{"two headers: the last", "# farm-status v1 job=7 run=3 host=n1\n# farm-status v1 job=8 run=4 host=n1 restart=1\n",
		Leftovers{Job: "8", Run: 4, Restart: 1}},
	{"a case claimed twice", "# farm-status v1 job=7 run=3 host=n1\n" +
		"C 1700000000.000 4-6\nC 1700000001.000 2,5,8\n",
		Leftovers{Job: "7", Run: 3, Unstarted: []int64{4, 5, 6, 2, 8}}},
	{"claimed again after its start and end", "# farm-status v1 job=7 run=3 host=n1\n" +
		"C 1700000000.000 5-6\nS 5 1700000000.000 n1\nE 5 0 1700000000.000 1.000 n1\nC 1700000002.000 1,5 from=status.9 next=5:2\n",
		Leftovers{Job: "7", Run: 3, Unstarted: []int64{5, 6, 1}, Next: map[int64]int{5: 2}, RescuedFrom: map[string]bool{"status.9": true}}},
	{"claimed again, its first claim started", "# farm-status v1 job=7 run=3 host=n1\n" +
		"C 1700000000.000 5\nS 5 1700000000.000 n1\nC 1700000002.000 9\nC 1700000003.000 5\n",
		Leftovers{Job: "7", Run: 3, Open: []OpenCase{{ID: 5, Start: 1_700_000_000, Attempt: 1}}, Unstarted: []int64{5, 9}}},
	{"next= of two rescues, the last kept", "# farm-status v1 job=7 run=3 host=n1\n" +
		"C 1700000000.000 10-12 from=status.2 next=10:2,12:3\nS 12 1700000000.000 n1 attempt=3 why=rescue from=status.2\n" +
		"C 1700000001.000 10 from=status.4 next=10:4\n",
		Leftovers{Job: "7", Run: 3, Open: []OpenCase{{ID: 12, Start: 1_700_000_000, Attempt: 3}}, Unstarted: []int64{10, 11},
			Next: map[int64]int{10: 4, 12: 3}, RescuedFrom: map[string]bool{"status.2": true, "status.4": true}}},
	{"S then E, S with no end, I", "# farm-status v1 job=7 run=3 host=n1\n" +
		"S 1 1700000000.000 n1\nE 1 3 1700000000.000 1.500 n1\nS 2 1700000001.000 n1 loop=1 cpus=0-3\n" +
		"S 3 1700000002.000 n1 loop=2\nI 3 15 1700000002.000 1.000 n1\nS 4 1700000003.000 n1 attempt=2 why=retry\n",
		Leftovers{Job: "7", Run: 3, Open: []OpenCase{{ID: 2, Start: 1_700_000_001, Attempt: 1}, {ID: 4, Start: 1_700_000_003, Attempt: 2}}}},
	{"a case started twice, ended once: the latest start ends", "# farm-status v1 job=7 run=3 host=n1\n" +
		"S 5 1700000000.000 n1\nS 6 1700000001.000 n1\nS 5 1700000002.000 n1 attempt=2 why=retry\nE 5 0 1700000002.000 1.000 n1\nE 9 0 1700000002.000 1.000 n1\n",
		Leftovers{Job: "7", Run: 3, Open: []OpenCase{{ID: 5, Start: 1_700_000_000, Attempt: 1}, {ID: 6, Start: 1_700_000_001, Attempt: 1}}}},
	{"U records", "# farm-status v1 job=7 run=3 host=n1\n" +
		"C 1700000000.000 1-4\nU 2 1700000000.000 it needs 4 CPUs\nU 9 1700000000.000 it needs 1 GPU\nS 3 1700000000.000 n1\n",
		Leftovers{Job: "7", Run: 3, Open: []OpenCase{{ID: 3, Start: 1_700_000_000, Attempt: 1}}, Unstarted: []int64{1, 4}}},
	{"a Q", "# farm-status v1 job=7 run=3 host=n1\nC 1700000000.000 1\nQ 1700000009.000 No cases left; exiting.\n",
		Leftovers{Job: "7", Run: 3, Unstarted: []int64{1}, Quitted: true}},
	{"damaged lines skipped", "# farm-status v1 job=7 run=3 host=n1\n" +
		"C 1700000000.000 1-x\nC 1700000000.000 2 next=2:1\nS x 1700000000.000 n1\nE 3 0 1700000000.000\nS 3 1700000000.000 n1\n\ngarbage\nQ\nC 1700000000.000 4\n",
		Leftovers{Job: "7", Run: 3, Open: []OpenCase{{ID: 3, Start: 1_700_000_000, Attempt: 1}}, Unstarted: []int64{4}}},
	{"a damaged header skipped", "# farm-status v1 job=7 run=x host=n1\nC 1700000000.000 4\n", Leftovers{Unstarted: []int64{4}}},
	{"a partial last line left out", "# farm-status v1 job=7 run=3 host=n1\nC 1700000000.000 1-2\nS 2 17000",
		Leftovers{Job: "7", Run: 3, Unstarted: []int64{1, 2}}},
	{"a partial last Q left out", "# farm-status v1 job=7 run=3 host=n1\nQ 1700000009.000 No cases",
		Leftovers{Job: "7", Run: 3}},
	{"META's lines, then a header", "5 0\n6 1\n# farm-status v1 job=7 run=3 host=n1\nC 1700000000.000 8\n",
		Leftovers{Job: "7", Run: 3, Unstarted: []int64{8}}},
	{"CRLF lines", "# farm-status v1 job=7 run=3 host=n1\r\nC 1700000000.000 1-2\r\nS 1 1700000000.000 n1\r\n",
		Leftovers{Job: "7", Run: 3, Open: []OpenCase{{ID: 1, Start: 1_700_000_000, Attempt: 1}}, Unstarted: []int64{2}}},
	{"a C record of 12,000 cases, 66 KiB, read as by ReadFile", "# farm-status v1 job=7 run=3 host=n1\nC 1700000000.000 " + sparseIDs(12000) + "\n",
		Leftovers{Job: "7", Run: 3, Unstarted: sparse(12000)}},
	{"claims noted before their commits: a start decides one won, lost= another, the last undecided", "# farm-status v1 job=7 run=3 host=n1\n" +
		"C 1700000000.000 1-3 claim=lanes.3.a/0@1#x1\nS 1 1700000000.000 n1\nE 1 0 1700000000.000 1.000 n1\n" +
		"C 1700000001.000 4-5 claim=lanes.3.a/0@2#x2\nC 1700000001.000 4-5 lost=lanes.3.a/0@2#x2\n" +
		"C 1700000001.000 6-7 claim=lanes.3.a/0@4#x3\n",
		Leftovers{Job: "7", Run: 3, Unstarted: []int64{2, 3},
			Undecided: []NotedClaim{{Token: "lanes.3.a/0@4#x3", IDs: []int64{6, 7}}}}},
	{"a case noted lost, then noted again and won: undecided once", "# farm-status v1 job=7 run=3 host=n1\n" +
		"C 1700000000.000 3 claim=L/0@2#a\nC 1700000000.000 3 lost=L/0@2#a\nC 1700000000.000 3 claim=L/0@3#b\n",
		Leftovers{Job: "7", Run: 3, Undecided: []NotedClaim{{Token: "L/0@3#b", IDs: []int64{3}}}}},
	{"a lost= record not written: the earlier claim has no case left to decide", "# farm-status v1 job=7 run=3 host=n1\n" +
		"C 1700000000.000 3 claim=L/0@2#a\nC 1700000000.000 3 claim=L/0@3#b\nS 3 1700000000.000 n1\n",
		Leftovers{Job: "7", Run: 3, Open: []OpenCase{{ID: 3, Start: 1_700_000_000, Attempt: 1}}}},
	{"a line too long skipped", "# farm-status v1 job=7 run=3 host=n1\nC 1700000000.000 1 " + strings.Repeat("x", 300<<10) + "\nC 1700000000.000 2\n",
		Leftovers{Job: "7", Run: 3, Unstarted: []int64{2}}},
}

// sparse is n IDs, every other.
func sparse(n int64) []int64 {
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = 2 * int64(i)
	}
	return ids
}

// sparseIDs is sparse(n) as a C record writes it.
func sparseIDs(n int64) string { return string(AppendIDs(nil, sparse(n))) }

// TestLeftoversTable: ReadLeftovers over tricky files.
func TestLeftoversTable(t *testing.T) {
	dir := t.TempDir()
	for i, tc := range leftoverFiles {
		path := filepath.Join(dir, "status."+string(rune('a'+i)))
		if err := os.WriteFile(path, []byte(tc.text), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := ReadLeftovers(path)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}

// TestLeftoversErrors: a file that is not there, or a directory in its
// place, is an error naming it.
func TestLeftoversErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadLeftovers(filepath.Join(dir, "status.1")); !os.IsNotExist(err) {
		t.Errorf("a missing file: %v", err)
	}
	path := filepath.Join(dir, "status.2")
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadLeftovers(path); err == nil || !strings.Contains(err.Error(), path+" is a directory") {
		t.Errorf("a directory: %v", err)
	}
}

// TestClaimNotedRoundTrip: ClaimNoted's records, read back: a claim noted
// and then lost holds nothing; one noted last is undecided; the records
// parse with their tokens.
func TestClaimNotedRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "status.5")
	w, err := CreateCap(path, "5", 0, 2, "n1", Capacity{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1_700_000_000, 0)
	for _, c := range []struct {
		ids  []int64
		tok  string
		lost bool
	}{{[]int64{1, 2}, "lanes.2.ab/1@7#n1", false}, {[]int64{1, 2}, "lanes.2.ab/1@7#n1", true}, {[]int64{1, 2}, "lanes.2.ab/1@8#n2", false}} {
		if err := w.ClaimNoted(c.ids, at, c.tok, c.lost); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if r, err := ParseRecord([]byte(lines[2])); err != nil || string(r.Lost) != "lanes.2.ab/1@7#n1" || len(r.Claim) != 0 {
		t.Errorf("%q: lost=%q claim=%q %v; want lost= the first token", lines[2], r.Lost, r.Claim, err)
	}
	lo, err := ReadLeftovers(path)
	want := []NotedClaim{{Token: "lanes.2.ab/1@8#n2", IDs: []int64{1, 2}}}
	if err != nil || len(lo.Unstarted) != 0 || !cmp.Equal(lo.Undecided, want) {
		t.Errorf("leftovers %+v, %v; want undecided %v only", lo, err, want)
	}
}
