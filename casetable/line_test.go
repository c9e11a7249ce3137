package casetable

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/farm-hpc/farm/tablefmt"
	"github.com/google/go-cmp/cmp"
)

// startTableRun makes a farm of table (its content) and starts run 1 over
// it as farm submit does: its size and inode recorded.
func startTableRun(t *testing.T, table string) (dir string, st *Store) {
	t.Helper()
	dir = t.TempDir()
	os.Mkdir(filepath.Join(dir, "MISC"), 0o755)
	p := filepath.Join(dir, "table.dat")
	if err := os.WriteFile(p, []byte(table), 0o644); err != nil {
		t.Fatal(err)
	}
	startLaneRun(t, dir, 1, 1)
	st = NewStore(dir, filepath.Join(dir, "MISC"))
	t.Cleanup(func() { st.Close() })
	return dir, st
}

// TestClaimGivesLineNumbers: each claimed case carries its line number in
// the run's table (comments and blank lines counted, as sed counts them),
// also when the claims come from several stores.
func TestClaimGivesLineNumbers(t *testing.T) {
	table := "# a comment\n1 echo a\n\n2 echo b\n3 echo c\n# another\n4 echo d\n5 echo e\n6 echo f"
	want := map[int64]int64{1: 2, 2: 4, 3: 5, 4: 7, 5: 8, 6: 9}
	dir, st := startTableRun(t, table)
	other := NewStore(dir, filepath.Join(dir, "MISC"))
	defer other.Close()
	got := map[int64]int64{}
	for i := 0; i < 10; i++ {
		s := []*Store{st, other}[i%2]
		cases, err := s.Claim(context.Background(), 1, 1+i%2)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cases {
			got[c.ID] = c.Line
		}
	}
	if len(got) != len(want) {
		t.Fatalf("claimed %v, want the 6 cases", got)
	}
	for id, line := range want {
		if got[id] != line {
			t.Errorf("case %d: line %d, want %d (all: %v)", id, got[id], line, got)
		}
	}
	if n, err := tablefmt.CountLines(filepath.Join(dir, "table.dat")); err != nil || n != 9 {
		t.Errorf("CountLines = %d, %v; want 9 (the last line has no newline)", n, err)
	}
}

// tableChanges change the table at p as a user would: a line appended,
// or the file replaced by an editor (another inode) with the same size.
var tableChanges = map[string]func(p string) error{
	"appended": func(p string) error {
		f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = f.WriteString("2 echo b again\n")
		return err
	},
	"replaced": func(p string) error {
		if err := os.WriteFile(p+".new", []byte("1 echo a\n3 echo c\n2 echo b\n"), 0o644); err != nil {
			return err
		}
		return os.Rename(p+".new", p)
	},
}

// TestClaimRefusesAChangedTable: once the run's table has another size or
// another inode than when the run started (a line appended, the file
// replaced by an editor), nothing more is claimed from it, with a message
// that says what to do; a table touched but not changed goes on; and a
// run whose lines were all read ends as usual whatever the table is now.
func TestClaimRefusesAChangedTable(t *testing.T) {
	defer func(d time.Duration) { tableRecheck = d }(tableRecheck)
	tableRecheck = 10 * time.Millisecond
	table := "1 echo a\n2 echo b\n3 echo c\n"
	for name, change := range tableChanges {
		t.Run(name, func(t *testing.T) {
			dir, st := startTableRun(t, table)
			if cases, err := st.Claim(context.Background(), 1, 1); err != nil || len(cases) != 1 {
				t.Fatalf("first claim: %v, %v", cases, err)
			}
			if err := change(filepath.Join(dir, "table.dat")); err != nil {
				t.Fatal(err)
			}
			for _, s := range []*Store{st, NewStore(dir, filepath.Join(dir, "MISC"))} {
				cases, err := s.Claim(context.Background(), 1, 1)
				var tc *TableChangedError
				if !errors.As(err, &tc) || len(cases) != 0 {
					t.Fatalf("claim after the table %s: %v, %v; want a TableChangedError", name, cases, err)
				}
				msg := err.Error()
				for _, w := range []string{"table.dat changed during run 1", "no more cases are claimed from it", "'farm resubmit'"} {
					if !strings.Contains(msg, w) {
						t.Errorf("message %q does not say %q", msg, w)
					}
				}
			}
		})
	}
	// The same bytes under another inode number: what a host whose mount
	// numbers inodes otherwise sees (the fingerprint vouches for it).
	t.Run("copied", func(t *testing.T) {
		dir, st := startTableRun(t, table)
		p := filepath.Join(dir, "table.dat")
		if err := os.WriteFile(p+".new", []byte(table), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(p+".new", p); err != nil {
			t.Fatal(err)
		}
		for _, s := range []*Store{st, NewStore(dir, filepath.Join(dir, "MISC"))} {
			if cases, err := s.Claim(context.Background(), 1, 1); err != nil || len(cases) != 1 {
				t.Errorf("claim from the same bytes under another inode: %v, %v; want a case", cases, err)
			}
		}
	})
	t.Run("touched", func(t *testing.T) {
		dir, st := startTableRun(t, table)
		p := filepath.Join(dir, "table.dat")
		if err := os.Chtimes(p, time.Unix(1e9, 0), time.Unix(1e9, 0)); err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for {
			cases, err := st.Claim(context.Background(), 1, 1)
			if err != nil {
				t.Fatal(err)
			}
			if len(cases) == 0 {
				break
			}
			ids = append(ids, cases[0].ID)
		}
		if len(ids) != 3 {
			t.Errorf("claimed %v from a touched table, want 1 2 3", ids)
		}
		// Every line read: a change now ends the run as usual.
		if err := os.WriteFile(p, []byte("9 echo z\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if cases, err := st.Claim(context.Background(), 1, 1); err != nil || len(cases) != 0 {
			t.Errorf("claim at the end of a run whose table changed since: %v, %v; want none, no error", cases, err)
		}
	})
}

// TestClaimReadsLongAndUnterminatedLines: cases are read from a window of
// the table; a line longer than the window, and a last line without a
// newline, come out whole.
func TestClaimReadsLongAndUnterminatedLines(t *testing.T) {
	dir := t.TempDir()
	long := strings.Repeat("x", 3*tablefmt.Window/2)
	table := "1 echo a\n2 echo " + long + "\n# a comment\n3 echo c\n4 echo " + long + long + "\n5 echo last"
	if err := os.WriteFile(filepath.Join(dir, "table.dat_"), []byte(table), 0o644); err != nil {
		t.Fatal(err)
	}
	s := NewStore(dir, filepath.Join(dir, "MISC"))
	defer s.Close()
	os.Mkdir(filepath.Join(dir, "MISC"), 0o755)
	ctx := context.Background()
	if err := s.StartRun(ctx, RunSpec{Base: -1, Run: 1, Table: "table.dat_", Cases: 5}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for i := 0; i < 10; i++ {
		cs, err := s.Claim(ctx, 1, 1+i%3)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			got = append(got, fmt.Sprintf("%d %s", c.ID, c.Command))
		}
	}
	want := []string{"1 echo a", "2 echo " + long, "3 echo c", "4 echo " + long + long, "5 echo last"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("claimed cases (-want +got):\n%s", diff)
	}
}
