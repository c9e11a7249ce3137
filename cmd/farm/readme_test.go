package main

import (
	"io"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// README's command table and farm's commands stay in step: every command
// farm shows in its help has a row, every row names a command farm has,
// and every --flag a row gives (for the commands whose flags the library
// parses) is one the command defines.
func TestReadmeCommandTable(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	app := newApp(io.Discard, io.Discard)
	cmds := map[string]*cli.Command{}
	var shown []string
	for _, c := range app.Commands {
		for _, n := range append([]string{c.Name}, c.Aliases...) {
			cmds[n] = c
		}
		if !c.Hidden {
			shown = append(shown, c.Name)
		}
	}
	shown = append(shown, "help") // the library's own
	cmds["help"] = &cli.Command{Name: "help", SkipFlagParsing: true}

	// A row of the table: "| `farm NAME ARGS` | what it does |", or
	// several commands in the first cell ("`farm kill` / `farm prune`");
	// a cell writes a | as \|.
	name := regexp.MustCompile("`farm ([A-Za-z-]+)([^`]*)`")
	flag := regexp.MustCompile(`--[a-z][a-z-]*`)
	var listed []string
	for i, line := range strings.Split(string(b), "\n") {
		cells := strings.Split(strings.ReplaceAll(line, `\|`, "/"), "|")
		if len(cells) < 3 || !strings.HasPrefix(cells[1], " `farm ") {
			continue
		}
		for _, n := range name.FindAllStringSubmatch(cells[1], -1) {
			c, ok := cmds[n[1]]
			if !ok {
				t.Errorf("README.md:%d: farm has no command %q", i+1, n[1])
				continue
			}
			listed = append(listed, c.Name)
			if c.SkipFlagParsing {
				continue // parsed by hand (submit, resubmit): their tests check them
			}
			for _, f := range flag.FindAllString(n[2], -1) {
				if !hasFlag(c, strings.TrimPrefix(f, "--")) {
					t.Errorf("README.md:%d: farm %s has no flag %s", i+1, c.Name, f)
				}
			}
		}
	}
	sort.Strings(shown)
	for _, n := range shown {
		if !slices.Contains(listed, n) {
			t.Errorf("farm %s has no row in README.md's command table", n)
		}
	}
	if len(listed) < 10 {
		t.Fatalf("found %d commands in README.md's table (%v): is the table still there?", len(listed), listed)
	}
}

// hasFlag reports whether command c defines the flag name (or an alias).
func hasFlag(c *cli.Command, name string) bool {
	for _, f := range c.Flags {
		if slices.Contains(f.Names(), name) {
			return true
		}
	}
	return false
}
