package integration

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Issue 34: what a new user hits in the first hour.

// configTypo appends WAIT_FOR_CASE=60 (WAIT_FOR_CASES misspelt) to the
// farm's config and returns the line it is on.
func configTypo(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "config"))
	if err != nil {
		t.Fatal(err)
	}
	appendFile(t, dir, "config", "WAIT_FOR_CASE=60\n")
	return strings.Count(string(b), "\n") + 1
}

// oneWarning checks that stderr is exactly one line, the warning want (a
// regexp).
func oneWarning(t *testing.T, what string, r result, want string) {
	t.Helper()
	line, ok := strings.CutSuffix(r.Err, "\n")
	if !ok || strings.Contains(line, "\n") || !regexp.MustCompile(want).MatchString(line) {
		t.Errorf("%s: stderr %q, want one line matching %s", what, r.Err, want)
	}
}

// TestReadingCommandsWithBrokenConfig: a typo in config does not stop the
// commands that read the farm or cancel its jobs (they say it in one
// warning line and read with the default settings); submit and resubmit
// refuse with the config's error.
func TestReadingCommandsWithBrokenConfig(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, []string{"sleep 60", "true"}, "0-00:10")
	mustFarm(t, dir, "submit", "1", "--backend", "local")
	// The meta-job reads config when it starts: the typo comes after.
	waitFor(t, 30*time.Second, "case 1 to start", func() bool {
		return statusJSON(t, dir)[1].State == "running"
	})
	n := configTypo(t, dir)
	problem := regexp.QuoteMeta(`config:` + strconv.Itoa(n) + `: unknown setting "WAIT_FOR_CASE" (did you mean WAIT_FOR_CASES?)`)
	warning := `^farm: warning: ` + problem + `; reading the farm with the default settings: 'farm submit' and 'farm resubmit' refuse until it is fixed$`
	for _, c := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"Status"}, 0, `(?m)^1 +running`},
		{[]string{"query"}, 0, `1 running`},
		{[]string{"list"}, 0, `(?m)^1 +1 +meta +local +RUNNING`},
		{[]string{"prune"}, 0, `no job of the farm is pending`},
		{[]string{"kill"}, 0, `^Cancelled 1 job\(s\): 1`},
		{[]string{"wait", "--timeout", "1m"}, exitNotAllOK, `2 cases: 0 succeeded, 0 failed, 1 interrupted, 1 never ran`},
	} {
		r := farmIn(t, dir, nil, c.args...)
		what := "farm " + strings.Join(c.args, " ")
		if r.Code != c.code || !regexp.MustCompile(c.out).MatchString(r.Out) {
			t.Errorf("%s: exit %d, stdout %q; want %d and %s", what, r.Code, r.Out, c.code, c.out)
		}
		oneWarning(t, what, r, warning)
	}
	for _, args := range [][]string{{"submit", "1", "--backend", "local"}, {"resubmit", "1", "--backend", "local"}} {
		r := farmIn(t, dir, nil, args...)
		if want := "farm: " + regexp.MustCompile(`\\(.)`).ReplaceAllString(problem, "$1") + "\n"; r.Code != 1 || r.Err != want {
			t.Errorf("farm %s: exit %d, stderr %q; want 1 and %q", strings.Join(args, " "), r.Code, r.Err, want)
		}
	}
}

// TestMissingScriptIsNotANonFarm: a farm without single_case.sh (or
// job_script.sh) is still a farm: Status reads it with a warning, submit
// says which script to restore; "Non-farm directory" is said of a
// directory with no farm in it only.
func TestMissingScriptIsNotANonFarm(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, []string{"true", "false"}, "0-00:10")
	mustFarm(t, dir, "submit", "1", "--backend", "local")
	farmIn(t, dir, nil, "wait", "--timeout", "1m")
	if err := os.Remove(filepath.Join(dir, "single_case.sh")); err != nil {
		t.Fatal(err)
	}
	r := farmIn(t, dir, nil, "Status")
	if r.Code != 0 || !regexp.MustCompile(`(?m)^1 +succeeded`).MatchString(r.Out) {
		t.Errorf("Status without single_case.sh: exit %d, stdout %q", r.Code, r.Out)
	}
	oneWarning(t, "Status", r, `^farm: warning: single_case\.sh is missing; reading the farm: 'farm submit' and 'farm resubmit' refuse until it is restored \(the template is in any new farm: 'farm init DIR'\)$`)
	r = farmIn(t, dir, nil, "resubmit", "1", "--backend", "local")
	if r.Code != 1 || !strings.HasPrefix(r.Err, "farm: single_case.sh is missing from the farm ") || strings.Contains(r.Err, "Non-farm") {
		t.Errorf("resubmit without single_case.sh: exit %d, stderr %q", r.Code, r.Err)
	}
	// A directory with a table and nothing else (a user's home, say) is
	// no farm, nor is an empty one.
	only := t.TempDir()
	if err := os.WriteFile(filepath.Join(only, "table.dat"), []byte("true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"list"}, {"submit", "1", "--backend", "local"}} {
		r = farmIn(t, only, nil, args...)
		if r.Code != 1 || !strings.HasPrefix(r.Err, "farm: Non-farm directory ") {
			t.Errorf("farm %s with only table.dat: exit %d, stderr %q", strings.Join(args, " "), r.Code, r.Err)
		}
	}
	for _, args := range [][]string{{"Status"}, {"submit", "1", "--backend", "local"}} {
		r = farmIn(t, t.TempDir(), nil, args...)
		if r.Code != 1 || !strings.HasPrefix(r.Err, "farm: Non-farm directory ") {
			t.Errorf("farm %s in an empty directory: exit %d, stderr %q", strings.Join(args, " "), r.Code, r.Err)
		}
	}
}

// recordingSlurm makes a directory of fake Slurm commands, for PATH, that
// make Slurm the backend farm would pick by itself (scontrol ping answers
// "UP") and write every call to the file it returns; sbatch fails.
func recordingSlurm(t *testing.T) (dir, calls string) {
	t.Helper()
	dir = t.TempDir()
	calls = filepath.Join(dir, "calls")
	body := `#!/bin/sh
echo "$(basename "$0") $*" >> '` + calls + `'
if [ "$(basename "$0") $1" = "scontrol ping" ]; then echo "Slurmctld(primary) at fake is UP"; exit 0; fi
if [ "$(basename "$0")" = squeue ]; then exit 0; fi
echo "fake Slurm: not for this test" >&2
exit 1
`
	for _, name := range []string{"sbatch", "squeue", "scontrol", "scancel", "sacct"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir, calls
}

// submitted reports whether the fake Slurm of recordingSlurm was asked to
// submit a job.
func submitted(t *testing.T, calls string) bool {
	b, err := os.ReadFile(calls)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Contains(string(b), "sbatch")
}

// TestAdoptWithoutConfigHRemembersBackend: farm adopt takes an older META
// farm without config.h (farm's defaults, said in its summary), and the
// --backend local it was given is the farm's from then on: 'farm resubmit'
// without --backend runs on the local backend although Slurm answers here.
func TestAdoptWithoutConfigHRemembersBackend(t *testing.T) {
	t.Parallel()
	dir := metaFarm(t, 4, []int{1, 2}, []int{3})
	if err := os.Remove(filepath.Join(dir, "config.h")); err != nil {
		t.Fatal(err)
	}
	slurmDir, calls := recordingSlurm(t)
	path := []string{"PATH=" + slurmDir + ":" + os.Getenv("PATH")}
	r := farmIn(t, dir, path, "adopt", "--backend", "local")
	if r.Code != 0 {
		t.Fatalf("adopt without config.h: exit %d\nstdout: %s\nstderr: %s", r.Code, r.Out, r.Err)
	}
	for _, want := range []string{
		"no config.h (an older META farm): config has farm's defaults (RUN_DIRS=0)",
		"BACKEND=local in config: 'farm submit' and 'farm resubmit' use the local backend unless given --backend",
	} {
		if !strings.Contains(r.Out, want) {
			t.Errorf("adopt said %q, which lacks %q", r.Out, want)
		}
	}
	if out := mustFarm(t, dir, "list"); !strings.HasPrefix(out, "Backend: local (BACKEND in config, line ") {
		t.Errorf("list does not start with the farm's backend: %q", out)
	}
	r = farmIn(t, dir, path, "resubmit", "2")
	if r.Code != 0 || !strings.Contains(r.Out, "on the local backend") {
		t.Fatalf("resubmit without --backend: exit %d\nstdout: %s\nstderr: %s", r.Code, r.Out, r.Err)
	}
	if submitted(t, calls) {
		t.Errorf("resubmit without --backend went to Slurm, not to the adopted farm's local backend")
	}
	if out := farmIn(t, dir, nil, "wait", "--timeout", "2m").Out; !strings.Contains(out, "4 cases: 4 succeeded") {
		t.Errorf("wait said %q", out)
	}
}

// TestSubmitBackendIsRemembered: 'farm submit --backend local' writes
// BACKEND=local to config, which 'farm clean --yes' keeps: the next 'farm
// submit' without --backend runs on the local backend although Slurm
// answers here; an explicit --backend still wins for its command.
func TestSubmitBackendIsRemembered(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, []string{"true", "false"}, "0-00:10")
	out := mustFarm(t, dir, "submit", "1", "--backend", "local")
	if !strings.Contains(out, "Wrote BACKEND=local to config") {
		t.Errorf("submit --backend local said %q", out)
	}
	farmIn(t, dir, nil, "wait", "--timeout", "1m")
	mustFarm(t, dir, "clean", "--yes")
	slurmDir, calls := recordingSlurm(t)
	path := []string{"PATH=" + slurmDir + ":" + os.Getenv("PATH")}
	r := farmIn(t, dir, path, "submit", "1")
	if r.Code != 0 || !strings.Contains(r.Out, "on the local backend") || strings.Contains(r.Out, "Wrote BACKEND") {
		t.Fatalf("submit without --backend: exit %d\nstdout: %s\nstderr: %s", r.Code, r.Out, r.Err)
	}
	if submitted(t, calls) {
		t.Errorf("submit without --backend went to Slurm, not to the farm's local backend")
	}
	farmIn(t, dir, nil, "wait", "--timeout", "1m")
	// --backend slurm for one command: it is tried (and fails here),
	// and, as it submitted nothing, BACKEND stays local.
	if r := farmIn(t, dir, path, "resubmit", "1", "--backend", "slurm"); r.Code == 0 || !submitted(t, calls) {
		t.Errorf("resubmit --backend slurm: exit %d, sbatch called %t; want a failure from the fake sbatch", r.Code, submitted(t, calls))
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "config")); !regexp.MustCompile(`(?m)^BACKEND=local # written by 'farm submit --backend local'`).Match(b) || strings.Count(string(b), "\nBACKEND=") != 1 {
		t.Errorf("config after the failed resubmit:\n%s", b)
	}
}

// TestInitBackendIsRemembered: 'farm init --backend local DIR' writes
// BACKEND=local to the new farm's config, so its first 'farm submit'
// without --backend runs on this machine although Slurm answers here;
// --backend sge picks Grid Engine's job scripts too; an unknown name makes
// no farm.
func TestInitBackendIsRemembered(t *testing.T) {
	t.Parallel()
	top := t.TempDir()
	dir := filepath.Join(top, "f")
	r := farmIn(t, top, nil, "init", "--backend", "local", dir)
	if r.Code != 0 || !strings.Contains(r.Out, "Its backend is local (BACKEND in config)") {
		t.Fatalf("init --backend local: exit %d\nstdout: %s\nstderr: %s", r.Code, r.Out, r.Err)
	}
	if err := os.WriteFile(filepath.Join(dir, "table.dat"), []byte("true\ntrue\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	setLimit(t, dir, "0-00:10")
	slurmDir, calls := recordingSlurm(t)
	path := []string{"PATH=" + slurmDir + ":" + os.Getenv("PATH")}
	r = farmIn(t, dir, path, "submit", "2")
	if r.Code != 0 || !strings.Contains(r.Out, "on the local backend") {
		t.Fatalf("submit without --backend: exit %d\nstdout: %s\nstderr: %s", r.Code, r.Out, r.Err)
	}
	if submitted(t, calls) {
		t.Errorf("submit without --backend went to Slurm, not to the backend farm init was given")
	}
	if out := farmIn(t, dir, nil, "wait", "--timeout", "1m").Out; !strings.Contains(out, "2 cases: 2 succeeded") {
		t.Errorf("wait said %q", out)
	}

	sgeDir := filepath.Join(top, "g")
	mustFarm(t, top, "init", "--backend", "sge", sgeDir)
	if b, _ := os.ReadFile(filepath.Join(sgeDir, "job_script.sh")); !strings.Contains(string(b), "#$ -l h_rt=") {
		t.Errorf("init --backend sge wrote no Grid Engine job script:\n%s", b)
	}
	if b, _ := os.ReadFile(filepath.Join(sgeDir, "config")); !regexp.MustCompile(`(?m)^BACKEND=sge `).Match(b) {
		t.Errorf("init --backend sge: config has no BACKEND=sge")
	}
	if r := farmIn(t, top, nil, "init", "--backend", "slurmm", filepath.Join(top, "h")); r.Code != 64 || !strings.Contains(r.Err, `unknown backend "slurmm"`) {
		t.Errorf("init --backend slurmm: exit %d, %q", r.Code, r.Err)
	}
	if _, err := os.Stat(filepath.Join(top, "h")); err == nil {
		t.Errorf("init with an unknown backend made the farm")
	}
}

// TestAdoptOfAFarmOfFarms: farm adopt in a farm made by farm init says it
// is one already, before any advice about its config (which, followed —
// "move config away" —, only led to that same refusal), and changes
// nothing.
func TestAdoptOfAFarmOfFarms(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, []string{"true"}, "0-00:10")
	before := snapshot(t, dir)
	r := farmIn(t, dir, nil, "adopt", "--backend", "local")
	if r.Code != 1 || !strings.Contains(r.Err, "this is a farm of farm's already (adopted before, or made by farm init), with nothing to adopt") || strings.Contains(r.Err, "move config away") {
		t.Errorf("adopt of a farm made by farm init: exit %d, %q", r.Code, r.Err)
	}
	if !maps.Equal(snapshot(t, dir), before) {
		t.Errorf("adopt changed the farm")
	}
}

// TestBackendNotWrittenThroughALinkOut: a config that is a symbolic link
// to a file outside the farm (one config shared by several farms) is not
// rewritten by 'farm submit --backend local', which would pin every farm
// sharing it to this backend; the submit says so in one warning and runs.
func TestBackendNotWrittenThroughALinkOut(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, []string{"true"}, "0-00:10")
	shared := filepath.Join(t.TempDir(), "shared-config")
	b, err := os.ReadFile(filepath.Join(dir, "config"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(shared, b, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, "config"))
	if err := os.Symlink(shared, filepath.Join(dir, "config")); err != nil {
		t.Fatal(err)
	}
	r := farmIn(t, dir, nil, "submit", "1", "--backend", "local")
	if r.Code != 0 || !strings.Contains(r.Err, "farm: warning: could not write BACKEND=local to config (config is a symbolic link to "+shared+", outside the farm directory") {
		t.Errorf("submit: exit %d, stderr %q", r.Code, r.Err)
	}
	if after, _ := os.ReadFile(shared); string(after) != string(b) {
		t.Errorf("the shared config outside the farm was rewritten:\n%s", after)
	}
	mustFarm(t, dir, "wait", "--timeout", "1m")
}
