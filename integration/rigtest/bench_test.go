package rigtest

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/farm-hpc/farm/integration/harness"
)

// BenchmarkRigClaims measures farm-wide claims on the rig with many
// meta-jobs a node: 8, 32 and 128 meta-jobs (FARM_RIG_BENCH_JOBS) submitted
// to partition many, whose nodes are rig's 4 with each CPU shared by up to
// 32 jobs (integration/CLUSTER.md), so that they run 2, 8 and 32 a node;
// on the coherent and latency volumes (FARM_RIG_BENCH_PROFILES; "ext4" is
// the nodes sharing this machine's local disk); with trivial cases (true,
// FARM_RIG_BENCH_CASES of them, 1,000 by default) and 0.1 s cases (sleep
// 0.1, FARM_RIG_BENCH_SLEEP_PER_JOB a meta-job, 20 by default: an ideal
// wall time of 2 s at every N) (FARM_RIG_BENCH_KINDS: trivial, sleep0.1).
// The counts are small because on this machine's 2 cores 128 meta-jobs
// claimed some 30 cases a second (3,000 trivial cases and 50 0.1 s cases
// a meta-job took 6 minutes on the coherent volume alone).
// For each: claims per second farm-wide, from the first case's start to the
// last one's end (wall); efficiency, the cases' own time (the sum of their
// end records' durations) ÷ (meta-jobs × wall); on the Gluster volumes the
// file operations the bricks served per case (gluster volume profile, one
// brick of the two replicas: the other sees the same writes). Every case
// must have run exactly once, by the status records.
//
// The meta-jobs get the benchmark's environment (sbatch --export=ALL):
// FARM_CLAIM_AHEAD=1 make bench-cluster measures the claim core with Ahead
// on.
//
//	make bench-cluster   (or: go test -run '^$' -bench Rig -benchtime 1x ./integration/rigtest/)
func BenchmarkRigClaims(b *testing.B) {
	if theRig == nil {
		b.Skip("CLUSTER BENCHMARKS SKIPPED: " + why)
	}
	trivial := envInt(b, "FARM_RIG_BENCH_CASES", 1000)
	perJob := envInt(b, "FARM_RIG_BENCH_SLEEP_PER_JOB", 20)
	for _, profile := range envList("FARM_RIG_BENCH_PROFILES", "coherent latency") {
		for _, kind := range envList("FARM_RIG_BENCH_KINDS", "trivial sleep0.1") {
			for _, js := range envList("FARM_RIG_BENCH_JOBS", "8 32 128") {
				jobs, err := strconv.Atoi(js)
				if err != nil || jobs < 1 {
					b.Fatalf("FARM_RIG_BENCH_JOBS: %q is not a number of meta-jobs", js)
				}
				cmd, cases := "true", trivial
				switch kind {
				case "trivial":
				case "sleep0.1":
					cmd, cases = "sleep 0.1", perJob*jobs
				default:
					b.Fatalf("FARM_RIG_BENCH_KINDS: no kind of case %q (trivial, sleep0.1)", kind)
				}
				b.Run(fmt.Sprintf("%s/%s/jobs=%d", profile, kind, jobs), func(b *testing.B) {
					for i := 0; i < b.N; i++ {
						benchClaims(b, profile, cmd, jobs, cases)
					}
				})
			}
		}
	}
}

// envInt is the environment variable key as a positive number, def if it
// is not set.
func envInt(b *testing.B, key string, def int) int {
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: not a positive number", key, v)
	}
	return n
}

// envList is the environment variable key split at spaces and commas, def
// if it is not set.
func envList(key, def string) []string {
	v := os.Getenv(key)
	if v == "" {
		v = def
	}
	return strings.FieldsFunc(v, func(r rune) bool { return r == ' ' || r == ',' })
}

func benchClaims(b *testing.B, profile, cmd string, jobs, cases int) {
	b.StopTimer()
	base := b.TempDir()
	vol := ""
	if profile != "ext4" {
		base = fmt.Sprintf("%s/%s", theRig.mnt, profile)
		vol = "farm-" + profile
	}
	dir, err := os.MkdirTemp(base, "bench-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	dir += "/farm"
	harness.NewFarmAt(b, dir, harness.Repeat(cmd, cases), "0-01:00")
	largeFarmConfig(b, dir) // the claims are measured, not mkdir
	defer func() {
		if ids := harness.JobIDs(dir); b.Failed() && len(ids) > 0 {
			exec.Command("scancel", ids...).Run()
		}
	}()

	if vol != "" {
		// (A profile left on by hand is fine: it is cleared below.)
		if out, err := exec.Command("gluster", "--mode=script", "volume", "profile", vol, "start").CombinedOutput(); err != nil && !strings.Contains(string(out), "already started") {
			b.Fatalf("gluster volume profile %s start: %v\n%s", vol, err, out)
		}
		defer gluster(b, "volume", "profile", vol, "stop")
		gluster(b, "volume", "profile", vol, "info", "clear")
	}
	b.StartTimer()
	m := runMany(b, dir, jobs, cases, "30m")
	b.StopTimer()
	b.ReportMetric(m.claimsPerSec(), "claims/s")
	b.ReportMetric(m.efficiency(), "eff")
	b.ReportMetric(m.wall, "wall-s")
	b.Logf("%s, %d meta-jobs (per node %v), %d cases of %q: %.1f claims/s, efficiency %.3f (%.1f s of cases, %.1f s wall); %d meta-jobs ran cases, the last began %.1f s after the first case; Slurm started the last meta-job %.0f s after it; FARM_CLAIM_AHEAD=%q FARM_CLAIM_LANES=%q",
		profile, jobs, m.perHost, cases, cmd, m.claimsPerSec(), m.efficiency(), m.caseSecs, m.wall, m.working, m.lastIn, m.lastJob,
		os.Getenv("FARM_CLAIM_AHEAD"), os.Getenv("FARM_CLAIM_LANES"))
	if vol != "" {
		fops := brickFops(b, vol)
		var total int64
		var names []string
		for f, n := range fops {
			total += n
			names = append(names, f)
		}
		sort.Slice(names, func(i, j int) bool { return fops[names[i]] > fops[names[j]] })
		var top []string
		for _, f := range names[:min(8, len(names))] {
			top = append(top, fmt.Sprintf("%s %.1f", f, float64(fops[f])/float64(cases)))
		}
		b.ReportMetric(float64(total)/float64(cases), "fops/case")
		b.Logf("%s, %d jobs: per case %s", profile, jobs, strings.Join(top, ", "))
	}
	time.Sleep(time.Second) // let the jobs' ends reach Slurm before the next farm
}

// manyRun is what runMany measured of a farm.
type manyRun struct {
	cases    int
	jobs     int
	wall     float64        // first case's start to last case's end, seconds
	caseSecs float64        // the cases' durations (E records), summed
	perHost  map[string]int // meta-jobs per host, by their status files
	working  int            // meta-jobs that started a case
	lastIn   float64        // the last of those to start its first case, seconds after the first case's start
	lastJob  float64        // Slurm's start of the last meta-job, seconds after the first case's start (whole seconds; NaN if unknown)
}

func (m manyRun) claimsPerSec() float64 { return float64(m.cases) / m.wall }

// efficiency is the cases' time ÷ (meta-jobs × wall): 1 when every
// meta-job ran cases from the first start to the last end.
func (m manyRun) efficiency() float64 { return m.caseSecs / (float64(m.jobs) * m.wall) }

// runMany submits jobs meta-jobs of the farm in dir (cases cases) to
// partition many, waits (for at most timeout, a farm wait duration) until
// the farm is done, and fails tb unless every case has exactly one start
// and one end record, each meta-job has a status file, and every end
// record says the case succeeded. It returns the figures of the run.
func runMany(tb testing.TB, dir string, jobs, cases int, timeout string) manyRun {
	tb.Helper()
	out := harness.Must(tb, dir, "submit", strconv.Itoa(jobs), many)
	if want := fmt.Sprintf("Submitted %d meta-jobs", jobs); !strings.Contains(out, want) {
		tb.Fatalf("submit said %q; want %q", out, want)
	}
	harness.Must(tb, dir, "wait", "--timeout", timeout)
	rec := harness.ReadRecords(tb, dir)
	bad := 0
	for id := int64(1); id <= int64(cases); id++ {
		if rec.Starts[id] != 1 || rec.Ends[id] != 1 || rec.Interrupts[id] != 0 || rec.ExitStatus[id] != 0 {
			if bad++; bad <= 10 {
				tb.Errorf("case %d: %d starts, %d ends (%d interrupted), exit status %d; want one successful run",
					id, rec.Starts[id], rec.Ends[id], rec.Interrupts[id], rec.ExitStatus[id])
			}
		}
	}
	if bad > 10 {
		tb.Errorf("... %d cases in all did not run exactly once", bad)
	}
	if len(rec.Starts) != cases || len(rec.Ends) != cases {
		tb.Errorf("%d cases have a start record and %d an end record; want %d", len(rec.Starts), len(rec.Ends), cases)
	}
	m := manyRun{cases: cases, jobs: jobs, wall: rec.Last - rec.First, perHost: map[string]int{}}
	headers := 0
	files, _ := filepath.Glob(filepath.Join(dir, "STATUSES", "status.*"))
	for _, f := range files {
		bs, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		first := 0.0
		for _, l := range strings.Split(string(bs), "\n") {
			if host, ok := headerHost(l); ok {
				m.perHost[host]++
				headers++
			}
			f := strings.Fields(l)
			if len(f) >= 5 && f[0] == "E" {
				secs, _ := strconv.ParseFloat(f[4], 64)
				m.caseSecs += secs
			}
			if len(f) >= 3 && f[0] == "S" {
				if at, _ := strconv.ParseFloat(f[2], 64); first == 0 || at < first {
					first = at
				}
			}
		}
		if first != 0 {
			m.working++
			m.lastIn = max(m.lastIn, first-rec.First)
		}
	}
	m.lastJob = lastJobStart(dir) - rec.First
	if headers != jobs {
		tb.Errorf("%d status files with a header (%v); want one per meta-job, %d", headers, m.perHost, jobs)
	}
	if tb.Failed() {
		tb.FailNow()
	}
	return m
}

// lastJobStart is the latest start time Slurm gives the farm's jobs
// (squeue %S, which keeps ended jobs for MinJobAge, 300 s on the rig), as
// Unix seconds; NaN if squeue gives none.
func lastJobStart(dir string) float64 {
	last := math.NaN()
	ids := harness.JobIDs(dir)
	if len(ids) == 0 {
		return last
	}
	out, err := exec.Command("squeue", "-h", "-t", "all", "-j", strings.Join(ids, ","), "-o", "%S").Output()
	if err != nil {
		return last
	}
	for _, f := range strings.Fields(string(out)) {
		if at, err := time.ParseInLocation("2006-01-02T15:04:05", f, time.Local); err == nil {
			if u := float64(at.Unix()); math.IsNaN(last) || u > last {
				last = u
			}
		}
	}
	return last
}

// many is the sbatch option, passed through farm submit, for partition
// many: rig's nodes, each CPU shared by up to 32 jobs.
const many = "--partition=many"

// headerHost is the host of a status file's header line.
func headerHost(l string) (string, bool) {
	if !strings.HasPrefix(l, "# farm-status ") {
		return "", false
	}
	for _, f := range strings.Fields(l) {
		if h, ok := strings.CutPrefix(f, "host="); ok {
			return h, true
		}
	}
	return "", false
}

func gluster(b *testing.B, args ...string) string {
	b.Helper()
	out, err := exec.Command("gluster", append([]string{"--mode=script"}, args...)...).CombinedOutput()
	if err != nil {
		b.Fatalf("gluster %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

var fopLine = regexp.MustCompile(`^\s*[0-9.]+\s+[0-9.]+ [nu]s\s+[0-9.]+ [nu]s\s+[0-9.]+ [nu]s\s+([0-9]+)\s+([A-Z]+)\s*$`)

// brickFops reads 'gluster volume profile VOL info cumulative' and returns
// the number of calls of each file operation the first brick served.
func brickFops(b *testing.B, vol string) map[string]int64 {
	out := gluster(b, "volume", "profile", vol, "info", "cumulative")
	fops := map[string]int64{}
	bricks := 0
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "Brick:") {
			bricks++
			continue
		}
		// "      0.64 1394919.65 ns   70135.00 ns 12460394.00 ns   1255   LINK"
		if m := fopLine.FindStringSubmatch(line); m != nil && bricks == 1 {
			n, _ := strconv.ParseInt(m[1], 10, 64)
			fops[m[2]] += n
		}
	}
	if len(fops) == 0 {
		b.Fatalf("no file operations in gluster volume profile %s info:\n%s", vol, out)
	}
	return fops
}
