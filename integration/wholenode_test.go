package integration

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/farm-hpc/farm/integration/harness"
)

// WHOLE_NODE mode (issue 13): each meta-job runs NWHOLE claim loops at
// once, all claiming from the one table.

// span is one case's run in one job's status file.
type span struct {
	id         int64
	start, end float64
}

// jobSpans reads the E records of every status file of the farm in dir:
// the cases each job ran, with their start and end.
func jobSpans(t *testing.T, dir string) map[string][]span {
	t.Helper()
	out := map[string][]span{}
	files, _ := filepath.Glob(filepath.Join(dir, "STATUSES", "status.*"))
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			var kind, host string
			var s span
			var st int
			var secs float64
			if n, _ := fmt.Sscan(sc.Text(), &kind, &s.id, &st, &s.start, &secs, &host); n >= 5 && kind == "E" {
				s.end = s.start + secs
				out[filepath.Base(f)] = append(out[filepath.Base(f)], s)
			}
		}
		fh.Close()
	}
	return out
}

// overlapAt counts the spans running at time x. Times are recorded to the
// millisecond: a case that ends as the next of its loop starts may seem to
// overlap it by as much; a span's last 2 ms do not count.
func overlapAt(spans []span, x float64) int {
	n := 0
	for _, s := range spans {
		if s.start <= x && x < s.end-0.002 {
			n++
		}
	}
	return n
}

// checkPacking checks that no job ran more than slots cases at once, and
// that while the run had cases left to start, each job ran slots at once:
// measured in the middle of each of its cases that started more than a
// case's length before the run's last start.
func checkPacking(t *testing.T, dir string, slots int, caseSecs float64) {
	t.Helper()
	byJob := jobSpans(t, dir)
	lastStart := 0.0
	for _, spans := range byJob {
		for _, s := range spans {
			lastStart = max(lastStart, s.start)
		}
	}
	for job, spans := range byJob {
		sort.Slice(spans, func(i, j int) bool { return spans[i].start < spans[j].start })
		most, low := 0, 0
		for _, s := range spans {
			for _, x := range []float64{s.start, s.start + caseSecs/2} {
				if n := overlapAt(spans, x); n > slots {
					for _, o := range spans {
						if o.start <= x && x < o.end-0.002 {
							t.Logf("%s: at %.3f case %d ran from %.3f to %.3f", job, x, o.id, o.start, o.end)
						}
					}
				}
				most = max(most, overlapAt(spans, x))
			}
			if s.start+caseSecs < lastStart-0.2 {
				if n := overlapAt(spans, s.start+caseSecs/2); n < slots {
					low++
					t.Logf("%s: %d cases running at %.3f (case %d's middle), want %d", job, n, s.start+caseSecs/2, s.id, slots)
				}
			}
		}
		if most > slots {
			t.Errorf("%s ran %d cases at once, more than NWHOLE=%d", job, most, slots)
		}
		if low > 0 {
			t.Errorf("%s ran fewer than NWHOLE=%d cases at once at %d moments while cases were left", job, slots, low)
		}
		t.Logf("%s: %d cases, at most %d at once", job, len(spans), most)
	}
}

// wholeNodeFarm makes a farm in WHOLE_NODE mode with NWHOLE=nwhole, over
// n cases that each sleep secs and write their loop and CPUs to their
// output.
func wholeNodeFarm(t *testing.T, n, nwhole int, secs string) string {
	t.Helper()
	var table []string
	for i := 0; i < n; i++ {
		table = append(table, "sleep "+secs+"; echo loop=$FARM_LOOP omp=$OMP_NUM_THREADS")
	}
	dir := newFarm(t, table, "0-00:10")
	setConfig(t, dir, "OUTPUT", "stream") // the cases' lines are read from the jobs' output
	appendFile(t, dir, "config", fmt.Sprintf("WHOLE_NODE=1\nNWHOLE=%d\n", nwhole))
	return dir
}

// TestWholeNodeLocal: NWHOLE=4 on 40 cases of 1 s, two meta-jobs on the
// local backend: each runs them 4 at a time, every case once, in loops
// 1-4.
func TestWholeNodeLocal(t *testing.T) {
	t.Parallel()
	dir := wholeNodeFarm(t, 40, 4, "1")
	mustFarm(t, dir, "submit", "2", "--backend", "local")
	if out := mustFarm(t, dir, "wait", "--timeout", "2m"); !strings.Contains(out, "40 cases: 40 succeeded") {
		t.Fatalf("wait said %q", out)
	}
	rec := readRecords(t, dir)
	for id := int64(1); id <= 40; id++ {
		if rec.Starts[id] != 1 || rec.Ends[id] != 1 {
			t.Errorf("case %d: %d starts, %d ends", id, rec.Starts[id], rec.Ends[id])
		}
	}
	checkPacking(t, dir, 4, 1)
	outs, _ := filepath.Glob(filepath.Join(dir, "OUTPUT", "*.out"))
	loops := map[string]bool{}
	for _, o := range outs {
		b, _ := os.ReadFile(o)
		for _, f := range strings.Fields(string(b)) {
			if strings.HasPrefix(f, "loop=") {
				loops[f] = true
			}
		}
		if !strings.Contains(string(b), "farm: WHOLE_NODE: 4 loops") {
			t.Errorf("%s does not say it runs 4 loops", o)
		}
	}
	if len(loops) != 4 {
		t.Errorf("cases ran in loops %v, want loop=1 to loop=4", loops)
	}
}

// TestWholeNodeSimpleMode: in WHOLE_NODE mode, submit -1 submits one job
// per NWHOLE cases (rounded up), as META does, each running its NWHOLE
// cases at once.
func TestWholeNodeSimpleMode(t *testing.T) {
	t.Parallel()
	dir := wholeNodeFarm(t, 10, 4, "0.5")
	out := mustFarm(t, dir, "submit", "-1", "--backend", "local")
	if !strings.Contains(out, "Submitted 3 jobs (SIMPLE mode, 4 cases each at once)") {
		t.Errorf("submit -1 said %q; want 3 jobs for 10 cases with NWHOLE=4", out)
	}
	if out := mustFarm(t, dir, "wait", "--timeout", "2m"); !strings.Contains(out, "10 cases: 10 succeeded") {
		t.Errorf("wait said %q", out)
	}
	checkPacking(t, dir, 4, 0.5)
}

// TestWholeNodeKill9: kill -9 of a WHOLE_NODE meta-job (its whole process
// group, as a node loss) while its 4 loops run cases: each case it was
// running is interrupted, and after a resubmit every case has succeeded,
// none started twice in a run.
func TestWholeNodeKill9(t *testing.T) {
	t.Parallel()
	dir := wholeNodeFarm(t, 24, 4, "2")
	mustFarm(t, dir, "submit", "1", "--backend", "local")
	waitFor(t, time.Minute, "4 cases running", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "STATUSES", "status.1"))
		return strings.Count(string(b), "\nS ") >= 6 // a first round ended, the second started
	})
	pgid := jobPGID(t, dir, "1")
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The cases its loops were running: started, not ended, by the killed
	// job's own file (one loop may have been between two cases: 3 or 4).
	b, _ := os.ReadFile(filepath.Join(dir, "STATUSES", "status.1"))
	running := strings.Count(string(b), "\nS ") - strings.Count(string(b), "\nE ")
	farmIn(t, dir, nil, "wait", "--timeout", "1m")
	rows := statusJSON(t, dir)
	interrupted := 0
	for _, r := range rows {
		if r.State == "interrupted" {
			interrupted++
		}
		if r.State == "running" {
			t.Errorf("case %d still running after its job was killed", r.ID)
		}
	}
	if interrupted != running || running < 3 || running > 4 {
		t.Errorf("%d cases interrupted by the kill, want the %d the loops were running (3 or 4) (Status: %v)", interrupted, running, rows)
	}
	mustFarm(t, dir, "resubmit", "2", "--backend", "local")
	if out := mustFarm(t, dir, "wait", "--timeout", "2m"); !strings.Contains(out, "24 cases: 24 succeeded") {
		t.Errorf("wait after the resubmit said %q", out)
	}
	for run, r := range harness.ReadRunRecords(t, dir) {
		for id, n := range r.Starts {
			if n > 1 {
				t.Errorf("case %d started %d times in run %d", id, n, run)
			}
		}
	}
}

// TestWholeNodeSlurm: the same on the real Slurm, the job script asking
// for 4 CPUs a job (as a WHOLE_NODE job script asks for its node's cores):
// two meta-jobs run 40 cases of 1 s, 4 at a time each.
func TestWholeNodeSlurm(t *testing.T) {
	needSlurm(t)
	t.Parallel()
	var table []string
	for i := 0; i < 40; i++ {
		table = append(table, "sleep 1")
	}
	dir := slurmFarm(t, table, "0-00:10")
	appendFile(t, dir, "config", "WHOLE_NODE=1\nNWHOLE=4\n")
	askCPUs(t, dir, 4)
	mustFarm(t, dir, "submit", "2", "--backend", "slurm")
	if out := mustFarm(t, dir, "wait", "--timeout", "3m"); !strings.Contains(out, "40 cases: 40 succeeded") {
		t.Fatalf("wait said %q", out)
	}
	checkPacking(t, dir, 4, 1)
}

// BenchmarkWholeNode runs one WHOLE_NODE meta-job with NWHOLE = 2 × this
// machine's cores over 4,000 trivial cases through the default
// single_case.sh on the local backend, and reports cases per second from
// the first case's start to the last case's end; beside it, the same farm
// with WHOLE_NODE off (one loop), for scale.
func BenchmarkWholeNode(b *testing.B) {
	const n = 4000
	nwhole := 2 * runtime.NumCPU()
	for _, mode := range []struct {
		name   string
		config string
	}{
		{fmt.Sprintf("NWHOLE=%d", nwhole), fmt.Sprintf("WHOLE_NODE=1\nNWHOLE=%d\n", nwhole)},
		{"one-loop", ""},
	} {
		b.Run(mode.name, func(b *testing.B) { benchmarkCases(b, n, 1, mode.config) })
	}
}

// TestWholeNodeFastFailurePerLoop: fast-failure protection stops a loop,
// not the job: the loops whose first N_failed_max cases fail fast stop,
// and the others run the rest; only when every loop stopped so
// does the job end with META's message (and exit non-zero).
func TestWholeNodeFastFailurePerLoop(t *testing.T) {
	t.Parallel()
	t.Run("some", func(t *testing.T) {
		t.Parallel()
		table := []string{"exit 2", "exit 2"}
		for i := 0; i < 30; i++ {
			table = append(table, "sleep 0.1")
		}
		dir := newFarm(t, table, "0-00:10")
		// A loop whose first case fails fast stops: one or two of them.
		setConfig(t, dir, "N_failed_max", "1")
		appendFile(t, dir, "config", "WHOLE_NODE=1\nNWHOLE=3\n")
		mustFarm(t, dir, "submit", "1", "--backend", "local")
		if out := farmIn(t, dir, nil, "wait", "--timeout", "1m").Out; !strings.Contains(out, "32 cases: 30 succeeded, 2 failed, 0 interrupted, 0 never ran") {
			t.Errorf("wait said %q: a loop that stopped must not stop the others", out)
		}
	})
	t.Run("all", func(t *testing.T) {
		t.Parallel()
		dir := newFarm(t, repeat("exit 2", 40), "0-00:10")
		setConfig(t, dir, "N_failed_max", "2")
		appendFile(t, dir, "config", "WHOLE_NODE=1\nNWHOLE=3\n")
		mustFarm(t, dir, "submit", "1", "--backend", "local")
		if out := farmIn(t, dir, nil, "wait", "--timeout", "1m").Out; !strings.Contains(out, "40 cases: 0 succeeded, 6 failed, 0 interrupted, 34 never ran") {
			t.Errorf("wait said %q; want each of the 3 loops stopped after its 2 fast failures", out)
		}
		b, _ := os.ReadFile(filepath.Join(dir, "OUTPUT", "slurm-1.out"))
		if !strings.HasSuffix(string(b), "\nToo many failed (very short) cases - exiting\n") || strings.Count(string(b), ": Too many failed (very short) cases - exiting") != 3 {
			t.Errorf("the job's output does not end with META's message after each loop's:\n%s", b)
		}
	})
}

// askCPUs makes the farm's job script ask Slurm for n CPUs a job.
func askCPUs(t *testing.T, dir string, n int) {
	t.Helper()
	p := filepath.Join(dir, "job_script.sh")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	ask := fmt.Sprintf("#SBATCH --cpus-per-task=%d\n#SBATCH --mem", n)
	if err := os.WriteFile(p, []byte(strings.Replace(string(b), "#SBATCH --mem", ask, 1)), 0o755); err != nil {
		t.Fatal(err)
	}
}

// setConfig sets key to value in the farm's config, in place.
func setConfig(t *testing.T, dir, key, value string) {
	t.Helper()
	p := filepath.Join(dir, "config")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	found := false
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, key+"=") {
			l, found = key+"="+value, true
		}
		out = append(out, l)
	}
	if !found {
		t.Fatalf("config has no %s line", key)
	}
	if err := os.WriteFile(p, []byte(strings.Join(out, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
}
