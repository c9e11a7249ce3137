package backend

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Commands runs a batch system's commands (sbatch, squeue, qsub, qstat,
// ...) for an engine: each under a timeout, a failure as a *CommandError
// that says which command, how it failed and what it printed.
type Commands struct {
	Timeout time.Duration // per command
	// Who and TimeoutEnv make the message of a command that timed out:
	// "no answer within 30s (Who may be overloaded or down; set
	// TimeoutEnv to wait longer)".
	Who        string
	TimeoutEnv string
	// Message makes a failed command's message from what it printed on
	// stderr, and on stdout if stderr was empty (Grid Engine prints some
	// errors there); nil: stderr, trimmed.
	Message func(stderr, stdout string) string
}

// CommandError is a batch system's command that failed, timed out or could
// not be started.
type CommandError struct {
	Command  string        // the command line, shortened if long
	Stderr   string        // what the command said of its failure, trimmed
	Err      error         // the exec error (exit status, not found, ...)
	Timeout  time.Duration // non-zero if the command was killed at this timeout
	ExitCode int           // the exit status; -1 if it did not exit by itself
	// Who and TimeoutEnv are those of the Commands that ran it.
	Who, TimeoutEnv string
}

// Error implements error.
func (e *CommandError) Error() string {
	if e.Timeout > 0 {
		return fmt.Sprintf("%s: no answer within %s (%s may be overloaded or down; set %s to wait longer)", e.Command, e.Timeout, e.Who, e.TimeoutEnv)
	}
	if e.Stderr != "" {
		return fmt.Sprintf("%s: %v: %s", e.Command, e.Err, e.Stderr)
	}
	return fmt.Sprintf("%s: %v", e.Command, e.Err)
}

// Unwrap returns the underlying exec error.
func (e *CommandError) Unwrap() error { return e.Err }

// Run runs one command under the timeout and returns its standard output.
// env nil means this process's environment. own starts it in a process
// group of its own, so that a Ctrl-C at the terminal, which signals the
// whole foreground group, does not reach it (a submission in flight is
// then never cut in two). If ctx ends first, the error wraps ctx's.
func (c Commands) Run(ctx context.Context, env []string, own bool, name string, args ...string) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, name, args...)
	cmd.Env = env
	if own {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	// A killed command's children must not keep us waiting on its pipes.
	cmd.WaitDelay = 2 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err == nil {
		return stdout.String(), nil
	}
	msg := strings.TrimSpace(stderr.String())
	if c.Message != nil {
		msg = c.Message(stderr.String(), stdout.String())
	}
	ce := &CommandError{Command: ShortCommand(name, args), Stderr: msg, Err: err, ExitCode: -1, Who: c.Who, TimeoutEnv: c.TimeoutEnv}
	if ee, ok := err.(*exec.ExitError); ok {
		ce.ExitCode = ee.ExitCode()
	}
	if cctx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
		ce.Timeout = c.Timeout
	} else if ctx.Err() != nil {
		return stdout.String(), fmt.Errorf("%s: %w", ce.Command, ctx.Err())
	}
	return stdout.String(), ce
}

// ShortCommand renders a command line for messages, eliding long arguments
// (squeue -j with thousands of job IDs).
func ShortCommand(name string, args []string) string {
	parts := []string{name}
	for _, a := range args {
		if len(a) > 80 {
			a = a[:60] + "..." + a[len(a)-12:]
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
}

// Severity orders the states a job ends in from best to worst (0 for one
// that has not ended), to sum up the tasks of an array by its worst.
func Severity(s JobState) int {
	switch s {
	case Completed:
		return 1
	case Cancelled:
		return 2
	case Timeout:
		return 3
	case Failed:
		return 4
	}
	return 0
}

// Poll calls check every interval until it reports done, or wait has
// passed since the first call (then it returns nil too), or ctx ends (then
// ctx's error). An error from check ends it at once.
func Poll(ctx context.Context, wait, interval time.Duration, check func() (done bool, err error)) error {
	deadline := time.Now().Add(wait)
	for {
		done, err := check()
		if err != nil {
			return err
		}
		if done || time.Now().After(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}

// SubmitError is the error of a submission command (tool: "sbatch") that
// failed in call n of of, after done jobs were submitted: prefix (META's
// words, which scripts match), what the batch system said, and where the
// submission stopped. A timeout says that the job may have been submitted
// after all, and how to check (check: "squeue").
func SubmitError(tool, check, prefix string, err error, n, of, done int) error {
	var ce *CommandError
	msg := err.Error()
	if errors.As(err, &ce) {
		switch {
		case ce.Timeout > 0:
			msg = fmt.Sprintf("%s gave no answer within %s; the job may or may not have been submitted (check %s; set %s to wait longer)", tool, ce.Timeout, check, ce.TimeoutEnv)
		case ce.Stderr != "":
			msg = ce.Stderr
		}
	}
	return fmt.Errorf("%s: %s (%s call %d of %d; %d job(s) submitted before it): %w", prefix, msg, tool, n, of, done, err)
}

// SettleCancel finishes an engine's Cancel once its cancel command ran on
// targets (cancelErr: the command's error): it polls query (every 200 ms,
// for at most wait) until done holds for every target, and returns those
// cancelled. A target that started meanwhile (started, may be nil: a
// pending job that began to run before the cancel came, when only pending
// jobs are cancelled) is neither cancelled nor an error; one not done
// while the cancel command failed is an error that names it. If ctx ends
// the wait, it returns every target and ctx's error.
func SettleCancel[Q any](ctx context.Context, wait time.Duration, targets []string, cancelErr error,
	query func() (Q, error), done, started func(q Q, id string) bool) ([]string, error) {
	var after Q
	var qerr error
	err := Poll(ctx, wait, 200*time.Millisecond, func() (bool, error) {
		after, qerr = query()
		if qerr != nil {
			return false, qerr
		}
		for _, id := range targets {
			if !done(after, id) {
				return false, nil
			}
		}
		return true, nil
	})
	switch {
	case qerr != nil && cancelErr != nil:
		return nil, fmt.Errorf("cancelling %d job(s): %w", len(targets), cancelErr)
	case qerr != nil:
		return targets, fmt.Errorf("checking the cancelled jobs: %w", qerr)
	case err != nil:
		return targets, err // ctx ended the wait
	}
	var cancelled, stuck []string
	for _, id := range targets {
		switch {
		case started != nil && started(after, id):
		case cancelErr != nil && !done(after, id):
			stuck = append(stuck, id)
		default:
			cancelled = append(cancelled, id)
		}
	}
	if len(stuck) > 0 {
		return cancelled, fmt.Errorf("cancelling job(s) %s: %w", strings.Join(stuck, " "), cancelErr)
	}
	return cancelled, nil
}
