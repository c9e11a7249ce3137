package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/farm-hpc/farm/integration/harness"
)

// chainGen is one generation of a chain directory, as the test reads it.
type chainGen struct {
	n    int64
	body string
}

// chainGens returns the generations of the chain directory dir that are
// not buried, oldest first.
func chainGens(t *testing.T, dir string) []chainGen {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*", "g.*"))
	if err != nil {
		t.Fatal(err)
	}
	var gens []chainGen
	for _, name := range names {
		n, err := strconv.ParseInt(strings.TrimPrefix(filepath.Base(name), "g."), 10, 64)
		if err != nil {
			continue
		}
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(string(b), " buried\n") {
			continue
		}
		gens = append(gens, chainGen{n, string(b)})
	}
	sort.Slice(gens, func(i, j int) bool { return gens[i].n < gens[j].n })
	return gens
}

// liveChains returns the farm's chain directories whose newest generation
// does not close them, and the one MISC/chain names.
func liveChains(t *testing.T, dir string) (live []string, named string) {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(dir, "MISC", "claims.*"))
	for _, d := range dirs {
		gens := chainGens(t, d)
		if len(gens) == 0 || !strings.HasSuffix(gens[len(gens)-1].body, " closed\n") {
			live = append(live, filepath.Base(d))
		}
	}
	b, _ := os.ReadFile(filepath.Join(dir, "MISC", "chain"))
	named = strings.TrimSpace(strings.TrimPrefix(string(b), "farm-chain v2 "))
	return live, named
}

// genField returns the value of key= in a generation's line.
func genField(body, key string) string {
	for _, kv := range strings.Fields(body) {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v
		}
	}
	return ""
}

// oneLineRefusal checks that a racer that lost said so in one line
// "farm: ...", with what it says.
func oneLineRefusal(t *testing.T, trial int, who string, r *racer, says ...string) bool {
	t.Helper()
	e := strings.TrimSuffix(r.err.String(), "\n")
	if r.code != 1 || strings.Contains(e, "\n") || !strings.HasPrefix(e, "farm: ") {
		return false
	}
	for _, s := range says {
		if !strings.Contains(e, s) {
			return false
		}
	}
	return true
}

// TestLocalTwoRepairsOneWins: two 'farm repair' processes, released at
// once from a barrier (the second 0 to 2.75 ms later), on a damaged claim
// state: a MISC/chain of garbage, a missing MISC/chain, a chain directory
// that is gone, a newest generation of garbage. In every trial exactly
// one rebuilds the state and the other says in one line that it lost
// (or, started after the winner ended, that nothing is left to repair);
// afterwards exactly one chain directory is live, the one MISC/chain names,
// and every other is closed, so no process holding an old chain can commit
// on it; and the farm reads well.
func TestLocalTwoRepairsOneWins(t *testing.T) {
	const trials = 12
	base := t.TempDir()
	dir := harness.NewFarmAt(t, filepath.Join(base, "farm"), harness.Repeat("true", 6), "0-00:10")
	env := privateSlots(t, base)
	if r := farmIn(t, dir, env, "submit", "2", "--backend", "local"); r.Code != 0 {
		t.Fatalf("submit: %s %s", r.Out, r.Err)
	}
	if r := farmIn(t, dir, env, "wait", "--timeout", "1m"); r.Code != 0 {
		t.Fatalf("wait: exit %d: %s %s", r.Code, r.Out, r.Err)
	}
	misc := filepath.Join(dir, "MISC")
	outcomes := map[string]int{}
	for trial := 0; trial < trials; trial++ {
		_, named := liveChains(t, dir)
		damage := []string{"chain-garbage", "chain-missing", "dir-gone", "generation-garbage"}[trial%4]
		switch damage {
		case "chain-garbage":
			os.WriteFile(filepath.Join(misc, "chain"), []byte("garbage\n"), 0o644)
		case "chain-missing":
			os.Remove(filepath.Join(misc, "chain"))
		case "dir-gone":
			os.RemoveAll(filepath.Join(misc, named))
		case "generation-garbage":
			gens := chainGens(t, filepath.Join(misc, named))
			last := gens[len(gens)-1].n
			os.WriteFile(filepath.Join(misc, named, fmt.Sprintf("%06d", last/4096), fmt.Sprintf("g.%d", last)), []byte("x\n"), 0o644)
		}
		if r := farmIn(t, dir, env, "query"); r.Code == 0 && damage != "chain-missing" {
			t.Fatalf("trial %d (%s): the damage is not seen: %s", trial, damage, r.Out)
		}
		b := newBarrier(t, t.TempDir())
		offset := time.Duration(trial) * 250 * time.Microsecond
		racers := []*racer{
			startRacer(t, dir, env, b, 0, "repair"),
			startRacer(t, dir, env, b, offset, "repair"),
		}
		for _, r := range racers {
			waitFor(t, 10*time.Second, "a repair to reach the barrier", func() bool { return b.holds(r.cmd.Process.Pid) })
		}
		b.release()
		won := 0
		var what []string
		for i, r := range racers {
			r.wait(t)
			var o string
			switch {
			case r.code == 0 && strings.Contains(r.out.String(), "Rebuilt the claim state"):
				won++
				o = "rebuilt"
			case oneLineRefusal(t, trial, "repair", r, "nothing was repaired"):
				o = "lost"
			case r.code == 0 && strings.Contains(r.out.String(), "nothing to repair"):
				o = "nothing left"
			default:
				o = "?"
				t.Errorf("trial %d (%s): repair %d: exit %d, stdout %q, stderr %q; want the state rebuilt, or a one-line refusal", trial, damage, i, r.code, r.out.String(), r.err.String())
			}
			outcomes[o]++
			what = append(what, o)
		}
		if won != 1 {
			t.Errorf("trial %d (%s): %d repairs rebuilt the state (%v), want 1", trial, damage, won, what)
		}
		live, named := liveChains(t, dir)
		if len(live) != 1 || live[0] != named {
			t.Errorf("trial %d (%s): live chains %v, MISC/chain names %q; want exactly that one live, every other closed", trial, damage, live, named)
		}
		if r := farmIn(t, dir, env, "query"); r.Code != 0 {
			t.Errorf("trial %d (%s): after the repairs, farm query: exit %d: %s", trial, damage, r.Code, r.Err)
		}
		t.Logf("trial %d (%s, +%s): %v", trial, damage, offset, what)
		if t.Failed() {
			harness.Diagnose(t, dir)
			return
		}
	}
	t.Logf("outcomes: %v", outcomes)
}

// TestLocalRepairForceRacingResubmit: 'farm repair --force' and 'farm
// resubmit 2' released at once from a barrier on a farm whose run 1 left
// failed cases, one or the other 0 to 3.5 ms later. A run is never rolled
// back: either the repair wins and the resubmit submits nothing, or the
// resubmit's run 2 stands — its cases run in it — and the repair refuses
// (or closes run 2 only once its jobs have ended). The runs of the chain's
// generations never go down.
func TestLocalRepairForceRacingResubmit(t *testing.T) {
	const trials, cases = 16, 8
	outcomes := map[string]int{}
	for trial := 0; trial < trials; trial++ {
		base := t.TempDir()
		dir, env := farmWithFailedHalf(t, base, cases)
		b := newBarrier(t, base)
		offset := time.Duration(trial/2) * 500 * time.Microsecond
		var rep, res *racer
		if trial%2 == 0 {
			rep = startRacer(t, dir, env, b, 0, "repair", "--force")
			res = startRacer(t, dir, env, b, offset, "resubmit", "2")
		} else {
			res = startRacer(t, dir, env, b, 0, "resubmit", "2")
			rep = startRacer(t, dir, env, b, offset, "repair", "--force")
		}
		for _, r := range []*racer{rep, res} {
			waitFor(t, 10*time.Second, "a racer to reach the barrier", func() bool { return b.holds(r.cmd.Process.Pid) })
		}
		b.release()
		rep.wait(t)
		res.wait(t)
		if r := farmIn(t, dir, env, "wait", "--timeout", "1m"); r.Code != 0 && r.Code != exitNotAllOK {
			t.Errorf("trial %d: wait: exit %d: %s %s", trial, r.Code, r.Out, r.Err)
		}
		resubmitted := res.code == 0 && strings.Contains(res.out.String(), "Submitted 2 meta-jobs for run 2")
		repaired := rep.code == 0 && strings.Contains(rep.out.String(), "Rebuilt the claim state")
		runs := harness.ReadRunRecords(t, dir)
		var o string
		switch {
		case resubmitted:
			// Run 2 stands: its cases ran in it, and every case succeeded.
			if len(runs[2].Starts) != cases/2 {
				t.Errorf("trial %d: the resubmit started run 2, but %d of its %d cases ran in it (the repair rolled it back?)", trial, len(runs[2].Starts), cases/2)
			}
			st := statusJSON(t, dir)
			for id := int64(1); id <= cases; id++ {
				if st[id].State != "succeeded" {
					t.Errorf("trial %d: case %d is %+v at the end, want succeeded", trial, id, st[id])
				}
			}
			switch {
			case repaired && repairGen(t, dir) < run2Gen(t, dir):
				o = "repair, then resubmit (it read the repaired state)"
			case repaired:
				o = "resubmit won, then repair closed run 2 after it ended"
				if !strings.Contains(rep.out.String(), "run 2 is closed") {
					t.Errorf("trial %d: the repair after the resubmit's run 2 closed another run: %q", trial, rep.out.String())
				}
			case oneLineRefusal(t, trial, "repair", rep, "nothing was repaired"):
				o = "resubmit won, repair refused: " + strings.SplitN(rep.err.String(), ":", 3)[1]
			case oneLineRefusal(t, trial, "repair", rep, "pending or running"):
				o = "resubmit won, repair refused: jobs active"
			default:
				t.Errorf("trial %d: the resubmit won; repair: exit %d, stdout %q, stderr %q; want a one-line refusal", trial, rep.code, rep.out.String(), rep.err.String())
			}
		case repaired:
			o = "repair won, resubmit refused"
			if !oneLineRefusal(t, trial, "resubmit", res, "nothing was submitted") {
				t.Errorf("trial %d: the repair won; resubmit: exit %d, stdout %q, stderr %q; want a one-line refusal", trial, res.code, res.out.String(), res.err.String())
			}
			if len(runs[2].Starts) != 0 {
				t.Errorf("trial %d: run 2 ran cases, though no resubmit started it", trial)
			}
		default:
			t.Errorf("trial %d: neither won: repair exit %d %q %q; resubmit exit %d %q %q", trial, rep.code, rep.out.String(), rep.err.String(), res.code, res.out.String(), res.err.String())
		}
		outcomes[o]++
		checkRunsNeverGoDown(t, trial, dir)
		t.Logf("trial %d (%s first, other +%s): %s", trial, map[bool]string{true: "repair", false: "resubmit"}[trial%2 == 0], offset, o)
		if t.Failed() {
			harness.Diagnose(t, dir)
			return
		}
	}
	t.Logf("outcomes: %v", outcomes)
}

// farmWithFailedHalf makes a farm of n cases in base whose run 1 (2
// meta-jobs on the local backend) has ended with every even case failed,
// and which would succeed if run again; it returns the farm and the
// environment of its commands.
func farmWithFailedHalf(t *testing.T, base string, n int) (dir string, env []string) {
	t.Helper()
	marker := filepath.Join(base, "marker")
	var table []string
	for i := 1; i <= n; i++ {
		if i%2 == 0 {
			table = append(table, "test -e "+marker)
		} else {
			table = append(table, "true")
		}
	}
	dir = harness.NewFarmAt(t, filepath.Join(base, "farm"), table, "0-00:10")
	env = privateSlots(t, base)
	if r := farmIn(t, dir, env, "submit", "2", "--backend", "local"); r.Code != 0 {
		t.Fatalf("submit: %s %s", r.Out, r.Err)
	}
	if r := farmIn(t, dir, env, "wait", "--timeout", "1m"); r.Code != exitNotAllOK {
		t.Fatalf("wait after run 1: exit %d, want 3 (cases failed)", r.Code)
	}
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, env
}

// checkRunsNeverGoDown checks the history of the farm's current claim
// chain: the run of each generation is at least that of the one before.
func checkRunsNeverGoDown(t *testing.T, trial int, dir string) {
	t.Helper()
	_, named := liveChains(t, dir)
	prev := 0
	for _, g := range chainGens(t, filepath.Join(dir, "MISC", named)) {
		run, err := strconv.Atoi(genField(g.body, "run"))
		if err != nil {
			continue
		}
		if run < prev {
			t.Errorf("trial %d: generation %d (by %s) is of run %d after run %d: a run was rolled back", trial, g.n, genField(g.body, "by"), run, prev)
		}
		prev = run
	}
}

// repairGen returns the generation the repair made in the current chain,
// run2Gen the one that started run 2 (-1 if none).
func repairGen(t *testing.T, dir string) int64 {
	return findGen(t, dir, func(body string) bool { return genField(body, "by") == "repair" })
}

func run2Gen(t *testing.T, dir string) int64 {
	return findGen(t, dir, func(body string) bool { return genField(body, "run") == "2" })
}

func findGen(t *testing.T, dir string, match func(string) bool) int64 {
	t.Helper()
	_, named := liveChains(t, dir)
	for _, g := range chainGens(t, filepath.Join(dir, "MISC", named)) {
		if match(g.body) {
			return g.n
		}
	}
	return -1
}
