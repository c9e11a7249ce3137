package metajob

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"syscall"

	"github.com/farm-hpc/farm/farm"
	"github.com/farm-hpc/farm/status"
	"golang.org/x/sys/unix"
)

// execRunner starts single_case.sh anew for every case; used when the
// script is not a bash script and so cannot be sourced.
type execRunner struct {
	dir   string
	argv  []string
	env   []string
	out   *os.File
	cpus  []int
	bound bool
	// stop, if set, is the meta-job's stop watch: a case in a group of
	// its own (Group) gets the stop signal the job's group got.
	stop *stopWatch
	pgid atomic.Int64 // group
	last int          // lastGroup
	used status.Use   // use
	// frames, with OUTPUT=job, are the loop's files of its cases' output
	// (caseout.go), copied from pipes of the loop's (pipes, their write
	// ends ends), as forkRunner's: a process a case left behind keeps
	// them, and is neither waited for nor cut off.
	frames *caseFrames
	pipes  []outPipe
	ends   []*os.File
	buf    []byte
}

func (r *execRunner) use() status.Use { return r.used }

func (r *execRunner) bind(cpus []int) { r.cpus, r.bound = cpus, r.bound || cpus != nil }

func (r *execRunner) scratch() string { return "" }

func (r *execRunner) group() int { return int(r.pgid.Load()) }

func (r *execRunner) lastGroup() int { return r.last }

func (r *execRunner) run(c caseRequest) (int, int, error) {
	r.used = status.Use{}
	cmd := &exec.Cmd{
		Path: r.argv[0],
		Args: r.argv,
		Dir:  r.dir,
		// No arguments: a program may parse its own (argparse); the table
		// and the line number come in the environment instead.
		Env: append(append(r.env[:len(r.env):len(r.env)], "ID="+c.ID, "COMM="+c.Comm, "N_cases="+strconv.FormatInt(c.TableLines, 10),
			"FARM_TABLE="+c.Table, "FARM_LINE="+strconv.FormatInt(c.Line, 10)), c.Set.env()...),
		Stdout: r.out,
		Stderr: r.out,
	}
	if r.frames != nil {
		if r.pipes == nil {
			var err error
			if r.pipes, r.ends, err = newOutPipes([]io.Writer{&r.frames.out, &r.frames.err}); err != nil {
				return 0, 0, err
			}
			r.buf = make([]byte, 64<<10)
		}
		cmd.Stdout, cmd.Stderr = r.ends[0], r.ends[1]
	}
	if c.Group {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	if err := cmd.Start(); err != nil {
		return 0, 0, notRunnable(r.argv[0], err)
	}
	if r.bound {
		bindPID(cmd.Process.Pid, r.cpus, r.out)
	}
	var done chan struct{}
	if c.Group {
		done = r.forward(cmd.Process.Pid)
	}
	var werr error
	if r.frames != nil {
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			werr = cmd.Wait() // (its output is copied with the next case's)
		} else {
			ended := make(chan error, 1)
			go func() {
				err := cmd.Wait()
				unix.Close(p[1])
				ended <- err
			}()
			copyUntilHup(r.pipes, p[0], r.buf)
			unix.Close(p[0])
			werr = <-ended
		}
	} else {
		werr = cmd.Wait()
	}
	if done != nil {
		r.pgid.Store(0)
		close(done)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.used = rusageUse(ru)
	}
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		return 128 + int(ws.Signal()), int(ws.Signal()), nil
	}
	if werr != nil && cmd.ProcessState.ExitCode() < 0 {
		return 0, 0, werr
	}
	return cmd.ProcessState.ExitCode(), 0, nil
}

// forward names the case's process group pgid (group) and, until done is
// closed, passes the job's stop signal on to it: it left the job's group,
// which the signal reached.
func (r *execRunner) forward(pgid int) chan struct{} {
	r.pgid.Store(int64(pgid))
	r.last = pgid
	done := make(chan struct{})
	if r.stop == nil {
		return done
	}
	go func() {
		select {
		case <-r.stop.ch:
			syscall.Kill(-pgid, syscall.Signal(r.stop.sig.Load()))
		case <-done:
		}
	}()
	return done
}

// notRunnable is err, the error of starting single_case.sh (path) as a
// program, with the advice that works when the script may not be
// executed (its x bit taken away since the meta-job started): not the
// advice about the farm directory's owner that a bare "permission
// denied" gets.
func notRunnable(path string, err error) error {
	if !errors.Is(err, fs.ErrPermission) {
		return err
	}
	head, herr := farm.ReadHead(path)
	if herr != nil {
		return err
	}
	if msg := farm.NotRunnable(path, head); msg != "" {
		return farm.Userf("%s; then 'farm resubmit N' runs the cases left", msg)
	}
	return err
}

func (r *execRunner) refresh() error { return nil }

func (r *execRunner) close() {
	if r.pipes != nil {
		drainPipes(r.pipes, r.buf)
		closeOutPipes(r.pipes)
		for _, f := range r.ends {
			f.Close()
		}
		r.pipes, r.ends = nil, nil
	}
}
