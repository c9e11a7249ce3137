package lease

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/farm-hpc/farm/fsretry"
	"github.com/farm-hpc/farm/vfs"
	"golang.org/x/sys/unix"
)

// Marks are the rescue marks of a run (metajob/rescue.go): in Dir
// (MISC/rescue.RUN), one file a rescued job, named after its status file,
// made by an O_EXCL create and holding its maker's line: "ID NONCE STATE
// ...". The one who made a mark carries out the rescue; the marked job's
// lease looks for it.
type Marks struct {
	FS  vfs.FS
	Dir string
}

// Mark makes the mark name holding content (its maker's nonce among its
// words): it reports whether this maker made it, deciding from the mark's
// content, not from the create's reply (which may be lost after the create
// succeeded).
func (m Marks) Mark(name, content string) bool {
	path := filepath.Join(m.Dir, name)
	err := vfs.WriteNewAt(m.FS, unix.AT_FDCWD, path, []byte(content), 0o644)
	if err != nil {
		if b, rerr := vfs.ReadFile(m.FS, path); rerr != nil || string(b) != content {
			return false
		}
	}
	return true
}

// Unmark removes the mark name if its maker's nonce is nonce.
func (m Marks) Unmark(name, nonce string) {
	path := filepath.Join(m.Dir, name)
	if b, err := vfs.ReadFile(m.FS, path); err == nil && strings.Contains(string(b), " "+nonce+" ") {
		vfs.Remove(m.FS, path)
	}
}

// MarkedBy reads the mark name: the ID of the job that rescued the cases
// of the job it names; ok false if there is no mark (or it marks nothing
// rescued: "none"). err is a lookup that failed, or a passing ENOENT
// (transient: absent).
func (m Marks) MarkedBy(name string) (by string, ok bool, err error) {
	// The directory is opened first: on NFS, its opening revalidates it,
	// so that a mark made by another client since is not hidden by a
	// cached "no such file".
	d, err := m.FS.Openat(unix.AT_FDCWD, m.Dir, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err == unix.ENOENT {
		return "", false, m.dirAbsent()
	}
	if err != nil {
		return "", false, &os.PathError{Op: "open", Path: m.Dir, Err: err}
	}
	defer m.FS.Close(d)
	path := filepath.Join(m.Dir, name)
	fd, err := m.FS.Openat(d, name, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err == unix.ENOENT {
		return "", false, m.absent(d, name)
	}
	if err != nil {
		return "", false, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := &vfs.File{FS: m.FS, Fd: fd, Name: path}
	b, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		return "", false, &os.PathError{Op: "read", Path: path, Err: err}
	}
	fl := strings.Fields(string(b))
	if len(fl) >= 3 && fl[2] == "none" {
		return "", false, nil
	}
	if len(fl) == 0 {
		return "another meta-job", true, nil // being written
	}
	return fl[0], true, nil
}

// dirAbsent decides what a lookup's ENOENT for the marks' directory
// means: nil (no mark: every mark is made in it, and a meta-job's rescuer
// makes it at its first look, not at the job's start) if its parent's
// listing does not hold it either; a transient error if it does (a
// passing ENOENT, as in absent).
func (m Marks) dirAbsent() error {
	parent, base := filepath.Dir(m.Dir), filepath.Base(m.Dir)
	d, err := m.FS.Openat(unix.AT_FDCWD, parent, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_DIRECTORY, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: parent, Err: err}
	}
	defer m.FS.Close(d)
	names, err := m.FS.Getdents(d)
	if err != nil {
		return &os.PathError{Op: "readdirent", Path: parent, Err: err}
	}
	if slices.Contains(names, base) {
		return fsretry.Transient(&os.PathError{Op: "open", Path: m.Dir, Err: unix.ENOENT})
	}
	return nil
}

// absent decides what a lookup's ENOENT for the mark name in the
// directory open as d means: nil (no mark) if the directory's listing does
// not hold it either; a transient error (the look is made again) if it
// does: a passing ENOENT, which a GlusterFS lookup answers while a brick is
// down, and which would let a job whose cases were rescued start them
// (simulator, seed 1343 on gluster-dht). The listing is read from a brick
// that is up; the directory holds a few names (the marks of the run's
// dead jobs, two checks', the warden's).
func (m Marks) absent(d int, name string) error {
	if mutated("mark-lookup-trusts-enoent") {
		return nil
	}
	names, err := m.FS.Getdents(d)
	if err != nil {
		return &os.PathError{Op: "readdirent", Path: m.Dir, Err: err}
	}
	if slices.Contains(names, name) {
		return fsretry.Transient(&os.PathError{Op: "open", Path: filepath.Join(m.Dir, name), Err: unix.ENOENT})
	}
	return nil
}
