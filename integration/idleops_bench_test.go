package integration

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/farm-hpc/farm/integration/harness"
)

// BenchmarkIdleOps counts, with strace, the operations on the farm
// directory per second that a farm's meta-jobs make while they do not
// claim (issue 39: idle meta-jobs must cost the metadata server a bounded
// load, whatever their number), for N meta-jobs on the local backend
// (FARM_IDLE_JOBS, a comma-separated list; 8,64), in two phases:
//
//	waiting  N trivial cases run, then every meta-job waits for cases
//	         'farm add' adds (WAIT_FOR_CASES=600): their probes, and the
//	         rescue check's election
//	warden   N-1 cases of 'sleep 3600' (and one trivial case): the
//	         meta-jobs that hold one run it; the first to find no case left
//	         stays as the run's warden and watches the others (the rest
//	         exit): its watch, its checks, and the others' elections
//
// Once every meta-job is in its phase's state, strace attaches to all of
// them for FARM_IDLE_SECONDS (20) and counts the calls that name a file
// of the farm (as BenchmarkClaimOps's meta-ops, without reads and writes
// of data and the calls that never reach a file server; the local engine's
// files apart, as engine-ops). FARM_OPS_BIN measures another
// farm binary (an older version, for before/after figures).
//
//	go test -run '^$' -bench IdleOps -benchtime 1x ./integration/   (make bench-ops)
func BenchmarkIdleOps(b *testing.B) {
	if _, err := exec.LookPath("strace"); err != nil {
		b.Skip("strace is not installed (apt-get install strace)")
	}
	farmBin := os.Getenv("FARM_OPS_BIN")
	if farmBin == "" {
		farmBin = harness.Bin(b)
	}
	seconds := 20
	if v, err := strconv.Atoi(os.Getenv("FARM_IDLE_SECONDS")); err == nil && v > 0 {
		seconds = v
	}
	jobList := []int{8, 64}
	if v := os.Getenv("FARM_IDLE_JOBS"); v != "" {
		jobList = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 2 {
				b.Fatalf("FARM_IDLE_JOBS=%q: want numbers of meta-jobs (2 or more), as 8,64", v)
			}
			jobList = append(jobList, n)
		}
	}
	for _, jobs := range jobList {
		for _, phase := range []string{"waiting", "warden"} {
			b.Run(fmt.Sprintf("jobs=%d/%s", jobs, phase), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					idleRun(b, farmBin, jobs, phase, seconds)
				}
			})
		}
	}
}

// idleRun is one phase's run: the farm, its meta-jobs in their state,
// their calls counted for seconds, and the jobs cancelled.
func idleRun(b *testing.B, farmBin string, jobs int, phase string, seconds int) {
	b.StopTimer()
	dir := idleFarm(b, farmBin, jobs, phase)
	slots := fmt.Sprintf("FARM_LOCAL_SLOTS=%d", jobs)
	farmCmd := func(args ...string) []byte {
		cmd := exec.Command(farmBin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), slots)
		out, err := cmd.CombinedOutput()
		if err != nil && args[0] != "kill" {
			b.Fatalf("farm %v: %v\n%s", args, err, out)
		}
		return out
	}
	farmCmd("submit", strconv.Itoa(jobs), "--backend", "local", "--yes")
	b.Cleanup(func() { farmCmd("kill") })
	want, ready := jobs, "waiting up to"
	if phase == "warden" {
		want, ready = 1, "stays while others of run"
	}
	harness.WaitFor(b, 10*time.Minute, fmt.Sprintf("%d meta-job(s) to say %q", want, ready), func() bool {
		return jobOutputsSaying(dir, ready) >= want
	})
	if phase == "warden" { // the others: running their cases, or gone
		last, since := -1, time.Now()
		harness.WaitFor(b, 5*time.Minute, "the meta-jobs without a case to exit", func() bool {
			if n := len(metajobPIDs(dir)); n != last {
				last, since = n, time.Now()
			}
			return time.Since(since) >= 5*time.Second
		})
	}
	time.Sleep(2 * time.Second) // past the first probes and looks
	pids := metajobPIDs(dir)
	trace := filepath.Join(b.TempDir(), "trace")
	args := []string{"-s", "INT", strconv.Itoa(seconds), "strace", "-f", "-qq", "-y", "-e", "trace=%file,%desc", "-o", trace}
	for _, p := range pids {
		args = append(args, "-p", p)
	}
	exec.Command("timeout", args...).Run()
	c, engine := countIdleOps(b, trace, dir)
	s := float64(seconds)
	b.ReportMetric(float64(c.meta)/s, "meta-ops/s")
	b.ReportMetric(float64(c.meta)/s/float64(len(pids)), "meta-ops/s/job")
	b.ReportMetric(float64(engine)/s, "engine-ops/s")
	b.ReportMetric(float64(len(pids)), "processes")
	b.Logf("%d meta-jobs, %s: %d processes traced for %d s; calls a second by call: %s; by file: %s",
		jobs, phase, len(pids), seconds, c.top(s, 8), c.topFiles(s, 8))
}

// idleFarm is a farm of trivial cases (BenchmarkClaimOps's) for phase:
// jobs of them with WAIT_FOR_CASES=600 (waiting), or one and jobs-1 of
// 'sleep 3600' (warden).
func idleFarm(b *testing.B, farmBin string, jobs int, phase string) string {
	b.Helper()
	dir := opsFarm(b, farmBin, jobs)
	if phase == "waiting" {
		p := filepath.Join(dir, "config")
		c, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(c, []byte("\nWAIT_FOR_CASES=0\n")) {
			b.Fatalf("%s: no WAIT_FOR_CASES=0 line (%v)", p, err)
		}
		if err := os.WriteFile(p, bytes.Replace(c, []byte("\nWAIT_FOR_CASES=0\n"), []byte("\nWAIT_FOR_CASES=600\n"), 1), 0o644); err != nil {
			b.Fatal(err)
		}
		return dir
	}
	table := "true\n" + strings.Repeat("sleep 3600\n", jobs-1)
	if err := os.WriteFile(filepath.Join(dir, "table.dat"), []byte(table), 0o644); err != nil {
		b.Fatal(err)
	}
	return dir
}

// jobOutputsSaying counts the job output files in dir's OUTPUT that hold s.
func jobOutputsSaying(dir, s string) int {
	files, _ := filepath.Glob(filepath.Join(dir, "OUTPUT", "slurm-*.out"))
	n := 0
	for _, f := range files {
		if c, err := os.ReadFile(f); err == nil && bytes.Contains(c, []byte(s)) {
			n++
		}
	}
	return n
}

// metajobPIDs are the PIDs of the 'farm metajob' processes of the farm in
// dir (by FARM_DIR in their environment).
func metajobPIDs(dir string) []string {
	procs, _ := filepath.Glob("/proc/[0-9]*")
	var pids []string
	for _, p := range procs {
		cmd, err := os.ReadFile(filepath.Join(p, "cmdline"))
		if err != nil || !bytes.HasSuffix(cmd, []byte("\x00metajob\x00")) {
			continue
		}
		env, _ := os.ReadFile(filepath.Join(p, "environ"))
		if bytes.Contains(env, []byte("\x00FARM_DIR="+dir+"\x00")) || bytes.HasPrefix(env, []byte("FARM_DIR="+dir+"\x00")) {
			pids = append(pids, filepath.Base(p))
		}
	}
	return pids
}

// countIdleOps counts the calls of an strace -f -y log of meta-jobs that
// name a file under dir (every process traced is a meta-job's), as
// countOps does; but the local engine's files (MISC/local, read by the
// rescue check's query of the engine: squeue's work on Slurm), which it
// counts apart, as engine.
func countIdleOps(b *testing.B, trace, dir string) (c opCount, engine int) {
	b.Helper()
	c = opCount{by: map[string]int{}, byFile: map[string]int{}}
	fdcwd := regexp.MustCompile(`AT_FDCWD<[^>]*>`)
	scanTrace(b, trace, func(_ int, line string) {
		if strings.Contains(line, " resumed>") || !strings.Contains(fdcwd.ReplaceAllString(line, "AT_FDCWD"), dir) {
			return
		}
		m := straceLine.FindStringSubmatch(line)
		if m == nil || localCalls[m[2]] || dataCalls[m[2]] {
			return
		}
		if fileKind(line) == "local engine" {
			engine++
			return
		}
		c.by[m[2]]++
		c.byFile[fileKind(line)]++
		c.meta++
	})
	return c, engine
}
