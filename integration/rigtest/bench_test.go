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
// the nodes sharing this machine's local disk); with trivial cases (true)
// and 0.1 s cases (sleep 0.1) (FARM_RIG_BENCH_KINDS: trivial, sleep0.1).
// The work grows with the meta-jobs, so that each has enough of it to reach
// a steady state after its start-up: FARM_RIG_BENCH_TRIVIAL_PER_JOB trivial
// cases a meta-job (60 by default: 480, 1,920 and 7,680 cases) and
// FARM_RIG_BENCH_SLEEP_PER_JOB 0.1 s cases a meta-job (40 by default: an
// ideal wall time of 4 s at every N). FARM_RIG_BENCH_CASES, if set, is the
// total number of trivial cases at every N instead (the earlier shape).
//
// Every case must have run exactly once (one start and one end record,
// exit 0), and each meta-job must have a status file.
//
// The figures, for each configuration:
//
//   - Over the whole wall (first case's start to last case's end):
//     claims/s = cases ÷ wall; efficiency = the cases' own time (the sum of
//     their end records' durations) ÷ (meta-jobs × wall).
//   - Start-up, counted apart: for each meta-job, its first case's start
//     (its earliest start record). "first-case spread" is the latest of
//     these minus the earliest (the farm's first case); p50/p90 are of the
//     same offsets. "Slurm to first case" is, per meta-job, its first
//     case's start minus the start Slurm gives the job (squeue %S, whole
//     seconds, so ±1 s): p50 and max.
//   - Over the steady-state window: from the moment 90% of the meta-jobs
//     have started their first case (the 90th percentile of the first-case
//     starts, rounded up to a meta-job) to the moment 10% of them have run
//     out of work (the same percentile, from the end, of the meta-jobs'
//     last case ends): at least 80% of the meta-jobs are past their
//     start-up and not yet draining throughout. (Not every meta-job: one
//     straggler's start would decide the window alone.) claims/s = the
//     cases that started in the window ÷ its length; efficiency = the
//     cases' time inside the window (each case's [start, start + duration]
//     clipped to it) ÷ (all the meta-jobs × its length). A run whose window
//     is empty (the start-up spread outlasted the work) reports none
//     ("steady-s" 0).
//   - After start-up, per meta-job: efficiency = the cases' time ÷ the
//     sum, over the meta-jobs that ran cases, of their first case's start
//     to their last case's end ("busy-eff"): the part of a started
//     meta-job's time that its cases used, the rest being its claims and
//     per-case overhead. Defined even when the window is empty; a meta-job
//     that ran nothing is left out of it (and counted by "working").
//
// On the Gluster volumes also the file operations the bricks served per
// case (gluster volume profile, one brick of the two replicas: the other
// sees the same writes).
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
	trivialTotal := 0
	if os.Getenv("FARM_RIG_BENCH_CASES") != "" {
		trivialTotal = envInt(b, "FARM_RIG_BENCH_CASES", 0)
	}
	trivialPerJob := envInt(b, "FARM_RIG_BENCH_TRIVIAL_PER_JOB", 60)
	perJob := envInt(b, "FARM_RIG_BENCH_SLEEP_PER_JOB", 40)
	for _, profile := range envList("FARM_RIG_BENCH_PROFILES", "coherent latency") {
		for _, kind := range envList("FARM_RIG_BENCH_KINDS", "trivial sleep0.1") {
			for _, js := range envList("FARM_RIG_BENCH_JOBS", "8 32 128") {
				jobs, err := strconv.Atoi(js)
				if err != nil || jobs < 1 {
					b.Fatalf("FARM_RIG_BENCH_JOBS: %q is not a number of meta-jobs", js)
				}
				cmd, cases := "true", trivialPerJob*jobs
				switch kind {
				case "trivial":
					if trivialTotal > 0 {
						cases = trivialTotal
					}
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
	b.ReportMetric(m.steadyClaimsPerSec(), "steady-claims/s")
	b.ReportMetric(m.steadyEfficiency(), "steady-eff")
	b.ReportMetric(m.steadyLen(), "steady-s")
	b.ReportMetric(m.spread, "firstcase-spread-s")
	b.ReportMetric(m.busyEfficiency(), "busy-eff")
	b.Logf("%s, %d meta-jobs (per node %v), %d cases of %q, load average %s: whole wall %.1f s: %.1f claims/s, efficiency %.3f (%.1f s of cases); %d meta-jobs ran cases, efficiency after their start-up %.3f",
		profile, jobs, m.perHost, cases, cmd, loadAvg(), m.wall, m.claimsPerSec(), m.efficiency(), m.caseSecs, m.working, m.busyEfficiency())
	b.Logf("  start-up: first cases %s after the farm's first (spread %.1f s); Slurm start to first case p50 %.1f s, max %.1f s; Slurm started the last meta-job %.0f s after the first case",
		m.firstQuantiles(), m.spread, m.slurmToFirst.p50, m.slurmToFirst.max, m.lastJob)
	if m.steadyLen() > 0 {
		b.Logf("  steady state %.1f–%.1f s (%.1f s, %d cases started in it): %.1f claims/s, efficiency %.3f",
			m.steadyFrom, m.steadyTo, m.steadyLen(), m.steadyCases, m.steadyClaimsPerSec(), m.steadyEfficiency())
	} else {
		b.Logf("  no steady state: 10%% of the meta-jobs had run out of work %.1f s after the first case, before 90%% had started (%.1f s)", m.steadyTo, m.steadyFrom)
	}
	b.Logf("  FARM_CLAIM_AHEAD=%q FARM_CLAIM_LANES=%q", os.Getenv("FARM_CLAIM_AHEAD"), os.Getenv("FARM_CLAIM_LANES"))
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

// manyRun is what runMany measured of a farm. Times are seconds after
// the farm's first case's start.
type manyRun struct {
	cases    int
	jobs     int
	wall     float64        // first case's start to last case's end
	caseSecs float64        // the cases' durations (E records), summed
	perHost  map[string]int // meta-jobs per host, by their status files
	working  int            // meta-jobs that started a case
	lastJob  float64        // Slurm's start of the last meta-job (whole seconds; NaN if unknown)

	firsts       []float64 // each working meta-job's first case's start, sorted
	spread       float64   // the latest of firsts
	slurmToFirst quant     // per meta-job: first case's start - Slurm's start of the job

	// The steady-state window (BenchmarkRigClaims): from the 90th
	// percentile of the first-case starts to the 10th of the last ends.
	steadyFrom, steadyTo float64
	steadyCases          int     // cases started in the window
	steadySecs           float64 // the cases' time inside the window
	lives                float64 // the working meta-jobs' first start to last end, summed
}

// busyEfficiency is the cases' time ÷ the working meta-jobs' lives.
func (m manyRun) busyEfficiency() float64 { return m.caseSecs / m.lives }

// quant is a distribution's median and maximum (NaN when empty).
type quant struct{ p50, max float64 }

func quantOf(xs []float64) quant {
	if len(xs) == 0 {
		return quant{math.NaN(), math.NaN()}
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return quant{s[len(s)/2], s[len(s)-1]}
}

func (m manyRun) claimsPerSec() float64 { return float64(m.cases) / m.wall }

// efficiency is the cases' time ÷ (meta-jobs × wall): 1 when every
// meta-job ran cases from the first start to the last end.
func (m manyRun) efficiency() float64 { return m.caseSecs / (float64(m.jobs) * m.wall) }

// steadyLen is the steady-state window's length, 0 if it is empty.
func (m manyRun) steadyLen() float64 { return max(0, m.steadyTo-m.steadyFrom) }

func (m manyRun) steadyClaimsPerSec() float64 {
	if m.steadyLen() == 0 {
		return 0
	}
	return float64(m.steadyCases) / m.steadyLen()
}

func (m manyRun) steadyEfficiency() float64 {
	if m.steadyLen() == 0 {
		return 0
	}
	return m.steadySecs / (float64(m.jobs) * m.steadyLen())
}

// firstQuantiles says when the meta-jobs began their first cases: p50, p90
// and max, in seconds after the farm's first case.
func (m manyRun) firstQuantiles() string {
	if len(m.firsts) == 0 {
		return "(none)"
	}
	q := func(p float64) float64 { return m.firsts[min(len(m.firsts)-1, int(p*float64(len(m.firsts))))] }
	return fmt.Sprintf("p50 %.1f s, p90 %.1f s, max %.1f s", q(0.5), q(0.9), m.firsts[len(m.firsts)-1])
}

// loadAvg is this machine's load average over 1, 5 and 15 minutes.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

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
	checkManyExact(tb, rec, cases)
	m := manyRun{cases: cases, jobs: jobs, wall: rec.Last - rec.First, perHost: map[string]int{}}
	var spans []span
	firstOf := map[string]float64{} // job ID: its first case's start (Unix)
	headers := 0
	var lastEnds []float64 // each working meta-job's last case's end
	for _, sf := range readStatusFiles(tb, dir) {
		for _, host := range sf.hosts {
			m.perHost[host]++
			headers++
		}
		m.caseSecs += sf.caseSecs
		for _, sp := range sf.spans {
			spans = append(spans, span{sp.start - rec.First, sp.secs})
		}
		if sf.first != 0 {
			m.working++
			m.firsts = append(m.firsts, sf.first-rec.First)
			lastEnds = append(lastEnds, sf.lastEnd-rec.First)
			m.lives += sf.lastEnd - sf.first
			if sf.job != "" {
				firstOf[sf.job] = sf.first
			}
		}
	}
	m.window(spans, lastEnds)
	starts := jobStarts(dir)
	var toFirst []float64
	m.lastJob = math.NaN()
	for job, at := range starts {
		if math.IsNaN(m.lastJob) || at-rec.First > m.lastJob {
			m.lastJob = at - rec.First
		}
		if first, ok := firstOf[job]; ok {
			toFirst = append(toFirst, first-at)
		}
	}
	m.slurmToFirst = quantOf(toFirst)
	if headers != jobs {
		tb.Errorf("%d status files with a header (%v); want one per meta-job, %d", headers, m.perHost, jobs)
	}
	if tb.Failed() {
		tb.FailNow()
	}
	return m
}

// checkManyExact fails tb unless each of the cases 1..cases ran exactly
// once, successfully, by the records rec.
func checkManyExact(tb testing.TB, rec harness.Records, cases int) {
	tb.Helper()
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
}

// statusFile is what one status file of a farm (STATUSES/status.*) says
// of its meta-job.
type statusFile struct {
	job      string   // its header's job= (the last header's)
	hosts    []string // its headers' host=, one per header
	first    float64  // its earliest case start (S records), Unix; 0: none
	lastEnd  float64  // its latest case end (E records), Unix
	caseSecs float64  // its E records' durations, summed
	spans    []span   // its E records: start (Unix) and duration
}

// readStatusFiles reads every status file of the farm in dir.
func readStatusFiles(tb testing.TB, dir string) []statusFile {
	tb.Helper()
	var out []statusFile
	files, _ := filepath.Glob(filepath.Join(dir, "STATUSES", "status.*"))
	for _, f := range files {
		bs, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		var sf statusFile
		for _, l := range strings.Split(string(bs), "\n") {
			if host, ok := headerHost(l); ok {
				sf.hosts = append(sf.hosts, host)
				sf.job = headerField(l, "job")
			}
			f := strings.Fields(l)
			if len(f) >= 5 && f[0] == "E" {
				at, _ := strconv.ParseFloat(f[3], 64)
				secs, _ := strconv.ParseFloat(f[4], 64)
				sf.caseSecs += secs
				sf.spans = append(sf.spans, span{at, secs})
				sf.lastEnd = max(sf.lastEnd, at+secs)
			}
			if len(f) >= 3 && f[0] == "S" {
				if at, _ := strconv.ParseFloat(f[2], 64); sf.first == 0 || at < sf.first {
					sf.first = at
				}
			}
		}
		out = append(out, sf)
	}
	return out
}

// span is a case's start (seconds from the farm's first case) and duration.
type span struct{ start, secs float64 }

// window sets m's start-up spread and steady-state window from the
// meta-jobs' first-case starts (m.firsts) and last ends (lastEnds), and
// what the cases did in the window.
func (m *manyRun) window(spans []span, lastEnds []float64) {
	sort.Float64s(m.firsts)
	sort.Float64s(lastEnds)
	if len(m.firsts) > 0 {
		m.spread = m.firsts[len(m.firsts)-1]
		// The 90th percentile of jobs first-case starts (ran nothing:
		// never started), the 10th of their last ends.
		k := (9*m.jobs + 9) / 10 // ceil(0.9 jobs), from 1
		m.steadyFrom = math.Inf(1)
		if k <= len(m.firsts) {
			m.steadyFrom = m.firsts[k-1]
		}
		m.steadyTo = lastEnds[min(len(lastEnds)-1, m.jobs-k)]
	}
	for _, sp := range spans {
		if sp.start >= m.steadyFrom && sp.start < m.steadyTo {
			m.steadyCases++
		}
		if lo, hi := max(sp.start, m.steadyFrom), min(sp.start+sp.secs, m.steadyTo); hi > lo {
			m.steadySecs += hi - lo
		}
	}
}

// jobStarts is the start time Slurm gives each of the farm's jobs
// (squeue %S, which keeps ended jobs for MinJobAge, 300 s on the rig), as
// Unix seconds, by job ID; empty if squeue gives none.
func jobStarts(dir string) map[string]float64 {
	starts := map[string]float64{}
	ids := harness.JobIDs(dir)
	if len(ids) == 0 {
		return starts
	}
	out, err := exec.Command("squeue", "-h", "-t", "all", "-j", strings.Join(ids, ","), "-o", "%i %S").Output()
	if err != nil {
		return starts
	}
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) != 2 {
			continue
		}
		if at, err := time.ParseInLocation("2006-01-02T15:04:05", f[1], time.Local); err == nil {
			starts[f[0]] = float64(at.Unix())
		}
	}
	return starts
}

// many is the sbatch option, passed through farm submit, for partition
// many: rig's nodes, each CPU shared by up to 32 jobs.
const many = "--partition=many"

// headerField is the value of key=... in a status file's header line.
func headerField(l, key string) string {
	for _, f := range strings.Fields(l) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			return v
		}
	}
	return ""
}

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
	fops := profileFops(out, func(i int, _ string) bool { return i == 0 })
	if len(fops) == 0 {
		b.Fatalf("no file operations in gluster volume profile %s info:\n%s", vol, out)
	}
	return fops
}

// profileFops sums, by file operation, the calls that the output of
// 'gluster volume profile VOL info …' lists for the bricks keep accepts
// (i counts the bricks from 0 in the order listed; brick is the brick's
// "host:/path").
func profileFops(out string, keep func(i int, brick string) bool) map[string]int64 {
	fops := map[string]int64{}
	i, on := -1, false
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if brick, ok := strings.CutPrefix(strings.TrimSpace(line), "Brick:"); ok {
			i++
			on = keep(i, strings.TrimSpace(brick))
			continue
		}
		// "      0.64 1394919.65 ns   70135.00 ns 12460394.00 ns   1255   LINK"
		if m := fopLine.FindStringSubmatch(line); m != nil && on {
			n, _ := strconv.ParseInt(m[1], 10, 64)
			fops[m[2]] += n
		}
	}
	return fops
}
