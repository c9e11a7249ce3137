package main

import (
	"github.com/farm-hpc/farm/farm"
	"github.com/urfave/cli/v2"
)

func cleanCmd() *cli.Command {
	return &cli.Command{
		Name:  "clean",
		Usage: "delete everything in the farm directory but the scripts, config and table.dat",
		Description: "Lists what it would delete — results (RUN*), STATUSES, OUTPUT, MISC, farm.log,\n" +
			"table.dat_, table.dat.orig, ... — and deletes it only with --yes. Keeps job_script.sh,\n" +
			"single_case.sh, resubmit_script.sh, final.sh, config and table.dat. Refused while jobs\n" +
			"of the farm are pending or running.\n\nEXAMPLES:\n   farm clean\n   farm clean --yes",
		Flags: []cli.Flag{&cli.BoolFlag{Name: "yes", Usage: "really delete"}},
		Action: func(c *cli.Context) error {
			// Listing reads the farm; deleting wants a whole one.
			mode, open := farm.CleanList, openReading
			if c.Bool("yes") {
				mode, open = farm.CleanDelete, openFarm
			}
			f, err := open(c)
			if err != nil {
				return err
			}
			return f.Clean(c.Context, mode)
		},
	}
}
