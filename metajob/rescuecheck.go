package metajob

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/farm"
	"github.com/farm-hpc/farm/status"
	"github.com/farm-hpc/farm/vfs"
	"golang.org/x/sys/unix"
)

// The period's check (rescue.go): one meta-job a period asks the batch
// system which of the run's meta-jobs have ended, and marks the status
// files of those that hold cases.

// recordedJobs are the IDs of the run's meta-jobs, from the farm's job
// records, but this job.
func (r *rescuer) recordedJobs() ([]string, error) {
	recs, err := r.m.Farm.Jobs()
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, rec := range recs {
		if rec.Run == r.run && rec.Kind == "meta" && rec.ID != r.m.self.ID {
			ids = append(ids, rec.ID)
		}
	}
	return ids, nil
}

// checkFile tries to make the period's check file; it reports whether
// this job made it (and removes the one of two periods before).
func (r *rescuer) checkFile(k int64) bool {
	name := filepath.Join(r.dir, "check."+strconv.FormatInt(k, 10))
	fd, err := unix.Open(name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return false // made by another (or a lost reply: this period goes to no one)
	}
	unix.Close(fd)
	os.Remove(filepath.Join(r.dir, "check."+strconv.FormatInt(k-2, 10)))
	return true
}

// check asks the batch system which of the run's meta-jobs have ended, and
// marks those whose status files hold cases to rescue (at most what this
// job has time for). It finds their status files in one listing of the
// status directory (a listing that fails: the next check looks again).
func (r *rescuer) check(ctx context.Context, now time.Time) {
	r.checkMu.Lock()
	defer r.checkMu.Unlock()
	ids, err := r.runJobs()
	if err != nil || len(ids) == 0 {
		r.setOver(err == nil)
		return
	}
	r.m.jobsInRun.Store(int64(len(ids) + 1))
	r.calls.Add(1)
	infos, err := r.m.Backend.Jobs(ctx, ids)
	if err != nil && len(infos) == 0 {
		fmt.Fprintf(r.m.log, "farm: rescue: asking the batch system for the run's jobs: %v\n", err)
		return
	}
	marks := map[string]bool{}
	names, _ := vfs.ReadDirNames(vfs.OS{}, r.dir)
	for _, name := range names {
		marks[name] = true
	}
	wk, wjob, wgone, _ := r.wardenState(names)
	files, err := vfs.ReadDirNames(vfs.OS{}, r.statusDir)
	if err != nil {
		return // looked at again at the next check
	}
	newest := farm.NewestStatusFiles(files)
	var running []string
	watching := r.wardenNow() // only the warden watches the running ones
	for _, id := range ids {
		info, ok := infos[id]
		if !ok || info.State.Active() {
			if ok && info.State == backend.Running && watching {
				if name := r.newest(newest, id); name != "" {
					running = append(running, name)
				}
			}
			continue
		}
		if id == wjob && !wgone {
			r.wardenEnded(wk) // its successor is the next job to find no case left
		}
		switch name := r.newest(newest, id); {
		case name == "":
		case !marks[name]:
			r.consider(id, name, info.State)
		default:
			r.takeOver(name, marks, infos)
		}
	}
	r.mu.Lock()
	r.watch = running
	r.watchGen++
	r.over = len(running) == 0 && len(r.pending) == 0
	r.mu.Unlock()
}

// consider marks the rescue of the status file name of job id, which the
// batch system says has ended (state), if it holds cases of the run and this
// job has the time to rescue them; it reports whether it marked name.
func (r *rescuer) consider(id, name string, state backend.JobState) bool {
	lo, err := status.ReadLeftovers(filepath.Join(r.statusDir, name))
	if err != nil {
		fmt.Fprintf(r.m.log, "farm: rescue: reading %s: %v; looked at again at the next check\n", name, err)
		return false
	}
	held := len(lo.Open) + len(lo.Unstarted)
	for _, u := range lo.Undecided {
		held += len(u.IDs)
	}
	// A job that found its run superseded left what it held to the next
	// run: rescued in this one, it would run twice.
	superseded := lo.QuitWhy == stopSuperseded.String()
	if lo.Run != r.run || held == 0 || superseded {
		if lo.Quitted || lo.Run != r.run {
			return r.mark(name, "none") // holds nothing, and never will: looked at once
		}
		return false
	}
	if !r.hasTime() {
		return false // left to a job with time for it
	}
	if !r.mark(name, string(state)) {
		return false
	}
	fmt.Fprintf(r.m.log, "farm: meta-job %s of run %d has ended (%s) holding %d case(s) it had not finished; this job rescues them after %s\n",
		id, r.run, state, held, r.wait())
	return true
}

// takeOver carries out the rescue of the status file name that a meta-job
// took (its mark) and ended before carrying out: its batch system says it
// ended, and its own file has no C record from name. It first marks that
// rescuer's own file (were it only frozen, its lease then stops it from
// starting what it took), then marks name again, as name~K, for this job.
func (r *rescuer) takeOver(name string, marks map[string]bool, infos map[string]backend.JobInfo) {
	k := 1
	for marks[name+"~"+strconv.Itoa(k+1)] {
		k++
	}
	mark := name
	if k > 1 {
		mark += "~" + strconv.Itoa(k)
	}
	b, err := os.ReadFile(filepath.Join(r.dir, mark))
	f := strings.Fields(string(b))
	if err != nil || len(f) < 3 || f[2] == "none" || f[0] == r.m.self.ID {
		return
	}
	in, ok := infos[f[0]]
	held := r.newestFile(f[0])
	if !ok || in.State.Active() || held == "" || !r.hasTime() {
		return
	}
	if lo, err := status.ReadLeftovers(filepath.Join(r.statusDir, held)); err != nil || lo.RescuedFrom[name] {
		return // carried out: its cases are in the rescuer's file, rescued from there
	}
	if !marks[held] && !r.consider(f[0], held, in.State) {
		// Nothing held yet, as far as this look saw: marked all the
		// same, and read again when the rescue is carried out.
		r.mark(held, string(in.State))
	}
	if r.markAs(name, name+"~"+strconv.Itoa(k+1), f[2]) {
		fmt.Fprintf(r.m.log, "farm: rescue: meta-job %s took the cases of %s and ended (%s) before running them; this job rescues them after %s\n",
			f[0], name, in.State, r.wait())
	}
}

// newest is the name of the status file of job id's newest incarnation,
// from newest (a listing's: farm.NewestStatusFiles), else looked up: a
// file made just before the listing may be missing from it (a directory's
// listing cached on a network filesystem).
func (r *rescuer) newest(newest map[string]string, id string) string {
	if name := newest[id]; name != "" {
		return name
	}
	return r.newestFile(id)
}

// newestFile is the name of the status file of job id's newest
// incarnation, "" if it has none (it never started).
func (r *rescuer) newestFile(id string) string {
	name, _ := farm.NewestStatusFile(r.statusDir, id)
	return name
}

// hasTime reports whether this job has the time to take on a rescue: the
// wait, and twice its runtime cutoff, before its end.
func (r *rescuer) hasTime() bool {
	m := r.m
	end := m.rt.end.at()
	if end.IsZero() {
		return true
	}
	return time.Until(end) > r.wait()+2*m.rt.cutoffSeen()+time.Minute
}
