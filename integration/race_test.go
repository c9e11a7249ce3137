package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/farm-hpc/farm/integration/harness"
)

// barrier releases processes at one instant: each opens the FIFO and reads
// it, and blocks, because the test holds the FIFO open for writing (O_RDWR,
// so that no open blocks); closing it gives every reader EOF at once.
type barrier struct {
	path string
	fh   *os.File
}

func newBarrier(t *testing.T, dir string) *barrier {
	t.Helper()
	p := filepath.Join(dir, "go.fifo")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	fh, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fh.Close() })
	return &barrier{path: p, fh: fh}
}

// holds reports whether process pid has the barrier's FIFO open: it has
// reached the barrier (or is about to read it, which then returns EOF at
// once if the barrier was released meanwhile).
func (b *barrier) holds(pid int) bool {
	fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
	for _, fd := range fds {
		if l, _ := os.Readlink(fd); l == b.path {
			return true
		}
	}
	return false
}

// release lets every process waiting at the barrier go, and says when.
func (b *barrier) release() time.Time {
	t := time.Now()
	b.fh.Close()
	return t
}

// privateSlots returns the environment that gives the farm commands of a
// trial, and the jobs they submit (which inherit it), local job slots of
// their own: the slots live in $TMPDIR, shared by every farm of the user
// on the machine, and other tests (or other people's) must not hold this
// test's jobs pending for minutes.
func privateSlots(t *testing.T, base string) []string {
	t.Helper()
	tmp := filepath.Join(base, "tmp")
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	return []string{"TMPDIR=" + tmp}
}

// racer is one 'farm resubmit' process, started at the barrier and then
// after its offset.
type racer struct {
	cmd    *exec.Cmd
	offset time.Duration
	out    strings.Builder
	err    strings.Builder
	code   int
	exited time.Time
	done   chan struct{}
}

func startRacer(t *testing.T, dir string, env []string, b *barrier, offset time.Duration, args ...string) *racer {
	t.Helper()
	script := `read -r _ < "$0"; `
	if offset > 0 {
		script += fmt.Sprintf("sleep %.4f; ", offset.Seconds())
	}
	script += `exec "$@"`
	r := &racer{offset: offset, done: make(chan struct{})}
	r.cmd = exec.Command("bash", append([]string{"-c", script, b.path, bin(t)}, args...)...)
	r.cmd.Dir = dir
	r.cmd.Env = append(os.Environ(), env...)
	r.cmd.Stdout, r.cmd.Stderr = &r.out, &r.err
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { // waits for the process, which is what races
		err := r.cmd.Wait()
		r.exited = time.Now()
		if ee, ok := err.(*exec.ExitError); ok {
			r.code = ee.ExitCode()
		} else if err != nil {
			r.code = -1
		}
		close(r.done)
	}()
	return r
}

func (r *racer) wait(t *testing.T) {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(time.Minute):
		r.cmd.Process.Kill()
		t.Fatalf("farm resubmit did not end within a minute")
	}
}

// Losers' answers: refused while jobs are active, or the run changed under
// it (a CAS lost, or a run just started by another command), or nothing was
// left once the winner's run had ended.
var (
	msgJobsActive = "Jobs are still running/queued; cannot resubmit"
	msgChanged    = "nothing was submitted"
	msgNothing    = "No failed/unfinished jobs; nothing to resubmit"
	activeCount   = regexp.MustCompile(`\((\d+) job\(s\) of the farm are pending or running`)
)

// checkLoser checks that a racer that lost submitted nothing and said why.
func checkLoser(t *testing.T, trial int, r *racer) string {
	t.Helper()
	out, errs := r.out.String(), r.err.String()
	if strings.Contains(out, "Submitted") {
		t.Errorf("trial %d: a losing 'farm resubmit' submitted jobs: %q %q", trial, out, errs)
	}
	switch {
	case r.code == 1 && strings.Contains(errs, msgJobsActive):
		n := "?"
		if m := activeCount.FindStringSubmatch(errs); m != nil {
			n = m[1]
		}
		return "jobs active (" + n + ")"
	case r.code == 1 && strings.Contains(errs, "the farm changed while this command ran") && strings.Contains(errs, msgChanged):
		return "lost the CAS"
	case r.code == 1 && strings.Contains(errs, "has not recorded its jobs yet") && strings.Contains(errs, msgChanged):
		return "run just started"
	case r.code == 0 && strings.TrimSpace(out) == msgNothing:
		return "nothing left"
	}
	t.Errorf("trial %d: losing 'farm resubmit': exit %d, stdout %q, stderr %q; want a refusal that says nothing was submitted", trial, r.code, out, errs)
	return "?"
}

// checkOneRun2 checks that, of everything that raced, exactly one run 2
// started, with the jobs its winner asked for, and no run after it; that
// no case started twice in a run; and that the farm completed.
func checkOneRun2(t *testing.T, trial int, dir string, cases int, wantRun2 map[string]int) {
	t.Helper()
	log, _ := os.ReadFile(filepath.Join(dir, "farm.log"))
	if n := strings.Count(string(log), "resubmit: run 2,"); n != 1 || strings.Contains(string(log), "run 3") {
		t.Errorf("trial %d: farm.log shows %d starts of run 2 (want 1) or a run 3:\n%s", trial, n, log)
	}
	var q struct {
		Run int `json:"run"`
	}
	if err := jsonOf(t, dir, &q, "query", "--json"); err != nil || q.Run != 2 {
		t.Errorf("trial %d: farm query says run %d (%v), want 2", trial, q.Run, err)
	}
	kinds := map[string]int{}
	for _, r := range harness.ListJSON(t, dir) {
		kinds[fmt.Sprintf("%d %s", r.Run, r.Kind)]++
	}
	for k, n := range wantRun2 {
		if kinds[k] != n {
			t.Errorf("trial %d: farm list shows %d %q jobs, want %d (all: %v)", trial, kinds[k], k, n, kinds)
		}
	}
	for k := range kinds {
		if _, ok := wantRun2[k]; !ok {
			t.Errorf("trial %d: farm list shows unexpected jobs %q (all: %v)", trial, k, kinds)
		}
	}
	runs := harness.ReadRunRecords(t, dir)
	for run, rec := range runs {
		if run != 1 && run != 2 {
			t.Errorf("trial %d: status records of run %d", trial, run)
		}
		for id, n := range rec.Starts {
			if n != 1 || rec.Ends[id] != 1 {
				t.Errorf("trial %d: case %d has %d start and %d end records in run %d; want one of each", trial, id, n, rec.Ends[id], run)
			}
		}
	}
	if len(runs[2].Starts) == 0 {
		t.Errorf("trial %d: no case ran in run 2", trial)
	}
	st := statusJSON(t, dir)
	for id := int64(1); id <= int64(cases); id++ {
		if st[id].State != "succeeded" {
			t.Errorf("trial %d: case %d is %+v at the end, want succeeded", trial, id, st[id])
		}
	}
	if res := farmIn(t, dir, nil, "Status"); strings.Contains(res.Err, "warning") {
		t.Errorf("trial %d: farm Status warns: %s", trial, res.Err)
	}
}

func jsonOf(t *testing.T, dir string, v any, args ...string) error {
	t.Helper()
	out := mustFarm(t, dir, args...)
	return json.Unmarshal([]byte(out), v)
}

// TestLocalAutoAndTwoResubmitsStartOneRun: when run 1 ends, the -auto job
// resubmits while two 'farm resubmit' of the user race it. In every trial
// exactly one run 2 starts, the losers submit nothing and say why, and no
// case runs twice in a run.
//
// Run 1 leaves cases never run: its case 1 posts a HEPiX shutdown notice in
// the past, so the meta-jobs stop claiming; the cases that run fail until
// the marker file exists, which the test makes after run 1. The -auto
// job's resubmit_script.sh waits at a barrier (a FIFO) before 'farm
// autojob'; the test starts the two 'farm resubmit's at the same barrier,
// the second after an offset that grows with the trial (0 to 45 ms), so
// that across the trials they meet every step of the -auto job's
// resubmission, then releases all three at once.
func TestLocalAutoAndTwoResubmitsStartOneRun(t *testing.T) {
	const trials, cases = 10, 12
	overlapped, outcomes := 0, map[string]int{}
	for trial := 0; trial < trials; trial++ {
		a := startAutoRace(t, cases)
		a.waitRun1(t, trial, cases)

		offset := time.Duration(trial) * 5 * time.Millisecond
		racers, released := raceResubmits(t, a.dir, a.env, a.b, offset)
		if r := farmIn(t, a.dir, a.env, "wait", "--timeout", "1m"); r.Code != 0 {
			t.Errorf("trial %d: wait exit %d: %s %s", trial, r.Code, r.Out, r.Err)
		}
		// Every case must have run in the end: the -auto job's run 2 (with
		// its own -auto job, which finds nothing left).
		checkOneRun2(t, trial, a.dir, cases, map[string]int{"1 meta": 2, "1 auto": 1, "2 meta": 2, "2 auto": 1})
		log, _ := os.ReadFile(filepath.Join(a.dir, "farm.log"))
		if !strings.Contains(string(log), "autojob (run 1): ") || !strings.Contains(string(log), "resubmitting with N=2") {
			t.Errorf("trial %d: the -auto job did not resubmit:\n%s", trial, log)
		}
		// Both of run 1's meta-jobs stopped claiming at the shutdown
		// notice: farm.log says so, by the reason their last records name.
		// (On a loaded machine one may first run 5 of the failing cases
		// before case 1 writes the notice: fast-failure protection.)
		if !regexp.MustCompile(`autojob \(run 1\): its meta-jobs ended: (2 no-runtime|1 fast-failure, 1 no-runtime|2 fast-failure)\n`).Match(log) {
			t.Errorf("trial %d: farm.log does not say that run 1's 2 meta-jobs ended for want of runtime (or fast-failure protection):\n%s", trial, log)
		}
		autoEnd := localJobEnd(t, a.dir, 1, "auto")
		var what []string
		for i, r := range racers {
			o := checkLoser(t, trial, r)
			outcomes[o]++
			// The racer's farm started at released+offset; it overlapped
			// the -auto job's resubmission if that was before the -auto
			// job ended.
			if released.Add(r.offset).Before(autoEnd) {
				overlapped++
			}
			what = append(what, fmt.Sprintf("racer %d (+%s): %s, ended %s after the release", i, r.offset, o, r.exited.Sub(released).Round(time.Millisecond)))
		}
		t.Logf("trial %d: -auto job ended %s after the release; %s", trial, autoEnd.Sub(released).Round(time.Millisecond), strings.Join(what, "; "))
		if t.Failed() {
			harness.Diagnose(t, a.dir)
			return
		}
	}
	t.Logf("%d of %d racers started before the -auto job ended; outcomes: %v", overlapped, 2*trials, outcomes)
}

// autoRace is the farm of a trial of TestLocalAutoAndTwoResubmitsStartOneRun.
type autoRace struct {
	dir     string
	marker  string // the cases fail until it exists
	jf      string // $JOBFEATURES
	pidFile string // where the -auto job of run 1 writes its PID
	b       *barrier
	env     []string
}

// startAutoRace makes the farm of a trial, whose -auto job waits at the
// barrier, and submits it.
func startAutoRace(t *testing.T, cases int) *autoRace {
	base := t.TempDir()
	a := &autoRace{marker: filepath.Join(base, "marker"), jf: filepath.Join(base, "jobfeatures"), pidFile: filepath.Join(base, "auto.pid")}
	os.Mkdir(a.jf, 0o755)
	table := []string{`echo $(( $(date +%s) - 1 )) > "$JOBFEATURES/shutdowntime_job"`}
	for i := 2; i <= cases; i++ {
		table = append(table, "test -e "+a.marker)
	}
	a.dir = harness.NewFarmAt(t, filepath.Join(base, "farm"), table, "0-00:10")
	a.b = newBarrier(t, base)
	script := "#!/bin/bash\n#SBATCH -t 0-00:10\n" +
		"if [ \"$FARM_RUN\" = 1 ]; then echo $$ > " + a.pidFile + ".tmp; mv " + a.pidFile + ".tmp " + a.pidFile + "; read -r _ < " + a.b.path + "; fi\n" +
		"exec \"${FARM_BIN:-farm}\" autojob\n"
	if err := os.WriteFile(filepath.Join(a.dir, "resubmit_script.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	a.env = privateSlots(t, base)
	if r := farmIn(t, a.dir, append([]string{"JOBFEATURES=" + a.jf}, a.env...), "submit", "2", "-auto", "--backend", "local"); r.Code != 0 {
		t.Fatalf("submit: %s %s", r.Out, r.Err)
	}
	return a
}

// waitRun1 waits for run 1 to end, which it has when its -auto job
// reaches the barrier; checks that it left cases never run; and lets the
// cases of the next run succeed.
func (a *autoRace) waitRun1(t *testing.T, trial, cases int) {
	var autoPID int
	waitFor(t, 30*time.Second, "the -auto job to reach the barrier", func() bool {
		b, err := os.ReadFile(a.pidFile)
		if err != nil {
			return false
		}
		autoPID, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return autoPID > 0
	})
	waitFor(t, 10*time.Second, "the -auto job to open the barrier", func() bool { return a.b.holds(autoPID) })
	run1 := harness.ReadRunRecords(t, a.dir)[1]
	if len(run1.Starts) == 0 || len(run1.Starts) >= cases {
		t.Fatalf("trial %d: run 1 started %d of %d cases; want some left never run", trial, len(run1.Starts), cases)
	}
	os.WriteFile(a.marker, nil, 0o644)
	os.Remove(filepath.Join(a.jf, "shutdowntime_job"))
}

// raceResubmits starts two 'farm resubmit 2' in dir at the barrier b, the
// second offset after the first, releases them once both are there, and
// waits for both to end. It returns them, and when they were released.
func raceResubmits(t *testing.T, dir string, env []string, b *barrier, offset time.Duration) ([]*racer, time.Time) {
	t.Helper()
	racers := []*racer{
		startRacer(t, dir, env, b, 0, "resubmit", "2"),
		startRacer(t, dir, env, b, offset, "resubmit", "2"),
	}
	for _, r := range racers {
		waitFor(t, 10*time.Second, "a racer to reach the barrier", func() bool { return b.holds(r.cmd.Process.Pid) })
	}
	released := b.release()
	for _, r := range racers {
		r.wait(t)
	}
	return racers, released
}

// localJobEnd reads when the local job of the given run and kind ended.
func localJobEnd(t *testing.T, dir string, run int, kind string) time.Time {
	t.Helper()
	for _, r := range harness.ListJSON(t, dir) {
		if r.Run != run || r.Kind != kind {
			continue
		}
		var st struct{ End time.Time }
		b, err := os.ReadFile(filepath.Join(dir, "MISC", "local", r.ID+".state"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatal(err)
		}
		return st.End
	}
	t.Fatalf("no %s job of run %d", kind, run)
	return time.Time{}
}

// TestLocalTwoResubmitsStartOneRun: two 'farm resubmit' race on a farm
// whose run 1 ended, with no job active: one starts run 2, the other
// submits nothing, whatever the delay between them. The second starts
// 0 to 4.5 ms after the first (the trial's number times 0.5 ms), which
// covers the moment the first has started run 2 but not yet recorded its
// jobs.
func TestLocalTwoResubmitsStartOneRun(t *testing.T) {
	const trials, cases = 10, 8
	outcomes := map[string]int{}
	for trial := 0; trial < trials; trial++ {
		base := t.TempDir()
		marker := filepath.Join(base, "marker")
		var table []string
		for i := 1; i <= cases; i++ {
			if i%2 == 0 {
				table = append(table, "test -e "+marker)
			} else {
				table = append(table, "true")
			}
		}
		dir := harness.NewFarmAt(t, filepath.Join(base, "farm"), table, "0-00:10")
		env := privateSlots(t, base)
		if r := farmIn(t, dir, env, "submit", "2", "--backend", "local"); r.Code != 0 {
			t.Fatalf("submit: %s %s", r.Out, r.Err)
		}
		if r := farmIn(t, dir, env, "wait", "--timeout", "1m"); r.Code != exitNotAllOK {
			t.Fatalf("trial %d: wait after run 1: exit %d, want 3 (cases failed)", trial, r.Code)
		}
		os.WriteFile(marker, nil, 0o644)
		b := newBarrier(t, base)
		offset := time.Duration(trial) * 500 * time.Microsecond
		racers, released := raceResubmits(t, dir, env, b, offset)
		var winners, losers []*racer
		for _, r := range racers {
			if r.code == 0 && strings.Contains(r.out.String(), "Submitted 2 meta-jobs for run") {
				winners = append(winners, r)
			} else {
				losers = append(losers, r)
			}
		}
		if len(winners) != 1 {
			var said []string
			for _, r := range racers {
				said = append(said, fmt.Sprintf("exit %d %q %q", r.code, r.out.String(), r.err.String()))
			}
			t.Errorf("trial %d (offset %s): %d racers started a run, want 1: %s", trial, offset, len(winners), strings.Join(said, "; "))
		}
		var what []string
		for _, r := range losers {
			o := checkLoser(t, trial, r)
			outcomes[o]++
			what = append(what, o)
		}
		if r := farmIn(t, dir, env, "wait", "--timeout", "1m"); r.Code != 0 {
			t.Errorf("trial %d: wait exit %d: %s %s", trial, r.Code, r.Out, r.Err)
		}
		checkOneRun2(t, trial, dir, cases, map[string]int{"1 meta": 2, "2 meta": 2})
		t.Logf("trial %d: second racer +%s: loser %v, both done %s after the release", trial, offset, what,
			maxTime(racers).Sub(released).Round(time.Millisecond))
		if t.Failed() {
			harness.Diagnose(t, dir)
			return
		}
	}
	t.Logf("losers: %v", outcomes)
}

func maxTime(rs []*racer) time.Time {
	var m time.Time
	for _, r := range rs {
		if r.exited.After(m) {
			m = r.exited
		}
	}
	return m
}
