package farm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/farm-hpc/farm/layout"
)

// files lists every path under dir with its size and modification time.
func files(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil {
			out = append(out, fmt.Sprintf("%s %v %v %d", p, fi.ModTime(), fi.Mode(), fi.Size()))
		}
		return nil
	})
	sort.Strings(out)
	return out
}

// TestRefusedSubmitWritesNothing: a wrong run-time, a command too long,
// NJOBS_MAX and the question above 1000 jobs all refuse before table.dat
// is numbered or anything else is written; the question comes last, and
// --yes skips it.
func TestRefusedSubmitWritesNothing(t *testing.T) {
	ctx := context.Background()
	table := strings.Repeat("true\n", 1001)
	asked := 0
	no := func(jobs int) error { asked = jobs; return Userf("no") }
	for _, tc := range []struct {
		name  string
		edit  func(f *Farm)
		opt   SubmitOptions
		msg   string
		asked int
	}{
		{"run-time", func(f *Farm) { setRunTime(t, f, "36-0") }, SubmitOptions{N: 2, Confirm: no}, "job_script.sh:6: Wrong job runtime in job_script.sh - 36-0 . Exiting", 0},
		{"short run-time", func(f *Farm) { setRunTime(t, f, "0:10") }, SubmitOptions{N: 2, Confirm: no}, "job_script.sh:6: Wrong job runtime in job_script.sh - 0:10 . Exiting", 0},
		{"too long", func(f *Farm) {
			os.WriteFile(f.Path(layout.Table), []byte("true\n"+strings.Repeat("y", 200000)+"\n"), 0o644)
		}, SubmitOptions{N: 2, Confirm: no}, "table.dat:2: the command is 200000 bytes long", 0},
		{"NJOBS_MAX first", func(f *Farm) { f.Config.NJobsMax = 1000 }, SubmitOptions{N: -1, Confirm: no}, "NJOBS_MAX=1000 in config", 0},
		{"simple over 1000", nil, SubmitOptions{N: -1, Confirm: no}, "no", 1001},
		// N above the cases is kept only with WAIT_FOR_CASES (capJobs).
		{"meta over 1000", func(f *Farm) { f.Config.WaitForCases = time.Second }, SubmitOptions{N: 5000, Confirm: no}, "no", 5000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, out := newTestFarm(t, table, &fakeBackend{})
			if tc.edit != nil {
				tc.edit(f)
			}
			before := files(t, f.Dir)
			asked = 0
			err := f.Submit(ctx, tc.opt)
			if err == nil || !strings.HasPrefix(err.Error(), tc.msg) || asked != tc.asked {
				t.Errorf("err %v (asked about %d jobs), want %q (asked about %d)", err, asked, tc.msg, tc.asked)
			}
			if after := files(t, f.Dir); strings.Join(after, "\n") != strings.Join(before, "\n") || out.Len() > 0 {
				t.Errorf("a refused submit wrote something, or said %q", out.String())
			}
		})
	}
	f, out := newTestFarm(t, table, &fakeBackend{})
	asked = 0
	if err := f.Submit(ctx, SubmitOptions{N: 1000, Confirm: no}); err != nil || asked != 0 {
		t.Errorf("1000 jobs: %v (asked %d)", err, asked)
	}
	f, out = newTestFarm(t, table, &fakeBackend{})
	if err := f.Submit(ctx, SubmitOptions{N: -1, Confirm: no, Yes: true}); err != nil || asked != 0 || !strings.Contains(out.String(), "Submitted 1001 jobs") {
		t.Errorf("--yes: %v (asked %d): %s", err, asked, out)
	}
}

// TestResubmitSaysSoOnlyWhenItHappens: "Resubmitting the N case(s)" was
// said before NJOBS_MAX (or anything after it) refused; and the refused
// resubmit left no MISC/table.run2* behind it, ever.
func TestResubmitSaysSoOnlyWhenItHappens(t *testing.T) {
	ctx := context.Background()
	f, out := newTestFarm(t, "true\ntrue\nfalse\n", &fakeBackend{})
	if err := f.Submit(ctx, SubmitOptions{N: 1}); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	runTables := func() []string { m, _ := filepath.Glob(f.Path(layout.MiscDir, "table.run2*")); return m }
	f.Config.NJobsMax = 1
	err := f.Resubmit(ctx, SubmitOptions{N: 2})
	if err == nil || !strings.HasPrefix(err.Error(), "NJOBS_MAX=1 in config") || strings.Contains(out.String(), "Resubmitting") || len(runTables()) != 0 {
		t.Errorf("resubmit over NJOBS_MAX: %v; said %q; left %v", err, out, runTables())
	}
	f.Config.NJobsMax = 0
	f.Config.WaitForCases = time.Second // N above the cases is kept (capJobs)
	err = f.Resubmit(ctx, SubmitOptions{N: 2000, Confirm: func(int) error { return Userf("no") }})
	if err == nil || strings.Contains(out.String(), "Resubmitting") || len(runTables()) != 0 {
		t.Errorf("resubmit not confirmed: %v; said %q; left %v", err, out, runTables())
	}
	if err := f.Resubmit(ctx, SubmitOptions{N: 2}); err != nil || !strings.HasPrefix(out.String(), "Resubmitting the 3 case(s)") {
		t.Errorf("resubmit: %v; said %q", err, out)
	}
}
