package tablefmt

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSnapshot: a run's private table is an exact copy of the numbered
// table, validated in the same reading, with its Source; a table that is
// not numbered, or does not validate, leaves nothing.
func TestSnapshot(t *testing.T) {
	content := "# head\n1 echo a\n\n2 echo b #FARM cpus=2\n3 echo c\n"
	src := writeTable(t, content)
	dst := filepath.Join(t.TempDir(), "table.run1.1.a")
	info, s, err := Snapshot(src, dst, 0o640, "")
	if err != nil || info.Cases != 3 || info.MaxID != 3 || !info.Numbered {
		t.Fatalf("Snapshot = %+v, %v", info, err)
	}
	if b, _ := os.ReadFile(dst); string(b) != content {
		t.Errorf("the copy reads %q, want %q", b, content)
	}
	if fi, _ := os.Stat(dst); fi.Mode().Perm() != 0o640 {
		t.Errorf("the copy's mode is %v, want 0640", fi.Mode().Perm())
	}
	if s.Size != int64(len(content)) || len(s.Hash) != 64 || s.Ino == 0 || s.Mtime == 0 {
		t.Errorf("Source = %+v", s)
	}
	if err := WriteSource(dst, s); err != nil {
		t.Fatal(err)
	}
	if back, err := ReadSource(dst); err != nil || back != s {
		t.Errorf("ReadSource = %+v, %v; want %+v", back, err, s)
	}
	var b strings.Builder
	for i := 1; i <= RuleLines; i++ {
		fmt.Fprintf(&b, "%d echo %d\n", i, i)
	}
	numbered := b.String() // the rule says numbered; what follows must carry IDs
	for table, want := range map[string]string{
		"echo a\necho b\n":        "not numbered",
		"1 echo a\n1 echo b\n":    "not numbered",
		numbered + "1 echo b\n":   "table.dat:101: duplicate case ID 1",
		numbered + "echo b\n":     `table.dat:101: malformed case ID "echo"`,
		"1a echo a\n2 echo b\n":   "not numbered",
		"1 echo a\n2 echo \x01\n": "table.dat:2: a control character (byte 0x01) at column 8",
	} {
		dst := filepath.Join(t.TempDir(), "table.run1.1.a")
		_, _, err := Snapshot(writeTable(t, table), dst, 0o644, "")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %s", table, err, want)
		}
		if want == "not numbered" && !errors.Is(err, ErrNotNumbered) {
			t.Errorf("%q: %v, want ErrNotNumbered", table, err)
		}
		if m, _ := filepath.Glob(filepath.Join(filepath.Dir(dst), "*")); len(m) != 0 {
			t.Errorf("%q: left %v", table, m)
		}
	}
}

// TestSourceChanged: a table.dat edited in any way that changes its
// content is changed, whatever its size, inode and times; one whose
// content is the same (touched, copied over) is not.
func TestSourceChanged(t *testing.T) {
	content := "1 echo aa\n2 echo b\n"
	for name, tc := range map[string]struct {
		edit    func(t *testing.T, p string)
		changed bool
	}{
		"untouched": {func(*testing.T, string) {}, false},
		"touched": {func(t *testing.T, p string) {
			later := time.Now().Add(time.Hour)
			os.Chtimes(p, later, later)
		}, false},
		"copied over, same content": {func(t *testing.T, p string) {
			os.WriteFile(p+".new", []byte(content), 0o644)
			os.Rename(p+".new", p)
		}, false},
		"same size, in place": {func(t *testing.T, p string) {
			f, _ := os.OpenFile(p, os.O_WRONLY, 0)
			f.WriteAt([]byte("1 echo a\n2 echo bb\n"), 0)
			f.Close()
		}, true},
		"same size, renamed over": {func(t *testing.T, p string) {
			os.WriteFile(p+".new", []byte("1 echo a\n2 echo bb\n"), 0o644)
			os.Rename(p+".new", p)
		}, true},
		"appended": {func(t *testing.T, p string) {
			f, _ := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
			f.WriteString("3 echo c\n")
			f.Close()
		}, true},
		"removed": {func(t *testing.T, p string) { os.Remove(p) }, true},
	} {
		src := writeTable(t, content)
		dst := filepath.Join(t.TempDir(), "copy")
		_, s, err := Snapshot(src, dst, 0o644, "")
		if err != nil {
			t.Fatal(err)
		}
		tc.edit(t, src)
		if changed, err := s.Changed(src); err != nil || changed != tc.changed {
			t.Errorf("%s: Changed = %v, %v; want %v", name, changed, err, tc.changed)
		}
	}
}

// TestReadIDsLenient: a table edited since it was checked is read on past
// its bad lines, each repeated ID counted once.
func TestReadIDsLenient(t *testing.T) {
	p := writeTable(t, "1 a\n2 b\n# c\n1 again\nzz top\n3 c #FARM gpu=1\n4 d\n2 more\n")
	var ids []int64
	n, first, err := ReadIDsLenient(p, func(id int64) { ids = append(ids, id) })
	if err != nil || n != 4 || first == nil || !strings.HasPrefix(first.Error(), "table.dat:4: duplicate case ID 1 (first used on line 1)") {
		t.Errorf("ReadIDsLenient = %d, %v, %v", n, first, err)
	}
	if len(ids) != 3 || ids[0] != 1 || ids[1] != 2 || ids[2] != 4 {
		t.Errorf("IDs %v, want [1 2 4]", ids)
	}
}

// TestNumberAndSnapshotCheckTheHash: what submit numbers, then copies, is
// the table it validated: a table changed since is ErrChanged, and
// nothing is written.
func TestNumberAndSnapshotCheckTheHash(t *testing.T) {
	p := writeTable(t, "echo a\necho b\n")
	info, s, err := ValidateSource(p, METARule)
	if err != nil || info.Cases != 2 || info.Numbered {
		t.Fatalf("ValidateSource = %+v, %v", info, err)
	}
	os.WriteFile(p, []byte("echo a\necho c\n"), 0o644) // edited meanwhile
	if _, err := NumberChecked(p, p+".orig", s.Hash); !errors.Is(err, ErrChanged) {
		t.Errorf("NumberChecked of a changed table: %v, want ErrChanged", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "echo a\necho c\n" {
		t.Errorf("the table was rewritten: %q", b)
	}
	if _, err := os.Stat(p + ".orig"); err == nil {
		t.Errorf("a backup was made")
	}
	_, s, _ = ValidateSource(p, METARule)
	sum, err := NumberChecked(p, p+".orig", s.Hash)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "copy")
	if _, got, err := Snapshot(p, dst, 0o644, sum); err != nil || got.Hash != sum {
		t.Errorf("Snapshot of the numbered table: %+v, %v; want hash %s", got, err, sum)
	}
	if b, _ := os.ReadFile(dst); string(b) != "1 echo a\n2 echo c\n" {
		t.Errorf("the copy reads %q", b)
	}
	os.WriteFile(p, []byte("1 echo a\n2 echo d\n"), 0o644)
	os.Remove(dst)
	if _, _, err := Snapshot(p, dst, 0o644, sum); !errors.Is(err, ErrChanged) {
		t.Errorf("Snapshot of a changed table: %v, want ErrChanged", err)
	}
	if _, err := os.Stat(dst); err == nil {
		t.Errorf("a refused Snapshot left its copy")
	}
}
