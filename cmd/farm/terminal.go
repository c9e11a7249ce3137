package main

import (
	"os"

	"github.com/farm-hpc/farm/farm"
	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"
)

// isTTY reports whether f, a reader or a writer, is a terminal (not
// merely a character device: /dev/null is one too): one to ask a question
// on, or to redraw a progress bar in place on.
func isTTY(f any) bool {
	file, ok := f.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(file.Fd()), unix.TCGETS)
	return err == nil
}

// watchOptions are how --watch and --progress draw the progress bar on the
// command's output: in place on a terminal, cut to its width.
func watchOptions(c *cli.Context) farm.WatchOptions {
	opt := farm.WatchOptions{Interval: c.Duration("interval"), TTY: isTTY(c.App.Writer)}
	if f, ok := c.App.Writer.(*os.File); ok && opt.TTY {
		if ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ); err == nil {
			opt.Columns = int(ws.Col)
		}
	}
	return opt
}
