package farm

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// caseRunner runs single_case.sh for one case and returns its STATUS
// (128+n when signal n killed it; sig is then n).
type caseRunner interface {
	run(id, comm string) (code, sig int, err error)
	close()
}

// workerScript is a bash loop that runs each case in a forked subshell that
// sources single_case.sh. Forking a running bash costs about a third of
// starting a new one (no exec, no dynamic linking), which is most of the
// per-case overhead of trivial cases. Requests come on fd 3 as two lines
// (ID, COMM); the subshell's exit status goes back on fd 4.
const workerScript = `while IFS= read -r -u 3 ID && IFS= read -r -u 3 COMM; do
  ( exec 3<&- 4>&-; export ID COMM; . ./` + SingleCase + ` )
  echo "$?" >&4
done`

// forkRunner keeps one bash worker per meta-job.
type forkRunner struct {
	dir  string
	bash string
	env  []string
	out  *os.File

	cmd *exec.Cmd
	req *os.File
	rep *bufio.Reader
	rfd *os.File
}

func (r *forkRunner) start() error {
	reqR, reqW, err := os.Pipe()
	if err != nil {
		return err
	}
	repR, repW, err := os.Pipe()
	if err != nil {
		reqR.Close()
		reqW.Close()
		return err
	}
	cmd := &exec.Cmd{
		Path:       r.bash,
		Args:       []string{"bash", "-c", workerScript},
		Dir:        r.dir,
		Env:        r.env,
		Stdout:     r.out,
		Stderr:     r.out,
		ExtraFiles: []*os.File{reqR, repW},
	}
	err = cmd.Start()
	reqR.Close()
	repW.Close()
	if err != nil {
		reqW.Close()
		repR.Close()
		return err
	}
	r.cmd, r.req, r.rfd, r.rep = cmd, reqW, repR, bufio.NewReader(repR)
	return nil
}

func (r *forkRunner) run(id, comm string) (int, int, error) {
	if r.cmd == nil {
		if err := r.start(); err != nil {
			return 0, 0, err
		}
	}
	if _, err := io.WriteString(r.req, id+"\n"+comm+"\n"); err != nil {
		return r.died()
	}
	line, err := r.rep.ReadString('\n')
	if err != nil {
		return r.died()
	}
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

// died handles a worker that went away mid-case: the case's status is the
// worker's, and a new worker is started for the next case.
func (r *forkRunner) died() (int, int, error) {
	r.req.Close()
	r.rfd.Close()
	err := r.cmd.Wait()
	ps := r.cmd.ProcessState
	r.cmd = nil
	if ps == nil {
		return 0, 0, err
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), int(ws.Signal()), nil
	}
	if c := ps.ExitCode(); c != 0 {
		return c, 0, nil
	}
	return 1, 0, nil
}

func (r *forkRunner) close() {
	if r.cmd == nil {
		return
	}
	r.req.Close()
	r.cmd.Wait()
	r.rfd.Close()
	r.cmd = nil
}

// execRunner starts single_case.sh anew for every case; used when the
// script is not a bash script and so cannot be sourced.
type execRunner struct {
	dir  string
	argv []string
	env  []string
	out  *os.File
}

func (r *execRunner) run(id, comm string) (int, int, error) {
	cmd := &exec.Cmd{
		Path:   r.argv[0],
		Args:   r.argv,
		Dir:    r.dir,
		Env:    append(r.env[:len(r.env):len(r.env)], "ID="+id, "COMM="+comm),
		Stdout: r.out,
		Stderr: r.out,
	}
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	werr := cmd.Wait()
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		return 128 + int(ws.Signal()), int(ws.Signal()), nil
	}
	if werr != nil && cmd.ProcessState.ExitCode() < 0 {
		return 0, 0, werr
	}
	return cmd.ProcessState.ExitCode(), 0, nil
}

func (r *execRunner) close() {}

// newCaseRunner picks how to run single_case.sh: sourced in a forked bash
// subshell when it is a bash (or sh) script, else executed directly.
func newCaseRunner(dir, bash string, env []string, out *os.File) (caseRunner, error) {
	path := dir + "/" + SingleCase
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	head := make([]byte, 256)
	n, _ := fh.Read(head)
	fh.Close()
	head = head[:n]
	first, _, _ := bytes.Cut(head, []byte("\n"))
	if !bytes.HasPrefix(first, []byte("#!")) || bytes.Contains(first, []byte("bash")) || bytes.HasSuffix(bytes.TrimSpace(first), []byte("/sh")) {
		return &forkRunner{dir: dir, bash: bash, env: env, out: out}, nil
	}
	return &execRunner{dir: dir, argv: []string{path}, env: env, out: out}, nil
}
