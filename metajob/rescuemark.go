package metajob

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The rescue's mark (rescue.go): MISC/rescue.RUN/NAME, made by O_EXCL
// create, holding its maker's nonce; the one who made it carries out the
// rescue; its owner's lease (look.go) looks for it.

// unmark removes the mark of status file name if it is this job's.
func (r *rescuer) unmark(name string) {
	path := filepath.Join(r.dir, name)
	if b, err := os.ReadFile(path); err == nil && strings.Contains(string(b), " "+r.nonce+" ") {
		os.Remove(path)
	}
}

// mark takes the rescue of status file name (state: why, for the mark's
// reader): it reports whether this job made the mark, deciding from the
// mark's content (its nonce), and queues the rescue. "none" marks a file
// looked at with nothing to rescue.
func (r *rescuer) mark(name, state string) bool { return r.markAs(name, name, state) }

// markAs is mark, its mark named mark (a rescue taken over: name~K).
func (r *rescuer) markAs(name, mark, state string) bool {
	path := filepath.Join(r.dir, mark)
	content := fmt.Sprintf("%s %s %s %s %d\n", r.m.self.ID, r.nonce, state, time.Now().UTC().Format(time.RFC3339), r.marks.Add(1))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err == nil {
		_, err = f.WriteString(content)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		if b, rerr := os.ReadFile(path); rerr != nil || string(b) != content {
			return false
		}
	}
	if state != "none" {
		r.mu.Lock()
		r.pending = append(r.pending, pendingRescue{name: name, mark: mark, at: time.Now(), state: state})
		r.mu.Unlock()
	}
	return true
}

// markedBy reads the mark of status file name: the ID of the job that
// rescued its cases, ok false if there is no mark (or it marks nothing
// rescued). err is a lookup that failed.
func (r *rescuer) markedBy(name string) (string, bool, error) {
	// The directory is opened first: on NFS, its opening revalidates it,
	// so that a mark made by another client since is not hidden by a
	// cached "no such file".
	d, err := os.Open(r.dir)
	if err != nil {
		return "", false, err
	}
	defer d.Close()
	fd, err := unix.Openat(int(d.Fd()), name, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err == unix.ENOENT {
		return "", false, nil
	}
	if err != nil {
		return "", false, &os.PathError{Op: "open", Path: filepath.Join(r.dir, name), Err: err}
	}
	f := os.NewFile(uintptr(fd), name)
	b, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		return "", false, err
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
