package rigtest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/farm-hpc/farm/integration/harness"
	"github.com/farm-hpc/farm/internal/testreq"
	"golang.org/x/sys/unix"
)

// The tests on the rig's CephFS (integration/ceph-up: one monitor, one
// manager, two memstore OSDs and one MDS on the head, a ceph-fuse client
// on every node), which make rig-ceph brings up (FARM_CEPH_UP=1 through
// run-tests) and takes down. They skip without it, unless
// FARM_REQUIRE_CEPH=1 (.ci/run's make rig-ceph), where they fail.
// integration/CLUSTER.md, "CephFS".

// fuseSuperMagic is a FUSE mount's f_type (statfs).
const fuseSuperMagic = 0x65735546

// needCeph returns the rig, if its CephFS is up and mounted on the head,
// or skips t (fails it with FARM_REQUIRE_CEPH=1).
func needCeph(t *testing.T) *rig {
	t.Helper()
	r := needRig(t)
	env := filepath.Join(r.dir, "ceph", "env")
	if _, err := os.Stat(env); err != nil {
		testreq.Skip(t, "FARM_REQUIRE_CEPH", "CEPH TESTS SKIPPED: the rig has no CephFS (no "+env+"; integration/ceph-up starts one, make rig-ceph runs these tests on one)")
	}
	var st unix.Statfs_t
	if err := unix.Statfs(filepath.Join(r.mnt, "ceph"), &st); err != nil || st.Type != fuseSuperMagic {
		testreq.Skip(t, "FARM_REQUIRE_CEPH", fmt.Sprintf("CEPH TESTS SKIPPED: %s is not a ceph-fuse mount (%v)", filepath.Join(r.mnt, "ceph"), err))
	}
	return r
}

// TestCephExclusiveMknod is TestDHTExclusiveMknod on the rig's CephFS: 4
// clients, the test binary on node1-node4, each through its node's own
// ceph-fuse, race to make the same names, 1,000 a subdirectory started
// together — mknod of a regular file by all 4 (a generation's slot s.N and
// its mark c.N) in two subdirectories of three, and in every third the
// mark against the void (clients 1 and 3 mknod a regular file, 2 and 4 a
// FIFO). The MDS is killed (SIGKILL, then ceph mds fail) when 30% of the
// subdirectories have begun and started again 5 s later (it replays its
// journal, the clients reconnect and replay the requests it had not
// journaled), and failed (ceph mds fail: it respawns and takes its rank
// back) at 65%. Every client makes its names with its own number in their
// permission bits, and looks each name up after its call. Then every name
// is read back through the head's client: exactly one maker a name; a
// client told it made a name, or that decided so from the filesystem
// after an error, is its maker; the winner's type is the name's; every
// client's look-up saw the file read back (maker, type, inode).
// FARM_RIG_CEPH_RACE_NAMES: the names (10,000).
func TestCephExclusiveMknod(t *testing.T) {
	r := needCeph(t)
	names := 10000
	if v, err := strconv.Atoi(os.Getenv("FARM_RIG_CEPH_RACE_NAMES")); err == nil && v > 0 {
		names = v
	}
	start := time.Now()
	res := r.race(t, raceSpec{op: "claimcore", names: names, batch: 1000, killBrick: true, profile: "ceph"})
	if res.doubles != 0 || res.mismatch != 0 || res.unclaimed != 0 || res.undecided != 0 || res.views != 0 {
		t.Errorf("mknod is not exclusive on CephFS, or a reply or a look-up disagrees with the filesystem: %s; e.g. %s", res, strings.Join(res.examples, "; "))
	}
	if res.kinds["fifo"] == 0 || res.kinds["regular"] == 0 {
		t.Errorf("the race left %v: want both regular files and FIFOs", res.kinds)
	}
	report(t, "%s; %.0f s in all; %s", res, time.Since(start).Seconds(), cephMemory(r))
}

// TestCephFourThousandCases is TestRig/FourThousandCases on the rig's
// CephFS: a farm of 4,000 cases, farm submit 4 from the head, the 4
// meta-jobs on the 4 nodes of partition rig, each through its node's own
// ceph-fuse; every case runs exactly once (by the cases' own record, the
// status records and farm Status) and every meta-job ends by itself. Run 1
// trivial cases; run 2 cases of 20 ms, and the MDS killed once 400 have
// run and started again 10 s later, while the meta-jobs claim.
func TestCephFourThousandCases(t *testing.T) {
	r := needCeph(t)
	t.Run("run1", func(t *testing.T) { farmOf4000(t, r, "ceph", "", nil) })
	t.Run("run2_mds_killed", func(t *testing.T) {
		farmOf4000(t, r, "ceph", "sleep 0.02; ", func(t *testing.T, dir, ranDir string) { killMDSMidRun(t, r, ranDir) })
	})
	report(t, "%s", cephMemory(r))
}

// restartMDSTwice is a race's server restart on CephFS: the MDS killed at
// 30% of the batches and started again 5 s later, then failed at 65%
// (ceph mds fail: it respawns; not in a race of fewer than 4 batches). It
// says when.
func (r *rig) restartMDSTwice(t *testing.T, start time.Time, waitBatch func(float64) bool, at func() int, batches int) string {
	t.Helper()
	if !waitBatch(0.30) {
		t.Errorf("the race ended before the MDS was killed")
		return "not restarted"
	}
	b, killed := at(), time.Since(start)
	r.run(t, "kill-mds")
	time.Sleep(5 * time.Second)
	r.run(t, "start-mds")
	s := fmt.Sprintf("killed at %.1f s, batch %d of %d, started again and active at %.1f s", killed.Seconds(), b, batches, time.Since(start).Seconds())
	if batches < 4 {
		return s + "; not failed (too few batches for a second restart)"
	}
	if !waitBatch(0.65) {
		t.Errorf("the race ended before the MDS was failed")
		return s
	}
	b, failed := at(), time.Since(start)
	r.run(t, "fail-mds")
	return s + fmt.Sprintf("; failed (ceph mds fail) at %.1f s, batch %d, active again at %.1f s", failed.Seconds(), b, time.Since(start).Seconds())
}

// killMDSMidRun kills the CephFS's MDS once the farm's cases (recording
// their runs in ranDir) have run 400, starts it again 10 s later, and
// checks that the farm was still running when it was back.
func killMDSMidRun(t *testing.T, r *rig, ranDir string) {
	// An MDS left dead by a failed test would stop every later one.
	t.Cleanup(func() { exec.Command(r.script, "start-mds").Run() })
	harness.WaitFor(t, 5*time.Minute, "400 cases to run", func() bool { return ranLines(ranDir) >= 400 })
	before := ranLines(ranDir)
	killed := time.Now()
	r.run(t, "kill-mds")
	time.Sleep(10 * time.Second)
	during := ranLines(ranDir)
	r.run(t, "start-mds")
	back := ranLines(ranDir)
	if back >= 4000 {
		t.Errorf("the farm ended (%d cases run) before the MDS was back: it proves nothing of a restart mid-run", back)
	}
	report(t, "the MDS killed after %d cases had run, %d had run 10 s later, %d when it was active again (%.1f s after the kill)",
		before, during, back, time.Since(killed).Seconds())
}

// cephMemory says what the CephFS's processes hold in memory (VmRSS): its
// daemons, as ceph-up recorded them, and every ceph-fuse client (the
// head's and the nodes').
func cephMemory(r *rig) string {
	rss := func(pid string) int {
		f, err := os.Open("/proc/" + pid + "/status")
		if err != nil {
			return 0
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
				kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
				return kb
			}
		}
		return 0
	}
	var parts []string
	total := 0
	b, _ := os.ReadFile(filepath.Join(r.dir, "ceph", "pids"))
	seen := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) != 3 || strings.HasPrefix(f[0], "client:") || seen[f[1]] {
			continue
		}
		seen[f[1]] = true
		kb := rss(f[1])
		if kb == 0 {
			continue
		}
		total += kb
		parts = append(parts, fmt.Sprintf("%s %d", strings.TrimPrefix(f[0], "ceph-"), kb>>10))
	}
	sort.Strings(parts)
	clients, ckb := 0, 0
	procs, _ := filepath.Glob("/proc/[0-9]*/comm")
	for _, p := range procs {
		if c, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(c)) == "ceph-fuse" {
			clients++
			ckb += rss(filepath.Base(filepath.Dir(p)))
		}
	}
	return fmt.Sprintf("memory (RSS, MiB): daemons %d (%s), %d ceph-fuse clients %d", total>>10, strings.Join(parts, ", "), clients, ckb>>10)
}
