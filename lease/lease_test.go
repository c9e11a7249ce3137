package lease

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/farm-hpc/farm/fsretry"
	"github.com/farm-hpc/farm/vfs"
	"golang.org/x/sys/unix"
)

func TestGapCountsEitherClock(t *testing.T) {
	t0 := time.Now()
	if g := Gap(t0.Add(3*time.Second), t0); g != 3*time.Second {
		t.Errorf("Gap = %s, want 3s", g)
	}
	// A wall clock reading without a monotonic one (a freeze the
	// monotonic clock did not see): the wall clock's measure.
	if g := Gap(t0.Round(0).Add(10*time.Minute), t0); g != 10*time.Minute {
		t.Errorf("Gap = %s, want 10m", g)
	}
}

func TestDueAndFence(t *testing.T) {
	t0 := time.Now()
	every := 5 * time.Second
	if d := Due(t0, time.Time{}, every, Before); d != every {
		t.Errorf("Due with no news = %s, want %s", d, every)
	}
	if d := Due(t0.Add(2*time.Second), t0, every, AfterRecord); d != 3*time.Second {
		t.Errorf("Due 2s after a look = %s, want 3s", d)
	}
	if d := Due(t0.Add(6*time.Second), t0, every, Before); d > 0 {
		t.Errorf("Due 6s after a look = %s, want due", d)
	}
	if f := Fence(every); f != every+Margin {
		t.Errorf("Fence = %s", f)
	}
	if Fenced(t0.Add(every+Margin), t0, every) || !Fenced(t0.Add(every+Margin+time.Millisecond), t0, every) {
		t.Errorf("Fenced is not past the fence")
	}
}

func TestMarks(t *testing.T) {
	m := Marks{FS: vfs.OS{}, Dir: t.TempDir()}
	if by, ok, err := m.MarkedBy("status.1"); ok || err != nil {
		t.Fatalf("no mark: %q %v %v", by, ok, err)
	}
	if !m.Mark("status.1", "7 n1 dead 2026 1\n") {
		t.Fatal("the first mark was not made")
	}
	if m.Mark("status.1", "8 n2 dead 2026 1\n") {
		t.Fatal("a second maker won the mark")
	}
	if by, ok, err := m.MarkedBy("status.1"); !ok || by != "7" || err != nil {
		t.Fatalf("marked: %q %v %v", by, ok, err)
	}
	m.Unmark("status.1", "n2") // not its maker's
	if _, err := os.Stat(filepath.Join(m.Dir, "status.1")); err != nil {
		t.Fatalf("another's unmark removed the mark: %v", err)
	}
	m.Unmark("status.1", "n1")
	if _, ok, _ := m.MarkedBy("status.1"); ok {
		t.Fatal("the mark is still there once its maker took it back")
	}
	m.Mark("status.2", "7 n1 none 2026 2\n")
	if _, ok, _ := m.MarkedBy("status.2"); ok {
		t.Fatal(`a "none" mark reads as a rescue`)
	}
}

// enoentFS answers ENOENT to the lookups of one name, as a GlusterFS
// client does while a brick is down; its listing holds the name.
type enoentFS struct {
	vfs.OS
	name string
}

func (f enoentFS) Openat(d int, name string, flags int, mode uint32) (int, error) {
	if name == f.name {
		return -1, unix.ENOENT
	}
	return f.OS.Openat(d, name, flags, mode)
}

func TestMarkedByPassingENOENT(t *testing.T) {
	dir := t.TempDir()
	m := Marks{FS: vfs.OS{}, Dir: dir}
	m.Mark("status.1", "7 n1 dead 2026 1\n")
	passing := Marks{FS: enoentFS{name: "status.1"}, Dir: dir}
	if _, ok, err := passing.MarkedBy("status.1"); ok || !fsretry.IsTransient(err) {
		t.Errorf("a mark listed but looked up missing: marked %v, err %v; want a transient error", ok, err)
	}
	none := Marks{FS: enoentFS{name: "status.2"}, Dir: dir}
	if _, ok, err := none.MarkedBy("status.2"); ok || err != nil {
		t.Errorf("no mark: marked %v, err %v", ok, err)
	}
}

// TestMarkedByNoDirectory: before any rescuer of the run has made the
// marks' directory, a look finds no mark (not an error that ends the
// job); a directory listed in its parent but looked up missing is a
// passing ENOENT, looked at again.
func TestMarkedByNoDirectory(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "rescue.1")
	if by, ok, err := (Marks{FS: vfs.OS{}, Dir: dir}).MarkedBy("status.1"); ok || err != nil {
		t.Fatalf("no marks' directory: marked %v by %q, err %v; want no mark", ok, by, err)
	}
	m := Marks{FS: vfs.OS{}, Dir: dir}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	m.Mark("status.1", "7 n1 dead 2026 1\n")
	passing := Marks{FS: enoentFS{name: dir}, Dir: dir}
	if _, ok, err := passing.MarkedBy("status.1"); ok || !fsretry.IsTransient(err) {
		t.Errorf("a directory listed but looked up missing: marked %v, err %v; want a transient error", ok, err)
	}
}
