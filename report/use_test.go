package report

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// useFarm writes the status files of a farm whose records say what its
// cases used, and returns its STATUSES directory and the mem= its cases
// declare (MiB): job 1 gives its cases 4 CPUs (case 4: the one its start
// record names), job 2 one; case 5 says nothing, case 4 declares no mem=.
//
//	case  given  wall  CPU   eff    peak     mem=  peak/mem=
//	1     4      10 s  40 s  1      1 GiB    2G    0.5
//	2     4      10 s  10 s  0.25   512 MiB  2G    0.25
//	3     4      10 s  4 s   0.1    2 GiB    1G    2
//	4     1      20 s  20 s  1      256 MiB  -     -
//	6     4      10 s  0 s   0      1 MiB    2G    1/2048
//	7     1      5 s   2.5s  0.5    -        2G    -
//	8     1      60 s  30 s  0.5    3 GiB    4G    0.75
func useFarm(t *testing.T) (string, map[int64]int64) {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"status.1": "# farm-status v1 job=1 run=1 host=n1 cpus=4\n" +
			"S 1 1700000000.000 n1\nE 1 0 1700000000.000 10.000 n1 rss=1048576 cpu=40.00\n" +
			"S 2 1700000010.000 n1\nE 2 0 1700000010.000 10.000 n1 rss=524288 cpu=10.00\n" +
			"S 3 1700000020.000 n1\nE 3 1 1700000020.000 10.000 n1 rss=2097152 cpu=4.00\n" +
			"S 4 1700000030.000 n1 loop=1 cpus=0\nE 4 0 1700000030.000 20.000 n1 rss=262144 cpu=20.00\n" +
			"S 5 1700000050.000 n1\nE 5 0 1700000050.000 10.000 n1\n" +
			"S 6 1700000060.000 n1\nI 6 15 1700000060.000 10.000 n1 rss=1024 cpu=0.00\n",
		"status.2": "# farm-status v1 job=2 run=1 host=n2\n" +
			"S 7 1700000000.000 n2\nE 7 0 1700000000.000 5.000 n2 cpu=2.50\n" +
			"S 8 1700000005.000 n2\nT 8 15 1700000005.000 60.000 n2 rss=3145728 cpu=30.00\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, map[int64]int64{1: 2048, 2: 2048, 3: 1024, 5: 2048, 6: 2048, 7: 2048, 8: 4096}
}

func ids(l []UseCase) []int64 {
	out := []int64{}
	for _, c := range l {
		out = append(out, c.ID)
	}
	return out
}

// TestUseAgainstMem: with mem= declared, the report gives the peaks as a
// share of it and the CPU efficiencies (CPU ÷ wall × CPUs given), their
// exact quantiles, and the cases furthest off.
func TestUseAgainstMem(t *testing.T) {
	dir, mem := useFarm(t)
	d, err := Build(Input{StatusDir: dir, Now: time.Unix(1700001000, 0), Mem: func(id int64) int64 { return mem[id] }})
	if err != nil {
		t.Fatal(err)
	}
	u := d.Use
	m := u.Memory
	if m.Kind != KindRatio || m.Count != 5 || u.Undeclared != 1 || m.Zero != 0 {
		t.Errorf("memory: kind %q, %d values, %d undeclared, %d zero; want ratio, 5, 1 (case 4), 0", m.Kind, m.Count, u.Undeclared, m.Zero)
	}
	if m.Min != 1.0/2048 || m.P10 != 1.0/2048 || m.Median != 0.5 || m.P90 != 2 || m.Max != 2 {
		t.Errorf("memory quantiles %v %v %v %v %v, want 1/2048, 1/2048, 0.5, 2, 2", m.Min, m.P10, m.Median, m.P90, m.Max)
	}
	c := u.CPU
	if c.Kind != KindEfficiency || c.Count != 7 || c.Zero != 1 {
		t.Errorf("cpu: kind %q, %d values, %d zero; want efficiency, 7, 1", c.Kind, c.Count, c.Zero)
	}
	if c.Min != 0 || c.P10 != 0 || c.Median != 0.5 || c.P90 != 1 || c.Max != 1 {
		t.Errorf("cpu quantiles %v %v %v %v %v, want 0, 0, 0.5, 1, 1", c.Min, c.P10, c.Median, c.P90, c.Max)
	}
	for _, l := range []struct {
		name string
		got  []UseCase
		want string
	}{
		{"over", u.Over, "[3]"},                  // the one above its mem=
		{"under", u.Under, "[6 2 1 8]"},          // those below
		{"least CPU", u.LeastCPU, "[6 3 2 8 7]"}, // 8 before 7: as low, and longer
	} {
		if got := fmt.Sprint(ids(l.got)); got != l.want {
			t.Errorf("%s: %s, want %s", l.name, got, l.want)
		}
	}
	if o := u.Over[0]; o.Value != 2 || o.RSS != 2<<30 || o.MemMB != 1024 || o.CPUs != 4 || o.Host != "n1" || o.Job != "1" || o.State != Failed {
		t.Errorf("the case furthest over mem=: %+v", o)
	}
	if l := u.LeastCPU[3]; l.ID != 8 || l.Value != 0.5 || l.CPUs != 1 || l.State != TimedOut || l.Seconds != 60 {
		t.Errorf("case 8 in least CPU: %+v", l)
	}
	// Bins hold every value; the zero in the first.
	if n := sum(c.Counts); n != 7 || len(c.Edges) != len(c.Counts)+1 {
		t.Errorf("cpu bins: %d values in %d bins, %d edges", n, len(c.Counts), len(c.Edges))
	}
	if n := sum(m.Counts); n != 5 {
		t.Errorf("memory bins hold %d values", n)
	}
}

// TestUsePeaksAlone: where no case declares mem=, the report gives the
// distribution of the peaks themselves, in bytes, and the largest.
func TestUsePeaksAlone(t *testing.T) {
	dir, _ := useFarm(t)
	d, err := Build(Input{StatusDir: dir, Now: time.Unix(1700001000, 0)})
	if err != nil {
		t.Fatal(err)
	}
	m := d.Use.Memory
	// 1 MiB, 256 MiB, 512 MiB, 1 GiB, 2 GiB, 3 GiB
	if m.Kind != KindRSS || m.Count != 6 || m.Min != 1<<20 || m.Median != 512<<20 || m.P90 != 3<<30 || m.Max != 3<<30 {
		t.Errorf("peaks: %+v", m)
	}
	if got := fmt.Sprint(ids(d.Use.Over)); got != "[8 3 1 2 4]" || len(d.Use.Under) != 0 || d.Use.Undeclared != 0 {
		t.Errorf("largest peaks %s (want [8 3 1 2 4]), under %v, undeclared %d", got, d.Use.Under, d.Use.Undeclared)
	}
	var b bytes.Buffer
	if err := WriteHTML(&b, d, "use"); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{"no case declares mem=", "median 512 MiB", "largest peak", "<svg id=\"memory\"", "<svg id=\"cpu\""} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if n := len(regexp.MustCompile(`<svg [^>]*class="figure"`).FindAllStringIndex(page, -1)); n != 7 {
		t.Errorf("%d figures, want 7", n)
	}
	// The table: 5 largest peaks and the 5 lowest efficiencies.
	if n := strings.Count(page[strings.Index(page, `<table id="use-cases">`):], "<tr><td>"); n < 10 {
		t.Errorf("the table of the cases furthest off has %d rows, want 10", n)
	}
}

// TestUseNone: records that say nothing of what cases used (farms before
// issue 38) give one line, and no figure, for it.
func TestUseNone(t *testing.T) {
	d, err := Build(smallInput())
	if err != nil {
		t.Fatal(err)
	}
	if d.Use.Any() || len(Figures(d)) != 5 {
		t.Fatalf("use %+v, %d figures: want none, 5", d.Use, len(Figures(d)))
	}
	var b bytes.Buffer
	WriteHTML(&b, d, "none")
	page := b.String()
	sec := page[strings.Index(page, `<section id="use-section">`):]
	sec = sec[:strings.Index(sec, "</section>")]
	if strings.Count(sec, "<p>") != 1 || strings.Contains(sec, "<svg") || !strings.Contains(sec, "No record of a case that ended says what it used") {
		t.Errorf("the section of what cases used:\n%s", sec)
	}
}

// TestSketchQuantilesBeyondExact: past the values a sketch keeps, its
// quantiles are within 1.1% of the exact ones, and Min and Max exact.
func TestSketchQuantilesBeyondExact(t *testing.T) {
	s := newSketch(-20, 10)
	var other sketch = newSketch(-20, 10)
	n := 3 * maxExact
	for i := 1; i <= n; i++ {
		v := float64(i) / float64(n) // 1/n .. 1
		if i%2 == 0 {
			s.add(v)
		} else {
			other.add(v)
		}
	}
	s.merge(&other)
	if !s.inexact || s.count != int64(n) || s.min != 1/float64(n) || s.max != 1 {
		t.Fatalf("sketch: inexact %v, %d values, min %v, max %v", s.inexact, s.count, s.min, s.max)
	}
	for _, q := range []float64{0.1, 0.5, 0.9} {
		want := math.Ceil(q*float64(n)) / float64(n)
		if got := s.quantile(q); math.Abs(got/want-1) > 0.011 {
			t.Errorf("quantile %v: %v, want %v within 1.1%%", q, got, want)
		}
	}
}

// TestGoldenUse: the data of what the cases of useFarm used — bins,
// quantiles, the cases furthest off — is what testdata/use.golden.json
// holds (go test -update rewrites it; read the diff before committing).
func TestGoldenUse(t *testing.T) {
	dir, mem := useFarm(t)
	d, err := Build(Input{StatusDir: dir, Now: time.Unix(1700001000, 0), Mem: func(id int64) int64 { return mem[id] }})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, filepath.Join("testdata", "use.golden.json"), d.Use)
}
