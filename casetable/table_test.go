package casetable

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func writeTable(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "table.dat")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func readAll(t *testing.T, path string) []Case {
	t.Helper()
	var got []Case
	if err := ReadCases(path, func(c Case) error { got = append(got, c); return nil }); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestPrepareNumbersUnnumberedTable(t *testing.T) {
	orig := "# header comment\r\n./code 1.0\r\n\r\n  \t\n./code 2.0; echo done\n   # indented comment\nlast line without newline"
	p := writeTable(t, orig)
	info, err := Prepare(p)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Info{Cases: 3, MaxID: 3, Numbered: false}, info); diff != "" {
		t.Errorf("info (-want +got):\n%s", diff)
	}
	got, _ := os.ReadFile(p)
	want := "# header comment\n1 ./code 1.0\n\n  \t\n2 ./code 2.0; echo done\n   # indented comment\n3 last line without newline\n"
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("numbered table (-want +got):\n%s", diff)
	}
	backup, err := os.ReadFile(p + ".orig")
	if err != nil || string(backup) != orig {
		t.Errorf("backup = %q, %v; want the original", backup, err)
	}
	// Preparing again leaves a numbered table alone.
	info, err = Prepare(p)
	if err != nil || !info.Numbered || info.Cases != 3 {
		t.Errorf("second Prepare = %+v, %v", info, err)
	}
	again, _ := os.ReadFile(p)
	if string(again) != want {
		t.Errorf("second Prepare changed the table")
	}
	wantCases := []Case{{ID: 1, Command: "./code 1.0"}, {ID: 2, Command: "./code 2.0; echo done"}, {ID: 3, Command: "last line without newline"}}
	if diff := cmp.Diff(wantCases, readAll(t, p)); diff != "" {
		t.Errorf("cases (-want +got):\n%s", diff)
	}
}

func TestValidateKeepsNumberedIDs(t *testing.T) {
	p := writeTable(t, "10 echo a\n7\techo b\r\n# gap\n12 echo c\n")
	info, err := Prepare(p)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Info{Cases: 3, MaxID: 12, Numbered: true}, info); diff != "" {
		t.Errorf("info (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(p + ".orig"); !os.IsNotExist(err) {
		t.Errorf("a numbered table got a backup: %v", err)
	}
	want := []Case{{ID: 10, Command: "echo a"}, {ID: 7, Command: "echo b"}, {ID: 12, Command: "echo c"}}
	if diff := cmp.Diff(want, readAll(t, p)); diff != "" {
		t.Errorf("cases (-want +got):\n%s", diff)
	}
}

func TestBadTables(t *testing.T) {
	for _, tc := range []struct {
		name, table string
		line        int
		msg         string
	}{
		{"duplicate", "1 a\n2 b\n# c\n2 c\n", 4, "duplicate case ID 2 (first used on line 2)"},
		{"duplicate far", "5000000000 a\n5000000000 b\n", 2, "duplicate case ID 5000000000 (first used on line 1)"},
		{"malformed", "1 a\n2x b\n", 2, `malformed case ID "2x"`},
		{"unnumbered line in numbered table", "1 a\n./code 3\n", 2, `malformed case ID "./code"`},
		{"zero", "1 a\n0 b\n", 2, `malformed case ID "0"`},
		{"id without command", "1 a\n2\n", 2, "case 2 has an ID but no command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writeTable(t, tc.table)
			_, err := Prepare(p)
			var le *LineError
			if !errors.As(err, &le) {
				t.Fatalf("err = %v, want a LineError", err)
			}
			if le.Line != tc.line || !strings.Contains(err.Error(), tc.msg) || !strings.HasPrefix(err.Error(), "table.dat:") {
				t.Errorf("err = %q (line %d), want line %d and %q", err, le.Line, tc.line, tc.msg)
			}
			if got, _ := os.ReadFile(p); string(got) != tc.table {
				t.Errorf("a refused table was changed: %q", got)
			}
		})
	}
	p := writeTable(t, "# only comments\n\n")
	if _, err := Prepare(p); !errors.Is(err, ErrEmptyTable) {
		t.Errorf("empty table: err = %v", err)
	}
}

func TestLongLines(t *testing.T) {
	long := strings.Repeat("x", 3<<20)
	p := writeTable(t, "echo short\necho "+long+"\necho end\n")
	if _, err := Prepare(p); err != nil {
		t.Fatal(err)
	}
	got := readAll(t, p)
	if len(got) != 3 || got[1].Command != "echo "+long || got[2].Command != "echo end" {
		t.Errorf("long line mangled: %d cases", len(got))
	}
}

// TestClaimReadsLongAndUnterminatedLines: cases are read from a window of
// the table; a line longer than the window, and a last line without a
// newline, come out whole.
func TestClaimReadsLongAndUnterminatedLines(t *testing.T) {
	dir := t.TempDir()
	long := strings.Repeat("x", 3*tableWindow/2)
	table := "1 echo a\n2 echo " + long + "\n# a comment\n3 echo c\n4 echo " + long + long + "\n5 echo last"
	if err := os.WriteFile(filepath.Join(dir, "table.dat_"), []byte(table), 0o644); err != nil {
		t.Fatal(err)
	}
	s := NewStore(dir, filepath.Join(dir, "MISC"))
	defer s.Close()
	os.Mkdir(filepath.Join(dir, "MISC"), 0o755)
	ctx := context.Background()
	if err := s.Update(ctx, func(st *State) error {
		st.Run, st.Table, st.Cases = 1, "table.dat_", 5
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for i := 0; i < 10; i++ {
		cs, err := s.Claim(ctx, 1, 1+i%3, nil)
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
