// Package local is the engine that runs a farm's jobs on this machine, as
// processes, for machines without a batch system (a workstation, an
// interactive node, a CI runner). See Backend.
package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/farm-hpc/farm/atomicfile"
	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/layout"
	"github.com/farm-hpc/farm/proc"
)

// Backend is the built-in engine for machines without a batch system. It is a
// small real batch system: every job is a detached process (in its own
// session, so the submitting shell may exit) that waits for its
// dependencies and for one of the host's job slots (at most Options.Slots,
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
type Backend struct {
	Dir string // farm directory
	Options
}

// Options tune the local engine. The farm command reads them from
// FARM_LOCAL_SLOTS and FARM_LOCAL_KILL_WAIT; a job's supervisor gets them
// from the submitting command, on its command line.
type Options struct {
	Bin string // the farm executable, which supervises each job; os.Executable() if empty

	// KillWait is the time between SIGTERM and SIGKILL when a job is
	// stopped (DefaultKillWait if zero).
	KillWait time.Duration

	// Slots is how many jobs of the user may run at once on this host,
	// across all farms (the number of CPUs if zero).
	Slots int

	// SlotDir is the directory of the user's job slots on this host
	// (DefaultSlotDir if ""). It must be the user's own and writable by
	// no one else: CheckSlotDir refuses it otherwise.
	SlotDir string

	// GPUs is FARM_GPUS as the submitting command has it, which its jobs
	// inherit (ParseGPUs): Preflight refuses one that does not read, so
	// that farm submit says so before any job fails on it.
	GPUs string

	// Scripts are the job-script dialects the local engine reads a
	// script's run-time in (Capabilities.Scripts), tried in order: every
	// registered engine's, so that a farm made for any of them can be
	// tried here.
	Scripts []backend.Script

	// Notice, if set, is told what the user should know of a Cancel that
	// did not go as usual (a cancel file it could not write, a job whose
	// end is not recorded yet): the farm command prints it on stderr.
	Notice func(msg string)
}

var _ backend.Backend = (*Backend)(nil)

// DefaultKillWait is the default grace time between SIGTERM and SIGKILL.
const DefaultKillWait = 10 * time.Second

// Name is the engine's name.
const Name = "local"

// New returns the local backend for the farm in dir.
func New(dir string, opt Options) *Backend { return &Backend{Dir: dir, Options: opt} }

// Engine registers the local engine: always available.
func Engine(opt Options) backend.Engine {
	return backend.Engine{Name: Name, Open: func(dir string) backend.Backend { return New(dir, opt) }}
}

var _ backend.Preflighter = (*Backend)(nil)

// Preflight implements backend.Preflighter: FARM_GPUS must read
// (Options.GPUs), and the job-slot directory must be safe (CheckSlotDir).
func (l *Backend) Preflight(ctx context.Context) error {
	if _, err := ParseGPUs(l.GPUs); err != nil {
		return err
	}
	return CheckSlotDir(l.slotDir())
}

// Name implements backend.Backend.
func (l *Backend) Name() string { return Name }

// Capabilities implements backend.Backend: no arrays (a SIMPLE-mode
// submission is Count jobs), the time limit enforced by the supervisor,
// states recorded in the farm directory, the run-time read in any of
// Options.Scripts, no submit command for batch-system arguments.
func (l *Backend) Capabilities() backend.Capabilities {
	return backend.Capabilities{EnforcesTimeLimit: true, CrossHost: true, Scripts: l.Scripts, IgnoresArgs: true}
}

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
	State    backend.JobState
	PID      int    // the job's supervising process
	PIDStart uint64 // its start ticks, against PID reuse
	PGID     int    // the job script's process group and session, once running
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

// The cancel file says "all" (cancel the job) or "pending" (cancel it if
// it has not started), blanks and a line break after it. Submit makes it
// at once with cancelNone, cancelSize bytes, so that a cancel overwrites
// it in place (writeCancel): on a full disk, or one out of inodes, where
// no file can be made nor grow, 'farm kill' still reaches a job on another
// host. A job submitted before has no such file: a cancel makes it, with
// the mode alone, as its supervisor reads it.
const (
	cancelNone = "none   \n"
	cancelSize = len(cancelNone)
)

// cancelContent is the cancel file's content for mode, padded to
// cancelSize.
func cancelContent(mode string) []byte {
	b := []byte(fmt.Sprintf("%-*s\n", cancelSize-1, mode))
	return b
}

// parseCancel reads a cancel file's content: "", "all" or "pending".
func parseCancel(b []byte) string {
	mode := strings.TrimSpace(string(b))
	if mode == strings.TrimSpace(cancelNone) {
		return ""
	}
	return mode
}

// writeCancel records a cancel of job id (mode "all" or "pending") in its
// cancel file: in place, over what Submit made (no new block nor inode),
// or, for a job submitted before, as a new file.
func (l *Backend) writeCancel(id, mode string) error {
	path := l.path(id, ".cancel")
	fh, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err == nil {
		_, err = fh.WriteAt(cancelContent(mode), 0)
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		return err
	}
	if !os.IsNotExist(err) {
		return err
	}
	if err := os.WriteFile(path, []byte(mode), 0o644); err != nil {
		os.Remove(path) // made and left empty: it must not say "" for long
		return err
	}
	return nil
}

// notice tells the user msg, if the backend has a Notice.
func (l *Backend) notice(format string, args ...any) {
	if l.Notice != nil {
		l.Notice(fmt.Sprintf(format, args...))
	}
}

// elsewhere returns the host identity of a job whose supervisor runs on
// another host (or in another container), whose PIDs cannot be judged
// here; "" for a job of this host or of a record that does not say.
func (st *localState) elsewhere() string {
	if st.Host != "" && st.Host != proc.HostID() {
		return st.Host
	}
	return ""
}

func (l *Backend) dir() string                { return layout.EngineDir(l.Dir, Name) }
func (l *Backend) path(id, ext string) string { return filepath.Join(l.dir(), id+ext) }

func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return atomicfile.WriteBytes(path, proc.NewMode(0o644), append(b, '\n'))
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
func (l *Backend) nextIDs(ctx context.Context, n int) ([]string, error) {
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
		if _, err := os.Stat(filepath.Join(l.Dir, layout.StatusDir, layout.StatusFile(id, 0))); err == nil {
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
	return ids, atomicfile.WriteBytes(counter, proc.NewMode(0o644), []byte(strconv.Itoa(next)))
}

func (l *Backend) bin() (string, error) {
	if l.Bin != "" {
		return l.Bin, nil
	}
	return os.Executable()
}

// Submit implements backend.Backend: each job gets a spec file
// (MISC/local/ID.job) and a supervising process, 'farm _localjob', in a
// session of its own, with the submitting environment (req.Environ, or
// this process's if nil).
func (l *Backend) Submit(ctx context.Context, req backend.SubmitRequest) ([]string, error) {
	if err := os.MkdirAll(l.dir(), 0o755); err != nil {
		return nil, err
	}
	bin, err := l.bin()
	if err != nil {
		return nil, err
	}
	// Said now, not by every job failing to start.
	if err := CheckSlotDir(l.slotDir()); err != nil {
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
		// The cancel file, for a cancel on a full disk (see cancelNone):
		// without it a cancel makes it, as before.
		if err := os.WriteFile(l.path(id, ".cancel"), []byte(cancelNone), 0o644); err != nil {
			os.Remove(l.path(id, ".cancel"))
		}
		cmd := exec.Command(bin, l.supervisorArgs(id)...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		cmd.Dir = l.Dir
		cmd.Env = req.Environ
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

// supervisorArgs is the command line of job id's supervisor: the farm
// directory, the job and this backend's options.
func (l *Backend) supervisorArgs(id string) []string {
	args := []string{"_localjob", "--dir", l.Dir, "--id", id, "--slot-dir", l.slotDir()}
	if l.KillWait > 0 {
		args = append(args, "--kill-wait", l.KillWait.String())
	}
	if l.Slots > 0 {
		args = append(args, "--slots", strconv.Itoa(l.Slots))
	}
	return args
}

// DamagedError is a job's state record (MISC/local/ID.state) that does
// not read. The record is only ever replaced whole (written aside and
// renamed), so it is not one being written: it was damaged, and nothing
// tells whether the job still runs.
type DamagedError struct {
	Path, ID string
	Err      error
}

func (e *DamagedError) Error() string {
	return fmt.Sprintf("%s is damaged (%v): farm cannot tell whether local job %s still runs; once no 'farm _localjob ... --id %s' process is left (ps -ef | grep _localjob), remove the file, and the job counts as failed (a minute after its submission)", e.Path, e.Err, e.ID, e.ID)
}

// job reads one job's spec and state and derives its current state. err
// is the state record's error, if it does not read (a *DamagedError, or
// the error reading it); info is then what the job would be without it:
// pending for a minute after its submission, then failed.
func (l *Backend) job(id string) (localSpec, localState, backend.JobInfo, error) {
	var spec localSpec
	var st localState
	info := backend.JobInfo{ID: id, State: backend.Gone}
	if err := readJSON(l.path(id, ".job"), &spec); err != nil {
		return spec, st, info, nil
	}
	if err := readState(l.path(id, ".state"), id, &st); err != nil {
		// Not started yet; a job that never wrote its state within a
		// minute of submission died at birth.
		info.State = backend.Pending
		if time.Since(spec.Submitted) > time.Minute {
			info.State = backend.Failed
		}
		if os.IsNotExist(err) {
			err = nil
		}
		return spec, st, info, err
	}
	info.State, info.Start, info.End = st.State, st.Start, st.End
	if info.OtherHost = st.elsewhere(); info.OtherHost != "" {
		if st.State.Active() && proc.EarlierBoot(st.Host) {
			// This host has rebooted since: the job died with it.
			info.State, info.OtherHost = backend.Failed, ""
			return spec, st, info, nil
		}
		// Its PIDs mean nothing here: it is as it last said.
		return spec, st, info, nil
	}
	if st.State.Active() && !proc.AliveSince(st.PID, st.PIDStart) {
		// Its supervisor saves the job's end before it exits: one that
		// ended between the reading above and this look has saved it.
		var again localState
		if readState(l.path(id, ".state"), id, &again) == nil && !again.State.Active() {
			st = again
			info.State, info.Start, info.End = st.State, st.Start, st.End
			return spec, st, info, nil
		}
		// Its supervisor died: the job script may still run on.
		if st.State == backend.Running && sessionAlive(st.PGID) {
			return spec, st, info, nil
		}
		info.State = backend.Failed
	}
	return spec, st, info, nil
}

// readState reads the state record of job id at path: a *DamagedError if
// it is not one.
func readState(path, id string, st *localState) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, st); err != nil {
		return &DamagedError{Path: path, ID: id, Err: fmt.Errorf("not a job state record: %w", err)}
	}
	switch st.State {
	case backend.Pending, backend.Running, backend.Completed, backend.Failed, backend.Cancelled, backend.Timeout:
		return nil
	}
	return &DamagedError{Path: path, ID: id, Err: fmt.Errorf("unknown state %.20q", st.State)}
}

// Jobs implements Backend. A job whose state record does not read is
// reported as it would be without it, and Jobs returns the first such
// error: the state of a job farm cannot tell is not guessed for the user.
func (l *Backend) Jobs(ctx context.Context, ids []string) (map[string]backend.JobInfo, error) {
	out := make(map[string]backend.JobInfo, len(ids))
	var first error
	for _, id := range ids {
		_, _, info, err := l.job(id)
		out[id] = info
		if first == nil {
			first = err
		}
	}
	return out, first
}

// Cancel implements backend.Backend. It writes each job's cancel file,
// which its supervisor polls, and signals the supervisors of this host for
// a prompt end. It waits (up to KillWait and a little, or until ctx is
// done) for the jobs to end, so that the farm is quiet when it returns.
//
// On a full disk (or one out of inodes, or any filesystem that refuses
// the write) the cancel file is written in place (writeCancel); should
// that fail too, a job of this host is cancelled by the signal alone (its
// supervisor, finding no cancel file, stops the job), and Notice says so.
// Only a job whose supervisor runs on another host, which reads nothing
// but the file, and a prune (the file tells a job that must stay running
// from a pending one) need the file: Cancel fails for them, saying why.
func (l *Backend) Cancel(ctx context.Context, ids []string, scope backend.CancelScope) ([]string, error) {
	pendingOnly := scope == backend.PendingOnly
	var cancelled []string
	wait := l.killWait() + 5*time.Second
	for _, id := range ids {
		_, st, info, _ := l.job(id)
		if !info.State.Active() || (pendingOnly && info.State != backend.Pending) {
			continue
		}
		mode := "all"
		if pendingOnly {
			mode = "pending"
		}
		supervised := info.OtherHost == "" && st.PID > 0 && proc.AliveSince(st.PID, st.PIDStart)
		if err := l.writeCancel(id, mode); err != nil {
			switch {
			case info.OtherHost != "":
				return cancelled, fmt.Errorf("cancelling local job %s: %w; its supervisor runs on %s and reads only that file: once the filesystem takes writes again, run the command again", id, err, info.OtherHost)
			case pendingOnly:
				return cancelled, fmt.Errorf("cancelling local job %s: %w; without that file its supervisor cannot tell a prune from a kill, which would stop it if it started meanwhile: once the filesystem takes writes again, run the command again", id, err)
			case !supervised && st.PGID <= 0:
				return cancelled, fmt.Errorf("cancelling local job %s: %w", id, err)
			}
			how := "its supervisor, on this host, was told by a signal instead"
			if !supervised {
				how = "its processes, on this host, were killed instead (its supervisor is gone)"
			}
			l.notice("farm: local job %s: its cancel file could not be written (%v); %s", id, cause(err), how)
		}
		if info.OtherHost != "" {
			// Its supervisor sees the cancel file within cancelPoll
			// (and whatever the shared filesystem's caches add).
			wait = l.killWait() + 5*time.Second + 2*cancelPoll
		} else if supervised {
			syscall.Kill(st.PID, syscall.SIGTERM)
		} else if st.PGID > 0 {
			killSession(st.PGID, syscall.SIGKILL)
		}
		cancelled = append(cancelled, id)
	}
	if err := l.waitQuiet(ctx, cancelled, wait); err != nil {
		return cancelled, err
	}
	var unrecorded []string
	for _, id := range cancelled {
		if _, _, info, _ := l.job(id); info.State.Active() {
			unrecorded = append(unrecorded, id)
		}
	}
	if len(unrecorded) > 0 {
		why := ""
		if err := l.probeWrite(); err != nil {
			why = fmt.Sprintf(" (the farm's filesystem refuses writes: %v)", err)
		}
		l.notice("farm: the end of local job(s) %s is not recorded yet%s: their supervisors, told to stop them, record it once they can write; 'farm list' shows it then", strings.Join(unrecorded, " "), why)
	}
	return cancelled, nil
}

// waitQuiet waits, up to wait in all or until ctx is done, for the
// cancelled jobs to end (quiet).
func (l *Backend) waitQuiet(ctx context.Context, cancelled []string, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for _, id := range cancelled {
		var goneAt time.Time
		for time.Now().Before(deadline) {
			recorded, gone := l.quiet(id)
			if recorded {
				break
			}
			// Its processes gone, its supervisor records the end at
			// once; a moment's wait for that record, so that what
			// Cancel returns is what 'farm list' then shows (CI once
			// read RUNNING right after). A supervisor that cannot
			// write (a full disk) does not keep Cancel waiting long.
			if gone && goneAt.IsZero() {
				goneAt = time.Now()
			}
			if gone && time.Since(goneAt) > recordWait {
				break
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return nil
}

// recordWait is how long Cancel waits for the record of a job's end once
// its processes are gone.
const recordWait = 2 * time.Second

// quiet reports whether job id has ended by its record, and, a job of this
// host, whether its processes are all gone (its supervisor about to record
// the end, or retrying it: a full disk).
func (l *Backend) quiet(id string) (recorded, gone bool) {
	_, st, info, _ := l.job(id)
	if !info.State.Active() {
		return true, true
	}
	return false, info.OtherHost == "" && st.State == backend.Running && st.PGID > 0 && !sessionAlive(st.PGID)
}

// probeWrite tries to make (and removes) a file among the job records: the
// error if the filesystem refuses.
func (l *Backend) probeWrite() error {
	fh, err := os.CreateTemp(l.dir(), ".probe-*")
	if err != nil {
		return cause(err)
	}
	_, err = fh.Write([]byte{'\n'})
	fh.Close()
	os.Remove(fh.Name())
	if err != nil {
		return cause(err)
	}
	return nil
}

// cause is the error under a path error (ENOSPC: "no space left on
// device"), for a line that names the file itself.
func cause(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func (l *Backend) killWait() time.Duration {
	if l.KillWait > 0 {
		return l.KillWait
	}
	return DefaultKillWait
}

// Self implements backend.Backend: the job's supervisor passes its ID and
// end time in FARM_JOB_ID and FARM_END_TIME; Alloc is this machine's (the
// CPUs this process may run on, the GPUs FARM_GPUS lists, MemTotal), and
// a FARM_GPUS that does not read is an error.
func (l *Backend) Self(ctx context.Context, req backend.SelfRequest) (backend.Self, error) {
	id := req.Env("FARM_JOB_ID")
	if id == "" {
		return backend.Self{}, errors.New("FARM_JOB_ID is not set: not inside a local farm job")
	}
	s := backend.Self{ID: id}
	var err error
	if s.Alloc, err = selfAlloc(req.Env); err != nil {
		return backend.Self{}, err
	}
	if v, err := strconv.ParseInt(req.Env("FARM_END_TIME"), 10, 64); err == nil && v > 0 {
		s.End = time.Unix(v, 0)
	}
	return s, nil
}
