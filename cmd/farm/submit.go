package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/farm-hpc/farm/farm"
	"github.com/urfave/cli/v2"
)

// parseSubmitArgs parses "N [-auto] [--yes] [--backend B] [batch system
// args...]". Flag parsing is done by hand because N may be -1 and the rest
// goes to the engine's submit command (sbatch, qsub).
func parseSubmitArgs(args []string) (farm.SubmitOptions, error) {
	var opt farm.SubmitOptions
	if len(args) == 0 {
		return opt, usagef("give the number of meta-jobs: 'farm submit N' (N > 0), or 'farm submit -1' for one job per case")
	}
	n, err := farm.ParseN(args[0])
	if err != nil {
		return opt, usageError{err.Error()}
	}
	opt.N = n
	for i := 1; i < len(args); i++ {
		a := args[i]
		if took, err := opt.Select.Parse(args, i); err != nil {
			return opt, usageError{err.Error()}
		} else if took > 0 {
			i += took - 1
			continue
		}
		switch {
		case a == "-auto" || a == "--auto":
			opt.Auto = true
		case a == "--yes" || a == "-yes" || a == "-y":
			opt.Yes = true
		case a == "--backend" || a == "-backend":
			if i+1 >= len(args) {
				return opt, usagef("--backend needs a value: %s", strings.Join(registry(noEnv, io.Discard).Names(), " or "))
			}
			i++
			opt.Backend = args[i]
		case strings.HasPrefix(a, "--backend="):
			opt.Backend = strings.TrimPrefix(a, "--backend=")
			if opt.Backend == "" {
				return opt, usagef("--backend needs a value: %s", strings.Join(registry(noEnv, io.Discard).Names(), " or "))
			}
		default:
			opt.Args = append(opt.Args, a)
		}
	}
	return opt, registry(noEnv, io.Discard).Check(opt.Backend)
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
			"Without --backend (or with auto), the first engine that answers here is used, in the\n" +
			"order " + strings.Join(registry(noEnv, io.Discard).Names(), ", ") + ", saying why it passed over the others.\n" +
			"The environment of the shell reaches every case.\n" +
			"-auto adds one small job (resubmit_script.sh) that runs after the farm's jobs end and\n" +
			"resubmits what is left, again with -auto, until every case ran; with final.sh in the\n" +
			"farm, that job submits final.sh once every case succeeded.\n\nEXAMPLES:\n" +
			"   farm submit 4\n   farm submit -1 --mem=8G\n   farm submit 2000 --yes\n   VAR=1 farm submit 2 --backend local",
		SkipFlagParsing: true,
		Action:          submitAction((*farm.Farm).Submit),
	}
}

// submitAction parses the arguments of submit and resubmit (which share
// them) and runs do.
func submitAction(do func(*farm.Farm, context.Context, farm.SubmitOptions) error) cli.ActionFunc {
	return func(c *cli.Context) error {
		if a := c.Args().First(); a == "--help" || a == "-h" || a == "-help" {
			// Flags are not parsed (N may be -1): help is asked here.
			return cli.ShowCommandHelp(c.Lineage()[1], c.Command.Name)
		}
		opt, err := parseSubmitArgs(c.Args().Slice())
		if err != nil {
			return err
		}
		if c.Command.Name != "resubmit" && !opt.Select.IsZero() {
			return usagef("%s chooses cases for 'farm resubmit'; 'farm %s' runs every case of table.dat", opt.Select, c.Command.Name)
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
