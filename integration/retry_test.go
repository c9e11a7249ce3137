package integration

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// RETRIES=2, RETRY_DELAY=1 on the local backend, 2 meta-jobs: a case that
// fails twice and then succeeds ends succeeded in run 1 with 3 attempts, a
// case that always fails ends failed with 3 attempts, and the others run
// once. The status records say which attempt each start is; each retry
// starts at least RETRY_DELAY after its failure ended; farm query counts
// each case once in the run and says how many were started more than once.
func TestLocalRetriesRerunFailedCasesInTheRun(t *testing.T) {
	t.Parallel()
	count := filepath.Join(t.TempDir(), "count")
	flaky := `n=$(cat ` + count + ` 2>/dev/null || echo 0); echo $((n+1)) > ` + count + `; [ "$n" -ge 2 ]`
	cases := append([]string{flaky, "exit 3"}, repeat("sleep 0.1", 6)...)
	dir := newFarm(t, cases, "0-00:10")
	setConfig(t, dir, "RETRIES", "2")
	setConfig(t, dir, "RETRY_DELAY", "1")
	mustFarm(t, dir, "submit", "2", "--backend", "local")
	mustFarmCode(t, dir, exitNotAllOK, "wait", "--timeout", "2m")

	st := statusJSON(t, dir)
	if c := st[1]; c.State != "succeeded" || c.Attempts != 3 || c.Run != 1 {
		t.Errorf("case 1 (fails twice): %+v; want succeeded in run 1 after 3 attempts", c)
	}
	if c := st[2]; c.State != "failed" || c.Status != 3 || c.Attempts != 3 {
		t.Errorf("case 2 (always fails): %+v; want failed (3) after 3 attempts", c)
	}
	for id := int64(3); id <= 8; id++ {
		if c := st[id]; c.State != "succeeded" || c.Attempts != 1 {
			t.Errorf("case %d: %+v; want succeeded at its first attempt", id, c)
		}
	}
	checkRetryRecords(t, dir)
	q := farmIn(t, dir, nil, "query")
	if want := "run 1  8      7          1"; !strings.Contains(q.Out, want) {
		t.Errorf("farm query does not count each case once (%q):\n%s", want, q.Out)
	}
	if want := "Attempts: 2 case(s) started more than once, at most 3 times"; !strings.Contains(q.Out, want) {
		t.Errorf("farm query does not say %q:\n%s", want, q.Out)
	}
	if strings.Contains(q.Out+q.Err, "started 2 times") || strings.Contains(q.Out+q.Err, "started 3 times") {
		t.Errorf("farm query takes the retries for duplicates:\n%s%s", q.Out, q.Err)
	}
}

// Fast-failure protection still trips with retries on: a meta-job whose
// cases all fail at once (a broken node) stops after N_failed_max very
// short failures, retries included, and leaves its pending retries, failed,
// for the next run, saying so; the failures it made are attempts of their
// cases, and 'farm resubmit' runs them again.
func TestLocalRetriesStillTripFastFailure(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, repeat("exit 1", 4), "0-00:10")
	setConfig(t, dir, "RETRIES", "5")
	setConfig(t, dir, "RETRY_DELAY", "1") // cases 1 and 2 wait for theirs as case 3 fails
	setConfig(t, dir, "N_failed_max", "3")
	mustFarm(t, dir, "submit", "1", "--backend", "local")
	mustFarmCode(t, dir, exitNotAllOK, "wait", "--timeout", "1m")
	out, _ := filepath.Glob(filepath.Join(dir, "OUTPUT", "*.out"))
	if len(out) != 1 {
		t.Fatalf("job outputs %v, want 1", out)
	}
	b, _ := os.ReadFile(out[0])
	for _, want := range []string{"Too many failed (very short) cases - exiting", "failed case(s) due to run again are left, failed, for the next run"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the job's output does not say %q:\n%s", want, b)
		}
	}
	st := statusJSON(t, dir)
	attempts := 0
	for id := int64(1); id <= 4; id++ {
		attempts += st[id].Attempts
	}
	if attempts != 3 {
		t.Errorf("%d attempts in all, want 3 (N_failed_max): %+v", attempts, st)
	}
}

// In SIMPLE mode (farm submit -1: a job a case) a job runs its own case's
// retries and claims nothing more: the flaky case succeeds on its second
// attempt, and each of the 3 jobs ran one case.
func TestLocalRetriesInSimpleMode(t *testing.T) {
	t.Parallel()
	count := filepath.Join(t.TempDir(), "count")
	flaky := `n=$(cat ` + count + ` 2>/dev/null || echo 0); echo $((n+1)) > ` + count + `; [ "$n" -ge 1 ]`
	dir := newFarm(t, []string{flaky, "true", "true"}, "0-00:10")
	setConfig(t, dir, "RETRIES", "1")
	mustFarm(t, dir, "submit", "-1", "--backend", "local")
	mustFarm(t, dir, "wait", "--timeout", "1m")
	st := statusJSON(t, dir)
	if c := st[1]; c.State != "succeeded" || c.Attempts != 2 {
		t.Errorf("case 1: %+v; want succeeded after 2 attempts", c)
	}
	jobs := map[string][]int64{}
	for id := int64(1); id <= 3; id++ {
		if c := st[id]; c.State != "succeeded" {
			t.Errorf("case %d: %+v; want succeeded", id, c)
		}
		jobs[st[id].Job] = append(jobs[st[id].Job], id)
	}
	if len(jobs) != 3 {
		t.Errorf("cases by job %v; want one job a case", jobs)
	}
}

// The retries of one bad case do not trip fast-failure protection on a
// healthy node: with RETRIES=4 and the default N_failed_max=5, a case that
// fails at once every time is tried 5 times and the meta-job runs the
// other cases.
func TestLocalRetriesOfOneCaseDoNotTripFastFailure(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, append([]string{"exit 1"}, repeat("true", 5)...), "0-00:10")
	setConfig(t, dir, "RETRIES", "4")
	mustFarm(t, dir, "submit", "1", "--backend", "local")
	mustFarmCode(t, dir, exitNotAllOK, "wait", "--timeout", "1m")
	st := statusJSON(t, dir)
	if c := st[1]; c.State != "failed" || c.Attempts != 5 {
		t.Errorf("case 1: %+v; want failed after 5 attempts", c)
	}
	for id := int64(2); id <= 6; id++ {
		if c := st[id]; c.State != "succeeded" {
			t.Errorf("case %d: %+v; want succeeded (fast-failure protection tripped?)", id, c)
		}
	}
}

// checkRetryRecords: attempts 2 and 3 of cases 1 and 2 say so, each at
// least a second (RETRY_DELAY) after the end of the attempt before it.
func checkRetryRecords(t *testing.T, dir string) {
	t.Helper()
	start := regexp.MustCompile(`(?m)^S ([12]) (\S+) \S+(?: attempt=(\d) why=retry)?(?: out=\d+ err=\d+)?$`)
	end := regexp.MustCompile(`(?m)^E ([12]) (\d+) (\S+) (\S+) `)
	files, _ := filepath.Glob(filepath.Join(dir, "STATUSES", "status.*"))
	seen := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		ends := map[string]float64{} // case -> end of its last attempt so far
		idx := map[string]int{}
		for _, m := range start.FindAllStringSubmatchIndex(s, -1) {
			id, at := s[m[2]:m[3]], s[m[4]:m[5]]
			attempt := "1"
			if m[6] >= 0 {
				attempt = s[m[6]:m[7]]
			}
			idx[id]++
			if want := strconv.Itoa(idx[id]); attempt != want {
				t.Errorf("%s: start %s of case %s says attempt %s", filepath.Base(f), want, id, attempt)
			}
			t0, _ := strconv.ParseFloat(at, 64)
			if prev, ok := ends[id]; ok && t0 < prev+1-0.005 { // times are in ms
				t.Errorf("%s: case %s's attempt %s started %.3f s after the one before ended; RETRY_DELAY=1", filepath.Base(f), id, attempt, t0-prev)
			}
			for _, e := range end.FindAllStringSubmatch(s[m[1]:], -1) {
				if e[1] == id {
					s0, _ := strconv.ParseFloat(e[3], 64)
					d, _ := strconv.ParseFloat(e[4], 64)
					ends[id] = s0 + d
					break
				}
			}
		}
		for id, n := range idx {
			if n != 3 {
				t.Errorf("%s: case %s started %d times, want 3 (all in the meta-job that ran it first)", filepath.Base(f), id, n)
			}
		}
		seen += len(idx)
	}
	if seen != 2 {
		t.Errorf("the start records of cases 1 and 2 were found for %d of them: the records changed under this test", seen)
	}
}
