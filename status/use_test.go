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

// EachUsed gives every case whose decisive attempt says what it used, with
// the CPUs it was given: its start record's cpus= list, else its job's
// (header cpus=, else 1); a case whose record says nothing is left out,
// and so is one whose later, deciding attempt says nothing.
func TestEachUsedCPUsGiven(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("status.1", "# farm-status v1 job=1 run=1 host=h cpus=8\n"+
		"S 1 1700000000.000 h\nE 1 0 1700000000.000 10.000 h rss=2048 cpu=11.00\n"+ // the whole job: 8
		"S 2 1700000000.000 h loop=2 cpus=2-3\nE 2 1 1700000000.000 4.000 h cpu=2.50\n"+ // 2 CPUs
		"S 3 1700000000.000 h\nE 3 0 1700000000.000 1.000 h\n"+ // says nothing
		"S 1099511627776 1700000000.000 h loop=1 cpus=0\nE 1099511627776 0 1700000000.000 2.000 h rss=100\n")
	write("status.2", "# farm-status v1 job=2 run=1 host=h\n"+ // no cpus=: 1
		"S 4 1700000000.000 h\nE 4 0 1700000000.000 5.000 h rss=10 cpu=5.00\n")
	write("status.3", "# farm-status v1 job=3 run=1 host=h\n"+
		"S 5 1700000000.000 h\nE 5 1 1700000000.000 1.000 h rss=7 cpu=1.00\n")
	write("status.4", "# farm-status v1 job=4 run=2 host=h\n"+ // run 2's success decides case 5
		"S 5 1700000100.000 h\nE 5 0 1700000100.000 1.000 h\n")
	sum, err := Load(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64]Used{}
	sum.EachUsed(func(u Used) { got[u.ID] = u })
	want := map[int64]Used{
		1:             {ID: 1, State: Succeeded, Seconds: 10, RSS: 2048, CPU: 11, HasCPU: true, CPUs: 8},
		2:             {ID: 2, State: Failed, Seconds: 4, CPU: 2.5, HasCPU: true, CPUs: 2},
		4:             {ID: 4, State: Succeeded, Seconds: 5, RSS: 10, CPU: 5, HasCPU: true, CPUs: 1},
		1099511627776: {ID: 1099511627776, State: Succeeded, Seconds: 2, RSS: 100, CPUs: 1},
	}
	if len(got) != len(want) {
		t.Errorf("EachUsed gave %d cases, want %d: %+v", len(got), len(want), got)
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("case %d: %+v, want %+v", id, got[id], w)
		}
	}
}
