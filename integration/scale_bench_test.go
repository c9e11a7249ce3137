package integration

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/farm-hpc/farm/casetable"
)

// makeRecordFarm writes a farm whose STATUSES hold n cases, each with a
// start and an end record, spread over jobs meta-jobs; every 1000th case
// failed. It writes the files directly, as fast as the disk allows.
func makeRecordFarm(b *testing.B, n, jobs int) string { return makeRecords(b, n, jobs, false) }

// makeRecords is makeRecordFarm; with placed, the meta-jobs place their
// cases as WHOLE_NODE jobs of 192 CPUs and 4 GPUs do (issue 13): each
// start record says its loop, CPUs and GPUs, and every 1000th case but
// one is unfit instead (a U record) rather than failed.
func makeRecords(b *testing.B, n, jobs int, placed bool) string {
	b.Helper()
	dir := newFarm(b, []string{"true"}, "0-00:10")
	os.MkdirAll(filepath.Join(dir, "STATUSES"), 0o755)
	os.MkdirAll(filepath.Join(dir, "MISC"), 0o755)
	if err := casetable.NewStore(dir, filepath.Join(dir, "MISC")).Update(context.Background(), func(s *casetable.State) error {
		*s = casetable.State{Run: 1, Table: "table.dat", Cases: int64(n), MaxID: int64(n), Total: int64(n), Claimed: int64(n)}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	per := n / jobs
	t0 := time.Now().Add(-time.Hour).Unix()
	for j := 0; j < jobs; j++ {
		fh, err := os.Create(filepath.Join(dir, "STATUSES", fmt.Sprintf("status.%d", 1000+j)))
		if err != nil {
			b.Fatal(err)
		}
		w := bufio.NewWriterSize(fh, 1<<20)
		if placed {
			fmt.Fprintf(w, "# farm-status v1 job=%d run=1 host=node%03d cpus=192 gpus=4\n", 1000+j, j)
		} else {
			fmt.Fprintf(w, "# farm-status v1 job=%d run=1 host=node%03d\n", 1000+j, j)
		}
		for i := 0; i < per; i++ {
			id := int64(i*jobs + j + 1)
			st := 0
			if id%1000 == 0 {
				st = 2
			}
			start := t0 + int64(i)
			switch {
			case placed && id%1000 == 1:
				fmt.Fprintf(w, "U %d %d.123 needs %d CPUs, the job has 192\n", id, start, 193+id%7)
			case placed:
				loop := i % 48
				fmt.Fprintf(w, "S %d %d.123 node%03d loop=%d cpus=%d-%d gpus=%d\nE %d %d %d.123 0.517 node%03d\n",
					id, start, j, loop+1, 4*loop, 4*loop+3, loop%4, id, st, start, j)
			default:
				fmt.Fprintf(w, "S %d %d.123 node%03d\nE %d %d %d.123 0.517 node%03d\n", id, start, j, id, st, start, j)
			}
		}
		fmt.Fprintln(w, "Q 0 No cases left; exiting.")
		w.Flush()
		fh.Sync() // no writeback left to compete with the measurement
		fh.Close()
	}
	return dir
}

// BenchmarkStatus10M runs 'farm Status -f' over 10,000,000 status records
// (cases) and reports its wall time and peak memory (max RSS).
func BenchmarkStatus10M(b *testing.B) { benchmarkStatus(b, makeRecordFarm(b, 10_000_000, 100)) }

// BenchmarkStatus10MPlaced is BenchmarkStatus10M over meta-jobs that
// place their cases (loop, CPUs, GPUs) and leave some unfit: what a case
// says of its placement and reason must cost no memory per case.
func BenchmarkStatus10MPlaced(b *testing.B) {
	benchmarkStatus(b, makeRecords(b, 10_000_000, 100, true))
}

func benchmarkStatus(b *testing.B, dir string) {
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, args := range [][]string{{"Status", "-f"}, {"Status", "--json"}} {
			cmd := exec.Command(bin(b), args...)
			cmd.Dir = dir
			// Output goes to /dev/null: this measures farm, not the disk
			// that would store 450 MB of table.
			out, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
			if err != nil {
				b.Fatal(err)
			}
			cmd.Stdout = out
			var stderr strings.Builder
			cmd.Stderr = &stderr
			start := time.Now()
			if err := cmd.Run(); err != nil {
				b.Fatalf("farm %v: %v %s", args, err, stderr.String())
			}
			wall := time.Since(start)
			out.Close()
			rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss // KiB on Linux
			name := strings.Join(args, "")
			b.ReportMetric(wall.Seconds(), name+"-s")
			b.ReportMetric(float64(rss)/1024, name+"-peakMB")
		}
	}
}

// BenchmarkReport10M runs 'farm report' (the HTML page, and the PNG) over
// 10,000,000 cases in 1,000 meta-jobs and reports its wall time, peak
// memory (max RSS) and the size of what it wrote. Targets (issue 15):
// under 30 s and 1 GB, a page under 10 MB.
func BenchmarkReport10M(b *testing.B) {
	const n = 10_000_000
	dir := makeRecordFarm(b, n, 1000)
	// A numbered table.dat of the 10M cases, in descending order of ID:
	// the slowest cases (all take 0.517 s; the lowest IDs come first) are
	// at its end, so that farm reads all of it for their commands.
	fh, err := os.Create(filepath.Join(dir, "table.dat"))
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(fh, 1<<20)
	for id := n; id >= 1; id-- {
		fmt.Fprintf(w, "%d sleep 0.517 # case %d\n", id, id)
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	fh.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, c := range []struct {
			name string
			args []string
			file string
		}{
			{"html", []string{"report", "-o", "r.html"}, "r.html"},
			{"png", []string{"report", "--png", "r.png", "--scale", "1"}, "r.png"},
		} {
			cmd := exec.Command(bin(b), c.args...)
			cmd.Dir = dir
			var stderr strings.Builder
			cmd.Stderr = &stderr
			start := time.Now()
			if err := cmd.Run(); err != nil {
				b.Fatalf("farm %v: %v %s", c.args, err, stderr.String())
			}
			wall := time.Since(start)
			rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss // KiB on Linux
			st, err := os.Stat(filepath.Join(dir, c.file))
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(wall.Seconds(), c.name+"-s")
			b.ReportMetric(float64(rss)/1024, c.name+"-peakMB")
			b.ReportMetric(float64(st.Size())/(1<<20), c.name+"-MB")
			if c.name == "html" {
				page, _ := os.ReadFile(filepath.Join(dir, c.file))
				for _, want := range []string{"Aggregated: 10000000 cases", "sleep 0.517 # case 20<"} {
					if !strings.Contains(string(page), want) {
						b.Fatalf("the page does not say %q", want)
					}
				}
				if os.Getenv("FARM_BENCH_KEEP") != "" {
					os.WriteFile(filepath.Join(os.Getenv("FARM_BENCH_KEEP"), "report10M.html"), page, 0o644)
				}
			}
		}
	}
}
