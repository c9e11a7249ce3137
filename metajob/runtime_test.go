package metajob

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/farm-hpc/farm/casetable"
	"github.com/google/go-cmp/cmp"
)

func TestCutoffScheduleIsPowersOfTwo(t *testing.T) {
	st := &casetable.State{Run: 1, Table: "t"}
	var at []int64
	g := &runtimeGuard{}
	for done := int64(1); done <= 300; done++ {
		g.finished = 1
		g.before(st)
		if g.recompute {
			at = append(at, st.Done)
		}
	}
	if diff := cmp.Diff([]int64{8, 16, 32, 64, 128, 256}, at); diff != "" {
		t.Errorf("recomputed at (-want +got):\n%s", diff)
	}
	// Several cases reported at once still recompute once per crossing.
	st = &casetable.State{Run: 1, Table: "t"}
	g = &runtimeGuard{finished: 40}
	g.before(st)
	if !g.recompute || st.Next != 64 {
		t.Errorf("after 40 at once: recompute=%v next=%d, want true, 64", g.recompute, st.Next)
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
		g := &runtimeGuard{end: endSources{backend: time.Now().Add(tc.left)}}
		st := &casetable.State{Run: 1, Table: "t", Cutoff: tc.cutoff, Next: 8}
		err := g.before(st)
		if g.stop != tc.stop || (err == casetable.ErrStop) != tc.stop {
			t.Errorf("left %s cutoff %v: stop=%v err=%v, want stop=%v", tc.left, tc.cutoff, g.stop, err, tc.stop)
		}
	}
	// No end known at all: never stops.
	g := &runtimeGuard{}
	if g.before(&casetable.State{Cutoff: 1e9}); g.stop {
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
