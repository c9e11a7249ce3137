package fsretry

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// Writer is a job's output file as farm writes to it: the meta-job's own
// messages and the cases' output, which it copies from a pipe. A write that
// fails for a transient reason is retried from where it stopped, for up to
// Retry, so that a brief outage loses nothing: meanwhile the cases' output
// waits in the pipe (a case that fills it waits too), and the meta-job's
// messages about the outage appear once the file can be written again,
// followed by a line that says for how long it could not. A write that gave
// up drops its bytes, and later writes are tried once each until one works
// (a lasting outage costs one Retry, not one per line); that one is followed
// by a line that says how much was lost.
type Writer struct {
	F     *os.File
	Retry time.Duration // Default if 0
	// Notes, if set, is where the lines about an outage go, instead of
	// F: for a file that must hold only what was written to it (a file
	// of a loop's cases' output, whose notes go to the job's output).
	Notes io.Writer
	Name  string // what the notes call the file: "this job's output" if empty

	giveUp  bool   // a write gave up; no retrying until one works
	lost    int64  // bytes dropped since then
	lostErr error  // why
	note    []byte // a line to add after the next write that ends a line
}

func (o *Writer) Write(b []byte) (int, error) {
	limit := o.Retry
	if limit == 0 {
		limit = Default
	}
	var since time.Time
	var first error
	wait := 100 * time.Millisecond
	done := 0
	for {
		n, err := o.F.Write(b[done:])
		done += n
		if err == nil {
			break
		}
		if since.IsZero() {
			since, first = time.Now(), err
		}
		if !IsTransient(err) || o.giveUp || time.Since(since) >= limit {
			o.giveUp = o.giveUp || IsTransient(err)
			o.lost += int64(len(b) - done)
			o.lostErr = err
			return done, err
		}
		time.Sleep(wait)
		wait = min(2*wait, 5*time.Second)
	}
	if !since.IsZero() {
		// The output file's name is the batch system's affair (and
		// os.Stdout's is /dev/stdout): say why only.
		var pe *os.PathError
		if errors.As(first, &pe) {
			first = pe.Err
		}
		o.note = fmt.Appendf(o.note, "farm: %s could not be written for %s (%v); retried: nothing was lost\n", o.name(),
			time.Since(since).Round(time.Millisecond), first)
	}
	if o.lost > 0 {
		o.note = fmt.Appendf(o.note, "farm: %d bytes of %s were lost: %v\n", o.lost, o.name(), o.lostErr)
	}
	o.giveUp, o.lost, o.lostErr = false, 0, nil
	// Not in the middle of a case's line.
	if len(o.note) > 0 && o.Notes != nil {
		o.Notes.Write(o.note)
		o.note = o.note[:0]
	} else if len(o.note) > 0 && bytes.HasSuffix(b, []byte("\n")) {
		o.F.Write(o.note)
		o.note = o.note[:0]
	}
	return len(b), nil
}

// name is what the notes call the file.
func (o *Writer) name() string {
	if o.Name == "" {
		return "this job's output"
	}
	return o.Name
}
