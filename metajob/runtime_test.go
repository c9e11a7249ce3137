package metajob

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/farm-hpc/farm/layout"
	"github.com/farm-hpc/farm/status"
	"github.com/google/go-cmp/cmp"
)

// TestCutoffScheduleIsPowersOfTwo: dt_cutoff is due once FirstCutoffAt
// cases are claimed farm-wide, then at each doubling of the durations it
// was computed from; one election each; a later run counts from the
// earlier runs' durations.
func TestCutoffScheduleIsPowersOfTwo(t *testing.T) {
	misc := t.TempDir()
	statusDir := t.TempDir()
	g := &runtimeGuard{misc: misc, longest: 1}
	var at []int64
	for claimed := int64(1); claimed <= 300; claimed++ {
		k, ok := g.due(1, claimed)
		if !ok {
			continue
		}
		at = append(at, claimed)
		// What the status files would say then: every case claimed
		// has ended.
		writeDurations(t, statusDir, claimed)
		g.recompute(k, 1, claimed, statusDir, io.Discard)
		if _, again := g.due(1, claimed); again {
			t.Fatalf("due again at %d, right after a recomputation", claimed)
		}
	}
	if diff := cmp.Diff([]int64{8, 16, 32, 64, 128, 256}, at); diff != "" {
		t.Errorf("recomputed at (-want +got):\n%s", diff)
	}
	// Another meta-job, whose reading is 300 claims old, reads the
	// record afresh once the claims pass a doubling: not due.
	late := &runtimeGuard{misc: misc, readAt: time.Now(), longest: 1}
	if _, ok := late.due(1, 300); ok || late.cutoff == 0 {
		t.Fatalf("a stale reading past a doubling: due %v, dt_cutoff %v; want the record read afresh, not due", ok, late.cutoff)
	}
	// One that finds the doubling's election taken (its winner still
	// reading the status files) goes on with the record it has, once.
	os.WriteFile(filepath.Join(misc, layout.Cutoff+".1.10"), nil, 0o644)
	if k, ok := late.due(1, 600); !ok || k != 10 {
		t.Fatalf("600 claims, 256 durations: due %v, election %d; want true, 10", ok, k)
	} else {
		late.recompute(k, 1, 600, statusDir, io.Discard)
	}
	if _, ok := late.due(1, 600); ok {
		t.Error("due again after losing the election")
	}
	if c, _ := status.ReadCutoff(filepath.Join(misc, layout.Cutoff)); c.Durations != 256 {
		t.Errorf("the record after a lost election: %+v, want the winner's (256 durations)", c)
	}
	// A reading that fails keeps the last one.
	os.WriteFile(filepath.Join(misc, layout.Cutoff), []byte("garbage"), 0o644)
	late.read(time.Now(), 0)
	if late.rec.Durations != 256 {
		t.Errorf("a failed reading replaced the record read: %+v", late.rec)
	}
	os.Remove(filepath.Join(misc, layout.Cutoff))
	status.WriteCutoff(filepath.Join(misc, layout.Cutoff), late.rec)
	// With fewer than FirstCutoffAt durations recorded, the winner
	// writes nothing and gives its election up.
	few, fewStatus := t.TempDir(), t.TempDir()
	writeDurations(t, fewStatus, 3)
	g3 := &runtimeGuard{misc: few, longest: 1}
	if k, ok := g3.due(1, 8); !ok {
		t.Fatal("not due at 8 claims")
	} else {
		g3.recompute(k, 1, 8, fewStatus, io.Discard)
		if _, err := os.Stat(filepath.Join(few, fmt.Sprintf("%s.1.%d", layout.Cutoff, k))); !os.IsNotExist(err) {
			t.Errorf("the election of a recomputation from 3 durations was kept: %v", err)
		}
	}
	if c, ok := status.ReadCutoff(filepath.Join(few, layout.Cutoff)); ok {
		t.Errorf("dt_cutoff written from 3 durations: %+v", c)
	}
	// A job that has run no case yet leaves it to others.
	if _, ok := (&runtimeGuard{misc: misc}).due(1, 1000); ok {
		t.Error("due in a job that has run no case")
	}
	// Run 2, of few cases: not due before the farm's count doubles.
	next := &runtimeGuard{misc: misc, longest: 1}
	if _, ok := next.due(2, 100); ok {
		t.Error("due in run 2 after 100 claims, with 256 durations from run 1")
	}
	if _, ok := next.due(2, 256); !ok {
		t.Error("not due in run 2 after 256 claims, with 256 durations from run 1")
	}
}

// writeDurations makes dir's status files record n ended cases of a
// second each.
func writeDurations(t *testing.T, dir string, n int64) {
	t.Helper()
	var b strings.Builder
	b.WriteString("# farm-status v1 job=1 run=1 host=h\n")
	for id := int64(1); id <= n; id++ {
		fmt.Fprintf(&b, "E %d 0 1000 1 h\n", id)
	}
	if err := os.WriteFile(filepath.Join(dir, layout.StatusFile("1", 0)), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestRuntimeGuardStopsWhenTimeIsShort(t *testing.T) {
	for _, tc := range []struct {
		left   time.Duration
		cutoff float64
		stop   bool
	}{
		{30 * time.Second, 20, false},
		{10 * time.Second, 20, true},
		{10 * time.Second, 0, false}, // no cutoff known yet
		{-time.Second, 0, true},      // past the end
	} {
		misc := t.TempDir()
		status.WriteCutoff(filepath.Join(misc, layout.Cutoff), status.Cutoff{Seconds: tc.cutoff, Durations: 8, Run: 1})
		g := &runtimeGuard{end: endSources{backend: time.Now().Add(tc.left)}, misc: misc}
		if stop := g.shortOfTime(time.Now()); stop != tc.stop {
			t.Errorf("left %s cutoff %v: stop=%v, want %v", tc.left, tc.cutoff, stop, tc.stop)
		}
	}
	// A reading serves cutoffReread far from the end; near it (the time
	// left under twice the longest case), nearReread.
	misc0 := t.TempDir()
	status.WriteCutoff(filepath.Join(misc0, layout.Cutoff), status.Cutoff{Seconds: 20, Durations: 8, Run: 1})
	read := time.Now().Add(-nearReread - time.Second)
	far := &runtimeGuard{end: endSources{backend: time.Now().Add(time.Hour)}, misc: misc0, readAt: read, longest: 20}
	near := &runtimeGuard{end: endSources{backend: time.Now().Add(15 * time.Second)}, misc: misc0, readAt: read, longest: 20}
	if far.shortOfTime(time.Now()) || far.cutoff != 0 {
		t.Errorf("far from the end: read dt_cutoff %v before its reading was old", far.cutoff)
	}
	if !near.shortOfTime(time.Now()) || near.cutoff != 20 {
		t.Errorf("15 s before the end, 20 s cases: dt_cutoff %v, want 20 read afresh and a stop", near.cutoff)
	}
	// No end known at all: never stops.
	misc := t.TempDir()
	status.WriteCutoff(filepath.Join(misc, layout.Cutoff), status.Cutoff{Seconds: 1e9, Durations: 8, Run: 1})
	if g := (&runtimeGuard{misc: misc}); g.shortOfTime(time.Now()) {
		t.Error("stopped without an end time")
	}
}

func TestEndTimeSources(t *testing.T) {
	dir := t.TempDir()
	jf, mf := filepath.Join(dir, "job"), filepath.Join(dir, "machine")
	os.Mkdir(jf, 0o755)
	os.Mkdir(mf, 0o755)
	put := func(d, name string, v int64) {
		os.WriteFile(filepath.Join(d, name), []byte(strconv.FormatInt(v, 10)+"\n"), 0o644)
	}
	now := time.Now().Unix()
	backend := time.Unix(now+3600, 0)
	var src endSources

	endTime := func(b time.Time) time.Time { s := src; s.backend = b; return s.at() }
	if got := endTime(backend); !got.Equal(backend) {
		t.Errorf("backend only: %v", got)
	}
	if got := endTime(time.Time{}); !got.IsZero() {
		t.Errorf("nothing: %v", got)
	}
	src.jobFeatures = jf
	put(jf, "jobstart_secs", now-100)
	put(jf, "wall_limit_secs", 1000)
	if got := endTime(time.Time{}); got.Unix() != now+900 {
		t.Errorf("job features: %v, want start+limit", got.Unix()-now)
	}
	if got := endTime(backend); !got.Equal(backend) {
		t.Errorf("the backend comes first: %v", got.Unix()-now)
	}
	put(jf, "shutdowntime_job", now+10)
	if got := endTime(backend); got.Unix() != now+10 {
		t.Errorf("shutdowntime_job caps: %v", got.Unix()-now)
	}
	src.machineFeatures = mf
	put(mf, "shutdowntime", now+5)
	if got := endTime(backend); got.Unix() != now+5 {
		t.Errorf("machine shutdowntime caps: %v", got.Unix()-now)
	}
}

func TestFastFailure(t *testing.T) {
	short, long := time.Second, 10*time.Second
	for _, tc := range []struct {
		name  string
		codes []int
		durs  []time.Duration
		stop  int // index of the case after which it stops; -1 never
	}{
		{"all fail fast", []int{1, 2, 1, 1, 1}, []time.Duration{short, short, short, short, short}, 4},
		{"fast successes never count", []int{0, 0, 0, 0, 0, 0}, []time.Duration{short, short, short, short, short, short}, -1},
		{"one slow failure", []int{1, 1, 1, 1, 1, 1}, []time.Duration{short, long, short, short, short, short}, -1},
		{"one success among the first", []int{1, 1, 0, 1, 1, 1, 1, 1}, []time.Duration{short, short, short, short, short, short, short, short}, -1},
		{"failures after the first five", []int{0, 0, 0, 0, 0, 1, 1, 1, 1, 1}, make([]time.Duration, 10), -1},
	} {
		f := fastFailure{max: 5, short: 5 * time.Second}
		stopped := -1
		for i := range tc.codes {
			if f.add(tc.codes[i], tc.durs[i]) {
				stopped = i
				break
			}
		}
		if stopped != tc.stop {
			t.Errorf("%s: stopped after case %d, want %d", tc.name, stopped, tc.stop)
		}
	}
	off := fastFailure{max: 0, short: time.Second}
	for i := 0; i < 10; i++ {
		if off.add(1, 0) {
			t.Error("N_failed_max=0 must turn the protection off")
		}
	}
}
