package metajob

import (
	"testing"
	"time"

	"github.com/farm-hpc/farm/casetable"
)

// fakeClock is a clock the test moves.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

// The batch grows to about BatchSeconds of the job's time by the pace at
// which its cases end, doubling at most from one claim to the next; the
// store's Ahead multiplies it.
func TestBatchSizerFollowsThePaceOfCases(t *testing.T) {
	rt := &runtimeGuard{}
	for _, tc := range []struct {
		ahead int
		want  []int
	}{
		{1, []int{casetable.FirstBatch, 2, 4, 8, 10, 10}},
		{4, []int{casetable.FirstBatch, 2, 4, 8, 16, 32, 40, 40}},
	} {
		clk := &fakeClock{t: time.Unix(1e9, 0)}
		b := batchSizer{now: clk.now}
		var got []int
		for i := range tc.want {
			got = append(got, b.next(rt, tc.ahead))
			if i == 0 {
				// 5 cases of 0.1 s, one after another.
				for range 5 {
					clk.t = clk.t.Add(100 * time.Millisecond)
					b.observe(100 * time.Millisecond)
				}
			}
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("ahead %d: batches %v, want %v", tc.ahead, got, tc.want)
				break
			}
		}
	}
}

// Time spent claiming does not count: slow claims do not shrink the next
// batch; what a case costs the job beyond its run (its records, the
// meta-job's own work) does.
func TestBatchSizerIgnoresClaimTime(t *testing.T) {
	rt := &runtimeGuard{}
	clk := &fakeClock{t: time.Unix(1e9, 0)}
	b := batchSizer{now: clk.now}
	b.next(rt, 1)
	clk.t = clk.t.Add(10 * time.Millisecond)
	b.observe(10 * time.Millisecond)
	clk.t = clk.t.Add(50 * time.Millisecond) // a slow claim: 5 cases' time
	b.claimed(50*time.Millisecond, 1)
	var k int
	for range 12 {
		k = b.next(rt, 1)
	}
	if k != 100 {
		t.Errorf("batch %d after 10 ms cases and a slow claim, want 100", k)
	}
	// Cases of 10 ms that cost the job 20 ms each (their records, the
	// loop's own work): 50 a batch.
	b = batchSizer{now: clk.now}
	b.next(rt, 1)
	for range 4 {
		clk.t = clk.t.Add(10 * time.Millisecond) // the case runs
		b.observe(10 * time.Millisecond)
		clk.t = clk.t.Add(10 * time.Millisecond) // the job's own work
	}
	for range 12 {
		k = b.next(rt, 1)
	}
	if k != 50 {
		t.Errorf("batch %d for cases of 10 ms that cost the job 20 ms, want 50", k)
	}
}

// The first claim is the store's (FirstBatch) unless the job claims one at
// a time; after a first share, the claims before any case ended take one
// case each, and the batch then doubles from the first share.
func TestBatchSizerAfterAFirstShare(t *testing.T) {
	rt := &runtimeGuard{}
	clk := &fakeClock{t: time.Unix(1e9, 0)}
	b := batchSizer{now: clk.now}
	if k := b.next(rt, 1); k != casetable.FirstBatch {
		t.Fatalf("first claim %d, want FirstBatch", k)
	}
	b.claimed(10*time.Millisecond, 16) // the store handed out 16
	if k := b.next(rt, 1); k != 1 {
		t.Errorf("a claim before any case ended: %d, want 1", k)
	}
	b.claimed(10*time.Millisecond, 1)
	for range 17 { // cases of 10 ms
		clk.t = clk.t.Add(10 * time.Millisecond)
		b.observe(10 * time.Millisecond)
	}
	if k := b.next(rt, 1); k != 32 {
		t.Errorf("the claim after 17 cases of 10 ms: %d, want 32 (doubling from the first share)", k)
	}
	one := batchSizer{max: 1, now: clk.now}
	if k := one.next(rt, 1); k != 1 {
		t.Errorf("SIMPLE mode's first claim: %d, want 1", k)
	}
	four := batchSizer{max: 4, now: clk.now}
	if k := four.next(rt, 1); k != 1 {
		t.Errorf("a job of max 4: first claim %d, want 1", k)
	}
}
