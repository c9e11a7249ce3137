package main

import (
	"github.com/farm-hpc/farm/farm"
	"github.com/urfave/cli/v2"
)

func repairCmd() *cli.Command {
	return &cli.Command{
		Name:  "repair",
		Usage: "rebuild a damaged or missing claim state from the records",
		Description: "The claim state (MISC/chain, MISC/claims.* and MISC/lanes.*) says which cases of the current run are\n" +
			"claimed. If it is damaged or lost, repair rebuilds it from table.dat and the status\n" +
			"records: the newest run is closed, so 'farm resubmit N' runs every case that did not\n" +
			"succeed and none that did. It refuses while jobs of the farm are queued or running.\n\n" +
			"EXAMPLE:\n   farm repair && farm resubmit 4",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "force", Usage: "rebuild even a state that reads well"},
			&cli.BoolFlag{Name: "abandoned", Usage: "--force, and close even a run with no job recorded (its 'farm submit' or 'farm resubmit' was killed before it recorded any)"},
		},
		Action: func(c *cli.Context) error {
			f, err := openReading(c)
			if err != nil {
				return err
			}
			mode := farm.RepairIfDamaged
			if c.Bool("force") {
				mode = farm.RepairForce
			}
			if c.Bool("abandoned") {
				mode = farm.RepairAbandoned
			}
			return f.Repair(c.Context, mode)
		},
	}
}
