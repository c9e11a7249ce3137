package farm

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/farm-hpc/farm/layout"
	"github.com/farm-hpc/farm/slurm"
	"github.com/farm-hpc/farm/status"
	"github.com/farm-hpc/farm/tablefmt"
	"github.com/google/go-cmp/cmp"
)

func TestUpperQuantile(t *testing.T) {
	d := []float64{5, 1, 8, 2, 7, 3, 6, 4} // 8 values: 12.5% = one value above
	if got := status.UpperQuantile(d, 0.125); got != 7 {
		t.Errorf("quantile of 1..8 = %v, want 7 (only 8 lies above)", got)
	}
	var hundred []float64
	for i := 100; i >= 1; i-- {
		hundred = append(hundred, float64(i))
	}
	if got := status.UpperQuantile(hundred, 0.125); got != 88 {
		t.Errorf("quantile of 1..100 = %v, want 88 (12 values above)", got)
	}
	if got := status.UpperQuantile([]float64{3}, 0.125); got != 3 {
		t.Errorf("single value: %v", got)
	}
	if got := status.UpperQuantile(nil, 0.125); got != 0 {
		t.Errorf("empty: %v", got)
	}
}

// TestRetryTableFromEveryMix builds table.dat_ from status records that mix
// every state over two runs and checks that exactly the cases still to do
// are kept, with their original IDs and commands.
func TestRetryTableFromEveryMix(t *testing.T) {
	dir := t.TempDir()
	if err := Init(filepath.Join(dir, "f"), slurm.Templates()); err != nil {
		t.Fatal(err)
	}
	f, err := Open(filepath.Join(dir, "f"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	f.EnsureDirs()
	table := "# header\n11 echo a\n12 echo b\n13 echo c\n14 echo d\n15 echo e\n16 echo f\n17 echo g\n18 echo h\n19 echo i\n"
	os.WriteFile(f.Path(layout.Table), []byte(table), 0o644)
	t0 := time.Unix(1_700_000_000, 0)
	rec := func(job string, run int, fn func(w *status.Writer)) {
		w, err := status.CreateCap(f.Path(layout.StatusDir, "status."+job), job, 0, run, "h", status.Capacity{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		fn(w)
		w.Close()
	}
	rec("1", 1, func(w *status.Writer) {
		w.Start(11, t0)
		w.End(11, 0, t0, time.Second) // succeeded
		w.Start(12, t0)
		w.End(12, 2, t0, time.Second) // failed
		w.Start(13, t0)
		w.Interrupted(13, 15, t0, time.Second) // interrupted by a signal
		w.Start(14, t0)
		w.End(14, 1, t0, time.Second) // failed, then succeeds in run 2
		w.Start(15, t0)
		w.End(15, 0, t0, time.Second) // succeeded, then fails in run 2: stays done
		w.Start(16, t0)               // cut off: its job died
	})
	rec("2", 2, func(w *status.Writer) {
		w.Start(14, t0.Add(time.Hour))
		w.End(14, 0, t0.Add(time.Hour), time.Second)
		w.Start(15, t0.Add(time.Hour))
		w.End(15, 3, t0.Add(time.Hour), time.Second)
		w.Start(17, t0.Add(time.Hour))
		w.End(17, 0, t0.Add(time.Hour), time.Second)
	})
	// 18 and 19 never ran.
	sum, err := status.Load(f.Path(layout.StatusDir), status.Options{})
	if err != nil {
		t.Fatal(err)
	}
	n, err := tablefmt.Rebuild(f.Path(layout.Table), f.Path(layout.RetryTable), func(id int64) bool { return sum.Get(id).State != status.Succeeded })
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(f.Path(layout.RetryTable))
	want := "12 echo b\n13 echo c\n16 echo f\n18 echo h\n19 echo i\n"
	if diff := cmp.Diff(want, string(got)); diff != "" || n != 5 {
		t.Errorf("table.dat_ (%d cases) (-want +got):\n%s", n, diff)
	}
	p, _ := f.progress(sum)
	if diff := cmp.Diff(Progress{Total: 9, Counts: status.Counts{Succeeded: 4, Failed: 1, Interrupted: 2}, NeverRan: 2}, p); diff != "" {
		t.Errorf("progress (-want +got):\n%s", diff)
	}
}
