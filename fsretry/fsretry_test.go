package fsretry

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestDoRetriesTransientErrorsAndSaysSo(t *testing.T) {
	var log strings.Builder
	r := Retrier{Log: &log, What: "STATUSES/status.7"}
	n := 0
	err := r.Do(context.Background(), func() error {
		if n++; n < 3 {
			return &fs.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC}
		}
		return nil
	})
	if err != nil || n != 3 {
		t.Fatalf("Do = %v after %d tries; want nil after 3", err, n)
	}
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "farm: write x: no space left on device; retrying for up to 5m0s") ||
		!strings.HasPrefix(lines[1], "farm: the filesystem works again after ") || !strings.HasSuffix(lines[1], " (STATUSES/status.7)") {
		t.Errorf("log:\n%s", log.String())
	}
}

func TestDoGivesUpOnOtherErrorsAndAfterTheLimit(t *testing.T) {
	var log strings.Builder
	r := Retrier{Log: &log}
	perm := &fs.PathError{Op: "open", Path: "x", Err: syscall.EACCES}
	if err := r.Do(context.Background(), func() error { return perm }); err != perm || log.Len() != 0 {
		t.Errorf("EACCES: %v, log %q; want it returned at once, nothing said", err, log.String())
	}
	r = Retrier{Log: &log, Limit: 250 * time.Millisecond}
	start := time.Now()
	eio := fmt.Errorf("reading: %w", syscall.EIO)
	if err := r.Do(context.Background(), func() error { return eio }); !errors.Is(err, syscall.EIO) {
		t.Errorf("EIO for ever: %v", err)
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Errorf("gave up after %s; want the limit of 250ms first", d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r = Retrier{Log: &log}
	if err := r.Do(ctx, func() error { return eio }); !errors.Is(err, syscall.EIO) {
		t.Errorf("cancelled: %v", err)
	}
}

func TestIsTransient(t *testing.T) {
	for _, e := range []error{syscall.ENOSPC, syscall.EDQUOT, syscall.EIO, syscall.ESTALE, syscall.ENOTCONN, syscall.ETIMEDOUT} {
		if !IsTransient(&fs.PathError{Op: "x", Path: "y", Err: e}) {
			t.Errorf("%v not transient", e)
		}
	}
	// A spurious ENOENT its caller checked: transient, and still ENOENT.
	enoent := Transient(&fs.PathError{Op: "link", Path: "y", Err: syscall.ENOENT})
	if !IsTransient(fmt.Errorf("committing: %w", enoent)) || !errors.Is(enoent, syscall.ENOENT) || Transient(nil) != nil {
		t.Errorf("Transient(ENOENT): transient %v, ENOENT %v", IsTransient(enoent), errors.Is(enoent, syscall.ENOENT))
	}
	for _, e := range []error{syscall.EACCES, syscall.ENOENT, syscall.EEXIST, errors.New("x")} {
		if IsTransient(e) {
			t.Errorf("%v transient", e)
		}
	}
}
