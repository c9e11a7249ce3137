package casetable

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nightlyone/lockfile"

	"github.com/farm-hpc/farm/farm/proc"
)

// DefaultStaleAfter is how long a lock held by a process on another host
// must stay unchanged before it is judged abandoned. The lock is held for
// microseconds per claim, so a minute of no change means its holder died.
const DefaultStaleAfter = 60 * time.Second

// Lock is the farm's shared lock, exclusive across processes and across hosts
// that share the farm directory.
//
// It has two levels. The host lock (MISC/lock.<host>, a nightlyone/lockfile
// holding a PID) serialises the processes of one host; its holder's liveness
// can be checked, so a lock left by a dead process of this host is recovered
// at once. The farm lock (MISC/lock) is then taken by hard-linking a file
// holding "host pid nonce" to its name, which is atomic on NFS and local
// filesystems. A farm lock from another host cannot be checked for liveness;
// it is judged stale only when it has stayed the same for StaleAfter of our
// own (monotonic) clock, so clocks that disagree between hosts do not matter.
type Lock struct {
	// StaleAfter is how long a foreign host's lock must stay unchanged
	// before it is broken; DefaultStaleAfter if zero.
	StaleAfter time.Duration

	path  string
	host  string
	hostL lockfile.Lockfile
	mine  string // our token file, linked to path to take the lock
	token []byte

	// stale-lock observation
	seen      []byte
	seenSince time.Time
}

// NewLock returns the lock at path (a file in the farm's MISC directory).
// host names this host; it must be the same for every process of a host.
func NewLock(path, host string) (*Lock, error) {
	path, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	hl, err := lockfile.New(path + "." + host)
	if err != nil {
		return nil, err
	}
	return &Lock{path: path, host: host, hostL: hl}, nil
}

func (l *Lock) staleAfter() time.Duration {
	if l.StaleAfter > 0 {
		return l.StaleAfter
	}
	return DefaultStaleAfter
}

// ensureToken creates the file we hard-link to take the farm lock. It is made
// once per process and reused for every acquisition.
func (l *Lock) ensureToken() error {
	if l.mine != "" {
		if _, err := os.Lstat(l.mine); err == nil {
			return nil
		}
	}
	// host, PID, the PID's start time (against PID reuse: a holder on
	// this host is alive only if the same process still runs), nonce.
	l.token = fmt.Appendf(nil, "%s %d %d %d\n", l.host, os.Getpid(), proc.StartTicks(os.Getpid()), time.Now().UnixNano())
	l.mine = fmt.Sprintf("%s.%s.%d", l.path, l.host, os.Getpid())
	return os.WriteFile(l.mine, l.token, 0o644)
}

// Close removes the per-process token file.
func (l *Lock) Close() error {
	if l.mine == "" {
		return nil
	}
	err := os.Remove(l.mine)
	l.mine = ""
	return err
}

// Lock blocks until both levels are held or ctx ends.
func (l *Lock) Lock(ctx context.Context) error {
	if err := l.ensureToken(); err != nil {
		return err
	}
	wait := newBackoff()
	var hostSeen []byte
	var hostSince time.Time
	for {
		err := l.hostL.TryLock()
		if err == nil {
			break
		}
		// Busy, or the holder released between our link and our read of
		// its PID: both mean try again.
		var te interface{ Temporary() bool }
		if !os.IsNotExist(err) && (!errors.As(err, &te) || !te.Temporary()) {
			return fmt.Errorf("taking the host lock %s: %w", l.hostL, err)
		}
		// lockfile trusts a live PID; a PID reused by another process after
		// its holder died would hold the host lock for ever. It is held for
		// microseconds: unchanged for StaleAfter, it is stale.
		if b, rerr := os.ReadFile(string(l.hostL)); rerr == nil {
			if now := time.Now(); !bytes.Equal(b, hostSeen) {
				hostSeen, hostSince = b, now
			} else if now.Sub(hostSince) >= l.staleAfter() {
				fmt.Fprintf(os.Stderr, "farm: removed a stale host lock %s held by PID %s", l.hostL, b)
				os.Remove(string(l.hostL))
				hostSeen = nil
				continue
			}
		}
		if err := wait.sleep(ctx); err != nil {
			return err
		}
	}
	wait = newBackoff()
	for {
		err := os.Link(l.mine, l.path)
		if err == nil {
			l.seen = nil
			return nil
		}
		if !os.IsExist(err) {
			l.hostL.Unlock()
			return fmt.Errorf("taking the farm lock %s: %w", l.path, err)
		}
		// On NFS a link whose reply was lost reports EEXIST although it
		// succeeded: trust the inode, not the error.
		if l.holdsFarmLock() {
			l.seen = nil
			return nil
		}
		if l.maybeBreak() {
			continue
		}
		if err := wait.sleep(ctx); err != nil {
			l.hostL.Unlock()
			return err
		}
	}
}

func (l *Lock) holdsFarmLock() bool {
	a, err1 := os.Stat(l.mine)
	b, err2 := os.Stat(l.path)
	return err1 == nil && err2 == nil && os.SameFile(a, b)
}

// maybeBreak judges the current farm lock and removes it if stale. It
// reports whether it removed one.
func (l *Lock) maybeBreak() bool {
	content, err := os.ReadFile(l.path)
	if err != nil {
		return os.IsNotExist(err) // gone: retry at once
	}
	host, pid, start, _ := parseToken(content)
	stale := false
	if host == l.host {
		// We hold the host lock, so a live holder on this host is
		// impossible unless its process still runs (a recovered host lock
		// whose holder still lives is left alone).
		stale = pid <= 0 || !proc.AliveSince(pid, start)
	} else {
		now := time.Now()
		if !bytes.Equal(content, l.seen) {
			l.seen = content
			l.seenSince = now
		} else if now.Sub(l.seenSince) >= l.staleAfter() {
			stale = true
		}
	}
	if !stale {
		return false
	}
	// Move the stale lock aside and check that what we moved is what we
	// judged, so that a fresh lock taken meanwhile is put back, not lost.
	aside := fmt.Sprintf("%s.broken.%s.%d", l.path, l.host, os.Getpid())
	if err := os.Rename(l.path, aside); err != nil {
		return false
	}
	moved, _ := os.ReadFile(aside)
	if !bytes.Equal(moved, content) {
		os.Link(aside, l.path)
		os.Remove(aside)
		return false
	}
	os.Remove(aside)
	fmt.Fprintf(os.Stderr, "farm: broke a stale lock held by %s", content)
	l.seen = nil
	return true
}

// Unlock releases both levels.
func (l *Lock) Unlock() error {
	var err error
	if l.holdsFarmLock() {
		err = os.Remove(l.path)
	} else {
		err = fmt.Errorf("farm lock %s was taken from us (held longer than %s?)", l.path, l.staleAfter())
	}
	if herr := l.hostL.Unlock(); herr != nil && err == nil {
		err = fmt.Errorf("releasing host lock %s: %w", l.hostL, herr)
	}
	return err
}

// parseToken reads "host pid start nonce" (start: the holder's start
// ticks, 0 if unknown).
func parseToken(b []byte) (host string, pid int, start uint64, ok bool) {
	f := bytes.Fields(b)
	if len(f) < 2 {
		return "", 0, 0, false
	}
	pid, err := strconv.Atoi(string(f[1]))
	if len(f) >= 4 {
		start, _ = strconv.ParseUint(string(f[2]), 10, 64)
	}
	return string(f[0]), pid, start, err == nil
}

// backoff sleeps a little longer each time, from 20µs up to 5ms: the lock is
// held for microseconds, so waiters should retry quickly but not spin.
type backoff struct{ d time.Duration }

func newBackoff() *backoff { return &backoff{d: 20 * time.Microsecond} }

func (b *backoff) sleep(ctx context.Context) error {
	t := time.NewTimer(b.d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	}
	if b.d < 5*time.Millisecond {
		b.d *= 2
	}
	return nil
}
