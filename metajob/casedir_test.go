package metajob

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/farm-hpc/farm/layout"
)

// TestMain lets the test binary play a meta-job's case runner
// (FARM_TEST_ROLE=caserunner): it makes a forkRunner for the farm in
// $FARM_DIR, prints its directory, and closes it when its stdin ends.
func TestMain(m *testing.M) {
	if os.Getenv("FARM_TEST_ROLE") == "caserunner" {
		r, err := newForkRunner(os.Getenv("FARM_DIR"), "/bin/bash", os.Environ(), os.Stderr, nil)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(r.tmp)
		io.Copy(io.Discard, os.Stdin)
		r.close()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// caseRunnerProc is a case runner in a subprocess.
type caseRunnerProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	dir   string // its directory
}

// startCaseRunner starts a case runner for the farm in farmDir with TMPDIR
// tmp, through wrap (a command line to run it with, e.g. unshare; none if
// empty), and waits for its directory.
func startCaseRunner(t *testing.T, farmDir, tmp string, wrap ...string) *caseRunnerProc {
	t.Helper()
	argv := append(wrap, os.Args[0], "-test.run=^$")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "FARM_TEST_ROLE=caserunner", "FARM_DIR="+farmDir, "TMPDIR="+tmp)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &caseRunnerProc{cmd: cmd, stdin: stdin}
	t.Cleanup(func() { p.kill9() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("case runner: %v", err)
	}
	p.dir = strings.TrimSpace(line)
	return p
}

// kill9 kills the runner (and whatever runs it) with SIGKILL and reaps it.
func (p *caseRunnerProc) kill9() {
	if p.cmd.ProcessState == nil {
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		p.cmd.Wait()
	}
}

// end closes the runner's stdin: it closes its runner and exits.
func (p *caseRunnerProc) end(t *testing.T) {
	t.Helper()
	p.stdin.Close()
	if err := p.cmd.Wait(); err != nil {
		t.Errorf("case runner: %v", err)
	}
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// TestCaseDirsOfDeadMetajobsAreRemoved: a runner killed with kill -9 leaves
// its directory; the next runner of this host identity removes it, and
// leaves alone a live runner's, another host identity's (even with a dead
// PID in its lock), and anything not a directory of ours.
func TestCaseDirsOfDeadMetajobsAreRemoved(t *testing.T) {
	farmDir, tmp := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(farmDir, layout.SingleCase), []byte("#!/bin/bash\ntrue\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ours := caseDirPrefix + caseDirHost() + "-"

	dead := startCaseRunner(t, farmDir, tmp)
	live := startCaseRunner(t, farmDir, tmp)
	for _, p := range []*caseRunnerProc{dead, live} {
		fi, err := os.Lstat(p.dir)
		if err != nil || filepath.Dir(p.dir) != tmp || !strings.HasPrefix(filepath.Base(p.dir), ours) || fi.Mode().Perm() != 0o700 {
			t.Fatalf("runner's directory %s (%v), want a 0700 directory %s* in %s", p.dir, err, ours, tmp)
		}
		b, _ := os.ReadFile(filepath.Join(p.dir, caseDirLock))
		if strings.TrimSpace(string(b)) != strconv.Itoa(p.cmd.Process.Pid) {
			t.Errorf("lock of %s holds %q, want the runner's PID %d", p.dir, b, p.cmd.Process.Pid)
		}
		if !exists(filepath.Join(p.dir, layout.SingleCase)) {
			t.Errorf("%s has no copy of %s", p.dir, layout.SingleCase)
		}
	}
	dead.kill9()
	if !exists(dead.dir) {
		t.Fatal("kill -9 removed the directory: the test shows nothing")
	}
	keep, remove := caseDirsAround(t, tmp, ours, dead)
	// Another (simulated) host's runner, killed: its PIDs mean nothing here.
	if os.Geteuid() == 0 && exec.Command("unshare", "--uts", "--pid", "--fork", "--mount-proc", "true").Run() == nil {
		other := startCaseRunner(t, farmDir, tmp, "unshare", "--uts", "--pid", "--fork", "--mount-proc",
			"sh", "-c", `hostname nodeA && exec "$@"`, "sh")
		if strings.HasPrefix(filepath.Base(other.dir), ours) {
			t.Errorf("a runner in another PID namespace named its directory %s like ours", other.dir)
		}
		other.kill9()
		keep["another (simulated) host's, killed"] = other.dir
	} else {
		t.Log("not root or no unshare: no runner on a simulated other host")
	}

	next := startCaseRunner(t, farmDir, tmp)
	for what, p := range remove {
		if exists(p) {
			t.Errorf("%s: %s was not removed", what, filepath.Base(p))
		}
	}
	keep["live runner's"] = live.dir
	keep["new runner's"] = next.dir
	for what, p := range keep {
		if !exists(p) {
			t.Errorf("%s: %s was removed", what, filepath.Base(p))
		}
	}
	// Runners that end remove their own.
	live.end(t)
	next.end(t)
	for _, p := range []string{live.dir, next.dir} {
		if exists(p) {
			t.Errorf("%s left behind by a runner that ended", p)
		}
	}
}

// caseDirsAround makes in tmp what the next runner must leave or remove,
// besides the runners' own directories, and returns them by what they are:
// those it must keep, and those it must remove, with the directory of dead,
// a runner killed with kill -9. ours is the prefix of this host identity's
// directories.
func caseDirsAround(t *testing.T, tmp, ours string, dead *caseRunnerProc) (keep, remove map[string]string) {
	t.Helper()
	old := time.Now().Add(-2 * caseDirGrace)
	mk := func(name, lock string, age time.Time) string {
		p := filepath.Join(tmp, name)
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if lock != "" {
			if err := os.WriteFile(filepath.Join(p, caseDirLock), []byte(lock), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chtimes(p, age, age); err != nil {
			t.Fatal(err)
		}
		return p
	}
	deadLock := fmt.Sprintf("%d\n", dead.cmd.Process.Pid)
	keep = map[string]string{
		"another host identity's, dead PID": mk(caseDirPrefix+"0123456789ab-x", deadLock, old),
		"ours, no lock, new":                mk(ours+"new", "", time.Now()),
		"ours, live PID of another process": mk(ours+"reused", fmt.Sprintf("%d\n", os.Getpid()), old),
		"not a farm-case name":              mk("farm-cases-"+caseDirHost()+"-x", deadLock, old),
	}
	remove = map[string]string{
		"ours, dead PID":            mk(ours+"dead", deadLock, time.Now()),
		"ours, no lock, old":        mk(ours+"nolock", "", old),
		"ours, junk in lock, old":   mk(ours+"junk", "junk\n", old),
		"ours, killed with kill -9": dead.dir,
	}
	// A link named like ours to a dead directory elsewhere: neither is touched.
	target := mk("elsewhere", deadLock, old)
	os.Symlink(target, filepath.Join(tmp, ours+"link"))
	keep["symbolic link"] = filepath.Join(tmp, ours+"link")
	keep["symbolic link's target"] = target
	os.WriteFile(filepath.Join(tmp, ours+"file"), nil, 0o600)
	keep["a file"] = filepath.Join(tmp, ours+"file")
	if os.Geteuid() == 0 {
		p := mk(ours+"notours", deadLock, old)
		if err := os.Chown(p, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		keep["ours, dead PID, another user's"] = p
		p = mk(ours+"lockNotOurs", deadLock, old)
		os.Chown(filepath.Join(p, caseDirLock), 65534, 65534)
		keep["ours, dead PID, the lock another user's"] = p
	}
	return keep, remove
}
