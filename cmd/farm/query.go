package main

import (
	"time"

	"github.com/urfave/cli/v2"
)

func queryCmd() *cli.Command {
	return &cli.Command{
		Name:  "query",
		Usage: "short summary: jobs queued/running/finished, cases by state, throughput and ETA",
		Description: "Cases are counted for the current run and farm-wide. The throughput is measured over\n" +
			"the last 10 minutes; the ETA is for the current run's remaining cases at that rate.\n" +
			"--watch redraws a progress bar every --interval until no job of the farm is active\n" +
			"(or Ctrl-C), with one scheduler query per refresh.\n\nEXAMPLES:\n" +
			"   farm query\n   farm query --watch --interval 30s\n   farm query --json | jq .farm_cases",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print a JSON object"},
			&cli.BoolFlag{Name: "watch", Aliases: []string{"w"}, Usage: "redraw a progress bar until the farm's jobs end"},
			durationFlag{&cli.DurationFlag{Name: "interval", Value: 10 * time.Second, Usage: "refresh interval of --watch"}},
		},
		Action: func(c *cli.Context) error {
			f, err := openReading(c)
			if err != nil {
				return err
			}
			if c.Bool("watch") {
				if c.Duration("interval") < 100*time.Millisecond {
					return usagef("--interval must be at least 100ms")
				}
				return f.Watch(c.Context, c.App.Writer, watchOptions(c))
			}
			return f.PrintQuery(c.Context, c.App.Writer, format(c))
		},
	}
}
