package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/farm"
	"github.com/urfave/cli/v2"
)

// submitFlag is one of the flags of submit and resubmit: the one list
// (submitFlags) that parseSubmitArgs reads them by and that their help and
// completion show. Each is taken as --name or -name (-auto is META's),
// and one with a value as --name VALUE or --name=VALUE too.
type submitFlag struct {
	name     string
	aliases  []string // taken as given ("-y")
	value    string   // the value's name, as the usage quotes it ("`IDS`"); "" for a switch
	usage    string
	resubmit bool // resubmit's only: it chooses cases (farm.SelectionFlags)
}

// submitFlags are the flags of submit and resubmit (parseSubmitArgs).
var submitFlags = func() []submitFlag {
	fs := []submitFlag{
		{name: "auto", aliases: []string{"-auto"}, usage: "(or -auto, as META) resubmit what is left when the jobs end, until every case ran (resubmit_script.sh)"},
		{name: "yes", aliases: []string{"-y"}, usage: "submit more than 1000 jobs without asking \"Are you sure?\""},
		{name: "backend", value: "ENGINE", usage: "the `ENGINE` to submit to: " + strings.Join(registry(noEnv, io.Discard).Names(), ", ") + " or auto (default: auto, the first that answers)"},
	}
	for _, o := range farm.SelectionFlags {
		fs = append(fs, submitFlag{name: o.Name, value: o.Value, usage: o.Usage, resubmit: true})
	}
	return fs
}()

// submitFlagsOf are the flags of command cmd (submit or resubmit).
func submitFlagsOf(cmd string) []submitFlag {
	var out []submitFlag
	for _, f := range submitFlags {
		if !f.resubmit || cmd == "resubmit" {
			out = append(out, f)
		}
	}
	return out
}

// cliFlags shows flags in the help (the library parses none of them:
// SkipFlagParsing) and to completion.
func cliFlags(flags []submitFlag) []cli.Flag {
	var out []cli.Flag
	for _, f := range flags {
		var aliases []string
		for _, a := range f.aliases {
			if a := strings.TrimLeft(a, "-"); a != f.name {
				aliases = append(aliases, a)
			}
		}
		if f.value == "" {
			out = append(out, &cli.BoolFlag{Name: f.name, Aliases: aliases, Usage: f.usage, DisableDefaultText: true})
		} else {
			out = append(out, &cli.StringFlag{Name: f.name, Aliases: aliases, Usage: f.usage})
		}
	}
	return out
}

// parseSubmitArgs parses the arguments of command cmd (submit or
// resubmit): "N [-auto] [--yes] [--backend B] [resubmit's flags] [batch
// system args...]" (submit refuses resubmit's flags, which choose cases).
// Flag parsing is done by hand because N may be -1 and the rest goes to
// the engine's submit command (sbatch, qsub). An
// argument that is not a flag of cmd but two letters or fewer from one
// (--backnd, --ye) is refused as a typo, unless it is an option of an
// engine's submit command (--mem): nothing is submitted on a flag that
// would have vanished into Args.
func parseSubmitArgs(cmd string, args []string) (farm.SubmitOptions, error) {
	var opt farm.SubmitOptions
	if len(args) == 0 {
		return opt, usagef("give the number of meta-jobs: 'farm %s N' (N > 0), or 'farm %s -1' for one job per case", cmd, cmd)
	}
	n, err := farm.ParseN(args[0])
	if err != nil {
		return opt, usageError{err.Error()}
	}
	opt.N = n
	reg := registry(noEnv, io.Discard)
	for i := 1; i < len(args); i++ {
		a := args[i]
		if took, err := opt.Select.Parse(args, i); err != nil {
			return opt, usageError{err.Error()}
		} else if took > 0 {
			i += took - 1
			continue
		}
		switch f, value, hasValue := matchSubmitFlag(submitFlags, a); {
		case f == nil:
			if err := checkTypo(a, submitFlags, reg); err != nil {
				return opt, err
			}
			opt.Args = append(opt.Args, a)
		case f.name == "auto":
			opt.Auto = true
		case f.name == "yes":
			opt.Yes = true
		case f.name == "backend":
			if !hasValue {
				if i+1 >= len(args) {
					value = ""
				} else {
					i++
					value = args[i]
				}
			}
			if value == "" {
				return opt, usagef("--backend needs a value: %s", strings.Join(reg.Names(), " or "))
			}
			opt.Backend = value
		}
	}
	if cmd != "resubmit" && !opt.Select.IsZero() {
		return opt, usagef("%s chooses cases for 'farm resubmit'; 'farm %s' runs every case of table.dat", opt.Select, cmd)
	}
	return opt, reg.Check(opt.Backend)
}

// matchSubmitFlag finds the flag of flags that argument a is: --name,
// -name, an alias, or --name=value (hasValue) for a flag with a value.
func matchSubmitFlag(flags []submitFlag, a string) (f *submitFlag, value string, hasValue bool) {
	name, value, hasValue := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
	if !strings.HasPrefix(a, "-") {
		return nil, "", false
	}
	for i := range flags {
		f := &flags[i]
		if slices.Contains(f.aliases, a) {
			return f, "", false
		}
		if name != f.name || (hasValue && (f.value == "" || !strings.HasPrefix(a, "--"))) {
			continue
		}
		return f, value, hasValue
	}
	return nil, "", false
}

// checkTypo refuses argument a, not a flag of flags, if it looks like a
// mistyped one: a flag two letters or fewer from one of flags' names
// (nearestName), and not exactly an option of an engine's submit command
// (reg's Engine.Options: "--mem", "-A").
func checkTypo(a string, flags []submitFlag, reg *backend.Registry) error {
	if !strings.HasPrefix(a, "-") || a == "-" || a == "--" {
		return nil
	}
	opt, _, _ := strings.Cut(a, "=")
	for _, e := range reg.Engines() {
		if slices.Contains(e.Options, opt) {
			return nil
		}
	}
	var names []string
	for _, f := range flags {
		names = append(names, f.name)
		if f.name == strings.TrimLeft(opt, "-") { // -backend=x, --yes=1
			if f.value == "" {
				return usagef("--%s takes no value, got %s (nothing was submitted)", f.name, a)
			}
			return usagef("give --%s %s or --%s=%s, got %s (nothing was submitted)", f.name, f.value, f.name, f.value, a)
		}
	}
	best := nearestName(strings.TrimLeft(opt, "-"), names)
	if best == "" {
		return nil
	}
	return usagef("unknown flag %s: did you mean --%s? (nothing was submitted)", opt, best)
}

func submitCmd() *cli.Command {
	return &cli.Command{
		Name:      "submit",
		Usage:     "submit the farm: N meta-jobs, or -1 for one job per case",
		ArgsUsage: submitArgsUsage,
		Description: "N > 0 (META mode): N meta-jobs share the cases of table.dat, each claiming the next\n" +
			"cases, a batch at a time, until none is left; N above the cases is cut to one meta-job\n" +
			"per case (per NWHOLE cases with WHOLE_NODE), as META does, unless WAIT_FOR_CASES is set.\n" +
			"N = -1 (SIMPLE mode): one job per case.\n" +
			"Other arguments go to the engine's submit command (sbatch, qsub); the run-time must be in\n" +
			"job_script.sh, as the engine's job scripts set it:\n" +
			"   " + runTimeHelp() + ",\n" +
			"from 30 seconds to 35 days (on the local backend, shorter ones are kept to the second).\n" +
			submitYesHelp +
			"Without --backend, config's BACKEND is used; without either (or with auto), the first\n" +
			"engine that answers here, in the order " + strings.Join(registry(noEnv, io.Discard).Names(), ", ") + ", saying why it passed over\n" +
			"the others. A --backend NAME given is written to config as BACKEND=NAME once jobs are\n" +
			"submitted, for the next commands (auto writes nothing).\n" +
			"The environment of the shell reaches every case.\n" +
			"-auto adds one small job (resubmit_script.sh) that runs after the farm's jobs end and\n" +
			"resubmits what is left, again with -auto, until every case ran; with final.sh in the\n" +
			"farm, that job submits final.sh once every case succeeded.\n\nEXAMPLES:\n" +
			"   farm submit 4\n   farm submit -1 --mem=8G\n   farm submit 2000 --yes\n   VAR=1 farm submit 2 --backend local",
		Flags:           cliFlags(submitFlagsOf("submit")), // parsed by parseSubmitArgs
		HideHelpCommand: true,
		SkipFlagParsing: true,
		Action:          submitAction((*farm.Farm).Submit),
	}
}

// submitAction parses the arguments of submit and resubmit (which share
// them) and runs do.
func submitAction(do func(*farm.Farm, context.Context, farm.SubmitOptions) error) cli.ActionFunc {
	return func(c *cli.Context) error {
		if a := c.Args().First(); a == "--help" || a == "-h" || a == "-help" || slices.Contains(c.Args().Slice(), "--help") {
			// Flags are not parsed (N may be -1): help is asked here,
			// and --help anywhere (not -h, qsub's hold) is farm's, not
			// the engine's.
			return cli.ShowCommandHelp(c.Lineage()[1], c.Command.Name)
		}
		opt, err := parseSubmitArgs(c.Command.Name, c.Args().Slice())
		if err != nil {
			return err
		}
		opt.Environ = os.Environ()
		opt.Confirm = confirmer(c.Context, c.Command.Name, c.App.Reader, isTTY(c.App.Reader), c.App.Writer)
		f, err := openFarm(c)
		if err != nil {
			return err
		}
		err = do(f, c.Context, opt)
		if errors.Is(err, farm.ErrNothingLeft) {
			fmt.Fprintln(c.App.Writer, err.Error())
			return nil
		}
		return err
	}
}

func resubmitCmd() *cli.Command {
	return &cli.Command{
		Name:      "resubmit",
		Usage:     "run again the cases that failed, were interrupted, were unfit or never ran",
		ArgsUsage: "N [--failed] [--interrupted] [--never-run] [--unfit] [--crashed] [--cases IDS] " + strings.TrimPrefix(submitArgsUsage, "N "),
		Description: "Refused while any job of the farm is pending or running. Writes the cases still to do\n" +
			"(farm-wide, over every run) to table.dat_ with their original IDs and submits N jobs over\n" +
			"them, as 'farm submit' does. With nothing left, says so and exits 0.\n" +
			"Crashed cases (their meta-job died under them MAX_CRASHES times, config) are left out\n" +
			"unless chosen. --failed, --interrupted, --never-run, --unfit and --crashed choose the\n" +
			"cases in those states only (combinable); --cases 3,17-20 chooses cases by ID, whatever\n" +
			"their state (succeeded and crashed ones too); with both, a case must be in one of the\n" +
			"states and among the IDs. -auto's later resubmits run every case that did not succeed\n" +
			"and is not crashed.\n" +
			submitYesHelp + "\nEXAMPLES:\n" +
			"   farm resubmit 4\n   farm resubmit -1 -auto\n   farm resubmit 2 --failed --unfit\n   farm resubmit 1 --crashed\n   farm resubmit 1 --cases 3,17-20",
		Flags:           cliFlags(submitFlagsOf("resubmit")), // parsed by parseSubmitArgs
		HideHelpCommand: true,
		SkipFlagParsing: true,
		Action:          submitAction((*farm.Farm).Resubmit),
	}
}

// submitArgsUsage is the arguments of submit and resubmit, with the
// registry's engines.
var submitArgsUsage = "N [-auto] [--yes] [--backend " + strings.Join(registry(noEnv, io.Discard).Names(), "|") +
	"] [batch system arguments...]"

// submitYesHelp is the part of submit's and resubmit's help about --yes.
const submitYesHelp = "More than 1000 jobs (N, or with -1 the number of cases) are submitted only once you\n" +
	"type yes to \"Are you sure?\", as META asks; --yes (-y) answers it beforehand, and is\n" +
	"needed where stdin is not a terminal (a script).\n"

// confirmer is SubmitOptions.Confirm for the command verb (submit or
// resubmit): on a terminal (tty) it asks "Are you sure? (type yes)" on out
// and reads the answer from in; elsewhere it refuses, saying to add --yes.
// Ctrl-C while it waits refuses too, with nothing submitted.
func confirmer(ctx context.Context, verb string, in io.Reader, tty bool, out io.Writer) func(int) error {
	return func(jobs int) error {
		if !tty {
			return farm.Userf("%d jobs to %s (more than %d), and no terminal to ask \"Are you sure?\" on: add --yes to %s them; nothing was submitted", jobs, verb, farm.ConfirmAbove, verb)
		}
		fmt.Fprintf(out, "%d jobs to %s (more than %d). Are you sure? (type yes) ", jobs, verb, farm.ConfirmAbove)
		answer := make(chan string, 1)
		go func() {
			line, _ := bufio.NewReader(in).ReadString('\n')
			answer <- strings.TrimSpace(line)
		}()
		select {
		case <-ctx.Done():
			fmt.Fprintln(out)
			return &farm.InterruptedError{What: "nothing was submitted", Err: ctx.Err()}
		case a := <-answer:
			if a != "yes" {
				return farm.Userf("not confirmed (the answer was %q, not yes): nothing was submitted", a)
			}
			return nil
		}
	}
}
