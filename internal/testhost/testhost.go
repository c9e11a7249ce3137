// Package testhost simulates other hosts for tests. A simulated host is a
// UTS namespace (its own host name) and a PID namespace (its own PIDs, so a
// PID recorded on another host may be dead here, or alive as some other
// process), sharing this filesystem as cluster nodes share a parallel
// filesystem. It needs root and unshare(1).
package testhost

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/farm-hpc/farm/internal/testreq"
)

// unshare is the command line that runs what follows it in a new UTS and
// PID namespace, with its own /proc: a simulated host, which ends (every
// process in it killed) when the process that follows ends.
var unshare = []string{"unshare", "--uts", "--pid", "--fork", "--mount-proc"}

// Available reports why hosts cannot be simulated here, or nil if they
// can: that needs root and unshare(1).
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("simulated hosts need root (unshare)")
	}
	if err := exec.Command(unshare[0], append(unshare[1:], "true")...).Run(); err != nil {
		return fmt.Errorf("simulated hosts need unshare: %v", err)
	}
	return nil
}

// NeedNamespaces skips the test unless hosts can be simulated here; with
// FARM_REQUIRE_NAMESPACES=1 (set by .ci/run) it fails instead, so that CI
// cannot pass without the cross-host tests.
func NeedNamespaces(t testing.TB) {
	t.Helper()
	if err := Available(); err != nil {
		testreq.Skip(t, "FARM_REQUIRE_NAMESPACES", err.Error())
	}
}

// Command returns a command that runs script with sh on a simulated host
// named host, in a process group of its own, with this process's
// environment and env.
func Command(host, script string, env ...string) *exec.Cmd {
	argv := append(append([]string(nil), unshare...), "sh", "-c", "hostname "+host+" && "+script)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}
