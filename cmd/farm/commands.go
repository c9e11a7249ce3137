package main

import (
	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/farm"
	"github.com/urfave/cli/v2"
)

// commands are farm's commands, one file each (or per small group: the
// ones that run inside jobs are in jobs.go): each parses its flags and
// arguments into an options struct and calls one function, most of them of
// package farm.
func commands() []*cli.Command {
	return []*cli.Command{
		initCmd(),
		submitCmd(),
		resubmitCmd(),
		addCmd(),
		importMetaqCmd(),
		waitCmd(),
		statusCmd(),
		listCmd(),
		queryCmd(),
		outputCmd(),
		reportCmd(),
		cleanCmd(),
		completionCmd(),
		versionCmd(),
		killCmd(backend.AllActive),
		killCmd(backend.PendingOnly),
		repairCmd(),
		adoptCmd(),
		runCaseCmd(),
		metajobCmd(),
		autojobCmd(),
		localJobCmd(),
	}
}

// format is the output format the --json flag asks for.
func format(c *cli.Context) farm.Format {
	if c.Bool("json") {
		return farm.JSON
	}
	return farm.Text
}

// noEnv is an environment with nothing set.
func noEnv(string) string { return "" }
