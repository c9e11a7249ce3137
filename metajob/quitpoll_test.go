package metajob

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestQuitPollListsQuitMarks: the warden's look at the jobs still running
// is a listing of the quit marks: a job is let go once its mark is there,
// and the run is over when none is left; before any job quit (no
// directory) every job stays watched.
func TestQuitPollListsQuitMarks(t *testing.T) {
	dir := t.TempDir()
	r := &rescuer{dir: dir, statusDir: t.TempDir()}
	r.watch, r.watchGen = []string{"status.1", "status.2", "status.3"}, 1
	poll := func(want ...string) {
		t.Helper()
		r.quitPoll()
		if !slices.Equal(r.watch, want) || r.over != (len(want) == 0) {
			t.Fatalf("watching %v, over %v; want %v", r.watch, r.over, want)
		}
	}
	poll("status.1", "status.2", "status.3")
	quit := func(name string) {
		t.Helper()
		q := &rescuer{dir: dir, self: name}
		q.quitMark()
		if _, err := os.Stat(filepath.Join(dir, "quit", name)); err != nil {
			t.Fatalf("no quit mark for %s: %v", name, err)
		}
	}
	quit("status.2")
	quit("status.9") // a job not watched (another run's, or one the check found ended)
	poll("status.1", "status.3")
	quit("status.3")
	quit("status.3") // made twice (a reply lost, retried): no harm
	poll("status.1")
	// A check sets the watch anew: the jobs it found running.
	r.watch, r.watchGen = []string{"status.1", "status.4"}, 2
	poll("status.1", "status.4")
	quit("status.1")
	quit("status.4")
	poll()
}

// TestPollEveryKeepsTheWardensBudget: the warden's look costs
// wardenBudget operations a second (at most, and not much less: its
// watch ends the run), at any number of jobs.
func TestPollEveryKeepsTheWardensBudget(t *testing.T) {
	for _, n := range []int{1, 8, 100, 1000, 10000, 100000} {
		m := &Metajob{}
		m.jobsInRun.Store(int64(n))
		r := &rescuer{m: m}
		every := r.pollEvery()
		calls := 4 + n/200 // a listing: open, a getdents a 200 names, the empty one, close
		if rate := float64(calls) / every.Seconds(); rate > wardenBudget+1e-9 || rate < wardenBudget*0.9 {
			t.Errorf("%d jobs: a look every %s, %.1f operations a second (budget %d)", n, every, rate, wardenBudget)
		}
	}
}
