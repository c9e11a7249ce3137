package main

import (
	"github.com/farm-hpc/farm/farm"
	"github.com/urfave/cli/v2"
)

func statusCmd() *cli.Command {
	return &cli.Command{
		Name:    "Status",
		Aliases: []string{"status"},
		Usage:   "the status of every case that has a record",
		Description: "One row per case: ID, state (succeeded, failed, interrupted, timed out, crashed, running, unfit), STATUS\n" +
			"(for interrupted and timed out cases, the signal that ended them),\n" +
			"duration in seconds, meta-job and host; \"-\" (null in --json) where none is known. A case's\n" +
			"row is its farm-wide outcome over all runs. A crashed case's meta-job died under it\n" +
			"MAX_CRASHES times: resubmit leaves it out unless --crashed.\n" +
			"An unfit case was taken by a meta-job that could not fit it (it needs more CPUs, GPUs or\n" +
			"memory than the job has, or more time than it had left): a last column says why, and the\n" +
			"next resubmit runs it. --json adds where a case ran (loop, cpus, gpus) when known.\n\n" +
			"With --meta, the lines of META's Status.run instead: \"ID STATUS\" for every case that\n" +
			"ended (succeeded or failed; one that timed out has 128+SIGNAL), in ID order, with -f the non-zero ones last.\n\n" +
			"EXAMPLES:\n   farm Status -f\n   farm Status --meta -f | tail\n   farm Status --json | jq '.[] | select(.state != \"succeeded\")'",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "f", Usage: "list non-zero statuses last"},
			&cli.BoolFlag{Name: "failed", Usage: "list only cases that did not succeed"},
			&cli.BoolFlag{Name: "json", Usage: "print a JSON array"},
			&cli.BoolFlag{Name: "meta", Usage: "print META's \"ID STATUS\" lines (cases that ended), for scripts written for META"},
		},
		Action: func(c *cli.Context) error {
			if c.Bool("meta") && c.Bool("json") {
				return usagef("Status takes --meta or --json, not both")
			}
			f, err := openReading(c)
			if err != nil {
				return err
			}
			return f.Status(c.Context, c.App.Writer, farm.StatusOptions{FailedLast: c.Bool("f"), FailedOnly: c.Bool("failed"), JSON: c.Bool("json"), META: c.Bool("meta")})
		},
	}
}
