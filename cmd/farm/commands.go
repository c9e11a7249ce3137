package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/farm-hpc/farm/farm"
	"github.com/farm-hpc/farm/slurm"
	"github.com/urfave/cli/v2"
)

func commands() []*cli.Command {
	return []*cli.Command{
		initCmd(),
		submitCmd(),
		resubmitCmd(),
		waitCmd(),
		statusCmd(),
		listCmd(),
		killCmd(false),
		killCmd(true),
		metajobCmd(),
		autojobCmd(),
		localJobCmd(),
	}
}

// backends is the registry of batch systems: the one place that names them.
func backends(notice func(string)) farm.Backends {
	return func(ctx context.Context, name, dir string) (farm.Backend, error) {
		switch name {
		case "local":
			return &farm.Local{Dir: dir}, nil
		case "slurm":
			return slurm.New(dir), nil
		case "", "auto":
			if why := slurm.Available(ctx); why != "" {
				if notice != nil {
					notice(fmt.Sprintf("farm: %s; using the local backend (--backend slurm to insist)", why))
				}
				return &farm.Local{Dir: dir}, nil
			}
			return slurm.New(dir), nil
		default:
			return nil, usagef("unknown backend %q: use --backend local or --backend slurm", name)
		}
	}
}

func initCmd() *cli.Command {
	return &cli.Command{
		Name:      "init",
		Usage:     "make a new farm directory with editable templates",
		ArgsUsage: "DIR",
		Description: "Creates DIR with job_script.sh, single_case.sh, resubmit_script.sh, config and an\n" +
			"example table.dat. DIR must not exist or be empty.\n\nEXAMPLE:\n   farm init myfarm && cd myfarm && farm submit 2",
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usagef("init takes one argument: the new farm directory")
			}
			dir := c.Args().First()
			if err := farm.Init(dir); err != nil {
				return err
			}
			fmt.Fprintf(c.App.Writer, "Created farm %s: edit table.dat (one case per line), job_script.sh (#SBATCH -t, -A) and single_case.sh, then run 'farm submit N' in it.\n", dir)
			return nil
		},
	}
}

// parseSubmitArgs parses "N [-auto] [--backend B] [sbatch args...]". Flag
// parsing is done by hand because N may be -1 and the rest goes to sbatch.
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
		switch {
		case a == "-auto" || a == "--auto":
			opt.Auto = true
		case a == "--backend" || a == "-backend":
			if i+1 >= len(args) {
				return opt, usagef("--backend needs a value: local or slurm")
			}
			i++
			opt.Backend = args[i]
		case strings.HasPrefix(a, "--backend="):
			opt.Backend = strings.TrimPrefix(a, "--backend=")
		default:
			opt.Args = append(opt.Args, a)
		}
	}
	switch opt.Backend {
	case "", "local", "slurm", "auto":
	default:
		return opt, usagef("unknown backend %q: use --backend local or --backend slurm", opt.Backend)
	}
	return opt, nil
}

func submitCmd() *cli.Command {
	return &cli.Command{
		Name:      "submit",
		Usage:     "submit the farm: N meta-jobs, or -1 for one job per case",
		ArgsUsage: "N [-auto] [--backend local|slurm] [sbatch arguments...]",
		Description: "N > 0 (META mode): N meta-jobs share the cases of table.dat, each claiming the next\n" +
			"case until none is left. N = -1 (SIMPLE mode): one job per case.\n" +
			"Other arguments are passed to sbatch; the run-time must be in job_script.sh (#SBATCH -t).\n" +
			"Without --backend, Slurm is used when a controller answers, else this machine.\n" +
			"The environment of the shell reaches every case.\n" +
			"-auto adds one small job (resubmit_script.sh) that runs after the farm's jobs end and\n" +
			"resubmits what is left, again with -auto, until every case ran; with final.sh in the\n" +
			"farm, that job submits final.sh once every case succeeded.\n\nEXAMPLES:\n" +
			"   farm submit 4\n   farm submit -1 --mem=8G\n   VAR=1 farm submit 2 --backend local",
		SkipFlagParsing: true,
		Action: func(c *cli.Context) error {
			opt, err := parseSubmitArgs(c.Args().Slice())
			if err != nil {
				return err
			}
			f, err := openFarm(c)
			if err != nil {
				return err
			}
			notice := func(s string) { fmt.Fprintln(c.App.ErrWriter, s) }
			return f.Submit(c.Context, backends(notice), opt)
		},
	}
}

func resubmitCmd() *cli.Command {
	return &cli.Command{
		Name:      "resubmit",
		Usage:     "run again the cases that failed, were interrupted or never ran",
		ArgsUsage: "N [-auto] [--backend local|slurm] [sbatch arguments...]",
		Description: "Refused while any job of the farm is pending or running. Writes the cases still to do\n" +
			"(farm-wide, over every run) to table.dat_ with their original IDs and submits N jobs over\n" +
			"them, as 'farm submit' does. With nothing left, says so and exits 0.\n\nEXAMPLES:\n" +
			"   farm resubmit 4\n   farm resubmit -1 -auto",
		SkipFlagParsing: true,
		Action: func(c *cli.Context) error {
			opt, err := parseSubmitArgs(c.Args().Slice())
			if err != nil {
				return err
			}
			f, err := openFarm(c)
			if err != nil {
				return err
			}
			notice := func(s string) { fmt.Fprintln(c.App.ErrWriter, s) }
			err = f.Resubmit(c.Context, backends(notice), opt)
			if errors.Is(err, farm.ErrNothingLeft) {
				fmt.Fprintln(c.App.Writer, err.Error())
				return nil
			}
			return err
		},
	}
}

func autojobCmd() *cli.Command {
	return &cli.Command{
		Name:   "autojob",
		Usage:  "decide what follows a run (resubmit_script.sh calls this inside a job)",
		Hidden: true,
		Action: func(c *cli.Context) error {
			dir := os.Getenv(farm.EnvDir)
			if dir == "" {
				dir = c.String("farm")
			}
			f, err := farm.Open(dir, c.App.Writer)
			if err != nil {
				return err
			}
			reg := backends(nil)
			b, err := reg(c.Context, os.Getenv(farm.EnvBackend), f.Dir)
			if err != nil {
				return err
			}
			self, err := b.Self(c.Context)
			if err != nil {
				return err
			}
			return f.Autojob(c.Context, reg, self.ID)
		},
	}
}

func waitCmd() *cli.Command {
	return &cli.Command{
		Name:  "wait",
		Usage: "block until no job of the farm is pending or running",
		Description: "Exit 0 if every case of the farm then succeeded, 1 otherwise, 2 if --timeout ran out.\n\n" +
			"EXAMPLE:\n   farm submit 4 && farm wait --timeout 2h && echo all done",
		Flags: []cli.Flag{
			&cli.DurationFlag{Name: "timeout", Usage: "give up after this long (e.g. 90s, 2h); 0 waits for ever"},
		},
		Action: func(c *cli.Context) error {
			f, err := openFarm(c)
			if err != nil {
				return err
			}
			p, err := f.Wait(c.Context, backends(nil), c.Duration("timeout"))
			if errors.Is(err, farm.ErrWaitTimeout) {
				return exitCodeError{exitTimeout, fmt.Sprintf("timed out after %s; jobs are still pending or running", c.Duration("timeout"))}
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(c.App.Writer, "%d cases: %d succeeded, %d failed, %d interrupted, %d never ran\n",
				p.Total, p.Succeeded, p.Failed, p.Interrupted, p.NeverRan)
			if !p.Done() {
				return exitCodeError{code: exitFailed}
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
		Description: "One row per case: ID, state (succeeded, failed, interrupted, running), STATUS,\n" +
			"duration in seconds, meta-job and host. A case's row is its farm-wide outcome over all runs.\n\n" +
			"EXAMPLES:\n   farm Status -f\n   farm Status --json | jq '.[] | select(.state != \"succeeded\")'",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "f", Usage: "list non-zero statuses last"},
			&cli.BoolFlag{Name: "failed", Usage: "list only cases that did not succeed"},
			&cli.BoolFlag{Name: "json", Usage: "print a JSON array"},
		},
		Action: func(c *cli.Context) error {
			f, err := openFarm(c)
			if err != nil {
				return err
			}
			sum, err := f.Summary(c.Context, backends(nil))
			if err != nil {
				return err
			}
			return farm.WriteStatus(c.App.Writer, sum, farm.StatusOptions{FailedLast: c.Bool("f"), FailedOnly: c.Bool("failed"), JSON: c.Bool("json")})
		},
	}
}

func listCmd() *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "every job of the farm with its state",
		Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print a JSON array"}},
		Action: func(c *cli.Context) error {
			f, err := openFarm(c)
			if err != nil {
				return err
			}
			return f.List(c.Context, backends(nil), c.App.Writer, c.Bool("json"))
		},
	}
}

func killCmd(prune bool) *cli.Command {
	name, usage := "kill", "cancel every running and pending job of the farm"
	if prune {
		name, usage = "prune", "cancel the farm's pending jobs only; running ones finish"
	}
	return &cli.Command{
		Name:  name,
		Usage: usage,
		Action: func(c *cli.Context) error {
			f, err := openFarm(c)
			if err != nil {
				return err
			}
			return f.Cancel(c.Context, backends(nil), prune)
		},
	}
}

func metajobCmd() *cli.Command {
	return &cli.Command{
		Name:   "metajob",
		Usage:  "run the meta-job loop (job_script.sh calls this inside a job)",
		Hidden: true,
		Action: func(c *cli.Context) error {
			dir := os.Getenv(farm.EnvDir)
			if dir == "" {
				dir = c.String("farm")
			}
			f, err := farm.Open(dir, c.App.Writer)
			if err != nil {
				return err
			}
			b, err := backends(nil)(c.Context, os.Getenv(farm.EnvBackend), f.Dir)
			if err != nil {
				return err
			}
			m := &farm.Metajob{Farm: f, Backend: b, Out: os.Stdout}
			// The loop handles SIGTERM itself: record the running case as
			// interrupted rather than dying with it.
			return m.Run(context.WithoutCancel(c.Context))
		},
	}
}

func localJobCmd() *cli.Command {
	return &cli.Command{
		Name:   "_localjob",
		Hidden: true,
		Usage:  "supervise one job of the local backend",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "dir", Required: true},
			&cli.StringFlag{Name: "id", Required: true},
		},
		Action: func(c *cli.Context) error {
			l := &farm.Local{Dir: c.String("dir")}
			return l.RunJob(c.String("id"))
		},
	}
}

// lookPath is exec.LookPath, kept for tests.
var lookPath = exec.LookPath

var _ = time.Second
