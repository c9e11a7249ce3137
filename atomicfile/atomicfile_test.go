package atomicfile

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestWriteReplacesWhole checks that Write and WriteBytes replace a file
// with the mode asked (never writable by others), that a failed fill
// leaves the old file as it was, that the backup is the old file, and
// that no temporary file is left behind.
func TestWriteReplacesWhole(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := WriteBytes(path, 0o666, []byte("one\n")); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := Write(path, 0o644, func(w *bufio.Writer) error { w.WriteString("half"); return boom }, ""); !errors.Is(err, boom) {
		t.Fatalf("Write with a failing fill: %v, want %v", err, boom)
	}
	if err := Write(path, 0o600, func(w *bufio.Writer) error { _, err := w.WriteString("two\n"); return err }, path+".bak"); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"f": "two\n", "f.bak": "one\n"} {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != want {
			t.Errorf("%s reads %q, %v; want %q", name, b, err, want)
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode of f: %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	if fi, err := os.Stat(path + ".bak"); err != nil || fi.Mode().Perm()&0o022 != 0 {
		t.Errorf("mode of f.bak: %v, %v; want no write for group or others", fi.Mode().Perm(), err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("%d entries in the directory, want f and f.bak: %v", len(entries), entries)
	}
}

// TestLinkReplaces checks that Link makes path the target's hard link,
// replacing an older path, and leaves no temporary name.
func TestLinkReplaces(t *testing.T) {
	dir := t.TempDir()
	target, path := filepath.Join(dir, "target"), filepath.Join(dir, "path")
	if err := os.WriteFile(target, []byte("new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Link(target, path); err != nil {
		t.Fatal(err)
	}
	a, _ := os.Stat(target)
	b, err := os.Stat(path)
	if err != nil || !os.SameFile(a, b) {
		t.Errorf("path is not target's link: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("%d entries in the directory, want target and path: %v", len(entries), entries)
	}
}
