package report

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestHTMLSelfContained: the page of the small farm refers to nothing
// outside itself (no src, href or url(), no script), forbids every request
// in its Content-Security-Policy, and has the five figures, a bar per case
// and the tables. FARM_REPORT_OUT=DIR keeps the page there, to look at.
func TestHTMLSelfContained(t *testing.T) {
	d, err := Build(smallInput())
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteHTML(&b, d, "testdata/small"); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if dir := os.Getenv("FARM_REPORT_OUT"); dir != "" {
		os.WriteFile(filepath.Join(dir, "small.html"), b.Bytes(), 0o644)
	}
	for _, bad := range []string{"src=", "href=", "url(", "<script", "@import", "http://", "https://"} {
		if strings.Contains(page, bad) {
			t.Errorf("the page has %q: it must need nothing outside itself", bad)
		}
	}
	if !strings.Contains(page, `content="default-src 'none'; style-src 'unsafe-inline'"`) {
		t.Errorf("the page does not forbid requests in a Content-Security-Policy")
	}
	for _, c := range []struct {
		re   string
		want int
	}{
		{`<svg [^>]*class="figure"`, 5},
		{`<rect [^>]*class="case `, 16},
		{`<rect [^>]*class="case failed"`, 3},
		{`<rect [^>]*class="case interrupted"`, 3},
		{`<line [^>]*class="job-start"`, 5},
		{`<rect [^>]*class="job-quit"`, 1},
		{`<line [^>]*class="quantile"`, 1},
		{`<line [^>]*class="cutoff"`, 1},
		{`<table id="slowest">`, 1},
	} {
		if n := len(regexp.MustCompile(c.re).FindAllStringIndex(page, -1)); n != c.want {
			t.Errorf("%s: %d in the page, want %d", c.re, n, c.want)
		}
	}
	// The histogram's bars add up to the 16 attempts: one <rect> per
	// non-empty (bin, state), titled with its count.
	sum := 0
	for _, m := range regexp.MustCompile(`class="bin [a-z]+"><title>[^:]*: (\d+) `).FindAllStringSubmatch(page, -1) {
		n := 0
		for _, c := range m[1] {
			n = 10*n + int(c-'0')
		}
		sum += n
	}
	if sum != 16 {
		t.Errorf("the histogram's bars count %d cases, want 16", sum)
	}
}

// TestSVGWellFormed: the SVG of every figure is well-formed XML with a bar
// per case.
func TestSVGWellFormed(t *testing.T) {
	d, err := Build(smallInput())
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteSVG(&b, append([]*Canvas{SummaryFigure(d, "small <&> farm")}, Figures(d)...)); err != nil {
		t.Fatal(err)
	}
	if cases := checkWellFormed(t, b.String()); cases != 16 {
		t.Errorf("%d case bars, want 16", cases)
	}
}

// TestHTMLWorstCaseSize: the page stays under 10 MB however busy the
// timeline: 300 meta-jobs whose cases alternate between succeeded and
// failed in every one of the aggregate's 300 columns (no two neighbouring
// cells alike, the most cells a page can have).
func TestHTMLWorstCaseSize(t *testing.T) {
	dir := t.TempDir()
	const jobs, cases = 300, 300
	for j := 0; j < jobs; j++ {
		var b strings.Builder
		fmt.Fprintf(&b, "# farm-status v1 job=%d run=1 host=node%d\n", 100+j, j)
		for i := 0; i < cases; i++ {
			id := j*cases + i + 1
			fmt.Fprintf(&b, "S %d %d.000 node%d\nE %d %d %d.000 1.000 node%d\n", id, 1700000000+i, j, id, (i+j)%2, 1700000000+i, j)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("status.%d", 100+j)), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d, err := Build(Input{StatusDir: dir, Now: time.Unix(1700001000, 0)})
	if err != nil {
		t.Fatal(err)
	}
	cells := 0
	for _, r := range d.Timeline.Rows {
		cells += len(r.Cells)
	}
	if d.Timeline.Mode != "aggregate" || cells < 250*jobs {
		t.Fatalf("mode %s, %d cells: the test wants the most cells an aggregate can have", d.Timeline.Mode, cells)
	}
	var b bytes.Buffer
	if err := WriteHTML(&b, d, "worst"); err != nil {
		t.Fatal(err)
	}
	if b.Len() >= 10<<20 {
		t.Errorf("the page is %.1f MB, over 10 MB", float64(b.Len())/(1<<20))
	}
	t.Logf("%d cells: a page of %.1f MB", cells, float64(b.Len())/(1<<20))
}

// checkWellFormed checks that svg is well-formed XML and returns its case
// bars.
func checkWellFormed(t *testing.T, svg string) int {
	t.Helper()
	dec := xml.NewDecoder(strings.NewReader(svg))
	cases := 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return cases
		}
		if err != nil {
			t.Fatalf("not well-formed: %v", err)
		}
		if s, ok := tok.(xml.StartElement); ok {
			for _, a := range s.Attr {
				if a.Name.Local == "class" && strings.HasPrefix(a.Value, "case ") {
					cases++
				}
			}
		}
	}
}
