package integration

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/farm-hpc/farm/integration/harness"
)

// BenchmarkClaimOps counts, with strace, the operations on the farm
// directory per claimed case, for 1, 2 and 8 meta-jobs (claimers) on the
// local backend: a farm of trivial cases (true, RUN_DIRS=0, the default
// single_case.sh without its cd line), from 'farm submit' to the end of the
// last meta-job. The operations are split by who makes them:
//
//	metajob  the farm meta-job processes: claims, status records, the
//	         copy of single_case.sh, the cases' output copier
//	worker   the bash processes that run the cases (the forked subshells
//	         that source single_case.sh, and what it runs)
//	other    the supervisors, job scripts, farm submit and farm wait
//
// and reported as meta-ops/case (every system call that names a file of the
// farm, by path or by descriptor, except reads and writes of data and calls
// that never reach a file server, such as fcntl and lseek) and data-ops/case
// (read, write and their variants). A second run of the same
// farm without strace gives claims/s.
//
// FARM_OPS_DIR puts the farms under another directory (a network
// filesystem's mount, e.g. the rig's /mnt/farm-cluster/coherent); FARM_OPS_BIN
// measures another farm binary (an older version, for before/after figures:
// its CLI must take 'submit N --backend local' and 'wait'); FARM_OPS_CASES
// sets the number of cases (2,000), FARM_OPS_JOBS the numbers of meta-jobs
// (a comma-separated list; 1,2,8).
//
//	go test -run '^$' -bench ClaimOps -benchtime 1x ./integration/   (make bench-ops)
func BenchmarkClaimOps(b *testing.B) {
	if _, err := exec.LookPath("strace"); err != nil {
		b.Skip("strace is not installed (apt-get install strace)")
	}
	cases := 2000
	if v, err := strconv.Atoi(os.Getenv("FARM_OPS_CASES")); err == nil && v > 0 {
		cases = v
	}
	farmBin := os.Getenv("FARM_OPS_BIN")
	if farmBin == "" {
		farmBin = harness.Bin(b)
	}
	jobList := []int{1, 2, 8}
	if v := os.Getenv("FARM_OPS_JOBS"); v != "" {
		jobList = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				b.Fatalf("FARM_OPS_JOBS=%q: want numbers of meta-jobs, as 1,2,8", v)
			}
			jobList = append(jobList, n)
		}
	}
	for _, jobs := range jobList {
		b.Run(fmt.Sprintf("claimers=%d", jobs), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				opsRun(b, farmBin, jobs, cases)
			}
		})
	}
}

func opsFarm(b *testing.B, farmBin string, cases int) string {
	b.Helper()
	base := os.Getenv("FARM_OPS_DIR")
	if base == "" {
		base = b.TempDir()
	}
	parent, err := os.MkdirTemp(base, "ops-")
	if err != nil {
		b.Fatal(err)
	}
	if os.Getenv("FARM_OPS_KEEP") == "" {
		b.Cleanup(func() { os.RemoveAll(parent) })
	}
	dir := filepath.Join(parent, "farm")
	if out, err := exec.Command(farmBin, "init", dir).CombinedOutput(); err != nil {
		b.Fatalf("farm init: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "table.dat"), []byte(strings.Repeat("true\n", cases)), 0o644); err != nil {
		b.Fatal(err)
	}
	for _, e := range []struct{ file, old, new string }{
		{"config", "\nRUN_DIRS=1\n", "\nRUN_DIRS=0\n"},
		{"single_case.sh", `cd "RUN$ID" 2>/dev/null || { mkdir -p "RUN$ID" && cd "RUN$ID"; } || exit 1`, ""},
		{"job_script.sh", "", ""},
	} {
		p := filepath.Join(dir, e.file)
		c, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		s := string(c)
		if e.file == "job_script.sh" {
			s = regexp.MustCompile(`(?m)^#SBATCH -t .*$`).ReplaceAllString(s, "#SBATCH -t 0-01:00")
		} else if !strings.Contains(s, e.old) {
			b.Fatalf("%s has no %q", p, e.old)
		}
		s = strings.Replace(s, e.old, e.new, 1)
		if err := os.WriteFile(p, []byte(s), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	return dir
}

func opsRun(b *testing.B, farmBin string, jobs, cases int) {
	b.StopTimer()
	// The strace run: operations per case.
	dir := opsFarm(b, farmBin, cases)
	trace := filepath.Join(b.TempDir(), "trace")
	if d := os.Getenv("FARM_OPS_KEEP"); d != "" {
		trace = filepath.Join(d, fmt.Sprintf("trace.%d", jobs))
	}
	// Only file and descriptor calls are traced (and process creation, to
	// tell who is who): with --seccomp-bpf the others run at full speed,
	// so that tracing slows the farm less (slower cases mean smaller
	// batches, and more claimers racing).
	submit := exec.Command("strace", "-f", "--seccomp-bpf", "-e", "trace=%file,%desc,clone,clone3,fork,vfork,execve",
		"-qq", "-y", "-s", "64", "-o", trace, farmBin, "submit", strconv.Itoa(jobs), "--backend", "local")
	submit.Dir = dir
	// Every meta-job runs at once (the package's default is 8 slots).
	slots := fmt.Sprintf("FARM_LOCAL_SLOTS=%d", max(jobs, 8))
	submit.Env = append(os.Environ(), slots)
	if out, err := submit.CombinedOutput(); err != nil {
		b.Fatalf("strace farm submit: %v\n%s", err, out)
	}
	// strace -f follows the detached supervisors too: wait for them.
	wait := exec.Command(farmBin, "wait", "--timeout", "30m")
	wait.Dir = dir
	if out, err := wait.CombinedOutput(); err != nil {
		b.Fatalf("farm wait: %v\n%s", err, out)
	}
	harness.WaitFor(b, 60e9, "strace to finish", func() bool { return !straceRunning(trace) })
	counts := countOps(b, trace, dir)
	checkOnce(b, dir, cases)

	// The run without strace: claims per second.
	dir = opsFarm(b, farmBin, cases)
	b.StartTimer()
	for _, args := range [][]string{{"submit", strconv.Itoa(jobs), "--backend", "local"}, {"wait", "--timeout", "30m"}} {
		cmd := exec.Command(farmBin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), slots)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("farm %v: %v\n%s", args, err, out)
		}
	}
	b.StopTimer()
	rec := checkOnce(b, dir, cases)

	n := float64(cases)
	b.ReportMetric(n/(rec.Last-rec.First), "claims/s")
	b.ReportMetric(float64(counts["metajob"].meta)/n, "metajob-meta-ops/case")
	b.ReportMetric(float64(counts["metajob"].data)/n, "metajob-data-ops/case")
	b.ReportMetric(float64(counts["worker"].meta)/n, "worker-meta-ops/case")
	b.ReportMetric(float64(counts["worker"].data)/n, "worker-data-ops/case")
	b.ReportMetric(float64(counts["other"].meta+counts["other"].data)/n, "other-ops/case")
	for _, who := range []string{"metajob", "worker"} {
		b.Logf("%d claimers, %s, per case: %s", jobs, who, counts[who].top(n, 8))
	}
	b.Logf("%d claimers, meta-job's calls per case by file: %s", jobs, counts["metajob"].topFiles(n, 8))
}

// checkOnce checks that every case ran once and returns the records.
func checkOnce(b *testing.B, dir string, cases int) harness.Records {
	b.Helper()
	rec := harness.ReadRecords(b, dir)
	for id := int64(1); id <= int64(cases); id++ {
		if rec.Starts[id] != 1 || rec.Ends[id] != 1 {
			b.Fatalf("case %d: %d starts, %d ends; want one run", id, rec.Starts[id], rec.Ends[id])
		}
	}
	return rec
}

// straceRunning reports whether an strace writing trace still runs.
func straceRunning(trace string) bool {
	out, _ := exec.Command("pgrep", "-f", "strace .*-o "+regexp.QuoteMeta(trace)).Output()
	return len(strings.TrimSpace(string(out))) > 0
}

type opCount struct {
	meta, data int
	by         map[string]int
	byFile     map[string]int // calls (meta and data) by fileKind
}

// topFiles is top's breakdown by fileKind.
func (c opCount) topFiles(n float64, k int) string {
	return opCount{by: c.byFile}.top(n, k)
}

// fileKind names the kind of farm file an strace line's call touches, by
// the names farm gives its files (layout): a chain's slots, contents and
// marks, a lane's files, the status files, the run's table, and so on.
func fileKind(line string) string {
	for _, k := range fileKinds {
		if k.re.MatchString(line) {
			return k.kind
		}
	}
	return "other"
}

var fileKinds = []struct {
	re   *regexp.Regexp
	kind string
}{
	{regexp.MustCompile(`/(claims|lanes)\.[^/"<>]*/(\d+/)?[0-9]+(/|>, ")s\.\d+`), "slot s.N"},
	{regexp.MustCompile(`/(claims|lanes)\.[^/"<>]*/(\d+/)?[0-9]+(/|>, ")g\.\d+`), "content g.N"},
	{regexp.MustCompile(`/(claims|lanes)\.[^/"<>]*/(\d+/)?[0-9]+(/|>, ")c\.\d+`), "mark c.N"},
	{regexp.MustCompile(`/(claims|lanes)\.[^/"<>]*/(\d+/)?[0-9]+(/|>, ")tomb`), "tomb"},
	{regexp.MustCompile(`/lanes\.[^/"<>]*(/|>, ")(index|end|x\.\d+)`), "lane index, ends"},
	{regexp.MustCompile(`/MISC/cutoff`), "dt_cutoff"},
	{regexp.MustCompile(`/(claims|lanes)\.`), "chain directories"},
	{regexp.MustCompile(`/STATUSES`), "status files"},
	{regexp.MustCompile(`/table\.run`), "run table"},
	{regexp.MustCompile(`/MISC/chain`), "MISC/chain"},
	{regexp.MustCompile(`/MISC/local`), "local engine"},
	{regexp.MustCompile(`/OUTPUT`), "job output"},
	{regexp.MustCompile(`/MISC/rescue\.`), "rescue marks"},
	{regexp.MustCompile(`/MISC/jobs`), "job records"},
}

func (c opCount) top(n float64, k int) string {
	var names []string
	for s := range c.by {
		names = append(names, s)
	}
	sort.Slice(names, func(i, j int) bool { return c.by[names[i]] > c.by[names[j]] })
	var out []string
	for _, s := range names[:min(k, len(names))] {
		out = append(out, fmt.Sprintf("%s %.2f", s, float64(c.by[s])/n))
	}
	return strings.Join(out, ", ")
}

var (
	straceLine = regexp.MustCompile(`^(\d+) +(?:<\.\.\. )?([a-z0-9_]+)(?:\(| resumed>)`)
	childPID   = regexp.MustCompile(`^(\d+) +(?:<\.\.\. )?(?:clone3?|fork|vfork)(?:\(| resumed>).*= (\d+)`)
	execArgs   = regexp.MustCompile(`^(\d+) +execve\("[^"]*", \[([^\]]*)\]`)
	dataCalls  = map[string]bool{"read": true, "write": true, "pread64": true, "pwrite64": true, "readv": true, "writev": true, "preadv": true, "pwritev": true}
	// Calls on a descriptor that never reach a file server.
	localCalls = map[string]bool{"fcntl": true, "lseek": true, "ioctl": true, "dup": true, "dup2": true, "dup3": true, "epoll_ctl": true, "poll": true, "ppoll": true}
)

// countOps reads an strace -f -y log and counts the system calls that name
// a file under dir, by who made them. A process is what it last executed
// (its parent's role until it executes something): 'farm metajob' is the
// meta-job; what a meta-job executes (bash, and the cases' commands) is the
// worker; everything else is other. strace may log a child's first calls
// before its parent's clone returns, so the log is read twice: first for
// parents and executions, then to count.
func countOps(b *testing.B, trace, dir string) map[string]*opCount {
	b.Helper()
	procs := readTraceProcs(b, trace)
	counts := map[string]*opCount{}
	for _, w := range []string{"metajob", "worker", "other"} {
		counts[w] = &opCount{by: map[string]int{}, byFile: map[string]int{}}
	}
	fdcwd := regexp.MustCompile(`AT_FDCWD<[^>]*>`)
	scanTrace(b, trace, func(n int, line string) {
		if strings.Contains(line, " resumed>") || strings.Contains(line, "execve(") {
			return // a call is counted where it starts
		}
		if !strings.Contains(fdcwd.ReplaceAllString(line, "AT_FDCWD"), dir) {
			return
		}
		m := straceLine.FindStringSubmatch(line)
		if m == nil || localCalls[m[2]] {
			return
		}
		c := counts[procs.role(m[1], n, 0)]
		c.by[m[2]]++
		c.byFile[fileKind(line)]++
		if dataCalls[m[2]] {
			c.data++
		} else {
			c.meta++
		}
	})
	return counts
}

// scanTrace calls fn with each line of the file trace, and its number
// (from 0).
func scanTrace(b *testing.B, trace string, fn func(n int, line string)) {
	b.Helper()
	f, err := os.Open(trace)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 0; sc.Scan(); n++ {
		fn(n, sc.Text())
	}
	if err := sc.Err(); err != nil {
		b.Fatal(err)
	}
}

// traceProcs are the processes of an strace -f log: the parent of each,
// and what each executed, on which line of the log.
type traceProcs struct {
	parentOf map[string]string
	execs    map[string][]traceExec
}

// traceExec is an execution: its line in the log, and its arguments.
type traceExec struct {
	line int
	args string
}

// readTraceProcs reads the processes of the strace -f log trace.
func readTraceProcs(b *testing.B, trace string) *traceProcs {
	b.Helper()
	p := &traceProcs{parentOf: map[string]string{}, execs: map[string][]traceExec{}}
	scanTrace(b, trace, func(n int, line string) {
		if m := childPID.FindStringSubmatch(line); m != nil {
			p.parentOf[m[2]] = m[1]
		}
		if m := execArgs.FindStringSubmatch(line); m != nil {
			p.execs[m[1]] = append(p.execs[m[1]], traceExec{n, m[2]})
		}
	})
	return p
}

// role is what process pid was at line n of the log (see countOps):
// "metajob", "worker" or "other". depth is how many parents were asked.
func (p *traceProcs) role(pid string, n, depth int) string {
	if depth > 64 {
		return "other"
	}
	var last *traceExec
	for i := range p.execs[pid] {
		if p.execs[pid][i].line <= n {
			last = &p.execs[pid][i]
		}
	}
	parent := "other"
	if pp, ok := p.parentOf[pid]; ok {
		parent = p.role(pp, n, depth+1)
	}
	switch {
	case last == nil:
		return parent
	case strings.HasSuffix(last.args, `, "metajob"`) && strings.Contains(strings.SplitN(last.args, ",", 2)[0], "farm"):
		return "metajob"
	case parent == "metajob" || parent == "worker":
		return "worker" // bash, and what the cases run
	}
	return "other"
}
