package main

import (
	"fmt"
	"runtime/debug"

	"github.com/urfave/cli/v2"
)

// version is farm's version, set when it is built by
// -ldflags "-X main.version=..." (the Makefile's build: git describe);
// versionString falls back to what the Go toolchain recorded.
var version = ""

// versionString is farm's version: the one built in, else the module's
// version (go install ...@v1.2.3) or the VCS revision Go recorded, else
// "(devel)".
func versionString() string {
	if version != "" {
		return version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "(devel)"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "-dirty"
			}
		}
	}
	if rev != "" {
		return rev[:min(len(rev), 12)] + modified
	}
	return "(devel)"
}

func init() {
	// farm --version (-v) and farm version say "farm VERSION".
	cli.VersionPrinter = func(c *cli.Context) { fmt.Fprintf(c.App.Writer, "farm %s\n", c.App.Version) }
}

func versionCmd() *cli.Command {
	return &cli.Command{
		Name:        "version",
		Usage:       "print farm's version",
		Description: "The same as farm --version.\n\nEXAMPLE:\n   farm version",
		Action: func(c *cli.Context) error {
			cli.ShowVersion(c)
			return nil
		},
	}
}
