package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// OUTPUT=job (issue 38): each case's output kept apart, with no file per
// case, and farm output prints it.

// TestOutputKeepsEachCasesBytes: in a WHOLE_NODE job whose 4 loops write
// at once, in chunks, stdout and stderr, farm output returns each case's
// exact bytes (a last line without its newline, NUL and 0xff bytes, 70 kB
// at once), each attempt of a case that was retried, what a case wrote
// before its time limit ended it; --tail, --failed; and none of it is in
// the job's output file.
func TestOutputKeepsEachCasesBytes(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	var table []string
	outs, errs := map[int]string{}, map[int]string{}
	for i := 1; i <= 20; i++ {
		cmd := fmt.Sprintf(`for k in 1 2 3; do printf 'c%d-out%%d\n' $k; printf 'c%d-err%%d\n' $k >&2; sleep 0.05; done; printf 'tail%d'`, i, i, i)
		outs[i] = fmt.Sprintf("c%d-out1\nc%d-out2\nc%d-out3\ntail%d", i, i, i, i)
		errs[i] = fmt.Sprintf("c%d-err1\nc%d-err2\nc%d-err3\n", i, i, i)
		if i%5 == 0 {
			cmd += `; head -c 70000 /dev/zero | tr '\0' q`
			outs[i] += strings.Repeat("q", 70000)
		}
		table = append(table, cmd)
	}
	table = append(table,
		`printf 'a\000b\377\n'; echo 'to /dev/stderr' >/dev/stderr`,
		fmt.Sprintf(`n=$(cat %[1]s/n 2>/dev/null || echo 0); n=$((n+1)); echo $n >%[1]s/n; echo attempt $n; echo oops $n >&2; exit 4`, work),
		`echo before; sleep 30   #FARM time=1s`,
		`:`)
	outs[21], errs[21] = "a\x00b\xff\n", "to /dev/stderr\n"
	outs[22], errs[22] = "attempt 2\n", "oops 2\n"
	outs[23], errs[23] = "before\n", ""
	outs[24], errs[24] = "", ""
	dir := newFarm(t, table, "0-00:10")
	setConfig(t, dir, "RUN_DIRS", "0")
	setConfig(t, dir, "RETRIES", "1")
	setConfig(t, dir, "CASE_KILL_GRACE", "1")
	setConfig(t, dir, "N_failed_max", "0")
	appendConfig(t, dir, "WHOLE_NODE=1\nNWHOLE=4\n")
	mustFarmShort(t, dir, "submit", "1", "--backend", "local")
	mustFarmCode(t, dir, exitNotAllOK, "wait", "--timeout", "2m")

	for i := 1; i <= 24; i++ {
		if got := mustFarm(t, dir, "output", fmt.Sprint(i)); got != outs[i] {
			t.Errorf("farm output %d: %.80q, want %.80q", i, got, outs[i])
		}
		if got := mustFarm(t, dir, "output", "--stderr", fmt.Sprint(i)); got != errs[i] {
			t.Errorf("farm output --stderr %d: %.80q, want %.80q", i, got, errs[i])
		}
	}
	if got := mustFarm(t, dir, "output", "22", "--attempt", "1"); got != "attempt 1\n" {
		t.Errorf("farm output 22 --attempt 1: %q", got)
	}
	if r := mustFarmCode(t, dir, 1, "output", "22", "--attempt=3"); !strings.Contains(r.Err, "case 22 started 2 time(s)") {
		t.Errorf("farm output 22 --attempt=3: %q", r.Err)
	}
	if got := mustFarm(t, dir, "output", "--tail", "2", "1"); got != "c1-out3\ntail1" {
		t.Errorf("farm output --tail 2 1: %q", got)
	}
	failed := mustFarm(t, dir, "output", "--failed")
	for _, want := range []string{"==> case 22: failed with status 4", "attempt 2\n", "oops 2\n", "==> case 23: timed out", "before\n"} {
		if !strings.Contains(failed, want) {
			t.Errorf("farm output --failed lacks %q:\n%s", want, failed)
		}
	}
	if strings.Contains(failed, "case 1:") {
		t.Errorf("farm output --failed shows a case that succeeded:\n%s", failed)
	}
	checkNotKeptApart(t, dir)
	files, _ := filepath.Glob(filepath.Join(dir, "OUTPUT", "cases.*"))
	if len(files) != 8 {
		t.Errorf("OUTPUT holds %d files of cases, want 2 for each of the 4 loops: %v", len(files), files)
	}
	jobOut, _ := filepath.Glob(filepath.Join(dir, "OUTPUT", "slurm-*.out"))
	for _, f := range jobOut {
		if b, _ := os.ReadFile(f); strings.Contains(string(b), "c1-out") || strings.Contains(string(b), "oops 1") {
			t.Errorf("the job's output %s holds the cases' output:\n%.400s", f, b)
		}
	}
}

// checkNotKeptApart: once OUTPUT=stream runs case 22 again, farm output
// says its latest attempt was not kept apart (not an older one's bytes),
// and --attempt still finds the older ones.
func checkNotKeptApart(t *testing.T, dir string) {
	t.Helper()
	setConfig(t, dir, "OUTPUT", "stream")
	mustFarmShort(t, dir, "resubmit", "1", "--cases", "22", "--backend", "local")
	mustFarmCode(t, dir, exitNotAllOK, "wait", "--timeout", "2m")
	if r := mustFarmCode(t, dir, 1, "output", "22"); !strings.Contains(r.Err, "the latest attempt of case 22 (job ") || !strings.Contains(r.Err, "was not kept apart") {
		t.Errorf("farm output 22 after a run with OUTPUT=stream: %q", r.Err)
	}
	if got := mustFarm(t, dir, "output", "22", "--attempt", "2"); got != "attempt 2\n" {
		t.Errorf("farm output 22 --attempt 2: %q", got)
	}
	setConfig(t, dir, "OUTPUT", "job")
}

// appendConfig adds lines to the farm's config.
func appendConfig(t *testing.T, dir, lines string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, "config"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("\n" + lines); err != nil {
		t.Fatal(err)
	}
}

// TestOutputFilesGrowWithJobsNotCases: a farm of 100,000 cases that each
// write a line, with RUN_DIRS=0 and OUTPUT=job, makes a number of files
// (inodes, what a quota counts) that grows with its meta-jobs: 3 in
// OUTPUT/ and 1 in STATUSES/ per meta-job of one loop, a few of farm's
// own per run and per job, and the claim state's generations, of which at
// most 1,024 a chain stay files of their own (older ones are buried:
// links to one tomb). In make local-extra: 79 s here.
func TestOutputFilesGrowWithJobsNotCases(t *testing.T) {
	const cases, jobs = 100000, 4
	table := make([]string, cases)
	for i := range table {
		table[i] = "echo $ID"
	}
	dir := newFarm(t, table, "0-01:00")
	setConfig(t, dir, "RUN_DIRS", "0")
	// As single_case.sh says for RUN_DIRS=0: its line that makes RUN$ID
	// goes too.
	sc := filepath.Join(dir, "single_case.sh")
	b, err := os.ReadFile(sc)
	if err != nil {
		t.Fatal(err)
	}
	noRun := regexp.MustCompile(`(?m)^cd "RUN\$ID".*\n`).ReplaceAll(b, nil)
	if len(noRun) == len(b) {
		t.Fatal("single_case.sh has no line that makes RUN$ID")
	}
	if err := os.WriteFile(sc, noRun, 0o755); err != nil {
		t.Fatal(err)
	}
	mustFarmShort(t, dir, "submit", fmt.Sprint(jobs), "--backend", "local")
	mustFarm(t, dir, "wait", "--timeout", "25m")
	for _, id := range []int{1, 50000, cases} {
		if got := mustFarm(t, dir, "output", fmt.Sprint(id)); got != fmt.Sprintf("%d\n", id) {
			t.Errorf("farm output %d: %q", id, got)
		}
	}
	inodes := map[uint64]bool{}
	by := map[string]int{}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		ino := fi.Sys().(*syscall.Stat_t).Ino
		if inodes[ino] {
			return nil
		}
		inodes[ino] = true
		rel, _ := filepath.Rel(dir, p)
		top, _, _ := strings.Cut(rel, string(filepath.Separator))
		if strings.HasPrefix(top, "MISC") {
			if part := strings.Split(rel, string(filepath.Separator)); len(part) > 1 {
				top += "/" + regexp.MustCompile(`\..*`).ReplaceAllString(part[1], ".*")
			}
		}
		by[top]++
		return nil
	})
	t.Logf("%d inodes for %d cases and %d meta-jobs: %v", len(inodes), cases, jobs, by)
	if by["OUTPUT"] != 1+3*jobs || by["STATUSES"] != 1+jobs {
		t.Errorf("OUTPUT/ and STATUSES/ (with themselves) hold %d and %d inodes; want %d and %d", by["OUTPUT"], by["STATUSES"], 1+3*jobs, 1+jobs)
	}
	if n := by["MISC/lanes.*"]; n > 2*1024+16 {
		t.Errorf("the claim state's lanes hold %d inodes: more than 2 a generation for 1,024 generations", n)
	}
	if rest := len(inodes) - by["OUTPUT"] - by["STATUSES"] - by["MISC/lanes.*"]; rest > 40+10*jobs {
		t.Errorf("%d other inodes: more than 40 + 10 a meta-job", rest)
	}
}
