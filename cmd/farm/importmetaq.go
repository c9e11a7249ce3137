package main

import (
	"github.com/farm-hpc/farm/farm"
	"github.com/urfave/cli/v2"
)

func importMetaqCmd() *cli.Command {
	return &cli.Command{
		Name:      "import-metaq",
		Usage:     "add the task scripts of a METAQ queue as cases",
		ArgsUsage: "DIR",
		Description: "Reads the task scripts of the METAQ queue DIR (its priority/ and todo/ folders, in\n" +
			"METAQ's order) and adds each as a case that runs it, with what its #METAQ flags say\n" +
			"as a #FARM part: NODES n is nodes=n; GPUS g is gpus= g/n per node, rounded up;\n" +
			"MIN_WC_TIME (2hr, 30min, 1:30:00, seconds...) is min_time=. The tasks of priority/\n" +
			"are added as 'farm add --first' adds them (ahead of the run's unclaimed cases), then\n" +
			"those of todo/ as 'farm add' does. The task files stay where they are; the ones\n" +
			"added are listed in MISC/metaq.imported, and importing DIR again adds only new ones.\n" +
			"A task that does not read or is not executable is refused with its file and line,\n" +
			"and nothing is added. Task scripts that call srun must run it on the case's nodes:\n" +
			"srun -N $FARM_NNODES --nodelist=$FARM_NODELIST ...\n\n" +
			"EXAMPLES:\n   farm import-metaq ~/METAQ && farm submit 4\n   farm import-metaq ~/METAQ     # again, after new tasks were put in todo/",
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usagef("import-metaq takes one argument: the directory of a METAQ queue (with todo/ and priority/)")
			}
			f, err := openFarm(c)
			if err != nil {
				return err
			}
			return f.ImportMetaq(c.Context, farm.ImportMetaqOptions{Dir: c.Args().First(), Warn: c.App.ErrWriter})
		},
	}
}
