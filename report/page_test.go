package report

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
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
	dec := xml.NewDecoder(&b)
	cases := 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
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
	if cases != 16 {
		t.Errorf("%d case bars, want 16", cases)
	}
}
