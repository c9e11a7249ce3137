package main

import (
	"strings"

	"github.com/farm-hpc/farm/tablefmt"
	"github.com/urfave/cli/v2"
)

// sweepFlag is farm add's and farm init's --sweep TEMPLATE (issue 38):
// its parameters, NAME=VALUES, are the arguments that follow.
var sweepFlag = &cli.StringFlag{Name: "sweep", Usage: "make the cases of a parameter sweep: `TEMPLATE`, a command with a {NAME} where each value goes; NAME=VALUES arguments follow (T=0.5,1,2 seed=1..100), the last varying fastest"}

// sweepHelp is the help's paragraph on --sweep.
const sweepHelp = "--sweep TEMPLATE NAME=VALUES...: the cases are the product of the parameters, in the order of\n" +
	"nested loops as given (the last varies fastest); VALUES is a list a,b,c whose items may be\n" +
	"ranges of whole numbers FROM..TO or FROM..TO..STEP (001..100 keeps the width); a value that is\n" +
	"not a plain word is put in single quotes, so the command gets it as one argument.\n"

// sweepArgs finds a sweep among a command's arguments: --sweep TEMPLATE
// as the library parsed it (given before the arguments), or --sweep
// TEMPLATE or --sweep=TEMPLATE after the first lead arguments (farm init
// DIR --sweep ...: the library parses flags before the arguments only).
// It returns the arguments before the sweep's parameters, and the sweep
// (nil, and every argument, if there is none). A sweep that does not
// parse is a usage error, one line saying what to do.
func sweepArgs(c *cli.Context, lead int) ([]string, *tablefmt.Sweep, string, error) {
	args := c.Args().Slice()
	template, set := c.String("sweep"), c.IsSet("sweep")
	if len(args) > lead {
		switch a := args[lead]; {
		case a == "--sweep" || a == "-sweep":
			if len(args) == lead+1 {
				return nil, nil, "", usagef("--sweep needs the command template, e.g. --sweep 'simulate --T {T}' T=0.5,1,2")
			}
			template, set = args[lead+1], true
			args = append(args[:lead:lead], args[lead+2:]...)
		case strings.HasPrefix(a, "--sweep="):
			template, set = strings.TrimPrefix(a, "--sweep="), true
			args = append(args[:lead:lead], args[lead+1:]...)
		}
	}
	if !set || len(args) < lead {
		return args, nil, "", nil
	}
	for _, a := range args[lead:] {
		if strings.HasPrefix(a, "-") {
			return nil, nil, "", usagef("%s among --sweep's parameters: give farm's flags before --sweep (farm %s %s--sweep TEMPLATE NAME=VALUES...)", a, c.Command.Name, map[bool]string{true: "DIR ", false: ""}[lead > 0])
		}
	}
	s, err := tablefmt.ParseSweep(template, args[lead:])
	if err != nil {
		return nil, nil, "", usagef("%v", err)
	}
	given := shellQuote(template)
	for _, a := range args[lead:] {
		given += " " + shellQuote(a)
	}
	return args[:lead], s, given, nil
}

// shellQuote is s as a shell word, for showing a command as given.
func shellQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t'\"\\$`;&|<>(){}*?[]#~!") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
