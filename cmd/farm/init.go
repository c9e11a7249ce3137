package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/farm"
	"github.com/urfave/cli/v2"
)

func initCmd() *cli.Command {
	engines := initEngines()
	var names, edits []string
	for _, e := range engines {
		names = append(names, e.Name)
		edits = append(edits, fmt.Sprintf("%s with --engine %s", e.Edit, e.Name))
	}
	return &cli.Command{
		Name:      "init",
		Usage:     "make a new farm directory with editable templates",
		ArgsUsage: "DIR [--sweep TEMPLATE NAME=VALUES...]",
		Description: "Creates DIR with job_script.sh, single_case.sh, resubmit_script.sh, config and an\n" +
			"example table.dat. DIR must not exist or be empty. The job scripts carry the batch\n" +
			"system's options (" + strings.Join(edits, "; ") + ";\n" +
			"the local backend reads the run-time of any). With --sweep, table.dat holds the cases of\n" +
			"a parameter sweep instead of the example's.\n" + sweepHelp + "\nEXAMPLES:\n" +
			"   farm init myfarm && cd myfarm && farm submit 2\n   farm init --engine " + names[len(names)-1] + " myfarm\n   farm init --backend local myfarm   # try it on this machine\n" +
			"   farm init myfarm --sweep 'simulate --T {T} --seed {seed}' T=0.5,1,2 seed=1..100",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "engine", Value: names[0], Usage: "the batch system the job scripts are for: " + strings.Join(names, " or ")},
			&cli.StringFlag{Name: "backend", Usage: "the farm's backend, written to config's BACKEND: " + strings.Join(registry(noEnv, io.Discard).Names(), ", ") + " (its job scripts too, unless --engine says)"},
			sweepFlag,
		},
		Action: func(c *cli.Context) error {
			args, sweep, given, err := sweepArgs(c, 1)
			if err != nil {
				return err
			}
			if len(args) > 1 && strings.HasPrefix(args[1], "-") {
				return usagef("%s after the directory: give init's flags before it (farm init --backend local DIR), but --sweep, which may come last (farm init DIR --sweep TEMPLATE NAME=VALUES...)", args[1])
			}
			if len(args) != 1 {
				return usagef("init takes one argument: the new farm directory (then --sweep TEMPLATE NAME=VALUES..., if a sweep)")
			}
			be := c.String("backend")
			if err := registry(noEnv, io.Discard).Check(be); err != nil {
				return err
			}
			if be == "auto" {
				be = "" // the default: config says nothing
			}
			name := c.String("engine")
			if !c.IsSet("engine") && slices.Contains(names, be) {
				name = be // --backend sge: Grid Engine's job scripts
			}
			i := slices.Index(names, name)
			if i < 0 {
				return usagef("unknown engine %q for farm init --engine: %s", name, strings.Join(names, " or "))
			}
			dir := args[0]
			if err := farm.InitWith(dir, engines[i].Templates, farm.InitOptions{Backend: be, Sweep: sweep, SweepArgs: given}); err != nil {
				return err
			}
			if sweep != nil {
				fmt.Fprintf(c.App.Writer, "Created farm %s with the sweep's %d cases in table.dat (IDs 1-%d): edit job_script.sh (%s) and single_case.sh, then run 'farm submit N' in it.\n", dir, sweep.Cases(), sweep.Cases(), engines[i].Edit)
			} else {
				fmt.Fprintf(c.App.Writer, "Created farm %s: edit table.dat (one case per line), job_script.sh (%s) and single_case.sh, then run 'farm submit N' in it.\n", dir, engines[i].Edit)
			}
			if be != "" {
				fmt.Fprintf(c.App.Writer, "Its backend is %s (BACKEND in config): 'farm submit' and 'farm resubmit' use it unless given --backend.\n", be)
			}
			return nil
		},
	}
}

// initEngines are the registered engines farm init writes job scripts for
// (backend.Engine.Templates), the default first.
func initEngines() []backend.Engine {
	var out []backend.Engine
	for _, e := range registry(noEnv, io.Discard).Engines() {
		if e.Templates != nil {
			out = append(out, e)
		}
	}
	return out
}

// runTimeHelp says how the registered engines' job scripts set the
// run-time, for the help: "'#SBATCH -t 0-01:00' for Slurm, ...".
func runTimeHelp() string {
	var parts []string
	for _, e := range registry(noEnv, io.Discard).Engines() {
		if e.Script != nil {
			parts = append(parts, fmt.Sprintf("'%s' for %s", e.Script.RunTimeLine(time.Hour), e.Script.System()))
		}
	}
	return strings.Join(parts, ", ")
}

// systemNames are the registered engines' batch systems, for the help.
func systemNames() string {
	var names []string
	for _, e := range registry(noEnv, io.Discard).Engines() {
		if e.Script != nil {
			names = append(names, e.Script.System())
		}
	}
	return strings.Join(names, ", ")
}
