package metajob

import (
	"fmt"
	"time"

	"github.com/farm-hpc/farm/lease"
	"github.com/farm-hpc/farm/vfs"
)

// The rescue's mark (rescue.go): MISC/rescue.RUN/NAME, made by O_EXCL
// create, holding its maker's nonce; the one who made it carries out the
// rescue; its owner's lease (look.go) looks for it. Package lease makes,
// reads and removes it (lease.Marks), over the system's filesystem.

// marks are the run's rescue marks.
func (r *rescuer) marks() lease.Marks { return lease.Marks{FS: vfs.OS{}, Dir: r.dir} }

// unmark removes the mark of status file name if it is this job's.
func (r *rescuer) unmark(name string) { r.marks().Unmark(name, r.nonce) }

// mark takes the rescue of status file name (state: why, for the mark's
// reader): it reports whether this job made the mark, deciding from the
// mark's content (its nonce), and queues the rescue. "none" marks a file
// looked at with nothing to rescue.
func (r *rescuer) mark(name, state string) bool { return r.markAs(name, name, state) }

// markAs is mark, its mark named mark (a rescue taken over: name~K).
func (r *rescuer) markAs(name, mark, state string) bool {
	content := fmt.Sprintf("%s %s %s %s %d\n", r.m.self.ID, r.nonce, state, time.Now().UTC().Format(time.RFC3339), r.made.Add(1))
	if !r.marks().Mark(mark, content) {
		return false
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
func (r *rescuer) markedBy(name string) (string, bool, error) { return r.marks().MarkedBy(name) }
