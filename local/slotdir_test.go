package local

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckSlotDirRefusesHostileDirectories: a slot directory that another
// user could write, or that is a link or another user's, is refused with
// one line saying what to do; a missing one is made 0700.
func TestCheckSlotDirRefusesHostileDirectories(t *testing.T) {
	base := t.TempDir()
	fresh := filepath.Join(base, "fresh")
	if err := CheckSlotDir(fresh); err != nil {
		t.Fatalf("a new slot directory: %v", err)
	}
	if fi, _ := os.Stat(fresh); fi.Mode().Perm() != 0o700 {
		t.Errorf("made with mode %04o, want 0700", fi.Mode().Perm())
	}
	open := filepath.Join(base, "open")
	os.Mkdir(open, 0o700)
	os.Chmod(open, 0o777) // as a hostile user who made it first would
	link := filepath.Join(base, "link")
	os.Symlink(fresh, link)
	file := filepath.Join(base, "file")
	os.WriteFile(file, nil, 0o600)
	cases := map[string]string{open: "is writable by others (mode 0777)", link: "is a symbolic link", file: "is not a directory"}
	if os.Geteuid() == 0 {
		theirs := filepath.Join(base, "theirs")
		os.Mkdir(theirs, 0o700)
		if err := os.Chown(theirs, 4242, 4242); err != nil {
			t.Fatal(err)
		}
		cases[theirs] = "belongs to another user (uid 4242)"
	}
	for dir, why := range cases {
		err := CheckSlotDir(dir)
		if err == nil || !strings.Contains(err.Error(), why) || !strings.Contains(err.Error(), EnvSlotDir) || strings.Contains(err.Error(), "\n") {
			t.Errorf("CheckSlotDir(%s) = %v; want one line saying it %s, and how to choose another", filepath.Base(dir), err, why)
		}
	}
}

// TestSlotFileLinkIsNotFollowed: a slot file planted as a link is refused,
// and nothing is made where it points.
func TestSlotFileLinkIsNotFollowed(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "slots")
	if err := CheckSlotDir(dir); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "victim")
	l := New(t.TempDir(), Options{Slots: 1, SlotDir: dir})
	if err := os.Symlink(target, filepath.Join(dir, "slot.0")); err != nil {
		t.Fatal(err)
	}
	fh, err := l.takeSlot()
	if err == nil {
		fh.Close()
		t.Fatal("a slot taken through a link")
	}
	if _, serr := os.Lstat(target); !os.IsNotExist(serr) {
		t.Errorf("the link's target was made: %v", serr)
	}
	// Through a hostile directory: refused before any slot file is opened.
	os.Remove(filepath.Join(dir, "slot.0"))
	os.Chmod(dir, 0o777)
	if fh, err := l.takeSlot(); err == nil || !strings.Contains(err.Error(), "writable by others") {
		if fh != nil {
			fh.Close()
		}
		t.Errorf("takeSlot in a world-writable directory: %v", err)
	}
}
