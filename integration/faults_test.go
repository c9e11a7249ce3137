package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/farm-hpc/farm/integration/harness"
)

// mountTmpfs mounts a new tmpfs with the given options in a temporary
// directory and returns its path; it is unmounted when the test ends. It
// skips the test when not root.
func mountTmpfs(t *testing.T, opts string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: this test mounts a small tmpfs to fill it, which needs root (CI runs as root)")
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
	const (
		n      = 360
		jobs   = 4 // one of them starts in the outage
		outage = 3 * time.Second
	)
	mnt := mountTmpfs(t, opts)
	aux := t.TempDir() // off the tmpfs
	gate, caseSh := filepath.Join(aux, "gate"), filepath.Join(aux, "case.sh")
	if err := os.WriteFile(caseSh, []byte(caseScript), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := harness.NewFarmAt(t, filepath.Join(mnt, "farm"), repeat(`. "$CASE_SH"`, n), "0-00:10")
	// Job slots of our own, so that the other tests' jobs cannot take
	// ours; the slot files and the node-local copy of single_case.sh
	// (TMPDIR) are off the tmpfs. The test holds one slot (a flock on its
	// file, as the local backend takes them) until the outage.
	tmp := t.TempDir()
	slot := holdSlot(t, tmp)
	env := []string{"TMPDIR=" + tmp, fmt.Sprintf("FARM_LOCAL_SLOTS=%d", jobs), "OUTAGE_GATE=" + gate, "CASE_SH=" + caseSh}
	if r := farmIn(t, dir, env, "submit", fmt.Sprint(jobs), "--backend", "local"); r.Code != 0 {
		t.Fatalf("submit: %s", r.Err)
	}
	t0 := time.Now()
	defer func() {
		if t.Failed() {
			harness.Diagnose(t, dir)
			farmIn(t, dir, nil, "kill")
		}
	}()
	// The outage starts once a quarter of the cases have started.
	waitFor(t, 60*time.Second, "a quarter of the cases to start", func() bool {
		return len(readRecords(t, dir).Starts) >= n/4
	})
	var loud, late string // the meta-job whose cases print during the outage; the one that starts in it
	for _, j := range harness.ListJSON(t, dir) {
		switch {
		case j.State == "PENDING" && late == "":
			late = j.ID
		case j.State == "RUNNING" && loud == "":
			loud = j.ID
		case j.State != "RUNNING":
			t.Fatalf("job %s is %s, want %d-1 jobs running and one pending", j.ID, j.State, jobs)
		}
	}
	if loud == "" || late == "" {
		t.Fatalf("no job running or none pending: %+v", harness.ListJSON(t, dir))
	}
	// The gate is up well before the disk is full (a case takes 40 ms).
	if err := os.WriteFile(gate, []byte(loud), 0o644); err != nil {
		t.Fatal(err)
	}
	gateUp := time.Now()
	time.Sleep(300 * time.Millisecond)
	x := &filler{dir: mnt, inodes: inodes}
	var full, freed time.Time
	for {
		ok, err := x.top()
		if err != nil {
			x.remove()
			t.Fatalf("filling the tmpfs: %v", err)
		}
		if ok && full.IsZero() {
			full = time.Now()
		}
		if !full.IsZero() && time.Since(full) >= outage/4 && slot != nil {
			slot.Close() // the pending job may start
			slot = nil
		}
		if !full.IsZero() && time.Since(full) >= outage {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	x.remove()
	freed = time.Now()
	os.Remove(gate)
	t.Logf("tmpfs full from %.2fs to %.2fs after submit (filler: %d files)", full.Sub(t0).Seconds(), freed.Sub(t0).Seconds(), x.files)

	r := farmIn(t, dir, nil, "wait", "--timeout", "2m")
	t.Logf("farm wait returned %.1fs after submit: exit %d: %s%s", time.Since(t0).Seconds(), r.Code, r.Out, r.Err)
	if r.Code != 0 || !strings.Contains(r.Out, fmt.Sprintf("%d cases: %d succeeded", n, n)) {
		t.Errorf("wait: exit %d, %q %q; want every case succeeded", r.Code, r.Out, r.Err)
	}

	// Every case exactly once, and succeeded.
	bad := &fewErrors{t: t}
	rec := readRecords(t, dir)
	for id := int64(1); id <= n; id++ {
		if rec.Starts[id] != 1 || rec.Ends[id] != 1 || rec.EndStatus[id] != 0 {
			bad.Errorf("case %d: %d starts, %d ends, status %d; want exactly one successful run", id, rec.Starts[id], rec.Ends[id], rec.EndStatus[id])
		}
	}
	st := statusJSON(t, dir)
	for id := int64(1); id <= n; id++ {
		if c := st[id]; c.State != "succeeded" {
			bad.Errorf("case %d: %+v, want succeeded", id, c)
		}
	}

	// The outage fell mid-run: cases started before it and after it.
	unix := func(t time.Time) float64 { return float64(t.UnixMilli()) / 1e3 }
	starts := startByCase(t, dir)
	before, during, after := 0, 0, 0
	for _, s := range starts {
		switch {
		case s < unix(full):
			before++
		case s > unix(freed):
			after++
		default:
			during++
		}
	}
	t.Logf("cases started: %d before the outage, %d during it, %d after it", before, during, after)
	if before == 0 || after == 0 {
		t.Errorf("cases started %d before and %d after the outage: it did not fall mid-run, the test proves nothing", before, after)
	}

	// The late job started in the outage.
	var ls struct{ Start time.Time }
	if b, err := os.ReadFile(filepath.Join(dir, "MISC", "local", late+".state")); err != nil || json.Unmarshal(b, &ls) != nil {
		t.Errorf("job %s: no state: %v %s", late, err, b)
	} else if t.Logf("job %s started %.2fs after submit", late, ls.Start.Sub(t0).Seconds()); ls.Start.Before(full) || ls.Start.After(freed) {
		t.Errorf("job %s started at %s, not in the outage (%s to %s): the test proves nothing of a job's start", late, ls.Start, full, freed)
	}

	// Every job ended by itself, normally.
	for _, j := range harness.ListJSON(t, dir) {
		if j.State != "COMPLETED" {
			t.Errorf("job %s ended %s, want COMPLETED", j.ID, j.State)
		}
	}
	statusFiles, _ := filepath.Glob(filepath.Join(dir, "STATUSES", "status.*"))
	outFiles, _ := filepath.Glob(filepath.Join(dir, "OUTPUT", "*.out"))
	if len(statusFiles) != jobs || len(outFiles) != jobs {
		t.Fatalf("%d status files and %d output files, want %d of each", len(statusFiles), len(outFiles), jobs)
	}
	for _, p := range statusFiles {
		b, _ := os.ReadFile(p)
		if !regexp.MustCompile(`(?m)^Q \S+ No cases left; exiting\.$`).Match(b) {
			t.Errorf("%s has no Q line saying \"No cases left; exiting.\"", filepath.Base(p))
		}
	}
	// They said they retried.
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

	// What the cases wrote is all there: their files, except in the
	// outage (give or take a second), and their lines, except those the
	// quiet meta-jobs' cases did not print then.
	for id := int64(1); id <= n; id++ {
		s := starts[id]
		quiet := s > unix(gateUp.Add(-time.Second)) && s < unix(freed)
		if !quiet {
			b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("RUN%d", id), "out.txt"))
			if err != nil || string(b) != fmt.Sprintf("case %d\n", id) {
				bad.Errorf("case %d: RUN%d/out.txt = %q, %v", id, id, b, err)
			}
		}
		if (!quiet || st[id].Job == loud) && !strings.Contains(output.String(), fmt.Sprintf("case %d done %01000d\n", id, 0)) {
			bad.Errorf("case %d's output line is missing from the jobs' output", id)
		}
	}
	bad.done()
	t.Logf("run took %.1fs", time.Since(t0).Seconds())
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
