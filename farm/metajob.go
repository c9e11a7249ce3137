package farm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/farm-hpc/farm/casetable"
	"github.com/farm-hpc/farm/status"
)

// Messages a meta-job prints when it exits by itself, as META users know them.
const (
	MsgNoCases     = "No cases left; exiting."
	MsgSimpleDone  = "Exiting after processing one case (-1 option)"
	MsgFastFailure = "Too many failed (very short) cases - exiting"
	MsgNoRuntime   = "Not enough runtime left; exiting."
	MsgStopped     = "Stopped by a signal; exiting."
)

// ErrFastFailure is returned by RunMetajob when fast-failure protection
// stopped the meta-job.
var ErrFastFailure = errors.New(MsgFastFailure)

// Environment variables that submit passes to every job.
const (
	EnvDir     = "FARM_DIR"
	EnvRun     = "FARM_RUN"
	EnvSimple  = "FARM_SIMPLE"
	EnvBackend = "FARM_BACKEND"
	EnvBin     = "FARM_BIN"
)

// Metajob runs the meta-job loop inside a job: claim a case under the farm
// lock, run single_case.sh on it, record its start and end, and repeat until
// no case is left.
type Metajob struct {
	Farm    *Farm
	Backend Backend
	Out     io.Writer // the job's output (OUTPUT/slurm-$JOBID.out); must be an *os.File

	// Now and EndTime are for tests; zero values use the clock and the backend.
	bash string
	env  []string
}

// Run runs the loop. It returns nil at a normal end.
func (m *Metajob) Run(ctx context.Context) error {
	f := m.Farm
	self, err := m.Backend.Self(ctx)
	if err != nil {
		return err
	}
	run, err := strconv.Atoi(os.Getenv(EnvRun))
	if err != nil || run < 1 {
		return fmt.Errorf("%s is not set to a run number: a meta-job must be started by 'farm submit'", EnvRun)
	}
	simple := os.Getenv(EnvSimple) == "1"
	if m.bash, err = exec.LookPath("bash"); err != nil {
		return err
	}
	if err := f.ensureDirs(); err != nil {
		return err
	}
	store, err := f.Store()
	if err != nil {
		return err
	}
	defer store.Close()
	sw, err := status.Create(f.Path(StatusDir, "status."+self.ID), self.ID, run, f.Host)
	if err != nil {
		return err
	}
	defer sw.Close()

	// Case environment: ours, less what we set per case.
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k != "ID" && k != "COMM" && k != "METAJOB_ID" {
			m.env = append(m.env, kv)
		}
	}
	m.env = append(m.env, "METAJOB_ID="+self.ID)

	// A stop signal (time limit, cancel) reaches the whole job, the running
	// case included; remember it so the case is recorded as interrupted.
	var stopSig atomic.Int32
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGUSR1)
	defer signal.Stop(sigs)
	go func() {
		for s := range sigs {
			// A signal sent to the whole job already reached the case;
			// one sent to us alone is passed on to our process group (the
			// case and its worker) the first time.
			if stopSig.Swap(int32(s.(syscall.Signal))) == 0 {
				syscall.Kill(0, s.(syscall.Signal))
			}
		}
	}()
	out, ok := m.Out.(*os.File)
	if !ok {
		return errors.New("meta-job output must be a file")
	}
	runner, err := newCaseRunner(f.Dir, m.bash, m.env, out)
	if err != nil {
		return err
	}
	defer runner.close()

	fmt.Fprintf(m.Out, "farm: meta-job %s (run %d) on %s starting at %s\n", self.ID, run, f.Host, time.Now().Format(time.RFC3339))
	quit := func(msg string) {
		fmt.Fprintln(m.Out, msg)
		sw.Quit(msg)
	}
	ff := fastFailure{max: f.Config.NFailedMax, short: f.Config.DtFailed}
	for {
		if stopSig.Load() != 0 {
			quit(MsgStopped)
			return nil
		}
		c, ok, err := store.Claim(ctx, run, nil)
		if err != nil {
			return fmt.Errorf("claiming a case: %w", err)
		}
		if !ok {
			quit(MsgNoCases)
			return nil
		}
		start := time.Now()
		if err := sw.Start(c.ID, start); err != nil {
			return err
		}
		code, sig, err := m.runCase(runner, c)
		d := time.Since(start)
		if err != nil {
			return fmt.Errorf("case %d: %w", c.ID, err)
		}
		if s := stopSig.Load(); s != 0 {
			if sig == 0 {
				sig = int(s)
			}
			sw.Interrupted(c.ID, sig, start, d)
			quit(MsgStopped)
			return nil
		}
		if err := sw.End(c.ID, code, start, d); err != nil {
			return err
		}
		if ff.add(code, d) {
			quit(MsgFastFailure)
			return ErrFastFailure
		}
		if simple {
			quit(MsgSimpleDone)
			return nil
		}
	}
}

// runCase makes the case's directory and runs single_case.sh for c.
func (m *Metajob) runCase(r caseRunner, c casetable.Case) (code, sig int, err error) {
	id := strconv.FormatInt(c.ID, 10)
	if m.Farm.Config.RunDirs {
		// Made here, not in single_case.sh: a mkdir process per case would
		// cost more than the rest of the case's overhead together.
		if err := os.Mkdir(m.Farm.Path("RUN"+id), 0o755); err != nil && !os.IsExist(err) {
			return 0, 0, err
		}
	}
	return r.run(id, c.Command)
}

// fastFailure detects a meta-job whose first max cases all failed quickly:
// a sign of a broken node, not of broken cases. Successes never count.
type fastFailure struct {
	max   int
	short time.Duration
	seen  int
	fails int
}

// add records one case and reports whether the meta-job should stop.
func (f *fastFailure) add(code int, d time.Duration) bool {
	if f.max <= 0 || f.seen >= f.max {
		return false
	}
	f.seen++
	if code != 0 && d < f.short {
		f.fails++
	}
	return f.seen == f.max && f.fails == f.max
}
