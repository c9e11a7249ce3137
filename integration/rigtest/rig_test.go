// Package rigtest runs farm end to end on the cluster rig of
// integration/cluster-up: a multi-node Slurm whose nodes each mount the
// Gluster volumes with a FUSE client of their own. The farms live on the
// shared filesystem, are submitted from the head (this machine's own
// namespaces) and their meta-jobs run on the nodes, which the tests power
// off and damage. The tests skip with one loud line when the rig is not up,
// unless FARM_REQUIRE_CLUSTER=1 (as in CI), where they fail. TestRig runs
// them in two lanes at once, on the rig's two partitions.
package rigtest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/farm-hpc/farm/integration/harness"
	"github.com/farm-hpc/farm/internal/testreq"
)

// theRig is the rig the tests run on, nil when it is not up (why says why).
var (
	theRig *rig
	why    string
)

func TestMain(m *testing.M) {
	// The test binary is also the clients of the primitive races
	// (primitives_test.go), run on the rig's nodes.
	switch os.Getenv("RIGTEST_ROLE") {
	case "racer":
		os.Exit(racer())
	}
	theRig, why = findRig()
	if theRig != nil {
		// Every farm and Slurm command of these tests talks to the rig's
		// Slurm, not to slurm-up's.
		os.Setenv("SLURM_CONF", theRig.env["SLURM_CONF"])
	}
	// Cases keep a job's own OMP_NUM_THREADS and CUDA_VISIBLE_DEVICES;
	// the shell's must not reach the tests' jobs.
	os.Unsetenv("OMP_NUM_THREADS")
	// A meta-job stopped or killed inside its claim commit holds the
	// others' claims up for voidAfter (casetable): 2 s in tests, not 20.
	os.Setenv("FARM_CLAIM_VOID_AFTER", "2s")
	os.Unsetenv("CUDA_VISIBLE_DEVICES")
	code := m.Run()
	harness.Cleanup()
	os.Exit(code)
}

// rig is the cluster rig as its env file describes it.
type rig struct {
	dir    string            // FARM_CLUSTER_DIR
	env    map[string]string // its env file
	mnt    string            // where every node mounts the volumes
	nodes  int
	script string // integration/cluster
}

// findRig reads the rig's env file and checks that its Slurm answers.
func findRig() (*rig, string) {
	env, err := harness.RigEnv()
	if err != nil {
		return nil, err.Error()
	}
	r := &rig{dir: env["FARM_CLUSTER_DIR"], env: env, script: filepath.Join(harness.Root(), "integration", "cluster")}
	r.mnt = env["FARM_CLUSTER_MNT"]
	r.nodes, _ = strconv.Atoi(env["FARM_CLUSTER_NODES"])
	if r.mnt == "" || r.nodes < 4 || env["SLURM_CONF"] == "" {
		return nil, fmt.Sprintf("%s/env does not describe a rig of 4 or more nodes", r.dir)
	}
	cmd := exec.Command("scontrol", "ping")
	cmd.Env = append(os.Environ(), "SLURM_CONF="+env["SLURM_CONF"])
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "is UP") {
		return nil, fmt.Sprintf("the rig's slurmctld does not answer (%v: %s)", err, strings.TrimSpace(string(out)))
	}
	return r, ""
}

var skipOnce = make(chan struct{}, 1)

// needRig returns the rig, or skips t (fails it with FARM_REQUIRE_CLUSTER=1).
func needRig(t *testing.T) *rig {
	t.Helper()
	if theRig != nil {
		return theRig
	}
	if !testreq.Required("FARM_REQUIRE_CLUSTER") {
		select {
		case skipOnce <- struct{}{}:
			fmt.Fprintf(os.Stderr, "CLUSTER TESTS SKIPPED: %s\n", why)
		default:
		}
	}
	testreq.Skip(t, "FARM_REQUIRE_CLUSTER", "CLUSTER TESTS SKIPPED: "+why)
	return nil
}

// run runs integration/cluster with args, failing t on an error.
func (r *rig) run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(r.script, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("integration/cluster %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// onNode runs a command on node n and returns its output.
func (r *rig) onNode(t *testing.T, n int, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command(r.script, append([]string{"exec", strconv.Itoa(n)}, args...)...).CombinedOutput()
	return string(out), err
}

// restore has node n up again (booted, its slurmd running, in service) at
// the end of t.
func (r *rig) restore(t *testing.T, n int) {
	t.Cleanup(func() { r.run(t, "ensure", strconv.Itoa(n)) })
}

var nameRe = regexp.MustCompile(`[^A-Za-z0-9]+`)

// farm makes a farm on the volume of profile, with the given table and
// run-time, in a directory of its own that is removed when the test passes.
// When the test fails it logs what Slurm says of the farm's jobs and the
// farm's files; in any case it cancels the jobs left.
func (r *rig) farm(t *testing.T, profile string, table []string, limit string) string {
	t.Helper()
	base := filepath.Join(r.mnt, profile)
	if _, err := os.Stat(base); err != nil {
		t.Fatalf("the rig has no %s volume: %v", profile, err)
	}
	dir := filepath.Join(base, fmt.Sprintf("%s-%06d", nameRe.ReplaceAllString(t.Name(), "_"), rand.IntN(1e6)))
	harness.NewFarmAt(t, dir, table, limit)
	t.Cleanup(func() {
		if ids := harness.JobIDs(dir); len(ids) > 0 {
			exec.Command("scancel", ids...).Run()
		}
		if t.Failed() {
			harness.Diagnose(t, dir)
			t.Logf("the farm is kept in %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	return dir
}

// largeFarmConfig configures the farm as the README advises for large farms
// on shared filesystems: no RUN<ID> directory per case.
func largeFarmConfig(t testing.TB, dir string) {
	t.Helper()
	edit(t, filepath.Join(dir, "config"), "\nRUN_DIRS=1\n", "\nRUN_DIRS=0\n")
	edit(t, filepath.Join(dir, "single_case.sh"), `cd "RUN$ID" 2>/dev/null || { mkdir -p "RUN$ID" && cd "RUN$ID"; } || exit 1`, "")
}

// edit replaces old (which must be there) by new in the file at path.
func edit(t testing.TB, path, old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("%s has no %q", path, old)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), old, new, 1)), 0o755); err != nil {
		t.Fatal(err)
	}
}

// report appends a line of figures to the rig's figures file, which
// integration/run-tests prints after the tests (go test shows the logs of
// passing tests only with -v).
func report(t *testing.T, format string, args ...any) {
	t.Helper()
	line := fmt.Sprintf("%s: %s", t.Name(), fmt.Sprintf(format, args...))
	t.Log(line)
	if theRig == nil {
		return
	}
	f, err := os.OpenFile(filepath.Join(theRig.dir, "log", "figures.txt"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	fmt.Fprintf(f, "%s %s\n", time.Now().Format(time.RFC3339), line)
	f.Close()
}

// ranCounts reads the files ran.* in which the cases of a farm wrote their
// own IDs, one line per run of a case: how often each case really ran.
func ranCounts(t *testing.T, dir string) map[int64]int {
	t.Helper()
	m := map[int64]int{}
	files, _ := filepath.Glob(filepath.Join(dir, "ran.*"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Fields(string(b)) {
			id, err := strconv.ParseInt(l, 10, 64)
			if err != nil {
				t.Fatalf("%s: %q", f, l)
			}
			m[id]++
		}
	}
	return m
}

// ranLine is a case that records its own run: its ID, once per run, in a
// file of its meta-job's and host's (one writer per file: appends from
// several hosts to one file are not atomic on a network filesystem, and a
// job Slurm restarted may run on two hosts at once). in is the case's
// working directory, relative to the farm's.
func ranLine(in string) string {
	up := ""
	if in != "." {
		up = "../"
	}
	return `echo $ID >> ` + up + `ran.$METAJOB_ID.$HOSTNAME`
}

// ranLineAt is ranLine with the record in dir, an absolute path: a
// directory of this machine's own disk, which the rig's nodes share, keeps
// the cases' own record off the farm's filesystem, so that a trivial case
// costs that filesystem nothing but what farm itself does.
func ranLineAt(dir string) string {
	return `echo $ID >> ` + dir + `/ran.$METAJOB_ID.$HOSTNAME`
}
