package metajob

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/layout"
)

// TestWardenIsReplacedWhenItDies: job 1 becomes run 1's warden; job 2,
// finding no case left, does not take its place while its mark is fresh,
// nor when it is stale and the batch system says job 1 runs; once job 1
// has ended, job 2 becomes warden 2 and says so. Job 2 leaving (halt)
// makes its off mark, and job 3 takes its place at once.
func TestWardenIsReplacedWhenItDies(t *testing.T) {
	b := &stateBackend{states: map[string]backend.JobState{}}
	dir, jobs := rescueFarm(t, 3, time.Minute, b)
	rdir := filepath.Join(dir, layout.MiscDir, rescueDir(1))
	if !jobs[0].rescue.warden() {
		t.Fatal("job 1 is not the warden of a run without one")
	}
	if jobs[1].rescue.warden() {
		t.Fatal("job 2 took the place of a warden whose mark is fresh")
	}
	if n := b.queries.Load(); n != 0 {
		t.Errorf("%d batch system queries for a fresh warden mark; want none", n)
	}
	old := time.Now().Add(-3 * time.Minute)
	mark := filepath.Join(rdir, layout.WardenMark(1, ""))
	if err := os.Chtimes(mark, old, old); err != nil {
		t.Fatal(err)
	}
	if jobs[1].rescue.warden() {
		t.Fatal("job 2 took the place of a warden whose job runs")
	}
	if n := b.queries.Load(); n != 1 {
		t.Errorf("%d batch system queries for a stale warden mark; want 1", n)
	}
	b.states["1"] = backend.Failed
	if !jobs[1].rescue.warden() {
		t.Fatal("job 2 did not take the place of a warden whose job ended")
	}
	for _, name := range []string{layout.WardenMark(1, ".ended"), layout.WardenMark(2, "")} {
		if _, err := os.Stat(filepath.Join(rdir, name)); err != nil {
			t.Errorf("no %s: %v", name, err)
		}
	}
	if got := jobs[1].log.(interface{ String() string }).String(); !strings.Contains(got, "run 1's warden, meta-job 1, has ended; this meta-job takes its place") {
		t.Errorf("job 2's log %q: want it to say it took the dead warden's place", got)
	}
	jobs[1].rescue.halt()
	if !jobs[2].rescue.warden() {
		t.Fatal("job 3 did not become the warden once warden 2 left")
	}
	if _, err := os.Stat(filepath.Join(rdir, layout.WardenMark(3, ""))); err != nil {
		t.Error(err)
	}
	if k, job, gone, err := jobs[0].rescue.wardenState(nil); err != nil || k != 3 || job != "3" || gone {
		t.Errorf("the run's warden: mark %d of job %q, gone %v, %v; want mark 3 of job 3", k, job, gone, err)
	}
}
