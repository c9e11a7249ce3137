package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// META parity (issue 12): single_case.sh called as META calls it, farm
// adopt on a farm directory laid out as META lays it out, farm Status
// --meta, and a table changed during a run.

// metaSingleCase is a single_case.sh written for META, as META's own
// scripts have it: it reads line $2 of table $1 itself, splits it into ID
// and COMM with cut, runs it, sets STATUS and appends "ID STATUS" to the
// meta-job's status file itself; it ends without exit.
const metaSingleCase = `#!/bin/bash
# The actual (serial) computation, for a single case No. $2 in the table $1.
TABLE=$1
i=$2
if test -z $N_cases
  then
  N_cases=` + "`cat \"$TABLE\" | wc -l`" + `
  fi
if test $i -lt 1 -o $i -gt $N_cases
  then
  exit
  fi
LINE=` + "`sed -n ${i}p $TABLE`" + `
ID=` + "`echo \"$LINE\" | cut -d\" \" -f1`" + `
COMM=` + "`echo \"$LINE\" | cut -d\" \" -f2-`" + `
echo "Case $ID:"
eval "$COMM"
STATUS=$?
echo $ID $STATUS >> STATUSES/status.$METAJOB_ID
`

// TestSingleCaseByHandAsInMETA: in a fresh farm (farm init, a table of
// commands, never submitted), ./single_case.sh table.dat N runs the case
// on line N and exits with its STATUS, as META's documentation tells
// users to try a case; farm run-case ID does the same by ID.
func TestSingleCaseByHandAsInMETA(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, []string{"# two cases", "echo first > first.out", "", "echo second; exit 7"}, "0-00:10")
	run := func(args ...string) (string, int) {
		cmd := exec.Command("./single_case.sh", args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	out, code := run("table.dat", "4")
	if code != 7 || !strings.Contains(out, "Case 2 (line 4 of table.dat): echo second; exit 7\nsecond\n") {
		t.Errorf("./single_case.sh table.dat 4: exit %d, said %q; want case 2's output and its STATUS 7", code, out)
	}
	out, code = run("table.dat", "2")
	if b, _ := os.ReadFile(filepath.Join(dir, "RUN1", "first.out")); code != 0 || string(b) != "first\n" {
		t.Errorf("./single_case.sh table.dat 2: exit %d, said %q, RUN1/first.out %q; want case 1 run in RUN1", code, out, b)
	}
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{nil, "usage: ./single_case.sh TABLE LINE (e.g. ./single_case.sh table.dat 3): runs the case on line LINE of TABLE\n"},
		{[]string{"table.dat", "3"}, "single_case.sh: line 3 of table.dat is blank or a comment, not a case\n"},
		{[]string{"table.dat", "9"}, "single_case.sh: table.dat has no line 9\n"},
	} {
		if out, code := run(c.args...); code != 2 || out != c.msg {
			t.Errorf("./single_case.sh %v: exit %d, said %q; want 2 and %q", c.args, code, out, c.msg)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "RUN")); err == nil {
		t.Errorf("a RUN directory without an ID was left behind")
	}
	r := farmIn(t, dir, nil, "run-case", "2")
	if r.Code != 7 || r.Out != "second\n" || r.Err != "farm: case 2 (line 4 of table.dat) ended with STATUS 7; not recorded (run-case only tries a case)\n" {
		t.Errorf("farm run-case 2: exit %d, stdout %q, stderr %q", r.Code, r.Out, r.Err)
	}
	if _, err := os.Stat(filepath.Join(dir, "STATUSES")); err == nil {
		t.Errorf("farm run-case recorded something in STATUSES")
	}
	// As in a meta-job: $FARM_DIR and $FARM_LOOP are set.
	appendFile(t, dir, "table.dat", "echo dir=$FARM_DIR loop=$FARM_LOOP id=$METAJOB_ID\n")
	if r := farmIn(t, dir, nil, "run-case", "3"); r.Code != 0 || r.Out != "dir="+dir+" loop=1 id=run-case\n" {
		t.Errorf("farm run-case 3: exit %d, stdout %q", r.Code, r.Out)
	}
	r = farmIn(t, dir, nil, "run-case", "4")
	if r.Code != 1 || r.Err != "farm: table.dat has no case 4 (its IDs go up to 3)\n" {
		t.Errorf("farm run-case 4: exit %d, stderr %q", r.Code, r.Err)
	}
}

// TestMETAStyleSingleCaseRunsAWholeFarm: a single_case.sh written for META
// (reads $1 $2 with sed, ends without exit, writes its own "ID STATUS"
// lines) runs every case of a farm, in the first run and in a resubmitted
// one, whose table is another file; its STATUS is what farm records.
func TestMETAStyleSingleCaseRunsAWholeFarm(t *testing.T) {
	t.Parallel()
	const n = 40
	var table []string
	for i := 1; i <= n; i++ {
		if i%10 == 0 {
			table = append(table, "# a comment line")
		}
		table = append(table, fmt.Sprintf("test -e fail.%d && exit 3; echo %d >> done.list", i, i))
	}
	dir := newFarm(t, table, "0-00:10")
	if err := os.WriteFile(filepath.Join(dir, "single_case.sh"), []byte(metaSingleCase), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int{5, 17} {
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("fail.%d", id)), nil, 0o644)
	}
	mustFarm(t, dir, "submit", "3", "--backend", "local")
	farmIn(t, dir, nil, "wait", "--timeout", "2m")
	st := statusJSON(t, dir)
	for id := int64(1); id <= n; id++ {
		want := 0
		if id == 5 || id == 17 {
			want = 3
		}
		if st[id].Status != want || (want == 0) != (st[id].State == "succeeded") {
			t.Errorf("case %d: %+v, want STATUS %d", id, st[id], want)
		}
	}
	os.Remove(filepath.Join(dir, "fail.5"))
	os.Remove(filepath.Join(dir, "fail.17"))
	mustFarm(t, dir, "resubmit", "2", "--backend", "local")
	if out := mustFarm(t, dir, "wait", "--timeout", "2m"); !strings.Contains(out, fmt.Sprintf("%d cases: %d succeeded", n, n)) {
		t.Errorf("wait after the resubmit said %q", out)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "done.list"))
	ran := strings.Fields(string(b))
	sort.Strings(ran)
	if len(ran) != n {
		t.Errorf("%d cases ran to the end, want %d (each once): %v", len(ran), n, ran)
	}
	if r := farmIn(t, dir, nil, "Status"); r.Code != 0 || strings.Contains(r.Err, "skipped") {
		t.Errorf("Status warned about the script's own \"ID STATUS\" lines: %q", r.Err)
	}
}

// metaFarm lays out a farm directory as META makes and runs it, from its
// documented formats and its scripts: config.h, job_script.sh ending with
// task.run, resubmit_script.sh ending with autojob.run, a single_case.sh
// written for META, table.dat numbered by META, STATUSES/status.JOBID
// files of "ID STATUS" lines (and, as older META wrote them, status.JOBID
// in the farm directory), table.dat_ of the last resubmit, OUTPUT/.
// succeeded and failed are the cases with a record.
func metaFarm(t *testing.T, n int, succeeded, failed []int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "meta farm")
	for _, d := range []string{"STATUSES", "OUTPUT", "MISC"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var table strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&table, "%d echo case %d >> ran.list\n", i, i)
	}
	var st [3]strings.Builder // two META jobs in STATUSES, one older in the farm directory
	for i, id := range succeeded {
		fmt.Fprintf(&st[i%3], "%d 0\n", id)
	}
	for _, id := range failed {
		fmt.Fprintf(&st[1], "%d 1\n", id)
	}
	files := map[string]string{
		"config.h": `# Configuration file for the current farm
WHOLE_NODE=0
NWHOLE=40
NJOBS_MAX=998
RUNTIME_MIN=1
RUNTIME_MAX=3000000
dt_failed=1
N_failed_max=5

export WHOLE_NODE NWHOLE NJOBS_MAX RUNTIME_MIN RUNTIME_MAX dt_failed N_failed_max
`,
		"job_script.sh": "#!/bin/bash\n# Here you should provide the sbatch arguments to be used in all jobs in this serial farm\n" +
			"# It has to contain the runtime switch (either -t or --time):\n#SBATCH -t 0-00:10\n#SBATCH --mem=1G\n\n" +
			"# Don't change this line:\ntask.run\n",
		"resubmit_script.sh":        "#!/bin/bash\n#SBATCH -t 0-00:10\n#SBATCH --mem=1G\nmodule load meta-farm\nautojob.run\n",
		"single_case.sh":            metaSingleCase,
		"table.dat":                 table.String(),
		"table.dat_":                "7 echo case 7 >> ran.list\n",
		"STATUSES/status.41000123":  st[0].String(),
		"STATUSES/status.41000124":  st[1].String(),
		"status.41000099":           st[2].String(),
		"OUTPUT/slurm-41000123.out": "Case 1:\n",
	}
	for name, content := range files {
		mode := os.FileMode(0o644)
		if strings.HasSuffix(name, ".sh") {
			mode = 0o755
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestAdoptMETAFarm: farm adopt on a META farm directory of 10 cases, 6
// recorded succeeded and 1 failed; farm resubmit 2 then runs exactly the
// other 4, and farm Status shows all 10 (--meta: META's lines).
func TestAdoptMETAFarm(t *testing.T) {
	t.Parallel()
	dir := metaFarm(t, 10, []int{1, 2, 3, 4, 5, 6}, []int{7})
	out := mustFarm(t, dir, "adopt", "--backend=local")
	for _, want := range []string{
		"config.h -> config (N_failed_max=5, dt_failed=1, NJOBS_MAX=998, WHOLE_NODE=0, NWHOLE=40; RUN_DIRS=0)",
		"job_script.sh: its last line now runs farm (the original is job_script.sh.meta)",
		"3 META status file(s) -> STATUSES/status.meta-*",
		"6 of the 10 cases of table.dat succeeded; 'farm resubmit N' runs the other 4 on N meta-jobs.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("farm adopt said %q, which lacks %q", out, want)
		}
	}
	for _, f := range []string{"job_script.sh.meta", "resubmit_script.sh.meta", "table.dat_.meta", "STATUSES/status.meta-41000099", "config.h"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("after adopt: %v", err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "job_script.sh.meta")); !strings.HasSuffix(string(b), "\ntask.run\n") {
		t.Errorf("job_script.sh.meta is not META's original: %q", b)
	}
	mustFarm(t, dir, "resubmit", "2", "--backend", "local")
	if out := mustFarm(t, dir, "wait", "--timeout", "2m"); !strings.Contains(out, "10 cases: 10 succeeded") {
		t.Errorf("wait said %q", out)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "ran.list"))
	ran := strings.Fields(strings.ReplaceAll(string(b), "case", ""))
	sort.Strings(ran)
	if strings.Join(ran, " ") != "10 7 8 9" {
		t.Errorf("the resubmit ran cases %v, want exactly 7 8 9 10", ran)
	}
	st := statusJSON(t, dir)
	if len(st) != 10 {
		t.Errorf("Status lists %d cases, want 10", len(st))
	}
	for id := int64(1); id <= 10; id++ {
		if st[id].State != "succeeded" {
			t.Errorf("case %d: %+v", id, st[id])
		}
		if wantRun := 0; id <= 6 && st[id].Run != wantRun {
			t.Errorf("case %d: run %d, want META's (0)", id, st[id].Run)
		}
	}
	want := "1 0\n2 0\n3 0\n4 0\n5 0\n6 0\n7 0\n8 0\n9 0\n10 0\n"
	if got := mustFarm(t, dir, "Status", "--meta"); got != want {
		t.Errorf("Status --meta printed %q, want %q", got, want)
	}
	if r := farmIn(t, dir, nil, "adopt", "--backend=local"); r.Code != 1 || !strings.Contains(r.Err, "is already a farm") {
		t.Errorf("a second adopt: exit %d, %q", r.Code, r.Err)
	}
}

// TestStatusMETAFailedLast: farm Status --meta -f lists the non-zero
// STATUS lines last, as META's Status.run -f does; cases that never ended
// have no line.
func TestStatusMETAFailedLast(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, []string{"exit 2", "true", "exit 1", "true", "sleep 600"}, "0-00:10")
	mustFarm(t, dir, "submit", "4", "--backend", "local")
	waitFor(t, time.Minute, "cases 1-4 to end", func() bool {
		st := statusJSON(t, dir)
		n := 0
		for _, r := range st {
			if r.State == "succeeded" || r.State == "failed" {
				n++
			}
		}
		return n == 4
	})
	if got, want := mustFarm(t, dir, "Status", "--meta", "-f"), "2 0\n4 0\n1 2\n3 1\n"; got != want {
		t.Errorf("Status --meta -f printed %q, want %q", got, want)
	}
	if got, want := mustFarm(t, dir, "Status", "--meta"), "1 2\n2 0\n3 1\n4 0\n"; got != want {
		t.Errorf("Status --meta printed %q, want %q", got, want)
	}
	mustFarm(t, dir, "kill")
}

// TestAdoptRefusals: farm adopt refuses, with one line that says what to
// do, and changes nothing, on a directory it cannot adopt.
func TestAdoptRefusals(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		damage func(dir string)
		msg    string
	}{
		{"whole node too big", func(dir string) { appendFile(t, dir, "config.h", "WHOLE_NODE=1\nNWHOLE=9999\n") },
			`^farm: config.h:12: NWHOLE=9999: farm runs at most 4096 cases at once in a meta-job; lower it, then run farm adopt again; nothing was changed\n$`},
		{"not a number", func(dir string) { appendFile(t, dir, "config.h", "NJOBS_MAX=$((1000-1))\n") },
			`^farm: config.h:11: NJOBS_MAX=\$\(\(1000-1\)\) is not a whole number farm can read: write the number itself, then run farm adopt again; nothing was changed\n$`},
		{"no task.run", func(dir string) { appendFile(t, dir, "job_script.sh", "echo done\n") },
			`^farm: job_script.sh:9: META's job_script.sh ends with a line that runs task.run, this one with "echo done": change that line to exec "\$\{FARM_BIN:-farm\}" metajob and run farm adopt again; nothing was changed\n$`},
		// Without config.h (an older META farm), a config of farm's own
		// is not written over.
		{"no config.h, a config", func(dir string) {
			os.Remove(filepath.Join(dir, "config.h"))
			os.WriteFile(filepath.Join(dir, "config"), []byte("NJOBS_MAX=3\n"), 0o644)
		}, `^farm: .*meta farm has farm's config already, and no META config.h: move config away \(farm adopt writes it\), then run farm adopt again; nothing was changed\n$`},
		{"a config too", func(dir string) { os.WriteFile(filepath.Join(dir, "config"), []byte("NJOBS_MAX=3\n"), 0o644) },
			`^farm: .*meta farm has both META's config.h and farm's config: remove config \(farm adopt writes it from config.h\), then run farm adopt again; nothing was changed\n$`},
		{"status name taken", func(dir string) {
			os.WriteFile(filepath.Join(dir, "STATUSES", "status.meta-41000099"), []byte("1 0\n"), 0o644)
		}, `^farm: .*status.41000099 would be moved to .*STATUSES/status.meta-41000099, which exists: move one of them away, then run farm adopt again; nothing was changed\n$`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := metaFarm(t, 10, []int{1, 2}, []int{3})
			c.damage(dir)
			before := snapshot(t, dir)
			r := farmIn(t, dir, nil, "adopt", "--backend=local")
			if r.Code != 1 || !regexp.MustCompile(c.msg).MatchString(r.Err) {
				t.Errorf("exit %d, stderr %q; want 1 and %s", r.Code, r.Err, c.msg)
			}
			if after := snapshot(t, dir); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Errorf("a refused adopt changed the directory:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
}

// TestAdoptRefusedWhileMETAJobsRun: on the real Slurm, a job running in
// the META farm's directory (as META's meta-jobs do) makes farm adopt
// refuse and change nothing; once it is cancelled, adopt goes ahead.
func TestAdoptRefusedWhileMETAJobsRun(t *testing.T) {
	needSlurm(t)
	t.Parallel()
	dir := metaFarm(t, 10, []int{1}, nil)
	cmd := exec.Command("sbatch", "--parsable", "-t", "5", "-o", "/dev/null", "--wrap", "sleep 300")
	cmd.Dir = dir
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("sbatch: %v", err)
	}
	id := strings.TrimSpace(string(b))
	defer exec.Command("scancel", id).Run()
	before := snapshot(t, dir)
	r := farmIn(t, dir, nil, "adopt", "--backend=slurm")
	want := fmt.Sprintf("farm: 1 job(s) of this farm are still queued or running (slurm job(s) %s): let them end, or cancel them, then run farm adopt again; nothing was changed\n", id)
	if r.Code != 1 || r.Err != want {
		t.Errorf("adopt with META's job %s active: exit %d, stderr %q; want %q", id, r.Code, r.Err, want)
	}
	if after := snapshot(t, dir); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("a refused adopt changed the directory")
	}
	exec.Command("scancel", id).Run()
	waitFor(t, time.Minute, "the job to leave the queue", func() bool {
		out, _ := exec.Command("squeue", "-h", "-j", id, "-o", "%T").Output()
		return strings.TrimSpace(string(out)) == ""
	})
	if r := farmIn(t, dir, nil, "adopt", "--backend=slurm"); r.Code != 0 {
		t.Errorf("adopt once the job is gone: exit %d, %q", r.Code, r.Err)
	}
}

// TestTableChangedDuringARun: a line appended to table.dat while a run
// uses it changes nothing for the run, which reads its own copy (issue
// 21): every case runs once, no meta-job stops, and the duplicate ID
// appended is refused by farm resubmit, with its line.
func TestTableChangedDuringARun(t *testing.T) {
	t.Parallel()
	var table []string
	for i := 1; i <= 6; i++ {
		table = append(table, fmt.Sprintf("echo %d >> ../ran.list; sleep 0.5", i))
	}
	dir := newFarm(t, table, "0-00:10")
	mustFarm(t, dir, "submit", "2", "--backend", "local")
	waitFor(t, time.Minute, "a case to run", func() bool {
		_, err := os.Stat(filepath.Join(dir, "ran.list"))
		return err == nil
	})
	appendFile(t, dir, "table.dat", "2 echo 2 >> ../ran.list\n")
	if r := farmIn(t, dir, nil, "wait", "--timeout", "2m"); r.Code != 0 || !strings.Contains(r.Out, "6 cases: 6 succeeded") || !strings.Contains(r.Err, "table.dat:7: duplicate case ID 2 (first used on line 2): not counted") {
		t.Errorf("farm wait: exit %d\n%s%s", r.Code, r.Out, r.Err)
	}
	outs, _ := filepath.Glob(filepath.Join(dir, "OUTPUT", "*.out"))
	for _, o := range outs {
		b, _ := os.ReadFile(o)
		if strings.Contains(string(b), "changed during run") || !strings.Contains(string(b), "No cases left; exiting.") {
			t.Errorf("%s: the meta-job did not end as usual:\n%s", filepath.Base(o), b)
		}
	}
	r := farmIn(t, dir, nil, "resubmit", "1", "--backend", "local")
	if r.Code != 1 || !strings.Contains(r.Err, "table.dat:7: duplicate case ID 2 (first used on line 2)") {
		t.Errorf("resubmit over a table with a duplicate ID: exit %d, %q", r.Code, r.Err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "ran.list"))
	seen := map[string]int{}
	for _, f := range strings.Fields(string(b)) {
		if seen[f]++; seen[f] > 1 {
			t.Errorf("case %s ran twice", f)
		}
	}
	if len(seen) != 6 {
		t.Errorf("%d cases ran, want 6", len(seen))
	}
}

func appendFile(t *testing.T, dir, name, s string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// TestAdoptEdges: a status.* file that is not META's stays where it is;
// an adopt that stopped before its last step (job_script.sh still META's)
// is finished by running it again; a Slurm that does not answer makes
// adopt refuse, changing nothing.
func TestAdoptEdges(t *testing.T) {
	t.Parallel()
	t.Run("half-way", func(t *testing.T) {
		dir := metaFarm(t, 10, []int{1, 2, 3}, nil)
		os.WriteFile(filepath.Join(dir, "status.txt"), []byte("notes of mine\n"), 0o644)
		mustFarm(t, dir, "adopt", "--backend=local")
		if b, err := os.ReadFile(filepath.Join(dir, "status.txt")); err != nil || string(b) != "notes of mine\n" {
			t.Errorf("status.txt was moved or changed: %q, %v", b, err)
		}
		// As if it had stopped before replacing job_script.sh.
		b, _ := os.ReadFile(filepath.Join(dir, "job_script.sh.meta"))
		os.WriteFile(filepath.Join(dir, "job_script.sh"), b, 0o755)
		out := mustFarm(t, dir, "adopt", "--backend=local")
		if !strings.Contains(out, "3 of the 10 cases of table.dat succeeded") {
			t.Errorf("the second adopt said %q", out)
		}
		mustFarm(t, dir, "resubmit", "2", "--backend", "local")
		if out := mustFarm(t, dir, "wait", "--timeout", "2m"); !strings.Contains(out, "10 cases: 10 succeeded") {
			t.Errorf("wait said %q", out)
		}
	})
	t.Run("slurm silent", func(t *testing.T) {
		dir := metaFarm(t, 10, []int{1}, nil)
		bin := t.TempDir()
		os.WriteFile(filepath.Join(bin, "squeue"), []byte("#!/bin/sh\necho 'squeue: error: Unable to contact slurm controller' >&2\nexit 1\n"), 0o755)
		before := snapshot(t, dir)
		r := farmIn(t, dir, []string{"PATH=" + bin + ":" + os.Getenv("PATH")}, "adopt")
		if r.Code != 1 || !strings.Contains(r.Err, "cannot tell whether META jobs of this farm are still queued or running; nothing was changed") {
			t.Errorf("adopt with a silent Slurm: exit %d, %q", r.Code, r.Err)
		}
		if after := snapshot(t, dir); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("a refused adopt changed the directory")
		}
	})
	t.Run("meta copy in the way", func(t *testing.T) {
		dir := metaFarm(t, 10, []int{1}, nil)
		os.WriteFile(filepath.Join(dir, "job_script.sh.meta"), []byte("something else\n"), 0o644)
		before := snapshot(t, dir)
		r := farmIn(t, dir, nil, "adopt", "--backend=local")
		if r.Code != 1 || r.Err != "farm: job_script.sh.meta exists (farm adopt keeps META's job_script.sh there): move it away, then run farm adopt again; nothing was changed\n" {
			t.Errorf("adopt with a job_script.sh.meta in the way: exit %d, %q", r.Code, r.Err)
		}
		if after := snapshot(t, dir); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("a refused adopt changed the directory")
		}
	})
}
