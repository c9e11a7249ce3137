package metajob

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/layout"
	"github.com/farm-hpc/farm/status"
	"github.com/farm-hpc/farm/tablefmt"
	"golang.org/x/sys/unix"
)

// Rescue within the run (RESCUE_CHECK in the config). A meta-job that dies
// — its node lost, killed out of memory, cancelled — leaves the case it was
// running and the cases it had claimed and not started. Without rescue they
// wait for 'farm resubmit'. With it, the live meta-jobs of the same run
// take them over, within minutes, without a server:
//
//   - Who looks. Time is cut into periods of RESCUE_CHECK. In each, every
//     meta-job tries once to create MISC/rescue.RUN/check.K (K the
//     period's number) with O_EXCL; the one that makes it asks the batch
//     system, in one query for all the run's meta-jobs (Backend.Jobs), which
//     have ended. So the farm makes one scheduler query a period, however
//     many meta-jobs it has: O(1) per period, 60 an hour by default.
//   - What is rescued. For each meta-job of the run that has ended, its
//     status file (the newest incarnation's) tells what it held: the case it
//     started and never ended (it died under it), and the cases it claimed (C
//     records) and never started. A file with neither is marked as looked at.
//   - One rescuer. The checker takes a dead job's cases by creating its
//     mark, MISC/rescue.RUN/NAME (NAME its status file's name), with
//     O_EXCL, holding its own nonce: one meta-job wins, and it decides that
//     it won from the mark's content, not from the reply (which may be lost
//     after the create succeeded).
//   - The fence. A job the batch system says ended may still run: frozen, or
//     on a node cut off from the batch system. Every meta-job, before each
//     claim and after writing a case's start record and before running it,
//     holds the lease on its run (look.go): when its last look is more than
//     LookEvery old it looks at its run and for its own mark (one lookup
//     each in LookEvery); if its cases were rescued, it runs none of them
//     and exits. The rescuer waits LookEvery + rescueMargin after making the
//     mark, then reads the dead job's status file. So every case the old
//     job starts after the mark has its start record written before the
//     rescuer reads the file (it looked less than LookEvery before, and saw
//     no mark), and the rescuer reruns it as the dead job's open case; no
//     case it has not started is run by both. What remains is
//     the case the old job was running when it froze (or started in the
//     instant between its look and the exec): it may run twice. That is
//     recorded (two attempts in the run, the second why=rescue, the first
//     with an end record), and farm Status warns of it.
//   - The rescue. The rescuer records the cases in its status file (a C
//     record from=NAME, written at once) and runs them before its next
//     claim: the open case, if the crash limit allows (MAX_CRASHES counts its
//     death), as its next attempt (attempt=N why=rescue from=NAME); the
//     others as their first (from=NAME). If the rescuer dies in turn, they
//     are rescued from its file.
//   - The end of the run. The first meta-job to find no case left becomes
//     the run's warden (MISC/rescue.RUN/warden.K, O_EXCL; warden.go): instead of
//     exiting, it checks every period until no other meta-job of the run is
//     running and no rescue is pending, running what it rescues; or until
//     its own time is short. The others exit as before.
//   - A restarted job. A job the batch system restarted after its node
//     failed (Slurm's requeue: a new incarnation under the same ID) rescues
//     its earlier incarnation's cases itself, at its start.
//
// Rescue is off in SIMPLE mode (one case a job) and with RESCUE_CHECK=0.

// rescueMargin is added to the lease's LookEvery in the rescuer's wait,
// for the time between a look and the start record's write.
const rescueMargin = 5 * time.Second

// rescueDir is the directory of run's rescue marks, in MISC.
func rescueDir(run int) string { return layout.RescueDir(run) }

// rescuer is a meta-job's part in rescue: its checks, its rescues waiting
// for the fence, its warden role.
type rescuer struct {
	m         *Metajob
	dir       string // MISC/rescue.RUN
	statusDir string
	self      string // the meta-job's status file's name
	run       int
	period    time.Duration
	fence     time.Duration // the lease's LookEvery: the longest a job goes between its look for its mark and a start
	nonce     string

	// The run's meta-jobs (their IDs) and their states: the job records
	// and the engine, replaceable by tests.
	runJobs func() ([]string, error)

	checkMu sync.Mutex // one check at a time (the tick's, the warden's first)
	quit    chan struct{}
	wg      sync.WaitGroup // the tick goroutine
	marks   atomic.Int64   // marks made, for each mark's own content

	pollMu sync.Mutex                  // one quitPoll at a time: it holds follow
	follow map[string]*status.Follower // the watched files, followed, by name

	mu       sync.Mutex // the fields below
	lastK    int64      // the last period whose check this job tried
	pending  []pendingRescue
	handing  int // rescues whose fence has passed, being read and handed to the job (collectDue)
	isWarden bool
	wardenK  int      // the warden mark's K, while it is the warden (warden.go)
	over     bool     // the warden's last look found no other job running and no rescue pending
	watch    []string // the status files of the others the last check found running
	watchGen int      // checks that set watch
	calls    atomic.Int64
}

// pendingRescue is a dead job's status file whose mark this job made at
// at: it reads the file once the fence has passed.
type pendingRescue struct {
	name  string // the status file's name
	mark  string // the mark's name, if not name: a rescue taken over (takeOver)
	at    time.Time
	state string // the engine's word, for the log
}

// rescuedCase is a case handed to the meta-job by a rescue.
type rescuedCase = pendingRetry

// newRescuer returns m's rescuer, or nil when rescue is off.
func newRescuer(m *Metajob) *rescuer {
	if m.Env.Simple || m.Farm.Config.RescueCheck <= 0 {
		return nil
	}
	var b [8]byte
	rand.Read(b[:])
	r := &rescuer{m: m, dir: m.Farm.Path(layout.MiscDir, rescueDir(m.Env.Run)), statusDir: m.Farm.Path(layout.StatusDir),
		self: layout.StatusFile(m.self.ID, m.self.Restart), run: m.Env.Run, period: m.Farm.Config.RescueCheck, fence: m.lookEvery(),
		nonce: hex.EncodeToString(b[:])}
	r.runJobs = r.recordedJobs
	return r
}

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

// start runs the rescuer until halt: a look every quarter period or so,
// at most 15 s apart (with jitter, so that the meta-jobs do not all come
// at once), and, for a restarted job, the rescue of its earlier
// incarnation.
func (r *rescuer) start(ctx context.Context) {
	r.quit = make(chan struct{})
	if err := os.Mkdir(r.dir, 0o755); err != nil && !os.IsExist(err) {
		fmt.Fprintf(r.m.log, "farm: rescue is off for this meta-job: %v\n", err)
		return
	}
	if rs := r.m.self.Restart; rs > 0 {
		prev := layout.StatusFile(r.m.self.ID, rs-1)
		if r.mark(prev, "restarted") {
			fmt.Fprintf(r.m.log, "farm: this job was restarted by the batch system; the cases its incarnation %d held are rescued here after %s\n", rs-1, r.wait())
		}
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for {
			step := r.period / 4
			step += time.Duration(mrand.Int64N(int64(step)/2 + 1))
			t := time.NewTimer(min(step, time.Second*15, r.nextDue()))
			select {
			case <-r.quit:
				t.Stop()
				return
			case <-t.C:
			}
			r.tick(ctx, time.Now())
		}
	}()
}

// halt stops the rescuer before the meta-job's last records: it waits for
// its goroutine, takes back the marks of rescues it has not carried out
// (another meta-job's check then takes them), and gives up the warden's
// role.
func (r *rescuer) halt() {
	if r.quit != nil {
		close(r.quit)
		r.wg.Wait()
		r.quit = nil
	}
	r.mu.Lock()
	pending := r.pending
	r.pending = nil
	warden := r.isWarden
	r.isWarden = false // a second halt must not remove a new warden's mark
	r.mu.Unlock()
	for _, p := range pending {
		r.unmark(cmp.Or(p.mark, p.name))
	}
	if warden {
		r.wardenLeaves()
	}
}

// unmark removes the mark of status file name if it is this job's.
func (r *rescuer) unmark(name string) {
	path := filepath.Join(r.dir, name)
	if b, err := os.ReadFile(path); err == nil && strings.Contains(string(b), " "+r.nonce+" ") {
		os.Remove(path)
	}
}

// wait is how long a rescuer waits between its mark and its reading of the
// dead job's file.
func (r *rescuer) wait() time.Duration { return r.fence + rescueMargin }

// tick is one look: the period's check if this job is the first to try
// it (or the warden), then the rescues whose fence has passed.
func (r *rescuer) tick(ctx context.Context, now time.Time) {
	k := now.UnixNano() / int64(r.period)
	r.mu.Lock()
	tried := k <= r.lastK
	r.lastK = max(r.lastK, k)
	warden := r.isWarden
	r.mu.Unlock()
	if warden {
		r.renewWarden()
	}
	if !tried && r.checkFile(k) || warden {
		r.check(ctx, now)
	}
	r.collectDue(ctx, now)
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
// job has time for).
func (r *rescuer) check(ctx context.Context, now time.Time) {
	r.checkMu.Lock()
	defer r.checkMu.Unlock()
	ids, err := r.runJobs()
	if err != nil || len(ids) == 0 {
		r.setOver(err == nil)
		return
	}
	r.calls.Add(1)
	infos, err := r.m.Backend.Jobs(ctx, ids)
	if err != nil && len(infos) == 0 {
		fmt.Fprintf(r.m.log, "farm: rescue: asking the batch system for the run's jobs: %v\n", err)
		return
	}
	marks := map[string]bool{}
	names, _ := readNames(r.dir)
	for _, name := range names {
		marks[name] = true
	}
	wk, wjob, wgone, _ := r.wardenState(names)
	var running []string
	watching := r.wardenNow() // only the warden watches the running ones
	for _, id := range ids {
		info, ok := infos[id]
		if !ok || info.State.Active() {
			if ok && info.State == backend.Running && watching {
				if name := r.newestFile(id); name != "" {
					running = append(running, name)
				}
			}
			continue
		}
		if id == wjob && !wgone {
			r.wardenEnded(wk) // its successor is the next job to find no case left
		}
		switch name := r.newestFile(id); {
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
// job has the time to rescue them.
func (r *rescuer) consider(id, name string, state backend.JobState) {
	lo, err := status.ReadLeftovers(filepath.Join(r.statusDir, name))
	if err != nil {
		fmt.Fprintf(r.m.log, "farm: rescue: reading %s: %v; looked at again at the next check\n", name, err)
		return
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
			r.mark(name, "none") // holds nothing, and never will: looked at once
		}
		return
	}
	if !r.hasTime() {
		return // left to a job with time for it
	}
	if r.mark(name, string(state)) {
		fmt.Fprintf(r.m.log, "farm: meta-job %s of run %d has ended (%s) holding %d case(s) it had not finished; this job rescues them after %s\n",
			id, r.run, state, held, r.wait())
	}
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
	if !marks[held] {
		r.consider(f[0], held, in.State)
		r.markAs(held, held, string(in.State)) // (if consider did not: nothing held)
	}
	if r.markAs(name, name+"~"+strconv.Itoa(k+1), f[2]) {
		fmt.Fprintf(r.m.log, "farm: rescue: meta-job %s took the cases of %s and ended (%s) before running them; this job rescues them after %s\n",
			f[0], name, in.State, r.wait())
	}
}

// quitPoll is the warden's look, between checks, at the jobs the last
// check found running: a job whose status file has its Q record has ended
// its cases. When none is left and no rescue is pending, the run is over
// for the warden. (Each look reads only what a job appended since the
// last: a status.Follower per file watched.)
func (r *rescuer) quitPoll() {
	r.pollMu.Lock()
	defer r.pollMu.Unlock()
	r.mu.Lock()
	watch, gen := r.watch, r.watchGen
	r.mu.Unlock()
	follow := make(map[string]*status.Follower, len(watch))
	var still []string
	for _, name := range watch {
		fl := r.follow[name]
		if fl == nil {
			fl = status.NewFollower(filepath.Join(r.statusDir, name))
		}
		follow[name] = fl
		// An error (a file gone, unreadable) leaves the job watched.
		if f, _ := fl.Read(); !f.Quitted {
			still = append(still, name)
		}
	}
	r.follow = follow // the files no longer watched are let go
	r.mu.Lock()
	if r.watchGen == gen { // no check meanwhile
		r.watch = still
		r.over = len(still) == 0 && len(r.pending) == 0
	}
	r.mu.Unlock()
}

// pollEvery is how long the warden waits between its looks at the jobs
// still running: 5 ms a job, from 200 ms (a few jobs: the run's end is
// not held up) to 5 s (a thousand: some 200 reads a second, falling as
// they end).
func (r *rescuer) pollEvery() time.Duration {
	r.mu.Lock()
	n := len(r.watch)
	r.mu.Unlock()
	return min(max(time.Duration(n)*5*time.Millisecond, 200*time.Millisecond), 5*time.Second)
}

// setOver records the warden's finding when the run has no other job.
func (r *rescuer) setOver(over bool) {
	r.mu.Lock()
	r.over = over && len(r.pending) == 0
	r.mu.Unlock()
}

// newestFile is the name of the status file of job id's newest
// incarnation, "" if it has none (it never started).
func (r *rescuer) newestFile(id string) string {
	name := ""
	for rs := 0; rs < 1000; rs++ {
		n := layout.StatusFile(id, rs)
		if _, err := os.Lstat(filepath.Join(r.statusDir, n)); err != nil {
			break
		}
		name = n
	}
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

// mark takes the rescue of status file name (state: why, for the mark's
// reader): it reports whether this job made the mark, deciding from the
// mark's content (its nonce), and queues the rescue. "none" marks a file
// looked at with nothing to rescue.
func (r *rescuer) mark(name, state string) bool { return r.markAs(name, name, state) }

// markAs is mark, its mark named mark (a rescue taken over: name~K).
func (r *rescuer) markAs(name, mark, state string) bool {
	path := filepath.Join(r.dir, mark)
	content := fmt.Sprintf("%s %s %s %s %d\n", r.m.self.ID, r.nonce, state, time.Now().UTC().Format(time.RFC3339), r.marks.Add(1))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err == nil {
		_, err = f.WriteString(content)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		if b, rerr := os.ReadFile(path); rerr != nil || string(b) != content {
			return false
		}
	}
	if state != "none" {
		r.mu.Lock()
		r.pending = append(r.pending, pendingRescue{name: name, mark: mark, at: time.Now(), state: state})
		r.mu.Unlock()
	}
	return true
}

// markedBy reads the mark of status file name: the ID of the job that
// rescued its cases, ok false if there is no mark (or it marks nothing
// rescued). err is a lookup that failed.
func (r *rescuer) markedBy(name string) (string, bool, error) {
	// The directory is opened first: on NFS, its opening revalidates it,
	// so that a mark made by another client since is not hidden by a
	// cached "no such file".
	d, err := os.Open(r.dir)
	if err != nil {
		return "", false, err
	}
	defer d.Close()
	fd, err := unix.Openat(int(d.Fd()), name, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err == unix.ENOENT {
		return "", false, nil
	}
	if err != nil {
		return "", false, &os.PathError{Op: "open", Path: filepath.Join(r.dir, name), Err: err}
	}
	f := os.NewFile(uintptr(fd), name)
	b, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		return "", false, err
	}
	fl := strings.Fields(string(b))
	if len(fl) >= 3 && fl[2] == "none" {
		return "", false, nil
	}
	if len(fl) == 0 {
		return "another meta-job", true, nil // being written
	}
	return fl[0], true, nil
}

// nextDue is how long until the first pending rescue's fence has passed
// (a little more); an hour if none is pending. The tick is made then, so
// that a rescue is carried out when its wait ends, not at the next look.
func (r *rescuer) nextDue() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := time.Hour
	for _, p := range r.pending {
		d = min(d, r.wait()-gap(time.Now(), p.at)+10*time.Millisecond)
	}
	return max(d, 0)
}

// collectDue carries out the rescues whose fence has passed.
func (r *rescuer) collectDue(ctx context.Context, now time.Time) {
	r.mu.Lock()
	var due []pendingRescue
	keep := r.pending[:0]
	for _, p := range r.pending {
		if gap(now, p.at) > r.wait() {
			due = append(due, p)
		} else {
			keep = append(keep, p)
		}
	}
	r.pending = keep
	r.handing += len(due)
	r.mu.Unlock()
	for _, p := range due {
		if err := r.collect(ctx, p); err != nil {
			fmt.Fprintf(r.m.log, "farm: rescue of the cases of %s: %v; they are left for 'farm resubmit'\n", p.name, err)
		}
		r.mu.Lock()
		r.handing--
		r.mu.Unlock()
	}
}

// collect reads the dead job's status file and hands its cases to the
// meta-job: the open case (if under the crash limit) as its next attempt,
// the unstarted ones as their first.
func (r *rescuer) collect(ctx context.Context, p pendingRescue) error {
	m := r.m
	// A rescuer whose own cases were rescued meanwhile takes nothing
	// more: no one would rescue what it took. Its mark stays: another
	// takes the rescue over (takeOver), as from a rescuer that died.
	if by, marked, err := r.markedBy(r.self); err != nil || marked {
		if err != nil {
			r.unmark(cmp.Or(p.mark, p.name))
			return err
		}
		return fmt.Errorf("this meta-job's own cases were rescued by meta-job %s", by)
	}
	lo, err := status.ReadLeftovers(filepath.Join(r.statusDir, p.name))
	if err != nil {
		r.unmark(cmp.Or(p.mark, p.name))
		return err
	}
	attempt := map[int64]int{}
	var ids []int64
	var crashed []string
	for _, o := range lo.Open {
		n, err := r.crashes(o.ID)
		if limit := m.Farm.Config.MaxCrashes; err != nil || limit > 0 && n >= limit {
			why := fmt.Sprintf("its meta-job died under it %d times, MAX_CRASHES=%d", n, limit)
			if err != nil {
				why = fmt.Sprintf("its crashes could not be counted: %v; left for 'farm resubmit'", err)
			}
			crashed = append(crashed, fmt.Sprintf("%d (%s)", o.ID, why))
			continue
		}
		attempt[o.ID] = o.Attempt + 1
		ids = append(ids, o.ID)
	}
	for _, id := range lo.Unstarted {
		if n := lo.Next[id]; n > 1 {
			attempt[id] = n // handed to the dead job by a rescue, never started
		}
		ids = append(ids, id)
	}
	ids = append(ids, r.decideClaims(ctx, lo.Undecided)...)
	if len(crashed) > 0 {
		fmt.Fprintf(m.log, "farm: rescue: not run again: case %s\n", strings.Join(crashed, ", case "))
	}
	if len(ids) == 0 {
		return nil
	}
	table, err := r.table(ctx)
	if err != nil {
		return err
	}
	cases, err := findCases(table, m.Farm.Path(layout.MiscDir), ids)
	if err != nil {
		return err
	}
	m.swMu.Lock()
	err = m.sw.Claimed(ids, time.Now(), p.name, attempt)
	m.swMu.Unlock()
	if err != nil {
		return err
	}
	var got []rescuedCase
	var lost []int64
	for _, id := range ids {
		c, ok := cases[id]
		if !ok {
			lost = append(lost, id)
			continue
		}
		rc := rescuedCase{c: c, why: status.WhyRescue, from: p.name}
		if a := attempt[id]; a > 1 {
			rc.retry = a - 1
		}
		got = append(got, rc)
	}
	fmt.Fprintf(m.log, "farm: rescued from %s (%s): %s\n%s", p.name, p.state, describeRescue(got), notFound(lost))
	m.do(func(o *owner) { o.rescued = append(o.rescued, got...) }) // nothing if the job has ended: its C record has them
	return nil
}

// decideClaims decides, from the claim state, the claims the dead job
// recorded before their commits with no record of their outcome (it died
// in or just after the commit): the cases of those committed, to rescue.
// One it cannot decide is left for 'farm resubmit', which runs it: it was
// never started.
func (r *rescuer) decideClaims(ctx context.Context, claims []status.NotedClaim) []int64 {
	if len(claims) == 0 {
		return nil
	}
	store := r.m.Farm.Store()
	defer store.Close()
	store.Job, store.Log = r.m.self.ID, r.m.log
	var ids []int64
	for _, c := range claims {
		won, err := store.ClaimWon(ctx, c.Token)
		switch {
		case err != nil:
			fmt.Fprintf(r.m.log, "farm: rescue: cannot tell whether the claim of case(s) %s committed (%v); left for 'farm resubmit'\n", status.AppendIDs(nil, c.IDs), err)
		case won:
			ids = append(ids, c.IDs...)
		}
	}
	return ids
}

// notFound is the job's line about rescued cases its tables do not have
// ("" if none).
func notFound(lost []int64) string {
	if len(lost) == 0 {
		return ""
	}
	return fmt.Sprintf("farm: rescue: case %s not found in the run's tables: left for 'farm resubmit'\n", status.AppendIDs(nil, lost))
}

// describeRescue says what a rescue took, for the job's output.
func describeRescue(got []rescuedCase) string {
	var open []string
	var ids []int64
	for _, rc := range got {
		if rc.retry > 0 {
			open = append(open, fmt.Sprintf("case %d (attempt %d)", rc.c.ID, rc.retry+1))
		} else {
			ids = append(ids, rc.c.ID)
		}
	}
	if len(ids) > 0 {
		open = append(open, fmt.Sprintf("%d case(s) never started: %s", len(ids), status.AppendIDs(nil, ids)))
	}
	return strings.Join(open, "; ")
}

// crashes is how many times case id's meta-job died under it, in every
// run, as the status files tell (the dead job's attempt included).
func (r *rescuer) crashes(id int64) (int, error) {
	if r.m.Farm.Config.MaxCrashes <= 0 {
		return 0, nil // no limit: not counted
	}
	sum, err := status.Load(r.statusDir, status.Options{})
	if err != nil {
		return 0, err
	}
	return sum.Get(id).Crashes, nil
}

// findCases reads cases ids from the run's own table, and those it has
// not from the farm's other run tables (misc/table.run*: those 'farm add'
// queued, and earlier runs' — a case's line is the same in every table
// that has it), each with the table it was found in (relative to the
// farm, as a claim gives it), for $1 and $2.
func findCases(table, misc string, ids []int64) (map[int64]tablefmt.Case, error) {
	cases, err := tablefmt.FindCases(table, ids)
	if err != nil {
		return cases, err
	}
	rel := func(path string) string {
		if r, err := filepath.Rel(filepath.Dir(misc), path); err == nil {
			return r
		}
		return path
	}
	for id, c := range cases {
		c.Table = rel(table)
		cases[id] = c
	}
	// Added tables first (small, and the likeliest), then earlier runs'.
	added, _ := filepath.Glob(filepath.Join(misc, "table.run*.add.*"))
	others, _ := filepath.Glob(filepath.Join(misc, "table.run*"))
	others = append(added, others...)
	for _, t := range others {
		var left []int64
		for _, id := range ids {
			if _, ok := cases[id]; !ok {
				left = append(left, id)
			}
		}
		if len(left) == 0 {
			break
		}
		if t == table || strings.HasSuffix(t, ".src") {
			continue
		}
		more, err := tablefmt.FindCases(t, left)
		if err != nil {
			continue // not one (a temporary file of one being written)
		}
		for id, c := range more {
			c.Table = rel(t)
			cases[id] = c
		}
	}
	return cases, nil
}

// table is the run's table.
func (r *rescuer) table(ctx context.Context) (string, error) {
	m := r.m
	t := m.runTable()
	if t == "" {
		store := m.Farm.Store()
		defer store.Close()
		st, err := store.Read(ctx)
		if err != nil {
			return "", err
		}
		t = st.Table
	}
	return m.Farm.Path(t), nil
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

// localFilesystem reports whether dir is on a filesystem of this host
// alone (ext4, XFS, Btrfs, tmpfs, ZFS, F2FS), where another process sees an
// append at once; on any other (NFS, Lustre, GPFS, a FUSE client such as
// GlusterFS's) the S and C records are synced, for the rescue's fence.
func localFilesystem(dir string) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return false
	}
	switch uint32(st.Type) {
	case 0xEF53, 0x58465342, 0x9123683E, 0x01021994, 0x2FC12FC1, 0xF2F52010:
		return true
	}
	return false
}
