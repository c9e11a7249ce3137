package metajob

import (
	"testing"
	"time"
)

// The batch grows to about BatchSeconds of the job's work by its cases'
// durations alone, doubling at most from one claim to the next; loops that
// run cases side by side and the store's Ahead multiply it.
func TestBatchSizerFollowsCaseTimeOnly(t *testing.T) {
	rt := &runtimeGuard{}
	for _, tc := range []struct {
		loops, ahead int
		want         []int
	}{
		{1, 1, []int{1, 2, 4, 8, 10, 10}},
		{2, 1, []int{1, 2, 4, 8, 16, 20}},
		{1, 4, []int{1, 2, 4, 8, 16, 32, 40, 40}},
	} {
		var b batchSizer
		var got []int
		for i := range tc.want {
			got = append(got, b.next(rt, tc.loops, tc.ahead))
			if i == 0 {
				// Cases of 0.1 s; however long the claims took
				// (not observed), the pace is the cases'.
				for range 5 {
					b.observe(100 * time.Millisecond)
				}
			}
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("loops %d, ahead %d: batches %v, want %v", tc.loops, tc.ahead, got, tc.want)
				break
			}
		}
	}
}

// A claim that took long (claims got slow) does not shrink the next batch:
// only case durations count.
func TestBatchSizerIgnoresClaimTime(t *testing.T) {
	rt := &runtimeGuard{}
	var b batchSizer
	b.next(rt, 1, 1)
	b.observe(10 * time.Millisecond)
	time.Sleep(50 * time.Millisecond) // a slow claim: 5 cases' time
	var k int
	for range 12 {
		k = b.next(rt, 1, 1)
	}
	if k != 100 {
		t.Errorf("batch %d after 10 ms cases and a slow claim, want 100", k)
	}
}
