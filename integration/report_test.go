package integration

import (
	"context"
	"encoding/xml"
	"errors"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/farm-hpc/farm/internal/browser"
	"github.com/farm-hpc/farm/internal/testreq"
)

// reportFarm runs a farm of 4 meta-jobs on the local backend to its end:
// 36 cases of 0.1 s to 1.5 s, 4 of which exit 3, and case 5, a sleep of
// 300 s, interrupted by its job's time limit of 20 s. It returns what the
// records say: the cases started (a meta-job may exit before the table's
// end, for lack of run-time), failed, and interrupted.
func reportFarm(t *testing.T) (dir string, started, failed, interrupted int) {
	t.Helper()
	var table []string
	durations := []string{"0.1", "0.3", "0.6", "1.5"}
	for i := 1; i <= 36; i++ {
		switch {
		case i == 5:
			table = append(table, "sleep 300")
		case i%9 == 0:
			table = append(table, "sleep 0.2; exit 3")
		default:
			table = append(table, "sleep "+durations[i%len(durations)])
		}
	}
	dir = newFarm(t, table, "0:20")
	mustFarmShort(t, dir, "submit", "4", "--backend", "local")
	r := farmIn(t, dir, nil, "wait", "--timeout", "2m")
	if r.Code != exitNotAllOK {
		t.Fatalf("wait: exit %d, want 3 (some cases failed): %s %s", r.Code, r.Out, r.Err)
	}
	t.Logf("farm wait: %s", strings.TrimSpace(r.Out))
	rec := readRecords(t, dir)
	for id, n := range rec.Starts {
		started += n
		switch {
		case rec.Interrupts[id] > 0 || rec.Ends[id] < n:
			interrupted++
		case rec.ExitStatus[id] != 0:
			failed++
		}
	}
	if rec.Interrupts[5] != 1 || failed < 3 || started < 30 {
		t.Fatalf("the farm did not run as the test needs: %d started, %d failed, case 5 interrupted %d times", started, failed, rec.Interrupts[5])
	}
	return dir, started, failed, interrupted
}

// TestReportInBrowser: the report of a real farm run opens in headless
// Chromium with no console errors and no network request, and each figure
// has the elements the farm's records call for: a timeline bar per case,
// the failed and interrupted ones among them, a start and an end tick per
// meta-job, the quantile marked on the histogram, the 20 slowest cases.
// --png and --svg write the same figures as images. A screenshot is kept
// in $TMPDIR/farm-test-artifacts.
func TestReportInBrowser(t *testing.T) {
	t.Parallel()
	if browser.Path() == "" {
		testreq.Skip(t, "FARM_REQUIRE_CHROMIUM", "no Chromium (integration/chromium-up installs it): the report is not checked in a browser")
	}
	dir, started, failed, interrupted := reportFarm(t)
	page := filepath.Join(t.TempDir(), "report.html")
	pngPath, svgPath := filepath.Join(t.TempDir(), "figures.png"), filepath.Join(t.TempDir(), "figures.svg")
	out := mustFarm(t, dir, "report", "-o", page, "--png", pngPath, "--svg", svgPath)
	for _, p := range []string{page, pngPath, svgPath} {
		if !strings.Contains(out, "Wrote "+p) {
			t.Errorf("report does not say it wrote %s:\n%s", p, out)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := browser.Open(ctx, page, browser.Options{Width: 1100, Height: 900})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if errs := p.Errors(); len(errs) > 0 {
		t.Errorf("the page logged errors:\n%s", strings.Join(errs, "\n"))
	}
	if reqs := p.Requests(); len(reqs) > 0 {
		t.Errorf("the page made network requests: %v", reqs)
	}
	checkFigureElements(t, p, started, failed, interrupted)
	var summary string
	if err := p.Eval(`document.getElementById("summary").innerText`, &summary); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(summary, "36") {
		t.Errorf("the summary does not give the 36 cases:\n%s", summary)
	}
	art := filepath.Join(os.TempDir(), "farm-test-artifacts")
	os.MkdirAll(art, 0o755)
	shot := filepath.Join(art, "report.png")
	if err := p.Screenshot(shot); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of the report: %s", shot)
	checkPNG(t, shot, 1100, 1500)

	checkPNG(t, pngPath, 2*960, 2*1000)
	checkSVG(t, svgPath, started)
	if st, err := os.Stat(page); err != nil || st.Size() > 1<<20 {
		t.Errorf("the page of a 36-case farm: %v, %d bytes", err, st.Size())
	}
}

// checkFigureElements checks that the figures of the report open in p
// have the elements the farm's records call for: a timeline bar per case
// started, the failed and interrupted ones among them, a start and an end
// tick per meta-job (4), the quantile on the histogram, the 20 slowest
// cases, and the bars of the other figures.
func checkFigureElements(t *testing.T, p *browser.Page, started, failed, interrupted int) {
	t.Helper()
	count := func(sel string) int {
		t.Helper()
		n, err := p.Count(sel)
		if err != nil {
			t.Fatalf("%s: %v", sel, err)
		}
		return n
	}
	for _, c := range []struct {
		sel  string
		want int
	}{
		{"#timeline rect.case", started},
		{"#timeline rect.case.failed", failed},
		{"#timeline rect.case.interrupted", interrupted},
		{"#timeline line.job-start", 4},
		{"#timeline line.job-end", 4},
		{"#histogram line.quantile", 1},
		{"#slowest tr", 1 + 20},
		{"#hosts tr", 1 + 1},
		{"svg.figure", 7}, // with peak memory and CPU efficiency: the records say what each case used
	} {
		if got := count(c.sel); got != c.want {
			t.Errorf("%s: %d elements, want %d", c.sel, got, c.want)
		}
	}
	// The interrupted cases' bars: one per bin they fall in.
	if n := count("#histogram rect.bin.interrupted"); n < 1 || n > interrupted {
		t.Errorf("#histogram rect.bin.interrupted: %d, want 1 to %d (the interrupted cases)", n, interrupted)
	}
	for _, sel := range []string{"#histogram rect.bin.succeeded", "#histogram rect.bin.failed", "#throughput rect.tbin", "#hosts rect.hbar", "#statuses rect.hbar"} {
		if count(sel) == 0 {
			t.Errorf("%s: none", sel)
		}
	}
}

// checkPNG checks that path is a PNG at least w pixels wide and h high.
func checkPNG(t *testing.T, path string, w, h int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if b := img.Bounds(); b.Dx() < w || b.Dy() < h {
		t.Errorf("%s is %dx%d, want at least %dx%d", path, b.Dx(), b.Dy(), w, h)
	}
}

// checkSVG checks that path is well-formed XML with cases case bars.
func checkSVG(t *testing.T, path string, cases int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := xml.NewDecoder(f)
	bars := 0
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s is not well-formed: %v", path, err)
		}
		if s, ok := tok.(xml.StartElement); ok && s.Name.Local == "rect" {
			for _, a := range s.Attr {
				if a.Name.Local == "class" && strings.HasPrefix(a.Value, "case ") {
					bars++
				}
			}
		}
	}
	if bars != cases {
		t.Errorf("%s has %d case bars, want %d", path, bars, cases)
	}
}

// TestReportEmptyFarm: a farm never submitted gets a report that says so,
// not an error.
func TestReportEmptyFarm(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, []string{"true"}, "0-00:10")
	out := mustFarm(t, dir, "report")
	if !strings.Contains(out, "Wrote "+filepath.Join(dir, "report.html")) {
		t.Errorf("report said %q", out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "No case has ended yet.") {
		t.Errorf("the report of a farm never submitted does not say no case ended")
	}
	// The files follow the umask, as every file farm writes: a page
	// names hosts and commands.
	cmd := exec.Command("sh", "-c", `umask 077 && exec "$0" report -o private.html --svg private.svg`, bin(t))
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, f := range []string{"private.html", "private.svg"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s under umask 077: %v %v, want -rw-------", f, st.Mode(), err)
		}
	}
}

// TestReportBadOutput: a report that cannot be written is a one-line error
// naming the file, and leaves no file behind.
func TestReportBadOutput(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, []string{"true"}, "0-00:10")
	r := farmIn(t, dir, nil, "report", "-o", filepath.Join(dir, "no", "such", "dir", "r.html"))
	if r.Code == 0 || !strings.Contains(r.Err, "the directory "+filepath.Join(dir, "no", "such", "dir")+" does not exist") || strings.Count(strings.TrimSpace(r.Err), "\n") > 0 {
		t.Errorf("exit %d, stderr %q: want a one-line error naming r.html", r.Code, r.Err)
	}
	r = farmIn(t, dir, nil, "report", "--png", filepath.Join(dir, "x.png"), "--scale", "100")
	if r.Code != 64 || !strings.Contains(r.Err, "--scale") {
		t.Errorf("--scale 100: exit %d, stderr %q", r.Code, r.Err)
	}
	if _, err := os.Stat(filepath.Join(dir, "x.png")); err == nil {
		t.Errorf("a refused report left x.png")
	}
}

// TestWaitProgressPlain: farm wait --progress, its output not a terminal,
// prints the bar as plain lines, then its usual last line.
func TestWaitProgressPlain(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, repeat("sleep 0.3", 20), "0-00:10")
	mustFarm(t, dir, "submit", "2", "--backend", "local")
	out := mustFarm(t, dir, "wait", "--progress", "--interval", "300ms", "--timeout", "2m")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	bars := 0
	for _, l := range lines[:len(lines)-1] {
		if !strings.HasPrefix(l, "[") || !strings.Contains(l, "/20 cases") || strings.Contains(l, "\r") {
			t.Errorf("not a plain progress line: %q", l)
		}
		bars++
	}
	if bars < 2 {
		t.Errorf("%d progress lines in %q, want one every 300ms of some 3 s", bars, out)
	}
	if last := lines[len(lines)-1]; last != "20 cases: 20 succeeded, 0 failed, 0 interrupted, 0 never ran, 0 unfit" {
		t.Errorf("last line %q", last)
	}
	if !strings.Contains(lines[len(lines)-2], "100.0%  20/20 cases") {
		t.Errorf("the last bar is not at 100%%: %q", lines[len(lines)-2])
	}
}

// TestWaitProgressTerminal: on a terminal (a pseudo-terminal 60 columns
// wide), farm wait --progress redraws one line in place ("\r", erase to
// the end of the line), never wider than the terminal, so nothing scrolls;
// its last line starts on a line of its own.
func TestWaitProgressTerminal(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, repeat("sleep 0.3", 20), "0-00:10")
	mustFarm(t, dir, "submit", "2", "--backend", "local")
	out, code := runInPTY(t, dir, 60, "wait", "--progress", "--interval", "300ms", "--timeout", "2m")
	if code != 0 {
		t.Fatalf("exit %d: %q", code, out)
	}
	out = strings.ReplaceAll(out, "\r\n", "\n") // the terminal's own line endings
	body, last, ok := strings.Cut(strings.TrimRight(out, "\n"), "\n")
	if !ok || strings.Contains(last, "\n") {
		t.Fatalf("want the bar's line, then one last line; got %q", out)
	}
	if last != "20 cases: 20 succeeded, 0 failed, 0 interrupted, 0 never ran, 0 unfit" {
		t.Errorf("last line %q", last)
	}
	draws := strings.Split(body, "\r\x1b[K")
	if draws[0] != "" || len(draws) < 3 {
		t.Fatalf("want redraws in place (\\r ESC[K), got %q", body)
	}
	for _, d := range draws[1:] {
		if n := len([]rune(d)); n > 59 || !strings.HasPrefix(d, "[") || !strings.Contains(d, "cases/min") {
			t.Errorf("a redraw of %d columns on a 60-column terminal, or not a bar with its rate: %q", n, d)
		}
	}
}

// TestQueryWatchTerminal: farm query --watch on a terminal draws the same
// bar in place, and ends its line when the farm's jobs end.
func TestQueryWatchTerminal(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, repeat("sleep 0.3", 12), "0-00:10")
	mustFarm(t, dir, "submit", "2", "--backend", "local")
	out, code := runInPTY(t, dir, 200, "query", "--watch", "--interval", "300ms")
	if code != 0 {
		t.Fatalf("exit %d: %q", code, out)
	}
	if !strings.HasPrefix(out, "\r\x1b[K[") || !strings.HasSuffix(out, "\r\n") || strings.Count(out, "\n") != 1 {
		t.Errorf("want bars redrawn on one line, ended once; got %q", out)
	}
	if draws := strings.Split(strings.TrimSpace(out), "\r\x1b[K"); !strings.Contains(draws[len(draws)-1], "12/12 cases") {
		t.Errorf("the last bar is not 12/12: %q", draws[len(draws)-1])
	}
}

// checkReportPage runs farm report in the farm dir and checks that its
// page has as many of each element (a string of its tag) as want says.
func checkReportPage(t *testing.T, dir string, want map[string]int) {
	t.Helper()
	page := filepath.Join(t.TempDir(), "r.html")
	mustFarm(t, dir, "report", "-o", page)
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	for s, n := range want {
		if got := strings.Count(string(b), s); got != n {
			t.Errorf("the report has %d of %s, want %d", got, s, n)
		}
	}
}
