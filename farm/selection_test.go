package farm

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/farm-hpc/farm/layout"
	"github.com/farm-hpc/farm/status"
	"github.com/google/go-cmp/cmp"
)

// selectionFarm is a farm of 8 cases after one run whose job recorded
// every kind: 1 and 8 succeeded, 2 failed, 3 interrupted (started, never
// ended, its job gone), 4 and 5 unfit; 6 and 7 never ran.
func selectionFarm(t *testing.T) (*Farm, *strings.Builder) {
	t.Helper()
	ctx := context.Background()
	f, out := newTestFarm(t, strings.Repeat("true\n", 8), &fakeBackend{})
	if err := f.Submit(ctx, SubmitOptions{N: 1}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1_700_000_000, 0)
	writeStatus(t, f, "101", 1, func(w *status.Writer) {
		for _, id := range []int64{1, 8} {
			w.StartAt(id, t0, status.Placement{Loop: 1, CPUs: []int{0}})
			w.End(id, 0, t0, time.Second)
		}
		w.StartAt(2, t0, status.Placement{Loop: 1, CPUs: []int{0}})
		w.End(2, 1, t0, time.Second)
		w.Unfit(4, t0, "needs 16 CPUs, the job has 8")
		w.Unfit(5, t0, "needs 16 CPUs, the job has 8")
		w.StartAt(3, t0, status.Placement{Loop: 1, CPUs: []int{0}})
	})
	out.Reset()
	var b strings.Builder
	f.Out = &b
	return f, &b
}

// Each selection option of resubmit chooses exactly the cases it names,
// says what it chose, and the cases it chose are table.dat_.
func TestResubmitSelectsExactly(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		args []string
		ids  []int64
		said string
	}{
		{nil, []int64{2, 3, 4, 5, 6, 7}, "Resubmitting the 6 case(s) that failed, were interrupted, were unfit or never ran (table.dat_)."},
		{[]string{"--failed"}, []int64{2}, "Resubmitting the 1 case(s) chosen by --failed (1 failed) (table.dat_)."},
		{[]string{"--interrupted"}, []int64{3}, "Resubmitting the 1 case(s) chosen by --interrupted (1 interrupted) (table.dat_)."},
		{[]string{"--unfit"}, []int64{4, 5}, "Resubmitting the 2 case(s) chosen by --unfit (2 unfit) (table.dat_)."},
		{[]string{"--never-run"}, []int64{6, 7}, "Resubmitting the 2 case(s) chosen by --never-run (2 never ran) (table.dat_)."},
		{[]string{"--failed", "--never-run", "-interrupted"}, []int64{2, 3, 6, 7}, "Resubmitting the 4 case(s) chosen by --failed --never-run --interrupted (1 failed, 1 interrupted, 2 never ran) (table.dat_)."},
		{[]string{"--cases", "1,6-7"}, []int64{1, 6, 7}, "Resubmitting the 3 case(s) chosen by --cases 1,6-7 (2 never ran, 1 succeeded) (table.dat_)."},
		{[]string{"--cases=2-8", "--unfit"}, []int64{4, 5}, "Resubmitting the 2 case(s) chosen by --cases 2-8 --unfit (2 unfit) (table.dat_)."},
		{[]string{"--failed", "--cases", "1", "--cases", "2"}, []int64{2}, "Resubmitting the 1 case(s) chosen by --failed --cases 1 --cases 2 (1 failed) (table.dat_)."},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			f, out := selectionFarm(t)
			resubmitChoosing(t, f, out, c.args, c.ids, c.said)
			if st, err := f.readState(ctx); err != nil || st.Run != 2 || st.Cases != int64(len(c.ids)) {
				t.Errorf("state after the resubmit: run %d, %d cases, %v; want run 2 of %d", st.Run, st.Cases, err, len(c.ids))
			}
		})
	}
}

// resubmitChoosing resubmits f with the selection options args and checks
// that it said said (out is f's output) and chose the cases ids.
func resubmitChoosing(t *testing.T, f *Farm, out *strings.Builder, args []string, ids []int64, said string) {
	t.Helper()
	var sel Selection
	for i := 0; i < len(args); i++ {
		took, err := sel.Parse(args, i)
		if err != nil || took == 0 {
			t.Fatalf("Parse(%q, %d): %d, %v", args, i, took, err)
		}
		i += took - 1
	}
	if err := f.Resubmit(context.Background(), SubmitOptions{N: 1, Select: sel}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), said) {
		t.Errorf("resubmit said %q, want %q", out, said)
	}
	if diff := cmp.Diff(ids, tableIDs(t, f.Path(layout.RetryTable))); diff != "" {
		t.Errorf("table.dat_ (-want +got):\n%s", diff)
	}
}

// A selection that chooses nothing says so and submits nothing (the CLI
// exits 0, as with nothing left); IDs the table does not have, and bad
// options, are refused with nothing submitted.
func TestResubmitSelectionRefusals(t *testing.T) {
	ctx := context.Background()
	f, _ := selectionFarm(t)
	parse := func(args ...string) Selection {
		var sel Selection
		for i := 0; i < len(args); i++ {
			took, err := sel.Parse(args, i)
			if err != nil {
				t.Fatal(err)
			}
			i += took - 1
		}
		return sel
	}
	err := f.Resubmit(ctx, SubmitOptions{N: 1, Select: parse("--cases", "1", "--failed")})
	if !errors.Is(err, ErrNothingLeft) || !strings.Contains(err.Error(), "no case is chosen by --cases 1 --failed") {
		t.Errorf("a selection of nothing: %v", err)
	}
	for _, c := range []struct {
		sel  Selection
		want string
	}{
		{parse("--cases", "9"), "--cases: table.dat has no case 9; nothing was submitted"},
		{parse("--cases", "2,9-20"), "--cases: table.dat has no case from 9 to 20; nothing was submitted"},
	} {
		if err := f.Resubmit(ctx, SubmitOptions{N: 1, Select: c.sel}); err == nil || !IsUserError(err) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want %q", c.sel, err, c.want)
		}
	}
	if st, err := f.readState(ctx); err != nil || st.Run != 1 {
		t.Errorf("the refused resubmits changed the state: run %d, %v", st.Run, err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--cases"}, "--cases needs the IDs"},
		{[]string{"--cases", "3,,4"}, `"" is empty`},
		{[]string{"--cases", "0"}, `"0" is not a case ID`},
		{[]string{"--cases", "x-4"}, `"x-4" is not a case ID`},
		{[]string{"--cases", "4-"}, `"4-" is not a range`},
		{[]string{"--cases", "9-4"}, `"9-4" ends before it starts`},
	} {
		var sel Selection
		if _, err := sel.Parse(c.args, 0); err == nil || !IsUserError(err) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q): %v; want %q", c.args, err, c.want)
		}
	}
	var sel Selection
	if took, err := sel.Parse([]string{"--mem=4G"}, 0); took != 0 || err != nil || !sel.IsZero() {
		t.Errorf("Parse of a batch-system argument: took %d, %v, %+v", took, err, sel)
	}
}

// crashFarm is a farm of 6 cases with MAX_CRASHES=2 after two runs: 1
// succeeded; 2 failed; 3 interrupted once with no end (1 crash); 4
// interrupted so twice (crashed); 5 so twice, then failed (crashed); 6
// crashed twice, then succeeded (not crashed).
func crashFarm(t *testing.T) (*Farm, *strings.Builder) {
	t.Helper()
	ctx := context.Background()
	f, out := newTestFarm(t, strings.Repeat("true\n", 6), &fakeBackend{})
	f.Config.MaxCrashes = 2
	if err := f.Submit(ctx, SubmitOptions{N: 1}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1_700_000_000, 0)
	writeStatus(t, f, "101", 1, func(w *status.Writer) {
		w.Start(1, t0)
		w.End(1, 0, t0, time.Second)
		for _, id := range []int64{4, 5, 6} {
			w.Start(id, t0) // its job died under it: a crash
		}
	})
	writeStatus(t, f, "201", 2, func(w *status.Writer) {
		w.Start(2, t0)
		w.End(2, 1, t0, time.Second)
		w.Start(6, t0)
		w.End(6, 0, t0, time.Second)
		w.Start(3, t0)
		w.Start(4, t0)
		w.Start(5, t0)
	})
	writeStatus(t, f, "301", 3, func(w *status.Writer) {
		w.Start(5, t0)
		w.End(5, 1, t0, time.Second)
		w.Start(6, t0)
	})
	out.Reset()
	var b strings.Builder
	f.Out = &b
	return f, &b
}

// The crash limit: resubmit leaves crashed cases out (and says so) unless
// --crashed, or their IDs with --cases alone, choose them; with nothing else
// left it refuses with a line that says how to run them.
func TestResubmitLeavesCrashedCasesOut(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		args []string
		ids  []int64
		said string
	}{
		{nil, []int64{2, 3}, "Resubmitting the 2 case(s) that failed, were interrupted, were unfit or never ran; 2 crashed case(s) left out (their meta-job died under them MAX_CRASHES=2 times): 'farm resubmit --crashed' runs them (table.dat_)."},
		{[]string{"--crashed"}, []int64{4, 5}, "Resubmitting the 2 case(s) chosen by --crashed (2 crashed) (table.dat_)."},
		{[]string{"--failed"}, []int64{2}, "Resubmitting the 1 case(s) chosen by --failed (1 failed); 1 crashed case(s) left out (their meta-job died under them MAX_CRASHES=2 times): 'farm resubmit --crashed' runs them (table.dat_)."},
		{[]string{"--interrupted", "--crashed"}, []int64{3, 4, 5}, "Resubmitting the 3 case(s) chosen by --interrupted --crashed (1 interrupted, 2 crashed) (table.dat_)."},
		{[]string{"--cases", "4-6"}, []int64{4, 5, 6}, "Resubmitting the 3 case(s) chosen by --cases 4-6 (2 crashed, 1 succeeded) (table.dat_)."},
		{[]string{"--crashed", "--cases", "5-6"}, []int64{5}, "Resubmitting the 1 case(s) chosen by --crashed --cases 5-6 (1 crashed) (table.dat_)."},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			f, out := crashFarm(t)
			resubmitChoosing(t, f, out, c.args, c.ids, c.said)
		})
	}
	// MAX_CRASHES=0: no limit; every case not succeeded runs again.
	f, _ := crashFarm(t)
	f.Config.MaxCrashes = 0
	if err := f.Resubmit(ctx, SubmitOptions{N: 1}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int64{2, 3, 4, 5}, tableIDs(t, f.Path(layout.RetryTable))); diff != "" {
		t.Errorf("table.dat_ with MAX_CRASHES=0 (-want +got):\n%s", diff)
	}
}

// With only crashed and failed cases left, -auto ends with a line that
// says so and how to run them; a plain resubmit of only crashed cases is
// refused with the same advice.
func TestAutojobStopsAtTheCrashLimit(t *testing.T) {
	ctx := context.Background()
	f, out := crashFarm(t)
	// Case 3 succeeds in run 3 too: failed (2) and crashed (4, 5) are left.
	writeStatus(t, f, "302", 3, func(w *status.Writer) {
		t0 := time.Unix(1_700_000_100, 0)
		w.Start(3, t0)
		w.End(3, 0, t0, time.Second)
	})
	if err := f.Autojob(ctx, JobEnv{Run: 1, Auto: true, AutoN: 1}, "100"); err != nil {
		t.Fatal(err)
	}
	want := "Only failed or crashed cases left (1 failed, 2 crashed: their meta-job died under them MAX_CRASHES=2 times); cannot auto-resubmit; exiting. 'farm resubmit --failed' or 'farm resubmit --crashed' runs them again.\n"
	if out.String() != want {
		t.Errorf("autojob said %q, want %q", out, want)
	}
	if st, _ := f.readState(ctx); st.Run != 1 {
		t.Errorf("the autojob started run %d", st.Run)
	}
	var sel Selection
	sel.Parse([]string{"--interrupted"}, 0)
	err := f.Resubmit(ctx, SubmitOptions{N: 1, Select: sel})
	if want := "nothing to resubmit chosen by --interrupted: the 1 case(s) left are crashed"; err == nil || !IsUserError(err) || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("resubmit --interrupted of a crashed case only: %v; want %q", err, want)
	}
	// Without case 2's failure, a plain resubmit has only crashed cases.
	writeStatus(t, f, "303", 3, func(w *status.Writer) {
		t0 := time.Unix(1_700_000_200, 0)
		w.Start(2, t0)
		w.End(2, 0, t0, time.Second)
	})
	err = f.Resubmit(ctx, SubmitOptions{N: 1})
	if want := "nothing to resubmit: the 2 case(s) left are crashed (their meta-job died under them MAX_CRASHES=2 times); 'farm resubmit --crashed' runs them again, or raise MAX_CRASHES in config"; err == nil || !IsUserError(err) || err.Error() != want {
		t.Errorf("resubmit of crashed cases only: %v; want %q", err, want)
	}
}

// farm query counts the crashed cases farm-wide, in its text and its JSON.
func TestQueryCountsCrashedCases(t *testing.T) {
	f, _ := crashFarm(t)
	var b strings.Builder
	if err := f.PrintQuery(context.Background(), &b, Text); err != nil {
		t.Fatal(err)
	}
	if want := "Crashed: 2 case(s), their meta-job died under them MAX_CRASHES=2 times; resubmit and -auto leave them out ('farm resubmit --crashed' runs them)\n"; !strings.Contains(b.String(), want) {
		t.Errorf("query said:\n%s\nwant a line %q", b.String(), want)
	}
	b.Reset()
	if err := f.PrintQuery(context.Background(), &b, JSON); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"interrupted":2,"unfit":0,"running":0,"left":0,"crashed":2}`) || !strings.Contains(b.String(), `"max_crashes":2`) {
		t.Errorf("query --json: %s", b.String())
	}
}
