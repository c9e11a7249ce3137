package farm

import (
	"testing"

	"github.com/farm-hpc/farm/status"
)

// TestJobEndsCountsStopReasons: the autojob's farm.log line counts how the
// run's meta-jobs ended by the reason their Q records name, from each job's
// newest incarnation, and leaves other runs out.
func TestJobEndsCountsStopReasons(t *testing.T) {
	sum := &status.Summary{Jobs: []status.Job{
		{ID: "1", Run: 2, Quit: "No cases left; exiting.", QuitWhy: "no-cases"},
		{ID: "2", Run: 2, Quit: "No cases left; exiting.", QuitWhy: "no-cases"},
		{ID: "3", Run: 2, Quit: "Not enough runtime left; exiting.", QuitWhy: "no-runtime"},
		{ID: "4", Run: 2},             // killed: no Q record
		{ID: "5", Run: 2, Restart: 0}, // lost with its node, then requeued:
		{ID: "5", Run: 2, Restart: 1, Quit: "x", QuitWhy: "signal"}, // its restart's reason counts
		{ID: "6", Run: 2, Quit: "exited"},                           // a Q record of an older farm: no reason
		{ID: "7", Run: 1, Quit: "No cases left; exiting.", QuitWhy: "no-cases"},
	}}
	want := "1 exited, 2 no-cases, 1 no-runtime, 1 signal, 1 with no last line"
	if got := jobEnds(sum, 2); got != want {
		t.Errorf("jobEnds(run 2) = %q, want %q", got, want)
	}
	if got := jobEnds(sum, 3); got != "" {
		t.Errorf("jobEnds(run 3, none) = %q, want none", got)
	}
}
