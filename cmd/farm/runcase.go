package main

import (
	"fmt"
	"os"
	"strconv"

	"github.com/farm-hpc/farm/layout"
	"github.com/farm-hpc/farm/metajob"
	"github.com/urfave/cli/v2"
)

func runCaseCmd() *cli.Command {
	return &cli.Command{
		Name:      "run-case",
		Usage:     "run one case in the foreground, as a meta-job would, to try it by hand",
		ArgsUsage: "ID",
		Description: "Runs case ID of table.dat here and now (on an interactive node, say), exactly as a\n" +
			"meta-job runs it: its RUN directory made if RUN_DIRS=1, single_case.sh sourced by\n" +
			"bash with ID, COMM, METAJOB_ID=run-case and N_cases set, and table.dat and the\n" +
			"case's line number as $1 and $2. Its output comes to the terminal, and farm exits\n" +
			"with the case's STATUS. Nothing is claimed or recorded: the farm's runs do not\n" +
			"know the case ran. (./single_case.sh table.dat LINE, as in META, does the same by\n" +
			"the line number, for a single_case.sh made by farm init.)\n\n" +
			"EXAMPLE:\n   farm run-case 3",
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usagef("run-case takes one case ID, e.g. 'farm run-case 3'")
			}
			id, err := strconv.ParseInt(c.Args().First(), 10, 64)
			if err != nil || id < 1 {
				return usagef("wrong case ID %q: a case ID is a positive integer, as in table.dat", c.Args().First())
			}
			f, err := openFarm(c)
			if err != nil {
				return err
			}
			code, cs, err := metajob.RunCase(f, id, os.Stdout)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.App.ErrWriter, "farm: case %d (line %d of %s) ended with STATUS %d; not recorded (run-case only tries a case)\n", cs.ID, cs.Line, layout.Table, code)
			return exitStatus(code)
		},
	}
}
