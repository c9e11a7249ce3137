package local

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// A job script runs as the leader of a session of its own (its process
// group's number is its session's): a case with a time limit runs in a
// process group of its own inside it (metajob's time limits), which a
// signal to the job's group does not reach. What must reach every process
// of the job — its SIGKILL, and the look at whether any of it still runs —
// goes to the session: its group first, then every process /proc lists in
// the session (killSession, sessionAlive). Without that, a job killed with
// SIGKILL would leave a case with a time limit running with nothing to
// record it, and the job would look ended while it runs: rescue would run
// the case a second time beside it.

// killSession sends sig to the job's process group sid and to every other
// process of its session.
func killSession(sid int, sig syscall.Signal) {
	if sid <= 1 {
		return
	}
	syscall.Kill(-sid, sig)
	for _, pid := range sessionMembers(sid) {
		syscall.Kill(pid, sig)
	}
}

// sessionAlive reports whether a process of session sid (its group, or
// one /proc lists in it) is alive.
func sessionAlive(sid int) bool {
	if sid <= 1 {
		return false
	}
	return syscall.Kill(-sid, 0) == nil || len(sessionMembers(sid)) > 0
}

// sessionMembers lists the processes of session sid that are not zombies.
func sessionMembers(sid int) []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	var pids []int
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		if s, state, ok := procSession(pid); ok && s == sid && state != 'Z' {
			pids = append(pids, pid)
		}
	}
	return pids
}

// procSession reads the session and the state of process pid from
// /proc/PID/stat: "PID (COMM) STATE PPID PGRP SESSION ...", COMM may hold
// spaces and parentheses, so the fields are counted from its last ')'.
func procSession(pid int) (sid int, state byte, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 4 || len(f[0]) != 1 {
		return 0, 0, false
	}
	sid, err = strconv.Atoi(string(f[3]))
	return sid, f[0][0], err == nil
}
