package metajob

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/farm-hpc/farm/farm"
	"github.com/farm-hpc/farm/layout"
	"github.com/farm-hpc/farm/vfs"
	"golang.org/x/sys/unix"
)

// The run's warden (rescue.go, "The end of the run"): the first meta-job of
// the run to find no case left stays while others run, to rescue their
// cases if they die. Its mark is MISC/rescue.RUN/warden.K (K from 1), made
// by O_EXCL create, holding its job ID; a name is never made twice. A
// warden that leaves (its time short, a stop) makes warden.K.off; a check
// that finds the warden's job ended (it is rescued as any other) makes
// warden.K.ended: the next meta-job to find no case left becomes warden
// K+1. A warden renews its mark's time at each of its looks, so that a
// meta-job that finds no case left and a warden mark older than
// wardenStale asks the batch system whether the warden still runs, rather
// than leave the run to a dead one until the next period's check.

// wardenStale is how old (by the file server's clock) a warden's mark must
// be for a meta-job with no case left to ask whether its job still runs.
const wardenStale = 2 * time.Minute

// wardenState reads the run's warden (farm.ReadWarden) from the rescue
// directory's names (nil: listed now).
func (r *rescuer) wardenState(names []string) (k int, job string, gone bool, err error) {
	return farm.ReadWarden(r.dir, names)
}

// wardenPath is the path of warden mark k, with suffix (".off", ".ended").
func (r *rescuer) wardenPath(k int, suffix string) string {
	return filepath.Join(r.dir, layout.WardenMark(k, suffix))
}

// warden makes this job the run's warden, if the run has none alive: it
// reports whether it is.
func (r *rescuer) warden() bool {
	if r.wardenNow() {
		return true
	}
	k, job, gone, err := r.wardenState(nil)
	if err != nil || k > 0 && !gone && !r.wardenDead(k, job) {
		return false
	}
	f, err := os.OpenFile(r.wardenPath(k+1, ""), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return false // another took it first
	}
	f.WriteString(r.m.self.ID + "\n")
	f.Close()
	if k > 0 && !gone {
		fmt.Fprintf(r.m.log, "farm: rescue: run %d's warden, meta-job %s, has ended; this meta-job takes its place\n", r.run, job)
	}
	r.mu.Lock()
	r.isWarden, r.wardenK, r.over = true, k+1, false
	r.mu.Unlock()
	return true
}

// wardenDead reports whether warden k, of job, has ended: its mark not
// renewed for wardenStale (compared, by the file server's clock, with this
// job's status file, touched now), and the batch system says its job is
// not running; it then makes warden.K.ended.
func (r *rescuer) wardenDead(k int, job string) bool {
	own := filepath.Join(r.statusDir, r.self)
	var mark, now unix.Stat_t
	if job == "" || unix.UtimesNanoAt(unix.AT_FDCWD, own, nil, 0) != nil ||
		unix.Stat(own, &now) != nil || unix.Stat(r.wardenPath(k, ""), &mark) != nil {
		return false
	}
	if time.Duration(now.Mtim.Nano()-mark.Mtim.Nano()) < wardenStale {
		return false
	}
	r.calls.Add(1)
	infos, err := r.m.Backend.Jobs(context.Background(), []string{job})
	if in, ok := infos[job]; err != nil || !ok || in.State.Active() {
		return false
	}
	r.wardenEnded(k)
	return true
}

// wardenEnded makes warden k's ended mark (its job ended).
func (r *rescuer) wardenEnded(k int) {
	if f, err := os.OpenFile(r.wardenPath(k, ".ended"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644); err == nil {
		f.Close()
	}
}

// renewWarden sets the warden's mark's time to now (the file server's).
func (r *rescuer) renewWarden() {
	r.mu.Lock()
	k := r.wardenK
	r.mu.Unlock()
	if k > 0 {
		unix.UtimesNanoAt(unix.AT_FDCWD, r.wardenPath(k, ""), nil, 0)
	}
}

// wardenLeaves gives up the warden's role: its off mark, for a successor.
func (r *rescuer) wardenLeaves() {
	r.mu.Lock()
	k := r.wardenK
	r.wardenK = 0
	r.mu.Unlock()
	if k == 0 {
		return
	}
	if f, err := os.OpenFile(r.wardenPath(k, ".off"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644); err == nil {
		f.Close()
	}
}

// quitPoll is the warden's look, between checks, at the jobs the last
// check found running: a job that has quit — its Q record written: it
// holds no case — has made its quit mark (quitMark), and is let go. When
// none is left and no rescue is pending, the run is over for the warden.
// The look is one listing of the quit marks, however many jobs run: a job
// whose mark is not listed yet (or that quit without one: a farm before
// quit marks) stays watched until it is, or until a check finds it ended.
func (r *rescuer) quitPoll() {
	r.mu.Lock()
	watch, gen := r.watch, r.watchGen
	r.mu.Unlock()
	// An error (no job has quit yet: no directory) leaves every job watched.
	names, _ := vfs.ReadDirNames(vfs.OS{}, r.quitDir())
	quit := make(map[string]bool, len(names))
	for _, n := range names {
		quit[n] = true
	}
	var still []string
	for _, name := range watch {
		if !quit[name] {
			still = append(still, name)
		}
	}
	r.mu.Lock()
	if r.watchGen == gen { // no check meanwhile
		r.watch = still
		r.over = len(still) == 0 && len(r.pending) == 0
	}
	r.mu.Unlock()
}

// quitDir is the directory of the run's quit marks, MISC/rescue.RUN/quit.
func (r *rescuer) quitDir() string { return filepath.Join(r.dir, "quit") }

// quitMark says that this job has quit, its Q record written (it holds no
// case): MISC/rescue.RUN/quit/NAME, NAME its status file's name, for the
// warden's watch (quitPoll). Best effort: without it the warden waits
// for a check to find the job ended.
func (r *rescuer) quitMark() {
	mark := filepath.Join(r.quitDir(), r.self)
	err := unix.Mknod(mark, unix.S_IFREG|0o644, 0)
	if errors.Is(err, unix.ENOENT) {
		if err := os.Mkdir(r.quitDir(), 0o755); err == nil || errors.Is(err, fs.ErrExist) {
			unix.Mknod(mark, unix.S_IFREG|0o644, 0)
		}
	}
}

// wardenBudget is the operations a second the warden's watch costs at
// most (pollEvery), whatever the run's number of jobs.
const wardenBudget = 10

// pollEvery is how long the warden waits between its looks at the jobs
// still running (quitPoll): as often as keeps its listing of the quit
// marks — 4 operations (open, a getdents, the empty one, close), and one
// more for each 200 names — under wardenBudget operations a second: every
// 400 ms in a run of up to 200 jobs, 900 ms at 1,000.
func (r *rescuer) pollEvery() time.Duration {
	calls := 4 + r.m.runSize()/200
	return max(200*time.Millisecond, time.Duration(calls)*time.Second/wardenBudget)
}

// setOver records the warden's finding when the run has no other job.
func (r *rescuer) setOver(over bool) {
	r.mu.Lock()
	r.over = over && len(r.pending) == 0
	r.mu.Unlock()
}

// wardenNow reports whether this job is the run's warden.
func (r *rescuer) wardenNow() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.isWarden
}

// busy reports whether the meta-job must stay: rescues of its own are
// waiting for the fence or being handed to it, or, as the warden, others
// of the run still run. (A rescue taken off pending before its cases were
// handed over let the job find nothing to wait for and exit "No cases
// left" with the rescued cases in its C record, unrun: under load, 1
// TestLocalRescueStopsAtTheCrashLimit in 8.)
func (r *rescuer) busy() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.pending) > 0 || r.handing > 0 || r.isWarden && !r.over
}
