package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/farm-hpc/farm/atomicfile"
	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/farm"
	"github.com/farm-hpc/farm/layout"
	"github.com/farm-hpc/farm/local"
	"github.com/farm-hpc/farm/metajob"
	"github.com/farm-hpc/farm/proc"
	"github.com/farm-hpc/farm/report"
	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"
)

func commands() []*cli.Command {
	return []*cli.Command{
		initCmd(),
		submitCmd(),
		resubmitCmd(),
		waitCmd(),
		statusCmd(),
		listCmd(),
		queryCmd(),
		reportCmd(),
		cleanCmd(),
		completionCmd(),
		killCmd(backend.AllActive),
		killCmd(backend.PendingOnly),
		repairCmd(),
		adoptCmd(),
		runCaseCmd(),
		metajobCmd(),
		autojobCmd(),
		localJobCmd(),
	}
}

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
		ArgsUsage: "DIR",
		Description: "Creates DIR with job_script.sh, single_case.sh, resubmit_script.sh, config and an\n" +
			"example table.dat. DIR must not exist or be empty. The job scripts carry the batch\n" +
			"system's options (" + strings.Join(edits, "; ") + ";\n" +
			"the local backend reads the run-time of any).\n\nEXAMPLES:\n" +
			"   farm init myfarm && cd myfarm && farm submit 2\n   farm init --engine " + names[len(names)-1] + " myfarm",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "engine", Value: names[0], Usage: "the batch system the job scripts are for: " + strings.Join(names, " or ")},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usagef("init takes one argument: the new farm directory")
			}
			name := c.String("engine")
			i := slices.Index(names, name)
			if i < 0 {
				return usagef("unknown engine %q for farm init --engine: %s", name, strings.Join(names, " or "))
			}
			dir := c.Args().First()
			if err := farm.Init(dir, engines[i].Templates); err != nil {
				return err
			}
			fmt.Fprintf(c.App.Writer, "Created farm %s: edit table.dat (one case per line), job_script.sh (%s) and single_case.sh, then run 'farm submit N' in it.\n", dir, engines[i].Edit)
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
			"cases, a batch at a time, until none is left. N = -1 (SIMPLE mode): one job per case.\n" +
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
		ArgsUsage: "N [--failed] [--interrupted] [--never-run] [--unfit] [--cases IDS] " + strings.TrimPrefix(submitArgsUsage, "N "),
		Description: "Refused while any job of the farm is pending or running. Writes the cases still to do\n" +
			"(farm-wide, over every run) to table.dat_ with their original IDs and submits N jobs over\n" +
			"them, as 'farm submit' does. With nothing left, says so and exits 0.\n" +
			"--failed, --interrupted, --never-run and --unfit choose the cases in those states only\n" +
			"(combinable); --cases 3,17-20 chooses cases by ID, whatever their state (succeeded ones\n" +
			"too); with both, a case must be in one of the states and among the IDs. -auto's later\n" +
			"resubmits run every case that did not succeed, as always.\n" +
			submitYesHelp + "\nEXAMPLES:\n" +
			"   farm resubmit 4\n   farm resubmit -1 -auto\n   farm resubmit 2 --failed --unfit\n   farm resubmit 1 --cases 3,17-20",
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

func autojobCmd() *cli.Command {
	return &cli.Command{
		Name:   "autojob",
		Usage:  "decide what follows a run (resubmit_script.sh calls this inside a job)",
		Hidden: true,
		Action: func(c *cli.Context) error {
			f, b, env, err := jobFarm(c)
			if err != nil {
				return err
			}
			self, err := b.Self(c.Context, backend.SelfRequest{Env: env.Getenv, NoEnd: true})
			if err != nil {
				return err
			}
			return f.Autojob(c.Context, env, self.ID)
		},
	}
}

func waitCmd() *cli.Command {
	return &cli.Command{
		Name:  "wait",
		Usage: "block until no job of the farm is pending or running",
		Description: "Exit 0 if every case of the farm then succeeded, 1 otherwise, 2 if --timeout ran out,\n" +
			"130 on Ctrl-C (the jobs go on). --progress draws farm query's progress bar as it waits:\n" +
			"redrawn in place on a terminal, a line every --interval otherwise.\n\n" +
			"EXAMPLES:\n   farm submit 4 && farm wait --timeout 2h && echo all done\n   farm wait --progress --interval 5s",
		Flags: []cli.Flag{
			&cli.DurationFlag{Name: "timeout", Usage: "give up after this long (e.g. 90s, 2h); 0 waits for ever"},
			&cli.BoolFlag{Name: "progress", Aliases: []string{"p"}, Usage: "draw farm query's progress bar while waiting"},
			&cli.DurationFlag{Name: "interval", Value: 10 * time.Second, Usage: "refresh interval of --progress"},
		},
		Action: func(c *cli.Context) error {
			f, err := openFarm(c)
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

func statusCmd() *cli.Command {
	return &cli.Command{
		Name:    "Status",
		Aliases: []string{"status"},
		Usage:   "the status of every case that has a record",
		Description: "One row per case: ID, state (succeeded, failed, interrupted, running, unfit), STATUS,\n" +
			"duration in seconds, meta-job and host. A case's row is its farm-wide outcome over all runs.\n" +
			"An unfit case was taken by a meta-job that could not fit it (it needs more CPUs, GPUs or\n" +
			"memory than the job has, or more time than it had left): a last column says why, and the\n" +
			"next resubmit runs it. --json adds where a case ran (loop, cpus, gpus) when known.\n\n" +
			"With --meta, the lines of META's Status.run instead: \"ID STATUS\" for every case that\n" +
			"ended (succeeded or failed), in ID order, with -f the non-zero ones last.\n\n" +
			"EXAMPLES:\n   farm Status -f\n   farm Status --meta -f | tail\n   farm Status --json | jq '.[] | select(.state != \"succeeded\")'",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "f", Usage: "list non-zero statuses last"},
			&cli.BoolFlag{Name: "failed", Usage: "list only cases that did not succeed"},
			&cli.BoolFlag{Name: "json", Usage: "print a JSON array"},
			&cli.BoolFlag{Name: "meta", Usage: "print META's \"ID STATUS\" lines (cases that ended), for scripts written for META"},
		},
		Action: func(c *cli.Context) error {
			if c.Bool("meta") && c.Bool("json") {
				return usagef("Status takes --meta or --json, not both")
			}
			f, err := openFarm(c)
			if err != nil {
				return err
			}
			return f.Status(c.Context, c.App.Writer, farm.StatusOptions{FailedLast: c.Bool("f"), FailedOnly: c.Bool("failed"), JSON: c.Bool("json"), META: c.Bool("meta")})
		},
	}
}

func queryCmd() *cli.Command {
	return &cli.Command{
		Name:  "query",
		Usage: "short summary: jobs queued/running/finished, cases by state, throughput and ETA",
		Description: "Cases are counted for the current run and farm-wide. The throughput is measured over\n" +
			"the last 10 minutes; the ETA is for the current run's remaining cases at that rate.\n" +
			"--watch redraws a progress bar every --interval until no job of the farm is active\n" +
			"(or Ctrl-C), with one scheduler query per refresh.\n\nEXAMPLES:\n" +
			"   farm query\n   farm query --watch --interval 30s\n   farm query --json | jq .farm_cases",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print a JSON object"},
			&cli.BoolFlag{Name: "watch", Aliases: []string{"w"}, Usage: "redraw a progress bar until the farm's jobs end"},
			&cli.DurationFlag{Name: "interval", Value: 10 * time.Second, Usage: "refresh interval of --watch"},
		},
		Action: func(c *cli.Context) error {
			f, err := openFarm(c)
			if err != nil {
				return err
			}
			if c.Bool("watch") {
				if c.Duration("interval") < 100*time.Millisecond {
					return usagef("--interval must be at least 100ms")
				}
				return f.Watch(c.Context, c.App.Writer, watchOptions(c))
			}
			return f.Report(c.Context, c.App.Writer, format(c))
		},
	}
}

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
			f, err := openFarm(c)
			if err != nil {
				return err
			}
			out := c.String("o")
			if out == "" && c.String("png") == "" && c.String("svg") == "" {
				out = filepath.Join(f.Dir, "report.html")
			}
			d, err := f.ReportData(c.Context, time.Now())
			if err != nil {
				return err
			}
			name := filepath.Base(f.Dir)
			if abs, err := filepath.Abs(f.Dir); err == nil {
				name = abs
			}
			figs := append([]*report.Canvas{report.SummaryFigure(d, name)}, report.Figures(d)...)
			for _, o := range []struct {
				path  string
				write func(w *bufio.Writer) error
			}{
				{out, func(w *bufio.Writer) error { return report.WriteHTML(w, d, name) }},
				{c.String("svg"), func(w *bufio.Writer) error { return report.WriteSVG(w, figs) }},
				{c.String("png"), func(w *bufio.Writer) error { return report.WritePNG(w, figs, c.Float64("scale")) }},
			} {
				if o.path == "" {
					continue
				}
				if err := atomicfile.Write(o.path, proc.NewMode(0o666), o.write, ""); err != nil {
					return writeError(o.path, err)
				}
				size := ""
				if st, err := os.Stat(o.path); err == nil {
					size = fmt.Sprintf(" (%s)", fmtBytes(st.Size()))
				}
				fmt.Fprintf(c.App.Writer, "Wrote %s%s\n", o.path, size)
			}
			if out != "" {
				fmt.Fprintf(c.App.Writer, "Open it in a browser; it needs no network (copy it to a laptop with scp, for one).\n")
			}
			return nil
		},
	}
}

// writeError says why the file at path could not be written, and what to
// do, in one line.
func writeError(path string, err error) error {
	dir := filepath.Dir(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("cannot write %s: the directory %s does not exist; create it, or name another file", path, dir)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("cannot write %s: no permission to write in %s; name another file", path, dir)
	}
	return fmt.Errorf("cannot write %s: %v", path, err)
}

// fmtBytes is a size for people: "1.2 MB".
func fmtBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f kB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

func cleanCmd() *cli.Command {
	return &cli.Command{
		Name:  "clean",
		Usage: "delete everything in the farm directory but the scripts, config and table.dat",
		Description: "Lists what it would delete — results (RUN*), STATUSES, OUTPUT, MISC, farm.log,\n" +
			"table.dat_, table.dat.orig, ... — and deletes it only with --yes. Keeps job_script.sh,\n" +
			"single_case.sh, resubmit_script.sh, final.sh, config and table.dat. Refused while jobs\n" +
			"of the farm are pending or running.\n\nEXAMPLES:\n   farm clean\n   farm clean --yes",
		Flags: []cli.Flag{&cli.BoolFlag{Name: "yes", Usage: "really delete"}},
		Action: func(c *cli.Context) error {
			f, err := openFarm(c)
			if err != nil {
				return err
			}
			mode := farm.CleanList
			if c.Bool("yes") {
				mode = farm.CleanDelete
			}
			return f.Clean(c.Context, mode)
		},
	}
}

func listCmd() *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "every job of the farm with its state",
		Description: "One row per job of every run: backend job ID, run, kind (meta, simple, auto, final),\n" +
			"state, start and end, and the cases it ended and is running.\n\nEXAMPLES:\n" +
			"   farm list\n   farm list --json | jq -r '.[] | select(.state==\"RUNNING\") | .id'",
		Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print a JSON array"}},
		Action: func(c *cli.Context) error {
			f, err := openFarm(c)
			if err != nil {
				return err
			}
			return f.List(c.Context, c.App.Writer, format(c))
		},
	}
}

func killCmd(scope backend.CancelScope) *cli.Command {
	name, usage := "kill", "cancel every running and pending job of the farm"
	desc := "Cases running in cancelled meta-jobs are recorded as interrupted; 'farm resubmit N' runs\n" +
		"them again.\n\nEXAMPLE:\n   farm kill && farm resubmit 4"
	if scope == backend.PendingOnly {
		name, usage = "prune", "cancel the farm's pending jobs only; running ones finish"
		desc = "Running meta-jobs go on claiming cases until none is left.\n\nEXAMPLE:\n   farm prune"
	}
	return &cli.Command{
		Name:        name,
		Usage:       usage,
		Description: desc,
		Action: func(c *cli.Context) error {
			f, err := openFarm(c)
			if err != nil {
				return err
			}
			return f.Cancel(c.Context, scope)
		},
	}
}

func repairCmd() *cli.Command {
	return &cli.Command{
		Name:  "repair",
		Usage: "rebuild a damaged or missing claim state from the records",
		Description: "The claim state (MISC/chain, MISC/claims.* and MISC/lanes.*) says which cases of the current run are\n" +
			"claimed. If it is damaged or lost, repair rebuilds it from table.dat and the status\n" +
			"records: the newest run is closed, so 'farm resubmit N' runs every case that did not\n" +
			"succeed and none that did. It refuses while jobs of the farm are queued or running.\n\n" +
			"EXAMPLE:\n   farm repair && farm resubmit 4",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "force", Usage: "rebuild even a state that reads well"},
			&cli.BoolFlag{Name: "abandoned", Usage: "--force, and close even a run with no job recorded (its 'farm submit' or 'farm resubmit' was killed before it recorded any)"},
		},
		Action: func(c *cli.Context) error {
			f, err := openFarm(c)
			if err != nil {
				return err
			}
			mode := farm.RepairIfDamaged
			if c.Bool("force") {
				mode = farm.RepairForce
			}
			if c.Bool("abandoned") {
				mode = farm.RepairAbandoned
			}
			return f.Repair(c.Context, mode)
		},
	}
}

func adoptCmd() *cli.Command {
	return &cli.Command{
		Name:      "adopt",
		Usage:     "turn a META farm directory into a farm, in place",
		ArgsUsage: "[DIR]",
		Description: "Takes over a farm directory made and run by META (config.h, job_script.sh ending\n" +
			"with task.run, single_case.sh, table.dat, status.* files of \"ID STATUS\" lines):\n" +
			"   - config.h's NJOBS_MAX, N_failed_max, dt_failed, WHOLE_NODE and NWHOLE become\n" +
			"     config (with RUN_DIRS=0);\n" +
			"   - the last line of job_script.sh (task.run) and of resubmit_script.sh\n" +
			"     (autojob.run) become farm's; the originals are kept as *.meta;\n" +
			"   - META's status files become STATUSES/status.meta-JOBID, read as the records\n" +
			"     of the runs before farm: farm Status shows them, farm resubmit runs only\n" +
			"     the cases that did not succeed;\n" +
			"   - single_case.sh and table.dat stay as they are: farm calls single_case.sh\n" +
			"     as META does (table and line number as $1 $2).\n" +
			"It refuses, changing nothing, while jobs of the farm are queued or running: it asks\n" +
			"Slurm (squeue) for your jobs whose working directory is the farm's, and refuses\n" +
			"when Slurm does not answer; only --backend local skips that check. DIR defaults\n" +
			"to --farm (the current directory).\n\n" +
			"EXAMPLE:\n   farm adopt ~/scratch/my_meta_farm && cd ~/scratch/my_meta_farm && farm resubmit 8",
		Flags: []cli.Flag{&cli.StringFlag{Name: "backend", Usage: "the batch system to ask for jobs still running in the directory (default: auto)"}},
		Action: func(c *cli.Context) error {
			if c.NArg() > 1 {
				return usagef("adopt takes at most one directory, e.g. 'farm adopt DIR'")
			}
			dir := c.String("farm")
			if c.NArg() == 1 {
				dir = c.Args().First()
			}
			f, err := farm.Open(dir, farm.Options{Out: c.App.Writer, Backends: registry(os.Getenv, c.App.ErrWriter)})
			if err != nil {
				return err
			}
			return f.Adopt(c.Context, adoptBackend(c.String("backend")), metaTemplates())
		},
	}
}

func runCaseCmd() *cli.Command {
	return &cli.Command{
		Name:      "run-case",
		Usage:     "run one case in the foreground, as a meta-job would, to try it by hand",
		ArgsUsage: "ID",
		Description: "Runs case ID of table.dat here and now (on an interactive node, say), exactly as a\n" +
			"meta-job runs it: its RUN directory made if RUN_DIRS=1, single_case.sh sourced by\n" +
			"bash with ID, COMM, METAJOB_ID=run-case and N_cases set, and table.dat and the\n" +
			"case's line number as $1 and $2. Its output comes to the terminal, and farm exits\n" +
			"with the case's STATUS. Nothing is claimed or recorded: the farm's runs do not\n" +
			"know the case ran. (./single_case.sh table.dat LINE, as in META, does the same by\n" +
			"the line number, for a single_case.sh made by farm init.)\n\n" +
			"EXAMPLE:\n   farm run-case 3",
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usagef("run-case takes one case ID, e.g. 'farm run-case 3'")
			}
			id, err := strconv.ParseInt(c.Args().First(), 10, 64)
			if err != nil || id < 1 {
				return usagef("wrong case ID %q: a case ID is a positive integer, as in table.dat", c.Args().First())
			}
			f, err := openFarm(c)
			if err != nil {
				return err
			}
			code, cs, err := metajob.RunCase(f, id, os.Stdout)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.App.ErrWriter, "farm: case %d (line %d of %s) ended with STATUS %d; not recorded (run-case only tries a case)\n", cs.ID, cs.Line, layout.Table, code)
			return exitStatus(code)
		},
	}
}

func metajobCmd() *cli.Command {
	return &cli.Command{
		Name:   "metajob",
		Usage:  "run the meta-job loop (job_script.sh calls this inside a job)",
		Hidden: true,
		Action: func(c *cli.Context) error {
			f, b, env, err := jobFarm(c)
			if err != nil {
				return err
			}
			if c.Context.Err() != nil {
				// A stop signal came before the loop could watch for it.
				return c.Context.Err()
			}
			m := &metajob.Metajob{Farm: f, Backend: b, Env: env, Out: os.Stdout}
			// The loop handles SIGTERM itself: record the running case as
			// interrupted rather than dying with it.
			return m.Run(context.WithoutCancel(c.Context))
		},
	}
}

// jobFarm opens, inside a job, the farm and the backend that submit passed
// in the environment, which it reads (the one place that reads a job's
// environment).
func jobFarm(c *cli.Context) (*farm.Farm, backend.Backend, farm.JobEnv, error) {
	env, err := farm.ParseJobEnv(os.Environ())
	if err != nil {
		return nil, nil, env, err
	}
	dir := env.Dir
	if dir == "" {
		dir = c.String("farm")
	}
	reg := registry(env.Getenv, c.App.ErrWriter)
	f, err := farm.Open(dir, farm.Options{Out: c.App.Writer, Backends: reg})
	if err != nil {
		return nil, nil, env, err
	}
	b, err := reg.Open(c.Context, env.Backend, f.Dir)
	return f, b, env, err
}

func localJobCmd() *cli.Command {
	return &cli.Command{
		Name:   "_localjob",
		Hidden: true,
		Usage:  "supervise one job of the local backend",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "dir"},
			&cli.StringFlag{Name: "id"},
			&cli.DurationFlag{Name: "kill-wait"},
			&cli.IntFlag{Name: "slots"},
			&cli.StringFlag{Name: "slot-dir"},
		},
		Action: func(c *cli.Context) error {
			if c.String("dir") == "" || c.String("id") == "" {
				return usagef("_localjob needs --dir and --id")
			}
			l := local.New(c.String("dir"), local.Options{KillWait: c.Duration("kill-wait"), Slots: c.Int("slots"), SlotDir: c.String("slot-dir")})
			return l.RunJob(c.String("id"), os.Environ())
		},
	}
}

// format is the report format the --json flag asks for.
func format(c *cli.Context) farm.Format {
	if c.Bool("json") {
		return farm.JSON
	}
	return farm.Text
}

// noEnv is an environment with nothing set.
func noEnv(string) string { return "" }

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
