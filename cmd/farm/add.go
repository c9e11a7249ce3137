package main

import (
	"io"
	"os"

	"github.com/farm-hpc/farm/farm"
	"github.com/urfave/cli/v2"
)

func addCmd() *cli.Command {
	return &cli.Command{
		Name:      "add",
		Usage:     "add cases to the farm, also while it runs",
		ArgsUsage: "FILE | - | --sweep TEMPLATE NAME=VALUES...",
		Description: "Reads cases from FILE (- for standard input), one command per line as in table.dat\n" +
			"(#FARM parts too), numbers them after the last case of table.dat and appends them to\n" +
			"it (written whole and renamed: never half-written). When the farm has a run, they are\n" +
			"queued to it: its meta-jobs claim them after its other cases, or with --first before\n" +
			"its unclaimed ones. A line table.dat would refuse (a bad #FARM part, a command too long)\n" +
			"or one that already starts with an ID is refused with its line, and nothing is added.\n" +
			"Meta-jobs with nothing left wait WAIT_FOR_CASES seconds (config) for added cases.\n" +
			sweepHelp + "\n" +
			"EXAMPLES:\n   farm add more_cases.txt\n   ./make_cases.py | farm add -\n   farm add --first urgent.txt\n" +
			"   farm add --sweep 'simulate --T {T} --seed {seed}' T=0.5,1,2 seed=1..100",
		Flags: []cli.Flag{&cli.BoolFlag{Name: "first", Usage: "claim them before the run's unclaimed cases"}, sweepFlag},
		Action: func(c *cli.Context) error {
			_, sweep, _, err := sweepArgs(c, 0)
			if err != nil {
				return err
			}
			if sweep == nil && c.NArg() != 1 {
				return usagef("add takes one argument: a FILE of cases, or - for standard input (or --sweep TEMPLATE NAME=VALUES...)")
			}
			f, err := openFarm(c)
			if err != nil {
				return err
			}
			if sweep != nil {
				return f.Add(c.Context, farm.AddOptions{Name: farm.SweepName, Input: sweep.Reader(), First: c.Bool("first"), Sweep: sweep})
			}
			name := c.Args().First()
			var in io.Reader = os.Stdin
			if name != "-" {
				fh, err := os.Open(name)
				if err != nil {
					return farm.Userf("farm add: %v", err)
				}
				defer fh.Close()
				in = fh
			} else {
				name = "standard input"
			}
			return f.Add(c.Context, farm.AddOptions{Name: name, Input: in, First: c.Bool("first")})
		},
	}
}
