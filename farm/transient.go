package farm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/farm-hpc/farm/fsretry"
)

// TransientRetry is how long a job retries a filesystem operation that
// fails for a reason that may go away by itself (a full disk or quota, an
// I/O error: fsretry.IsTransient), as the claim commits and the status
// records do.
const TransientRetry = fsretry.Default

// retryTransient runs op until it works, fails for another reason, or has
// failed for limit; it says so on log when it starts retrying and when op
// works again, in the words of the claim's retries.
func retryTransient(log io.Writer, limit time.Duration, op func() error) error {
	r := fsretry.Retrier{Limit: limit, Log: log}
	return r.Do(context.Background(), op)
}

// jobOutput is the job's output file as the meta-job writes to it: its own
// messages and the cases' output, which it copies from a pipe. A write that
// fails for a transient reason is retried from where it stopped, for up to
// Retry, so that a brief outage loses nothing: meanwhile the cases' output
// waits in the pipe (a case that fills it waits too), and the meta-job's
// messages about the outage appear once the file can be written again,
// followed by a line that says for how long it could not. A write that gave
// up drops its bytes, and later writes are tried once each until one works
// (a lasting outage costs one Retry, not one per line); that one is followed
// by a line that says how much was lost.
type jobOutput struct {
	f     *os.File
	Retry time.Duration // TransientRetry if 0

	giveUp  bool   // a write gave up; no retrying until one works
	lost    int64  // bytes dropped since then
	lostErr error  // why
	note    []byte // a line to add after the next write that ends a line
}

func (o *jobOutput) Write(b []byte) (int, error) {
	limit := o.Retry
	if limit == 0 {
		limit = TransientRetry
	}
	var since time.Time
	var first error
	wait := 100 * time.Millisecond
	done := 0
	for {
		n, err := o.f.Write(b[done:])
		done += n
		if err == nil {
			break
		}
		if since.IsZero() {
			since, first = time.Now(), err
		}
		if !fsretry.IsTransient(err) || o.giveUp || time.Since(since) >= limit {
			o.giveUp = o.giveUp || fsretry.IsTransient(err)
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
		o.note = fmt.Appendf(o.note, "farm: this job's output could not be written for %s (%v); retried: nothing was lost\n",
			time.Since(since).Round(time.Millisecond), first)
	}
	if o.lost > 0 {
		o.note = fmt.Appendf(o.note, "farm: %d bytes of this job's output were lost: %v\n", o.lost, o.lostErr)
	}
	o.giveUp, o.lost, o.lostErr = false, 0, nil
	// Not in the middle of a case's line.
	if len(o.note) > 0 && bytes.HasSuffix(b, []byte("\n")) {
		o.f.Write(o.note)
		o.note = o.note[:0]
	}
	return len(b), nil
}
