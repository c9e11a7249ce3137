// Package fsretry retries filesystem operations that fail for a reason that
// may go away by itself — a full disk, an exhausted inode table or quota, an
// I/O error, a stale network-filesystem handle, a server out of reach — with backoff, for a bounded
// time, saying so: one line when the retries start and one when the
// filesystem works again. The claim commits (casetable), the status records
// (status) and everything else a meta-job writes (farm) retry this way, in
// the same words.
package fsretry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"github.com/farm-hpc/farm/vfs"
)

// Default is how long an operation is retried when no limit is given.
const Default = 5 * time.Minute

// The backoff: the first wait, doubled after each failure up to maxWait.
const (
	firstWait = 100 * time.Millisecond
	maxWait   = 5 * time.Second
)

// IsTransient reports whether err is a filesystem error that may go away by
// itself: no space, no inodes, quota exceeded, an I/O error, a stale handle,
// a network filesystem's server out of reach (ENOTCONN: a GlusterFS client
// whose bricks are gone; ETIMEDOUT: a soft NFS mount), or an error its
// caller marked as such (Transient).
func IsTransient(err error) bool {
	var t *transientError
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) ||
		errors.Is(err, syscall.EIO) || errors.Is(err, syscall.ESTALE) ||
		errors.Is(err, syscall.ENOTCONN) || errors.Is(err, syscall.ETIMEDOUT) ||
		errors.As(err, &t)
}

// Transient marks err as one that may go away by itself, whatever it is:
// for an error whose meaning its caller checked (an ENOENT from a network
// filesystem for a name whose directory is still there).
func Transient(err error) error {
	if err == nil {
		return nil
	}
	return &transientError{err}
}

type transientError struct{ err error }

func (e *transientError) Error() string { return e.err.Error() }
func (e *transientError) Unwrap() error { return e.err }

// Retrier keeps the state of one operation's retries. The zero value
// retries for Default and reports on os.Stderr.
type Retrier struct {
	Limit time.Duration // how long to retry; Default if 0
	Log   io.Writer     // where the two lines go; os.Stderr if nil
	What  string        // if set, named in the recovery line (e.g. a path)
	Clock Clock         // the time and the waits; the system's if nil

	since time.Time
	wait  time.Duration
}

// Clock is where a Retrier reads the time and waits (a vfs.FS is one).
type Clock interface {
	Now() time.Time
	Sleep(ctx context.Context, d time.Duration) error
}

// clock is r.Clock, or the system's.
func (r *Retrier) clock() Clock {
	if r.Clock != nil {
		return r.Clock
	}
	return vfs.OS{}
}

func (r *Retrier) now() time.Time { return r.clock().Now() }

func (r *Retrier) sleep(ctx context.Context, d time.Duration) error {
	return r.clock().Sleep(ctx, d)
}

func (r *Retrier) log() io.Writer {
	if r.Log != nil {
		return r.Log
	}
	return os.Stderr
}

func (r *Retrier) limit() time.Duration {
	if r.Limit > 0 {
		return r.Limit
	}
	return Default
}

// Again reports whether the operation that failed with err should be tried
// again: err is transient and the limit has not passed since the first
// failure. If so it waits first (0.1 s, doubling to 5 s); a cancelled ctx
// ends the wait with false.
func (r *Retrier) Again(ctx context.Context, err error) bool {
	if !IsTransient(err) {
		return false
	}
	if r.since.IsZero() {
		r.since, r.wait = r.now(), firstWait
		fmt.Fprintf(r.log(), "farm: %v; retrying for up to %s\n", err, r.limit())
	} else if r.now().Sub(r.since) >= r.limit() {
		return false
	}
	if r.sleep(ctx, r.wait) != nil {
		return false
	}
	r.wait = min(2*r.wait, maxWait)
	return true
}

// OK records that the operation worked; after retries it says so once.
func (r *Retrier) OK() {
	if r.since.IsZero() {
		return
	}
	what := ""
	if r.What != "" {
		what = " (" + r.What + ")"
	}
	fmt.Fprintf(r.log(), "farm: the filesystem works again after %s%s\n", r.now().Sub(r.since).Round(time.Millisecond), what)
	r.since = time.Time{}
}

// Do runs op until it works, fails for a reason that is not transient, or
// has failed for r's limit; it returns op's last error.
func (r *Retrier) Do(ctx context.Context, op func() error) error {
	for {
		err := op()
		if err == nil {
			r.OK()
			return nil
		}
		if !r.Again(ctx, err) {
			return err
		}
	}
}
