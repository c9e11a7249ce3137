package fsretry

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/farm-hpc/farm/internal/testreq"
)

// Do with a limit, as the meta-job and the local supervisor use it.
func TestDoWithLimit(t *testing.T) {
	var log bytes.Buffer
	fails := 2
	err := (&Retrier{Log: &log, Limit: time.Minute}).Do(context.Background(), func() error {
		if fails > 0 {
			fails--
			return &os.PathError{Op: "mkdir", Path: "RUN1", Err: syscall.ENOSPC}
		}
		return nil
	})
	if err != nil || fails != 0 {
		t.Fatalf("err %v, %d failures left", err, fails)
	}
	if got := log.String(); !strings.Contains(got, "farm: mkdir RUN1: no space left on device; retrying for up to 1m0s\n") ||
		!strings.Contains(got, "farm: the filesystem works again after ") || strings.Count(got, "\n") != 2 {
		t.Errorf("log %q", got)
	}

	// Other errors are not retried; transient ones only for the limit.
	calls := 0
	perm := (&Retrier{Log: &log, Limit: time.Minute}).Do(context.Background(), func() error { calls++; return syscall.EACCES })
	if !errors.Is(perm, syscall.EACCES) || calls != 1 {
		t.Errorf("EACCES: %v after %d calls", perm, calls)
	}
	start := time.Now()
	full := (&Retrier{Log: &log, Limit: 300 * time.Millisecond}).Do(context.Background(), func() error { return syscall.EDQUOT })
	if d := time.Since(start); !errors.Is(full, syscall.EDQUOT) || d < 300*time.Millisecond || d > 2*time.Second {
		t.Errorf("EDQUOT for ever: %v after %s", full, d)
	}
}

// A job output on a device that is always full gives up after Retry, then
// tries each write once until one works, and says how much was lost.
func TestWriterGivesUpThenSaysWhatWasLost(t *testing.T) {
	devFull, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		testreq.Skip(t, "FARM_REQUIRE_LINUX", "no /dev/full: "+err.Error())
	}
	defer devFull.Close()
	o := &Writer{F: devFull, Retry: 300 * time.Millisecond}
	start := time.Now()
	if _, err := o.Write([]byte("first\n")); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write to /dev/full: %v", err)
	}
	if d := time.Since(start); d < 300*time.Millisecond || d > 2*time.Second {
		t.Errorf("gave up after %s, want about 300ms", d)
	}
	start = time.Now()
	if _, err := o.Write([]byte("second\n")); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("second write: %v", err)
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("the second write retried (%s) after the first gave up", d)
	}

	// The filesystem works again.
	p := filepath.Join(t.TempDir(), "out")
	fh, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	o.F = fh
	if n, err := o.Write([]byte("half a line, ")); err != nil || n != 13 {
		t.Fatalf("write: %d %v", n, err)
	}
	o.Write([]byte("the rest\n"))
	o.Write([]byte("more\n"))
	b, _ := os.ReadFile(p)
	want := "half a line, the rest\nfarm: 13 bytes of this job's output were lost: write /dev/full: no space left on device\nmore\n"
	if string(b) != want {
		t.Errorf("output %q, want %q", b, want)
	}
}
