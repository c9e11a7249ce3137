package farm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
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

// TestRefusedSubmitWritesNothing: a wrong run-time, a command too long
// and NJOBS_MAX all refuse before table.dat is numbered or anything else
// is written.
func TestRefusedSubmitWritesNothing(t *testing.T) {
	ctx := context.Background()
	table := strings.Repeat("true\n", 1001)
	for _, tc := range []struct {
		name string
		edit func(f *Farm)
		opt  SubmitOptions
		msg  string
	}{
		{"run-time", func(f *Farm) { setRunTime(t, f, "36-0") }, SubmitOptions{N: 2}, "job_script.sh:6: Wrong job runtime in job_script.sh - 36-0 . Exiting"},
		{"short run-time", func(f *Farm) { setRunTime(t, f, "0:10") }, SubmitOptions{N: 2}, "job_script.sh:6: Wrong job runtime in job_script.sh - 0:10 . Exiting"},
		{"too long", func(f *Farm) {
			os.WriteFile(f.Path(Table), []byte("true\n"+strings.Repeat("y", 200000)+"\n"), 0o644)
		}, SubmitOptions{N: 2}, "table.dat:2: the command is 200000 bytes long"},
		{"NJOBS_MAX first", func(f *Farm) { f.Config.NJobsMax = 1000 }, SubmitOptions{N: -1}, "NJOBS_MAX=1000 in config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, out := newTestFarm(t, table, &fakeBackend{})
			if tc.edit != nil {
				tc.edit(f)
			}
			before := files(t, f.Dir)
			err := f.Submit(ctx, tc.opt)
			if err == nil || !strings.HasPrefix(err.Error(), tc.msg) {
				t.Errorf("err %v, want %q", err, tc.msg)
			}
			if after := files(t, f.Dir); strings.Join(after, "\n") != strings.Join(before, "\n") || out.Len() > 0 {
				t.Errorf("a refused submit wrote something, or said %q", out.String())
			}
		})
	}
}

// TestResubmitSaysSoOnlyWhenItHappens: "Resubmitting the N case(s)" was
// said before NJOBS_MAX (or anything after it) refused; and the refused
// resubmit left no MISC/table.run* behind it, ever.
func TestResubmitSaysSoOnlyWhenItHappens(t *testing.T) {
	ctx := context.Background()
	f, out := newTestFarm(t, "true\ntrue\nfalse\n", &fakeBackend{})
	if err := f.Submit(ctx, SubmitOptions{N: 1}); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	runTables := func() []string { m, _ := filepath.Glob(f.Path(MiscDir, "table.run*")); return m }
	f.Config.NJobsMax = 1
	err := f.Resubmit(ctx, SubmitOptions{N: 2})
	if err == nil || !strings.HasPrefix(err.Error(), "NJOBS_MAX=1 in config") || strings.Contains(out.String(), "Resubmitting") || len(runTables()) != 0 {
		t.Errorf("resubmit over NJOBS_MAX: %v; said %q; left %v", err, out, runTables())
	}
	f.Config.NJobsMax = 0
	if err := f.Resubmit(ctx, SubmitOptions{N: 2}); err != nil || !strings.HasPrefix(out.String(), "Resubmitting the 3 case(s)") {
		t.Errorf("resubmit: %v; said %q", err, out)
	}
}
