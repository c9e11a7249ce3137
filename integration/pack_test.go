package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Per-case resources (issue 13): cases declare what they need with
// "#FARM cpus=N gpus=N mem=SIZE min_time=TIME" at the end of their line,
// and each meta-job packs them into what its job has.

// checkCapacity checks from the records that the cases each job ran at
// once never needed more CPUs than capacity: cpus maps a case to the CPUs
// it declared. It returns the most CPUs busy at once in any job.
func checkCapacity(t *testing.T, dir string, cpus map[int64]int, capacity int) int {
	t.Helper()
	most := 0
	for job, spans := range jobSpans(t, dir) {
		for _, s := range spans {
			busy := 0
			for _, o := range spans {
				if o.start <= s.start && s.start < o.end-0.002 {
					busy += cpus[o.id]
				}
			}
			if busy > capacity {
				t.Errorf("%s: %d CPUs busy at %.3f (case %d's start), the job has %d", job, busy, s.start, s.id, capacity)
			}
			most = max(most, busy)
		}
	}
	return most
}

// TestPackMixedCPUs: a table of 1-CPU and 2-CPU cases in a whole-node job
// of 4 CPUs (NWHOLE=4) never has more than 4 CPUs busy, and fills them:
// some instant has all 4 busy. Each case gets OMP_NUM_THREADS = the CPUs
// it is bound to: the job runs on CPUs 0 and 1 (taskset), whose 4 loops
// share them two by two, so a 1-CPU case gets 1, and the first two cases
// (2 CPUs each, started first: one meta-job claims in table order) get
// logical CPUs 0-1 and 2-3, both on CPUs 0 and 1: 2.
func TestPackMixedCPUs(t *testing.T) {
	t.Parallel()
	if runtime.NumCPU() < 2 {
		// No FARM_REQUIRE_* guard: .ci/run cannot give a machine a
		// second CPU (README.md, the skips that stay skips).
		t.Skip("needs 2 CPUs")
	}
	var table []string
	cpus := map[int64]int{}
	for i := 1; i <= 24; i++ {
		// 2, 2, 1, 1, 2, 2, ...: in claim order, they can fill the 4.
		n := 1 + (i+1)/2%2
		table = append(table, fmt.Sprintf("sleep 0.4; echo case=$ID omp=$OMP_NUM_THREADS #FARM cpus=%d", n))
		cpus[int64(i)] = n
	}
	dir := newFarm(t, table, "0-00:10")
	setConfig(t, dir, "OUTPUT", "stream") // the cases' lines are read from the job's output
	appendFile(t, dir, "config", "WHOLE_NODE=1\nNWHOLE=4\n")
	cmd := exec.Command("taskset", "-c", "0,1", bin(t), "submit", "1", "--backend", "local")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("taskset -c 0,1 farm submit 1: %v\n%s", err, out)
	}
	if out := mustFarm(t, dir, "wait", "--timeout", "2m"); !strings.Contains(out, "24 cases: 24 succeeded") {
		t.Fatalf("wait said %q", out)
	}
	if most := checkCapacity(t, dir, cpus, 4); most < 4 {
		t.Errorf("at most %d CPUs were busy at once: the cases were not packed into the 4", most)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "OUTPUT", "slurm-1.out"))
	omp := map[int64]string{}
	for _, line := range strings.Split(string(b), "\n") {
		var id int64
		var o string
		if n, _ := fmt.Sscanf(line, "case=%d omp=%s", &id, &o); n == 2 {
			omp[id] = o
		}
	}
	for id := int64(1); id <= 24; id++ {
		want := map[int]string{1: "1", 2: "1 or 2"}[cpus[id]]
		switch {
		case id <= 2 && omp[id] != "2":
			// Started first, on 4 free logical CPUs, each gets two bound
			// to CPUs 0 and 1, whichever loop starts it (pool.take).
			t.Errorf("case %d (2 CPUs, started first): OMP_NUM_THREADS=%q, want 2", id, omp[id])
		case cpus[id] == 1 && omp[id] != "1":
			t.Errorf("case %d (1 CPU): OMP_NUM_THREADS=%q, want 1", id, omp[id])
		case omp[id] != "1" && omp[id] != "2":
			t.Errorf("case %d: OMP_NUM_THREADS=%q, want %s", id, omp[id], want)
		}
	}
}

// TestPackGPUs: with FARM_GPUS=0,1 (the local backend's fake devices), cases
// that need one GPU each get CUDA_VISIBLE_DEVICES set to one device, and
// no two cases running at once share one.
func TestPackGPUs(t *testing.T) {
	t.Parallel()
	var table []string
	for i := 1; i <= 12; i++ {
		table = append(table, `echo "$ID $CUDA_VISIBLE_DEVICES $(date +%s.%N)" >> ../gpu.log; sleep 0.3; echo "$ID end $(date +%s.%N)" >> ../gpu.log #FARM gpus=1`)
	}
	dir := newFarm(t, table, "0-00:10")
	appendFile(t, dir, "config", "WHOLE_NODE=1\nNWHOLE=4\n")
	if r := farmIn(t, dir, []string{"FARM_GPUS=0,1"}, "submit", "1", "--backend", "local"); r.Code != 0 {
		t.Fatalf("submit: %d %s", r.Code, r.Err)
	}
	if out := mustFarm(t, dir, "wait", "--timeout", "2m"); !strings.Contains(out, "12 cases: 12 succeeded") {
		t.Fatalf("wait said %q", out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "gpu.log"))
	if err != nil {
		t.Fatal(err)
	}
	type use struct {
		dev        string
		start, end float64
	}
	uses := map[string]*use{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var id, a string
		var x float64
		fmt.Sscan(line, &id, &a, &x)
		if a == "end" {
			uses[id].end = x
			continue
		}
		if a != "0" && a != "1" {
			t.Errorf("case %s: CUDA_VISIBLE_DEVICES=%q, want one of the devices 0 and 1", id, a)
		}
		uses[id] = &use{dev: a, start: x}
	}
	for i, u := range uses {
		for j, v := range uses {
			if i < j && u.dev == v.dev && u.start < v.end && v.start < u.end {
				t.Errorf("cases %s and %s ran at once on device %s", i, j, u.dev)
			}
		}
	}
}

// TestPackUnfit: a case that needs more CPUs than any job has is not run,
// Status says why, wait exits 1; the cases around it run.
func TestPackUnfit(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, []string{"true", "true #FARM cpus=4096", "true"}, "0-00:10")
	mustFarm(t, dir, "submit", "1", "--backend", "local")
	r := farmIn(t, dir, nil, "wait", "--timeout", "1m")
	if r.Code != exitNotAllOK || !strings.Contains(r.Out, "3 cases: 2 succeeded") || !strings.Contains(r.Out, "1 unfit") {
		t.Errorf("wait: exit %d, %q; want 3, with the case unfit", r.Code, r.Out)
	}
	st := statusJSON(t, dir)
	if st[2].State != "unfit" {
		t.Errorf("case 2: %+v, want unfit", st[2])
	}
	out := mustFarm(t, dir, "Status")
	if !strings.Contains(out, "needs 4096 CPUs, the job has") {
		t.Errorf("Status does not say why case 2 did not run:\n%s", out)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "OUTPUT", "slurm-1.out"))
	if !strings.Contains(string(b), "farm: case 2 not started: it needs 4096 CPUs, the job has") {
		t.Errorf("the job's output does not say why case 2 was not started:\n%s", b)
	}
}

// TestPackLocalIsOneNode: the local backend is one node (issue 25). Every
// case learns it from FARM_NNODES, FARM_NODELIST, FARM_CPUS_PER_NODE and
// its hostfiles, and a case of 2 nodes is unfit, with the reason.
func TestPackLocalIsOneNode(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, []string{
		`echo "nodes=$FARM_NNODES list=$FARM_NODELIST cpus=$FARM_CPUS_PER_NODE hosts=$(cat $FARM_HOSTFILE) mf=$(cat $FARM_MACHINEFILE)" #FARM cpus=1`,
		`true #FARM nodes=2`,
		`echo "whole nodes=$FARM_NNODES" #FARM nodes=1`,
	}, "0-00:10")
	setConfig(t, dir, "OUTPUT", "stream") // the cases' lines are read from the job's output
	mustFarm(t, dir, "submit", "1", "--backend", "local")
	r := farmIn(t, dir, nil, "wait", "--timeout", "1m")
	if r.Code != exitNotAllOK || !strings.Contains(r.Out, "3 cases: 2 succeeded") || !strings.Contains(r.Out, "1 unfit") {
		t.Errorf("wait: exit %d, %q; want 3, with case 2 unfit", r.Code, r.Out)
	}
	if out := mustFarm(t, dir, "Status"); !strings.Contains(out, "needs 2 nodes, the job has 1") {
		t.Errorf("Status does not say why case 2 did not run:\n%s", out)
	}
	host, _ := os.Hostname()
	host, _, _ = strings.Cut(host, ".")
	b, _ := os.ReadFile(filepath.Join(dir, "OUTPUT", "slurm-1.out"))
	if want := fmt.Sprintf("nodes=1 list=%s cpus=1 hosts=%s slots=1 mf=%s:1\n", host, host, host); !strings.Contains(string(b), want) {
		t.Errorf("the job's output has no %q:\n%s", want, b)
	}
	if !strings.Contains(string(b), "whole nodes=1\n") {
		t.Errorf("the case of nodes=1 did not run on the one node:\n%s", b)
	}
}

// TestPackSlurm: on the real Slurm, a job of 4 CPUs (--cpus-per-task=4)
// packs 1-CPU and 2-CPU cases into its 4 (SLURM_CPUS_ON_NODE), never more.
func TestPackSlurm(t *testing.T) {
	needSlurm(t)
	t.Parallel()
	var table []string
	cpus := map[int64]int{}
	for i := 1; i <= 16; i++ {
		n := 1 + i%2
		table = append(table, fmt.Sprintf("sleep 0.5 #FARM cpus=%d", n))
		cpus[int64(i)] = n
	}
	dir := slurmFarm(t, table, "0-00:10")
	askCPUs(t, dir, 4)
	mustFarm(t, dir, "submit", "1", "--backend", "slurm")
	if out := mustFarm(t, dir, "wait", "--timeout", "3m"); !strings.Contains(out, "16 cases: 16 succeeded") {
		t.Fatalf("wait said %q", out)
	}
	if most := checkCapacity(t, dir, cpus, 4); most < 3 {
		t.Errorf("at most %d CPUs were busy at once in a job of 4", most)
	}
}

// TestPackAfterWaiting: a case that waited for its turn is looked at again
// when its turn comes: here its min_time no longer fits in what the job
// has left (the first case held both CPUs for 6 of the job's 10 s), so it
// is not started and is reported unfit.
func TestPackAfterWaiting(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, []string{"sleep 6 #FARM cpus=2", "echo started >> ../late.log #FARM cpus=1 min_time=8s"}, "0:10")
	appendFile(t, dir, "config", "WHOLE_NODE=1\nNWHOLE=2\n")
	mustFarmShort(t, dir, "submit", "1", "--backend", "local")
	farmIn(t, dir, nil, "wait", "--timeout", "1m")
	if _, err := os.Stat(filepath.Join(dir, "late.log")); err == nil {
		t.Errorf("case 2 started with less than its min_time left")
	}
	if st := statusJSON(t, dir); st[2].State != "unfit" || !strings.Contains(st[2].Reason, "needs at least 8s of run-time, the job has") {
		t.Errorf("case 2: %+v; want unfit for its min_time", st[2])
	}
}

// TestPackPartialNeeds: a case that declares some needs takes one CPU and
// no GPU for what it does not declare (not the whole job): with two fake
// GPUs, cases that say only cpus=1 run side by side with no GPU.
func TestPackPartialNeeds(t *testing.T) {
	t.Parallel()
	if runtime.NumCPU() < 2 {
		// No FARM_REQUIRE_* guard: .ci/run cannot give a machine a
		// second CPU (README.md, the skips that stay skips).
		t.Skip("needs 2 CPUs")
	}
	var table []string
	for i := 0; i < 4; i++ {
		table = append(table, `echo "[$CUDA_VISIBLE_DEVICES]"; sleep 1 #FARM cpus=1`)
	}
	dir := newFarm(t, table, "0-00:10")
	setConfig(t, dir, "OUTPUT", "stream") // the cases' lines are read from the job's output
	if r := farmIn(t, dir, []string{"FARM_GPUS=0,1"}, "submit", "1", "--backend", "local"); r.Code != 0 {
		t.Fatalf("submit: %s", r.Err)
	}
	mustFarm(t, dir, "wait", "--timeout", "1m")
	b, _ := os.ReadFile(filepath.Join(dir, "OUTPUT", "slurm-1.out"))
	if strings.Count(string(b), "[]\n") != 4 {
		t.Errorf("the cases did not all run with CUDA_VISIBLE_DEVICES empty:\n%s", b)
	}
	cpus := map[int64]int{1: 1, 2: 1, 3: 1, 4: 1}
	if most := checkCapacity(t, dir, cpus, runtime.NumCPU()); most < 2 {
		t.Errorf("the cases ran one at a time: cpus=1 took the whole job")
	}
}

// TestPackFastFailureJobWide: outside WHOLE_NODE mode, fast-failure
// protection counts the job's cases, whatever loop ran them: with
// N_failed_max=3 the job stops after 3 fast failures (one more per other
// loop at most, a case it was running), not 3 per loop.
func TestPackFastFailureJobWide(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, repeat("false #FARM cpus=1", 20), "0-00:10")
	setConfig(t, dir, "N_failed_max", "3")
	mustFarm(t, dir, "submit", "1", "--backend", "local")
	farmIn(t, dir, nil, "wait", "--timeout", "1m")
	failed := 0
	for _, r := range statusJSON(t, dir) {
		if r.State == "failed" {
			failed++
		}
	}
	if failed < 3 || failed > 3+runtime.NumCPU()-1 {
		t.Errorf("%d cases failed before the job stopped, want 3 (to %d)", failed, 3+runtime.NumCPU()-1)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "OUTPUT", "slurm-1.out"))
	if !strings.HasSuffix(string(b), "Too many failed (very short) cases - exiting\n") {
		t.Errorf("the job's output does not end with META's message:\n%s", b)
	}
}
