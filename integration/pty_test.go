package integration

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// runInPTY runs farm with args in dir with its output on a new
// pseudo-terminal of cols columns, and returns what the terminal received
// (with its own "\r\n" line endings) and the exit code.
func runInPTY(t *testing.T, dir string, cols int, args ...string) (string, int) {
	t.Helper()
	master, slave, err := openPTY(cols)
	if err != nil {
		t.Fatalf("opening a pseudo-terminal: %v", err)
	}
	defer master.Close()
	cmd := exec.Command(bin(t), args...)
	cmd.Dir, cmd.Env = dir, os.Environ()
	cmd.Stdin, cmd.Stdout = slave, slave
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	var out bytes.Buffer
	read := make(chan struct{})
	go func() {
		defer close(read)
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			out.Write(buf[:n])
			if err != nil {
				return // EIO once the terminal's last user closed it
			}
		}
	}()
	err = cmd.Wait()
	select {
	case <-read:
	case <-time.After(10 * time.Second):
		t.Fatalf("the terminal was not closed after farm %v ended", args)
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if stderr.Len() > 0 {
		t.Logf("farm %v said on stderr: %s", args, stderr.String())
	}
	return out.String(), code
}

// openPTY opens a pseudo-terminal pair cols columns wide.
func openPTY(cols int) (master, slave *os.File, err error) {
	master, err = os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	fd := int(master.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		master.Close()
		return nil, nil, err
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		master.Close()
		return nil, nil, err
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		master.Close()
		return nil, nil, err
	}
	if err := unix.IoctlSetWinsize(int(slave.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: uint16(cols)}); err != nil {
		master.Close()
		slave.Close()
		return nil, nil, err
	}
	return master, slave, nil
}
