package backend

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// TestRollup: an array's rows sum up to running while a task runs, pending
// while one waits, else its worst end; nothing known is Gone; a group of
// pending tasks counts its size.
func TestRollup(t *testing.T) {
	t0 := time.Unix(1000, 0)
	q := NewQueue([]string{"1", "2", "3", "1"})
	q.Jobs["1"].Add(Running, "1", t0, t0.Add(time.Hour))
	q.Jobs["1"].Add(Pending, "2-5", time.Time{}, time.Time{})
	q.Jobs["2"].Add(Completed, "1", t0, t0.Add(time.Minute))
	q.Jobs["2"].Add(Cancelled, "2", t0.Add(-time.Minute), t0.Add(2*time.Minute))
	m := q.Infos()
	if in := m["1"]; in.State != Running || in.Tasks != 5 || !in.Start.Equal(t0) || !slices.Equal(q.Jobs["1"].PendExprs, []string{"2-5"}) {
		t.Errorf("1: %+v", in)
	}
	if in := m["2"]; in.State != Cancelled || in.Tasks != 0 || !in.Start.Equal(t0.Add(-time.Minute)) || !in.End.Equal(t0.Add(2*time.Minute)) || !q.Jobs["2"].Cancelled {
		t.Errorf("2: %+v", in)
	}
	if m["3"].State != Gone || len(m) != 3 {
		t.Errorf("3: %+v (%d entries)", m["3"], len(m))
	}
	if !q.Jobs["2"].Settled(false) || q.Jobs["1"].Settled(true) || q.Jobs["1"].Settled(false) {
		t.Error("Settled")
	}
	if got := q.Pick([]string{"3", "1", "2", "1"}, (*Rollup).Active); !slices.Equal(got, []string{"1"}) {
		t.Errorf("Pick = %v", got)
	}
}

func TestBatchesAndEnv(t *testing.T) {
	var got [][]string
	boom := errors.New("boom")
	err := Batches([]string{"a", "b", "c", "d", "e"}, 2, func(b []string) error {
		got = append(got, b)
		if len(got) == 2 {
			return boom
		}
		return nil
	})
	if err != boom || len(got) != 3 || !slices.Equal(got[2], []string{"e"}) {
		t.Errorf("Batches: %v, %v", got, err)
	}
	env := FilterEnv([]string{"A=1", "DROP_X=2", "B=3"}, func(k string) bool { return k == "DROP_X" }, "C=4")
	if !slices.Equal(env, []string{"A=1", "B=3", "C=4"}) {
		t.Errorf("FilterEnv = %v", env)
	}
	if CallTimeout(0, time.Second) != time.Second || CallTimeout(2*time.Second, time.Second) != 2*time.Second {
		t.Error("CallTimeout")
	}
}
