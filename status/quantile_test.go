package status

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestUpperQuantileIsNearestRank: UpperQuantile gives what sorting and
// taking the nearest rank gives, on slices of every small size and some
// large ones, with few and many distinct values (durations often repeat).
func TestUpperQuantileIsNearestRank(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	sizes := []int{1, 2, 3, 7, 8, 9, 16, 100, 1000, 100001}
	for n := 4; n < 70; n++ {
		sizes = append(sizes, n)
	}
	for _, n := range sizes {
		for _, distinct := range []int{1, 3, n} {
			for _, upper := range []float64{0, 0.125, 0.5, 0.875, 1} {
				d := make([]float64, n)
				for i := range d {
					d[i] = float64(rng.IntN(distinct)) + 0.25
				}
				sorted := slices.Clone(d)
				slices.Sort(sorted)
				rank := int((1-upper)*float64(n)+0.999999999) - 1
				want := sorted[max(0, min(rank, n-1))]
				if got := UpperQuantile(d, upper); got != want {
					t.Fatalf("n=%d distinct=%d upper=%g: %g, want %g", n, distinct, upper, got, want)
				}
				slices.Sort(d)
				if !slices.Equal(d, sorted) {
					t.Fatalf("n=%d: UpperQuantile lost or changed values", n)
				}
			}
		}
	}
	if UpperQuantile(nil, 0.125) != 0 {
		t.Errorf("empty: want 0")
	}
}

// BenchmarkUpperQuantile10M: the 12.5% quantile of ten million durations,
// as farm report and a meta-job's dt_cutoff compute it.
func BenchmarkUpperQuantile10M(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	src := make([]float64, 10_000_000)
	for i := range src {
		src[i] = rng.ExpFloat64() * 30
	}
	d := make([]float64, len(src))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		copy(d, src)
		UpperQuantile(d, 0.125)
	}
}
