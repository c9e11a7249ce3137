package farm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/farm-hpc/farm/status"
	"github.com/google/go-cmp/cmp"
)

// useCases writes cases first..first+n-1 into w, each started at t0 on
// the whole job (no placement) or, with cpus, on that many CPUs, ending
// with code after 10 s, having used 10 s × used of CPU and peaked at
// rssKiB.
func useCases(w *status.Writer, first int64, n int, cpus int, code int, used float64, rssKiB int64) {
	t0 := time.Unix(1_700_000_000, 0)
	for id := first; id < first+int64(n); id++ {
		if cpus > 0 {
			list := make([]int, cpus)
			for i := range list {
				list[i] = i
			}
			w.StartAt(id, t0, status.Placement{Loop: 1, CPUs: list})
		} else {
			w.Start(id, t0)
		}
		w.EndUse(id, code, t0, 10*time.Second, status.Use{RSS: rssKiB, CPU: time.Duration(used * 10 * float64(time.Second)), HasCPU: true})
	}
}

// TestQueryAdvisesCPUsAndMem: 30 cases, each holding a job of 8 CPUs and
// declaring mem=4G, keep 1.1 CPUs busy and peak at 310 MiB: farm query
// says so, suggests cpus=2 (1.1 rounded up) and mem=512M (310 MiB × 1.5
// rounded up to a tidy size), in its lines and in --json.
func TestQueryAdvisesCPUsAndMem(t *testing.T) {
	ctx := context.Background()
	f, _ := newTestFarm(t, strings.Repeat("./sim #FARM mem=4G\n", 30), &fakeBackend{})
	if err := f.Submit(ctx, SubmitOptions{N: 1}); err != nil {
		t.Fatal(err)
	}
	writeStatus(t, f, "101", 1, func(w *status.Writer) { useCases(w, 1, 30, 0, 0, 1.1, 310<<10) })
	q, qd, err := f.query(ctx, time.Unix(1_700_000_100, 0))
	if err != nil {
		t.Fatal(err)
	}
	cpus, mem := "cpus=2", "mem=512M"
	if diff := cmp.Diff(&CPUUse{Given: 8, Cases: 30, MedianUsed: 1.1, Suggest: &cpus}, q.CPUUse); diff != "" {
		t.Errorf("cpu_use (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&MemUse{DeclaredMiB: 4096, Cases: 30, MedianPeakBytes: 310 << 20, MaxPeakBytes: 310 << 20, MaxPeakCase: 1, Suggest: &mem}, q.MemUse); diff != "" {
		t.Errorf("mem_use (-want +got):\n%s", diff)
	}
	if qd.mem.lookup(30) != 4096 || qd.mem.lookup(31) != 0 {
		t.Errorf("mem= of table.dat's cases: %+v", qd.mem)
	}
	var b bytes.Buffer
	if err := writeQuery(&b, q, Text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Advice: cases use 1.1 of the 8 CPUs each is given (the median of 30 succeeded cases' CPU time ÷ wall time): consider #FARM cpus=2 on their lines (a meta-job then runs more of them at once)\n",
		"Advice: cases peak at 310M at most (case 1; median 310M) of the mem=4G each declares (30 cases): consider mem=512M (the largest peak × 1.5, rounded up)\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("farm query says\n%s\nwithout %q", b.String(), want)
		}
	}
	b.Reset()
	writeQuery(&b, q, JSON)
	for _, want := range []string{
		`"cpu_use":{"given":8,"cases":30,"median_used":1.1,"suggest":"cpus=2"}`,
		`"mem_use":{"declared_mib":4096,"cases":30,"median_peak_bytes":325058560,"max_peak_bytes":325058560,"max_peak_case":1,"suggest":"mem=512M"}`,
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("--json:\n%s\nwithout %s", b.String(), want)
		}
	}
	var back Query
	if err := json.Unmarshal(b.Bytes(), &back); err != nil || len(back.Advice) != 2 {
		t.Errorf("--json's advice: %v, %v", back.Advice, err)
	}
}

// loadUse loads the status files fn writes, as one job of 8 CPUs.
func loadUse(t *testing.T, fn func(w *status.Writer)) *status.Summary {
	t.Helper()
	dir := t.TempDir()
	w, err := status.CreateCap(filepath.Join(dir, "status.1"), "1", 0, 1, "node1", status.Capacity{CPUs: 8}, nil)
	if err != nil {
		t.Fatal(err)
	}
	fn(w)
	w.Close()
	sum, err := status.Load(dir, status.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

// No advice where the cases use much of what they were given, where too
// few say, or where they were given one CPU; the numbers are there all
// the same. Failed cases do not count for CPUs; the most common number
// of CPUs given does.
func TestNoAdviceWhenUseIsHighOrCasesFew(t *testing.T) {
	mode := useMode{}
	for _, c := range []struct {
		name   string
		write  func(w *status.Writer)
		given  int
		cases  int64
		median float64
	}{
		{"high use", func(w *status.Writer) { useCases(w, 1, 30, 0, 0, 7, 1<<10) }, 8, 30, 7},
		{"half", func(w *status.Writer) { useCases(w, 1, 30, 0, 0, 4, 1<<10) }, 8, 30, 4},
		{"too few", func(w *status.Writer) { useCases(w, 1, minAdviceCases-1, 0, 0, 1.1, 1<<10) }, 8, minAdviceCases - 1, 1.1},
		{"too few succeeded", func(w *status.Writer) {
			useCases(w, 1, minAdviceCases-1, 0, 0, 1.1, 1<<10)
			useCases(w, 100, 10, 0, 1, 0.5, 1<<10) // failed
		}, 8, minAdviceCases - 1, 1.1},
		{"one CPU", func(w *status.Writer) { useCases(w, 1, 30, 1, 0, 0.2, 1<<10) }, 1, 30, 0.2},
		{"most given 2", func(w *status.Writer) {
			useCases(w, 1, 25, 2, 0, 1.5, 1<<10)
			useCases(w, 100, 20, 0, 0, 1.1, 1<<10)
		}, 2, 25, 1.5},
	} {
		sum := loadUse(t, c.write)
		cpu, _, advice := useAdvice(sum, nil, mode)
		if cpu == nil || cpu.Given != c.given || cpu.Cases != c.cases || cpu.MedianUsed != c.median || cpu.Suggest != nil || advice != nil {
			t.Errorf("%s: %+v, advice %q; want %d given, %d cases, median %v, no advice", c.name, cpu, advice, c.given, c.cases, c.median)
		}
	}
	cpu, mem, advice := useAdvice(loadUse(t, func(*status.Writer) {}), nil, mode)
	if cpu != nil || mem != nil || advice != nil {
		t.Errorf("no case: %+v %+v %q", cpu, mem, advice)
	}
	// The median of 1.1, 1.1, 6 is 1.1: advice, to 2 CPUs.
	sum := loadUse(t, func(w *status.Writer) {
		useCases(w, 1, 20, 0, 0, 1.1, 1<<10)
		useCases(w, 21, 10, 0, 0, 6, 1<<10)
	})
	if cpu, _, advice := useAdvice(sum, nil, mode); cpu.MedianUsed != 1.1 || *cpu.Suggest != "cpus=2" || len(advice) != 1 {
		t.Errorf("median: %+v %q", cpu, advice)
	}
}

// In SIMPLE mode the advice is the CPUs a job asks for; in WHOLE_NODE
// mode, the NWHOLE that gives each loop about as many as the cases use.
func TestCPUAdviceByMode(t *testing.T) {
	sum := loadUse(t, func(w *status.Writer) { useCases(w, 1, 30, 4, 0, 1.1, 0) }) // 4 CPUs each
	for _, c := range []struct {
		mode    useMode
		suggest string
		says    string
	}{
		{useMode{}, "cpus=2", "consider #FARM cpus=2 on their lines"},
		{useMode{simple: true}, "2 CPUs a job", "ask the batch system for 2 CPUs a job in job_script.sh"},
		{useMode{wholeNode: true, nwhole: 24}, "NWHOLE=48", "consider NWHOLE=48 in config (now 24: more loops, about 2 CPUs each)"},
	} {
		cpu, _, advice := useAdvice(sum, nil, c.mode)
		if cpu.Suggest == nil || *cpu.Suggest != c.suggest || len(advice) != 1 || !strings.Contains(advice[0], "cases use 1.1 of the 4 CPUs each is given") || !strings.Contains(advice[0], c.says) {
			t.Errorf("%+v: %+v, %q; want %q, saying %q", c.mode, cpu, advice, c.suggest, c.says)
		}
	}
	if _, _, advice := useAdvice(sum, nil, useMode{wholeNode: true, nwhole: maxNWhole}); advice != nil {
		t.Errorf("NWHOLE at its most: %q", advice)
	}
}

// The mem= advice: the largest peak of the cases that declare the most
// common mem= (any outcome) × 1.5, to a tidy size; none when some case
// peaks at half of mem= or more, or too few cases say.
func TestMemAdvice(t *testing.T) {
	dir := t.TempDir()
	table := filepath.Join(dir, "table.dat")
	var b strings.Builder
	for id := 1; id <= 40; id++ {
		mem := "mem=4G"
		if id > 30 {
			mem = "mem=1G"
		}
		fmt.Fprintf(&b, "%d ./sim #FARM cpus=1 %s\n", id, mem)
	}
	os.WriteFile(table, []byte(b.String()), 0o644)
	mt, err := readMemTable(table)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		write   func(w *status.Writer)
		max     int64 // KiB
		suggest string
	}{
		{"far under", func(w *status.Writer) {
			useCases(w, 1, 25, 1, 0, 1, 200<<10)
			useCases(w, 26, 4, 1, 0, 1, 700<<10)  // 1050 MiB: 1536M
			useCases(w, 31, 10, 1, 0, 1, 900<<10) // mem=1G: fewer
		}, 700 << 10, "mem=1536M"},
		{"a failure near mem=", func(w *status.Writer) {
			useCases(w, 1, 29, 1, 0, 1, 200<<10)
			useCases(w, 30, 1, 1, 1, 1, 3<<20) // failed at 3 GiB
		}, 3 << 20, ""},
		{"too few", func(w *status.Writer) { useCases(w, 1, minAdviceCases-1, 1, 0, 1, 200<<10) }, 200 << 10, ""},
	} {
		_, mem, advice := useAdvice(loadUse(t, c.write), mt, useMode{})
		got := ""
		if mem != nil && mem.Suggest != nil {
			got = *mem.Suggest
		}
		if mem == nil || mem.DeclaredMiB != 4096 || mem.MaxPeakBytes != c.max<<10 || got != c.suggest || (len(advice) == 1) != (c.suggest != "") {
			t.Errorf("%s: %+v, %q; want the largest peak %d KiB of mem=4G, suggesting %q", c.name, mem, advice, c.max, c.suggest)
		}
	}
	if _, mem, _ := useAdvice(loadUse(t, func(w *status.Writer) { useCases(w, 1, 30, 1, 0, 1, 200<<10) }), nil, useMode{}); mem != nil {
		t.Errorf("no mem= declared: %+v", mem)
	}
}

func TestTidyMiB(t *testing.T) {
	for in, want := range map[int64]int64{0: 1, 1: 1, 2: 2, 3: 3, 5: 6, 7: 8, 465: 512, 513: 768, 769: 1024, 1025: 1536, 1537: 2048, 3000: 3072} {
		if got := tidyMiB(in); got != want {
			t.Errorf("tidyMiB(%d) = %d, want %d", in, got, want)
		}
	}
}

// memTable keeps the mem= of a table's cases as runs of consecutive IDs,
// in ascending or descending order, and finds each case's.
func TestMemTable(t *testing.T) {
	dir := t.TempDir()
	table := filepath.Join(dir, "table.dat")
	lines := "10 a #FARM mem=1G\n9 a #FARM mem=1G\n8 a #FARM mem=1G\n" + // descending
		"1 a #FARM mem=2G\n2 a #FARM mem=2G\n3 a #FARM cpus=2\n4 a\n5 a #FARM mem=512\n" +
		"100 a #FARM mem=2G\n101 a #FARM mem=2G\n"
	os.WriteFile(table, []byte(lines), 0o644)
	mt, err := readMemTable(table)
	if err != nil {
		t.Fatal(err)
	}
	if len(mt.runs) != 4 {
		t.Errorf("%d runs, want 4: %+v", len(mt.runs), mt.runs)
	}
	for id, want := range map[int64]int64{1: 2048, 2: 2048, 3: 0, 4: 0, 5: 512, 6: 0, 7: 0, 8: 1024, 9: 1024, 10: 1024, 11: 0, 99: 0, 100: 2048, 101: 2048, 102: 0, 0: 0} {
		if got := mt.lookup(id); got != want {
			t.Errorf("case %d: mem= %d MiB, want %d", id, got, want)
		}
	}
	os.WriteFile(table, []byte("1 a\n2 b #FARM cpus=2\n"), 0o644)
	if mt, err := readMemTable(table); mt != nil || err != nil || mt.lookup(1) != 0 || mt.memOf() != nil {
		t.Errorf("a table without mem=: %+v, %v", mt, err)
	}
}

// farm report compares the peaks with table.dat's mem=, names the cases
// furthest off with their commands, and gives farm query's advice in its
// summary.
func TestReportUseAgainstTable(t *testing.T) {
	ctx := context.Background()
	var table strings.Builder
	for id := 1; id <= 30; id++ {
		fmt.Fprintf(&table, "./sim %d #FARM mem=4G\n", id)
	}
	f, _ := newTestFarm(t, table.String(), &fakeBackend{})
	if err := f.Submit(ctx, SubmitOptions{N: 1}); err != nil {
		t.Fatal(err)
	}
	writeStatus(t, f, "101", 1, func(w *status.Writer) {
		useCases(w, 1, 29, 0, 0, 1.1, 310<<10)
		useCases(w, 30, 1, 0, 0, 0.5, 5<<20) // 5 GiB of 4: above mem=
	})
	d, err := f.reportData(ctx, time.Unix(1_700_000_100, 0))
	if err != nil {
		t.Fatal(err)
	}
	u := d.Use
	if u.Memory.Kind != "ratio" || u.Memory.Count != 30 || len(u.Over) != 1 || u.Over[0].ID != 30 || u.Over[0].Command != "./sim 30" {
		t.Errorf("memory %+v, over %+v: want 30 peaks against mem=, case 30 (./sim 30) above it", u.Memory, u.Over)
	}
	if len(u.LeastCPU) != 5 || u.LeastCPU[0].ID != 30 || u.LeastCPU[0].Command != "./sim 30" || u.CPU.Median != 1.1/8 {
		t.Errorf("least CPU %+v, median %v", u.LeastCPU, u.CPU.Median)
	}
	advice := 0
	for _, s := range d.Summary {
		if s.Name == "advice" {
			advice++
			if !strings.HasPrefix(s.Value, "cases use 1.1 of the 8 CPUs") {
				t.Errorf("advice: %q", s.Value)
			}
		}
	}
	if advice != 1 { // no mem= advice: case 30 peaks above it
		t.Errorf("%d advice lines in the summary, want 1", advice)
	}
}
