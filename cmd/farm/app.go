package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"strings"
	"syscall"

	"github.com/farm-hpc/farm/farm"
	"github.com/urfave/cli/v2"
)

// Exit codes, listed in 'farm help'.
const (
	exitOK      = 0  // success; for wait, every case succeeded
	exitFailed  = 1  // an error, or (wait) some case did not succeed
	exitTimeout = 2  // wait: the timeout ran out first
	exitUsage   = 64 // bad command-line usage
)

// usageError marks errors in how the command was called.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// exitCodeError carries a specific exit code with an optional message.
type exitCodeError struct {
	code int
	msg  string
}

func (e exitCodeError) Error() string { return e.msg }

const helpExitCodes = `EXIT CODES:
   0   success (farm wait: every case of the farm succeeded)
   1   an error, or (farm wait) some case failed, was interrupted or never ran
   2   farm wait: the --timeout ran out first
   64  bad usage: unknown command, flag or argument
`

// Run runs the farm command line and returns its exit code. All output goes
// to stdout and stderr, so tests can run it in-process.
func Run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	app := newApp(stdout, stderr)
	notFound := ""
	app.CommandNotFound = func(c *cli.Context, name string) { notFound = name }
	err := app.RunContext(ctx, args)
	if notFound != "" && err == nil {
		err = usagef("unknown command %q", notFound)
	}
	return exitCode(err, stderr)
}

func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return exitOK
	}
	var ec exitCodeError
	if errors.As(err, &ec) {
		if ec.msg != "" {
			fmt.Fprintln(stderr, "farm: "+ec.msg)
		}
		return ec.code
	}
	msg := strings.TrimSpace(err.Error())
	var ue usageError
	if errors.As(err, &ue) || isCLIUsage(msg) {
		fmt.Fprintln(stderr, "farm: "+msg+" (see 'farm help')")
		return exitUsage
	}
	fmt.Fprintln(stderr, "farm: "+msg)
	return exitFailed
}

// isCLIUsage recognises urfave/cli's own usage errors.
func isCLIUsage(msg string) bool {
	for _, p := range []string{"flag provided but not defined", "flag needs an argument", "invalid value", "No help topic", "Required flag"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

func newApp(stdout, stderr io.Writer) *cli.App {
	return &cli.App{
		Name:  "farm",
		Usage: "run many independent cases (one command line each) as a few meta-jobs on Slurm or this machine",
		Description: "A farm is a directory with table.dat (one case per line), job_script.sh, single_case.sh,\n" +
			"resubmit_script.sh and config. Make one with 'farm init DIR', edit it, then run\n" +
			"'farm submit N' inside it.\n\n" + helpExitCodes,
		Writer:               stdout,
		ErrWriter:            stderr,
		EnableBashCompletion: true,
		// Never let the library call os.Exit: Run maps errors to codes.
		ExitErrHandler: func(*cli.Context, error) {},
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "farm", Aliases: []string{"C"}, Value: ".", Usage: "the farm directory", EnvVars: nil},
		},
		Commands: commands(),
		OnUsageError: func(c *cli.Context, err error, isSub bool) error {
			return usageError{err.Error()}
		},
	}
}

// openFarm opens the farm named by the global --farm flag.
func openFarm(c *cli.Context) (*farm.Farm, error) {
	return farm.Open(c.String("farm"), c.App.Writer)
}
