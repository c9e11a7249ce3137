package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/farm-hpc/farm/integration/harness"
)

// TestLocalHostileSlotDirRefused: a job-slot directory another user could
// have made first (world-writable) is refused by farm submit with one line
// and nothing changed; the advice it gives (FARM_LOCAL_SLOT_DIR) works.
func TestLocalHostileSlotDirRefused(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	hostile := filepath.Join(tmp, fmt.Sprintf("farm-slots-%d", os.Getuid()))
	if err := os.Mkdir(hostile, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(hostile, 0o777)
	dir := newFarm(t, []string{"true", "true"}, "0-00:10")
	before, _ := os.ReadFile(filepath.Join(dir, "table.dat"))
	r := farmIn(t, dir, []string{"TMPDIR=" + tmp, "FARM_LOCAL_SLOT_DIR="}, "submit", "1", "--backend", "local")
	msg := strings.TrimSpace(r.Err)
	if r.Code != 1 || strings.Count(msg, "\n") != 0 || !strings.Contains(msg, hostile+" is writable by others") || !strings.Contains(msg, "FARM_LOCAL_SLOT_DIR") {
		t.Fatalf("submit with a world-writable slot directory: exit %d, stderr %q; want exit 1 and one line naming it and FARM_LOCAL_SLOT_DIR", r.Code, r.Err)
	}
	after, _ := os.ReadFile(filepath.Join(dir, "table.dat"))
	if string(after) != string(before) {
		t.Errorf("the refused submit changed table.dat:\n%s", after)
	}
	if _, err := os.Stat(filepath.Join(dir, "MISC", "chain")); err == nil {
		t.Errorf("the refused submit started a run")
	}
	if entries, _ := os.ReadDir(hostile); len(entries) != 0 {
		t.Errorf("files made in the hostile directory: %v", entries)
	}
	// The advice works.
	mine := filepath.Join(t.TempDir(), "slots")
	env := []string{"TMPDIR=" + tmp, "FARM_LOCAL_SLOT_DIR=" + mine}
	if r := farmIn(t, dir, env, "submit", "1", "--backend", "local"); r.Code != 0 {
		t.Fatalf("submit with FARM_LOCAL_SLOT_DIR: exit %d, %s", r.Code, r.Err)
	}
	if r := farmIn(t, dir, env, "wait", "--timeout", "2m"); r.Code != 0 || !strings.Contains(r.Out, "2 succeeded") {
		t.Errorf("wait: exit %d, %q %q", r.Code, r.Out, r.Err)
	}
	if fi, err := os.Stat(mine); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the slot directory: %v, %v; want it made 0700", fi, err)
	}
}

// TestLocalFileModesFollowTableAndUmask: table.dat_ and each run's own
// table (and its source record) get table.dat's mode (a private table
// stays private), and the job records the umask's.
func TestLocalFileModesFollowTableAndUmask(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, []string{"true", "false"}, "0-00:10")
	if err := os.Chmod(filepath.Join(dir, "table.dat"), 0o600); err != nil {
		t.Fatal(err)
	}
	// farm under umask 077, as a careful user runs it.
	umask := func(args ...string) result {
		cmd := exec.Command("sh", append([]string{"-c", `umask 077 && exec "$0" "$@"`, bin(t)}, args...)...)
		cmd.Dir, cmd.Env = dir, os.Environ()
		return harness.Exec(t, cmd, args)
	}
	for _, args := range [][]string{{"submit", "1", "--backend", "local"}, {"wait", "--timeout", "2m"}, {"resubmit", "1", "--backend", "local"}, {"wait", "--timeout", "2m"}} {
		if r := umask(args...); r.Code != 0 && !(args[0] == "wait" && r.Code == exitNotAllOK) {
			t.Fatalf("farm %v: exit %d, %s", args, r.Code, r.Err)
		}
	}
	private, _ := filepath.Glob(filepath.Join(dir, "MISC", "table.run*"))
	if len(private) != 4 {
		t.Errorf("MISC holds the run tables and their source records %v, want 2 of each", private)
	}
	for _, name := range []string{"table.dat", "table.dat_", "table.dat.orig"} {
		private = append(private, filepath.Join(dir, name))
	}
	for _, name := range private {
		if fi, err := os.Stat(name); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v; want mode 0600, as table.dat", name, fi, err)
		}
	}
	recs, _ := filepath.Glob(filepath.Join(dir, "MISC", "jobs", "*"))
	if len(recs) == 0 {
		t.Fatal("no job records")
	}
	for _, p := range recs {
		if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %04o, want 0600 under umask 077", p, fi.Mode().Perm())
		}
	}
}

// TestInitOnAFullDiskLeavesNothing: farm init that runs out of space makes
// no farm (no half-made directory, no temporary left), and a second init
// with space works.
func TestInitOnAFullDiskLeavesNothing(t *testing.T) {
	t.Parallel()
	mnt := mountTmpfs(t, "size=8k") // two pages: two of the five templates
	target := filepath.Join(mnt, "farm")
	r := farmIn(t, mnt, nil, "init", target)
	if r.Code != 1 || strings.Count(strings.TrimSpace(r.Err), "\n") != 0 || !strings.Contains(r.Err, "no space left on device") || !strings.Contains(r.Err, "nothing was made") {
		t.Fatalf("init on a full disk: exit %d, stderr %q; want exit 1, one line", r.Code, r.Err)
	}
	if entries, _ := os.ReadDir(mnt); len(entries) != 0 {
		t.Errorf("init on a full disk left %v", entries)
	}
	// Room again (the filesystem grown): init works, in the same place.
	if out, err := exec.Command("mount", "-o", "remount,size=1m", mnt).CombinedOutput(); err != nil {
		t.Fatalf("remount: %v %s", err, out)
	}
	if r := farmIn(t, mnt, nil, "init", target); r.Code != 0 {
		t.Fatalf("init with room: exit %d, %s", r.Code, r.Err)
	}
	if entries, _ := os.ReadDir(target); len(entries) != 5 {
		t.Errorf("init made %d files, want 5", len(entries))
	}
}
