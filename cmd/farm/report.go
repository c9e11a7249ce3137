package main

import (
	"github.com/farm-hpc/farm/farm"
	"github.com/urfave/cli/v2"
)

func reportCmd() *cli.Command {
	return &cli.Command{
		Name:  "report",
		Usage: "draw the farm: durations, a timeline of the meta-jobs, throughput, failures by host",
		Description: "Writes one self-contained HTML page (no network needed to view it: copy it to a laptop\n" +
			"and open it in a browser) with a histogram of case durations with dt_cutoff marked, a\n" +
			"timeline with a row per meta-job (per loop in WHOLE_NODE mode), the cases ended per\n" +
			"minute with farm query's ETA, failures by host and by exit status, the slowest cases and\n" +
			"the summary numbers. -o names the page (default: report.html in the farm directory);\n" +
			"--png and --svg write the same figures as one image instead (or as well, with -o).\n\n" +
			"EXAMPLES:\n   farm report                  # then, on a laptop: scp cluster:myfarm/report.html .\n   farm report --png figures.png\n" +
			"   farm report -o run3.html --svg run3.svg",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "o", Aliases: []string{"output"}, Usage: "the HTML page to write"},
			&cli.StringFlag{Name: "png", Usage: "write the figures as one PNG image to this file"},
			&cli.StringFlag{Name: "svg", Usage: "write the figures as one SVG image to this file"},
			&cli.Float64Flag{Name: "scale", Value: 2, Usage: "pixels per unit of the PNG (1: 960 pixels wide)"},
		},
		Action: func(c *cli.Context) error {
			if s := c.Float64("scale"); s < 0.25 || s > 8 {
				return usagef("--scale must be between 0.25 and 8, got %g", s)
			}
			f, err := openReading(c)
			if err != nil {
				return err
			}
			return f.Report(c.Context, farm.ReportOptions{HTML: c.String("o"), SVG: c.String("svg"), PNG: c.String("png"), Scale: c.Float64("scale")})
		},
	}
}
