package tablefmt

import (
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
	wantCases := []Case{{ID: 1, Command: "./code 1.0", Needs: Needs{GPUs: -1}}, {ID: 2, Command: "./code 2.0; echo done", Needs: Needs{GPUs: -1}}, {ID: 3, Command: "last line without newline", Needs: Needs{GPUs: -1}}}
	if diff := cmp.Diff(wantCases, readAll(t, p)); diff != "" {
		t.Errorf("cases (-want +got):\n%s", diff)
	}
}

// TestValidateKeepsNumberedIDs: read with HasIDs (config's TABLE_IDS=1,
// or a farm that ran), a table keeps its IDs, whatever numbers they are;
// by META's rule, the same table is not numbered (10 is not 1), and is
// numbered with its lines whole.
func TestValidateKeepsNumberedIDs(t *testing.T) {
	table := "10 echo a\n7\techo b\r\n# gap\n12 echo c\n"
	p := writeTable(t, table)
	info, err := ValidateAs(p, HasIDs)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Info{Cases: 3, MaxID: 12, Numbered: true}, info); diff != "" {
		t.Errorf("info (-want +got):\n%s", diff)
	}
	want := []Case{{ID: 10, Command: "echo a", Needs: Needs{GPUs: -1}}, {ID: 7, Command: "echo b", Needs: Needs{GPUs: -1}}, {ID: 12, Command: "echo c", Needs: Needs{GPUs: -1}}}
	if diff := cmp.Diff(want, readAll(t, p)); diff != "" {
		t.Errorf("cases (-want +got):\n%s", diff)
	}
	info, err = Prepare(p)
	if err != nil || info.Numbered || info.NotIDs == nil || *info.NotIDs != (NotIDs{Line: 1, Want: 1, Field: "10"}) {
		t.Fatalf("Prepare = %+v %+v, %v; want it numbered by farm, NotIDs at line 1", info, info.NotIDs, err)
	}
	if got, _ := os.ReadFile(p); string(got) != "1 10 echo a\n2 7\techo b\n# gap\n3 12 echo c\n" {
		t.Errorf("numbered as %q", got)
	}
}

// TestMETARule: a table is numbered only when its first case lines, up to
// RuleLines of them, start with 1, 2, 3, ... in order (META's submit.run);
// then every case line after those must carry a unique ID, any number,
// with an error naming the line if not. Else every line is numbered, kept
// whole, and Info.NotIDs says where the numbers stopped being 1, 2, 3, ...
// when the first line starts with a number.
// TestMETARuleRefusesALineWithoutIDAfterIDs: case lines that start 1, 2,
// ..., k and then one without a number are IDs farm wrote (farm add,
// import-metaq) and a line added by hand: META's rule would number every
// line, and every case would run its ID as a command. The table is
// refused at that line instead, saying what to do.
func TestMETARuleRefusesALineWithoutIDAfterIDs(t *testing.T) {
	p := writeTable(t, "# c\n1 a\n2 b\n  echo x\n")
	_, err := Validate(p)
	want := "table.dat:4: this case line has no ID, but the 2 case line(s) before it start with their IDs 1 to 2: give it the next ID (3 echo x), or remove the IDs of every line to let farm number the table"
	if err == nil || err.Error() != want {
		t.Errorf("Validate: %v\nwant %s", err, want)
	}
	if _, err := Prepare(p); err == nil {
		t.Errorf("Prepare numbered the table")
	}
	// With TABLE_IDS=1 the same line is a malformed ID, as before.
	if _, err := ValidateAs(p, TableIDs); err == nil || !strings.Contains(err.Error(), "table.dat:4:") {
		t.Errorf("ValidateAs(TableIDs): %v", err)
	}
}

func TestMETARule(t *testing.T) {
	seq := func(n int) string {
		var b strings.Builder
		for i := 1; i <= n; i++ {
			fmt.Fprintf(&b, "%d echo %d\n", i, i)
		}
		return b.String()
	}
	for _, tc := range []struct {
		name, table string
		numbered    bool
		maxID       int64
		notIDs      *NotIDs
	}{
		{"META's parameter table", "101 0.5\n202 0.7\n", false, 2, &NotIDs{Line: 1, Want: 1, Field: "101"}},
		{"all 1024", "1024 a\n1024 b\n1024 c\n", false, 3, &NotIDs{Line: 1, Want: 1, Field: "1024"}},
		{"1 then 3", "# c\n1 a\n\n3 b\n", false, 2, &NotIDs{Line: 4, Want: 2, Field: "3"}},
		{"leading zero", "01 a\n", false, 1, &NotIDs{Line: 1, Want: 1, Field: "01"}},
		{"a command", "echo a\n2 b\n", false, 2, nil},
		{"1 then a number", "1 a\n7 b\n", false, 2, &NotIDs{Line: 2, Want: 2, Field: "7"}},
		{"one line", "1 foo\n", true, 1, nil},
		{"1, 2, 3", "1 a\n2 b\n# c\n3 c\n", true, 3, nil},
		{"1..100 then any IDs", seq(100) + "500 x\n101 y\n", true, 500, nil},
		{"1..99 then 101", seq(99) + "101 x\n", false, 100, &NotIDs{Line: 100, Want: 100, Field: "101"}},
		{"1..250", seq(250), true, 250, nil},
		// farm's own tables: numbered 1..N by farm, then cases farm add
		// appended, after a gap an add that died left.
		{"numbered by farm, then added", seq(5) + "6 added\n7 added\n", true, 7, nil},
		// IDs farm gave after a gap (an add that died after it queued
		// its cases) are kept while the farm has run (HasIDs); by the rule
		// alone (after 'farm clean --yes') the table is numbered anew.
		{"numbered by farm, added after a gap", seq(5) + "8 added\n", false, 6, &NotIDs{Line: 6, Want: 6, Field: "8"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writeTable(t, tc.table)
			info, err := Validate(p)
			if err != nil {
				t.Fatal(err)
			}
			if info.Numbered != tc.numbered || info.MaxID != tc.maxID || !cmp.Equal(info.NotIDs, tc.notIDs) {
				t.Errorf("Validate = %+v, NotIDs %+v; want numbered %v, MaxID %d, NotIDs %+v", info, info.NotIDs, tc.numbered, tc.maxID, tc.notIDs)
			}
			if got, _ := IsNumbered(p, METARule); got != tc.numbered {
				t.Errorf("IsNumbered = %v", got)
			}
			c, err := FindCase(p, 1, METARule)
			first := strings.TrimSpace(strings.SplitN(strings.TrimPrefix(tc.table, "# c\n"), "\n", 2)[0])
			if !tc.numbered {
				if err != nil || c.Command != first {
					t.Errorf("FindCase(1) = %+v, %v; want the first line whole", c, err)
				}
			}
			if _, err := Prepare(p); err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(p)
			if tc.numbered != (string(got) == tc.table) {
				t.Errorf("Prepare made %.80q", got)
			}
		})
	}
	for _, tc := range []struct{ table, msg string }{
		{seq(100) + "echo x\n", `table.dat:101: malformed case ID "echo": a numbered table needs "ID command" on every case line, with ID a positive integer; fix the line (its first 100 case lines are numbered 1, 2, 3, ..., so every case line needs its ID), or remove all IDs to let farm number the table`},
		{seq(100) + "7 x\n", `table.dat:101: duplicate case ID 7 (first used on line 7)`},
		{"1 a\n2\n", `table.dat:2: case 2 has an ID but no command`},
	} {
		p := writeTable(t, tc.table)
		if _, err := Prepare(p); err == nil || !strings.HasPrefix(err.Error(), tc.msg) {
			t.Errorf("%.30q...: %v; want %s", tc.table, err, tc.msg)
		}
	}
}

func TestBadTables(t *testing.T) {
	for _, tc := range []struct {
		name, table string
		line        int
		msg         string
	}{
		{"duplicate", "1 a\n2 b\n# c\n2 c\n", 4, "duplicate case ID 2 (first used on line 2)"},
		{"all 1024", "1024 a\n1024 b\n", 2, "duplicate case ID 1024 (first used on line 1)"},
		{"duplicate far", "5000000000 a\n5000000000 b\n", 2, "duplicate case ID 5000000000 (first used on line 1)"},
		{"malformed", "1 a\n2x b\n", 2, `malformed case ID "2x"`},
		{"unnumbered line in numbered table", "1 a\n./code 3\n", 2, `malformed case ID "./code"`},
		{"zero", "1 a\n0 b\n", 2, `malformed case ID "0"`},
		{"id without command", "1 a\n2\n", 2, "case 2 has an ID but no command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writeTable(t, tc.table)
			_, err := ValidateAs(p, HasIDs)
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
	if err := Number(p, ""); err != nil {
		t.Fatal(err)
	}
	got := readAll(t, p)
	if len(got) != 3 || got[1].Command != "echo "+long || got[2].Command != "echo end" {
		t.Errorf("long line mangled: %d cases", len(got))
	}
}

// TestSignedFirstFieldIsAnID: in a table read as carrying IDs (TableIDs:
// config's TABLE_IDS=1),
// a first field that starts as a number does but is not a positive
// integer is a malformed ID, not a command. By META's rule the same
// tables are not numbered (their lines do not start 1, 2, 3, ...): farm
// numbers them, each line kept whole, and says so (Info.NotIDs) when the
// first starts with a number.
func TestSignedFirstFieldIsAnID(t *testing.T) {
	for table, msg := range map[string]string{
		"-1 echo a\n":               `table.dat:1: malformed case ID "-1": a numbered table needs "ID command" on every case line, with ID a positive integer; fix the line (config has TABLE_IDS=1: the first field of every case line is its ID), or remove TABLE_IDS from config to let farm number the table`,
		"# c\n\n+1 echo a\n":        `table.dat:3: malformed case ID "+1"`,
		"0 echo a\n":                `table.dat:1: malformed case ID "0": IDs must be positive integers; fix the line`,
		"-0\techo a\n2 b\n":         `table.dat:1: malformed case ID "-0"`,
		"  -12 echo a\r\n":          `table.dat:1: malformed case ID "-12"`,
		"1 a\n-2 echo b\n":          `table.dat:2: malformed case ID "-2"`,
		"-99999999999999999999 x\n": `table.dat:1: malformed case ID "-99999999999999999999"`,
		"1a echo a\n":               `table.dat:1: malformed case ID "1a"`,
		"1.5 echo a\n":              `table.dat:1: malformed case ID "1.5"`,
		"# c\n-1x a\n":              `table.dat:2: malformed case ID "-1x"`,
		"2,3 a\n":                   `table.dat:1: malformed case ID "2,3"`,
	} {
		p := writeTable(t, table)
		_, err := ValidateAs(p, TableIDs)
		if err == nil || !strings.HasPrefix(err.Error(), msg) {
			t.Errorf("%q: err %v, want %s", table, err, msg)
		}
		info, err := Prepare(p)
		if err != nil || info.Numbered || (info.NotIDs == nil) != strings.HasPrefix(strings.TrimLeft(table, "# c\n"), "--") {
			t.Errorf("%q: Prepare = %+v, %v; want it numbered by farm, with a note", table, info, err)
		}
	}
	for table, want := range map[string]string{
		"- echo a\n":     "1 - echo a\n",
		"-x echo a\n":    "1 -x echo a\n",
		"a1 echo a\n":    "1 a1 echo a\n",
		".5 echo a\n":    "1 .5 echo a\n",
		"--1 echo a\n":   "1 --1 echo a\n",
		"echo a\n-1 b\n": "1 echo a\n2 -1 b\n",
		"-1 a\n1 b\n":    "1 -1 a\n2 1 b\n",
		"1a echo a\n":    "1 1a echo a\n",
	} {
		p := writeTable(t, table)
		if info, err := Prepare(p); err != nil || info.Numbered {
			t.Errorf("%q: %+v, %v; want it numbered by farm", table, info, err)
		}
		if got, _ := os.ReadFile(p); string(got) != want {
			t.Errorf("%q numbered as %q, want %q", table, got, want)
		}
	}
}

// TestTooLongCommand: a command longer than MaxCommand (it could not be
// passed to single_case.sh in COMM) is refused at its line, in a numbered
// or unnumbered table, as Rebuild and CountKept refuse it.
func TestTooLongCommand(t *testing.T) {
	fits, over := strings.Repeat("y", MaxCommand), strings.Repeat("y", MaxCommand+1)
	for _, tc := range []struct {
		table string
		line  int // refused; 0: none
	}{
		{"echo a\n" + fits + "\n", 0},
		{"1 echo a\n2 " + fits + "\n", 0},
		{"echo a\n\n" + over + "\n" + over + "\n", 3},
		{"1 echo a\n# c\n2  " + over + "  \n", 3},
	} {
		p := writeTable(t, tc.table)
		_, err := Validate(p)
		if tc.line == 0 {
			if err != nil {
				t.Errorf("line of %d bytes: %v", MaxCommand, err)
			}
			continue
		}
		want := fmt.Sprintf("table.dat:%d: the command is %d bytes long, more than the %d a case may have (it reaches single_case.sh in the environment variable COMM, which Linux limits to 128 KiB); shorten the line", tc.line, MaxCommand+1, MaxCommand)
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("err = %v, want %s", err, want)
		}
	}
	p := writeTable(t, "1 true\n2 "+over+"\n")
	all := func(int64) bool { return true }
	if _, err := Rebuild(p, p+"_", all); err == nil || !strings.HasPrefix(err.Error(), "table.dat:2: the command is") {
		t.Errorf("Rebuild: %v", err)
	}
	if _, err := os.Stat(p + "_"); !os.IsNotExist(err) {
		t.Errorf("a refused Rebuild left %s: %v", p+"_", err)
	}
	if _, err := CountKept(p, all); err == nil || !strings.HasPrefix(err.Error(), "table.dat:2: the command is") {
		t.Errorf("CountKept: %v", err)
	}
}

// TestCountKeptWritesNothing: CountKept counts what Rebuild writes, with
// its checks, and makes no file.
func TestCountKeptWritesNothing(t *testing.T) {
	p := writeTable(t, "1 a\n# c\n2 b\n3 c\n4 d\n")
	odd := func(id int64) bool { return id%2 == 1 }
	entries := func() int { e, _ := os.ReadDir(filepath.Dir(p)); return len(e) }
	before := entries()
	n, err := CountKept(p, odd)
	if err != nil || n != 2 || entries() != before {
		t.Errorf("CountKept = %d, %v (%d files, were %d); want 2", n, err, entries(), before)
	}
	if m, err := Rebuild(p, p+"_", odd); err != nil || m != n {
		t.Errorf("Rebuild = %d, %v; want %d", m, err, n)
	}
	p = writeTable(t, "1 a\n2 b\n1 c\n")
	if _, err := CountKept(p, odd); err == nil || !strings.HasPrefix(err.Error(), "table.dat:3: duplicate case ID 1 (first used on line 1)") {
		t.Errorf("CountKept of a duplicate: %v", err)
	}
}

// TestNumberFollowsSymlink: a table.dat that is a symbolic link is
// numbered in place, at its target (written beside the target and renamed
// over it): the link stays a link, and the original is kept at the
// backup; a numbered one is left alone.
func TestNumberFollowsSymlink(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "farm"), 0o755)
	os.Mkdir(filepath.Join(dir, "data"), 0o755)
	target := filepath.Join(dir, "data", "cases.txt")
	orig := "echo a\n# c\necho b\n"
	os.WriteFile(target, []byte(orig), 0o640)
	link := filepath.Join(dir, "farm", "table.dat")
	if err := os.Symlink("../data/cases.txt", link); err != nil {
		t.Fatal(err)
	}
	info, err := Prepare(link)
	if err != nil || info.Numbered || info.Cases != 2 {
		t.Fatalf("Prepare = %+v, %v", info, err)
	}
	if to, err := os.Readlink(link); err != nil || to != "../data/cases.txt" {
		t.Errorf("table.dat is no longer the link: %q, %v", to, err)
	}
	if got, _ := os.ReadFile(target); string(got) != "1 echo a\n# c\n2 echo b\n" {
		t.Errorf("target = %q", got)
	}
	if fi, _ := os.Stat(target); fi.Mode().Perm() != 0o640 {
		t.Errorf("target mode %v, want 0640", fi.Mode().Perm())
	}
	if got, _ := os.ReadFile(link + ".orig"); string(got) != orig {
		t.Errorf("backup = %q, want the original", got)
	}
	if e, _ := os.ReadDir(filepath.Join(dir, "data")); len(e) != 1 {
		t.Errorf("data/ holds %d files, want the table alone", len(e))
	}
	// Already numbered: nothing is written.
	fi, _ := os.Stat(target)
	if info, err := Prepare(link); err != nil || !info.Numbered {
		t.Errorf("second Prepare = %+v, %v", info, err)
	}
	if fi2, _ := os.Stat(target); !os.SameFile(fi, fi2) || fi2.ModTime() != fi.ModTime() {
		t.Errorf("a numbered table was written again")
	}
}

// TestFindCaseSignedFirstID: FindCase (farm run-case) reads a table as
// Validate does: by META's rule "-1 echo a" is case 1's whole command;
// read as carrying IDs, -1 is a malformed ID.
func TestFindCaseSignedFirstID(t *testing.T) {
	p := writeTable(t, "-1 echo a\necho b\n")
	if c, err := FindCase(p, 1, METARule); err != nil || c.Command != "-1 echo a" || c.Line != 1 {
		t.Errorf("FindCase: %+v, %v", c, err)
	}
	if _, err := FindCase(p, 1, HasIDs); err == nil || !strings.HasPrefix(err.Error(), `table.dat:1: malformed case ID "-1"`) {
		t.Errorf("FindCase: %v", err)
	}
	p = writeTable(t, "101 0.5\n202 0.7\n")
	if c, err := FindCase(p, 2, METARule); err != nil || c.ID != 2 || c.Command != "202 0.7" {
		t.Errorf("FindCase(2) of META's table: %+v, %v", c, err)
	}
	if c, err := FindCase(p, 202, HasIDs); err != nil || c.ID != 202 || c.Command != "0.7" {
		t.Errorf("FindCase(202) with TABLE_IDS=1: %+v, %v", c, err)
	}
}

// TestFarmTablesKeepIDs: the tables farm writes itself keep their IDs
// whatever numbers they are: a resubmit's table.dat_ (the original IDs of
// the cases left, e.g. 3 17 20), made by Rebuild from a table.dat read as
// carrying IDs, and read back by ReadCases; META's rule would not call it
// numbered, which is why farm reads its own tables as HasIDs. A line
// Rebuild would copy is checked as every line entering a farm is.
func TestFarmTablesKeepIDs(t *testing.T) {
	p := writeTable(t, "1 a\n2 b\n3 c\n# c\n17 d\n20 e\n")
	left := func(id int64) bool { return id == 3 || id == 17 || id == 20 }
	if n, err := Rebuild(p, p+"_", left); err != nil || n != 3 {
		t.Fatalf("Rebuild = %d, %v", n, err)
	}
	if got, _ := os.ReadFile(p + "_"); string(got) != "3 c\n17 d\n20 e\n" {
		t.Errorf("table.dat_ = %q", got)
	}
	var ids []int64
	for _, c := range readAll(t, p+"_") {
		ids = append(ids, c.ID)
	}
	if !cmp.Equal(ids, []int64{3, 17, 20}) {
		t.Errorf("table.dat_ read as %v", ids)
	}
	if n, err := IsNumbered(p+"_", HasIDs); !n || err != nil {
		t.Errorf("IsNumbered(HasIDs) = %v, %v", n, err)
	}
	if info, err := ValidateAs(p+"_", HasIDs); err != nil || info.MaxID != 20 || info.Cases != 3 {
		t.Errorf("ValidateAs(HasIDs) = %+v, %v", info, err)
	}
	if n, _ := IsNumbered(p+"_", METARule); n {
		t.Errorf("META's rule calls 3 17 20 numbered")
	}
	// A table farm has run from: its errors do not speak of TABLE_IDS.
	p = writeTable(t, "3 a\necho b\n")
	if _, err := ValidateAs(p, HasIDs); err == nil || !strings.HasSuffix(err.Error(), "; fix the line (every case line of this table needs its ID)") {
		t.Errorf("ValidateAs(HasIDs) of a line without ID: %v", err)
	}
	p = writeTable(t, "1 a\n2 echo b\x00c\n")
	if _, err := CountKept(p, left); err == nil || err.Error() != "table.dat:2: a NUL byte at column 9: a case line must be text; remove it" {
		t.Errorf("CountKept of a NUL: %v", err)
	}
}
