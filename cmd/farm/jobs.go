package main

import (
	"context"
	"os"

	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/farm"
	"github.com/farm-hpc/farm/local"
	"github.com/farm-hpc/farm/metajob"
	"github.com/urfave/cli/v2"
)

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
			if bin, err := os.Executable(); err == nil {
				m.Bin = bin // for farm __case-end
			}
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
	f, err := farm.Open(dir, farm.Options{Out: c.App.Writer, Backends: reg, InJob: true})
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
			durationFlag{&cli.DurationFlag{Name: "kill-wait"}},
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
