package metajob

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/farm-hpc/farm/atomicfile"
	"github.com/farm-hpc/farm/farm"
	"github.com/farm-hpc/farm/layout"
	"github.com/farm-hpc/farm/proc"
	"github.com/farm-hpc/farm/status"
	"golang.org/x/sys/unix"
)

// caseRequest is what single_case.sh gets for one case, as META gives it:
// ID and COMM in its environment (with METAJOB_ID, set once per runner),
// and the run's table and the case's line number in it as $1 and $2, with
// N_cases the number of lines of that table, for scripts written for META
// that read the line themselves (sed -n "${2}p" "$1").
type caseRequest struct {
	ID, Comm   string
	Table      string // relative to the farm directory, the cases' working directory
	Line       int64  // from 1
	TableLines int64
	Set        caseSetting // OMP_NUM_THREADS and CUDA_VISIBLE_DEVICES of a managed case
	// Group: the case runs in a process group of its own, which the
	// runner's group names while it runs (a case with a time limit).
	Group bool
}

// caseRunner runs single_case.sh for one case and returns its STATUS
// (128+n when signal n killed it; sig is then n).
type caseRunner interface {
	run(c caseRequest) (code, sig int, err error)
	// refresh picks up an edited single_case.sh; the meta-job calls it
	// before each batch of claimed cases.
	refresh() error
	// bind makes the cases run on cpus only (WHOLE_NODE: a loop's share).
	bind(cpus []int)
	// scratch is the runner's private node-local directory ("" if it
	// has none): the loop's hostfiles go there.
	scratch() string
	// group is the process group of the case running with Group, 0 if
	// none; safe from any goroutine. lastGroup is that of the last case
	// run with Group, kept once it ended (for the loop that ran it).
	group() int
	lastGroup() int
	// use is what the last case run used, as far as known (caseuse.go).
	use() status.Use
	close()
}

// forkRunner keeps one bash worker per meta-job.
//
// Nothing it does per case touches the shared filesystem: single_case.sh is
// sourced from a copy in a private node-local directory (made again when
// the farm's single_case.sh changes, checked once per batch of cases), and
// the cases' output reaches the job's output file through a pipe that the
// meta-job copies, so that the per-case fork, dup and close of the output
// file's descriptors (each one a FLUSH at the server of a FUSE or NFS
// filesystem) happen on a pipe instead.
type forkRunner struct {
	dir  string // farm directory
	bash string
	env  []string
	out  io.Writer // the job's output (an fsretry.Writer, which rides out a full disk)
	// frames, with OUTPUT=job, are the loop's files of its cases' output
	// (caseout.go); nil: the cases write into out.
	frames *caseFrames

	tmp        string // private directory of the copy of single_case.sh
	copy       string // the copy (or ./single_case.sh when direct)
	direct     bool   // no node-local copy: the farm's own file is sourced
	src        os.FileInfo
	copied     time.Time
	refreshErr error // why the last refresh failed, nil if it did not

	cpus  []int // the CPUs its cases run on; nil: any
	bound bool  // it was bound once: unbinding is a call
	cmd   *exec.Cmd
	req   *os.File
	pipes []outPipe // the cases' output: stdout and stderr, or both in one (caseout.go)
	repR  int       // the replies' read end, non-blocking
	reply []byte
	buf   []byte
	pgid  atomic.Int64 // group
	last  int          // lastGroup

	// endBin is the farm executable that ends each case's subshell to
	// report its peak memory ("farm __case-end", caseuse.go); "": none.
	endBin string
	ticks  uint64     // the worker's reaped children's CPU ticks after the last case
	used   status.Use // use
	script string     // the worker's script, if not workerScript (a test's: one without EPOCHREALTIME)
}

// The private node-local directories of forkRunners are
// $TMPDIR/farm-case-HOST-RANDOM, HOST a hash of the host identity
// (proc.HostID), each with a lock (nightlyone/lockfile: a file holding the
// meta-job's PID) that says whether its meta-job is alive. A meta-job
// killed with kill -9 cannot remove its directory: the next runner of the
// same host identity does. TMPDIR may be shared by hosts, whose PIDs mean
// nothing here: their directories are never touched.
const (
	caseDirPrefix = "farm-case-"
	caseDirLock   = "lock"
	// caseDirGrace: a directory without a (valid) lock is a runner's that
	// died between making it and locking it once it is this old.
	caseDirGrace = time.Minute
)

func newForkRunner(dir, bash string, env []string, out io.Writer, src *os.File) (*forkRunner, error) {
	r, err := newCopyRunner(dir, bash, env, out, src)
	if err == nil {
		return r, nil
	}
	if _, serr := os.Stat(filepath.Join(dir, layout.SingleCase)); serr != nil {
		return nil, serr // no single_case.sh to run
	}
	// The node-local directory cannot be made or written (TMPDIR full,
	// read-only, not ours): source the farm's own single_case.sh, as
	// before there were copies.
	fmt.Fprintf(out, "farm: %v; sourcing %s from the farm directory instead\n", err, layout.SingleCase)
	return &forkRunner{dir: dir, bash: bash, env: env, out: out, copy: "./" + layout.SingleCase, direct: true, repR: -1}, nil
}

// newCopyRunner makes the runner's private node-local directory and the
// first copy of single_case.sh in it, from src if not nil (the farm's,
// open).
func newCopyRunner(dir, bash string, env []string, out io.Writer, src *os.File) (*forkRunner, error) {
	base, err := filepath.Abs(os.TempDir())
	if err != nil {
		return nil, fmt.Errorf("making a node-local directory for single_case.sh: %w", err)
	}
	prefix := caseDirPrefix + caseDirHost() + "-"
	removeDeadCaseDirs(base, prefix)
	tmp, err := os.MkdirTemp(base, prefix)
	if err != nil {
		return nil, fmt.Errorf("making a node-local directory for single_case.sh: %w", err)
	}
	if err := lockCaseDir(tmp); err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("making a node-local directory for single_case.sh: %w", err)
	}
	r := &forkRunner{dir: dir, bash: bash, env: env, out: out, tmp: tmp, copy: filepath.Join(tmp, layout.SingleCase), repR: -1}
	if err := r.copyIfChanged(src); err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	return r, nil
}

// refresh copies single_case.sh to the node-local copy if it changed since
// the last copy (or was never copied).
//
// A script that cannot be read or copied for a moment (an editor or git
// replacing it, a full TMPDIR) is not the cases' fault: the meta-job goes on
// with the copy it has, saying so once, and tries again at the next batch.
func (r *forkRunner) refresh() error {
	if r.direct {
		return nil
	}
	err := r.copyIfChanged(nil)
	if err == nil {
		if r.refreshErr != nil {
			fmt.Fprintf(r.out, "farm: %s is copied again\n", layout.SingleCase)
			r.refreshErr = nil
		}
		return nil
	}
	if r.src == nil {
		return err // no copy yet
	}
	if r.refreshErr == nil {
		fmt.Fprintf(r.out, "farm: %v; the cases go on with the copy of %s made at %s\n", err, layout.SingleCase, r.copied.Format(time.RFC3339))
	}
	r.refreshErr = err
	return nil
}

// copyIfChanged copies single_case.sh if it changed since the last copy,
// reading it from fh if not nil (open, at any offset), else opening it: on
// NFS, an open checks with the server (close-to-open consistency), where a
// stat may answer from a cache that is up to a minute old.
func (r *forkRunner) copyIfChanged(fh *os.File) error {
	src := filepath.Join(r.dir, layout.SingleCase)
	if fh == nil {
		var err error
		if fh, err = os.Open(src); err != nil {
			return err
		}
		defer fh.Close()
	} else if _, err := fh.Seek(0, io.SeekStart); err != nil {
		return err
	}
	fi, err := fh.Stat()
	if err != nil {
		return err
	}
	if r.src != nil && fi.Size() == r.src.Size() && fi.ModTime().Equal(r.src.ModTime()) && os.SameFile(fi, r.src) {
		return nil
	}
	b, err := io.ReadAll(fh)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteBytes(r.copy, proc.NewMode(0o600), b); err != nil {
		return fmt.Errorf("copying %s to %s: %w", src, r.tmp, err)
	}
	r.src, r.copied = fi, time.Now()
	return nil
}

func (r *forkRunner) start() error {
	ws := []io.Writer{r.out} // stdout and stderr together
	if r.frames != nil {
		ws = []io.Writer{&r.frames.out, &r.frames.err}
	}
	pipes, ends, err := newOutPipes(ws)
	if err != nil {
		return err
	}
	defer func() {
		for _, f := range ends {
			f.Close() // the worker has them
		}
	}()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		closeOutPipes(pipes)
		return err
	}
	repR, repW := p[0], os.NewFile(uintptr(p[1]), "case status")
	reqR, reqW, err := os.Pipe()
	if err != nil {
		closeOutPipes(pipes)
		unix.Close(repR)
		repW.Close()
		return err
	}
	script := workerScript
	if r.script != "" {
		script = r.script
	}
	cmd := &exec.Cmd{
		Path:       r.bash,
		Args:       []string{"bash", "-c", script, "bash", r.copy, r.endBin, strconv.FormatInt(useMinRun.Microseconds(), 10)},
		Dir:        workerDir(r.dir),
		Env:        withoutPWD(r.env),
		Stdout:     ends[0],
		Stderr:     ends[len(ends)-1],
		ExtraFiles: []*os.File{reqR, repW},
	}
	err = cmd.Start()
	reqR.Close()
	repW.Close()
	if err == nil && r.bound {
		bindPID(cmd.Process.Pid, r.cpus, r.out)
	}
	if err == nil {
		err = unix.SetNonblock(repR, true)
	}
	if err != nil {
		if cmd.Process != nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
		reqW.Close()
		closeOutPipes(pipes)
		unix.Close(repR)
		return err
	}
	r.cmd, r.req, r.pipes, r.repR, r.reply, r.ticks = cmd, reqW, pipes, repR, r.reply[:0], 0
	if r.buf == nil {
		r.buf = make([]byte, 64<<10)
	}
	return nil
}

// workerDir is the bash worker's working directory, the farm directory
// dir: "" (the meta-job's own, no call) if that is it already, as the job
// script starts it, else dir, which the start looks up (os.StartProcess's
// stat) before the child's chdir. getcwd asks no file server: the kernel
// knows the path.
func workerDir(dir string) string {
	if wd, err := unix.Getwd(); err == nil && wd == filepath.Clean(dir) {
		return ""
	}
	return dir
}

// withoutPWD is env less PWD: a bash given a PWD checks it against "."
// (a stat of each, by path, at the file server: some 25 brick operations
// on the rig's volume, BENCHMARKS.md); without one, bash sets it from
// getcwd, which asks no server.
func withoutPWD(env []string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, "PWD=") })
}

func (r *forkRunner) run(c caseRequest) (int, int, error) {
	if r.cmd == nil {
		if err := r.start(); err != nil {
			return 0, 0, err
		}
	}
	cuda := "-" // leaves the job's
	if c.Set.setCUDA {
		cuda = "+" + c.Set.cuda
	}
	if c.Group {
		cuda = "g" + cuda // its own process group
	}
	r.used = status.Use{}
	if _, err := fmt.Fprintf(r.req, "%s\n%s\n%s\n%d\n%d\n%s\n%s\n%s\n", c.ID, c.Comm, c.Table, c.Line, c.TableLines, c.Set.omp, cuda, c.Set.nodes.line()); err != nil {
		return r.died()
	}
	line, ok := r.reply1()
	r.pgid.Store(0)
	if !ok {
		return r.died()
	}
	r.addTicks()
	code, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return 0, 0, fmt.Errorf("case worker said %q", line)
	}
	sig := 0
	if code > 128 && code < 128+65 {
		sig = code - 128 // as bash reports a child killed by a signal
	}
	return code, sig, nil
}

// reply1 waits for the worker's reply of the case's end, its status (ok),
// taking the lines before it: its process group ("+PGID"), and what it
// used ("u RSS CPU", which may come before the group's line when the case
// ended at once).
func (r *forkRunner) reply1() (string, bool) {
	for {
		line, ok := r.wait()
		switch {
		case !ok:
			return "", false
		case line != "" && line[0] == '+':
			pgid, _ := strconv.Atoi(line[1:])
			r.pgid.Store(int64(pgid))
			r.last = pgid
		case line != "" && line[0] == 'u':
			r.used, _ = parseUseLine(line)
		default:
			return line, true
		}
	}
}

// died handles a worker that went away mid-case: the case's status is the
// worker's, and a new worker is started for the next case.
func (r *forkRunner) died() (int, int, error) {
	r.stop()
	ps := r.cmd.ProcessState
	r.cmd = nil
	if ps == nil {
		return 0, 0, errors.New("the case worker went away")
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), int(ws.Signal()), nil
	}
	if c := ps.ExitCode(); c != 0 {
		return c, 0, nil
	}
	return 1, 0, nil
}

// stop ends the worker and copies the output it left.
func (r *forkRunner) stop() {
	r.req.Close()
	r.cmd.Wait()
	r.drain()
	closeOutPipes(r.pipes)
	unix.Close(r.repR)
	r.pipes, r.repR = nil, -1
}

func (r *forkRunner) close() {
	if r.cmd != nil {
		r.stop()
		r.cmd = nil
	}
	if r.tmp != "" {
		os.RemoveAll(r.tmp)
	}
}

func (r *forkRunner) scratch() string { return r.tmp }

func (r *forkRunner) group() int { return int(r.pgid.Load()) }

func (r *forkRunner) lastGroup() int { return r.last }

// bind binds the worker, whose forked subshells inherit its CPUs, to cpus;
// nil, to the job's CPUs again, after a case that was bound.
func (r *forkRunner) bind(cpus []int) {
	if cpus == nil && !r.bound {
		return // never bound: nothing to undo
	}
	r.cpus, r.bound = cpus, true
	if r.cmd != nil && r.cmd.Process != nil {
		bindPID(r.cmd.Process.Pid, cpus, r.out)
	}
}

// newCaseRunner picks how to run single_case.sh: sourced in a forked bash
// subshell when it is a bash (or sh) script, its output copied to w, else
// executed directly, its output going to out itself.
//
// endBin is the farm executable, for "farm __case-end" (caseuse.go); ""
// (in tests): the peak memory of bash's cases is not known.
func newCaseRunner(dir, bash, endBin string, env []string, out *os.File, w io.Writer) (caseRunner, error) {
	path := dir + "/" + layout.SingleCase
	fh, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s is missing from the farm %s: restore it (the template is in any new farm: 'farm init DIR'), then 'farm resubmit'", layout.SingleCase, dir)
	}
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	head := make([]byte, 256)
	n, _ := io.ReadFull(fh, head)
	if farm.SourcedByBash(head[:n]) {
		r, err := newForkRunner(dir, bash, env, w, fh)
		if err != nil {
			return nil, err
		}
		r.endBin = endBin
		return r, nil
	}
	return &execRunner{dir: dir, argv: []string{path}, env: env, out: out}, nil
}
