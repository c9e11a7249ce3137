package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/casetable"
	"github.com/farm-hpc/farm/farm"
	"github.com/farm-hpc/farm/metajob"
	"github.com/urfave/cli/v2"
)

// Exit codes, listed in 'farm help' (helpExitCodes). classify is the one
// place that maps errors to them.
const (
	exitOK          = 0   // success; for wait, every case succeeded
	exitFailed      = 1   // an error: farm could not do what was asked
	exitTimeout     = 2   // wait: the timeout ran out first
	exitNotAllOK    = 3   // wait: the jobs ended, and some case did not succeed
	exitUsage       = 64  // bad command-line usage
	exitInterrupted = 130 // stopped by Ctrl-C (SIGINT) or SIGTERM
)

const helpExitCodes = `EXIT CODES:
   0   success (farm wait: every case of the farm succeeded)
   1   an error: farm could not do what was asked (farm wait: also a farm never submitted)
   2   farm wait: the --timeout ran out first
   3   farm wait: the jobs ended, and some case failed, was interrupted, was unfit or never ran
   64  bad usage: unknown command, flag, argument or backend
   130 interrupted (Ctrl-C or SIGTERM) before the command was done
`

// usageError is an error in how the command was called.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// notDoneError is farm wait's answer when some case did not succeed: exit
// 3 (not 1, an error: a script tells the two apart), with nothing more to
// say than the summary already printed.
type notDoneError struct{}

func (notDoneError) Error() string { return "not every case succeeded" }

// exitStatus is a command's answer that is an exit status of its own (farm
// run-case: the case's STATUS), with nothing more to say.
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// exitCode prints err (unless it was said already) and returns the exit
// code it calls for.
func exitCode(err error, stderr io.Writer) int {
	code, say := classify(err)
	if say {
		msg := strings.TrimSpace(err.Error())
		if code == exitUsage {
			msg += " (see 'farm help')"
		}
		var said *farm.InterruptedError
		if code == exitInterrupted && !errors.As(err, &said) {
			// Ctrl-C in the middle of something: say so in words, not
			// as Go's "context canceled".
			msg = "interrupted: " + strings.TrimSuffix(msg, ": "+context.Canceled.Error())
		}
		if errors.Is(err, fs.ErrPermission) && !farm.IsUserError(err) {
			// A bare "open X: permission denied": say what to do.
			msg += ": farm must read and write the farm directory's files; check their owner and modes (ls -l), or run farm as their owner"
		}
		fmt.Fprintln(stderr, "farm: "+msg)
	}
	return code
}

// classify maps err to its exit code, and says whether its message is
// still to be printed.
func classify(err error) (code int, say bool) {
	var (
		usage   usageError
		unknown *backend.UnknownError
	)
	var status exitStatus
	switch {
	case err == nil:
		return exitOK, false
	case errors.As(err, &status):
		return int(status), false
	case errors.As(err, &usage), errors.As(err, &unknown):
		return exitUsage, true
	case errors.Is(err, farm.ErrWaitTimeout):
		return exitTimeout, true
	case errors.Is(err, context.Canceled):
		return exitInterrupted, true
	case errors.Is(err, notDoneError{}):
		// Already said: the summary.
		return exitNotAllOK, false
	case errors.Is(err, metajob.ErrFastFailure), errors.As(err, new(*casetable.TableChangedError)):
		// Already said: the job's output.
		return exitFailed, false
	}
	// A *farm.UserError, or any other error.
	return exitFailed, true
}

// asUsage is every command's OnUsageError: urfave/cli's flag errors are
// usage errors, in farm's words (flagErrorMessage), with the flag of the
// command that an undefined one is a typo of, if any.
func asUsage(c *cli.Context, err error, _ bool) error {
	msg := flagErrorMessage(err.Error())
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok && c != nil {
		flags := c.App.Flags
		if c.Command != nil && c.Command.Name != "" {
			flags = c.Command.Flags
		}
		if near := nearestFlag(name, flags); near != "" {
			msg += ": did you mean " + near + "?"
		}
	}
	return usageError{msg}
}

// nearestFlag is the flag of flags (as typed: --name) that name is a typo
// of (nearestName), "" if none.
func nearestFlag(name string, flags []cli.Flag) string {
	var names []string
	for _, f := range flags {
		names = append(names, f.Names()...)
	}
	if n := nearestName(name, names); n != "" {
		return "--" + n
	}
	return ""
}

// nearestName is the one of names (of three letters or more: not -y)
// two letters or fewer from name, the nearest; "" if none.
func nearestName(name string, names []string) string {
	best, bestD := "", 3
	for _, n := range names {
		if d := farm.EditDistance(name, n); len(n) >= 3 && d < bestD {
			best, bestD = n, d
		}
	}
	return best
}
