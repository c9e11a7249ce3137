package integration

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/farm-hpc/farm/integration/harness"
)

// TestBadInputCatalogue runs farm on a catalogue of bad inputs (issue 11):
// damaged table.dat, config and job scripts, bad arguments, damaged MISC
// and STATUSES files, paths with spaces and shell metacharacters, and
// signals to the commands that run for long. Each entry makes a small farm,
// damages it, runs one command line and checks
//
//   - the exit code;
//   - that stderr is one line, "farm: ...", matching the entry's regexp
//     (which names the file, the line where there is one, and what to do),
//     or empty where the entry expects no message;
//   - that no Go stack trace ("panic:", "goroutine N", "file.go:N") is
//     printed;
//   - that no file of the farm changed but those the entry allows (names,
//     modes, sizes and contents, snapshotted before and after).
//
// A failing entry logs the one command that reruns it alone.
func TestBadInputCatalogue(t *testing.T) {
	t.Parallel()
	ran := ranFarmTemplate(t)
	// No entry may reach a real Slurm: the default backend would find
	// these, which fail, and the slowSlurm entries get slow ones.
	guard := fakeSlurm(t, "echo 'the bad-input catalogue uses no Slurm' >&2; exit 1")
	slow := fakeSlurm(t, slowSlurmBody)
	entries := catalogue()
	if len(entries) < 100 {
		t.Errorf("the catalogue has %d entries, want at least 100", len(entries))
	}
	seen := map[string]bool{}
	for _, e := range entries {
		if seen[e.name] {
			t.Fatalf("two entries are named %q", e.name)
		}
		seen[e.name] = true
	}
	for _, e := range entries {
		e := e
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			defer func() {
				if t.Failed() {
					t.Logf("rerun: go test ./integration -run 'TestBadInputCatalogue/%s$' -count=1 -v", e.name)
				}
			}()
			path := guard
			if e.slowSlurm {
				path = slow
			}
			if e.slurmBody != "" {
				path = fakeSlurm(t, e.slurmBody)
			}
			e.run(t, ran, path)
		})
	}
}

// catBase is the farm an entry starts from.
type catBase int

const (
	baseTable    catBase = iota // farm init, table.dat "true" twice, unnumbered
	baseNumbered                // the same, table.dat numbered "1 true", "2 true"
	baseRan                     // a farm that ran: case 1 succeeded, case 2 failed
	baseActive                  // a meta-job running "sleep 30" on the local backend
	baseNone                    // an empty directory, no farm
)

// catEntry is one bad input and what farm must do with it.
type catEntry struct {
	name  string
	base  catBase
	setup func(t *testing.T, dir string) // damages the farm in dir
	args  []string                       // run in the farm's directory
	env   []string
	code  int
	// msg is a regexp the one line of stderr must match; "" if farm must
	// say nothing on stderr.
	msg string
	// change lists the paths, relative to the farm, that may change:
	// shell patterns, or "DIR/" for DIR and everything below it.
	change []string
	// unprivileged: the entry is about permissions, which do not stop
	// root: as root, farm runs as the user nobody, on a farm it owns.
	unprivileged bool
	// signal, if set, is sent to farm once ready holds (or after 700 ms
	// if ready is nil); stdout is what farm printed so far.
	signal syscall.Signal
	ready  func(dir string, stdout func() string) bool
	// slowSlurm: Slurm's commands are fakes that sleep (slowSlurmBody).
	slowSlurm bool
	// slurmBody, if set, is the body of the entry's own fake Slurm
	// commands (fakeSlurm), instead of the guard that fails.
	slurmBody string
	// group: the signal goes to farm's process group, as a Ctrl-C at a
	// terminal goes to the foreground group (farm and its children), not
	// to farm alone.
	group bool
	// notOut, if set, is a regexp stdout must not match (a message said
	// too early).
	notOut string
	// out, if set, is a regexp a line of stdout must match.
	out string
	// after checks the farm once the command and the snapshot check are
	// done, e.g. that the advice given works.
	after func(t *testing.T, dir string)
}

var stackTrace = regexp.MustCompile(`panic:|goroutine \d+|\.go:\d+`)

func (e catEntry) run(t *testing.T, ranTemplate, slurmPath string) {
	dir := e.makeBase(t, ranTemplate)
	var nobody *exec.Cmd
	if e.unprivileged && os.Geteuid() == 0 {
		nobody = asNobody(t, dir, e.args)
	}
	if e.setup != nil {
		e.setup(t, dir)
	}
	before := snapshot(t, dir)
	env := append([]string{"PATH=" + slurmPath + ":" + os.Getenv("PATH")}, e.env...)
	var r result
	switch {
	case e.signal != 0:
		r = e.runSignalled(t, dir, env)
	case nobody != nil:
		nobody.Env = append(nobody.Env, env...)
		r = harness.Exec(t, nobody, e.args)
	default:
		r = farmIn(t, dir, env, e.args...)
	}
	cmdline := "farm " + strings.Join(e.args, " ")
	if r.Code != e.code {
		t.Errorf("%s: exit %d, want %d\nstdout: %s\nstderr: %s", cmdline, r.Code, e.code, r.Out, r.Err)
	}
	if stackTrace.MatchString(r.Out) || stackTrace.MatchString(r.Err) {
		t.Errorf("%s printed a Go stack trace:\nstdout: %s\nstderr: %s", cmdline, r.Out, r.Err)
	}
	e.checkMessage(t, cmdline, r.Err)
	if e.notOut != "" && regexp.MustCompile(e.notOut).MatchString(r.Out) {
		t.Errorf("%s: stdout says %q, which it must not:\n%s", cmdline, e.notOut, r.Out)
	}
	if e.out != "" && !regexp.MustCompile("(?m)"+e.out).MatchString(r.Out) {
		t.Errorf("%s: no line of stdout matches %q:\n%s", cmdline, e.out, r.Out)
	}
	after := snapshot(t, dir)
	for _, p := range diffSnapshots(before, after) {
		if !allowedChange(p, e.change) {
			t.Errorf("%s changed %s, which it must not (allowed: %v)", cmdline, p, e.change)
		}
	}
	if e.after != nil && !t.Failed() {
		e.after(t, dir)
	}
}

// checkMessage checks that stderr is one line "farm: ..." matching e.msg,
// or empty if e.msg is "".
func (e catEntry) checkMessage(t *testing.T, cmdline, stderr string) {
	if e.msg == "" {
		if stderr != "" {
			t.Errorf("%s: stderr %q, want nothing", cmdline, stderr)
		}
		return
	}
	line, ok := strings.CutSuffix(stderr, "\n")
	if !ok || strings.Contains(line, "\n") || !strings.HasPrefix(line, "farm: ") {
		t.Errorf("%s: stderr is not one line starting with \"farm: \":\n%s", cmdline, stderr)
		return
	}
	if !regexp.MustCompile(e.msg).MatchString(line) {
		t.Errorf("%s: stderr %q does not match %q", cmdline, line, e.msg)
	}
}

// makeBase makes the farm the entry starts from and returns its directory.
func (e catEntry) makeBase(t *testing.T, ranTemplate string) string {
	switch e.base {
	case baseNone:
		return t.TempDir()
	case baseNumbered:
		return newFarm(t, []string{"1 true", "2 true"}, "0-00:10")
	case baseRan:
		dir := filepath.Join(t.TempDir(), "farm")
		if out, err := exec.Command("cp", "-a", ranTemplate, dir).CombinedOutput(); err != nil {
			t.Fatalf("cp -a %s %s: %v\n%s", ranTemplate, dir, err, out)
		}
		return dir
	case baseActive:
		dir := newFarm(t, []string{"sleep 30"}, "0-00:10")
		mustFarm(t, dir, "submit", "1", "--backend", "local")
		t.Cleanup(func() {
			// Stop the job, and let it end before its directory goes.
			farmIn(t, dir, nil, "kill")
			farmIn(t, dir, nil, "wait", "--timeout", "30s")
		})
		return dir
	}
	return newFarm(t, []string{"true", "true"}, "0-00:10")
}

// runSignalled starts farm, sends it e.signal once e.ready holds, and
// returns what it said.
func (e catEntry) runSignalled(t *testing.T, dir string, env []string) result {
	cmd := exec.Command(bin(t), e.args...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	if e.group {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	ready := e.ready
	if ready == nil {
		start := time.Now()
		ready = func(string, func() string) bool { return time.Since(start) > 700*time.Millisecond }
	}
	deadline := time.Now().Add(20 * time.Second)
	for !ready(dir, stdout.String) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("farm %v: not ready for the signal after 20s\nstdout: %s\nstderr: %s", e.args, stdout.String(), stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if e.group {
		syscall.Kill(-cmd.Process.Pid, e.signal)
	} else {
		cmd.Process.Signal(e.signal)
	}
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("farm %v: still running 20s after %v", e.args, e.signal)
	}
	return result{Out: stdout.String(), Err: stderr.String(), Code: cmd.ProcessState.ExitCode()}
}

// nobodyID is the user and group ID of nobody.
const nobodyID = 65534

// asNobody, as root, gives the farm in dir to the user nobody, lets nobody
// reach it and the farm binary (the temporary directories are root's, mode
// 0700), and returns the command that runs farm with args, as nobody, in
// dir.
func asNobody(t *testing.T, dir string, args []string) *exec.Cmd {
	err := filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, nobodyID, nobodyID)
	})
	if err != nil {
		t.Fatal(err)
	}
	// Search permission only (x): nobody may pass, not list. $TMPDIR
	// itself too (mode 0700 when made by mktemp -d).
	for d := filepath.Dir(dir); d == os.TempDir() || strings.HasPrefix(d, os.TempDir()+"/"); d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, fi.Mode().Perm()|0o011); err != nil {
			t.Fatal(err)
		}
	}
	// The binary's directory too (not a copy of the binary: a file
	// written while another test forks cannot be run, ETXTBSY).
	exe := bin(t)
	if fi, err := os.Stat(filepath.Dir(exe)); err != nil {
		t.Fatal(err)
	} else if err := os.Chmod(filepath.Dir(exe), fi.Mode().Perm()|0o011); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(filepath.Dir(dir), "tmp-of-nobody")
	if err := os.Mkdir(tmp, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(tmp, 0o777)
	cmd := exec.Command(exe, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "HOME="+tmp)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobodyID, Gid: nobodyID}}
	return cmd
}

// syncBuffer is a bytes.Buffer that a command writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// fileState is what a snapshot keeps of one path.
type fileState struct {
	mode fs.FileMode
	size int64
	sum  [32]byte // contents of a regular file
	link string   // target of a symbolic link
}

// snapshot records every path under dir: its mode, size and contents.
func snapshot(t *testing.T, dir string) map[string]fileState {
	t.Helper()
	snap := map[string]fileState{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(dir, p)
		if err != nil && d == nil {
			snap[rel] = fileState{mode: fs.ModeIrregular}
			return nil
		}
		fi, ierr := os.Lstat(p)
		if ierr != nil {
			return nil // gone meanwhile
		}
		st := fileState{mode: fi.Mode(), size: fi.Size()}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			st.link, _ = os.Readlink(p)
		case fi.Mode().IsRegular():
			st.sum = hashFile(p)
		case fi.IsDir():
			st.size = 0 // a directory's size says nothing
		}
		snap[rel] = st
		if err != nil && d.IsDir() {
			return fs.SkipDir // unreadable
		}
		return nil
	})
	return snap
}

// hashFile is the SHA-256 of the file at p (zero if it cannot be read),
// read in small pieces: the test process must stay small, as other tests
// of this binary measure the memory of the farm processes it starts, and
// a child's peak RSS counts the parent's at fork.
func hashFile(p string) (sum [32]byte) {
	f, err := os.Open(p)
	if err != nil {
		return sum
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.CopyBuffer(h, f, make([]byte, 32<<10)); err != nil {
		return sum
	}
	copy(sum[:], h.Sum(nil))
	return sum
}

// diffSnapshots lists the paths made, removed or changed between two
// snapshots, sorted.
func diffSnapshots(before, after map[string]fileState) []string {
	var out []string
	for p, b := range before {
		if a, ok := after[p]; !ok || a != b {
			out = append(out, p)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// allowedChange reports whether p matches one of the patterns: shell
// patterns, or "DIR/" (DIR a pattern too) for DIR and everything below it.
func allowedChange(p string, patterns []string) bool {
	for _, pat := range patterns {
		if p == pat || p+"/" == pat {
			return true
		}
		d, tree := strings.CutSuffix(pat, "/")
		if !tree {
			if ok, _ := path.Match(pat, p); ok {
				return true
			}
			continue
		}
		parts := strings.Split(p, "/")
		for i := 1; i <= len(parts); i++ {
			if ok, _ := path.Match(d, strings.Join(parts[:i], "/")); ok {
				return true
			}
		}
	}
	return false
}

// ranFarmTemplate makes, once for the catalogue, a farm that ran on the
// local backend: case 1 succeeded, case 2 failed. Entries of baseRan
// damage copies of it.
func ranFarmTemplate(t *testing.T) string {
	dir := newFarm(t, []string{"true", "false"}, "0-00:10")
	mustFarm(t, dir, "submit", "1", "--backend", "local")
	r := farmIn(t, dir, nil, "wait", "--timeout", "1m")
	if r.Code != exitNotAllOK || !strings.Contains(r.Out, "2 cases: 1 succeeded, 1 failed") {
		t.Fatalf("the template farm: wait exit %d: %s%s", r.Code, r.Out, r.Err)
	}
	return dir
}

// fakeSlurm makes a directory of fake sbatch, squeue, scontrol and scancel
// that run body, for PATH.
func fakeSlurm(t *testing.T, body string) string {
	dir := t.TempDir()
	for _, name := range []string{"sbatch", "squeue", "scontrol", "scancel"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// Setups.

func write(name, text string) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func appendTo(name, text string) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(text); err != nil {
			t.Fatal(err)
		}
	}
}

// edit replaces old (which must be there) by new in the file name.
func edit(name, old, new string) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		p := filepath.Join(dir, name)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), old) {
			t.Fatalf("%s has no %q", name, old)
		}
		fi, _ := os.Stat(p)
		if err := os.WriteFile(p, []byte(strings.Replace(string(b), old, new, 1)), fi.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
}

func remove(name string) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}

// toDir replaces the file name by an empty directory.
func toDir(name string) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		remove(name)(t, dir)
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// symlink replaces the file name by a symbolic link to target.
func symlink(name, target string) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		remove(name)(t, dir)
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}

func chmod(name string, mode fs.FileMode) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		if err := os.Chmod(filepath.Join(dir, name), mode); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(filepath.Join(dir, name), 0o755) })
	}
}

// both runs the setups in turn.
func both(fns ...func(*testing.T, string)) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		for _, fn := range fns {
			fn(t, dir)
		}
	}
}

// glob1 returns the one path (relative to dir) that pattern matches; the
// last, sorted by length then name, if several.
func glob1(t *testing.T, dir, pattern string) string {
	m, _ := filepath.Glob(filepath.Join(dir, pattern))
	if len(m) == 0 {
		t.Fatalf("nothing matches %s in %s", pattern, dir)
	}
	sort.Slice(m, func(i, j int) bool {
		if len(m[i]) != len(m[j]) {
			return len(m[i]) < len(m[j])
		}
		return m[i] < m[j]
	})
	rel, _ := filepath.Rel(dir, m[len(m)-1])
	return rel
}

// onGlob runs fn on the path pattern matches (glob1).
func onGlob(pattern string, fn func(name string) func(*testing.T, string)) func(*testing.T, string) {
	return func(t *testing.T, dir string) { fn(glob1(t, dir, pattern))(t, dir) }
}

// lastGen is the newest generation file of the claim state.
const lastGen = "MISC/claims.*/*/g.*"

// Checks run after an entry.

// repairWorks checks that the advice to run 'farm repair' works: it
// rebuilds the state, and the farm reads again.
func repairWorks(t *testing.T, dir string) {
	mustFarm(t, dir, "repair")
	if r := farmIn(t, dir, nil, "query"); r.Code != 0 || r.Err != "" {
		t.Errorf("after farm repair, query: exit %d: %s", r.Code, r.Err)
	}
}

// jobsGoOn checks that the farm's job is still pending or running.
func jobsGoOn(t *testing.T, dir string) {
	for _, j := range harness.ListJSON(t, dir) {
		if j.State != "RUNNING" && j.State != "PENDING" {
			t.Errorf("job %s is %s after the signal, want it to go on", j.ID, j.State)
		}
	}
}

// readsWell checks that the farm's state reads after the entry.
func readsWell(t *testing.T, dir string) {
	for _, args := range [][]string{{"query"}, {"list"}, {"Status"}} {
		if r := farmIn(t, dir, nil, args...); r.Code != 0 || r.Err != "" {
			t.Errorf("farm %s afterwards: exit %d: %s", args[0], r.Code, r.Err)
		}
	}
}

// slowSlurmBody is the fake Slurm of the entries with slowSlurm: it marks
// that it started, beside the farm's directory (its working directory),
// and sleeps, so that a signal reaches farm while it waits for sbatch.
const slowSlurmBody = `: > "$PWD/../slurm-started"; exec sleep 30`

// sbatchTakesTwoSeconds is a fake Slurm whose sbatch, like a real one on
// a busy controller, has the job submitted (its ID in sbatch-submitted,
// beside the farm) two seconds before it prints the ID; it marks that it
// started, as slowSlurmBody does. squeue knows no job.
const sbatchTakesTwoSeconds = `case "${0##*/}" in
sbatch)
  : > "$PWD/../slurm-started"
  n=$(( $(cat "$PWD/../sbatch-count" 2>/dev/null || echo 1000) + 1 ))
  echo $n > "$PWD/../sbatch-count"
  echo $n >> "$PWD/../sbatch-submitted"
  sleep 2
  echo $n ;;
*) exit 0 ;;
esac`

// recordsMatchSbatch checks that the jobs recorded in MISC/jobs are those
// sbatchTakesTwoSeconds submitted: none lost track of, none made up.
func recordsMatchSbatch(t *testing.T, dir string) {
	b, _ := os.ReadFile(filepath.Join(filepath.Dir(dir), "sbatch-submitted"))
	submitted, recorded := strings.Fields(string(b)), harness.JobIDs(dir)
	sort.Strings(recorded)
	if strings.Join(submitted, " ") != strings.Join(recorded, " ") {
		t.Errorf("sbatch submitted jobs %v, MISC/jobs records %v", submitted, recorded)
	}
}

// slurmStarted is the ready condition of slowSlurm entries.
func slurmStarted(dir string, _ func() string) bool {
	_, err := os.Stat(filepath.Join(filepath.Dir(dir), "slurm-started"))
	return err == nil
}

// catalogue is every entry of TestBadInputCatalogue.
func catalogue() []catEntry {
	var all []catEntry
	for _, part := range [][]catEntry{tableEntries(), configEntries(), scriptEntries(), argumentEntries(), miscEntries(), statusEntries(), permissionEntries(), signalEntries()} {
		all = append(all, part...)
	}
	return all
}

var submitLocal = []string{"submit", "1", "--backend", "local"}

// atLine is a regexp for the start of a message about line n of file.
func atLine(file string, n int) string {
	return "^farm: " + regexp.QuoteMeta(fmt.Sprintf("%s:%d: ", file, n))
}

// longLineTable writes a table.dat whose first line is 3 MiB long (more
// than the 1 MiB buffer farm reads lines with; a comment, as a command
// that long is refused), then cases 1..100 (numbered, by META's rule),
// then one that repeats ID 1: in pieces, for the test process to stay
// small (hashFile).
func longLineTable(t *testing.T, dir string) {
	f, err := os.Create(filepath.Join(dir, "table.dat"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.WriteString("# ")
	piece := bytes.Repeat([]byte("y"), 32<<10)
	for i := 0; i < 96; i++ {
		if _, err := f.Write(piece); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.WriteString("\n" + seqTable(100) + "1 true\n"); err != nil {
		t.Fatal(err)
	}
}

// symlinkedTable makes table.dat a symbolic link to data/cases.txt, which
// holds content.
func symlinkedTable(content string) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		if err := os.Mkdir(filepath.Join(dir, "data"), 0o755); err != nil {
			t.Fatal(err)
		}
		write("data/cases.txt", content)(t, dir)
		symlink("table.dat", "data/cases.txt")(t, dir)
	}
}

// outsideTable makes table.dat a symbolic link to ../outside/cases.txt,
// out of the farm directory, which holds content.
func outsideTable(content string) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		out := filepath.Join(filepath.Dir(dir), "outside")
		if err := os.Mkdir(out, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, "cases.txt"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		symlink("table.dat", "../outside/cases.txt")(t, dir)
	}
}

// touch sets the modification time of the file name to a second later.
func touch(name string) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		p := filepath.Join(dir, name)
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		later := fi.ModTime().Add(time.Second)
		if err := os.Chtimes(p, later, later); err != nil {
			t.Fatal(err)
		}
	}
}

// activeFiles are the files the meta-job of a baseActive farm may write
// meanwhile.
var activeFiles = []string{"STATUSES/", "OUTPUT/", "MISC/local/", "MISC/claims.*/", "MISC/lanes.*/", "MISC/rescue.*/", "RUN1/"}

// What farm says of a table.dat changed since the current run started
// (issue 21), while the run goes on and once it has ended.
const (
	tableGoesOn = "table.dat changed since run 1 started; run 1 goes on with the table it started with; 'farm resubmit' will use table.dat as it is now"
	tableRan    = "table.dat changed since run 1 started; run 1 ran the table it started with; 'farm resubmit' will use table.dat as it is now"
)

// commandOf is a case command of n bytes: /bin/true (a program, which a
// command too long for COMM could not start) and an argument.
func commandOf(n int) string {
	return "/bin/true " + strings.Repeat("y", n-len("/bin/true "))
}

// waitsWell checks that the farm's jobs end with every case succeeded.
func waitsWell(t *testing.T, dir string) {
	if r := farmIn(t, dir, nil, "wait", "--timeout", "1m"); r.Code != 0 {
		t.Errorf("farm wait afterwards: exit %d\n%s%s", r.Code, r.Out, r.Err)
	}
}

// runFiles are the files a farm that runs on the local backend writes
// (config: the --backend local given, as BACKEND).
var runFiles = []string{"MISC/", "STATUSES/", "OUTPUT/", "RUN*/", "farm.log", "config"}

// tableEntries: table.dat that submit must refuse, changing nothing; and
// what it must take.
func tableEntries() []catEntry {
	return slices.Concat(tableLineEntries(), tableFileEntries(), tableNeedsEntries())
}

// fixIDs ends the message of a malformed numbered table.
const fixIDs = `; fix the line, or remove all IDs to let farm number the table$`

// fixTableIDs ends the message of a malformed ID in a table that config's
// TABLE_IDS=1 says carries IDs.
const fixTableIDs = `; fix the line \(config has TABLE_IDS=1: the first field of every case line is its ID\), or remove TABLE_IDS from config to let farm number the table$`

// refusedTable: submit refuses table.dat with msg.
func refusedTable(name, table, msg string) catEntry {
	return catEntry{name: "table-" + name, setup: write("table.dat", table), args: submitLocal, code: 1, msg: msg}
}

// refusedIDs: with TABLE_IDS=1 in config (the first field of every case
// line is its ID, whatever number: META's rule would number these tables
// itself), submit refuses table.dat with msg.
func refusedIDs(name, table, msg string) catEntry {
	e := refusedTable(name, table, msg)
	e.setup = func(t *testing.T, dir string) {
		write("table.dat", table)(t, dir)
		appendTo("config", "\nTABLE_IDS=1\n")(t, dir)
	}
	return e
}

// seqTable is a table of n cases numbered 1..n.
func seqTable(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "%d true\n", i)
	}
	return b.String()
}

// tableLineEntries: table.dat refused as a file (missing, a dangling link,
// a directory) or for its lines (none, bad IDs, NUL bytes).
func tableLineEntries() []catEntry {
	return []catEntry{
		refusedTable("empty", "", `^farm: table\.dat: table has no cases; put one command per line$`),
		refusedTable("only-blanks-and-comments", "\n   \n\t\n# a comment\n  # another\n", `^farm: table\.dat: table has no cases; put one command per line$`),
		refusedTable("only-crlf-blanks", "\r\n\r\n# c\r\n", `^farm: table\.dat: table has no cases`),
		{name: "table-missing", setup: remove("table.dat"), args: submitLocal, code: 1, msg: `^farm: table\.dat is missing: put one case \(command line\) per line in table\.dat$`},
		{name: "table-dangling-symlink", setup: symlink("table.dat", "nowhere.dat"), args: submitLocal, code: 1, msg: `^farm: table\.dat is missing: put one case`},
		{name: "table-symlink-loop", setup: symlink("table.dat", "table.dat"), args: submitLocal, code: 1, msg: `^farm: table\.dat cannot be read \(too many levels of symbolic links\): make it a file with one case \(command line\) per line$`},
		{name: "table-is-a-directory", setup: toDir("table.dat"), args: submitLocal, code: 1, msg: `^farm: table\.dat cannot be read \(is a directory\): make it a file with one case`},
		refusedIDs("id-zero", "0 true\n1 true\n", atLine("table.dat", 1)+`malformed case ID "0": IDs must be positive integers`+fixTableIDs),
		refusedIDs("id-zero-later", "1 true\n0 true\n", atLine("table.dat", 2)+`malformed case ID "0"`),
		// Read as IDs (TABLE_IDS=1), a signed first field is an ID, as 0 is.
		refusedIDs("first-id-negative", "-1 echo a\n", atLine("table.dat", 1)+`malformed case ID "-1": a numbered table needs "ID command" on every case line, with ID a positive integer`+fixTableIDs),
		refusedIDs("first-id-negative-then-unnumbered", "# c\n-7 echo a\necho b\n", atLine("table.dat", 2)+`malformed case ID "-7": .*`+fixTableIDs),
		refusedIDs("first-id-plus", "+1 echo a\n+2 echo b\n", atLine("table.dat", 1)+`malformed case ID "\+1": .*`+fixTableIDs),
		refusedIDs("first-id-minus-zero", "-0 echo a\n", atLine("table.dat", 1)+`malformed case ID "-0": .*`+fixTableIDs),
		refusedIDs("id-negative", "1 true\n-2 true\n", atLine("table.dat", 2)+`malformed case ID "-2": a numbered table needs "ID command" on every case line, with ID a positive integer`+fixTableIDs),
		refusedIDs("id-duplicate", "1 true\n1 true\n", atLine("table.dat", 2)+`duplicate case ID 1 \(first used on line 1\); every case needs its own ID$`),
		refusedIDs("id-duplicate-far-apart", "# header\n5 a\n\n7 b\n9 c\n5 d\n", atLine("table.dat", 6)+`duplicate case ID 5 \(first used on line 2\)`),
		refusedIDs("id-duplicate-leading-zero", "1 true\n01 true\n", atLine("table.dat", 2)+`duplicate case ID 1 \(first used on line 1\)`),
		refusedIDs("id-duplicate-huge", "9223372036854775807 a\n1 b\n9223372036854775807 c\n", atLine("table.dat", 3)+`duplicate case ID 9223372036854775807 \(first used on line 1\)`),
		refusedIDs("id-non-numeric", "1 true\nx true\n", atLine("table.dat", 2)+`malformed case ID "x": a numbered table needs "ID command".*`+fixTableIDs),
		refusedIDs("mixed-numbered-then-unnumbered", "1 echo a\necho b\n", atLine("table.dat", 2)+`malformed case ID "echo".*`+fixTableIDs),
		refusedTable("id-only-no-command", "1 true\n2\n", atLine("table.dat", 2)+`case 2 has an ID but no command`+fixIDs),
		refusedTable("id-only-trailing-blanks", "1 true\n2 \t \n", atLine("table.dat", 2)+`case 2 has an ID but no command`),
		refusedIDs("id-beyond-int64", "99999999999999999999 true\n", atLine("table.dat", 1)+`malformed case ID "99999999999999999999": IDs must be positive integers`+fixTableIDs),
		refusedIDs("id-int64-max-plus-one", "1 a\n9223372036854775808 b\n", atLine("table.dat", 2)+`malformed case ID "9223372036854775808"`),
		refusedIDs("id-float-in-numbered", "1 true\n2.5 true\n", atLine("table.dat", 2)+`malformed case ID "2\.5"`),
		refusedIDs("id-plus-in-numbered", "1 true\n+2 true\n", atLine("table.dat", 2)+`malformed case ID "\+2"`),
		refusedIDs("id-hex-in-numbered", "1 true\n0x2 true\n", atLine("table.dat", 2)+`malformed case ID "0x2"`),
		refusedIDs("id-long-garbage", "1 true\n"+strings.Repeat("x", 5000)+" true\n", atLine("table.dat", 2)+`malformed case ID "x{40}\.\.\."`),
		refusedIDs("crlf-duplicate", "# c\r\n1 true\r\n2 true\r\n2 false\r\n", atLine("table.dat", 4)+`duplicate case ID 2 \(first used on line 3\)`),
		refusedTable("crlf-id-only", "1 true\r\n2\r\n", atLine("table.dat", 2)+`case 2 has an ID but no command`),
		refusedTable("nul-byte", "1 true\n2 tr\x00ue\n", atLine("table.dat", 2)+`a NUL byte at column 5: a case line must be text; remove it$`),
		refusedTable("nul-byte-unnumbered", "echo a\necho \x00b\n", atLine("table.dat", 2)+`a NUL byte at column 6`),
		refusedTable("control-character", "echo a\necho \x1b[1mb\n", atLine("table.dat", 2)+`a control character \(byte 0x1b\) at column 6: a case line must be text; remove it$`),
		refusedTable("binary-junk", "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\n", atLine("table.dat", 2)+`a control character \(byte 0x1a\) at column 1: a case line must be text; remove it$`),
		// META's rule: 1, 2, 3, ... on the first 100 case lines make the
		// table numbered; every line after them must carry an ID.
		refusedTable("rule-then-malformed", seqTable(100)+"echo x\n", atLine("table.dat", 101)+`malformed case ID "echo": .* \(its first 100 case lines are numbered 1, 2, 3, \.\.\., so every case line needs its ID\), or remove all IDs to let farm number the table$`),
		refusedTable("rule-then-duplicate", seqTable(100)+"7 x\n", atLine("table.dat", 101)+`duplicate case ID 7 \(first used on line 7\)`),
	}
}

// tableFileEntries: long lines and commands, table.dat as a link, a table
// changed after or during a run.
func tableFileEntries() []catEntry {
	return []catEntry{
		{name: "table-long-line-then-duplicate", setup: longLineTable, args: submitLocal, code: 1, msg: atLine("table.dat", 102) + `duplicate case ID 1 \(first used on line 2\)`},
		// A command that reaches single_case.sh in COMM must fit in 128 KiB
		// with "COMM=": one byte more, and no program of the case starts
		// (E2BIG). The longest that fits runs.
		refusedTable("command-too-long", "echo a\n\n"+commandOf(131067)+"\n", atLine("table.dat", 3)+`the command is 131067 bytes long, more than the 131066 a case may have \(it reaches single_case\.sh in the environment variable COMM, which Linux limits to 128 KiB\); shorten the line, e\.g\. put long data in a file the command reads$`),
		refusedTable("command-too-long-numbered", "1 true\n2 "+commandOf(200000)+"\n3 "+commandOf(131067)+"\n", atLine("table.dat", 2)+`the command is 200000 bytes long, more than the 131066`),
		refusedTable("command-too-long-simple", commandOf(131067)+"\n", atLine("table.dat", 1)+`the command is 131067 bytes long`),
		{name: "table-command-longest-runs", setup: write("table.dat", commandOf(131066)+"\ntrue\n"), args: submitLocal, code: 0,
			change: append([]string{"table.dat", "table.dat.orig"}, runFiles...), after: waitsWell},
		{name: "table-resubmit-command-too-long", base: baseRan, setup: appendTo("table.dat", "3 "+commandOf(131067)+"\n"), args: []string{"resubmit", "1", "--backend", "local"}, code: 1,
			msg: atLine("table.dat", 3) + `the command is 131067 bytes long, more than the 131066 a case may have`, notOut: `Resubmitting`},
		// A table.dat that is a link is numbered at its target, and stays
		// a link (it was replaced by a regular file).
		{name: "table-symlink-numbered-in-place", setup: symlinkedTable("echo a\n# c\necho b\n"), args: submitLocal, code: 0,
			change: append([]string{"data/cases.txt", "table.dat.orig"}, runFiles...),
			after: func(t *testing.T, dir string) {
				waitsWell(t, dir)
				if b, _ := os.ReadFile(filepath.Join(dir, "data/cases.txt")); string(b) != "1 echo a\n# c\n2 echo b\n" {
					t.Errorf("the link's target reads %q, want it numbered", b)
				}
				if b, _ := os.ReadFile(filepath.Join(dir, "table.dat.orig")); string(b) != "echo a\n# c\necho b\n" {
					t.Errorf("table.dat.orig reads %q, want the original", b)
				}
			}},
		{name: "table-symlink-already-numbered", setup: symlinkedTable("1 echo a\n2 echo b\n"), args: submitLocal, code: 0,
			change: runFiles, after: waitsWell},
		{name: "table-symlink-to-read-only-dir", unprivileged: true, setup: both(symlinkedTable("echo a\n"), chmod("data", 0o555)), args: submitLocal, code: 1,
			msg: `^farm: open .*/data/\.cases\.txt\.tmp[0-9]+: permission denied: table\.dat is a symbolic link to .*/data/cases\.txt, which farm numbers in place \(in its own directory\); make that directory writable, or number the table yourself \('1 command', '2 command', \.\.\. on its case lines\)$`},
		// A refused submit does not number the table (NJOBS_MAX was
		// checked after numbering).
		{name: "table-not-numbered-when-njobs-max-refuses", setup: edit("config", "NJOBS_MAX=0", "NJOBS_MAX=1"), args: []string{"submit", "2", "--backend", "local"}, code: 1,
			msg: `^farm: NJOBS_MAX=1 in config: the farm has 0 active job\(s\) and may submit at most 1 more now \(with 0 kept for the -auto/final\.sh job\); ask for fewer$`},
		{name: "table-resubmit-malformed-line", base: baseRan, setup: appendTo("table.dat", "zz top\n"), args: []string{"resubmit", "1", "--backend", "local"}, code: 1,
			msg: atLine("table.dat", 3) + `malformed case ID "zz".*; fix the line$`},
		{name: "table-resubmit-duplicate-added", base: baseRan, setup: appendTo("table.dat", "2 true\n"), args: []string{"resubmit", "1", "--backend", "local"}, code: 1,
			msg: atLine("table.dat", 3) + `duplicate case ID 2 \(first used on line 2\); every case needs its own ID$`},
		{name: "table-resubmit-duplicate-of-succeeded", base: baseRan, setup: appendTo("table.dat", "1 echo again\n"), args: []string{"resubmit", "1", "--backend", "local"}, code: 1,
			msg: atLine("table.dat", 3) + `duplicate case ID 1 \(first used on line 1\)`},
		// A line that no longer reads is left out of wait's count, with a
		// warning, and the summary goes on (issue 21); the exit (3) says
		// case 2 failed.
		{name: "table-wait-malformed-line-after-run", base: baseRan, setup: appendTo("table.dat", "zz top\n"), args: []string{"wait"}, code: exitNotAllOK,
			msg: `^farm: warning: table\.dat:3: malformed case ID "zz": .*: not counted; fix the line before 'farm resubmit', which refuses table\.dat until then \(` + regexp.QuoteMeta(tableRan) + `\)$`,
			out: `^2 cases: 1 succeeded, 1 failed, 0 interrupted, 0 never ran, 0 unfit$`},
		{name: "table-wait-duplicate-appended-after-run", base: baseRan, setup: appendTo("table.dat", "1 echo X\n"), args: []string{"wait"}, code: exitNotAllOK,
			msg: `^farm: warning: table\.dat:3: duplicate case ID 1 \(first used on line 1\): not counted; fix the line before 'farm resubmit'.*\(` + regexp.QuoteMeta(tableRan) + `\)$`,
			out: `^2 cases: 1 succeeded, 1 failed, 0 interrupted, 0 never ran, 0 unfit$`},
		{name: "table-wait-unnumbered-appended-after-run", base: baseRan, setup: appendTo("table.dat", "echo X\necho Y\n"), args: []string{"wait"}, code: exitNotAllOK,
			msg: `^farm: warning: table\.dat:3: malformed case ID "echo": .* \(and 1 more such line\(s\)\): not counted; fix the line before 'farm resubmit'`,
			out: `^2 cases: 1 succeeded, 1 failed, 0 interrupted, 0 never ran, 0 unfit$`},
		{name: "table-case-appended-after-run-status", base: baseRan, setup: appendTo("table.dat", "3 echo X\n"), args: []string{"Status"}, code: 0,
			msg: "^farm: note: " + regexp.QuoteMeta(tableRan) + "$"},
		// During a run: the run goes on with its own copy of table.dat,
		// and farm says so in one line.
		{name: "table-duplicate-appended-mid-run-status", base: baseActive, setup: appendTo("table.dat", "1 echo X\n"), args: []string{"Status"}, code: 0, change: activeFiles,
			msg: "^farm: note: " + regexp.QuoteMeta(tableGoesOn) + "$"},
		{name: "table-unnumbered-appended-mid-run-status", base: baseActive, setup: appendTo("table.dat", "echo X\n"), args: []string{"Status"}, code: 0, change: activeFiles,
			msg: "^farm: note: " + regexp.QuoteMeta(tableGoesOn) + "$"},
		{name: "table-unnumbered-appended-mid-run-query", base: baseActive, setup: appendTo("table.dat", "echo X\n"), args: []string{"query"}, code: 0, change: activeFiles,
			msg: "^farm: note: " + regexp.QuoteMeta(tableGoesOn) + "$"},
		{name: "table-rewritten-same-size-mid-run-query", base: baseActive, setup: write("table.dat", "1 sleep 99\n"), args: []string{"query"}, code: 0, change: activeFiles,
			msg: "^farm: note: " + regexp.QuoteMeta(tableGoesOn) + "$"},
		{name: "table-touched-mid-run-query", base: baseActive, setup: touch("table.dat"), args: []string{"query"}, code: 0, change: activeFiles},
	}
}

// tableNeedsEntries: the one rule that makes a table numbered, table.dat
// as a link out of the farm or gone after a run, and what a case needs
// (#FARM).
func tableNeedsEntries() []catEntry {
	return []catEntry{
		// Read as IDs (TABLE_IDS=1), a first field that starts with a
		// digit, or a sign and a digit, is an ID (issue 21); by META's
		// rule these tables are numbered by farm, lines kept whole.
		refusedIDs("first-id-digit-then-letter", "1a echo a\n2a echo b\n", atLine("table.dat", 1)+`malformed case ID "1a": a numbered table needs "ID command" on every case line, with ID a positive integer`+fixTableIDs),
		refusedIDs("first-id-decimal", "# c\n1.5 echo a\n", atLine("table.dat", 2)+`malformed case ID "1\.5": .*`+fixTableIDs),
		// farm never writes through a link out of the farm directory.
		{name: "table-symlink-out-of-farm-unnumbered", setup: outsideTable("echo a\necho b\n"), args: submitLocal, code: 1,
			msg: `^farm: table\.dat is a symbolic link to .*/outside/cases\.txt, outside the farm directory, and is not numbered: farm numbers a table by rewriting it and never writes outside the farm directory; replace the link by a copy \(cp --remove-destination .*/outside/cases\.txt table\.dat\), or number the table yourself \('1 command', '2 command', \.\.\. on its case lines\)$`,
			after: func(t *testing.T, dir string) {
				if b, _ := os.ReadFile(filepath.Join(dir, "../outside/cases.txt")); string(b) != "echo a\necho b\n" {
					t.Errorf("the link's target reads %q, want it unchanged", b)
				}
				// The advice works.
				target, _ := filepath.EvalSymlinks(filepath.Join(dir, "table.dat"))
				if out, err := exec.Command("cp", "--remove-destination", target, filepath.Join(dir, "table.dat")).CombinedOutput(); err != nil {
					t.Fatalf("cp: %v\n%s", err, out)
				}
				mustFarm(t, dir, submitLocal...)
				waitsWell(t, dir)
				if b, _ := os.ReadFile(target); string(b) != "echo a\necho b\n" {
					t.Errorf("the former target reads %q, want it unchanged", b)
				}
			}},
		{name: "table-symlink-out-of-farm-numbered", setup: outsideTable("1 echo a\n2 echo b\n"), args: submitLocal, code: 0,
			change: runFiles, after: waitsWell},
		{name: "table-wait-missing-after-run", base: baseRan, setup: remove("table.dat"), args: []string{"wait"}, code: 1,
			msg: `^farm: table\.dat is missing`},
		{name: "table-wait-directory-after-run", base: baseRan, setup: toDir("table.dat"), args: []string{"wait", "--timeout", "1m"}, code: 1,
			msg: `^farm: table\.dat cannot be read \(is a directory\)`},
		{name: "table-resubmit-missing", base: baseRan, setup: remove("table.dat"), args: []string{"resubmit", "1", "--backend", "local"}, code: 1,
			msg: `^farm: table\.dat is missing`},
		// What a case needs, after #FARM (issue 13): a part that does not
		// read is refused, naming the line, before anything is written.
		refusedTable("needs-unknown-key", "echo a #FARM cpus=2\necho b #FARM cpu=2\n", atLine("table.dat", 2)+`#FARM: unknown key "cpu" \(known: cpus, gpus, mem, min_time, nodes, time\); fix the line$`),
		refusedTable("needs-numbered-bad-mem", "1 true\n# c\n2 true #FARM mem=8GiB\n", atLine("table.dat", 3)+`#FARM: bad mem="8GiB": want a size above 0: a number of MiB, or with a unit K, M, G or T \(of 1024\), e\.g\. 512M or 8G; fix the line$`),
		refusedTable("needs-bad-cpus", "true #FARM cpus=0\n", atLine("table.dat", 1)+`#FARM: bad cpus="0": want a whole number of CPUs, 1 or more; fix the line$`),
		refusedTable("needs-bad-gpus", "true #FARM gpus=-1\n", atLine("table.dat", 1)+`#FARM: bad gpus="-1": want a whole number of GPUs, 0 or more; fix the line$`),
		refusedTable("needs-bad-time", "true\ntrue #FARM time=abc\n", atLine("table.dat", 2)+`#FARM: bad time="abc": want a time limit above 0 and at most 365 days: Slurm's MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS, or 90s, 30m, 2h; fix the line$`),
		refusedTable("needs-bad-min-time", "true\ntrue #FARM min_time=366-00:00:00\n", atLine("table.dat", 2)+`#FARM: bad min_time="366-00:00:00": want a time above 0 and at most 365 days: Slurm's MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS, or 90s, 30m, 2h; fix the line$`),
		refusedTable("needs-duplicate-key", "true #FARM cpus=2 mem=1G cpus=4\n", atLine("table.dat", 1)+`#FARM: cpus is given twice; give each key once \(known: cpus, gpus, mem, min_time, nodes, time\); fix the line$`),
		refusedTable("needs-empty-value", "true #FARM mem=\n", atLine("table.dat", 1)+`#FARM: mem= has no value \(known: cpus, gpus, mem, min_time, nodes, time\); fix the line$`),
		refusedTable("needs-nothing-after-mark", "true #FARM \t\r\n", atLine("table.dat", 1)+`#FARM: no key=value after it \(known: cpus, gpus, mem, min_time, nodes, time\); fix the line$`),
		refusedTable("needs-not-key-value", "true #FARM needs four cpus\n", atLine("table.dat", 1)+`#FARM: "needs" is not key=value \(known: cpus, gpus, mem, min_time, nodes, time\); fix the line$`),
		refusedTable("needs-no-command", "1 true\n2 #FARM cpus=1\n", atLine("table.dat", 2)+`a case needs a command before #FARM; fix the line$`),
		// A good part runs: the command without it (bash would take it for
		// a comment anyway), its cases succeed.
		{name: "table-needs-run", setup: write("table.dat", "echo a #FARM cpus=1 mem=64M min_time=1\ntrue #FARM gpus=0\n"), args: submitLocal, code: 0,
			change: append([]string{"table.dat", "table.dat.orig"}, runFiles...), after: waitsWell},
		{name: "table-resubmit-needs-added", base: baseRan, setup: appendTo("table.dat", "3 true #FARM cpus=two\n"), args: []string{"resubmit", "1", "--backend", "local"}, code: 1,
			msg: atLine("table.dat", 3) + `#FARM: bad cpus="two": want a whole number of CPUs, 1 or more; fix the line$`, notOut: `Resubmitting`},
		{name: "table-wait-needs-added-after-run", base: baseRan, setup: appendTo("table.dat", "3 true #FARM gpu=1\n"), args: []string{"wait"}, code: exitNotAllOK,
			msg: `^farm: warning: table\.dat:3: #FARM: unknown key "gpu" \(known: cpus, gpus, mem, min_time, nodes, time\): not counted; fix the line before 'farm resubmit'`,
			out: `^2 cases: 1 succeeded, 1 failed`},
		{name: "table-run-case-needs", setup: write("table.dat", "echo a\necho b #FARM mem=lots\n"), args: []string{"run-case", "2"}, code: 1,
			msg: atLine("table.dat", 2) + `#FARM: bad mem="lots": want a size above 0`, change: []string{"RUN*/"}},
	}
}

// configEntries: a config the commands that start jobs must refuse, with
// its line, and the commands that read the farm or cancel its jobs must
// read with the default settings, saying the same in one warning line
// (issue 34).
func configEntries() []catEntry {
	bad := func(name, line string, args []string, msg string) catEntry {
		e := catEntry{name: "config-" + name, setup: appendTo("config", line+"\n"), args: args, code: 1, msg: atLine("config", appendedConfigLine()) + msg}
		if code, ok := readingCodes[args[0]]; ok {
			problem, whole := strings.CutSuffix(msg, "$")
			if !whole {
				problem += ".*"
			}
			e.code, e.msg = code, configWarning(regexp.QuoteMeta(fmt.Sprintf("config:%d: ", appendedConfigLine()))+problem)
		}
		return e
	}
	status, query, list := []string{"Status"}, []string{"query"}, []string{"list"}
	return []catEntry{
		bad("unknown-key", "NJOBS=3", submitLocal, `unknown setting "NJOBS" \(known: N_failed_max, dt_failed, NJOBS_MAX, RUN_DIRS, WHOLE_NODE, NWHOLE, MAX_CRASHES, RETRIES, RETRY_DELAY, RESCUE_CHECK, WAIT_FOR_CASES, TABLE_IDS, BACKEND, CASE_TIME_LIMIT, CASE_TIME_LIMIT_MIN, CASE_KILL_GRACE, RETRY_TIMEOUTS, OUTPUT\)$`),
		bad("case-time-limit-unit", "CASE_TIME_LIMIT=5y", submitLocal, `CASE_TIME_LIMIT must be a time limit for every case, as 90s, 30m or 2h, or a multiple of the median duration of the cases that succeeded, as 5x; got "5y"$`),
		bad("retry-timeouts-2", "RETRY_TIMEOUTS=2", status, `RETRY_TIMEOUTS must be 0 \(RETRIES runs again only the cases that failed\) or 1 \(and those that timed out\), got 2$`),
		bad("key-wrong-case", "njobs_max=3", status, `unknown setting "njobs_max" \(did you mean NJOBS_MAX\?\)$`),
		bad("key-typo-submit", "WAIT_FOR_CASE=60", submitLocal, `unknown setting "WAIT_FOR_CASE" \(did you mean WAIT_FOR_CASES\?\)$`),
		bad("key-typo-resubmit", "WAIT_FOR_CASE=60", []string{"resubmit", "1", "--backend", "local"}, `unknown setting "WAIT_FOR_CASE" \(did you mean WAIT_FOR_CASES\?\)$`),
		bad("key-typo-kill", "WAIT_FOR_CASE=60", []string{"kill"}, `unknown setting "WAIT_FOR_CASE" \(did you mean WAIT_FOR_CASES\?\)$`),
		bad("backend-not-a-name", "BACKEND=slurm local", submitLocal, `BACKEND must name a backend \(BACKEND=local, for one\), got "slurm local"$`),
		bad("whole-node-without-nwhole", "WHOLE_NODE=1", submitLocal, `WHOLE_NODE=1 needs NWHOLE, the cases each meta-job runs at once on its node \(its cores, e.g. NWHOLE=192\)$`),
		bad("nwhole-too-big", "NWHOLE=5000", status, `NWHOLE must be at most 4096, got 5000$`),
		bad("nwhole-fraction", "NWHOLE=2.5", status, `NWHOLE must be a whole number, got "2.5": write 2 or 3$`),
		bad("key-with-spaces", "N failed max=3", query, `unknown setting "N failed max"`),
		bad("empty-key", "=5", list, `unknown setting "" \(known: `),
		bad("missing-equals", "N_failed_max 5", submitLocal, `expected KEY=value, got "N_failed_max 5"$`),
		bad("key-alone", "RUN_DIRS", []string{"prune"}, `expected KEY=value, got "RUN_DIRS"$`),
		bad("empty-value", "N_failed_max=", []string{"clean"}, `N_failed_max must be a number >= 0, got ""$`),
		bad("negative", "dt_failed=-1", submitLocal, `dt_failed must be a number >= 0, got "-1"$`),
		bad("nan", "dt_failed=NaN", status, `dt_failed must be a number >= 0, got "NaN"$`),
		bad("inf", "NJOBS_MAX=Inf", query, `NJOBS_MAX must be at most 1000000000, got "Inf"$`),
		bad("minus-inf", "NJOBS_MAX=-Inf", list, `NJOBS_MAX must be a number >= 0, got "-Inf"$`),
		bad("huge", "N_failed_max=1e30", []string{"repair"}, `N_failed_max must be at most 1000000000, got "1e30"$`),
		bad("just-above-max", "NJOBS_MAX=1000000001", []string{"kill"}, `NJOBS_MAX must be at most 1000000000`),
		bad("overflow", "dt_failed=1e400", []string{"prune"}, `dt_failed must be at most 1000000000, got "1e400"$`),
		bad("hex", "NJOBS_MAX=0x10", status, `NJOBS_MAX must be a number >= 0, got "0x10"$`),
		bad("word", "RUN_DIRS=yes", query, `RUN_DIRS must be a number >= 0, got "yes"$`),
		bad("unit", "dt_failed=5s", submitLocal, `dt_failed must be a number >= 0, got "5s"$`),
		bad("two-values", "NJOBS_MAX=1 2", list, `NJOBS_MAX must be a number >= 0, got "1 2"$`),
		bad("nul-byte", "NJOBS_MAX=1\x00", status, `NJOBS_MAX must be a number >= 0, got "1\\x00"$`),
		bad("fraction", "NJOBS_MAX=1.9", submitLocal, `NJOBS_MAX must be a whole number, got "1\.9": write 1 or 2$`),
		bad("fraction-n-failed", "N_failed_max=2.5", status, `N_failed_max must be a whole number, got "2\.5": write 2 or 3$`),
		bad("overflow-integer", "NJOBS_MAX=99999999999999999999", query, `NJOBS_MAX must be at most 1000000000, got "99999999999999999999"$`),
		bad("inf-dt-failed", "dt_failed=Inf", list, `dt_failed must be at most 1000000000, got "Inf"$`),
		bad("nan-njobs", "NJOBS_MAX=NaN", submitLocal, `NJOBS_MAX must be a number >= 0, got "NaN"$`),
		// The template sets NJOBS_MAX on line 13: the last one won.
		bad("duplicate-key", "NJOBS_MAX=4", submitLocal, `NJOBS_MAX is set twice, on lines 13 and `+strconv.Itoa(appendedConfigLine())+`: keep one of them$`),
		bad("duplicate-key-status", "RUN_DIRS=0", status, `RUN_DIRS is set twice, on lines 17 and `+strconv.Itoa(appendedConfigLine())+`: keep one of them$`),
		bad("binary", "\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x03\x00>\x00\x01\x00\x00\x00\xd0\x10\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00", status, `expected KEY=value, got "\\x7fELF.*"\.\.\.$`),
		{name: "config-is-a-directory", setup: toDir("config"), args: status, code: 0, msg: configWarning(`config cannot be read \(is a directory\): make it a file of KEY=value lines, or remove it to use the defaults`)},
		{name: "config-is-a-directory-submit", setup: toDir("config"), args: submitLocal, code: 1, msg: `^farm: config cannot be read \(is a directory\): make it a file of KEY=value lines, or remove it to use the defaults$`},
		// A BACKEND no engine has is said of config's line, by the
		// commands that use it.
		{name: "config-backend-unknown", setup: appendTo("config", "BACKEND=pbs\n"), args: []string{"submit", "1"}, code: 1,
			msg: atLine("config", appendedConfigLine()) + `BACKEND=pbs: no backend farm knows by that name \(known: slurm, sge, local\): fix it in config, or give --backend$`},
		{name: "config-symlink-loop", setup: symlink("config", "config"), args: submitLocal, code: 1, msg: `^farm: config cannot be read \(too many levels of symbolic links\): make it a file of KEY=value lines`},
		{name: "config-bad-line-crlf", setup: write("config", "N_failed_max=5\r\ndt_failed=x\r\n"), args: status, code: 0, msg: configWarning(`config:2: dt_failed must be a number >= 0, got "x"`)},
		{name: "config-bad-line-crlf-submit", setup: write("config", "N_failed_max=5\r\ndt_failed=x\r\n"), args: submitLocal, code: 1, msg: atLine("config", 2) + `dt_failed must be a number >= 0, got "x"$`},
	}
}

// readingCodes are the commands that read a farm or cancel its jobs, with
// their exit codes on a farm never submitted (baseTable): a config that
// does not read is a warning to them. (farm wait is one too, but on a farm
// never submitted it has an error of its own to say after the warning:
// TestReadingCommandsWithBrokenConfig tests it on a farm that ran.)
var readingCodes = map[string]int{"Status": 0, "query": 0, "list": 0, "report": 0, "kill": 0, "prune": 0, "repair": 0, "clean": 0}

// configWarning is the one line a reading command says of a config that
// does not read (problem, a regexp), with which it reads the farm.
func configWarning(problem string) string {
	return `^farm: warning: ` + problem + `; reading the farm with the default settings: 'farm submit' and 'farm resubmit' refuse until it is fixed$`
}

// scriptEntries: job_script.sh, resubmit_script.sh and single_case.sh that
// submit must refuse before it submits anything. The table is numbered
// already in most (a refused submit must not number it either: the
// entries on an unnumbered table, and table-not-numbered-when-njobs-max-
// refuses, hold that).
func scriptEntries() []catEntry {
	return append(runTimeEntries(), scriptFileEntries()...)
}

// jobScriptEntry: submit with args refuses the job_script.sh that setup
// makes, with msg.
func jobScriptEntry(name string, setup func(*testing.T, string), args []string, msg string) catEntry {
	return catEntry{name: "job-script-" + name, base: baseNumbered, setup: setup, args: args, code: 1, msg: msg}
}

// resubmitScriptEntry: submit -auto refuses the resubmit_script.sh that
// setup makes, with msg.
func resubmitScriptEntry(name string, setup func(*testing.T, string), msg string) catEntry {
	return catEntry{name: "resubmit-script-" + name, base: baseNumbered, setup: setup, args: []string{"submit", "1", "-auto", "--backend", "local"}, code: 1, msg: msg}
}

// runTimeEntries: the run-time of job_script.sh, resubmit_script.sh and
// final.sh out of range, unreadable or missing.
func runTimeEntries() []catEntry {
	badTime := func(name, line, val, why string) catEntry {
		return jobScriptEntry(name, edit("job_script.sh", "#SBATCH -t 0-00:10\n", line+"\n"), submitLocal,
			`^farm: .*/job_script\.sh:6: bad run-time "`+val+`" \(`+why+`\); use a Slurm time such as 0-01:00 or 30$`)
	}
	// The local backend reads either engine's run-time: its message names both.
	noTime := `^farm: Job runtime sbatch argument \(-t or --time\) is missing in job_script\.sh\. Exiting \(add a line like '#SBATCH -t 0-01:00', or '#\$ -l h_rt=01:00:00' for Grid Engine\)$`
	// META's check: a run-time under 30 s (on Slurm, which counts whole
	// minutes; the local backend keeps short limits to the second) or
	// over 35 days.
	wrongTime := func(name, line, val string, args []string) catEntry {
		return jobScriptEntry(name, edit("job_script.sh", "#SBATCH -t 0-00:10\n", line+"\n"), args,
			`^farm: job_script\.sh:6: Wrong job runtime in job_script\.sh - `+regexp.QuoteMeta(val)+` \. Exiting \(the run-time must be from 30 seconds to 35 days, e\.g\. '#SBATCH -t 0-01:00'\)$`)
	}
	submitSlurm := []string{"submit", "1", "--backend", "slurm"}
	return []catEntry{
		wrongTime("run-time-10s-slurm", "#SBATCH -t 0:10", "0:10", submitSlurm),
		wrongTime("run-time-29s-slurm", "#SBATCH --time=0:29", "0:29", submitSlurm),
		wrongTime("run-time-0-slurm", "#SBATCH -t 0", "0", submitSlurm),
		wrongTime("run-time-over-35-days", "#SBATCH -t 35-00:00:01", "35-00:00:01", submitLocal),
		wrongTime("run-time-over-35-days-slurm", "#SBATCH --time 36-0", "36-0", submitSlurm),
		wrongTime("run-time-unlimited", "#SBATCH -t UNLIMITED", "UNLIMITED", submitLocal),
		wrongTime("run-time-infinite-slurm", "#SBATCH -t infinite", "infinite", submitSlurm),
		wrongTime("run-time-zero-local", "#SBATCH -t 0", "0", submitLocal),
		wrongTime("run-time-huge", "#SBATCH -t 99999999999", "99999999999", submitLocal),
		wrongTime("run-time-beyond-int64", "#SBATCH -t 99999999999999999999", "99999999999999999999", submitLocal),
		wrongTime("run-time-huge-days", "#SBATCH --time=9999999999999-00:00", "9999999999999-00:00", []string{"submit", "-1", "--backend", "local"}),
		wrongTime("run-time-quoted", `#SBATCH -t "40-0"`, `"40-0"`, submitLocal),
		// Under 30 s in any form, on any engine (issue 21: the local one
		// took these, and a 1 s job was killed in its first case).
		wrongTime("run-time-1s-local", "#SBATCH -t 0:0:1", "0:0:1", submitLocal),
		wrongTime("run-time-0:0:29-local", "#SBATCH -t 0:0:29", "0:0:29", submitLocal),
		wrongTime("run-time-29s-local", "#SBATCH --time=0:29", "0:29", submitLocal),
		wrongTime("run-time-00:00:05-local", "#SBATCH -t 00:00:05", "00:00:05", submitLocal),
		wrongTime("run-time-days-form-1s-local", "#SBATCH -t 0-0:0:1", "0-0:0:1", submitLocal),
		jobScriptEntry("run-time-h_rt-29-local", edit("job_script.sh", "#SBATCH -t 0-00:10\n", "#$ -l h_rt=29\n"), submitLocal,
			`^farm: job_script\.sh:6: Wrong job runtime in job_script\.sh - 29 \. Exiting \(the run-time must be from 30 seconds to 35 days, e\.g\. '#\$ -l h_rt=01:00:00'\)$`),
		// FARM_MIN_RUNTIME lowers the minimum only where the engine keeps
		// limits to the second, and must read.
		{name: "job-script-run-time-10s-slurm-min-runtime", base: baseNumbered, setup: edit("job_script.sh", "#SBATCH -t 0-00:10\n", "#SBATCH -t 0:10\n"), args: submitSlurm, env: []string{"FARM_MIN_RUNTIME=1s"}, code: 1,
			msg: `^farm: job_script\.sh:6: Wrong job runtime in job_script\.sh - 0:10 \. Exiting \(the run-time must be from 30 seconds to 35 days`},
		{name: "job-script-min-runtime-bad", base: baseNumbered, setup: edit("job_script.sh", "#SBATCH -t 0-00:10\n", "#SBATCH -t 0:10\n"), args: submitLocal, env: []string{"FARM_MIN_RUNTIME=5"}, code: 1,
			msg: `^farm: FARM_MIN_RUNTIME="5" is not a duration above 0 such as 5s: fix it, or unset it to keep the minimum run-time of 30 seconds$`},
		{name: "final-script-run-time-10s", base: baseNumbered, setup: write("final.sh", "#!/bin/bash\n#SBATCH -t 0:10\necho done\n"), args: submitLocal, code: 1,
			msg: `^farm: final\.sh:2: Wrong job runtime in final\.sh - 0:10 \. Exiting \(the run-time must be from 30 seconds to 35 days, e\.g\. '#SBATCH -t 0-01:00'\)$`},
		{name: "final-script-run-time-40-days", base: baseNumbered, setup: write("final.sh", "#!/bin/bash\n#$ -l h_rt=960:00:00\necho done\n"), args: submitLocal, code: 1,
			msg: `^farm: final\.sh:2: Wrong job runtime in final\.sh - 960:00:00 \. Exiting \(the run-time must be from 30 seconds to 35 days, e\.g\. '#\$ -l h_rt=01:00:00'\)$`},
		resubmitScriptEntry("run-time-10s", edit("resubmit_script.sh", "#SBATCH -t 0-00:10\n", "#SBATCH -t 0:0:10\n"), `^farm: resubmit_script\.sh:6: Wrong job runtime in resubmit_script\.sh - 0:0:10 \. Exiting \(the run-time must be from 30 seconds to 35 days`),
		// Refused before table.dat is numbered.
		{name: "job-script-run-time-unnumbered-table", setup: edit("job_script.sh", "#SBATCH -t 0-00:10\n", "#SBATCH -t 0:05\n"), args: submitSlurm, code: 1,
			msg: `^farm: job_script\.sh:6: Wrong job runtime in job_script\.sh - 0:05 \. Exiting`},
		{name: "job-script-run-time-resubmit", base: baseRan, setup: edit("job_script.sh", "#SBATCH -t 0-00:10\n", "#SBATCH -t 50-0\n"), args: []string{"resubmit", "1", "--backend", "local"}, code: 1,
			msg: `^farm: job_script\.sh:6: Wrong job runtime in job_script\.sh - 50-0 \. Exiting`, notOut: `Resubmitting`},
		// At 30 s it goes on to sbatch (the guard's, which fails).
		{name: "job-script-run-time-30s-slurm-passes", base: baseNumbered, setup: edit("job_script.sh", "#SBATCH -t 0-00:10\n", "#SBATCH -t 0:30\n"), args: submitSlurm, code: 1,
			msg: `^farm: Something wrong with sbatch farm submission: the bad-input catalogue uses no Slurm`, change: []string{"MISC/", "STATUSES/", "OUTPUT/", "farm.log"}},
		resubmitScriptEntry("run-time-over-35-days", edit("resubmit_script.sh", "#SBATCH -t 0-00:10\n", "#SBATCH -t 40-0\n"), `^farm: resubmit_script\.sh:6: Wrong job runtime in resubmit_script\.sh - 40-0 \. Exiting \(the run-time must be from 30 seconds to 35 days`),
		jobScriptEntry("run-time-on-command-line-huge", nil, []string{"submit", "1", "--backend", "local", "-t", "99999999999"}, `^farm: the run-time \(-t\) cannot be given on the command line: set it with '#SBATCH -t' in job_script\.sh$`),
		jobScriptEntry("no-run-time", edit("job_script.sh", "#SBATCH -t 0-00:10\n", ""), submitLocal, noTime),
		jobScriptEntry("run-time-commented-out", edit("job_script.sh", "#SBATCH -t 0-00:10\n", "##SBATCH -t 0-00:10\n"), submitLocal, noTime),
		badTime("run-time-word", "#SBATCH -t abc", "abc", `bad number "abc"`),
		badTime("run-time-too-many-fields", "#SBATCH -t 1:2:3:4", "1:2:3:4", `too many fields`),
		badTime("run-time-empty", "#SBATCH -t", "", `empty`),
		badTime("run-time-empty-long", "#SBATCH --time=", "", `empty`),
		badTime("run-time-negative", "#SBATCH --time=-5", "-5", `bad days ""`),
		badTime("run-time-days-only", "#SBATCH -t 1-", "1-", `bad number ""`),
		badTime("run-time-negative-minutes", "#SBATCH -t 0:-5", "0:-5", `bad days "0:"`),
		badTime("run-time-float", "#SBATCH -t 1.5", "1.5", `bad number "1\.5"`),
		badTime("run-time-days-too-many", "#SBATCH -t 1-2:3:4:5", "1-2:3:4:5", `too many fields`),
	}
}

// scriptFileEntries: job_script.sh, resubmit_script.sh and single_case.sh
// missing, directories, links, without the line that runs farm, not
// executable; and a run-time on the command line.
func scriptFileEntries() []catEntry {
	return []catEntry{
		{name: "job-script-missing", base: baseNumbered, setup: remove("job_script.sh"), args: submitLocal, code: 1,
			msg: `^farm: job_script\.sh is missing from the farm .*: restore it \(the template is in any new farm: 'farm init DIR'\)$`},
		// Reading a farm, or cancelling its jobs, needs no script: one
		// warning (issue 34).
		{name: "job-script-missing-list", base: baseRan, setup: remove("job_script.sh"), args: []string{"list"}, code: 0,
			msg: `^farm: warning: job_script\.sh is missing; reading the farm: 'farm submit' and 'farm resubmit' refuse until it is restored \(the template is in any new farm: 'farm init DIR'\)$`, out: `^1 +1 +meta +local +COMPLETED`},
		jobScriptEntry("is-a-directory", toDir("job_script.sh"), submitLocal, `^farm: job_script\.sh cannot be read \(is a directory\): restore it \(the template is in any new farm: 'farm init DIR'\)$`),
		jobScriptEntry("no-metajob-line", edit("job_script.sh", `exec "${FARM_BIN:-farm}" metajob`, "echo hello"), submitLocal,
			`^farm: job_script\.sh does not run 'farm metajob': restore its last line, exec "\$\{FARM_BIN:-farm\}" metajob \(see 'farm init' for the template\)$`),
		jobScriptEntry("metajob-only-in-a-comment", edit("job_script.sh", `exec "${FARM_BIN:-farm}" metajob`, `# exec farm metajob`), submitLocal, `^farm: job_script\.sh does not run 'farm metajob'`),
		jobScriptEntry("run-time-on-command-line", nil, []string{"submit", "1", "--backend", "local", "-t", "10"}, `^farm: the run-time \(-t\) cannot be given on the command line: set it with '#SBATCH -t' in job_script\.sh$`),
		jobScriptEntry("run-time-on-command-line-joined", nil, []string{"submit", "1", "--backend", "local", "-t10"}, `^farm: the run-time \(-t10\) cannot be given on the command line`),
		jobScriptEntry("time-on-command-line", nil, []string{"submit", "1", "--time=10", "--backend", "local"}, `^farm: the run-time \(--time=10\) cannot be given on the command line`),
		jobScriptEntry("time-on-command-line-split", nil, []string{"submit", "2", "--backend", "local", "--time", "1:00"}, `^farm: the run-time \(--time\) cannot be given on the command line`),
		// A short one too: no run-time on the command line, in any form.
		jobScriptEntry("run-time-on-command-line-1s", nil, []string{"submit", "1", "--backend", "local", "--time=0:0:1"}, `^farm: the run-time \(--time=0:0:1\) cannot be given on the command line: set it with '#SBATCH -t' in job_script\.sh$`),
		jobScriptEntry("h_rt-on-command-line-29s", nil, []string{"submit", "1", "--backend", "local", "-l", "h_vmem=1G,h_rt=29"}, `^farm: the run-time \(-l h_vmem=1G,h_rt=29\) cannot be given on the command line: set it with '#\$ -l h_rt=' in job_script\.sh$`),
		resubmitScriptEntry("no-run-time", edit("resubmit_script.sh", "#SBATCH -t 0-00:10\n", ""), `^farm: Job runtime sbatch argument \(-t or --time\) is missing in resubmit_script\.sh\. Exiting \(add a line like '#SBATCH -t 0-00:10', or '#\$ -l h_rt=00:10:00' for Grid Engine\)$`),
		resubmitScriptEntry("bad-run-time", edit("resubmit_script.sh", "#SBATCH -t 0-00:10\n", "#SBATCH -t ten\n"), `^farm: .*/resubmit_script\.sh:6: bad run-time "ten" \(bad number "ten"\); use a Slurm time`),
		resubmitScriptEntry("no-autojob-line", edit("resubmit_script.sh", `exec "${FARM_BIN:-farm}" autojob`, "true"), `^farm: resubmit_script\.sh does not run 'farm autojob': restore its last line`),
		resubmitScriptEntry("missing", remove("resubmit_script.sh"), `^farm: resubmit_script\.sh is missing: restore it \(the template is in any new farm: 'farm init DIR'\)$`),
		resubmitScriptEntry("is-a-directory", toDir("resubmit_script.sh"), `^farm: resubmit_script\.sh cannot be read \(is a directory\): restore it`),
		{name: "resubmit-script-missing-with-final", base: baseNumbered, setup: both(remove("resubmit_script.sh"), write("final.sh", "#!/bin/bash\n#SBATCH -t 5\necho done\n")),
			args: submitLocal, code: 1, msg: `^farm: resubmit_script\.sh is missing: restore it`},
		{name: "single-case-missing", base: baseNumbered, setup: remove("single_case.sh"), args: submitLocal, code: 1,
			msg: `^farm: single_case\.sh is missing from the farm .*: restore it \(the template is in any new farm: 'farm init DIR'\)$`},
		{name: "single-case-missing-status", base: baseRan, setup: remove("single_case.sh"), args: []string{"Status"}, code: 0,
			msg: `^farm: warning: single_case\.sh is missing; reading the farm: 'farm submit' and 'farm resubmit' refuse until it is restored`, out: `^1 +succeeded`},
		{name: "single-case-missing-and-config-kill", base: baseRan, setup: both(remove("single_case.sh"), appendTo("config", "WAIT_FOR_CASE=60\n")), args: []string{"kill"}, code: 0,
			msg: `^farm: warning: single_case\.sh is missing; config:\d+: unknown setting "WAIT_FOR_CASE" \(did you mean WAIT_FOR_CASES\?\); reading the farm with the default settings: 'farm submit' and 'farm resubmit' refuse until they are fixed$`},
		{name: "single-case-is-a-directory", base: baseNumbered, setup: toDir("single_case.sh"), args: submitLocal, code: 1,
			msg: `^farm: single_case\.sh cannot be read \(is a directory\): restore it \(the template is in any new farm: 'farm init DIR'\)$`},
		{name: "single-case-is-a-directory-resubmit", base: baseRan, setup: toDir("single_case.sh"), args: []string{"resubmit", "1", "--backend", "local"}, code: 1,
			msg: `^farm: single_case\.sh cannot be read \(is a directory\)`},
		{name: "single-case-dangling-symlink", base: baseNumbered, setup: symlink("single_case.sh", "gone.sh"), args: submitLocal, code: 1,
			msg: `^farm: single_case\.sh is missing from the farm`},
		// A single_case.sh that is not a bash script is run as a program:
		// without its x bit, each meta-job ended at its first case with
		// advice about the farm directory's owner (issue 21).
		{name: "single-case-python-not-executable", base: baseNumbered, setup: both(write("single_case.sh", "#!/usr/bin/env python3\nimport os\nprint(os.environ['ID'])\n"), chmod("single_case.sh", 0o644)), args: submitLocal, code: 1,
			msg: `^farm: single_case\.sh:1: "#!/usr/bin/env python3" is not bash's #! line, so farm runs single_case\.sh as a program, and it is not executable: make it executable \(chmod \+x single_case\.sh\), or make it a bash script \(#!/bin/bash\), which farm sources$`},
		{name: "single-case-python-not-executable-resubmit", base: baseRan, setup: both(write("single_case.sh", "#!/usr/bin/env python3\nprint(1)\n"), chmod("single_case.sh", 0o600)), args: []string{"resubmit", "1", "--backend", "local"}, code: 1,
			msg: `^farm: single_case\.sh:1: "#!/usr/bin/env python3" is not bash's #! line, so farm runs single_case\.sh as a program, and it is not executable: make it executable \(chmod \+x single_case\.sh\)`, notOut: `Resubmitting`},
		// The advice works: chmod +x, and the cases run.
		{name: "single-case-sh-e-not-executable", base: baseNumbered, setup: both(write("single_case.sh", "#!/bin/sh -e\neval \"$COMM\"\n"), chmod("single_case.sh", 0o644)), args: submitLocal, code: 1,
			msg: `^farm: single_case\.sh:1: "#!/bin/sh -e" is not bash's #! line, so farm runs single_case\.sh as a program, and it is not executable: make it executable \(chmod \+x single_case\.sh\)`,
			after: func(t *testing.T, dir string) {
				if out, err := exec.Command("chmod", "+x", filepath.Join(dir, "single_case.sh")).CombinedOutput(); err != nil {
					t.Fatalf("chmod +x: %v %s", err, out)
				}
				mustFarm(t, dir, "submit", "1", "--backend", "local")
				waitsWell(t, dir)
			}},
		// A #!/bin/sh script is sourced by bash, as META does: no x bit needed.
		{name: "single-case-sh-not-executable-is-sourced", base: baseNumbered, setup: both(write("single_case.sh", "#!/bin/sh\neval \"$COMM\"\n"), chmod("single_case.sh", 0o644)), args: submitLocal, code: 0,
			change: runFiles, after: waitsWell},
	}
}

// sure is the message of a submission of n jobs (more than 1000) refused
// for want of a terminal to ask "Are you sure?" on.
func sure(n, verb string) string {
	return `^farm: ` + n + ` jobs to ` + verb + ` \(more than 1000\), and no terminal to ask "Are you sure\?" on: add --yes to ` + verb + ` them; nothing was submitted$`
}

// sbatchLogsAndFails is a fake Slurm whose sbatch logs its arguments
// beside the farm (sbatch-args) and fails.
const sbatchLogsAndFails = `case "${0##*/}" in
sbatch) echo "$*" >> "$PWD/../sbatch-args"; echo "refused by the fake" >&2; exit 1 ;;
*) exit 0 ;;
esac`

// sbatchArgsWithout checks that sbatch (sbatchLogsAndFails) got none of
// the arguments flags.
func sbatchArgsWithout(flags ...string) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		b, err := os.ReadFile(filepath.Join(filepath.Dir(dir), "sbatch-args"))
		if err != nil {
			t.Fatalf("sbatch was not called: %v", err)
		}
		for _, a := range strings.Fields(string(b)) {
			if slices.Contains(flags, a) {
				t.Errorf("sbatch got farm's %s: %s", a, b)
			}
		}
	}
}

// argumentEntries: command lines farm must refuse (64 for usage, 1 for a
// refusal), changing nothing; and paths with spaces and shell
// metacharacters, which must work as any other.
func argumentEntries() []catEntry {
	return slices.Concat(usageEntries(), commandLineEntries(), strayArgumentEntries())
}

// usageEntry: the command line args is refused as a usage error (64), with
// msg and the pointer to 'farm help'.
func usageEntry(name string, args []string, msg string) catEntry {
	return catEntry{name: "args-" + name, args: args, code: 64, msg: msg + `.* \(see 'farm help'\)$`}
}

// onBase is entry e started from base.
func onBase(base catBase, e catEntry) catEntry {
	e.base = base
	return e
}

// undefinedFlag is the message of the flag -bogus.
const undefinedFlag = `^farm: flag provided but not defined: -bogus`

// usageEntries: the usage errors of each command's arguments and flags.
func usageEntries() []catEntry {
	wrongN := func(n string) string {
		return `^farm: Wrong first argument: ` + regexp.QuoteMeta(n) + ` \(should be a positive integer or -1\) ; exiting`
	}
	return []catEntry{
		usageEntry("submit-zero", []string{"submit", "0"}, wrongN("0")),
		usageEntry("submit-minus-two", []string{"submit", "-2"}, wrongN("-2")),
		usageEntry("submit-word", []string{"submit", "abc"}, wrongN("abc")),
		usageEntry("submit-empty-n", []string{"submit", ""}, wrongN("")),
		usageEntry("submit-fraction", []string{"submit", "1.5"}, wrongN("1.5")),
		usageEntry("submit-n-beyond-int64", []string{"submit", "99999999999999999999"}, wrongN("99999999999999999999")),
		usageEntry("submit-no-n", []string{"submit"}, `^farm: give the number of meta-jobs: 'farm submit N' \(N > 0\), or 'farm submit -1' for one job per case`),
		usageEntry("submit-unknown-backend", []string{"submit", "1", "--backend", "nosuch"}, `^farm: unknown backend "nosuch": use --backend slurm or --backend sge or --backend local`),
		usageEntry("submit-unknown-backend-joined", []string{"submit", "1", "--backend=pbs"}, `^farm: unknown backend "pbs"`),
		usageEntry("submit-backend-without-value", []string{"submit", "1", "--backend"}, `^farm: --backend needs a value: slurm or sge or local`),
		usageEntry("submit-backend-empty", []string{"submit", "1", "--backend="}, `^farm: --backend needs a value: slurm or sge or local`),
		usageEntry("resubmit-zero", []string{"resubmit", "0"}, wrongN("0")),
		usageEntry("resubmit-word", []string{"resubmit", "many"}, wrongN("many")),
		usageEntry("resubmit-no-n", []string{"resubmit"}, `^farm: give the number of meta-jobs`),
		usageEntry("resubmit-unknown-backend", []string{"resubmit", "1", "--backend", "nosuch"}, `^farm: unknown backend "nosuch"`),
		// A duration's error names the units.
		usageEntry("wait-timeout-word", []string{"wait", "--timeout", "abc"}, `^farm: --timeout abc: give a duration with a unit, such as 90s, 10m or 2h`),
		usageEntry("wait-timeout-no-unit", []string{"wait", "--timeout", "10"}, `^farm: --timeout 10: give a duration with a unit, such as 90s, 10m or 2h`),
		usageEntry("wait-interval-no-unit", []string{"wait", "--progress", "--interval=5"}, `^farm: --interval 5: give a duration with a unit, such as 90s, 10m or 2h`),
		usageEntry("wait-timeout-negative", []string{"wait", "--timeout", "-5s"}, `^farm: --timeout must not be negative \(0 waits for ever\), got -5s`),
		usageEntry("query-interval-too-short", []string{"query", "--watch", "--interval", "1ms"}, `^farm: --interval must be at least 100ms`),
		usageEntry("query-interval-word", []string{"query", "--interval", "abc"}, `^farm: --interval abc: give a duration with a unit, such as 90s, 10m or 2h`),
		// A mistyped flag of farm's own is refused before anything is
		// submitted, on every backend, with the flag it is near; sbatch's
		// and qsub's options near one (--mem, -A, -t) are not taken for
		// one (args-submit-over-1000-yes passes --mem=1G to sbatch).
		usageEntry("submit-typo-backend", []string{"submit", "2", "--backnd", "local"}, `^farm: unknown flag --backnd: did you mean --backend\? \(nothing was submitted\)`),
		usageEntry("submit-typo-yes-local", []string{"submit", "1", "--backend", "local", "--ye"}, `^farm: unknown flag --ye: did you mean --yes\?`),
		usageEntry("submit-typo-auto-slurm", []string{"submit", "1", "--backend", "slurm", "--mem=8G", "-aut"}, `^farm: unknown flag -aut: did you mean --auto\?`),
		usageEntry("submit-typo-joined", []string{"submit", "1", "--bakend=local"}, `^farm: unknown flag --bakend: did you mean --backend\?`),
		usageEntry("submit-typo-default-backend", []string{"submit", "1", "--yess"}, `^farm: unknown flag --yess: did you mean --yes\?`),
		onBase(baseRan, usageEntry("resubmit-typo-failed", []string{"resubmit", "1", "--backend", "local", "--faild"}, `^farm: unknown flag --faild: did you mean --failed\?`)),
		usageEntry("wait-typo-timeout", []string{"wait", "--timout", "1m"}, `^farm: flag provided but not defined: -timout: did you mean --timeout\?`),
		usageEntry("init-typo-engine", []string{"init", "--engin", "sge", "new"}, `^farm: flag provided but not defined: -engin: did you mean --engine\?`),
		usageEntry("resubmit-typo-cases", []string{"resubmit", "1", "--case", "3"}, `^farm: unknown flag --case: did you mean --cases\?`),
		usageEntry("wait-progress-interval-too-short", []string{"wait", "--progress", "--interval", "10ms"}, `^farm: --interval must be at least 100ms`),
		usageEntry("report-scale-too-large", []string{"report", "--png", "x.png", "--scale", "100"}, `^farm: --scale must be between 0.25 and 8, got 100`),
		usageEntry("report-argument", []string{"report", "out.html"}, `^farm: report takes no arguments, got "out.html"`),
		usageEntry("unknown-command", []string{"frobnicate"}, `^farm: unknown command "frobnicate"`),
		usageEntry("init-no-dir", []string{"init"}, `^farm: init takes one argument: the new farm directory`),
		usageEntry("init-two-dirs", []string{"init", "a", "b"}, `^farm: init takes one argument: the new farm directory`),
		usageEntry("completion-unknown-shell", []string{"completion", "fish"}, `^farm: completion takes one argument: bash or zsh`),
		usageEntry("completion-no-shell", []string{"completion"}, `^farm: completion takes one argument: bash or zsh`),
		usageEntry("global-flag-unknown", []string{"--bogus", "Status"}, undefinedFlag),
		usageEntry("global-farm-flag-after-command", []string{"Status", "-C"}, `^farm: flag provided but not defined: -C`),
	}
}

// keepN sets WAIT_FOR_CASES in config: submit and resubmit then keep an N
// above the cases (else they cut it to the cases, as META does).
var keepN = edit("config", "WAIT_FOR_CASES=0", "WAIT_FOR_CASES=1")

// commandLineEntries: command lines refused for what they ask (over 1000
// jobs without --yes, a farm submitted twice or never, a path that is no
// farm), and a path full of shell metacharacters taken as it is.
func commandLineEntries() []catEntry {
	weird := "a b;$(touch x)`touch y`'\"&|<>*?"
	return []catEntry{
		// Above 1000 jobs META asks "Are you sure?"; with no terminal to
		// ask on, farm refuses before it writes anything (the table stays
		// unnumbered), and says to add --yes. (N above the cases is cut
		// to the cases unless WAIT_FOR_CASES is set: keepN sets it.)
		{name: "args-submit-over-1000-no-terminal", setup: keepN, args: []string{"submit", "1001", "--backend", "local"}, code: 1, msg: sure("1001", "submit")},
		{name: "args-submit-simple-over-1000-cases", setup: write("table.dat", strings.Repeat("true\n", 1001)), args: []string{"submit", "-1", "--backend", "local"}, code: 1, msg: sure("1001", "submit")},
		{name: "args-resubmit-over-1000-no-terminal", base: baseRan, setup: keepN, args: []string{"resubmit", "5000", "--backend", "local"}, code: 1, msg: sure("5000", "resubmit"), notOut: `Resubmitting`},
		// --yes (-y) is farm's: the submission goes on, and sbatch does not
		// get it.
		{name: "args-submit-over-1000-yes", base: baseNumbered, setup: keepN, args: []string{"submit", "1001", "--yes", "--backend", "slurm", "--mem=1G"}, slurmBody: sbatchLogsAndFails, code: 1,
			msg:    `^farm: Something wrong with sbatch farm submission: refused by the fake \(sbatch call 1 of 1001; 0 job\(s\) submitted before it\)`,
			change: []string{"MISC/", "STATUSES/", "OUTPUT/", "farm.log"}, after: sbatchArgsWithout("--yes", "-y")},
		{name: "args-resubmit-over-1000-y", base: baseRan, setup: keepN, args: []string{"resubmit", "1001", "-y", "--backend", "slurm"}, slurmBody: sbatchLogsAndFails, code: 1,
			msg:    `^farm: Something wrong with sbatch farm submission: refused by the fake \(sbatch call 1 of 1001; 0 job\(s\) submitted before it\)`,
			change: []string{"MISC/claims.*/", "MISC/lanes.*/", "MISC/table.run2.*", "farm.log"}, after: sbatchArgsWithout("--yes", "-y")},
		// 1000 is not asked about (NJOBS_MAX refuses it, the question would
		// have come first).
		{name: "args-submit-1000-not-asked", setup: both(keepN, edit("config", "NJOBS_MAX=0", "NJOBS_MAX=999")), args: []string{"submit", "1000", "--backend", "local"}, code: 1,
			msg: `^farm: NJOBS_MAX=999 in config: the farm has 0 active job\(s\) and may submit at most 999 more now`},
		// A refused resubmit does not say "Resubmitting the N case(s)".
		{name: "args-resubmit-refused-by-njobs-max", base: baseRan, setup: both(keepN, edit("config", "NJOBS_MAX=0", "NJOBS_MAX=1")), args: []string{"resubmit", "2", "--backend", "local"}, code: 1,
			msg: `^farm: NJOBS_MAX=1 in config: the farm has 0 active job\(s\) and may submit at most 1 more now`, notOut: `Resubmitting`},
		{name: "args-resubmit-never-submitted", base: baseNumbered, args: []string{"resubmit", "1", "--backend", "local"}, code: 1,
			msg: `^farm: this farm was never submitted: use 'farm submit N' first$`},
		{name: "args-submit-twice", base: baseRan, args: submitLocal, code: 1,
			msg: `^farm: this farm was already submitted \(run 1\): use 'farm resubmit N' to run what is left, or 'farm clean --yes' to start over$`},
		{name: "args-submit-outside-a-farm", base: baseNone, args: submitLocal, code: 1,
			msg: `^farm: Non-farm directory .* \(none of job_script\.sh, single_case\.sh, MISC/ or STATUSES/\): cd into a farm directory, or make one with 'farm init DIR'$`},
		{name: "args-farm-flag-missing-dir", base: baseNone, args: []string{"-C", "no/such/farm", "Status"}, code: 1, msg: `^farm: Non-farm directory .*/no/such/farm \(none of job_script\.sh, single_case\.sh, MISC/ or STATUSES/\)`},
		{name: "args-farm-flag-a-file", setup: write("afile", "x"), args: []string{"-C", "afile", "query"}, code: 1, msg: `^farm: Non-farm directory .*/afile \(none of job_script\.sh, single_case\.sh, MISC/ or STATUSES/\)`},
		{name: "args-farm-flag-weird-path", base: baseNone, args: []string{"-C", weird, "list"}, code: 1, msg: `^farm: Non-farm directory .*a b;\$\(touch x\)` + "`touch y`" + `.* \(none of job_script\.sh, single_case\.sh, MISC/ or STATUSES/\)`},
		{name: "args-init-non-empty-dir", args: []string{"init", "."}, code: 1, msg: `^farm: \. exists and is not empty; give 'farm init' a new directory name \(nothing was changed\)$`},
		{name: "args-init-a-file", args: []string{"init", "table.dat"}, code: 1, msg: `^farm: table\.dat exists and is not a directory; give 'farm init' a new directory name \(nothing was changed\)$`},
		{name: "args-init-weird-path", base: baseNone, args: []string{"init", weird}, code: 0, change: []string{weird + "/"},
			after: func(t *testing.T, dir string) {
				// The shell metacharacters stay characters: nothing ran.
				for _, n := range []string{"x", "y", filepath.Join(weird, "x"), filepath.Join(weird, "y")} {
					if _, err := os.Stat(filepath.Join(dir, n)); err == nil {
						t.Errorf("%s was made: a metacharacter of the path was run by a shell", n)
					}
				}
			}},
		{name: "path-weird-farm-runs", base: baseNone,
			setup: func(t *testing.T, dir string) {
				harness.NewFarmAt(t, filepath.Join(dir, weird), []string{"echo ok > out.txt", "true"}, "0-00:10")
				mustFarm(t, filepath.Join(dir, weird), "submit", "1", "--backend", "local")
			},
			args: []string{"-C", weird, "wait", "--timeout", "2m"}, code: 0,
			change: []string{weird + "/STATUSES/", weird + "/OUTPUT/", weird + "/MISC/", weird + "/RUN1/", weird + "/RUN2/"},
			after: func(t *testing.T, dir string) {
				farm := filepath.Join(dir, weird)
				if b, _ := os.ReadFile(filepath.Join(farm, "RUN1", "out.txt")); string(b) != "ok\n" {
					t.Errorf("RUN1/out.txt = %q, want the case's output", b)
				}
				for _, d := range []string{dir, farm, filepath.Join(farm, "RUN1")} {
					for _, n := range []string{"x", "y"} {
						if _, err := os.Stat(filepath.Join(d, n)); err == nil {
							t.Errorf("%s/%s was made: a metacharacter of the path was run by a shell", d, n)
						}
					}
				}
			}},
	}
}

// strayArgumentEntries: an argument or an unknown flag given to a command
// that takes none.
func strayArgumentEntries() []catEntry {
	var out []catEntry
	for _, args := range [][]string{{"wait", "10m"}, {"kill", "123"}, {"prune", "123"}, {"Status", "-f", "extra"}, {"query", "watch"}, {"list", "all"}, {"clean", "yes"}, {"repair", "force"}, {"wait", "--timeout", "1s", "now"}} {
		stray := args[len(args)-1]
		out = append(out, usageEntry("stray-argument-"+args[0]+"-"+stray, args, `^farm: `+args[0]+` takes no arguments, got "`+stray+`" \(flags go before arguments\)`))
	}
	for _, cmd := range []string{"wait", "Status", "status", "list", "query", "clean", "kill", "prune", "repair", "init"} {
		name := "unknown-flag-" + cmd
		if cmd == "Status" {
			name = "unknown-flag-Status-capital"
		}
		out = append(out, usageEntry(name, []string{cmd, "--bogus"}, undefinedFlag))
	}
	return out
}

// miscEntries: a damaged MISC (claim state, job records, local backend
// records). A damaged claim state is refused with the advice to run
// 'farm repair', and that advice must work.
func miscEntries() []catEntry {
	resubmit := []string{"resubmit", "1", "--backend", "local"}
	repair := `: run 'farm repair' to rebuild it from the status records \(it refuses while jobs of the farm are queued or running\)$`
	chain := func(name string, setup func(*testing.T, string), args []string, msg string) catEntry {
		return catEntry{name: "misc-" + name, base: baseRan, setup: setup, args: args, code: 1, msg: msg, after: repairWorks}
	}
	jobs := func(name, record string, args []string, msg string) catEntry {
		return catEntry{name: "misc-jobs-" + name, base: baseRan, setup: onGlob("MISC/jobs/*", func(n string) func(*testing.T, string) { return write(n, record) }), args: args, code: 1, msg: msg}
	}
	damagedRecord := func(rec string) string {
		return `^farm: .*/MISC/jobs/[0-9]+\.[0-9a-f]+:1: damaged job record "` + regexp.QuoteMeta(rec) + `": restore the line as 'RUN BACKEND KIND JOBID' \(e\.g\. '1 local meta 7'\), or remove it if that job has ended$`
	}
	truncate := func(n string) func(*testing.T, string) {
		return func(t *testing.T, dir string) {
			b, err := os.ReadFile(filepath.Join(dir, n))
			if err != nil {
				t.Fatal(err)
			}
			write(n, string(b[:len(b)/2]))(t, dir)
		}
	}
	return []catEntry{
		chain("chain-garbage", write("MISC/chain", "garbage\n"), resubmit, `^farm: the farm's claim state .*/MISC/chain is damaged \(unreadable content "garbage\\n"\)`+repair),
		chain("chain-empty", write("MISC/chain", ""), []string{"query"}, `^farm: the farm's claim state .*/MISC/chain is damaged \(unreadable content ""\)`+repair),
		chain("chain-truncated", onGlob("MISC/chain", truncate), []string{"query", "--json"}, `^farm: the farm's claim state .*/MISC/chain is damaged \(unreadable content`),
		chain("chain-names-missing-claims", write("MISC/chain", "farm-chain v2 claims.0123456789abcdef\n"), resubmit, `^farm: the farm's claim state .*/MISC/claims\.0123456789abcdef is damaged \(the chain directory is gone\)`+repair),
		chain("chain-is-a-directory", toDir("MISC/chain"), resubmit, `^farm: the farm's claim state .*/MISC/chain is damaged \(a directory, not a file\)`+repair),
		{name: "misc-chain-missing", base: baseRan, setup: remove("MISC/chain"), args: resubmit, code: 1, after: repairWorks,
			msg: `^farm: the farm's claim state \(MISC/chain\) is missing but the farm has run before: run 'farm repair' to rebuild it from the status records$`},
		{name: "misc-chain-missing-submit", base: baseRan, setup: remove("MISC/chain"), args: submitLocal, code: 1, after: repairWorks,
			msg: `^farm: the farm's claim state \(MISC/chain\) is missing but the farm has run before: run 'farm repair'`},
		chain("generation-truncated", onGlob(lastGen, truncate), resubmit, `^farm: the farm's claim state .*/MISC/claims\.[0-9a-f]+/[0-9]+/g\.[0-9]+ is damaged \(not a generation record\)`+repair),
		chain("generation-empty", onGlob(lastGen, func(n string) func(*testing.T, string) { return write(n, "") }), []string{"query"}, `^farm: the farm's claim state .*/g\.[0-9]+ is damaged \(not a generation record\)`+repair),
		chain("generation-garbage", onGlob(lastGen, func(n string) func(*testing.T, string) { return write(n, "run=x\n") }), resubmit, `^farm: the farm's claim state .*/g\.[0-9]+ is damaged \(not a generation record\)`+repair),
		chain("generation-bad-field", onGlob(lastGen, func(n string) func(*testing.T, string) {
			return write(n, "farm-gen v1 gen=3 run=1 table=table.dat simple=false offset=zz cases=2\n")
		}), resubmit, `^farm: the farm's claim state .*/g\.[0-9]+ is damaged \(bad field "offset=zz"`),
		chain("claims-directory-gone", onGlob("MISC/claims.*", remove), []string{"query"}, `^farm: the farm's claim state .*/MISC/claims\.[0-9a-f]+ is damaged \(the chain directory is gone\)`+repair),
		jobs("garbage", "garbage\n", []string{"list"}, damagedRecord("garbage")),
		jobs("bad-run", "x local meta 1\n", []string{"query"}, damagedRecord("x local meta 1")),
		jobs("run-zero", "0 local meta 1\n", []string{"wait"}, damagedRecord("0 local meta 1")),
		jobs("three-fields", "1 local meta\n", resubmit, damagedRecord("1 local meta")),
		jobs("five-fields", "1 local meta 1 x\n", []string{"Status"}, damagedRecord("1 local meta 1 x")),
		jobs("unknown-backend", "1 pbs meta 1\n", []string{"list"},
			`^farm: .*/MISC/jobs records job\(s\) 1 on backend "pbs", which farm does not know: fix the records \(RUN BACKEND KIND JOBID, BACKEND one of slurm, sge, local\)$`),
		{name: "misc-jobs-directory-inside", base: baseRan, setup: func(t *testing.T, dir string) {
			os.Mkdir(filepath.Join(dir, "MISC/jobs/00000000000000000001.aaaa"), 0o755)
		},
			args: []string{"kill"}, code: 1, msg: `^farm: .*/MISC/jobs/00000000000000000001\.aaaa is a directory, not a job record: move it out of .*/MISC/jobs$`},
		// The local backend's records: a job spec that does not read is a
		// job gone; the farm goes on. A state record that does not read
		// (only ever replaced whole: damaged) is refused, naming it: the
		// job was shown PENDING, then FAILED, though it might run.
		{name: "misc-local-state-garbage", base: baseRan, setup: write("MISC/local/1.state", "garbage"), args: []string{"query", "--json"}, code: 1,
			msg:   localDamaged(`not a job state record: invalid character 'g' looking for beginning of value`),
			after: removeDamagedState},
		{name: "misc-local-state-empty", base: baseRan, setup: write("MISC/local/1.state", ""), args: []string{"resubmit", "1", "--backend", "local"}, code: 1,
			msg: localDamaged(`not a job state record: unexpected end of JSON input`), notOut: `Resubmitting`, after: removeDamagedState},
		{name: "misc-local-state-unknown", base: baseRan, setup: write("MISC/local/1.state", `{"State":"SLEEPING"}`), args: []string{"list"}, code: 1,
			msg: localDamaged(`unknown state "SLEEPING"`), after: removeDamagedState},
		{name: "misc-local-job-garbage", base: baseRan, setup: write("MISC/local/1.job", "{"), args: []string{"list", "--json"}, code: 0},
		{name: "misc-local-records-gone", base: baseRan, setup: remove("MISC/local"), args: []string{"wait"}, code: exitNotAllOK},
		// FARM_GPUS, the GPUs of the local backend's jobs: one that does
		// not read is refused before anything is submitted; one that
		// reads reaches the jobs, whose meta-jobs start with it.
		{name: "misc-local-farm-gpus-bad", env: []string{"FARM_GPUS=0,x"}, args: submitLocal, code: 1,
			msg: `^farm: local backend: FARM_GPUS="0,x": "x" is not a GPU index \(a whole number, 0 or more\); set it to the indexes of the GPUs of this machine that the farm's jobs may use, comma-separated \(e\.g\. FARM_GPUS=0,1\), or unset it$`},
		{name: "misc-local-farm-gpus-repeated-resubmit", base: baseRan, env: []string{"FARM_GPUS=1,1"}, args: []string{"resubmit", "1", "--backend", "local"}, code: 1,
			msg: `^farm: local backend: FARM_GPUS="1,1": GPU 1 is listed twice; set it to`, notOut: `Resubmitting`},
		{name: "misc-local-farm-gpus-runs", env: []string{"FARM_GPUS=0,1"}, setup: write("table.dat", "true #FARM gpus=1\ntrue\n"), args: submitLocal, code: 0,
			change: append([]string{"table.dat", "table.dat.orig"}, runFiles...), after: waitsWell},
	}
}

// localDamaged is the message about the damaged state record of local job
// 1 that says why.
func localDamaged(why string) string {
	return `^farm: .*/MISC/local/1\.state is damaged \(` + regexp.QuoteMeta(why) + `\): farm cannot tell whether local job 1 still runs; once no 'farm _localjob \.\.\. --id 1' process is left \(ps -ef \| grep _localjob\), remove the file, and the job counts as failed \(a minute after its submission\)$`
}

// removeDamagedState follows localDamaged's advice: with no supervisor of
// job 1 left, the file removed, the farm reads again.
func removeDamagedState(t *testing.T, dir string) {
	if out, _ := exec.Command("pgrep", "-f", "_localjob --dir "+dir+" --id 1 ").Output(); len(out) > 0 {
		t.Fatalf("job 1's supervisor still runs: %s", out)
	}
	remove("MISC/local/1.state")(t, dir)
	readsWell(t, dir)
}

// statusEntries: damaged status records. A line that does not read is
// skipped with one warning line naming it, and the farm goes on.
func statusEntries() []catEntry {
	warn := func(name, line string, args []string, code int, msg string) catEntry {
		return catEntry{name: "statuses-" + name, base: baseRan, setup: appendTo("STATUSES/status.1", line+"\n"), args: args, code: code,
			msg: `^farm: warning: .*/STATUSES/status\.1:9: ` + msg + `; line skipped$`} // the header, C S E records of cases 1 and 2, Q: 8 lines
	}
	status, query, list, wait := []string{"Status"}, []string{"query"}, []string{"list"}, []string{"wait"}
	return []catEntry{
		warn("garbage-line", "garbage line", status, 0, `unknown record "garbage"`),
		warn("garbage-line-query", "zzz", query, 0, `unknown record "zzz"`),
		warn("garbage-line-wait", "%%%", wait, exitNotAllOK, `unknown record "%%%"`),
		warn("start-nan", "S 3 NaN vm", status, 0, `S record: bad START "NaN"`),
		warn("end-start-nan", "E 1 0 NaN 1 vm", list, 0, `E record: bad START "NaN"`),
		warn("end-seconds-inf", "E 1 0 1795385182.982 Inf vm", status, 0, `E record: bad SECONDS "Inf"`),
		warn("end-seconds-huge", "E 1 0 1795385182.982 1e11 vm", query, 0, `E record: bad SECONDS "1e11"`),
		warn("start-beyond-range", "S 3 1e17 vm", wait, exitNotAllOK, `S record: bad START "1e17"`),
		warn("field-after-host", "E 1 0 1795385182.982 0.002 vm extra", status, 0, `E record: unexpected "extra" after HOST`),
		warn("short-end-record", "E 1 0", query, 0, `short E record "E 1 0": want E ID STATUS START SECONDS HOST`),
		warn("not-a-header", "# junk", list, 0, `a line starting with # that is not a "# farm-status v1" header`),
		warn("interrupt-bad-signal", "I 2 x 1795385182.982 0.1 vm", status, 0, `I record: bad SIGNAL "x"`),
		{name: "statuses-torn-last-line", base: baseRan, setup: appendTo("STATUSES/status.1", "E 9 0 17953"), args: status, code: 0},
		{name: "statuses-truncated-file", base: baseRan, setup: onGlob("STATUSES/status.1", func(n string) func(*testing.T, string) {
			return func(t *testing.T, dir string) { os.Truncate(filepath.Join(dir, n), 60) }
		}), args: status, code: 0},
		{name: "statuses-file-is-a-directory", base: baseRan, setup: func(t *testing.T, dir string) { os.Mkdir(filepath.Join(dir, "STATUSES/status.7"), 0o755) },
			args: status, code: 1, msg: `^farm: .*/STATUSES/status\.7 is a directory, not a status file: move it out of .*/STATUSES$`},
		{name: "statuses-directory-file-resubmit", base: baseRan, setup: func(t *testing.T, dir string) { os.Mkdir(filepath.Join(dir, "STATUSES/status.7"), 0o755) },
			args: []string{"resubmit", "1", "--backend", "local"}, code: 1, msg: `^farm: .*/STATUSES/status\.7 is a directory, not a status file`},
		{name: "statuses-is-a-file", base: baseRan, setup: both(remove("STATUSES"), write("STATUSES", "x\n")), args: status, code: 1,
			msg: `^farm: .*/STATUSES is not a directory: it is where the status records go; move it away$`},
		{name: "statuses-is-a-file-resubmit", base: baseRan, setup: both(remove("STATUSES"), write("STATUSES", "x\n")), args: []string{"resubmit", "1", "--backend", "local"}, code: 1,
			msg: `^farm: .*/STATUSES is not a directory`},
		{name: "statuses-stray-file", base: baseRan, setup: write("STATUSES/notes.txt", "mine\n"), args: status, code: 0},
		{name: "statuses-empty-status-file", base: baseRan, setup: write("STATUSES/status.9", ""), args: query, code: 0},
	}
}

// permissionEntries: files farm may not read or write. Root reads and
// writes whatever the modes say: as root (CI), farm runs as nobody
// (unprivileged).
func permissionEntries() []catEntry {
	perm := func(name, path string, args []string, what string) catEntry {
		return catEntry{name: "perm-" + name, unprivileged: true, base: baseRan, setup: chmod(path, 0), args: args, code: 1,
			msg: `^farm: open .*/` + what + `: permission denied: farm must read and write the farm directory's files; check their owner and modes \(ls -l\), or run farm as their owner$`}
	}
	return []catEntry{
		{name: "perm-table-unreadable", unprivileged: true, setup: chmod("table.dat", 0), args: submitLocal, code: 1,
			msg: `^farm: table\.dat cannot be read \(permission denied\): make it a file with one case`},
		{name: "perm-config-unreadable", unprivileged: true, setup: chmod("config", 0), args: submitLocal, code: 1,
			msg: `^farm: config cannot be read \(permission denied\)`},
		{name: "perm-config-unreadable-status", unprivileged: true, setup: chmod("config", 0), args: []string{"Status"}, code: 0,
			msg: configWarning(`config cannot be read \(permission denied\): make it a file of KEY=value lines, or remove it to use the defaults`)},
		{name: "perm-job-script-unreadable", unprivileged: true, base: baseNumbered, setup: chmod("job_script.sh", 0), args: submitLocal, code: 1,
			msg: `^farm: job_script\.sh cannot be read \(permission denied\)`},
		{name: "perm-farm-dir-read-only", unprivileged: true, setup: chmod(".", 0o555), args: submitLocal, code: 1,
			msg: `^farm: open .*/\.table\.dat\.tmp[0-9]+: permission denied: farm writes in the farm directory .*; make it writable \(chmod u\+w\), or copy the farm to a directory of yours$`},
		{name: "perm-farm-dir-read-only-numbered", unprivileged: true, base: baseNumbered, setup: chmod(".", 0o555), args: submitLocal, code: 1,
			msg: `^farm: mkdir .*/STATUSES: permission denied: farm writes in the farm directory .*; make it writable`},
		perm("statuses-unreadable", "STATUSES", []string{"Status"}, `STATUSES`),
		perm("statuses-unreadable-resubmit", "STATUSES", []string{"resubmit", "1", "--backend", "local"}, `STATUSES`),
		perm("status-file-unreadable", "STATUSES/status.1", []string{"query"}, `STATUSES/status\.1`),
		perm("misc-unreadable", "MISC", []string{"query"}, `MISC/chain`),
		perm("misc-jobs-unreadable", "MISC/jobs", []string{"list"}, `MISC/jobs`),
		{name: "perm-resubmit-script-unreadable", unprivileged: true, base: baseNumbered, setup: chmod("resubmit_script.sh", 0), args: []string{"submit", "1", "-auto", "--backend", "local"}, code: 1,
			msg: `^farm: resubmit_script\.sh cannot be read \(permission denied\)`},
	}
}

// signalEntries: SIGINT and SIGTERM to the commands that run for long.
// Each exits 130 with one line saying what was left, and leaves a farm
// that reads well; wait and watch leave the jobs running.
func signalEntries() []catEntry {
	return slices.Concat(longCommandSignalEntries(), inFlightSignalEntries(), slurmSilentEntries())
}

// signalJobFiles are the files that a signal to a command leaves to the
// farm's running jobs.
var signalJobFiles = []string{"STATUSES/", "OUTPUT/", "MISC/local/", "MISC/claims.*/", "MISC/lanes.*/", "MISC/rescue.*/", "RUN1/"}

// longCommandSignalEntries: SIGINT and SIGTERM to wait, query --watch,
// and a submit or resubmit whose sbatch never answers.
func longCommandSignalEntries() []catEntry {
	jobFiles := signalJobFiles
	goOn := `^farm: interrupted: the farm's jobs go on; 'farm query' shows them$`
	watchStarted := func(_ string, stdout func() string) bool { return strings.Contains(stdout(), "\n") }
	var out []catEntry
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		name := "int"
		if sig == syscall.SIGTERM {
			name = "term"
		}
		out = append(out,
			catEntry{name: "signal-" + name + "-wait", base: baseActive, args: []string{"wait"}, signal: sig, code: 130, msg: goOn, change: jobFiles,
				after: func(t *testing.T, dir string) { jobsGoOn(t, dir); readsWell(t, dir) }},
			catEntry{name: "signal-" + name + "-wait-timeout", base: baseActive, args: []string{"wait", "--timeout", "1h"}, signal: sig, code: 130, msg: goOn, change: jobFiles, after: jobsGoOn},
			catEntry{name: "signal-" + name + "-query-watch", base: baseActive, args: []string{"query", "--watch", "--interval", "100ms"}, signal: sig, ready: watchStarted, code: 130, msg: goOn, change: jobFiles,
				after: func(t *testing.T, dir string) { jobsGoOn(t, dir); readsWell(t, dir) }},
			// The sbatch in flight is let finish (killed, it might have
			// submitted a job all the same, with its ID lost): this one
			// never answers, so its timeout ends it, and farm says what
			// that means.
			catEntry{name: "signal-" + name + "-submit", base: baseNumbered, args: []string{"submit", "2", "--backend", "slurm"}, slowSlurm: true, ready: slurmStarted, signal: sig, code: 130,
				env:    []string{"FARM_SLURM_CALL_TIMEOUT=2s"},
				msg:    `^farm: interrupted: no job was recorded and run 1 was closed \(a job submitted all the same finds no case to run\): 'farm resubmit N' runs its cases; the submission in flight failed: Something wrong with sbatch farm submission: sbatch gave no answer within 2s; the job may or may not have been submitted \(check squeue; set FARM_SLURM_CALL_TIMEOUT to wait longer\) \(sbatch call 1 of 2; 0 job\(s\) submitted before it\)`,
				change: []string{"MISC/", "STATUSES/", "OUTPUT/", "farm.log"},
				after: func(t *testing.T, dir string) {
					readsWell(t, dir)
					if ids := harness.JobIDs(dir); len(ids) != 0 {
						t.Errorf("jobs %v recorded, want none", ids)
					}
				}},
			catEntry{name: "signal-" + name + "-resubmit", base: baseRan, args: []string{"resubmit", "1", "--backend", "slurm"}, slowSlurm: true, ready: slurmStarted, signal: sig, code: 130,
				env:    []string{"FARM_SLURM_CALL_TIMEOUT=2s"},
				msg:    `^farm: interrupted: no job was recorded and run 2 was closed \(a job submitted all the same finds no case to run\): 'farm resubmit N' runs its cases; the submission in flight failed: Something wrong with sbatch farm submission: sbatch gave no answer within 2s; the job may or may not have been submitted`,
				change: []string{"MISC/claims.*/", "MISC/lanes.*/", "MISC/table.run2.*", "farm.log"},
				after:  readsWell},
		)
	}
	return out
}

// inFlightSignalEntries: a signal while sbatch submits.
func inFlightSignalEntries() []catEntry {
	var out []catEntry
	// Ctrl-C at a terminal (SIGINT to farm's process group, sbatch's
	// too) or SIGTERM while sbatch submits: the sbatch in flight is let
	// finish, its job recorded, and no further sbatch is started. Every
	// job the fake Slurm took is in MISC/jobs, none else. (SIMPLE mode's
	// two cases are one job array, one sbatch: the submission is then
	// complete, and farm says so, exit 0.)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		name := map[syscall.Signal]string{syscall.SIGINT: "int", syscall.SIGTERM: "term"}[sig]
		// config: the --backend slurm of a submission that submitted a
		// job is written as BACKEND.
		inFlight := catEntry{base: baseNumbered, slurmBody: sbatchTakesTwoSeconds, ready: slurmStarted, signal: sig, group: sig == syscall.SIGINT,
			change: []string{"MISC/", "STATUSES/", "OUTPUT/", "farm.log", "config"}, after: recordsMatchSbatch}
		meta, simple := inFlight, inFlight
		meta.name, meta.args, meta.code = "signal-"+name+"-submit-records-the-job-in-flight", []string{"submit", "3", "--backend", "slurm"}, 130
		meta.msg = `^farm: interrupted: 1 job\(s\) were submitted before it \(see 'farm list'\)$`
		simple.name, simple.args, simple.code = "signal-"+name+"-submit-simple-records-the-array-in-flight", []string{"submit", "-1", "--backend", "slurm"}, 0
		out = append(out, meta, simple)
	}
	return out
}

// slurmSilentEntries: signals to the commands that ask a Slurm that does
// not answer, a Slurm that refuses, and wait's timeout.
func slurmSilentEntries() []catEntry {
	var out []catEntry
	// A farm whose job is on a Slurm that does not answer: every command
	// that asks for the job's state waits for squeue.
	onSlurm := onGlob("MISC/jobs/*", func(n string) func(*testing.T, string) { return write(n, "1 slurm meta 1\n") })
	for _, args := range [][]string{{"list"}, {"query"}, {"Status"}, {"kill"}, {"prune"}, {"clean"}, {"resubmit", "1"}} {
		for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
			name := map[syscall.Signal]string{syscall.SIGINT: "int", syscall.SIGTERM: "term"}[sig]
			out = append(out, catEntry{name: "signal-" + name + "-" + args[0] + "-asking-slurm", base: baseRan, setup: onSlurm, args: args,
				slowSlurm: true, ready: slurmStarted, signal: sig, code: 130,
				msg: `^farm: interrupted: asking Slurm for the state of 1 job\(s\): squeue -h -t all -j 1 `})
		}
	}
	// A Slurm that refuses (the fake commands of every entry fail).
	out = append(out,
		catEntry{name: "slurm-sbatch-fails", base: baseNumbered, args: []string{"submit", "2", "--backend", "slurm"}, code: 1,
			msg:    `^farm: Something wrong with sbatch farm submission: the bad-input catalogue uses no Slurm \(sbatch call 1 of 2; 0 job\(s\) submitted before it\)`,
			change: []string{"MISC/", "STATUSES/", "OUTPUT/", "farm.log"},
			after: func(t *testing.T, dir string) {
				readsWell(t, dir)
				if ids := harness.JobIDs(dir); len(ids) != 0 {
					t.Errorf("jobs %v recorded, want none", ids)
				}
			}},
		catEntry{name: "slurm-squeue-fails-list", base: baseRan, setup: onSlurm, args: []string{"list"}, code: 1,
			msg: `^farm: asking Slurm for the state of 1 job\(s\): squeue -h -t all -j 1 .*: exit status 1: the bad-input catalogue uses no Slurm$`},
		catEntry{name: "slurm-squeue-fails-kill", base: baseRan, setup: onSlurm, args: []string{"kill"}, code: 1,
			msg: `^farm: asking Slurm for the state of 1 job\(s\): squeue .*: exit status 1: the bad-input catalogue uses no Slurm$`},
		catEntry{name: "slurm-squeue-fails-resubmit", base: baseRan, setup: onSlurm, args: []string{"resubmit", "1"}, code: 1,
			msg: `^farm: asking Slurm for the state of 1 job\(s\): squeue .*: exit status 1: the bad-input catalogue uses no Slurm$`},
	)
	out = append(out, catEntry{name: "wait-timeout-runs-out", base: baseActive, args: []string{"wait", "--timeout", "300ms"}, code: 2,
		msg: `^farm: timed out after 300ms; jobs are still pending or running$`, change: signalJobFiles, after: jobsGoOn})
	return out
}

// appendedConfigLine is the line number of a line appended to the config
// that farm init writes: the template's lines, plus one.
func appendedConfigLine() int {
	b, err := os.ReadFile(filepath.Join("..", "templates", "files", "config"))
	if err != nil {
		panic(err) // the test runs in its package's directory
	}
	return bytes.Count(b, []byte("\n")) + 1
}
