package main

import (
	"fmt"
	"io"
	"time"

	"github.com/urfave/cli/v2"
)

func waitCmd() *cli.Command {
	return &cli.Command{
		Name:  "wait",
		Usage: "block until no job of the farm is pending or running",
		Description: "Exit 0 if every case of the farm then succeeded, 3 if some case did not, 1 on an error\n" +
			"(a farm never submitted, say), 2 if --timeout ran out, 130 on Ctrl-C (the jobs go on).\n" +
			"--progress draws farm query's progress bar as it waits:\n" +
			"redrawn in place on a terminal, a line every --interval otherwise.\n\n" +
			"EXAMPLES:\n   farm submit 4 && farm wait --timeout 2h && echo all done\n   farm wait --progress --interval 5s",
		Flags: []cli.Flag{
			durationFlag{&cli.DurationFlag{Name: "timeout", Usage: "give up after this long (e.g. 90s, 2h); 0 waits for ever"}},
			&cli.BoolFlag{Name: "progress", Aliases: []string{"p"}, Usage: "draw farm query's progress bar while waiting"},
			durationFlag{&cli.DurationFlag{Name: "interval", Value: 10 * time.Second, Usage: "refresh interval of --progress"}},
		},
		Action: func(c *cli.Context) error {
			f, err := openReading(c)
			if err != nil {
				return err
			}
			if c.Duration("timeout") < 0 {
				return usagef("--timeout must not be negative (0 waits for ever), got %s", c.Duration("timeout"))
			}
			var bar io.Writer
			if c.Bool("progress") {
				if c.Duration("interval") < 100*time.Millisecond {
					return usagef("--interval must be at least 100ms")
				}
				bar = c.App.Writer
			}
			p, err := f.WaitProgress(c.Context, c.Duration("timeout"), bar, watchOptions(c))
			if err != nil {
				return err
			}
			fmt.Fprintln(c.App.Writer, p)
			if !p.Done() {
				return notDoneError{}
			}
			return nil
		},
	}
}
