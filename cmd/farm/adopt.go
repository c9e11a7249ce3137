package main

import (
	"os"

	"github.com/farm-hpc/farm/farm"
	"github.com/urfave/cli/v2"
)

func adoptCmd() *cli.Command {
	return &cli.Command{
		Name:      "adopt",
		Usage:     "turn a META farm directory into a farm, in place",
		ArgsUsage: "[DIR]",
		Description: "Takes over a farm directory made and run by META (config.h, job_script.sh ending\n" +
			"with task.run, single_case.sh, table.dat, status.* files of \"ID STATUS\" lines):\n" +
			"   - config.h's NJOBS_MAX, N_failed_max, dt_failed, WHOLE_NODE and NWHOLE become\n" +
			"     config (with RUN_DIRS=0); an older META farm without config.h gets farm's\n" +
			"     defaults (with RUN_DIRS=0);\n" +
			"   - the last line of job_script.sh (task.run) and of resubmit_script.sh\n" +
			"     (autojob.run) become farm's; the originals are kept as *.meta;\n" +
			"   - META's status files become STATUSES/status.meta-JOBID, read as the records\n" +
			"     of the runs before farm: farm Status shows them, farm resubmit runs only\n" +
			"     the cases that did not succeed;\n" +
			"   - single_case.sh and table.dat stay as they are: farm calls single_case.sh\n" +
			"     as META does (table and line number as $1 $2).\n" +
			"It refuses, changing nothing, while jobs of the farm are queued or running: it asks\n" +
			"Slurm (squeue) for your jobs whose working directory is the farm's, and refuses\n" +
			"when Slurm does not answer; only --backend local skips that check. A --backend\n" +
			"given is written to config as BACKEND, which farm submit and farm resubmit use from\n" +
			"then on (unless given --backend). DIR defaults to --farm (the current directory).\n\n" +
			"EXAMPLE:\n   farm adopt ~/scratch/my_meta_farm && cd ~/scratch/my_meta_farm && farm resubmit 8",
		Flags: []cli.Flag{&cli.StringFlag{Name: "backend", Usage: "the batch system to ask for jobs still running in the directory (default: auto)"}},
		Action: func(c *cli.Context) error {
			if c.NArg() > 1 {
				return usagef("adopt takes at most one directory, e.g. 'farm adopt DIR'")
			}
			dir := c.String("farm")
			if c.NArg() == 1 {
				dir = c.Args().First()
			}
			f, err := farm.Open(dir, farm.Options{Out: c.App.Writer, Backends: registry(os.Getenv, c.App.ErrWriter)})
			if err != nil {
				return err
			}
			return f.Adopt(c.Context, adoptBackend(c.String("backend")), c.String("backend"), metaTemplates())
		},
	}
}
