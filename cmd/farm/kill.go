package main

import (
	"github.com/farm-hpc/farm/backend"
	"github.com/urfave/cli/v2"
)

func killCmd(scope backend.CancelScope) *cli.Command {
	name, usage := "kill", "cancel every running and pending job of the farm"
	desc := "Cases running in cancelled meta-jobs are recorded as interrupted; 'farm resubmit N' runs\n" +
		"them again.\n\nEXAMPLE:\n   farm kill && farm resubmit 4"
	if scope == backend.PendingOnly {
		name, usage = "prune", "cancel the farm's pending jobs only; running ones finish"
		desc = "Running meta-jobs go on claiming cases until none is left.\n\nEXAMPLE:\n   farm prune"
	}
	return &cli.Command{
		Name:        name,
		Usage:       usage,
		Description: desc,
		Action: func(c *cli.Context) error {
			f, err := openReading(c)
			if err != nil {
				return err
			}
			return f.Cancel(c.Context, scope)
		},
	}
}
