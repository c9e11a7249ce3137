package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/farm-hpc/farm/farm"
	"github.com/urfave/cli/v2"
)

// Run runs the farm command line and returns its exit code. All output goes
// to stdout and stderr, so tests can run it in-process. The environment is
// read here and by the commands' actions only: library packages are given
// what they need in options structs.
func Run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	app := newApp(stdout, stderr)
	if len(args) > 1 && args[1] == completeCmd {
		// Before the library parses anything: completing runs no action.
		printCandidates(app, args[2:], stdout)
		return exitOK
	}
	if i := slices.Index(args, oldCompleteFlag); i > 0 {
		// The completion function of farm's earlier versions, still
		// loaded in a shell opened before an upgrade (or saved to a
		// file), runs the words typed so far with this flag last: it
		// gets candidates too, and never the command.
		words := slices.Clone(args[1:i])
		if len(words) == 0 || !strings.HasPrefix(words[len(words)-1], "-") {
			words = append(words, "") // it passed the word being typed only if it began with -
		}
		printCandidates(app, words, stdout)
		return exitOK
	}
	notFound := ""
	app.CommandNotFound = func(c *cli.Context, name string) { notFound = name }
	err := app.RunContext(ctx, args)
	if notFound != "" && err == nil {
		err = usagef("unknown command %q", notFound)
	}
	return exitCode(err, stderr)
}

func newApp(stdout, stderr io.Writer) *cli.App {
	return &cli.App{
		Name:  "farm",
		Usage: "run many independent cases (one command line each) as a few meta-jobs on a batch system (" + systemNames() + ") or this machine",
		Description: "A farm is a directory with table.dat (one case per line), job_script.sh, single_case.sh,\n" +
			"resubmit_script.sh and config. Make one with 'farm init DIR', edit it, then run\n" +
			"'farm submit N' inside it.\n\n" + helpExitCodes,
		Version:   versionString(),
		Writer:    stdout,
		ErrWriter: stderr,
		// No EnableBashCompletion: the library's would run the command
		// being completed for commands that parse their own arguments;
		// the completion scripts ask 'farm __complete' (completion.go).
		// Never let the library call os.Exit: Run maps errors to codes.
		ExitErrHandler: func(*cli.Context, error) {},
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "farm", Aliases: []string{"C"}, Value: ".", Usage: "the farm directory", EnvVars: nil},
		},
		Commands:     withUsageErrors(commands()),
		OnUsageError: asUsage,
	}
}

// withUsageErrors makes every command's flag errors usage errors, and
// refuses arguments to a command that takes none ('farm wait 10m' would
// wait for ever, 'farm kill 123' would cancel every job). Hidden commands,
// which job scripts run, are left as they were.
func withUsageErrors(cmds []*cli.Command) []*cli.Command {
	for _, c := range cmds {
		c.OnUsageError = asUsage
		if c.ArgsUsage == "" && !c.SkipFlagParsing && !c.Hidden && c.Action != nil {
			name, act := c.Name, c.Action
			c.Action = func(ctx *cli.Context) error {
				if ctx.NArg() > 0 {
					return usagef("%s takes no arguments, got %q (flags go before arguments)", name, ctx.Args().First())
				}
				return act(ctx)
			}
		}
		withUsageErrors(c.Subcommands)
	}
	return cmds
}

// openFarm opens the farm named by the global --farm flag, for a command
// that starts jobs or changes what the farm runs: its config and scripts
// must be good.
func openFarm(c *cli.Context) (*farm.Farm, error) {
	return farm.Open(c.String("farm"), farm.Options{Out: c.App.Writer, Backends: registry(os.Getenv, c.App.ErrWriter)})
}

// openReading opens the farm named by the global --farm flag for a command
// that reads it or cancels its jobs: a config that does not read, or a
// missing script, is a warning (farm.Options.Reading).
func openReading(c *cli.Context) (*farm.Farm, error) {
	return farm.Open(c.String("farm"), farm.Options{Out: c.App.Writer, Backends: registry(os.Getenv, c.App.ErrWriter), Reading: true})
}
