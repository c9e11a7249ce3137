package farm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/farm-hpc/farm/farm/proc"
)

// Local is the built-in backend for machines without a batch system. It is a
// small real batch system: every job is a detached process (in its own
// session, so the submitting shell may exit) that waits for its
// dependencies and for one of the host's job slots (at most FARM_LOCAL_SLOTS,
// default the number of CPUs, across all farms of the user), runs the job
// script in a process group of its own, and kills that group at the
// script's run-time limit. Job records live in MISC/local, so any later farm
// command in any shell sees them.
//
// A job's PIDs are judged (is its supervisor alive?) only by a process of
// the same host identity (proc.HostID: host name, boot ID and PID
// namespace) as the supervisor that recorded them. A job whose supervisor
// runs on another host or in another container keeps the state it last
// recorded, and is cancelled through its cancel file, which its supervisor
// polls.
type Local struct {
	Dir string // farm directory
	Bin string // the farm executable; os.Executable() if empty

	// KillWait is the time between SIGTERM and SIGKILL when a job is
	// stopped (10 s if zero).
	KillWait time.Duration
}

var _ Backend = (*Local)(nil)

// LocalKillWait is the default grace time between SIGTERM and SIGKILL.
const LocalKillWait = 10 * time.Second

// Name implements Backend.
func (l *Local) Name() string { return "local" }

// localSpec is what submit fixes about a job: MISC/local/ID.job.
type localSpec struct {
	ID        string
	Script    string
	Dir       string
	Output    string
	Env       []string
	After     []string
	TimeLimit time.Duration
	Submitted time.Time
}

// localState is the job's state as its own process writes it: MISC/local/ID.state.
type localState struct {
	State    JobState
	PID      int    // the job's supervising process
	PIDStart uint64 // its start ticks, against PID reuse
	PGID     int    // the job script's process group, once running
	// Host is the supervisor's proc.HostID: its PIDs mean something only
	// to processes of that identity. Empty in records written before it
	// was kept, which are judged as local.
	Host   string `json:",omitempty"`
	Start  time.Time
	End    time.Time // expected end while running
	Exit   int
	Reason string
}

// cancelPoll is how often a job's supervisor looks for its cancel file
// (MISC/local/ID.cancel), the only way to cancel it from another host.
const cancelPoll = time.Second

// elsewhere returns the host identity of a job whose supervisor runs on
// another host (or in another container), whose PIDs cannot be judged
// here; "" for a job of this host or of a record that does not say.
func (st *localState) elsewhere() string {
	if st.Host != "" && st.Host != proc.HostID() {
		return st.Host
	}
	return ""
}

func (l *Local) dir() string                { return filepath.Join(l.Dir, MiscDir, "local") }
func (l *Local) path(id, ext string) string { return filepath.Join(l.dir(), id+ext) }

// tmpName names a private file to write path's new content to before it is
// renamed over path. A PID alone would not do: processes of two hosts (or
// containers) sharing the farm directory may have the same PID.
func tmpName(path string) string {
	return fmt.Sprintf("%s.tmp.%d.%x", path, os.Getpid(), rand.Uint64())
}

func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp := tmpName(path)
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// nextIDs allocates n job IDs, each reserved by creating MISC/local/ID.id
// exclusively (atomic on a network filesystem too, so two submissions, even
// from two hosts, never get one ID), skipping any ID that already names a
// status file (a farm may have run on another backend). next_id is only a
// hint of where to start.
func (l *Local) nextIDs(ctx context.Context, n int) ([]string, error) {
	if err := os.MkdirAll(l.dir(), 0o755); err != nil {
		return nil, err
	}
	counter := filepath.Join(l.dir(), "next_id")
	next := 1
	if b, err := os.ReadFile(counter); err == nil {
		next, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		next = max(next, 1)
	}
	var ids []string
	for len(ids) < n {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		id := strconv.Itoa(next)
		next++
		if _, err := os.Stat(filepath.Join(l.Dir, StatusDir, "status."+id)); err == nil {
			continue
		}
		fh, err := os.OpenFile(l.path(id, ".id"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if os.IsExist(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		fh.Close()
		ids = append(ids, id)
	}
	tmp := tmpName(counter)
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(next)), 0o644); err != nil {
		return nil, err
	}
	return ids, os.Rename(tmp, counter)
}

func (l *Local) bin() (string, error) {
	if l.Bin != "" {
		return l.Bin, nil
	}
	return os.Executable()
}

// Submit implements Backend.
func (l *Local) Submit(ctx context.Context, req SubmitRequest) ([]string, error) {
	if err := os.MkdirAll(l.dir(), 0o755); err != nil {
		return nil, err
	}
	bin, err := l.bin()
	if err != nil {
		return nil, err
	}
	ids, err := l.nextIDs(ctx, req.Count)
	if err != nil {
		return nil, err
	}
	var done []string
	for _, id := range ids {
		spec := localSpec{ID: id, Script: req.Script, Dir: req.Dir, Env: req.Env, After: req.After,
			TimeLimit: req.TimeLimit, Submitted: time.Now()}
		if req.Output != nil {
			spec.Output = req.Output(id)
		}
		if err := writeJSON(l.path(id, ".job"), spec); err != nil {
			return done, err
		}
		cmd := exec.Command(bin, "_localjob", "--dir", l.Dir, "--id", id)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		cmd.Dir = l.Dir
		if err := cmd.Start(); err != nil {
			os.Remove(l.path(id, ".job"))
			return done, fmt.Errorf("starting local job: %w", err)
		}
		// The job runs on by itself; reap it if we are still around when
		// it ends, so it leaves no zombie behind.
		go cmd.Wait()
		done = append(done, id)
	}
	return done, nil
}

// job reads one job's spec and state and derives its current state.
func (l *Local) job(id string) (localSpec, localState, JobInfo) {
	var spec localSpec
	var st localState
	info := JobInfo{ID: id, State: Gone}
	if err := readJSON(l.path(id, ".job"), &spec); err != nil {
		return spec, st, info
	}
	if err := readJSON(l.path(id, ".state"), &st); err != nil {
		// Not started yet; a job that never wrote its state within a
		// minute of submission died at birth.
		info.State = Pending
		if time.Since(spec.Submitted) > time.Minute {
			info.State = Failed
		}
		return spec, st, info
	}
	info.State, info.Start, info.End = st.State, st.Start, st.End
	if info.OtherHost = st.elsewhere(); info.OtherHost != "" {
		if st.State.Active() && proc.EarlierBoot(st.Host) {
			// This host has rebooted since: the job died with it.
			info.State, info.OtherHost = Failed, ""
			return spec, st, info
		}
		// Its PIDs mean nothing here: it is as it last said.
		return spec, st, info
	}
	if st.State.Active() && !proc.AliveSince(st.PID, st.PIDStart) {
		// Its supervisor died: the job script may still run on.
		if st.State == Running && st.PGID > 0 && syscall.Kill(-st.PGID, 0) == nil {
			return spec, st, info
		}
		info.State = Failed
	}
	return spec, st, info
}

// Jobs implements Backend.
func (l *Local) Jobs(ctx context.Context, ids []string) (map[string]JobInfo, error) {
	out := make(map[string]JobInfo, len(ids))
	for _, id := range ids {
		_, _, info := l.job(id)
		out[id] = info
	}
	return out, nil
}

// Cancel implements Backend. It writes each job's cancel file, which its
// supervisor polls, and signals the supervisors of this host for a prompt
// end. It waits (up to KillWait and a little) for the jobs to end, so that
// the farm is quiet when it returns.
func (l *Local) Cancel(ctx context.Context, ids []string, pendingOnly bool) ([]string, error) {
	var cancelled []string
	wait := l.killWait() + 5*time.Second
	for _, id := range ids {
		_, st, info := l.job(id)
		if !info.State.Active() || (pendingOnly && info.State != Pending) {
			continue
		}
		mode := "all"
		if pendingOnly {
			mode = "pending"
		}
		if err := os.WriteFile(l.path(id, ".cancel"), []byte(mode), 0o644); err != nil {
			return cancelled, err
		}
		if info.OtherHost != "" {
			// Its supervisor sees the cancel file within cancelPoll
			// (and whatever the shared filesystem's caches add).
			wait = l.killWait() + 5*time.Second + 2*cancelPoll
		} else if st.PID > 0 && proc.AliveSince(st.PID, st.PIDStart) {
			syscall.Kill(st.PID, syscall.SIGTERM)
		} else if st.PGID > 0 {
			syscall.Kill(-st.PGID, syscall.SIGKILL)
		}
		cancelled = append(cancelled, id)
	}
	deadline := time.Now().Add(wait)
	for _, id := range cancelled {
		for time.Now().Before(deadline) {
			if _, _, info := l.job(id); !info.State.Active() {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return cancelled, nil
}

func (l *Local) killWait() time.Duration {
	if l.KillWait > 0 {
		return l.KillWait
	}
	if v, err := time.ParseDuration(os.Getenv("FARM_LOCAL_KILL_WAIT")); err == nil && v > 0 {
		return v
	}
	return LocalKillWait
}

// Self implements Backend: the job's supervisor passes its ID and end time
// in FARM_JOB_ID and FARM_END_TIME.
func (l *Local) Self(ctx context.Context) (Self, error) {
	id := os.Getenv("FARM_JOB_ID")
	if id == "" {
		return Self{}, errors.New("FARM_JOB_ID is not set: not inside a local farm job")
	}
	s := Self{ID: id}
	if v, err := strconv.ParseInt(os.Getenv("FARM_END_TIME"), 10, 64); err == nil && v > 0 {
		s.End = time.Unix(v, 0)
	}
	return s, nil
}

// slots returns the number of local job slots.
func slots() int {
	if n, err := strconv.Atoi(os.Getenv("FARM_LOCAL_SLOTS")); err == nil && n > 0 {
		return n
	}
	return runtime.NumCPU()
}

// takeSlot tries to lock one of the host's job slots; the lock (flock) goes
// away with the process, so a dead job never holds a slot.
func takeSlot() (*os.File, error) {
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("farm-slots-%d", os.Getuid()))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	n := slots()
	for _, i := range rand.Perm(n) {
		fh, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("slot.%d", i)), os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, err
		}
		if syscall.Flock(int(fh.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			return fh, nil
		}
		fh.Close()
	}
	return nil, nil
}

// RunJob is the body of a local job's supervising process (farm _localjob).
func (l *Local) RunJob(id string) error {
	var spec localSpec
	if err := readJSON(l.path(id, ".job"), &spec); err != nil {
		return fmt.Errorf("local job %s: %w", id, err)
	}
	out, err := os.OpenFile(spec.Output, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	st := localState{State: Pending, PID: os.Getpid(), PIDStart: proc.StartTicks(os.Getpid()), Host: proc.HostID()}
	// The state file may be on a full disk for a while: retried, so that a
	// job that ended well does not show as failed (its state unsaved).
	log := &jobOutput{f: out}
	save := func() error {
		return retryTransient(log, TransientRetry, func() error { return writeJSON(l.path(id, ".state"), st) })
	}
	finish := func(state JobState, reason string) error {
		st.State, st.Reason, st.End = state, reason, time.Now()
		if reason != "" {
			fmt.Fprintf(log, "farm: local job %s: %s\n", id, reason)
		}
		return save()
	}
	if err := save(); err != nil {
		return err
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	cancelMode := func() string {
		b, _ := os.ReadFile(l.path(id, ".cancel"))
		return string(b)
	}
	if cancelMode() != "" {
		return finish(Cancelled, "cancelled while pending")
	}

	// Pending: wait for dependencies, then for a slot.
	var slot *os.File
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	lastPoll := time.Now()
	for slot == nil {
		ready := true
		if len(spec.After) > 0 {
			infos, _ := l.Jobs(context.Background(), spec.After)
			for _, in := range infos {
				ready = ready && !in.State.Active()
			}
		}
		if ready {
			if slot, err = takeSlot(); err != nil {
				return finish(Failed, "no job slot: "+err.Error())
			}
		}
		if slot != nil {
			// A cancel from another host may have come since the last
			// poll: it must not find the job started.
			if cancelMode() != "" {
				slot.Close()
				return finish(Cancelled, "cancelled while pending")
			}
			break
		}
		select {
		case <-sigs:
			return finish(Cancelled, "cancelled while pending")
		case <-tick.C:
		}
		if time.Since(lastPoll) >= cancelPoll {
			lastPoll = time.Now()
			if cancelMode() != "" {
				return finish(Cancelled, "cancelled while pending")
			}
		}
	}
	defer slot.Close()
	tick.Stop()

	cmd := exec.Command("/bin/bash", spec.Script)
	cmd.Dir = spec.Dir
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	st.Start = time.Now()
	env := append(os.Environ(), spec.Env...)
	env = append(env, "FARM_JOB_ID="+id, "FARM_BACKEND=local")
	if spec.TimeLimit > 0 {
		st.End = st.Start.Add(spec.TimeLimit)
		env = append(env, "FARM_END_TIME="+strconv.FormatInt(st.End.Unix(), 10))
	}
	cmd.Env = env
	if err := cmd.Start(); err != nil {
		return finish(Failed, "cannot start job script: "+err.Error())
	}
	st.State, st.PGID = Running, cmd.Process.Pid
	if err := save(); err != nil {
		syscall.Kill(-st.PGID, syscall.SIGKILL)
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var limit <-chan time.Time
	if spec.TimeLimit > 0 {
		t := time.NewTimer(spec.TimeLimit)
		defer t.Stop()
		limit = t.C
	}
	// A cancel from another host comes only as the cancel file.
	poll := time.NewTicker(cancelPoll)
	defer poll.Stop()
	final, reason := JobState(""), ""
	var kill <-chan time.Time
	stop := func(state JobState, why string) {
		if final != "" {
			return
		}
		final, reason = state, why
		syscall.Kill(-st.PGID, syscall.SIGTERM)
		kill = time.After(l.killWait())
	}
	for {
		select {
		case err := <-exited:
			syscall.Kill(-st.PGID, syscall.SIGKILL) // what the job left behind
			st.Exit = cmd.ProcessState.ExitCode()
			if final == "" {
				final = Completed
				if err != nil {
					final = Failed
					if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
						reason = fmt.Sprintf("job script killed by signal %d", ws.Signal())
						st.Exit = 128 + int(ws.Signal())
					}
				}
			}
			return finish(final, reason)
		case <-limit:
			stop(Timeout, fmt.Sprintf("time limit %s reached; stopping the job", spec.TimeLimit))
		case <-sigs:
			if cancelMode() == "pending" {
				continue // prune raced with our start: running jobs stay
			}
			stop(Cancelled, "cancelled")
		case <-poll.C:
			if final == "" && cancelMode() == "all" {
				stop(Cancelled, "cancelled")
			}
		case <-kill:
			syscall.Kill(-st.PGID, syscall.SIGKILL)
		}
	}
}
