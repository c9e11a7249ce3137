package metajob

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestQuitPollFollows: the warden's look at the jobs still running reads
// only what each appended since its last look: a job is let go once its Q
// record is complete, and the run is over when none is left; a job whose
// file is not there yet stays watched.
func TestQuitPollFollows(t *testing.T) {
	dir := t.TempDir()
	r := &rescuer{statusDir: dir}
	appendTo := func(name, s string) {
		t.Helper()
		fh, err := os.OpenFile(filepath.Join(dir, name), os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		fh.WriteString(s)
		fh.Close()
	}
	header := "# farm-status v1 job=1 run=1 host=h\n"
	appendTo("status.1", header+"S 1 1700000000.000 h\n")
	appendTo("status.2", "# farm-status v1 job=2 run=1 host=h\nQ 1700000000.000 No cases left\n")
	r.watch, r.watchGen = []string{"status.1", "status.2", "status.3"}, 1
	poll := func(want ...string) {
		t.Helper()
		r.quitPoll()
		if !slices.Equal(r.watch, want) || r.over != (len(want) == 0) {
			t.Fatalf("watching %v, over %v; want %v", r.watch, r.over, want)
		}
	}
	poll("status.1", "status.3")
	// What was read is not read again: a Q in the place of the S record
	// (as long) is not seen.
	os.WriteFile(filepath.Join(dir, "status.1"), []byte(header+"Q 1700000000.000 xyz\n"), 0o644)
	appendTo("status.1", "E 1 0 1700000000.000 1.000 h\nQ 1700000001.000 No cases")
	poll("status.1", "status.3")
	appendTo("status.1", " left\n")
	poll("status.3")
	if len(r.follow) != 2 || r.follow["status.2"] != nil {
		t.Errorf("following %d files: want those of status.1 and status.3", len(r.follow))
	}
	appendTo("status.3", strings.Replace(header, "job=1", "job=3", 1)+"Q 1700000000.000 No cases left\n")
	poll()
}
