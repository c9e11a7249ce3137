package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/farm-hpc/farm/integration/harness"
	"github.com/farm-hpc/farm/internal/testreq"
	"github.com/farm-hpc/farm/status"
)

// mountTmpfs mounts a new tmpfs with the given options in a temporary
// directory and returns its path; it is unmounted when the test ends. It
// skips the test when not root.
func mountTmpfs(t *testing.T, opts string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		testreq.Skip(t, "FARM_REQUIRE_NAMESPACES", "not root: this test mounts a small tmpfs to fill it, which needs root (CI runs as root)")
	}
	mnt := filepath.Join(t.TempDir(), "fs")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, opts); err != nil {
		t.Fatalf("mount -t tmpfs -o %s tmpfs %s: %v", opts, mnt, err)
	}
	t.Cleanup(func() {
		// A job left running (the test failed) keeps the mount busy: a
		// lazy unmount frees it once the job is gone.
		if err := syscall.Unmount(mnt, 0); err != nil {
			syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
	})
	return mnt
}

// filler exhausts a filesystem, of space (a file written until ENOSPC) or
// of inodes (empty files made until ENOSPC), and keeps it exhausted: what
// the farm's processes free meanwhile (buried generations, temporary
// files) is taken again at the next top-up.
type filler struct {
	dir    string
	inodes bool
	f      *os.File
	files  int
	buf    []byte
}

// top fills what is free; it reports whether the filesystem answered
// ENOSPC (is full).
func (x *filler) top() (bool, error) {
	if x.inodes {
		for {
			p := filepath.Join(x.dir, fmt.Sprintf(".filler.%d", x.files))
			fh, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
			if errors.Is(err, syscall.ENOSPC) {
				return true, nil
			}
			if err != nil {
				return false, err
			}
			fh.Close()
			x.files++
		}
	}
	if x.f == nil {
		fh, err := os.OpenFile(filepath.Join(x.dir, ".filler"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return false, err
		}
		x.f, x.buf = fh, make([]byte, 64<<10)
	}
	for _, n := range []int{64 << 10, 4 << 10, 1} { // down to the last byte
		for {
			_, err := x.f.Write(x.buf[:n])
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			if err != nil {
				return false, err
			}
		}
	}
	return true, nil
}

// remove deletes what the filler made.
func (x *filler) remove() {
	if x.f != nil {
		x.f.Close()
		os.Remove(x.f.Name())
	}
	for i := 0; i < x.files; i++ {
		os.Remove(filepath.Join(x.dir, fmt.Sprintf(".filler.%d", i)))
	}
}

func TestLocalDiskFullDuringRun(t *testing.T) {
	t.Parallel()
	// 32 MiB: the farm itself needs a few (each case's out.txt takes a
	// page, each generation of the claim state one until it is buried).
	diskOutage(t, "size=32m", false)
}

func TestLocalInodesExhaustedDuringRun(t *testing.T) {
	t.Parallel()
	diskOutage(t, "size=64m,nr_inodes=6000", true)
}

// diskOutage runs a farm of 360 short cases with 3 meta-jobs on the local
// backend, on a tmpfs mounted with opts, and fills the tmpfs completely
// (its space, or its inodes) for 3 s while the cases run. The meta-jobs
// must ride the outage out: retry what fails (claim commits, status
// records, RUN directories, the job's output, the local backend's job
// state), say so in their output, and
// go on; no case may count as failed or interrupted because of it, none may
// run twice, every job must end by itself ("No cases left; exiting.").
//
// A fourth meta-job starts in the middle of the outage: the test holds one
// of the local backend's 4 job slots, so that it stays pending, and lets go
// of it once the tmpfs is full. Its supervisor must save the job's state,
// and the meta-job open its status file, on the full filesystem.
//
// Each case (caseScript) writes a file in its RUN directory and prints a
// line of 1 kB (so that the output files grow by pages during the outage).
// A case's own write that fails for lack of space is the user's affair, so
// the cases do not write their file during the outage: while the gate file
// (off the tmpfs) is there — the test makes it 300 ms before the tmpfs is
// full and removes it once it is freed — they skip it, and should one race
// with the start of the outage, it retries itself until it works. Their
// line goes through the meta-job's pipe, whose copier must keep it until
// the output file can be written again: while the gate is up, the cases of
// the meta-job it names print theirs (that meta-job then waits in its
// copier: the output path), while the other meta-jobs' cases print nothing
// (so that those go on to claim cases: the claim and status paths). Every
// line printed must be in the output at the end.
func diskOutage(t *testing.T, opts string, inodes bool) {
	o := startOutageFarm(t, opts)
	defer func() {
		if t.Failed() {
			harness.Diagnose(t, o.dir)
			farmIn(t, o.dir, nil, "kill")
		}
	}()
	o.pickJobs(t)
	o.fill(t, inodes)

	r := farmIn(t, o.dir, nil, "wait", "--timeout", "2m")
	t.Logf("farm wait returned %.1fs after submit: exit %d: %s%s", time.Since(o.t0).Seconds(), r.Code, r.Out, r.Err)
	if r.Code != 0 || !strings.Contains(r.Out, fmt.Sprintf("%d cases: %d succeeded", outageCases, outageCases)) {
		t.Errorf("wait: exit %d, %q %q; want every case succeeded", r.Code, r.Out, r.Err)
	}

	bad := &fewErrors{t: t}
	st := o.checkEachCaseOnce(t, bad)
	starts := o.checkMidRun(t)
	o.checkLateJob(t)
	outFiles := o.checkJobsEnded(t)
	output := o.checkRetried(t, inodes, outFiles)
	o.checkCasesWrote(bad, starts, st, output)
	bad.done()
	t.Logf("run took %.1fs", time.Since(o.t0).Seconds())
	o.figure(t, inodes, st)
}

// figure writes the summary line of a diskOutage run to $FARM_FAULT_FIGURES
// (make faults), if set: cases not succeeded (lost), run other than once,
// status-file lines that do not parse or are cut (corrupt), and jobs that
// did not end by themselves with "No cases left; exiting." (exits).
func (o *outage) figure(t *testing.T, inodes bool, st map[int64]statusRow) {
	p := os.Getenv("FARM_FAULT_FIGURES")
	if p == "" {
		return
	}
	lost, notOnce, corrupt, exits := 0, 0, 0, 0
	rec := readRecords(t, o.dir)
	for id := int64(1); id <= outageCases; id++ {
		if st[id].State != "succeeded" {
			lost++
		}
		if rec.Starts[id] != 1 || rec.Ends[id] != 1 {
			notOnce++
		}
	}
	files, _ := filepath.Glob(filepath.Join(o.dir, "STATUSES", "status.*"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		if len(b) > 0 && b[len(b)-1] != '\n' {
			corrupt++ // a record cut short
		}
		for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
			if _, err := status.ParseRecord([]byte(l)); err != nil {
				corrupt++
			}
		}
		if !regexp.MustCompile(`(?m)^Q \S+ why=no-cases No cases left; exiting\.$`).Match(b) {
			exits++
		}
	}
	for _, j := range harness.ListJSON(t, o.dir) {
		if j.State != "COMPLETED" {
			exits++
		}
	}
	what := "space"
	if inodes {
		what = "inodes"
	}
	line := fmt.Sprintf("tmpfs-full-%s runs=1 cases=%d/run metajobs=%d/run outage=%s lost=%d not-once=%d corrupt-records=%d metajob-exits=%d failed-runs=%d",
		what, outageCases, outageJobs, outageLength, lost, notOnce, corrupt, exits, map[bool]int{false: 0, true: 1}[t.Failed()])
	t.Log(line)
	if f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644); err == nil {
		fmt.Fprintln(f, line)
		f.Close()
	}
}

// The farm of diskOutage.
const (
	outageCases  = 360
	outageJobs   = 4 // one of them starts in the outage
	outageLength = 3 * time.Second
)

// outage is a farm of diskOutage on its tmpfs, and when things happened.
type outage struct {
	mnt, dir string
	gate     string   // the gate file, off the tmpfs
	slot     *os.File // the job slot the test holds, nil once let go
	loud     string   // the meta-job whose cases print during the outage
	late     string   // the meta-job that starts in it
	t0       time.Time
	gateUp   time.Time
	full     time.Time // the outage: from full to freed
	freed    time.Time
}

// startOutageFarm makes the farm of diskOutage on a tmpfs mounted with
// opts, holds one of its job slots, and submits its jobs.
func startOutageFarm(t *testing.T, opts string) *outage {
	o := &outage{mnt: mountTmpfs(t, opts)}
	aux := t.TempDir() // off the tmpfs
	caseSh := filepath.Join(aux, "case.sh")
	o.gate = filepath.Join(aux, "gate")
	if err := os.WriteFile(caseSh, []byte(caseScript), 0o644); err != nil {
		t.Fatal(err)
	}
	o.dir = harness.NewFarmAt(t, filepath.Join(o.mnt, "farm"), repeat(`. "$CASE_SH"`, outageCases), "0-00:10")
	// The cases' lines are looked for in the jobs' output, where they
	// meet the outage with the meta-jobs' own (OUTPUT=job's files are
	// written through the same fsretry.Writer).
	setConfig(t, o.dir, "OUTPUT", "stream")
	// Job slots of our own, so that the other tests' jobs cannot take
	// ours; the slot files and the node-local copy of single_case.sh
	// (TMPDIR) are off the tmpfs. The test holds one slot (a flock on its
	// file, as the local backend takes them) until the outage.
	tmp := t.TempDir()
	o.slot = holdSlot(t, tmp)
	env := []string{"TMPDIR=" + tmp, fmt.Sprintf("FARM_LOCAL_SLOTS=%d", outageJobs), "OUTAGE_GATE=" + o.gate, "CASE_SH=" + caseSh}
	if r := farmIn(t, o.dir, env, "submit", fmt.Sprint(outageJobs), "--backend", "local"); r.Code != 0 {
		t.Fatalf("submit: %s", r.Err)
	}
	o.t0 = time.Now()
	return o
}

// pickJobs waits for a quarter of the cases to start (then the outage
// starts), and picks the loud job and the late one.
func (o *outage) pickJobs(t *testing.T) {
	waitFor(t, 60*time.Second, "a quarter of the cases to start", func() bool {
		return len(readRecords(t, o.dir).Starts) >= outageCases/4
	})
	for _, j := range harness.ListJSON(t, o.dir) {
		switch {
		case j.State == "PENDING" && o.late == "":
			o.late = j.ID
		case j.State == "RUNNING" && o.loud == "":
			o.loud = j.ID
		case j.State != "RUNNING":
			t.Fatalf("job %s is %s, want %d-1 jobs running and one pending", j.ID, j.State, outageJobs)
		}
	}
	if o.loud == "" || o.late == "" {
		t.Fatalf("no job running or none pending: %+v", harness.ListJSON(t, o.dir))
	}
}

// fill is the outage: it puts the gate up, fills the tmpfs (its space, or
// with inodes its inodes) and keeps it full for outageLength, letting go of
// the held slot a quarter of the way in; then it frees the tmpfs and takes
// the gate down.
func (o *outage) fill(t *testing.T, inodes bool) {
	// The gate is up well before the disk is full (a case takes 40 ms).
	if err := os.WriteFile(o.gate, []byte(o.loud), 0o644); err != nil {
		t.Fatal(err)
	}
	o.gateUp = time.Now()
	time.Sleep(300 * time.Millisecond)
	x := &filler{dir: o.mnt, inodes: inodes}
	for {
		ok, err := x.top()
		if err != nil {
			x.remove()
			t.Fatalf("filling the tmpfs: %v", err)
		}
		if ok && o.full.IsZero() {
			o.full = time.Now()
		}
		if !o.full.IsZero() && time.Since(o.full) >= outageLength/4 && o.slot != nil {
			o.slot.Close() // the pending job may start
			o.slot = nil
		}
		if !o.full.IsZero() && time.Since(o.full) >= outageLength {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	x.remove()
	o.freed = time.Now()
	os.Remove(o.gate)
	t.Logf("tmpfs full from %.2fs to %.2fs after submit (filler: %d files)", o.full.Sub(o.t0).Seconds(), o.freed.Sub(o.t0).Seconds(), x.files)
}

// checkEachCaseOnce checks that every case ran exactly once, and
// succeeded; it returns the cases' status rows.
func (o *outage) checkEachCaseOnce(t *testing.T, bad *fewErrors) map[int64]statusRow {
	checkRanOnce(t, bad, o.dir, outageCases)
	st := statusJSON(t, o.dir)
	for id := int64(1); id <= outageCases; id++ {
		if c := st[id]; c.State != "succeeded" {
			bad.Errorf("case %d: %+v, want succeeded", id, c)
		}
	}
	return st
}

// unixSeconds is t as the status records write it.
func unixSeconds(t time.Time) float64 { return float64(t.UnixMilli()) / 1e3 }

// checkMidRun checks that the outage fell mid-run: cases started before it
// and after it. It returns the start of every case.
func (o *outage) checkMidRun(t *testing.T) map[int64]float64 {
	starts := startByCase(t, o.dir)
	before, during, after := 0, 0, 0
	for _, s := range starts {
		switch {
		case s < unixSeconds(o.full):
			before++
		case s > unixSeconds(o.freed):
			after++
		default:
			during++
		}
	}
	t.Logf("cases started: %d before the outage, %d during it, %d after it", before, during, after)
	if before == 0 || after == 0 {
		t.Errorf("cases started %d before and %d after the outage: it did not fall mid-run, the test proves nothing", before, after)
	}
	return starts
}

// checkLateJob checks that the late job started in the outage.
func (o *outage) checkLateJob(t *testing.T) {
	var ls struct{ Start time.Time }
	if b, err := os.ReadFile(filepath.Join(o.dir, "MISC", "local", o.late+".state")); err != nil || json.Unmarshal(b, &ls) != nil {
		t.Errorf("job %s: no state: %v %s", o.late, err, b)
	} else if t.Logf("job %s started %.2fs after submit", o.late, ls.Start.Sub(o.t0).Seconds()); ls.Start.Before(o.full) || ls.Start.After(o.freed) {
		t.Errorf("job %s started at %s, not in the outage (%s to %s): the test proves nothing of a job's start", o.late, ls.Start, o.full, o.freed)
	}
}

// checkJobsEnded checks that every job ended by itself, normally, and
// returns their output files.
func (o *outage) checkJobsEnded(t *testing.T) []string {
	checkJobsCompleted(t, o.dir)
	statusFiles, _ := filepath.Glob(filepath.Join(o.dir, "STATUSES", "status.*"))
	outFiles, _ := filepath.Glob(filepath.Join(o.dir, "OUTPUT", "*.out"))
	if len(statusFiles) != outageJobs || len(outFiles) != outageJobs {
		t.Fatalf("%d status files and %d output files, want %d of each", len(statusFiles), len(outFiles), outageJobs)
	}
	for _, p := range statusFiles {
		b, _ := os.ReadFile(p)
		if !regexp.MustCompile(`(?m)^Q \S+ why=no-cases No cases left; exiting\.$`).Match(b) {
			t.Errorf("%s has no Q line saying \"No cases left; exiting.\"", filepath.Base(p))
		}
	}
	return outFiles
}

// checkRetried checks that the jobs, in their output files outFiles, said
// they retried, and returns all their output.
func (o *outage) checkRetried(t *testing.T, inodes bool, outFiles []string) string {
	retries, recovered, kept := 0, 0, 0
	var output strings.Builder
	for _, p := range outFiles {
		b, _ := os.ReadFile(p)
		s := string(b)
		output.WriteString(s)
		if !strings.HasSuffix(s, "No cases left; exiting.\n") {
			t.Errorf("%s does not end with \"No cases left; exiting.\"", filepath.Base(p))
		}
		for _, l := range strings.Split(s, "\n") {
			if !strings.HasPrefix(l, "farm: ") || strings.HasPrefix(l, "farm: meta-job ") ||
				strings.HasPrefix(l, "farm: this job ends at ") || strings.HasPrefix(l, "farm: dt_cutoff = ") {
				continue
			}
			t.Logf("%s: %s", filepath.Base(p), l)
			switch {
			case strings.Contains(l, "; retrying for up to "):
				retries++
			case strings.Contains(l, " again after "):
				recovered++
			case strings.Contains(l, "output could not be written for"):
				kept++
			}
		}
	}
	t.Logf("%d retry messages, %d recovery messages, %d outputs kept", retries, recovered, kept)
	if retries == 0 || recovered == 0 {
		t.Errorf("%d retry and %d recovery messages (\"farm: ...; retrying for up to ...\", \"... works again after ...\"): the outage was not seen, the test proves nothing", retries, recovered)
	}
	if !inodes && kept == 0 {
		t.Errorf("no meta-job's output says it could not be written for a while: the output path was not tried")
	}
	return output.String()
}

// checkCasesWrote checks that what the cases wrote is all there: their
// files, except in the outage (give or take a second), and their lines in
// output, except those the quiet meta-jobs' cases did not print then.
// starts and st are the cases' start times and status rows.
func (o *outage) checkCasesWrote(bad *fewErrors, starts map[int64]float64, st map[int64]statusRow, output string) {
	for id := int64(1); id <= outageCases; id++ {
		s := starts[id]
		quiet := s > unixSeconds(o.gateUp.Add(-time.Second)) && s < unixSeconds(o.freed)
		if !quiet {
			b, err := os.ReadFile(filepath.Join(o.dir, fmt.Sprintf("RUN%d", id), "out.txt"))
			if err != nil || string(b) != fmt.Sprintf("case %d\n", id) {
				bad.Errorf("case %d: RUN%d/out.txt = %q, %v", id, id, b, err)
			}
		}
		if (!quiet || st[id].Job == o.loud) && !strings.Contains(output, fmt.Sprintf("case %d done %01000d\n", id, 0)) {
			bad.Errorf("case %d's output line is missing from the jobs' output", id)
		}
	}
}

// caseScript is what the cases of diskOutage run (sourced: "$CASE_SH").
const caseScript = `sleep 0.04
if [ -e "$OUTAGE_GATE" ]; then
  # The outage: write no file; print only in the meta-job the gate names.
  if [ "$(< "$OUTAGE_GATE")" = "$METAJOB_ID" ]; then
    printf 'case %s done %01000d\n' "$ID" 0
  fi
else
  until { echo "case $ID" > out.txt; } 2>/dev/null; do sleep 0.05; done
  printf 'case %s done %01000d\n' "$ID" 0
fi
`

// fewErrors reports the first few of many similar errors, and how many
// there were.
type fewErrors struct {
	t *testing.T
	n int
}

func (e *fewErrors) Errorf(format string, args ...any) {
	e.t.Helper()
	if e.n++; e.n <= 5 {
		e.t.Errorf(format, args...)
	}
}

func (e *fewErrors) done() {
	e.t.Helper()
	if e.n > 5 {
		e.t.Errorf("... and %d more such errors", e.n-5)
	}
}

// checkRanOnce checks, through bad, that each of the n cases of the farm
// in dir ran exactly once, and succeeded, by the status records.
func checkRanOnce(t *testing.T, bad *fewErrors, dir string, n int64) {
	rec := readRecords(t, dir)
	for id := int64(1); id <= n; id++ {
		if rec.Starts[id] != 1 || rec.Ends[id] != 1 || rec.EndStatus[id] != 0 {
			bad.Errorf("case %d: %d starts, %d ends, status %d; want exactly one successful run", id, rec.Starts[id], rec.Ends[id], rec.EndStatus[id])
		}
	}
}

// checkJobsCompleted checks that every job of the farm in dir ended by
// itself, normally.
func checkJobsCompleted(t *testing.T, dir string) {
	for _, j := range harness.ListJSON(t, dir) {
		if j.State != "COMPLETED" {
			t.Errorf("job %s ended %s, want COMPLETED", j.ID, j.State)
		}
	}
}

// holdSlot takes one of the local backend's job slots under tmp (its
// TMPDIR), as the backend does (local/supervise.go, takeSlot), and returns it:
// close it to let go.
func holdSlot(t *testing.T, tmp string) *os.File {
	d := filepath.Join(tmp, fmt.Sprintf("farm-slots-%d", os.Getuid()))
	if err := os.MkdirAll(d, 0o700); err != nil {
		t.Fatal(err)
	}
	fh, err := os.OpenFile(filepath.Join(d, "slot.0"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(fh.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fh.Close() })
	return fh
}

// startByCase returns the start time of every case of the farm in dir, by
// its S record.
func startByCase(t *testing.T, dir string) map[int64]float64 {
	out := map[int64]float64{}
	files, _ := filepath.Glob(filepath.Join(dir, "STATUSES", "status.*"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			var id int64
			var s float64
			if strings.HasPrefix(l, "S ") {
				if _, err := fmt.Sscanf(l, "S %d %f", &id, &s); err == nil {
					out[id] = s
				}
			}
		}
	}
	return out
}

// TestLocalKillOnFullDisk: 'farm kill' while the farm's disk is full (a
// tmpfs filled to its last byte) stops the farm's jobs on the local
// backend: it exits 0 and says which jobs it cancelled, their meta-jobs
// and cases end at once, and each job is recorded CANCELLED once its
// supervisor can write again (the disk freed), its running cases
// interrupted.
func TestLocalKillOnFullDisk(t *testing.T) {
	t.Parallel()
	killOnFullDisk(t, "size=16m", false)
}

// TestLocalKillInodesExhausted: TestLocalKillOnFullDisk with the tmpfs out
// of inodes instead (its space free): no file can be made.
func TestLocalKillInodesExhausted(t *testing.T) {
	t.Parallel()
	killOnFullDisk(t, "size=64m,nr_inodes=1500", true)
}

// killOnFullDisk runs the farm of TestLocalKillOnFullDisk (out of inodes if
// inodes) on a tmpfs mounted with opts: 3 meta-jobs (a fourth pending, for
// want of a job slot) on cases that sleep for a minute; once each running
// meta-job runs a case, it fills the tmpfs, checks that a file cannot be
// made nor written there, and runs 'farm kill'. The cancel files of jobs 2
// and 3 are those submit made, which kill overwrites in place; jobs 1 and
// 4 (a running job and the pending one) have none, as a job submitted by
// an earlier farm: kill cannot make theirs, and stops them by a signal to
// their supervisors, saying so on stderr.
func killOnFullDisk(t *testing.T, opts string, inodes bool) {
	k := startFullKill(t, opts)
	x := &filler{dir: k.mnt, inodes: inodes}
	defer func() {
		if t.Failed() {
			harness.Diagnose(t, k.dir)
		}
		farmIn(t, k.dir, k.env, "kill")
	}()
	waitFor(t, 60*time.Second, "a case started in each running meta-job", func() bool {
		return len(readRecords(t, k.dir).Starts) >= fullKillSlots
	})
	k.ids = harness.JobIDs(k.dir)
	k.findRunning(t)
	k.dropCancelFiles(t)
	// Full: to the last byte (or inode), kept so while farm kill runs.
	filled, free := keepFull(x)
	defer free()
	if err := <-filled; err != nil {
		t.Fatalf("filling the tmpfs: %v", err)
	}
	probe := filepath.Join(k.dir, "MISC", "local", "probe")
	if err := os.WriteFile(probe, []byte("x"), 0o644); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("writing a file on the full tmpfs: %v, want ENOSPC", err)
	}
	os.Remove(probe)

	t0 := time.Now()
	r := farmIn(t, k.dir, k.env, "kill")
	t.Logf("farm kill on the full tmpfs: exit %d in %.1fs\nstdout: %sstderr: %s", r.Code, time.Since(t0).Seconds(), r.Out, r.Err)
	k.checkKillSaid(t, r)
	// The meta-jobs and their cases end, the disk still full.
	k.waitProcessesEnd(t)
	t.Logf("the jobs' processes ended %.1fs after farm kill began", time.Since(t0).Seconds())
	if err := os.WriteFile(probe, []byte("x"), 0o644); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("the tmpfs was not full all along: writing a file: %v", err)
	}
	os.Remove(probe)

	// Freed: the supervisors record the jobs' end.
	free()
	k.checkCancelled(t)
}

// The farm of killOnFullDisk: its jobs, and the job slots they have.
const (
	fullKillJobs  = 4
	fullKillSlots = 3
)

// fullKill is a farm of killOnFullDisk on its tmpfs, and what the test
// knows of its jobs.
type fullKill struct {
	mnt, dir string
	env      []string // of every farm command
	ids      []string // its jobs
	pgids    []int    // the process groups of the running jobs
	// The jobs whose cancel files submit made (kill overwrites them in
	// place), and those whose files the test removed (kill signals them).
	placeholder, signalled []string
}

// startFullKill makes the farm of killOnFullDisk on a tmpfs mounted with
// opts, and submits its jobs.
func startFullKill(t *testing.T, opts string) *fullKill {
	k := &fullKill{mnt: mountTmpfs(t, opts)}
	k.dir = harness.NewFarmAt(t, filepath.Join(k.mnt, "farm"), repeat("sleep 60", 12), "0-00:10")
	tmp := t.TempDir() // the job slots, off the tmpfs
	k.env = []string{"TMPDIR=" + tmp, fmt.Sprintf("FARM_LOCAL_SLOTS=%d", fullKillSlots), "FARM_LOCAL_KILL_WAIT=3s"}
	if r := farmIn(t, k.dir, k.env, "submit", fmt.Sprint(fullKillJobs), "--backend", "local"); r.Code != 0 {
		t.Fatalf("submit: %s", r.Err)
	}
	return k
}

// findRunning records the process groups of the running jobs, checking
// that as many run as there are slots and the others are pending.
func (k *fullKill) findRunning(t *testing.T) {
	pending := 0
	for _, id := range k.ids {
		var st struct {
			State string
			PGID  int
		}
		b, err := os.ReadFile(filepath.Join(k.dir, "MISC", "local", id+".state"))
		if err != nil || json.Unmarshal(b, &st) != nil {
			t.Fatalf("job %s: no state: %v %s", id, err, b)
		}
		switch st.State {
		case "RUNNING":
			k.pgids = append(k.pgids, st.PGID)
		case "PENDING":
			pending++
		}
	}
	if len(k.pgids) != fullKillSlots || pending != fullKillJobs-fullKillSlots {
		t.Fatalf("%d jobs running and %d pending, want %d and %d", len(k.pgids), pending, fullKillSlots, fullKillJobs-fullKillSlots)
	}
}

// dropCancelFiles removes the cancel files submit made of the first
// running job and the pending one (as for jobs of an earlier farm), and
// keeps the others'.
func (k *fullKill) dropCancelFiles(t *testing.T) {
	for _, id := range k.ids {
		if _, err := os.Stat(filepath.Join(k.dir, "MISC", "local", id+".cancel")); err != nil {
			t.Fatalf("job %s: no cancel file made at submit: %v", id, err)
		}
		var st struct{ State string }
		b, _ := os.ReadFile(filepath.Join(k.dir, "MISC", "local", id+".state"))
		json.Unmarshal(b, &st)
		if st.State == "PENDING" || len(k.signalled) == 0 {
			os.Remove(filepath.Join(k.dir, "MISC", "local", id+".cancel"))
			k.signalled = append(k.signalled, id)
		} else {
			k.placeholder = append(k.placeholder, id)
		}
	}
}

// keepFull fills the filesystem of x, and keeps it full (topped up every
// 10 ms) until free is called. The first fill's outcome comes on filled:
// an error if it failed or did not fill the filesystem. free stops the
// topping up and frees what x took; it may be called more than once.
func keepFull(x *filler) (filled <-chan error, free func()) {
	stop, stopped := make(chan struct{}), make(chan struct{})
	result := make(chan error, 1)
	free = sync.OnceFunc(func() {
		close(stop)
		<-stopped
		x.remove()
	})
	go func() {
		defer close(stopped)
		first := true
		for {
			ok, err := x.top()
			if first {
				if err == nil && !ok {
					err = errors.New("the filler did not fill the tmpfs")
				}
				result <- err
				first = false
			}
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	return result, free
}

// checkKillSaid checks what 'farm kill' (r) said: every job cancelled, on
// stdout; on stderr, each signalled job, and none of the jobs whose
// cancel files it overwrote, whose files now say all.
func (k *fullKill) checkKillSaid(t *testing.T, r harness.Result) {
	want := fmt.Sprintf("Cancelled %d job(s): %s\n", fullKillJobs, strings.Join(k.ids, " "))
	if r.Code != 0 || r.Out != want {
		t.Errorf("farm kill: exit %d, stdout %q; want exit 0 and %q", r.Code, r.Out, want)
	}
	for _, id := range k.signalled {
		if !strings.Contains(r.Err, fmt.Sprintf("farm: local job %s: its cancel file could not be written (no space left on device); its supervisor, on this host, was told by a signal instead\n", id)) {
			t.Errorf("farm kill's stderr does not say that job %s (no cancel file made at submit) was stopped by a signal", id)
		}
	}
	for _, id := range k.placeholder {
		if strings.Contains(r.Err, fmt.Sprintf("local job %s: its cancel file", id)) {
			t.Errorf("farm kill could not overwrite job %s's cancel file in place", id)
		}
		if b, _ := os.ReadFile(filepath.Join(k.dir, "MISC", "local", id+".cancel")); strings.TrimSpace(string(b)) != "all" {
			t.Errorf("job %s's cancel file says %q, want all", id, b)
		}
	}
}

// waitProcessesEnd waits (30 s at most) for the running jobs' process
// groups to end.
func (k *fullKill) waitProcessesEnd(t *testing.T) {
	waitFor(t, 30*time.Second, "the jobs' processes to end", func() bool {
		for _, g := range k.pgids {
			if syscall.Kill(-g, 0) == nil {
				return false
			}
		}
		return true
	})
}

// checkCancelled waits (60 s at most) for every job to be recorded as
// ended, and checks that each is CANCELLED and that one case per running
// meta-job was interrupted, and none ran on or succeeded.
func (k *fullKill) checkCancelled(t *testing.T) {
	waitFor(t, 60*time.Second, "every job recorded as ended", func() bool {
		for _, j := range harness.ListJSON(t, k.dir) {
			if j.State == "PENDING" || j.State == "RUNNING" {
				return false
			}
		}
		return true
	})
	for _, j := range harness.ListJSON(t, k.dir) {
		if j.State != "CANCELLED" {
			t.Errorf("job %s ended %s, want CANCELLED", j.ID, j.State)
		}
	}
	interrupted := 0
	for id, c := range statusJSON(t, k.dir) {
		switch c.State {
		case "interrupted":
			interrupted++
		case "running", "succeeded":
			t.Errorf("case %d: %+v; want interrupted or not run", id, c)
		}
	}
	if interrupted != fullKillSlots {
		t.Errorf("%d cases interrupted, want %d (one per running meta-job)", interrupted, fullKillSlots)
	}
}
