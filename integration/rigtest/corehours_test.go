package rigtest

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/farm-hpc/farm/integration/harness"
	"github.com/farm-hpc/farm/internal/testreq"
)

// TestRigCoreHoursAgreeWithSacct is issue 38 on the rig: a farm of 4
// meta-jobs of 2 CPUs each, one on each node of partition rig, runs 12
// cases of 8 s on the coherent volume (24 s a job: the start-up Slurm
// counts and the status records do not, a few seconds on a loaded
// machine, is then a small part of it); farm query --json then says its
// allocated core-hours come from Slurm's accounting (the rig's slurmdbd,
// integration/cluster-up) and agree within 5% with what Slurm records
// for those jobs, asked of sacct directly with the rig's slurm.conf:
// AllocCPUS × ElapsedRaw, summed (each job's 2 CPUs count). As on the
// single-node Slurm, the figure the status records give without
// accounting is logged, and must be within 80-105% of Slurm's (with cases
// of 3 s, 9 s a job, a loaded machine made it 74%). About 30 s.
func TestRigCoreHoursAgreeWithSacct(t *testing.T) {
	r := needRig(t)
	conf := r.env["SLURM_CONF"]
	if r.env["FARM_CLUSTER_ACCOUNTING"] != "1" {
		testreq.Skip(t, "FARM_REQUIRE_CLUSTER", "RIG ACCOUNTING TEST SKIPPED: the rig runs without Slurm's accounting (FARM_CLUSTER_ACCOUNTING="+r.env["FARM_CLUSTER_ACCOUNTING"]+" in its env file; integration/cluster-up starts it unless FARM_CLUSTER_ACCOUNTING=0, and a rig started before it had accounting is started afresh)")
	}
	const jobs, cpus = 4, 2
	dir := r.farm(t, "coherent", harness.Repeat("sleep 8", 12), "0-00:10")
	submitSpread(t, dir, jobs, "--cpus-per-task="+strconv.Itoa(cpus))
	harness.Must(t, dir, "wait", "--timeout", "3m")
	ids := harness.JobIDs(dir)
	if len(ids) != jobs {
		t.Fatalf("farm recorded jobs %v, want %d", ids, jobs)
	}
	acct := rigSacct(t, conf, ids)
	nodes := map[string]bool{}
	var slurmSecs float64
	for _, j := range acct {
		if j.cpus != cpus {
			t.Errorf("sacct: job %s had %d CPUs, want %d (--cpus-per-task)", j.id, j.cpus, cpus)
		}
		slurmSecs += float64(j.cpus * j.secs)
		nodes[j.nodes] = true
	}
	if len(nodes) < 2 {
		t.Errorf("sacct: the %d jobs ran on %v; want them on several nodes", jobs, nodes)
	}
	farmSecs, from := rigQueryAllocated(t, dir)
	report(t, "allocated: farm %.1f core-seconds (from %s), sacct %.1f (%d jobs × %d CPUs on %d nodes), %.1f%%",
		farmSecs, from, slurmSecs, len(acct), cpus, len(nodes), 100*farmSecs/slurmSecs)
	if from != "slurm accounting" {
		t.Errorf("allocated_from %q, want \"slurm accounting\"", from)
	}
	if slurmSecs <= 0 || math.Abs(farmSecs-slurmSecs) > 0.05*slurmSecs {
		t.Errorf("farm's allocated %.1f core-seconds, sacct's %.1f: want within 5%%", farmSecs, slurmSecs)
	}
	// Without accounting: a sacct that says so, first in PATH.
	shim := t.TempDir()
	if err := os.WriteFile(filepath.Join(shim, "sacct"), []byte("#!/bin/sh\necho 'Slurm accounting storage is disabled' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	recSecs, recFrom := rigQueryAllocated(t, dir, "PATH="+shim+":"+os.Getenv("PATH"))
	report(t, "allocated without accounting: %.1f core-seconds (from %s), %.1f%% of sacct's", recSecs, recFrom, 100*recSecs/slurmSecs)
	if recFrom != "status records" || recSecs > slurmSecs*1.05 || recSecs < slurmSecs*0.8 {
		t.Errorf("without accounting: %.1f core-seconds from %q; want from \"status records\", 80-105%% of Slurm's %.1f", recSecs, recFrom, slurmSecs)
	}
}

// sacctJob is one job as the rig's sacct records it.
type sacctJob struct {
	id, nodes  string
	cpus, secs int
}

// rigSacct asks the rig's Slurm accounting (sacct with the rig's
// slurm.conf, conf) for the jobs ids, until every one of them has ended
// there (slurmdbd hears of a job's end a moment after squeue).
func rigSacct(t *testing.T, conf string, ids []string) []sacctJob {
	t.Helper()
	var jobs []sacctJob
	var last string
	deadline := time.Now().Add(30 * time.Second)
	for {
		cmd := exec.Command("sacct", "-X", "-n", "-P", "-j", strings.Join(ids, ","), "-o", "JobID,AllocCPUS,ElapsedRaw,State,NodeList")
		cmd.Env = append(os.Environ(), "SLURM_CONF="+conf)
		out, err := cmd.CombinedOutput()
		last = fmt.Sprintf("%v\n%s", err, out)
		jobs = jobs[:0]
		ended := 0
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			f := strings.Split(line, "|")
			if err != nil || len(f) != 5 {
				break
			}
			j := sacctJob{id: f[0], nodes: f[4]}
			j.cpus, _ = strconv.Atoi(f[1])
			j.secs, _ = strconv.Atoi(f[2])
			jobs = append(jobs, j)
			if !strings.HasPrefix(f[3], "RUNNING") && !strings.HasPrefix(f[3], "PENDING") {
				ended++
			}
		}
		if ended == len(ids) && len(jobs) == len(ids) {
			return jobs
		}
		if time.Now().After(deadline) {
			t.Fatalf("the rig's sacct (SLURM_CONF=%s) did not record the ends of jobs %v within 30 s; it last said: %s", conf, ids, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// rigQueryAllocated is farm query --json's allocated core-seconds, and
// where they come from, with extra environment env.
func rigQueryAllocated(t *testing.T, dir string, env ...string) (float64, string) {
	t.Helper()
	res := harness.Run(t, dir, env, "query", "--json")
	var q struct {
		CoreHours struct {
			Allocated     float64
			AllocatedFrom string `json:"allocated_from"`
		} `json:"core_hours"`
	}
	if res.Code != 0 || json.Unmarshal([]byte(res.Out), &q) != nil {
		t.Fatalf("farm query --json: exit %d\n%s%s", res.Code, res.Out, res.Err)
	}
	return q.CoreHours.Allocated * 3600, q.CoreHours.AllocatedFrom
}
