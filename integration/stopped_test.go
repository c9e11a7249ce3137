package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/farm-hpc/farm/integration/harness"
	"golang.org/x/sys/unix"
)

// TestLocalReadersDoNotWaitForStoppedMetajob stops one meta-job of a
// running farm (SIGSTOP to its whole process group: the farm meta-job, its
// case worker and its case) again and again, and each time runs farm
// Status, query, list and wait --timeout 1s: each must answer within 2 s
// (wait: exit 2, "timed out after 1s"), whatever the stopped meta-job was
// doing. Half the stops come at a random moment; the other half right
// after a meta-job of the farm takes the slot of a claim commit (inotify on
// the claim chain's segment directory), so that some land inside the
// stopped meta-job's own commit: between taking its generation's slot and
// marking it (seen as its slot s.N left open while it is stopped; the
// others void it after FARM_CLAIM_VOID_AFTER and go on). After each round
// the meta-job is resumed (SIGCONT); at the end the farm completes and
// every case ran exactly once.
func TestLocalReadersDoNotWaitForStoppedMetajob(t *testing.T) {
	t.Parallel()
	const (
		n      = 1200
		jobs   = 3
		rounds = 24
	)
	dir := newFarm(t, repeat("sleep 0.05", n), "0-00:10")
	// Job slots of our own (TMPDIR holds the slot files): the other tests'
	// jobs must not keep ours pending.
	env := []string{"TMPDIR=" + t.TempDir(), fmt.Sprintf("FARM_LOCAL_SLOTS=%d", jobs)}
	if r := farmIn(t, dir, env, "submit", fmt.Sprint(jobs), "--backend", "local"); r.Code != 0 {
		t.Fatalf("submit: %s", r.Err)
	}
	t0 := time.Now()
	waitFor(t, 30*time.Second, "every meta-job to run a case", func() bool {
		files, _ := filepath.Glob(filepath.Join(dir, "STATUSES", "status.*"))
		return len(files) == jobs && len(readRecords(t, dir).Starts) >= 2*jobs
	})
	victim := harness.JobIDs(dir)[0]
	pgid := jobPGID(t, dir, victim)
	defer func() {
		syscall.Kill(-pgid, syscall.SIGCONT) // never leave it stopped
		if t.Failed() {
			harness.Diagnose(t, dir)
			farmIn(t, dir, nil, "kill")
		}
	}()
	seg, ino := watchCommits(t, dir)
	defer unix.Close(ino)

	readers := stoppedReaders{bin: harness.Bin(t), dir: dir, victim: victim, jobs: jobs, slowest: map[string]time.Duration{}}
	inCommit, probes, done := 0, 0, 0
	for round := 0; round < rounds; round++ {
		if len(readRecords(t, dir).Starts) > n*85/100 {
			break // keep some cases for the resumed meta-jobs
		}
		tries, in := stopRound(t, round, ino, pgid, seg)
		probes += tries
		if in {
			inCommit++
		}
		readers.check(t, round)
		commitEvents(ino) // the others', while it was stopped
		if err := syscall.Kill(-pgid, syscall.SIGCONT); err != nil {
			t.Fatalf("round %d: SIGCONT: %v", round, err)
		}
		done++
	}
	t.Logf("%d rounds in %.1fs, %d of them stopped inside the meta-job's own claim commit (%d tries); slowest answers: %v",
		done, time.Since(t0).Seconds(), inCommit, probes, readers.slowest)
	if done < rounds/2 {
		t.Errorf("only %d rounds of %d before the cases ran out: the test proves little", done, rounds)
	}
	if inCommit == 0 {
		t.Errorf("no stop landed inside the meta-job's claim commit (%d tries): the test proves less than it should", probes)
	}

	r := farmIn(t, dir, nil, "wait", "--timeout", "2m")
	if r.Code != 0 || !strings.Contains(r.Out, fmt.Sprintf("%d cases: %d succeeded", n, n)) {
		t.Errorf("wait: exit %d, %q %q; want every case succeeded", r.Code, r.Out, r.Err)
	}
	bad := &fewErrors{t: t}
	checkRanOnce(t, bad, dir, n)
	bad.done()
	checkJobsCompleted(t, dir)
	if left, _ := filepath.Glob(filepath.Join(seg, "s.*")); len(left) > 0 {
		t.Errorf("slots of commits left behind: %v", left)
	}
	t.Logf("farm done %.1fs after submit", time.Since(t0).Seconds())
}

// watchCommits returns the first segment directory of the chain where the
// farm in dir claims (its run's one lane: casetable/lanes.go), where
// commits take their slots s.N (casetable/chain.go), and an inotify
// descriptor that watches it for new files.
func watchCommits(t *testing.T, dir string) (seg string, ino int) {
	t.Helper()
	segs, _ := filepath.Glob(filepath.Join(dir, "MISC", "lanes.1.*", "0", "000000"))
	if len(segs) != 1 {
		t.Fatalf("the run's lane: %v, want one", segs)
	}
	seg = segs[0]
	ino, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unix.InotifyAddWatch(ino, seg, unix.IN_CREATE); err != nil {
		unix.Close(ino)
		t.Fatal(err)
	}
	return seg, ino
}

// stopRound stops the process group pgid for round: in an even round at a
// random moment, in an odd one with up to 3 tries to stop it inside its
// own claim commit (stopAtCommit; seg is the segment directory the inotify
// descriptor ino watches). It returns the tries, and whether one stopped
// it in a commit.
func stopRound(t *testing.T, round, ino, pgid int, seg string) (tries int, inCommit bool) {
	if round%2 == 0 {
		time.Sleep(time.Duration(rand.IntN(150)) * time.Millisecond)
		stop(t, pgid)
		commitEvents(ino) // made before it stopped
		return 0, false
	}
	for try := 0; try < 3; try++ {
		if !stopAtCommit(t, ino, pgid) {
			break
		}
		tries++
		if stoppedInCommit(seg) {
			inCommit = true
			break
		}
		if try < 2 {
			syscall.Kill(-pgid, syscall.SIGCONT)
		}
	}
	if !stopped(pgid) {
		stop(t, pgid)
	}
	commitEvents(ino) // made before it stopped
	return tries, inCommit
}

// stoppedReaders are the readers run while a meta-job of the farm in dir,
// victim, is stopped; the farm has jobs meta-jobs. slowest is each
// reader's slowest answer so far.
type stoppedReaders struct {
	bin, dir, victim string
	jobs             int
	slowest          map[string]time.Duration
}

// stoppedQuick is how soon each reader must answer.
const stoppedQuick = 2 * time.Second

// check runs the readers, all at once, and checks that each answered
// within stoppedQuick, and what.
func (s stoppedReaders) check(t *testing.T, round int) {
	type answer struct {
		args []string
		r    result
		d    time.Duration
	}
	answers := make(chan answer)
	for _, args := range [][]string{{"Status", "--json"}, {"query", "--json"}, {"list", "--json"}, {"wait", "--timeout", "1s"}} {
		go func() {
			start := time.Now()
			r := runFor(s.bin, s.dir, 10*time.Second, args...)
			answers <- answer{args, r, time.Since(start)}
		}()
	}
	for range 4 {
		a := <-answers
		cmd := strings.Join(a.args, " ")
		s.slowest[a.args[0]] = max(s.slowest[a.args[0]], a.d)
		if a.d > stoppedQuick {
			t.Errorf("round %d: farm %s took %s while job %s was stopped, want under %s", round, cmd, a.d.Round(time.Millisecond), s.victim, stoppedQuick)
		}
		s.checkAnswer(t, round, cmd, a.args[0], a.r)
	}
}

// checkAnswer checks what the reader name (the command line cmd) said.
func (s stoppedReaders) checkAnswer(t *testing.T, round int, cmd, name string, r result) {
	switch name {
	case "wait":
		if r.Code != 2 || !strings.Contains(r.Err, "farm: timed out after 1s; jobs are still pending or running") {
			t.Errorf("round %d: farm %s: exit %d, %q; want exit 2 and the timeout", round, cmd, r.Code, r.Err)
		}
	case "query":
		var q struct {
			Jobs struct{ Queued, Running, Finished int }
		}
		if r.Code != 0 || json.Unmarshal([]byte(r.Out), &q) != nil || q.Jobs.Running != s.jobs {
			t.Errorf("round %d: farm %s: exit %d, %q %q; want %d jobs running", round, cmd, r.Code, r.Out, r.Err, s.jobs)
		}
	case "list":
		var rows []harness.ListRow
		if r.Code != 0 || json.Unmarshal([]byte(r.Out), &rows) != nil || len(rows) != s.jobs {
			t.Errorf("round %d: farm %s: exit %d, %q %q", round, cmd, r.Code, r.Out, r.Err)
		}
		for _, j := range rows {
			if j.State != "RUNNING" {
				t.Errorf("round %d: job %s is %s, want RUNNING (stopped or not)", round, j.ID, j.State)
			}
		}
	case "Status":
		var rows []statusRow
		if r.Code != 0 || json.Unmarshal([]byte(r.Out), &rows) != nil || len(rows) == 0 {
			t.Errorf("round %d: farm %s: exit %d, %.200q %q", round, cmd, r.Code, r.Out, r.Err)
		}
	}
}

// stop stops the process group pgid and waits until its leader is stopped.
func stop(t *testing.T, pgid int) {
	t.Helper()
	if err := syscall.Kill(-pgid, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP -%d: %v", pgid, err)
	}
	waitFor(t, 5*time.Second, "the meta-job to stop", func() bool { return stopped(pgid) })
}

// stopped reports whether the process pid is stopped.
func stopped(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && len(b) > i+2 && b[i+2] == 'T'
}

// stoppedInCommit reports whether the stopped meta-job is inside a claim
// commit, with its slot taken and not yet marked: a slot s.N with no mark
// c.N stays in the segment directory seg (the others' last milliseconds).
func stoppedInCommit(seg string) bool {
	time.Sleep(50 * time.Millisecond)
	left := openSlots(seg)
	if len(left) == 0 {
		return false
	}
	time.Sleep(50 * time.Millisecond)
	for _, a := range openSlots(seg) {
		for _, l := range left {
			if a == l {
				return true
			}
		}
	}
	return false
}

// openSlots lists the slots s.N in seg that have no mark c.N.
func openSlots(seg string) []string {
	var open []string
	slots, _ := filepath.Glob(filepath.Join(seg, "s.*"))
	for _, sl := range slots {
		n := strings.TrimPrefix(filepath.Base(sl), "s.")
		if _, err := os.Lstat(filepath.Join(seg, "c."+n)); os.IsNotExist(err) {
			open = append(open, sl)
		}
	}
	return open
}

// commitEvents reads (and forgets) what the inotify descriptor ino has
// queued.
func commitEvents(ino int) {
	buf := make([]byte, 64<<10)
	for {
		if n, _ := unix.Read(ino, buf); n <= 0 {
			return
		}
	}
}

// stopAtCommit waits (up to 3 s) until a claim commit takes its slot in the
// directory watched by the inotify descriptor ino, and stops the process
// group pgid at once; false if none came. (Whose commit it was is not
// known: stoppedInCommit tells whether it was the stopped meta-job's.)
func stopAtCommit(t *testing.T, ino, pgid int) bool {
	t.Helper()
	commitEvents(ino) // the past
	buf := make([]byte, 64<<10)
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		fds := []unix.PollFd{{Fd: int32(ino), Events: unix.POLLIN}}
		if k, err := unix.Poll(fds, 100); err != nil || k == 0 {
			continue
		}
		n, err := unix.Read(ino, buf)
		if err != nil {
			continue
		}
		for _, name := range harness.EventNames(buf[:n]) {
			if strings.HasPrefix(name, "s.") {
				stop(t, pgid)
				return true
			}
		}
	}
	return false
}

// runFor runs farm with args in dir, killing it after limit.
func runFor(bin, dir string, limit time.Duration, args ...string) result {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	r, err := harness.Output(cmd)
	if err != nil {
		r.Code = -1
	}
	return r
}
