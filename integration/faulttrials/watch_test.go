package faulttrials

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/farm-hpc/farm/integration/harness"
	"golang.org/x/sys/unix"
)

// commitWatch watches the claim chain's first segment directory of a farm
// (MISC/claims.NONCE/000000), where every claim commit takes its
// generation's slot s.N, writes g.N, makes its mark c.N and removes the
// slot (casetable/chain.go). A meta-job killed or stopped before its mark
// leaves its slot open (no c.N) until another meta-job voids it, after
// FARM_CLAIM_VOID_AFTER: that is how the trials tell a kill inside a
// commit.
type commitWatch struct {
	seg string
	ino int
}

// watchCommits starts watching the farm in dir (whose chain must exist:
// after submit).
func watchCommits(dir string) (*commitWatch, error) {
	b, err := os.ReadFile(filepath.Join(dir, "MISC", "chain"))
	if err != nil {
		return nil, err
	}
	claims, _ := strings.CutPrefix(strings.TrimSpace(string(b)), "farm-chain v2 ")
	seg := filepath.Join(dir, "MISC", claims, "000000")
	ino, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, err
	}
	if _, err := unix.InotifyAddWatch(ino, seg, unix.IN_CREATE); err != nil {
		unix.Close(ino)
		return nil, err
	}
	return &commitWatch{seg: seg, ino: ino}, nil
}

func (w *commitWatch) close() { unix.Close(w.ino) }

// drain forgets what happened so far.
func (w *commitWatch) drain() {
	buf := make([]byte, 64<<10)
	for {
		if n, _ := unix.Read(w.ino, buf); n <= 0 {
			return
		}
	}
}

// next waits up to d for a new file whose name match accepts and returns
// its name ("" if none came).
func (w *commitWatch) next(d time.Duration, match func(string) bool) string {
	buf := make([]byte, 64<<10)
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		fds := []unix.PollFd{{Fd: int32(w.ino), Events: unix.POLLIN}}
		if k, err := unix.Poll(fds, 20); err != nil || k == 0 {
			continue
		}
		n, err := unix.Read(w.ino, buf)
		if err != nil || n <= 0 {
			continue
		}
		for _, name := range harness.EventNames(buf[:n]) {
			if match(name) {
				return name
			}
		}
	}
	return ""
}

// openSlots lists the slots s.N now in the directory that have no mark c.N:
// commits in progress.
func (w *commitWatch) openSlots() map[string]bool {
	m := map[string]bool{}
	left, _ := filepath.Glob(filepath.Join(w.seg, "s.*"))
	for _, l := range left {
		n := strings.TrimPrefix(filepath.Base(l), "s.")
		if _, err := os.Lstat(filepath.Join(w.seg, "c."+n)); os.IsNotExist(err) {
			m[filepath.Base(l)] = true
		}
	}
	return m
}

func isSlot(name string) bool { return strings.HasPrefix(name, "s.") }

func isMark(name string) bool { return strings.HasPrefix(name, "c.") }

// madeBy says which job made the generation whose mark is name (its by=
// field).
func (w *commitWatch) madeBy(name string) string {
	b, _ := os.ReadFile(filepath.Join(w.seg, "g."+strings.TrimPrefix(name, "c.")))
	for _, kv := range strings.Fields(string(b)) {
		if v, ok := strings.CutPrefix(kv, "by="); ok {
			return v
		}
	}
	return ""
}
