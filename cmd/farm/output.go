package main

import (
	"strconv"
	"strings"

	"github.com/farm-hpc/farm/farm"
	"github.com/urfave/cli/v2"
)

func outputCmd() *cli.Command {
	return &cli.Command{
		Name:      "output",
		Usage:     "print what a case wrote (kept apart with OUTPUT=job in config)",
		ArgsUsage: "ID",
		Description: "With OUTPUT=job in config (the default of farms made by farm init), each loop of a\n" +
			"meta-job keeps its cases' standard output and standard error in two files of its own,\n" +
			"OUTPUT/cases.JOBID.loopK.stdout and .stderr, one case after the other, and each case's start\n" +
			"record says where its bytes start. farm output prints a case's bytes exactly as it\n" +
			"wrote them, from whichever job and node ran it: its latest attempt, or --attempt N\n" +
			"(from 1, in the order its attempts started). --failed prints the last lines of every\n" +
			"case that failed or timed out, under a header each.\n\nEXAMPLES:\n" +
			"   farm output 17\n   farm output 17 --stderr --tail 20\n   farm output 17 --attempt 1\n   farm output --failed",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "attempt", Usage: "print attempt `N` (from 1, in the order they started), not the latest"},
			&cli.IntFlag{Name: "tail", Usage: "print only the last `K` lines (with --failed: 10 unless given)"},
			&cli.BoolFlag{Name: "stderr", Usage: "print the case's standard error, not its standard output"},
			&cli.BoolFlag{Name: "failed", Usage: "print the last lines of every case that failed or timed out"},
		},
		Action: func(c *cli.Context) error {
			opt := farm.OutputOptions{Attempt: c.Int("attempt"), Tail: c.Int("tail"), Stderr: c.Bool("stderr"), Failed: c.Bool("failed")}
			args, err := outputFlagsAfter(c.Args().Slice(), &opt)
			if err != nil {
				return err
			}
			switch {
			case opt.Attempt < 0:
				return usagef("--attempt must be 1 or more (attempts count from 1 in the order they started)")
			case opt.Tail < 0:
				return usagef("--tail must be 1 or more lines")
			case opt.Failed && (len(args) > 0 || opt.Attempt > 0):
				return usagef("--failed prints every failed case's last lines: give no case ID and no --attempt with it")
			case !opt.Failed && len(args) != 1:
				return usagef("output takes one case ID, e.g. 'farm output 17', or --failed")
			}
			if !opt.Failed {
				id, err := strconv.ParseInt(args[0], 10, 64)
				if err != nil || id < 1 {
					return usagef("wrong case ID %q: a case ID is a positive integer, as in table.dat", args[0])
				}
				opt.ID = id
			}
			f, err := openReading(c)
			if err != nil {
				return err
			}
			return f.Output(c.Context, c.App.Writer, opt)
		},
	}
}

// outputFlagsAfter reads the flags of farm output given after the case ID
// ("farm output 17 --stderr", which the command line's parser leaves as
// arguments) into opt, and returns the other arguments.
func outputFlagsAfter(args []string, opt *farm.OutputOptions) ([]string, error) {
	var rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") {
			rest = append(rest, a)
			continue
		}
		switch name {
		case "stderr", "failed":
			if hasVal {
				return nil, usagef("--%s takes no value", name)
			}
			if name == "stderr" {
				opt.Stderr = true
			} else {
				opt.Failed = true
			}
			continue
		case "tail", "attempt":
		default:
			return nil, usagef("output: unknown flag %s (flags: --attempt N, --tail K, --stderr, --failed)", a)
		}
		if !hasVal {
			if i+1 == len(args) {
				return nil, usagef("--%s needs a number, e.g. --%s 20", name, name)
			}
			i++
			val = args[i]
		}
		n, err := strconv.Atoi(val)
		if err != nil {
			return nil, usagef("--%s must be a number, got %q", name, val)
		}
		if name == "tail" {
			opt.Tail = n
		} else {
			opt.Attempt = n
		}
	}
	return rest, nil
}
