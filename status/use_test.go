package status

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// What a case used (rss= cpu=) reaches Case, for cases kept in pages and
// one by one (sparse IDs), and survives a range's move from the one to
// the other; a case whose record says none has none.
func TestCaseUseOfPagedAndSparseCases(t *testing.T) {
	dir := t.TempDir()
	fh, err := os.Create(filepath.Join(dir, "status.1"))
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(fh)
	fmt.Fprintln(w, "# farm-status v1 job=1 run=1 host=h")
	const n = 6000 // more than firstScan: ranges are promoted while loading
	for k := int64(0); k < n; k++ {
		id := 1<<40 + k // sparse at first, then a range with a page
		fmt.Fprintf(w, "S %d 1700000000.000 h\n", id)
		if k%3 == 0 {
			fmt.Fprintf(w, "E %d 0 1700000000.000 1.000 h\n", id)
		} else {
			fmt.Fprintf(w, "E %d 0 1700000000.000 1.000 h rss=%d cpu=%d.250\n", id, 1000+k, k)
		}
	}
	fmt.Fprintln(w, "S 7 1700000000.000 h")
	fmt.Fprintln(w, "E 7 0 1700000000.000 1.000 h rss=215040 cpu=0.000")
	fmt.Fprintln(w, "S 1099511627776000 1700000000.000 h")
	fmt.Fprintln(w, "E 1099511627776000 0 1700000000.000 1.000 h cpu=3.5")
	w.Flush()
	fh.Close()
	for _, opt := range []Options{{}, {MaxID: 8, Cases: 8}} {
		sum, err := Load(dir, opt)
		if err != nil {
			t.Fatal(err)
		}
		for k := int64(0); k < n; k++ {
			c := sum.Get(1<<40 + k)
			if k%3 == 0 && (c.RSS != 0 || c.HasCPU) || k%3 != 0 && (c.RSS != 1000+k || !c.HasCPU || c.CPU != float64(k)+0.25) {
				t.Fatalf("case %d: %+v", c.ID, c)
			}
		}
		if c := sum.Get(7); c.RSS != 215040 || !c.HasCPU || c.CPU != 0 {
			t.Errorf("case 7: %+v", c)
		}
		if c := sum.Get(1099511627776000); c.RSS != 0 || !c.HasCPU || c.CPU != 3.5 {
			t.Errorf("the far case: %+v", c)
		}
		if any, cpu := sum.MostUse(); !any || cpu != float64(n-1)+0.25 {
			t.Errorf("MostUse: %v %v", any, cpu)
		}
		if u := sum.Use(); u.Cases != n*2/3+2 || u.Wall != float64(u.Cases) || u.MaxRSS != 215040 || u.MaxRSSCase != 7 {
			t.Errorf("Use: %+v", u)
		}
	}
}
