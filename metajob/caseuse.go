package metajob

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/farm-hpc/farm/status"
	"golang.org/x/sys/unix"
)

// What a case used (status.Use), from the rusage of its processes once
// reaped.
//
// A program (execRunner) is farm's own child: its rusage comes with its
// exit status. A case of the bash worker (forkRunner) is the worker's
// child, reaped by the worker; farm learns
//   - its CPU time from the worker's: /proc/PID/stat's cutime and cstime,
//     the CPU time of every child the worker reaped, grow by the case's
//     (its subshell's and that of every process it waited for), in clock
//     ticks (10 ms); one read of a node-local file a case;
//   - its peak memory from the case itself: its subshell, as it exits, is
//     replaced (exec) by "farm __case-end STATUS", which inherits its
//     rusage, that of the processes it reaped included, and writes
//     "u RSS CPU" (KiB, microseconds) on the worker's reply pipe before
//     exiting with STATUS. That exec costs some milliseconds (a Go
//     program's start): it is made only for a case that ran for at least
//     useMinRun, for which it costs under 2% (BENCHMARKS.md); a shorter
//     case's peak is not known.
//
// ru_maxrss is the peak resident memory of the largest process (not their
// sum: what /usr/bin/time and Slurm's MaxRSS report).

// useMinRun is how long a case of the bash worker must have run for its
// peak memory to be asked (see above).
const useMinRun = 200 * time.Millisecond

// clockTick is the unit of /proc/PID/stat's times (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

// CaseEnd is "farm __case-end STATUS": the end of a case's subshell,
// replaced by it (see above). It writes what the subshell and the
// processes it reaped used on fd 4 and returns the status to exit with.
func CaseEnd(args []string) int {
	code := 1
	if len(args) > 0 {
		if n, err := strconv.Atoi(args[0]); err == nil {
			code = n
		}
	}
	var self, kids unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &self) == nil && unix.Getrusage(unix.RUSAGE_CHILDREN, &kids) == nil {
		rss := max(self.Maxrss, kids.Maxrss)
		cpu := tvMicros(self.Utime) + tvMicros(self.Stime) + tvMicros(kids.Utime) + tvMicros(kids.Stime)
		fmt.Fprintf(os.NewFile(4, "reply"), "u %d %d\n", rss, cpu)
	}
	return code
}

func tvMicros(tv unix.Timeval) int64 { return tv.Sec*1e6 + tv.Usec }

// rusageUse is what a reaped process used, from its rusage.
func rusageUse(ru *syscall.Rusage) status.Use {
	if ru == nil {
		return status.Use{}
	}
	cpu := ru.Utime.Sec*1e6 + ru.Utime.Usec + ru.Stime.Sec*1e6 + ru.Stime.Usec
	return status.Use{RSS: ru.Maxrss, CPU: time.Duration(cpu) * time.Microsecond, HasCPU: true}
}

// parseUseLine reads CaseEnd's line ("u RSS CPU").
func parseUseLine(line string) (status.Use, bool) {
	var rss, cpu int64
	if _, err := fmt.Sscanf(line, "u %d %d", &rss, &cpu); err != nil || rss < 0 || cpu < 0 {
		return status.Use{}, false
	}
	return status.Use{RSS: rss, CPU: time.Duration(cpu) * time.Microsecond, HasCPU: true}, true
}

// addTicks takes the case's CPU time from the worker's reaped children's
// (above), unless the case said it itself (to the microsecond).
func (r *forkRunner) addTicks() {
	t, ok := childTicks(r.cmd.Process.Pid)
	if !ok {
		return
	}
	if !r.used.HasCPU && t >= r.ticks {
		r.used.CPU, r.used.HasCPU = time.Duration(t-r.ticks)*clockTick, true
	}
	r.ticks = t
}

func (r *forkRunner) use() status.Use { return r.used }

// childTicks is the CPU time, in clock ticks, of the children process pid
// reaped (cutime + cstime); false if it cannot be read.
func childTicks(pid int) (uint64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The fields after the command's name, which ends with the last ')':
	// state is field 3, cutime and cstime are 16 and 17.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 15 {
		return 0, false
	}
	u, err1 := strconv.ParseUint(string(f[13]), 10, 64)
	s, err2 := strconv.ParseUint(string(f[14]), 10, 64)
	return u + s, err1 == nil && err2 == nil
}
