package local

import (
	"context"
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

	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/fsretry"
	"github.com/farm-hpc/farm/proc"
)

// supervisor is the process that runs one local job (farm _localjob): it
// waits for the job's dependencies and a slot, runs the job script, stops
// it at its time limit or when cancelled, and records each state.
type supervisor struct {
	l    *Backend
	id   string
	spec localSpec
	st   localState
	out  *os.File        // the job's output file
	log  *fsretry.Writer // out, riding out a full disk
	sigs chan os.Signal  // SIGTERM, SIGINT, SIGHUP: a cancel from this host
}

// RunJob is the body of a local job's supervising process. environ is the
// supervisor's environment (the submitting one): the job script gets it,
// with the request's Env and the job's own variables added.
func (l *Backend) RunJob(id string, environ []string) error {
	s := &supervisor{l: l, id: id}
	if err := readJSON(l.path(id, ".job"), &s.spec); err != nil {
		return fmt.Errorf("local job %s: %w", id, err)
	}
	var err error
	if s.out, err = os.OpenFile(s.spec.Output, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644); err != nil {
		return err
	}
	defer s.out.Close()
	s.log = &fsretry.Writer{F: s.out}
	s.st = localState{State: backend.Pending, PID: os.Getpid(), PIDStart: proc.StartTicks(os.Getpid()), Host: proc.HostID()}
	if err := s.save(); err != nil {
		return err
	}
	s.sigs = make(chan os.Signal, 4)
	signal.Notify(s.sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(s.sigs)
	slot, err := s.waitToStart()
	if slot == nil {
		return err
	}
	defer slot.Close()
	return s.run(environ)
}

// save writes the job's state. The state file may be on a full disk for a
// while: retried, so that a job that ended well does not show as failed
// (its state unsaved).
func (s *supervisor) save() error {
	r := fsretry.Retrier{Log: s.log}
	return r.Do(context.Background(), func() error { return writeJSON(s.l.path(s.id, ".state"), s.st) })
}

// finish records the job's end.
func (s *supervisor) finish(state backend.JobState, reason string) error {
	s.st.State, s.st.Reason, s.st.End = state, reason, time.Now()
	if reason != "" {
		fmt.Fprintf(s.log, "farm: local job %s: %s\n", s.id, reason)
	}
	return s.save()
}

// cancelMode is what the job's cancel file says: "", "all" or "pending"
// (parseCancel).
func (s *supervisor) cancelMode() string {
	b, _ := os.ReadFile(s.l.path(s.id, ".cancel"))
	return parseCancel(b)
}

// waitToStart waits, pending, for the job's dependencies to end and then
// for a job slot, which it returns. If the job is cancelled (or fails)
// meanwhile it records so and returns a nil slot and the recording's error.
func (s *supervisor) waitToStart() (*os.File, error) {
	if s.cancelMode() != "" {
		return nil, s.finish(backend.Cancelled, "cancelled while pending")
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	lastPoll := time.Now()
	for {
		if s.ready() {
			slot, err := s.l.takeSlot()
			if err != nil {
				return nil, s.finish(backend.Failed, "no job slot: "+err.Error())
			}
			if slot != nil {
				// A cancel from another host may have come since the
				// last poll: it must not find the job started.
				if s.cancelMode() != "" {
					slot.Close()
					return nil, s.finish(backend.Cancelled, "cancelled while pending")
				}
				return slot, nil
			}
		}
		select {
		case <-s.sigs:
			return nil, s.finish(backend.Cancelled, "cancelled while pending")
		case <-tick.C:
		}
		if time.Since(lastPoll) >= cancelPoll {
			lastPoll = time.Now()
			if s.cancelMode() != "" {
				return nil, s.finish(backend.Cancelled, "cancelled while pending")
			}
		}
	}
}

// ready reports whether every job the job waits for has ended.
func (s *supervisor) ready() bool {
	if len(s.spec.After) == 0 {
		return true
	}
	// A job whose state does not read counts as it would without it
	// (Jobs's infos): pending a minute, then ended.
	infos, _ := s.l.Jobs(context.Background(), s.spec.After)
	for _, in := range infos {
		if in.State.Active() {
			return false
		}
	}
	return true
}

// start starts the job script in a session of its own (and so a process
// group of its own, of the same number: session.go) and records the job
// as running.
func (s *supervisor) start(environ []string) (*exec.Cmd, error) {
	cmd := exec.Command("/bin/bash", s.spec.Script)
	cmd.Dir = s.spec.Dir
	cmd.Stdout, cmd.Stderr = s.out, s.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	s.st.Start = time.Now()
	env := append(jobEnviron(environ), s.spec.Env...)
	env = append(env, "FARM_JOB_ID="+s.id, "FARM_BACKEND="+Name)
	if s.spec.TimeLimit > 0 {
		s.st.End = s.st.Start.Add(s.spec.TimeLimit)
		env = append(env, "FARM_END_TIME="+strconv.FormatInt(s.st.End.Unix(), 10))
	}
	cmd.Env = env
	if err := cmd.Start(); err != nil {
		return nil, s.finish(backend.Failed, "cannot start job script: "+err.Error())
	}
	s.st.State, s.st.PGID = backend.Running, cmd.Process.Pid
	if err := s.save(); err != nil {
		killSession(s.st.PGID, syscall.SIGKILL)
		return nil, err
	}
	return cmd, nil
}

// run runs the job script until it exits, stopping it (SIGTERM, then
// SIGKILL after KillWait) at its time limit or when cancelled, and records
// how it ended.
func (s *supervisor) run(environ []string) error {
	cmd, err := s.start(environ)
	if cmd == nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var limit <-chan time.Time
	if s.spec.TimeLimit > 0 {
		t := time.NewTimer(s.spec.TimeLimit)
		defer t.Stop()
		limit = t.C
	}
	// A cancel from another host comes only as the cancel file.
	poll := time.NewTicker(cancelPoll)
	defer poll.Stop()
	final, reason := backend.JobState(""), ""
	var kill <-chan time.Time
	stop := func(state backend.JobState, why string) {
		if final != "" {
			return
		}
		final, reason = state, why
		syscall.Kill(-s.st.PGID, syscall.SIGTERM)
		kill = time.After(s.l.killWait())
	}
	for {
		select {
		case err := <-exited:
			killSession(s.st.PGID, syscall.SIGKILL) // what the job left behind
			return s.ended(cmd, err, final, reason)
		case <-limit:
			stop(backend.Timeout, fmt.Sprintf("time limit %s reached; stopping the job", s.spec.TimeLimit))
		case <-s.sigs:
			if s.cancelMode() == "pending" {
				continue // prune raced with our start: running jobs stay
			}
			stop(backend.Cancelled, "cancelled")
		case <-poll.C:
			if final == "" && s.cancelMode() == "all" {
				stop(backend.Cancelled, "cancelled")
			}
		case <-kill:
			killSession(s.st.PGID, syscall.SIGKILL)
		}
	}
}

// jobEnviron is environ without the variables this engine sets in a job
// (FARM_JOB_ID, FARM_END_TIME): a job submitted from inside another (the
// -auto job's resubmission) must not take the other's for its own — a job
// without a time limit would inherit the submitting job's end.
func jobEnviron(environ []string) []string {
	var env []string
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if k != "FARM_JOB_ID" && k != "FARM_END_TIME" {
			env = append(env, kv)
		}
	}
	return env
}

// ended records the end of a job script that exited with err: final, if
// the supervisor stopped it, else COMPLETED or FAILED by its exit.
func (s *supervisor) ended(cmd *exec.Cmd, err error, final backend.JobState, reason string) error {
	s.st.Exit = cmd.ProcessState.ExitCode()
	if final == "" {
		final = backend.Completed
		if err != nil {
			final = backend.Failed
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				reason = fmt.Sprintf("job script killed by signal %d", ws.Signal())
				s.st.Exit = 128 + int(ws.Signal())
			}
		}
	}
	return s.finish(final, reason)
}

// slots returns the number of local job slots.
func (l *Backend) slots() int {
	if l.Slots > 0 {
		return l.Slots
	}
	return runtime.NumCPU()
}

// takeSlot tries to lock one of the host's job slots; the lock (flock) goes
// away with the process, so a dead job never holds a slot. nil: all taken.
// The slot directory is checked first (CheckSlotDir), and a slot file is
// never opened through a link.
func (l *Backend) takeSlot() (*os.File, error) {
	dir := l.slotDir()
	if err := CheckSlotDir(dir); err != nil {
		return nil, err
	}
	for _, i := range rand.Perm(l.slots()) {
		p := filepath.Join(dir, fmt.Sprintf("slot.%d", i))
		fh, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
		if err != nil {
			return nil, fmt.Errorf("job slot %s: %w", p, err)
		}
		if syscall.Flock(int(fh.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			return fh, nil
		}
		fh.Close()
	}
	return nil, nil
}

func (l *Backend) slotDir() string {
	if l.SlotDir != "" {
		return l.SlotDir
	}
	return DefaultSlotDir(os.TempDir())
}
