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
