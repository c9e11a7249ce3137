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
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/farm-hpc/farm/integration/harness"
)

// BenchmarkRigThousand is issue 39's run of as many real meta-jobs as this
// machine holds (aiming at 1,024), on the rig's 4 nodes (partition
// thousand, which it makes with scontrol: each node's CPUs shared by as
// many jobs as it needs, and removes after) and on the distribute-replicate
// volume (FARM_RIG_THOUSAND_PROFILE, dht). The farm is the one `make build`
// made (bin/farm; harness.Bin's build when there is none). Its parts:
//
//   - The memory a meta-job costs: FARM_RIG_THOUSAND_PROBE_N (32)
//     meta-jobs, each running a sleep case; for each, the PSS and RSS
//     (/proc/PID/smaps_rollup, seen from the head: the nodes' PID
//     namespaces are the head's children) of its slurmstepd and every
//     process under it but the case's sleep (farm, which the job script
//     execs, and its bash worker), and the fall of MemAvailable, per job.
//     The dearer of the two is the cost; FARM_RIG_THOUSAND_MEM_KB gives it
//     instead (no probe). N is the most that fit with
//     FARM_RIG_THOUSAND_SPARE_PCT (20) percent of MemTotal to spare in
//     what is available then, with their threads in 80% of pid_max, at
//     most FARM_RIG_THOUSAND_N (1024).
//   - run: N meta-jobs, FARM_RIG_THOUSAND_CASES_PER_JOB (3) cases each,
//     sleeps of FARM_RIG_THOUSAND_SECS (20-60) seconds spread evenly,
//     longest first. The jobs are submitted to the partition held DOWN
//     and released together. Figures: efficiency (the cases' time ÷ (N ×
//     the first case's start to the last case's end)); each meta-job's
//     start (its job script's first line, $EPOCHREALTIME, on this
//     machine's disk) to its first case, p50/p99/max; the last case's end
//     to the moment squeue has none of the jobs left (polled every second);
//     every case exactly once, by the status records and by the cases' own
//     record; the memory of the jobs again, once every farm process
//     runs; and the bricks'
//     operations (gluster volume profile info incremental, every
//     FARM_RIG_THOUSAND_PROFILE_EVERY seconds (5), of the first brick of
//     each replica set, summed) by kind, per second and per case, at
//     submit, start-up (release to every meta-job's first case), steady
//     state (to the first meta-job's last case's end) and end (to the last
//     job gone). Per case is per case started in the phase (at the end:
//     ended).
//   - idle: N meta-jobs with WAIT_FOR_CASES, a table of one case: once
//     every job's output says it waits, the bricks' operations over
//     FARM_RIG_THOUSAND_IDLE_SECS (60); then scancel.
//   - warden: N meta-jobs, a case of 1 s and N-1 of
//     FARM_RIG_THOUSAND_WARDEN_CASE_SECS (900): once the run's warden is
//     marked and the jobs that found no case have gone, the bricks'
//     operations over FARM_RIG_THOUSAND_WATCH_SECS (60) while it watches;
//     then one meta-job running a case is killed (SIGKILL to every process
//     of its job but slurmstepd), and the operations from the kill to 15 s
//     after the rescue's mark, and how long the rescued case took to
//     start (its S record from=status.JOBID); then scancel.
//
// FARM_RIG_THOUSAND_PHASES (run idle warden) chooses the parts after the
// probe. A memory use over 80% of MemTotal cancels the jobs and fails; a
// run not over after FARM_RIG_THOUSAND_TIMEOUT_MIN (30) is cancelled and
// reported as far as it went. FARM_RIG_THOUSAND_KEEP=1 keeps each farm
// (its jobs cancelled) for a look, on the volume while the rig is up
// (FARM_KEEP_CLUSTER=1 keeps it up). Every figure goes to stderr and to the
// rig's log/thousand.txt (go test keeps 10 lines of a benchmark's log).
//
//	make bench-cluster RIG_BENCH=RigThousand
func BenchmarkRigThousand(b *testing.B) {
	if theRig == nil {
		b.Skip("CLUSTER BENCHMARKS SKIPPED: " + why)
	}
	c := thousandConfig(b)
	tlog(b, "farm: %s (%s); volume %s; load average %s; %s", c.bin, strings.TrimSpace(farmOut(b, c.bin, ".", "--version")), c.vol, loadAvg(), time.Now().UTC().Format(time.RFC3339))
	defer exec.Command("scontrol", "delete", "PartitionName="+thousandPart).Run()
	perJob, threads := int64(c.memKB)*1024, 20.0 // (threads: more than the probes found)
	if perJob == 0 {
		b.Run(fmt.Sprintf("memory/%s/N=%d", c.profile, c.probeN), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				perJob, threads = memProbe(b, c)
			}
		})
	}
	if perJob == 0 {
		b.Fatal("no memory figure a meta-job: the probe failed")
	}
	n := fitJobs(b, c, perJob, threads)
	for _, phase := range c.phases {
		f := map[string]func(*testing.B, thousandCfg, int){"run": thousandRun, "idle": thousandIdle, "warden": thousandWarden}[phase]
		if f == nil {
			b.Fatalf("FARM_RIG_THOUSAND_PHASES: no phase %q (run, idle, warden)", phase)
		}
		b.Run(fmt.Sprintf("%s/%s/N=%d", phase, c.profile, n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				f(b, c, n)
			}
		})
	}
}

// tlog says a line of BenchmarkRigThousand's figures on stderr (go test
// keeps only the first 10 lines of a benchmark's log) and appends it to
// the rig's log/thousand.txt.
func tlog(b *testing.B, format string, args ...any) {
	line := fmt.Sprintf("%s: %s", b.Name(), fmt.Sprintf(format, args...))
	fmt.Fprintln(os.Stderr, line)
	f, err := os.OpenFile(filepath.Join(theRig.dir, "log", "thousand.txt"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	fmt.Fprintf(f, "%s %s\n", time.Now().UTC().Format(time.RFC3339), line)
	f.Close()
}

// thousandPart is the partition BenchmarkRigThousand makes for its jobs.
const thousandPart = "thousand"

// thousandCfg is BenchmarkRigThousand's configuration (its environment).
type thousandCfg struct {
	bin, profile, vol   string
	capN, probeN, memKB int
	sparePct, perJob    int
	minSecs, maxSecs    int
	wardenSecs          int
	idle, watch, every  time.Duration
	timeout             time.Duration
	phases              []string
	nodes, cpus         int
	replicaFirst        map[string]bool // the first brick of each replica set, host:/path
}

func thousandConfig(b *testing.B) thousandCfg {
	c := thousandConfig0(b)
	secs := strings.Split(os.Getenv("FARM_RIG_THOUSAND_SECS"), "-")
	c.minSecs, c.maxSecs = 20, 60
	if len(secs) == 2 {
		c.minSecs, _ = strconv.Atoi(secs[0])
		c.maxSecs, _ = strconv.Atoi(secs[1])
	}
	if c.minSecs < 1 || c.maxSecs < c.minSecs {
		b.Fatalf("FARM_RIG_THOUSAND_SECS=%q: want MIN-MAX seconds", os.Getenv("FARM_RIG_THOUSAND_SECS"))
	}
	c.bin = filepath.Join(harness.Root(), "bin", "farm")
	if _, err := os.Stat(c.bin); err != nil {
		c.bin = harness.Bin(b)
	}
	c.nodes = theRig.nodes
	out, err := exec.Command("sinfo", "-h", "-p", "many", "-o", "%c").Output()
	c.cpus, _ = strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil || c.cpus < 1 {
		b.Fatalf("sinfo -p many -o %%c: %q, %v", out, err)
	}
	c.replicaFirst = replicaFirsts(b, c.vol)
	return c
}

func thousandConfig0(b *testing.B) thousandCfg {
	c := thousandCfg{
		profile:    os.Getenv("FARM_RIG_THOUSAND_PROFILE"),
		capN:       envInt(b, "FARM_RIG_THOUSAND_N", 1024),
		probeN:     envInt(b, "FARM_RIG_THOUSAND_PROBE_N", 32),
		sparePct:   envInt(b, "FARM_RIG_THOUSAND_SPARE_PCT", 20),
		perJob:     envInt(b, "FARM_RIG_THOUSAND_CASES_PER_JOB", 3),
		wardenSecs: envInt(b, "FARM_RIG_THOUSAND_WARDEN_CASE_SECS", 900),
		idle:       time.Duration(envInt(b, "FARM_RIG_THOUSAND_IDLE_SECS", 60)) * time.Second,
		watch:      time.Duration(envInt(b, "FARM_RIG_THOUSAND_WATCH_SECS", 60)) * time.Second,
		every:      time.Duration(envInt(b, "FARM_RIG_THOUSAND_PROFILE_EVERY", 5)) * time.Second,
		timeout:    time.Duration(envInt(b, "FARM_RIG_THOUSAND_TIMEOUT_MIN", 30)) * time.Minute,
		phases:     envList("FARM_RIG_THOUSAND_PHASES", "run idle warden"),
	}
	if os.Getenv("FARM_RIG_THOUSAND_MEM_KB") != "" {
		c.memKB = envInt(b, "FARM_RIG_THOUSAND_MEM_KB", 0)
	}
	if c.profile == "" {
		c.profile = "dht"
	}
	c.vol = "farm-" + c.profile
	return c
}

// replicaFirsts is the first brick of each replica set of vol, by gluster
// volume info ("Number of Bricks: 2 x 2 = 4", "Brick1: host:/path").
func replicaFirsts(b *testing.B, vol string) map[string]bool {
	out := gluster(b, "volume", "info", vol)
	per := 1
	if m := regexp.MustCompile(`Number of Bricks: \d+ x (?:\((\d+) \+ (\d+)\)|(\d+)) =`).FindStringSubmatch(out); m != nil {
		if m[3] != "" {
			per, _ = strconv.Atoi(m[3])
		} else {
			d, _ := strconv.Atoi(m[1])
			a, _ := strconv.Atoi(m[2])
			per = d + a
		}
	}
	firsts := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^Brick(\d+): (\S+)`).FindAllStringSubmatch(out, -1) {
		if i, _ := strconv.Atoi(m[1]); (i-1)%per == 0 {
			firsts[m[2]] = true
		}
	}
	if len(firsts) == 0 {
		b.Fatalf("gluster volume info %s: no bricks:\n%s", vol, out)
	}
	return firsts
}

// farmOut runs the farm binary bin in dir and fails b unless it exits 0.
func farmOut(b *testing.B, bin, dir string, args ...string) string {
	b.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	r := harness.Exec(b, cmd, args)
	if r.Code != 0 {
		b.Fatalf("farm %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.Code, r.Out, r.Err)
	}
	return r.Out
}

// thousandFarm is a farm of BenchmarkRigThousand's on the volume, and a
// directory of this machine's disk (which the nodes share) for the job
// scripts' start times and the cases' own records.
type thousandFarm struct {
	dir, local string
}

// newThousandFarm makes the farm: RUN_DIRS=0, the settings of config (key:
// value) in its config file, its job script writing the job's start time
// into local. It is removed, and its jobs cancelled, when b ends.
func newThousandFarm(b *testing.B, c thousandCfg, name string, table func(local string) []string, config map[string]string) thousandFarm {
	base, err := os.MkdirTemp(filepath.Join(theRig.mnt, c.profile), "thousand-"+name+"-")
	if err != nil {
		b.Fatal(err)
	}
	f := thousandFarm{dir: filepath.Join(base, "farm"), local: b.TempDir()}
	b.Cleanup(func() {
		cancelPartition(b)
		if os.Getenv("FARM_RIG_THOUSAND_KEEP") == "1" {
			tlog(b, "%s: kept in %s (FARM_RIG_THOUSAND_KEEP=1)", name, base)
			return
		}
		start := time.Now()
		os.RemoveAll(base)
		tlog(b, "%s: removed in %.1f s", name, time.Since(start).Seconds())
	})
	farmOut(b, c.bin, base, "init", f.dir)
	if err := os.WriteFile(filepath.Join(f.dir, "table.dat"), []byte(strings.Join(table(f.local), "\n")+"\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	harness.SetLimit(b, f.dir, "0-02:00")
	largeFarmConfig(b, f.dir)
	for k, v := range config {
		re := regexp.MustCompile(`(?m)^` + k + `=.*$`)
		p := filepath.Join(f.dir, "config")
		bs, err := os.ReadFile(p)
		if err != nil || !re.Match(bs) {
			b.Fatalf("%s: no %s= (%v)", p, k, err)
		}
		os.WriteFile(p, re.ReplaceAll(bs, []byte(k+"="+v)), 0o644)
	}
	exe := `exec "${FARM_BIN:-farm}" metajob`
	edit(b, filepath.Join(f.dir, "job_script.sh"), exe, `printf '%s\n' "$EPOCHREALTIME" > `+f.local+`/start.$SLURM_JOB_ID`+"\n"+exe)
	return f
}

// submit submits n meta-jobs of f to the partition, which it holds DOWN
// meanwhile, and then releases them together: it returns when it did.
func (f thousandFarm) submit(b *testing.B, c thousandCfg, m *monitor, n int) (start, release time.Time) {
	b.Helper()
	resumeKillFailed(b)
	makePartition(b, c, n, "DOWN")
	m.snap()
	start = time.Now()
	out := farmOut(b, c.bin, f.dir, "submit", strconv.Itoa(n), "--yes", "--partition="+thousandPart)
	if want := fmt.Sprintf("Submitted %d meta-jobs", n); !strings.Contains(out, want) {
		b.Fatalf("submit said %q; want %q", out, want)
	}
	submitted := time.Now()
	m.snap()
	scontrol(b, "update", "PartitionName="+thousandPart, "State=UP")
	release = time.Now()
	tlog(b, "submitted %d meta-jobs in %.1f s; released at %s UTC", n, submitted.Sub(start).Seconds(), release.UTC().Format("15:04:05"))
	return start, release
}

func scontrol(b *testing.B, args ...string) {
	b.Helper()
	if out, err := exec.Command("scontrol", args...).CombinedOutput(); err != nil {
		b.Fatalf("scontrol %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// makePartition (re)makes partition thousand on the rig's nodes, in state,
// with each CPU shared by as many jobs as n needs (and one more).
func makePartition(b *testing.B, c thousandCfg, n int, state string) {
	share := (n+c.nodes*c.cpus-1)/(c.nodes*c.cpus) + 1
	spec := []string{"PartitionName=" + thousandPart, fmt.Sprintf("Nodes=node[1-%d]", c.nodes), "MaxTime=INFINITE",
		"State=" + state, "LLN=YES", fmt.Sprintf("OverSubscribe=FORCE:%d", share)}
	if exec.Command("scontrol", "show", "partition", thousandPart).Run() == nil {
		scontrol(b, append([]string{"update"}, spec...)...)
		return
	}
	scontrol(b, append([]string{"create"}, spec...)...)
}

// cancelPartition cancels every job of partition thousand and waits (up to
// 2 minutes) until none is left.
func cancelPartition(b *testing.B) {
	exec.Command("scancel", "-p", thousandPart).Run()
	defer resumeKillFailed(b)
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		if active, _, err := partitionJobs(); err == nil && active == 0 {
			return
		}
	}
	tlog(b, "jobs of partition %s still there 2 minutes after scancel", thousandPart)
}

// resumeKillFailed returns to service the rig's nodes that Slurm drained
// because processes of a job outlived its kill by UnkillableStepTimeout
// (60 s: "Kill task failed"), as a thousand jobs cancelled at once on
// this machine's 2 cores can (their processes in FUSE calls), and says so.
func resumeKillFailed(b *testing.B) {
	out, _ := exec.Command("sinfo", "-h", "-R", "-p", thousandPart, "-o", "%N|%E").Output()
	for _, l := range strings.Split(string(out), "\n") {
		nodes, reason, ok := strings.Cut(l, "|")
		if ok && strings.Contains(reason, "Kill task failed") {
			tlog(b, "Slurm drained %s (%s): resumed", nodes, reason)
			scontrol(b, "update", "NodeName="+nodes, "State=RESUME")
		}
	}
}

var terminal = map[string]bool{"COMPLETED": true, "CANCELLED": true, "FAILED": true, "TIMEOUT": true, "NODE_FAIL": true,
	"PREEMPTED": true, "BOOT_FAIL": true, "DEADLINE": true, "OUT_OF_MEMORY": true}

// partitionJobs counts the jobs of partition thousand that squeue shows
// not ended, and returns the IDs of those running.
func partitionJobs() (active int, running []string, err error) {
	out, err := exec.Command("squeue", "-h", "-t", "all", "-p", thousandPart, "-o", "%i %T").Output()
	if err != nil {
		return 0, nil, err
	}
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) != 2 {
			continue
		}
		if !terminal[f[1]] {
			active++
		}
		if f[1] == "RUNNING" || f[1] == "COMPLETING" {
			running = append(running, f[0])
		}
	}
	return active, running, nil
}

// memInfo is /proc/meminfo's MemTotal and MemAvailable, in bytes.
func memInfo() (total, avail int64) {
	bs, _ := os.ReadFile("/proc/meminfo")
	for _, l := range strings.Split(string(bs), "\n") {
		f := strings.Fields(l)
		if len(f) >= 2 {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			switch f[0] {
			case "MemTotal:":
				total = kb * 1024
			case "MemAvailable:":
				avail = kb * 1024
			}
		}
	}
	return total, avail
}

// fitJobs is the number of meta-jobs of perJob bytes each that fit in the
// memory available now with sparePct% of MemTotal to spare, at most capN,
// and whose threads (each takes a PID) fit in 80% of kernel.pid_max.
func fitJobs(b *testing.B, c thousandCfg, perJob int64, threads float64) int {
	total, avail := memInfo()
	room := avail - total*int64(c.sparePct)/100
	fit := int(room / perJob)
	bs, _ := os.ReadFile("/proc/sys/kernel/pid_max")
	pidMax, _ := strconv.Atoi(strings.TrimSpace(string(bs)))
	tasks, _ := filepath.Glob("/proc/[0-9]*/task/[0-9]*")
	pidFit := int(float64(pidMax*8/10-len(tasks)) / threads)
	n := min(fit, c.capN, pidFit)
	tlog(b, "memory: MemTotal %.1f GiB, MemAvailable %.1f GiB; %.1f MiB a meta-job; %d fit with %d%% of MemTotal to spare; PIDs: %d threads now, pid_max %d, %.1f threads a meta-job: %d fit in 80%%; N = %d (FARM_RIG_THOUSAND_N %d)",
		gib(total), gib(avail), mib(perJob), fit, c.sparePct, len(tasks), pidMax, threads, pidFit, n, c.capN)
	if n < 1 {
		b.Fatalf("no meta-job fits")
	}
	if n < 512 {
		tlog(b, "N = %d: under issue 39's 512", n)
	}
	return n
}

func gib(n int64) float64 { return float64(n) / (1 << 30) }
func mib(n int64) float64 { return float64(n) / (1 << 20) }

// fopSnap is the bricks' operations by kind from the snapshot before to at.
type fopSnap struct {
	at   time.Time
	fops map[string]int64
}

// monitor watches a farm's run: the bricks' operations (incremental
// profile snapshots), the partition's jobs (squeue, every second) and this
// machine's memory, which it keeps under 80% of MemTotal by cancelling the
// jobs.
type monitor struct {
	c       thousandCfg
	snapMu  sync.Mutex // one snapshot at a time
	mu      sync.Mutex // what follows
	snaps   []fopSnap
	allUp   time.Time // the first moment n jobs had run (each seen running)
	ran     map[string]bool
	gone    time.Time // the first moment none was left, after some were
	seen    int       // the most jobs active at once
	active  int
	peak    int64 // the most memory used (MemTotal - MemAvailable)
	abort   string
	n       int
	stop    chan struct{}
	stopped chan struct{}
}

func startMonitor(b *testing.B, c thousandCfg, n int) *monitor {
	if out, err := exec.Command("gluster", "--mode=script", "volume", "profile", c.vol, "start").CombinedOutput(); err != nil && !strings.Contains(string(out), "already started") {
		b.Fatalf("gluster volume profile %s start: %v\n%s", c.vol, err, out)
	}
	m := &monitor{c: c, n: n, ran: map[string]bool{}, stop: make(chan struct{}), stopped: make(chan struct{})}
	m.snap()
	go m.loop()
	b.Cleanup(func() {
		m.halt()
		exec.Command("gluster", "--mode=script", "volume", "profile", c.vol, "stop").Run()
	})
	return m
}

func (m *monitor) loop() {
	defer close(m.stopped)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last := time.Now()
	for {
		select {
		case <-m.stop:
			return
		case <-tick.C:
		}
		active, running, err := partitionJobs()
		now := time.Now()
		total, avail := memInfo()
		m.mu.Lock()
		if err == nil {
			m.active = active
			m.seen = max(m.seen, active)
			for _, id := range running {
				m.ran[id] = true
			}
			if len(m.ran) >= m.n && m.allUp.IsZero() {
				m.allUp = now
			}
			if active == 0 && m.seen > 0 && m.gone.IsZero() {
				m.gone = now
			}
		}
		m.peak = max(m.peak, total-avail)
		if total-avail > total*8/10 && m.abort == "" {
			m.abort = fmt.Sprintf("memory used %.1f GiB of %.1f GiB at %s: over 80%%, jobs cancelled", gib(total-avail), gib(total), time.Now().UTC().Format("15:04:05"))
			exec.Command("scancel", "-p", thousandPart).Run()
		}
		m.mu.Unlock()
		if time.Since(last) >= m.c.every {
			m.snap()
			last = time.Now()
		}
	}
}

// halt ends the monitor's loop (once).
func (m *monitor) halt() {
	select {
	case <-m.stop:
	default:
		close(m.stop)
	}
	<-m.stopped
}

// snap takes a snapshot of the bricks' operations since the last.
func (m *monitor) snap() {
	m.snapMu.Lock()
	defer m.snapMu.Unlock()
	out, err := exec.Command("gluster", "--mode=script", "volume", "profile", m.c.vol, "info", "incremental").CombinedOutput()
	if err != nil {
		return // (the next snapshot counts these operations)
	}
	s := fopSnap{time.Now(), profileFops(string(out), func(_ int, brick string) bool { return m.c.replicaFirst[brick] })}
	m.mu.Lock()
	m.snaps = append(m.snaps, s)
	m.mu.Unlock()
}

// state returns what the loop saw, failing b if the memory ran over.
func (m *monitor) state(b *testing.B) (allUp, gone time.Time, active int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.abort != "" {
		b.Fatal(m.abort)
	}
	return m.allUp, m.gone, m.active
}

// between sums the operations of the snapshots' intervals whose middle is
// in [from, to), and their length in seconds.
func (m *monitor) between(from, to time.Time) (map[string]int64, float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	fops, secs := map[string]int64{}, 0.0
	for i := 1; i < len(m.snaps); i++ {
		a, z := m.snaps[i-1].at, m.snaps[i].at
		mid := a.Add(z.Sub(a) / 2)
		if mid.Before(from) || !mid.Before(to) {
			continue
		}
		secs += z.Sub(a).Seconds()
		for k, v := range m.snaps[i].fops {
			fops[k] += v
		}
	}
	return fops, secs
}

// waitUntil polls cond every second until it holds, failing b after d or
// when the monitor cancelled the jobs.
func (m *monitor) waitUntil(b *testing.B, d time.Duration, what string, cond func() bool) {
	b.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(time.Second) {
		m.state(b)
		if time.Now().After(deadline) {
			b.Fatalf("timed out after %s waiting for %s", d, what)
		}
	}
}

func (m *monitor) waitAllUp(b *testing.B) time.Time {
	m.waitUntil(b, 10*time.Minute, "every meta-job to run", func() bool { up, _, _ := m.state(b); return !up.IsZero() })
	up, _, _ := m.state(b)
	return up
}

// waitGoneFor waits up to d for the last job gone: when it was, and
// whether it was.
func (m *monitor) waitGoneFor(b *testing.B, d time.Duration) (time.Time, bool) {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(time.Second) {
		if _, gone, _ := m.state(b); !gone.IsZero() {
			return gone, true
		}
	}
	return time.Time{}, false
}

// farms counts the jobs ids whose farm process runs (under its slurmstepd).
func farms(ids []string) int {
	procs, stepds := procTable()
	n := 0
	for _, id := range ids {
		for _, p := range descendants(procs, stepds[id]) {
			if stepds[id] != 0 && procs[p].comm == "farm" {
				n++
				break
			}
		}
	}
	return n
}

// fopsLine says ops by kind, most first: per second over secs, and per
// case over cases (none if 0).
func fopsLine(fops map[string]int64, secs float64, cases int) string {
	var total int64
	kinds := make([]string, 0, len(fops))
	for k, v := range fops {
		total += v
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool { return fops[kinds[i]] > fops[kinds[j]] })
	per := func(v int64) string {
		s := fmt.Sprintf("%.1f/s", float64(v)/secs)
		if cases > 0 {
			s += fmt.Sprintf(" %.2f/case", float64(v)/float64(cases))
		}
		return s
	}
	parts := []string{fmt.Sprintf("all %d: %s", total, per(total))}
	for _, k := range kinds {
		parts = append(parts, fmt.Sprintf("%s %d: %s", k, fops[k], per(fops[k])))
	}
	return strings.Join(parts, "; ")
}

func sumFops(fops map[string]int64) (n int64) {
	for _, v := range fops {
		n += v
	}
	return n
}

// proc is a process of this machine, as its /proc says.
type proc struct {
	ppid, threads int
	comm          string
}

var stepdRe = regexp.MustCompile(`^slurmstepd: \[(\d+)\.batch\]`)

// procTable reads every process's parent and name, and the batch
// slurmstepd of each job: its PID by job ID.
func procTable() (map[int]proc, map[string]int) {
	procs, stepds := map[int]proc{}, map[string]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		bs, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		i, j := strings.IndexByte(string(bs), '('), strings.LastIndexByte(string(bs), ')')
		if err != nil || i < 0 || j < i {
			continue
		}
		f := strings.Fields(string(bs[j+1:]))
		if len(f) < 18 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		threads, _ := strconv.Atoi(f[17])
		procs[pid] = proc{ppid, threads, string(bs[i+1 : j])}
		if procs[pid].comm == "slurmstepd" {
			cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			if m := stepdRe.FindSubmatch(cmd); m != nil {
				stepds[string(m[1])] = pid
			}
		}
	}
	return procs, stepds
}

// descendants is every process under pid, pid excluded.
func descendants(procs map[int]proc, pid int) []int {
	kids := map[int][]int{}
	for p, pr := range procs {
		kids[pr.ppid] = append(kids[pr.ppid], p)
	}
	var out []int
	for todo := kids[pid]; len(todo) > 0; todo = todo[1:] {
		out = append(out, todo[0])
		todo = append(todo, kids[todo[0]]...)
	}
	return out
}

// rssPss is a process's RSS and PSS (smaps_rollup), in bytes.
func rssPss(pid int) (rss, pss int64) {
	bs, _ := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	for _, l := range strings.Split(string(bs), "\n") {
		f := strings.Fields(l)
		if len(f) >= 2 {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			switch f[0] {
			case "Rss:":
				rss = kb * 1024
			case "Pss:":
				pss = kb * 1024
			}
		}
	}
	return rss, pss
}

// jobsMem is the memory of the meta-jobs found: by kind of process
// (slurmstepd, farm, bash, sleep: the case, other), summed over them.
type jobsMem struct {
	jobs     int
	tasks    int // their threads (each takes a PID)
	procs    map[string]int
	rss, pss map[string]int64
}

// perJob is a meta-job's PSS and RSS, its case's sleep left out.
func (j jobsMem) perJob() (pss, rss int64) {
	if j.jobs == 0 {
		return 0, 0
	}
	for k := range j.pss {
		if k != "sleep" {
			pss += j.pss[k]
			rss += j.rss[k]
		}
	}
	return pss / int64(j.jobs), rss / int64(j.jobs)
}

func (j jobsMem) String() string {
	pss, rss := j.perJob()
	s := fmt.Sprintf("%d meta-jobs: PSS %.2f MiB, RSS %.2f MiB a meta-job (its case's sleep left out), %.1f threads a meta-job", j.jobs, mib(pss), mib(rss), float64(j.tasks)/float64(max(1, j.jobs)))
	for _, k := range []string{"slurmstepd", "farm", "bash", "sleep", "other"} {
		if j.procs[k] > 0 {
			s += fmt.Sprintf("; %s: %d processes, PSS %.2f MiB, RSS %.2f MiB a meta-job", k, j.procs[k], mib(j.pss[k]/int64(j.jobs)), mib(j.rss[k]/int64(j.jobs)))
		}
	}
	return s
}

// measureJobs reads the memory of the jobs ids (their batch slurmstepd and
// every process under it), and which of them run a case (a sleep).
func measureJobs(ids []string) (jobsMem, []string) {
	procs, stepds := procTable()
	j := jobsMem{procs: map[string]int{}, rss: map[string]int64{}, pss: map[string]int64{}}
	var busy []string
	for _, id := range ids {
		stepd, ok := stepds[id]
		if !ok {
			continue
		}
		j.jobs++
		sleeping := false
		for _, p := range append([]int{stepd}, descendants(procs, stepd)...) {
			kind := procs[p].comm
			switch kind {
			case "slurmstepd", "farm", "bash", "sleep":
			default:
				kind = "other"
			}
			sleeping = sleeping || kind == "sleep"
			rss, pss := rssPss(p)
			j.procs[kind]++
			j.tasks += procs[p].threads
			j.rss[kind] += rss
			j.pss[kind] += pss
		}
		if sleeping {
			busy = append(busy, id)
		}
	}
	return j, busy
}

// memProbe measures what a meta-job costs: c.probeN meta-jobs, each
// running a sleep case; the dearer of their PSS a job and the fall of
// MemAvailable a job, and their threads a job.
func memProbe(b *testing.B, c thousandCfg) (int64, float64) {
	n := c.probeN
	f := newThousandFarm(b, c, "probe", func(string) []string { return harness.Repeat("sleep 900", n) }, nil)
	m := startMonitor(b, c, n)
	_, before := memInfo()
	f.submit(b, c, m, n)
	m.waitAllUp(b)
	ids := harness.JobIDs(f.dir)
	var jm jobsMem
	m.waitUntil(b, 5*time.Minute, "every probe meta-job to run its case", func() bool {
		var busy []string
		jm, busy = measureJobs(ids)
		return len(busy) == n
	})
	time.Sleep(5 * time.Second)
	_, after := memInfo()
	jm, _ = measureJobs(ids)
	pss, _ := jm.perJob()
	fall := (before - after) / int64(n)
	tlog(b, "memory probe: %s; MemAvailable fell %.1f MiB, %.2f MiB a meta-job", jm, mib(before-after), mib(fall))
	b.ReportMetric(mib(pss), "probe-pss-MiB/job")
	b.ReportMetric(mib(fall), "probe-availfall-MiB/job")
	cancelPartition(b)
	return max(pss, fall), float64(jm.tasks) / float64(max(1, jm.jobs))
}

// thousandTable is the run's cases: c.perJob a meta-job, sleeps from
// c.maxSecs down to c.minSecs spread evenly, each recording its ID in
// local when it ends.
func thousandTable(c thousandCfg, n int, local string) []string {
	cases := n * c.perJob
	out := make([]string, cases)
	for i := range out {
		secs := c.maxSecs
		if cases > 1 {
			secs = c.maxSecs - int(math.Round(float64(i)*float64(c.maxSecs-c.minSecs)/float64(cases-1)))
		}
		out[i] = fmt.Sprintf("sleep %d && %s", secs, ranLineAt(local))
	}
	return out
}

// quantile is the p quantile of xs (sorted; the nearest rank), NaN if
// empty.
func quantile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(p*float64(len(xs)))) - 1
	return xs[max(0, min(len(xs)-1, i))]
}

// jobStamps reads the start times the job scripts wrote in local, by job.
func jobStamps(b *testing.B, local string) map[string]float64 {
	out := map[string]float64{}
	files, _ := filepath.Glob(filepath.Join(local, "start.*"))
	for _, p := range files {
		bs, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		at, err := strconv.ParseFloat(strings.TrimSpace(string(bs)), 64)
		if err != nil {
			b.Fatalf("%s: %q", p, bs)
		}
		out[strings.TrimPrefix(filepath.Base(p), "start.")] = at
	}
	return out
}

// ranOnce fails b unless every case 1..cases recorded exactly one run in
// local's ran.* files (the cases' own record); at most one if the run did
// not end (done false).
func ranOnce(b *testing.B, local string, cases int, done bool) {
	seen := map[int64]int{}
	files, _ := filepath.Glob(filepath.Join(local, "ran.*"))
	for _, p := range files {
		fh, err := os.Open(p)
		if err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			id, _ := strconv.ParseInt(strings.TrimSpace(sc.Text()), 10, 64)
			seen[id]++
		}
		fh.Close()
	}
	bad := 0
	for id := int64(1); id <= int64(cases); id++ {
		if seen[id] > 1 || done && seen[id] != 1 {
			if bad++; bad <= 10 {
				b.Errorf("case %d: ran %d times by its own record; want once", id, seen[id])
			}
		}
	}
	if done && len(seen) != cases {
		b.Errorf("%d cases recorded a run; want %d", len(seen), cases)
	}
}

// thousandRun is BenchmarkRigThousand's run (its doc says what it does).
func thousandRun(b *testing.B, c thousandCfg, n int) {
	b.StopTimer()
	cases := n * c.perJob
	f := newThousandFarm(b, c, "run", func(local string) []string { return thousandTable(c, n, local) }, nil)
	m := startMonitor(b, c, n)
	b.StartTimer()
	start, release := f.submit(b, c, m, n)
	up := m.waitAllUp(b)
	tlog(b, "every meta-job running (squeue) %.1f s after the release", up.Sub(release).Seconds())
	ids := harness.JobIDs(f.dir)
	for deadline := time.Now().Add(5 * time.Minute); farms(ids) < n && time.Now().Before(deadline); time.Sleep(5 * time.Second) {
	}
	jm, busy := measureJobs(ids)
	pss, _ := jm.perJob()
	tlog(b, "memory at N, %.0f s after the release (%d running a case): %s", time.Since(release).Seconds(), len(busy), jm)
	b.ReportMetric(mib(pss), "pss-MiB/job")
	gone, done := m.waitGoneFor(b, c.timeout)
	b.StopTimer()
	if !done {
		b.Errorf("the run had not ended %s after the release (FARM_RIG_THOUSAND_TIMEOUT_MIN): its jobs were cancelled; the figures are of what ran until then", c.timeout)
		cancelPartition(b)
		gone = time.Now()
	}
	m.snap()
	rec := harness.ReadRecords(b, f.dir)
	if done {
		checkManyExact(b, rec, cases)
	}
	for id, k := range rec.Starts {
		if k > 1 {
			b.Errorf("case %d started %d times", id, k)
		}
	}
	ranOnce(b, f.local, cases, done)
	tlog(b, "cases: %d started, %d ended (%d of them interrupted), of %d", len(rec.Starts), len(rec.Ends), len(rec.Interrupts), cases)
	fig := runFigures(b, f, rec, n)
	fig.report(b, c, m, n, cases, [4]time.Time{start, release, gone, time.Now().Add(time.Second)})
	_, _, _ = m.state(b)
	tlog(b, "memory: at most %.1f GiB used during the run (MemTotal - MemAvailable)", gib(m.peak))
}

// runFig is what the run's records say.
type runFig struct {
	caseSecs, first, last float64 // Unix seconds
	toFirst               []float64
	perHost               map[string]int
	working               int
	allFirst, firstOut    float64 // every meta-job's first case started; the first ran out of cases
	spans                 []span  // every case: start (Unix), seconds
}

func runFigures(b *testing.B, f thousandFarm, rec harness.Records, n int) runFig {
	fig := runFig{first: rec.First, last: rec.Last, perHost: map[string]int{}, firstOut: math.Inf(1)}
	stamps := jobStamps(b, f.local)
	headers := 0
	for _, sf := range readStatusFiles(b, f.dir) {
		for _, h := range sf.hosts {
			fig.perHost[h]++
			headers++
		}
		fig.caseSecs += sf.caseSecs
		fig.spans = append(fig.spans, sf.spans...)
		if sf.first == 0 {
			continue
		}
		fig.working++
		fig.allFirst = max(fig.allFirst, sf.first)
		fig.firstOut = min(fig.firstOut, sf.lastEnd)
		if at, ok := stamps[sf.job]; ok {
			fig.toFirst = append(fig.toFirst, sf.first-at)
		} else {
			b.Errorf("meta-job %s: no start time from its job script", sf.job)
		}
	}
	sort.Float64s(fig.toFirst)
	if headers != n {
		b.Errorf("%d status files with a header (%v); want one per meta-job, %d", headers, fig.perHost, n)
	}
	return fig
}

// report logs the run's figures and the bricks' operations by phase; at
// holds the submit's start, the release, the last job gone, and a moment
// after the last snapshot.
func (fig runFig) report(b *testing.B, c thousandCfg, m *monitor, n, cases int, at [4]time.Time) {
	wall := fig.last - fig.first
	eff := fig.caseSecs / (float64(n) * wall)
	end := at[2].Sub(unixTime(fig.last)).Seconds()
	q := func(p float64) float64 { return quantile(fig.toFirst, p) }
	tlog(b, "run: %d meta-jobs (per node %v), %d cases (%d a meta-job, sleep %d–%d s, longest first), load average %s", n, fig.perHost, cases, c.perJob, c.minSecs, c.maxSecs, loadAvg())
	tlog(b, "  efficiency %.3f: the cases' %.0f s ÷ (%d × %.1f s, the first case's start to the last's end); %d meta-jobs ran cases", eff, fig.caseSecs, n, wall, fig.working)
	tlog(b, "  a meta-job's start to its first case: p50 %.2f s, p99 %.2f s, max %.2f s; the last first case %.1f s after the release", q(0.5), q(0.99), q(1), unixTime(fig.allFirst).Sub(at[1]).Seconds())
	tlog(b, "  the last case's end to the last meta-job gone (squeue every second): %.1f s", end)
	b.ReportMetric(eff, "eff")
	b.ReportMetric(q(0.5), "first-p50-s")
	b.ReportMetric(q(0.99), "first-p99-s")
	b.ReportMetric(q(1), "first-max-s")
	b.ReportMetric(end, "end-s")
	steady := unixTime(fig.allFirst)
	if !math.IsInf(fig.firstOut, 1) {
		steady = unixTime(max(fig.allFirst, fig.firstOut))
	}
	phases := []struct {
		name     string
		from, to time.Time
	}{
		{"submit", at[0], at[1]}, {"start-up", at[1], unixTime(fig.allFirst)},
		{"steady", unixTime(fig.allFirst), steady}, {"end", steady, at[3]},
	}
	var total int64
	for _, ph := range phases {
		fops, secs := m.between(ph.from, ph.to)
		started, ended := fig.casesIn(ph.from, ph.to)
		per := started
		if ph.name == "end" {
			per = ended
		}
		total += sumFops(fops)
		tlog(b, "  %s: %.1f s (%s–%s UTC; snapshots %.0f s), %d cases started, %d ended; bricks' ops %s", ph.name, ph.to.Sub(ph.from).Seconds(),
			ph.from.UTC().Format("15:04:05"), ph.to.UTC().Format("15:04:05"), secs, started, ended, fopsLine(fops, secs, per))
		if secs > 0 {
			b.ReportMetric(float64(sumFops(fops))/secs, ph.name+"-fops/s")
		}
	}
	tlog(b, "  the whole run: %d ops, %.2f a case", total, float64(total)/float64(cases))
	b.ReportMetric(float64(total)/float64(cases), "fops/case")
}

// casesIn counts the cases that started, and that ended, in [from, to).
func (fig runFig) casesIn(from, to time.Time) (started, ended int) {
	in := func(s float64) bool { t := unixTime(s); return !t.Before(from) && t.Before(to) }
	for _, sp := range fig.spans {
		if in(sp.start) {
			started++
		}
		if in(sp.start + sp.secs) {
			ended++
		}
	}
	return started, ended
}

// countOutputs is the number of the jobs' output files (OUTPUT/slurm-*.out)
// that hold s.
func countOutputs(dir, s string) int {
	files, _ := filepath.Glob(filepath.Join(dir, "OUTPUT", "slurm-*.out"))
	n := 0
	for _, p := range files {
		if bs, err := os.ReadFile(p); err == nil && strings.Contains(string(bs), s) {
			n++
		}
	}
	return n
}

// thousandIdle is BenchmarkRigThousand's idle phase: n meta-jobs waiting
// for cases (WAIT_FOR_CASES) for c.idle.
func thousandIdle(b *testing.B, c thousandCfg, n int) {
	b.StopTimer()
	f := newThousandFarm(b, c, "idle", func(string) []string { return []string{"true"} }, map[string]string{"WAIT_FOR_CASES": "3600"})
	m := startMonitor(b, c, n)
	_, release := f.submit(b, c, m, n)
	up := m.waitAllUp(b)
	waiting := 0
	polled := time.Time{}
	m.waitUntil(b, 10*time.Minute, "every meta-job to wait for cases", func() bool {
		if time.Since(polled) < 5*time.Second {
			return false // (each look reads every job's output)
		}
		polled = time.Now()
		waiting = countOutputs(f.dir, "(WAIT_FOR_CASES)")
		return waiting >= n
	})
	tlog(b, "idle: every meta-job running %.1f s and waiting for cases %.1f s after the release", up.Sub(release).Seconds(), time.Since(release).Seconds())
	m.snap()
	from := time.Now()
	b.StartTimer()
	time.Sleep(c.idle)
	b.StopTimer()
	m.snap()
	to := time.Now()
	_, _, active := m.state(b)
	if active != n {
		b.Errorf("%d meta-jobs left at the end of the idle phase; want %d", active, n)
	}
	fops, secs := m.between(from, to)
	tlog(b, "idle: %d meta-jobs in WAIT_FOR_CASES, %s–%s UTC (%.1f s), load average %s: bricks' ops %s", n, from.UTC().Format("15:04:05"), to.UTC().Format("15:04:05"), secs, loadAvg(), fopsLine(fops, secs, 0))
	b.ReportMetric(float64(sumFops(fops))/secs, "idle-fops/s")
	b.ReportMetric(float64(sumFops(fops))/secs/float64(n)*60, "idle-fops/job/min")
	cancelPartition(b)
}

// thousandWarden is BenchmarkRigThousand's warden phase: n meta-jobs, n
// cases, one short and the others long, so that one job at least finds
// none and stays as the run's warden while the others run theirs; then
// one of these is killed.
func thousandWarden(b *testing.B, c thousandCfg, n int) {
	b.StopTimer()
	// A case of a second first: its job claims again, and one job (it, or
	// the last to claim) finds no case left.
	table := append([]string{"sleep 1"}, harness.Repeat(fmt.Sprintf("sleep %d", c.wardenSecs), n-1)...)
	f := newThousandFarm(b, c, "warden", func(string) []string { return table }, nil)
	m := startMonitor(b, c, n)
	_, release := f.submit(b, c, m, n)
	m.waitAllUp(b)
	rescues := filepath.Join(f.dir, "MISC", "rescue.1")
	last, since := -1, time.Now()
	m.waitUntil(b, 10*time.Minute, "the run's warden, and the meta-jobs without a case gone", func() bool {
		_, _, active := m.state(b)
		if active != last {
			last, since = active, time.Now()
		}
		_, err := os.Stat(filepath.Join(rescues, "warden.1"))
		return err == nil && time.Since(since) >= 10*time.Second
	})
	_, busy := measureJobs(harness.JobIDs(f.dir))
	tlog(b, "warden: the warden marked and %d meta-jobs left, %d of them running a case, %.1f s after the release", last, len(busy), time.Since(release).Seconds())
	if len(busy) == 0 {
		b.Fatal("no meta-job runs a case")
	}
	m.snap()
	from := time.Now()
	b.StartTimer()
	time.Sleep(c.watch)
	m.snap()
	to := time.Now()
	fops, secs := m.between(from, to)
	tlog(b, "warden: watching %d meta-jobs, %s–%s UTC (%.1f s), load average %s: bricks' ops %s", last-1, from.UTC().Format("15:04:05"), to.UTC().Format("15:04:05"), secs, loadAvg(), fopsLine(fops, secs, 0))
	b.ReportMetric(float64(sumFops(fops))/secs, "watch-fops/s")
	victim := busy[0]
	killJob(b, victim)
	killed := time.Now()
	m.waitUntil(b, 5*time.Minute, "the rescue of the killed meta-job", func() bool {
		_, err := os.Stat(filepath.Join(rescues, "status."+victim))
		return err == nil
	})
	marked := time.Now()
	time.Sleep(15 * time.Second) // the rescuer's wait (10 s) and its start
	m.snap()
	b.StopTimer()
	end := time.Now()
	fops, secs = m.between(killed, end)
	var at float64
	var by string
	m.waitUntil(b, 2*time.Minute, "the rescued case's start", func() bool {
		at, by = rescueStart(b, f.dir, victim)
		return at > 0
	})
	tlog(b, "warden: meta-job %s killed at %s UTC; its rescue marked %.1f s later, its case started again by meta-job %s %.1f s after the kill", victim, killed.UTC().Format("15:04:05"), marked.Sub(killed).Seconds(), by, unixTime(at).Sub(killed).Seconds())
	tlog(b, "warden: the kill to %.0f s after the mark, %s–%s UTC (%.1f s): bricks' ops %s", end.Sub(marked).Seconds(), killed.UTC().Format("15:04:05"), end.UTC().Format("15:04:05"), secs, fopsLine(fops, secs, 0))
	b.ReportMetric(unixTime(at).Sub(killed).Seconds(), "rescue-s")
	b.ReportMetric(float64(sumFops(fops))/secs, "rescue-fops/s")
	cancelPartition(b)
}

// killJob kills every process of the job id but its slurmstepd, with
// SIGKILL: the meta-job dies as the out-of-memory killer would kill it.
func killJob(b *testing.B, id string) {
	procs, stepds := procTable()
	stepd, ok := stepds[id]
	if !ok {
		b.Fatalf("meta-job %s: no slurmstepd", id)
	}
	for _, p := range descendants(procs, stepd) {
		syscall.Kill(p, syscall.SIGKILL)
	}
}

// rescueStart is the start (Unix) of the first case rescued from the
// meta-job victim to start (an S record from=status.VICTIM: the case it
// ran, why=rescue, or one it had claimed), and the job that started it; 0
// if none is recorded.
func rescueStart(b *testing.B, dir, victim string) (float64, string) {
	files, _ := filepath.Glob(filepath.Join(dir, "STATUSES", "status.*"))
	for _, p := range files {
		bs, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		for _, l := range strings.Split(string(bs), "\n") {
			f := strings.Fields(l)
			if len(f) >= 3 && f[0] == "S" && strings.Contains(l, " from=status."+victim) {
				at, _ := strconv.ParseFloat(f[2], 64)
				return at, strings.TrimPrefix(filepath.Base(p), "status.")
			}
		}
	}
	return 0, ""
}
