package faulttrials

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// engine is how a trial finds, stops and kills the processes of a farm's
// job on one backend.
type engine interface {
	name() string
	// args are the arguments after 'submit N' and 'resubmit N'.
	args() []string
	// alive: the job's meta-job process is known and running.
	alive(dir, job string) bool
	// signal sends sig to every process of the job's script (the
	// meta-job, its case worker and the case).
	signal(dir, job string, sig syscall.Signal) error
	// signaller returns a function that signals the job's processes
	// (those of now, for an engine that must look them up): as fast as
	// can be, to stop a meta-job inside its commit.
	signaller(dir, job string) func(syscall.Signal) error
	// leader is the PID of the job's meta-job process (0 if unknown).
	leader(dir, job string) int
	// kill kills the job the way how says (one of hows).
	kill(dir, job, how string) error
	// hows are the ways of killing; atCommit those fast enough to land
	// inside a claim commit.
	hows(atCommit bool) []string
}

// local: the local backend. A job is a supervisor (farm _localjob, PID)
// and the job script's process group (PGID: bash job_script.sh exec'd
// into farm metajob, its bash worker and the case), both in
// MISC/local/ID.state.
type local struct{}

func (local) name() string   { return "local" }
func (local) args() []string { return []string{"--backend", "local"} }

func (local) state(dir, job string) (pid, pgid int) {
	var st struct{ PID, PGID int }
	b, err := os.ReadFile(filepath.Join(dir, "MISC", "local", job+".state"))
	if err != nil || json.Unmarshal(b, &st) != nil {
		return 0, 0
	}
	return st.PID, st.PGID
}

func (l local) alive(dir, job string) bool {
	_, pgid := l.state(dir, job)
	return pgid > 0 && syscall.Kill(-pgid, 0) == nil && !zombie(pgid)
}

func (l local) signaller(dir, job string) func(syscall.Signal) error {
	_, pgid := l.state(dir, job)
	if pgid <= 1 || pgid == syscall.Getpgrp() {
		// kill(-0) would signal the test's own process group.
		return func(syscall.Signal) error { return fmt.Errorf("job %s: no process group recorded", job) }
	}
	return func(sig syscall.Signal) error { return syscall.Kill(-pgid, sig) }
}

func (l local) leader(dir, job string) int {
	_, pgid := l.state(dir, job)
	return pgid // the job script, exec'd into farm metajob
}

func (l local) signal(dir, job string, sig syscall.Signal) error {
	_, pgid := l.state(dir, job)
	if pgid <= 1 || pgid == syscall.Getpgrp() {
		return fmt.Errorf("job %s: no process group recorded", job)
	}
	return syscall.Kill(-pgid, sig)
}

func (l local) kill(dir, job, how string) error {
	pid, pgid := l.state(dir, job)
	if pgid <= 0 {
		return fmt.Errorf("job %s: no process group recorded", job)
	}
	switch how {
	case "kill-group": // kill -9 -PGID: the meta-job, its worker and case
		return syscall.Kill(-pgid, syscall.SIGKILL)
	case "kill-all": // and its supervisor: the whole job, as a node's death
		err := syscall.Kill(-pgid, syscall.SIGKILL)
		syscall.Kill(pid, syscall.SIGKILL)
		return err
	}
	return fmt.Errorf("unknown kill %q", how)
}

func (local) hows(bool) []string {
	return []string{"kill-group", "kill-group", "kill-group", "kill-all"}
}

// zombie reports whether the process pid has ended (and waits to be
// reaped, or is gone).
func zombie(pid int) bool {
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
		return true
	}
	return procState(pid, 'Z')
}

// procState reports whether the process pid is in state (T: stopped, Z:
// zombie).
func procState(pid int, state byte) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && len(b) > i+2 && b[i+2] == state
}

// slurm: the real Slurm of this machine. A job's processes are those
// whose environment holds its SLURM_JOB_ID (the batch script, exec'd into
// farm metajob, its worker and the case; not slurmstepd).
type slurmEngine struct{ mem string }

func (slurmEngine) name() string { return "slurm" }

// args: little memory per job, so that 8 meta-jobs fit on the node.
func (s slurmEngine) args() []string { return []string{"--backend", "slurm", "--mem=" + s.mem} }

// procs returns the PIDs of the job's processes, and which of them is the
// meta-job (0 if none).
func (slurmEngine) procs(job string) (pids []int, metajob int) {
	ents, _ := os.ReadDir("/proc")
	want := []byte("SLURM_JOB_ID=" + job + "\x00")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil || !bytes.HasPrefix(env, want) && !bytes.Contains(env, append([]byte{0}, want...)) {
			continue
		}
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		c := strings.TrimSpace(string(comm))
		if strings.HasPrefix(c, "slurmstepd") || zombie(pid) {
			continue
		}
		pids = append(pids, pid)
		if c == "farm" {
			cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			if bytes.Contains(cmd, []byte("\x00metajob")) {
				metajob = pid
			}
		}
	}
	return pids, metajob
}

func (s slurmEngine) alive(_, job string) bool {
	_, m := s.procs(job)
	return m > 0
}

func (s slurmEngine) signaller(_, job string) func(syscall.Signal) error {
	pids, _ := s.procs(job)
	return func(sig syscall.Signal) error {
		var err error
		for _, p := range pids {
			if e := syscall.Kill(p, sig); e != nil {
				err = e
			}
		}
		return err
	}
}

func (s slurmEngine) leader(_, job string) int {
	_, m := s.procs(job)
	return m
}

func (s slurmEngine) signal(_, job string, sig syscall.Signal) error {
	pids, _ := s.procs(job)
	if len(pids) == 0 {
		return fmt.Errorf("job %s: no processes", job)
	}
	for _, p := range pids {
		syscall.Kill(p, sig)
	}
	return nil
}

func (s slurmEngine) kill(_, job, how string) error {
	switch how {
	case "scancel": // scancel --signal=KILL: Slurm kills the job's processes
		if out, err := exec.Command("scancel", "--signal=KILL", job).CombinedOutput(); err != nil {
			return fmt.Errorf("scancel --signal=KILL %s: %v: %s", job, err, out)
		}
		return nil
	case "kill-metajob": // kill -9 of the meta-job process alone
		_, m := s.procs(job)
		if m == 0 {
			return fmt.Errorf("job %s: no meta-job process", job)
		}
		return syscall.Kill(m, syscall.SIGKILL)
	case "kill-procs": // kill -9 of every process of the job's script
		return s.signal("", job, syscall.SIGKILL)
	}
	return fmt.Errorf("unknown kill %q", how)
}

func (slurmEngine) hows(atCommit bool) []string {
	if atCommit {
		// scancel reaches the processes through slurmctld and slurmd,
		// milliseconds later: never inside a commit.
		return []string{"kill-metajob", "kill-procs"}
	}
	return []string{"scancel", "kill-metajob", "kill-procs"}
}
