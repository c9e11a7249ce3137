package faulttrials

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/farm-hpc/farm/integration/harness"
	"golang.org/x/sys/unix"
)

// commitWatch watches the first segment directory of every chain of a
// farm's current run a claim commit can happen in: the main chain's
// (MISC/claims.NONCE/000000), where no claim must commit, and each lane's
// of the run's own set (the main chain's newest generation, the run
// record, names it: set=NAME:S:CASES:TABLE, TABLE its table=;
// casetable/lanes.go), MISC/NAME/ℓ/000000. There every claim commit takes its
// generation's slot s.N, writes g.N, makes its mark c.N and removes the
// slot (casetable/chain.go). A meta-job killed or stopped before its mark
// leaves its slot open (no c.N) until another meta-job of the same chain
// voids it, after FARM_CLAIM_VOID_AFTER: that is how the trials tell a
// kill inside a commit.
type commitWatch struct {
	farm    string
	main    string // the main chain's segment directory
	ino     int
	dirs    map[int32]string // watch descriptor → segment directory
	lanedir string           // the lanes watched (MISC/NAME), "" if none
	lanes   int
}

// commitEvent is a file made in a watched directory.
type commitEvent struct {
	dir, name string
}

// inLane says whether the event is in a lane's chain (not the main one's).
func (w *commitWatch) inLane(dir string) bool { return dir != "" && dir != w.main }

// watchCommits starts watching the farm in dir (whose chain must exist:
// after submit), and the lanes of its current run if it has any.
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
	w := &commitWatch{farm: dir, main: seg, ino: ino, dirs: map[int32]string{}}
	if err := w.add(seg); err != nil {
		unix.Close(ino)
		return nil, err
	}
	if err := w.follow(); err != nil {
		unix.Close(ino)
		return nil, err
	}
	return w, nil
}

func (w *commitWatch) add(seg string) error {
	wd, err := unix.InotifyAddWatch(w.ino, seg, unix.IN_CREATE)
	if err != nil {
		return fmt.Errorf("watching %s: %w", seg, err)
	}
	w.dirs[int32(wd)] = seg
	return nil
}

// follow watches the lanes of the farm's current run (after a submit or
// resubmit) instead of those of the run before, if they differ (w.lanes:
// how many, 0 if the run has none).
func (w *commitWatch) follow() error {
	lanes, lanedir, err := currentLanes(w.main)
	if err != nil {
		return err
	}
	if lanedir == w.lanedir {
		return nil
	}
	for wd, d := range w.dirs {
		if d != w.main {
			unix.InotifyRmWatch(w.ino, uint32(wd))
			delete(w.dirs, wd)
		}
	}
	w.lanedir, w.lanes = lanedir, lanes
	for l := 0; l < lanes; l++ {
		if err := w.add(filepath.Join(w.farm, "MISC", lanedir, strconv.Itoa(l), "000000")); err != nil {
			return err
		}
	}
	return nil
}

// currentLanes reads the newest committed generation of the main chain
// whose segment directory is seg and returns the lanes it names (0, ""
// if none).
func currentLanes(seg string) (int, string, error) {
	ents, err := os.ReadDir(seg)
	if err != nil {
		return 0, "", err
	}
	var marks []int64
	for _, e := range ents {
		if v, ok := strings.CutPrefix(e.Name(), "c."); ok && e.Type().IsRegular() {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				marks = append(marks, n)
			}
		}
	}
	if len(marks) == 0 {
		return 0, "", fmt.Errorf("%s: no committed generation", seg)
	}
	sort.Slice(marks, func(i, j int) bool { return marks[i] > marks[j] })
	b, err := os.ReadFile(filepath.Join(seg, fmt.Sprintf("g.%d", marks[0])))
	if err != nil {
		return 0, "", err
	}
	table := ""
	var sets []string
	for _, kv := range strings.Fields(string(b)) {
		if v, ok := strings.CutPrefix(kv, "table="); ok {
			table = v
		}
		if v, ok := strings.CutPrefix(kv, "set="); ok {
			sets = append(sets, v)
		}
	}
	for _, v := range sets {
		f := strings.SplitN(v, ":", 4)
		if len(f) == 4 && f[3] == table && !strings.Contains(f[0], "/") {
			lanes, _ := strconv.Atoi(f[1])
			return lanes, f[0], nil
		}
	}
	return 0, "", nil // a closed run
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

// next waits up to d for a new file, in any watched directory, whose name
// match accepts and returns it (its name "" if none came).
func (w *commitWatch) next(d time.Duration, match func(string) bool) commitEvent {
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
		for _, ev := range harness.Events(buf[:n]) {
			// Events of a watch removed meanwhile (an older run's
			// lanes) have no directory any more.
			if dir, ok := w.dirs[ev.Wd]; ok && ev.Name != "" && match(ev.Name) {
				return commitEvent{dir, ev.Name}
			}
		}
	}
	return commitEvent{}
}

// openSlots lists the slots s.N now in the watched directories that have
// no mark c.N (commits in progress), by path: lanes' slots have the same
// names.
func (w *commitWatch) openSlots() map[string]bool {
	m := map[string]bool{}
	for _, seg := range w.dirs {
		left, _ := filepath.Glob(filepath.Join(seg, "s.*"))
		for _, l := range left {
			n := strings.TrimPrefix(filepath.Base(l), "s.")
			if _, err := os.Lstat(filepath.Join(seg, "c."+n)); os.IsNotExist(err) {
				m[l] = true
			}
		}
	}
	return m
}

// newSlot returns a slot in now and not in before ("" if none).
func newSlot(before, now map[string]bool) string {
	for f := range now {
		if !before[f] {
			return f
		}
	}
	return ""
}

func isSlot(name string) bool { return strings.HasPrefix(name, "s.") }

func isMark(name string) bool { return strings.HasPrefix(name, "c.") }

// madeBy says which job made the generation whose mark ev is (its by=
// field).
func (w *commitWatch) madeBy(ev commitEvent) string {
	b, _ := os.ReadFile(filepath.Join(ev.dir, "g."+strings.TrimPrefix(ev.name, "c.")))
	for _, kv := range strings.Fields(string(b)) {
		if v, ok := strings.CutPrefix(kv, "by="); ok {
			return v
		}
	}
	return ""
}
