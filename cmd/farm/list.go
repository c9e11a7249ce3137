package main

import "github.com/urfave/cli/v2"

func listCmd() *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "every job of the farm with its state",
		Description: "One row per job of every run: backend job ID, run, kind (meta, simple, auto, final),\n" +
			"state, start and end, and the cases it ended and is running. A first line names the\n" +
			"farm's backend when config sets BACKEND.\n\nEXAMPLES:\n" +
			"   farm list\n   farm list --json | jq -r '.[] | select(.state==\"RUNNING\") | .id'",
		Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print a JSON array"}},
		Action: func(c *cli.Context) error {
			f, err := openReading(c)
			if err != nil {
				return err
			}
			return f.List(c.Context, c.App.Writer, format(c))
		},
	}
}
