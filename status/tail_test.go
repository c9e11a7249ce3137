package status

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestTailReadsOnlyWhatIsAppended(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	w1, _ := CreateCap(filepath.Join(dir, "status.1"), "1", 0, 1, "h", Capacity{}, nil)
	w1.Start(1, now)
	w1.End(1, 0, now, time.Second)
	w1.Start(2, now)
	w1.End(2, 3, now, time.Second)
	w1.Start(3, now) // running while job 1 lives
	tail := NewTail(dir)
	live := map[string]bool{"1": true}
	got, err := tail.Refresh(func(j string) bool { return live[j] }, float64(now.Unix()-60))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Counts{Succeeded: 1, Failed: 1, Running: 1}, *got.Runs[1]); diff != "" {
		t.Errorf("run 1 (-want +got):\n%s", diff)
	}
	if got.Succeeded != 1 || got.Recent != 2 {
		t.Errorf("succeeded %d recent %d", got.Succeeded, got.Recent)
	}

	// Appended: case 3 ends; a torn line is left for later; a new file of run 2.
	w1.End(3, 0, now, time.Second)
	w1.Close()
	fh, _ := os.OpenFile(filepath.Join(dir, "status.1"), os.O_APPEND|os.O_WRONLY, 0)
	fh.WriteString("S 4 1")
	fh.Close()
	w2, _ := CreateCap(filepath.Join(dir, "status.2"), "2", 0, 2, "h", Capacity{}, nil)
	w2.Start(2, now)
	w2.End(2, 0, now, time.Second)
	w2.Start(5, now) // job 2 is dead: interrupted
	w2.Close()
	got, _ = tail.Refresh(func(j string) bool { return live[j] }, float64(now.Unix()-60))
	if diff := cmp.Diff(Counts{Succeeded: 2, Failed: 1}, *got.Runs[1]); diff != "" {
		t.Errorf("run 1 after append (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(Counts{Succeeded: 1, Interrupted: 1}, *got.Runs[2]); diff != "" {
		t.Errorf("run 2 (-want +got):\n%s", diff)
	}
	if got.Succeeded != 3 || got.Recent != 4 {
		t.Errorf("succeeded %d recent %d, want 3 and 4", got.Succeeded, got.Recent)
	}
	// The torn line completes: case 4 starts in live job 1.
	fh, _ = os.OpenFile(filepath.Join(dir, "status.1"), os.O_APPEND|os.O_WRONLY, 0)
	fh.WriteString("700000000.000 h\n")
	fh.Close()
	got, _ = tail.Refresh(func(j string) bool { return live[j] }, float64(now.Unix()-60))
	if got.Runs[1].Running != 1 {
		t.Errorf("run 1 running = %d, want 1", got.Runs[1].Running)
	}
}

// TestTailSettlesAsReadFile: Tail decides the open cases as ReadFile does
// (it replays the same way): an end record matches its own case's start,
// not any open one, and a meta-job that wrote its Q record runs nothing,
// whatever the batch system says of its job.
func TestTailSettlesAsReadFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("status.1", "# farm-status v1 job=1 run=1 host=h\nS 2 1700000000.000 h\nE 9 0 1699999990.000 1.000 h\n")
	write("status.2", "# farm-status v1 job=2 run=1 host=h\nS 3 1700000000.000 h\nQ 1700000001.000 no case left\n")
	got, err := NewTail(dir).Refresh(func(string) bool { return true }, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Counts{Succeeded: 1, Running: 1, Interrupted: 1}, *got.Runs[1]); diff != "" {
		t.Errorf("run 1 (-want +got):\n%s", diff)
	}
}

// TestFollower: a Follower reads only what was appended since its last
// Read, a complete line at a time: a Q record being written is read once
// its line is complete; damaged lines are skipped.
func TestFollower(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "status.7.r1")
	appendTo := func(s string) {
		t.Helper()
		fh, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		fh.WriteString(s)
		fh.Close()
	}
	fl := NewFollower(path)
	if _, err := fl.Read(); !os.IsNotExist(err) {
		t.Fatalf("no file yet: %v", err)
	}
	header := "# farm-status v1 job=7 run=2 host=h restart=1\n"
	appendTo(header + "S 1 1700000000.000 h\nQ x\n")
	f, err := fl.Read()
	if err != nil || f.Job != "7" || f.Restart != 1 || f.Run != 2 || f.Quitted {
		t.Fatalf("%+v, %v: want job 7, restart 1, run 2, not quitted (a damaged Q is skipped)", f, err)
	}
	// What was read is not read again: the lines read are spoiled.
	if err := os.WriteFile(path, []byte(strings.Repeat("x", len(header))+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	appendTo(strings.Repeat("y", len("S 1 1700000000.000 h\nQ x\n")-2) + "\n")
	for i, part := range []string{"Q 17000", "00009.000 No cases", " left\n"} {
		appendTo(part)
		f, err = fl.Read()
		if err != nil || f.Run != 2 || f.Quitted != (i == 2) {
			t.Fatalf("after %q: %+v, %v", part, f, err)
		}
	}
	if f.Quit != "No cases left" || f.QuitAt != 1_700_000_009 {
		t.Errorf("Q record read as %q at %v", f.Quit, f.QuitAt)
	}
	os.Remove(path)
	os.Mkdir(path, 0o755)
	if _, err := NewFollower(path).Read(); err == nil || !strings.Contains(err.Error(), path+" is a directory") {
		t.Errorf("a directory: %v", err)
	}
}

// TestTailTornLineAlone: a line being written, all that was appended since
// the last Refresh, is read once complete (it was skipped as too long).
func TestTailTornLineAlone(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "status.1")
	os.WriteFile(path, []byte("# farm-status v1 job=1 run=1 host=h\n"), 0o644)
	tail := NewTail(dir)
	live := func(string) bool { return true }
	for _, part := range []string{"", "S 4 17", "00000000.000 h\n"} {
		fh, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
		fh.WriteString(part)
		fh.Close()
		if _, err := tail.Refresh(live, 0); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := tail.Refresh(live, 0); got.Runs[1].Running != 1 {
		t.Errorf("run 1 %+v: want case 4 running", *got.Runs[1])
	}
}
