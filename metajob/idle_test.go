package metajob

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/farm-hpc/farm/casetable"
	"github.com/farm-hpc/farm/lease"
)

// idleFarm is lookFarm's job with every case of the run claimed by
// another, waiting for added cases (WAIT_FOR_CASES a minute, a look every
// 200 ms): its request is parked. It returns the other's store.
func idleFarm(t *testing.T) (*Metajob, <-chan turn, *casetable.Store) {
	t.Helper()
	m, s, dir := lookFarm(t)
	other := casetable.NewStore(dir, filepath.Join(dir, "MISC"))
	t.Cleanup(func() { other.Close() })
	for n := 0; n < 96; {
		cases, err := other.Claim(context.Background(), 1, 96-n)
		if err != nil || len(cases) == 0 {
			t.Fatalf("other claim after %d: %d cases, %v", n, len(cases), err)
		}
		n += len(cases)
	}
	m.do(func(o *owner) {
		o.queue = nil
		m.Farm.Config.WaitForCases = time.Minute
		m.Env.LookEvery = 200 * time.Millisecond
	})
	ch := asked(m, s)
	unanswered(t, ch, 100*time.Millisecond)
	return m, ch, other
}

// TestIdleProbeRenewsNothing: a job waiting for added cases probes its
// run, but its probes renew no lease: its last full look stays as it was,
// so that the claim after a probe that found news looks for its rescue
// mark first.
func TestIdleProbeRenewsNothing(t *testing.T) {
	m, ch, _ := idleFarm(t)
	looked := owned(m, func(o *owner) time.Time { return o.looked })
	unanswered(t, ch, time.Second) // some 5 probes
	if probeAt := owned(m, func(o *owner) time.Time { return o.probeAt }); !probeAt.After(looked.Add(time.Second)) {
		t.Fatalf("next probe at %s, the last full look at %s: no probe made", probeAt, looked)
	}
	if now := owned(m, func(o *owner) time.Time { return o.looked }); !now.Equal(looked) {
		t.Errorf("the lease was renewed by a probe: last full look %s, was %s", now, looked)
	}
}

// TestIdleProbeFindsTheRunSuperseded: a run started while a job waits for
// added cases ends its wait at its next probe: the claim's full look finds
// the run superseded.
func TestIdleProbeFindsTheRunSuperseded(t *testing.T) {
	m, ch, _ := idleFarm(t)
	startRun(t, m.Farm.Dir, 2)
	if a := answer(t, ch, 5*time.Second); a.why != stopSuperseded || a.err != nil {
		t.Fatalf("answer: case %d, %q, %v; want %q", a.c.ID, a.why, a.err, stopSuperseded)
	}
}

// TestIdleEveryKeepsTheBudget: the run's idle jobs probe at most
// lease.IdleBudget operations a second in all, whatever their number (on
// average over the jitter), and never more often than LookEvery.
func TestIdleEveryKeepsTheBudget(t *testing.T) {
	for _, n := range []int{1, 10, 100, 200, 1000, 10000, 100000} {
		var sum time.Duration
		const draws = 1000
		for i := range uint64(draws) {
			d := lease.IdleEvery(5*time.Second, n, 1, i*0x9e3779b97f4a7c15)
			if d < 5*time.Second/2 {
				t.Fatalf("%d jobs: a probe after %s", n, d)
			}
			sum += d
		}
		mean := sum / draws
		if rate := float64(n) / mean.Seconds(); rate > lease.IdleBudget*1.05 || mean < 5*time.Second*99/100 {
			t.Errorf("%d jobs: a probe every %s on average: %.1f a second in all (budget %d)", n, mean, rate, lease.IdleBudget)
		}
	}
}

// TestElectionKeepsEightTriesAPeriod: in a run of up to 8 jobs each tries
// for every period's rescue check; in a larger run each tries with the
// chance 8/N, some 8 tries a period whatever N.
func TestElectionKeepsEightTriesAPeriod(t *testing.T) {
	for _, n := range []int{1, 8, 64, 1000} {
		m := &Metajob{}
		m.jobsInRun.Store(int64(n))
		r := &rescuer{m: m}
		const periods = 2000
		tries := 0
		for range periods * n {
			if r.elected() {
				tries++
			}
		}
		perPeriod := float64(tries) / periods
		if want := float64(min(n, electors)); perPeriod < want*0.9 || perPeriod > want*1.1 {
			t.Errorf("%d jobs: %.2f tries for the check a period, want about %v", n, perPeriod, want)
		}
	}
}
