package backend

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestCommandsRun: a command's output, its failure with its exit code and
// message (stderr; stdout through Message), its timeout with the advice to
// wait longer, and a cancelled context, each as a real process.
func TestCommandsRun(t *testing.T) {
	c := Commands{Timeout: 5 * time.Second, Who: "the test scheduler", TimeoutEnv: "TEST_TIMEOUT"}
	ctx := context.Background()
	if out, err := c.Run(ctx, nil, false, "sh", "-c", "echo hello"); err != nil || out != "hello\n" {
		t.Errorf("echo: %q, %v", out, err)
	}
	_, err := c.Run(ctx, nil, true, "sh", "-c", "echo no such job >&2; exit 3")
	var ce *CommandError
	if !errors.As(err, &ce) || ce.ExitCode != 3 || ce.Stderr != "no such job" || !strings.Contains(err.Error(), "sh -c echo no such job >&2; exit 3: exit status 3: no such job") {
		t.Errorf("a failure: %v (%+v)", err, ce)
	}
	c.Message = func(stderr, stdout string) string { return "said " + strings.TrimSpace(stdout) }
	if _, err := c.Run(ctx, nil, false, "sh", "-c", "echo on stdout; exit 1"); !errors.As(err, &ce) || ce.Stderr != "said on stdout" {
		t.Errorf("Message: %v", err)
	}
	c.Timeout = 200 * time.Millisecond
	start := time.Now()
	_, err = c.Run(ctx, nil, false, "sleep", "30")
	if !errors.As(err, &ce) || ce.Timeout != c.Timeout || !strings.Contains(err.Error(), "no answer within 200ms (the test scheduler may be overloaded or down; set TEST_TIMEOUT to wait longer)") {
		t.Errorf("a timeout: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("a 200ms timeout took %s", d)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	c.Timeout = 5 * time.Second
	if _, err := c.Run(cctx, nil, false, "sleep", "30"); !errors.Is(err, context.Canceled) || errors.As(err, &ce) {
		t.Errorf("a cancelled context: %v, want context.Canceled and no CommandError", err)
	}
	if s := ShortCommand("squeue", []string{"-j", strings.Repeat("1234,", 40)}); len(s) > 100 || !strings.Contains(s, "...") {
		t.Errorf("ShortCommand: %q", s)
	}
}

// TestPoll: Poll stops when check is done, at its deadline (no error), at
// check's error, and when ctx ends (ctx's error).
func TestPoll(t *testing.T) {
	ctx := context.Background()
	n := 0
	if err := Poll(ctx, time.Minute, time.Millisecond, func() (bool, error) { n++; return n == 3, nil }); err != nil || n != 3 {
		t.Errorf("done at the 3rd check: %v after %d", err, n)
	}
	start := time.Now()
	if err := Poll(ctx, 50*time.Millisecond, 5*time.Millisecond, func() (bool, error) { return false, nil }); err != nil || time.Since(start) < 50*time.Millisecond {
		t.Errorf("deadline: %v after %s", err, time.Since(start))
	}
	boom := errors.New("boom")
	if err := Poll(ctx, time.Minute, time.Millisecond, func() (bool, error) { return false, boom }); err != boom {
		t.Errorf("check's error: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := Poll(cctx, time.Minute, time.Second, func() (bool, error) { return false, nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

// TestSettleCancel: what an engine's Cancel returns once its cancel command
// ran: the jobs done, not those that started meanwhile; the ones left
// while the command failed, named in an error; a query that fails; a wait
// that ctx ends.
func TestSettleCancel(t *testing.T) {
	ctx := context.Background()
	type q map[string]string // job -> "done", "started", "pending"
	answer := func(m q) func() (q, error) { return func() (q, error) { return m, nil } }
	done := func(m q, id string) bool { return m[id] != "pending" }
	started := func(m q, id string) bool { return m[id] == "started" }
	targets := []string{"1", "2", "3"}

	got, err := SettleCancel(ctx, time.Second, targets, nil, answer(q{"1": "done", "2": "started", "3": "done"}), done, started)
	if err != nil || strings.Join(got, " ") != "1 3" {
		t.Errorf("all settled: %v, %v; want 1 3 (2 started)", got, err)
	}
	failed := errors.New("scancel: exit status 1")
	got, err = SettleCancel(ctx, 50*time.Millisecond, targets, failed, answer(q{"1": "done", "2": "pending", "3": "done"}), done, nil)
	if strings.Join(got, " ") != "1 3" || err == nil || !strings.Contains(err.Error(), "cancelling job(s) 2: scancel: exit status 1") {
		t.Errorf("one left after a failed cancel: %v, %v", got, err)
	}
	got, err = SettleCancel(ctx, 50*time.Millisecond, targets, nil, answer(q{"1": "done", "2": "pending", "3": "done"}), done, nil)
	if err != nil || len(got) != 3 {
		t.Errorf("one still pending at the deadline, the cancel command fine: %v, %v; want all 3 (the batch system finishes it)", got, err)
	}
	broken := func() (q, error) { return nil, errors.New("squeue: no answer") }
	if got, err = SettleCancel(ctx, time.Second, targets, nil, broken, done, nil); len(got) != 3 || err == nil || !strings.Contains(err.Error(), "checking the cancelled jobs: squeue: no answer") {
		t.Errorf("query failing: %v, %v", got, err)
	}
	if got, err = SettleCancel(ctx, time.Second, targets, failed, broken, done, nil); got != nil || err == nil || !strings.Contains(err.Error(), "cancelling 3 job(s): scancel") {
		t.Errorf("query and cancel failing: %v, %v", got, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if got, err = SettleCancel(cctx, time.Minute, targets, nil, answer(q{"1": "pending"}), done, nil); len(got) != 3 || !errors.Is(err, context.Canceled) {
		t.Errorf("ctx ended: %v, %v", got, err)
	}
}

// TestSubmitError: a submission command's failure says what the batch
// system said and where the submission stopped; a timeout, that the job
// may have been submitted and how to check.
func TestSubmitError(t *testing.T) {
	ce := &CommandError{Command: "sbatch x", Stderr: "Invalid account", Err: errors.New("exit status 1"), ExitCode: 1}
	err := SubmitError("sbatch", "squeue", "Something wrong with sbatch farm submission", ce, 2, 3, 1000)
	if want := "Something wrong with sbatch farm submission: Invalid account (sbatch call 2 of 3; 1000 job(s) submitted before it)"; !strings.HasPrefix(err.Error(), want) || !errors.Is(err, ce.Err) {
		t.Errorf("%v; want it to start %q and wrap the exec error", err, want)
	}
	ce = &CommandError{Command: "qsub x", Timeout: 30 * time.Second, TimeoutEnv: "FARM_SGE_CALL_TIMEOUT"}
	err = SubmitError("qsub", "qstat", "Something wrong with qsub farm submission", ce, 1, 1, 0)
	if !strings.Contains(err.Error(), "qsub gave no answer within 30s; the job may or may not have been submitted (check qstat; set FARM_SGE_CALL_TIMEOUT to wait longer)") {
		t.Errorf("timeout: %v", err)
	}
}
