package browser

import (
	"context"
	"errors"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/farm-hpc/farm/internal/testreq"
)

// need skips t without Chromium, or fails it with FARM_REQUIRE_CHROMIUM=1
// (set by .ci/run; integration/chromium-up installs it).
func need(t *testing.T) {
	t.Helper()
	if Path() != "" {
		return
	}
	testreq.Skip(t, "FARM_REQUIRE_CHROMIUM", "CHROMIUM TESTS SKIPPED: no chromium, chromium-browser or google-chrome (integration/chromium-up installs it)")
}

// open writes html to a file of a temporary directory and opens it; the
// page is closed at the end of the test.
func open(t *testing.T, html string, opt Options) *Page {
	t.Helper()
	need(t)
	path := filepath.Join(t.TempDir(), "page.html")
	if err := os.WriteFile(path, []byte(html), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	start := time.Now()
	p, err := Open(ctx, path, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("opened in %v", time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	return p
}

const cleanPage = `<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>clean</title>
<style>body { font-family: sans-serif } .bar { fill: steelblue }</style>
</head><body>
<h1>Report</h1>
<svg width="300" height="100" viewBox="0 0 300 100">
  <rect class="bar" x="10" y="20" width="50" height="80"/>
  <rect class="bar" x="70" y="50" width="50" height="50"/>
  <rect class="bar" x="130" y="10" width="50" height="90"/>
</svg>
<script>
  const p = document.createElement("p");
  p.id = "done";
  p.textContent = "rendered";
  document.body.appendChild(p);
</script>
</body></html>`

func TestCleanPage(t *testing.T) {
	p := open(t, cleanPage, Options{})
	if errs := p.Errors(); len(errs) != 0 {
		t.Errorf("Errors() = %q, want none", errs)
	}
	if reqs := p.Requests(); len(reqs) != 0 {
		t.Errorf("Requests() = %q, want none", reqs)
	}
	n, err := p.Count("svg rect.bar")
	if err != nil || n != 3 {
		t.Errorf(`Count("svg rect.bar") = %d, %v; want 3`, n, err)
	}
	var done bool
	if err := p.Eval(`document.getElementById("done") !== null`, &done); err != nil || !done {
		t.Errorf("#done: %v, %v; want true", done, err)
	}
	var text string
	if err := p.Eval(`new Promise(r => setTimeout(() => r(document.getElementById("done").textContent), 10))`, &text); err != nil || text != "rendered" {
		t.Errorf("awaited promise: %q, %v; want rendered", text, err)
	}
	err = p.Eval(`(() => { throw new TypeError("no such thing") })()`, nil)
	if err == nil || !strings.Contains(err.Error(), "TypeError: no such thing") {
		t.Errorf("eval of a throw: %v; want an error naming TypeError: no such thing", err)
	}
	if _, err := p.Count("svg[["); err == nil {
		t.Error("Count of a bad selector: no error")
	}
}

func TestErrors(t *testing.T) {
	p := open(t, `<!DOCTYPE html><html><body><p>x</p>
<script>
console.log("fine");
console.error("boom");
throw new Error("kaboom");
</script></body></html>`, Options{})
	errs := p.Errors()
	if len(errs) != 2 || !strings.Contains(errs[0], "boom") || !strings.Contains(errs[1], "kaboom") {
		t.Fatalf("Errors() = %q; want a line with boom, one with kaboom", errs)
	}
	for _, e := range errs {
		t.Logf("error line: %s", e)
	}
}

func TestRequests(t *testing.T) {
	p := open(t, `<!DOCTYPE html><html><head>
<link rel="stylesheet" href="https://192.0.2.1/a.css">
</head><body><img src="http://192.0.2.1/x.png">
<img src="data:image/gif;base64,R0lGODlhAQABAAAAACw=">
<script>new WebSocket("ws://192.0.2.1/ws")</script>
</body></html>`, Options{})
	reqs := p.Requests()
	for _, want := range []string{"http://192.0.2.1/x.png", "https://192.0.2.1/a.css", "ws://192.0.2.1/ws"} {
		if !slices.Contains(reqs, want) {
			t.Errorf("Requests() = %q; want it to list %s", reqs, want)
		}
	}
	if len(reqs) != 3 {
		t.Errorf("Requests() = %q; want only those three", reqs)
	}
	t.Logf("errors: %q", p.Errors())
}

func TestScreenshot(t *testing.T) {
	opt := Options{Width: 800, Height: 600}
	p := open(t, `<!DOCTYPE html><html><body style="margin: 8px">
<div style="height: 3000px; background: linear-gradient(red, blue)"></div>
</body></html>`, opt)
	var scrollHeight int
	if err := p.Eval(`document.documentElement.scrollHeight`, &scrollHeight); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "shot.png")
	if err := p.Screenshot(path); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("the screenshot is no PNG: %v", err)
	}
	b := img.Bounds()
	if b.Dx() != opt.Width || b.Dy() < scrollHeight || scrollHeight < 3000 {
		t.Errorf("screenshot %dx%d, scrollHeight %d; want %d wide and at least scrollHeight (>= 3000) high", b.Dx(), b.Dy(), scrollHeight, opt.Width)
	}
	// The bottom of the page is there, not a blank beyond the viewport.
	if r, g, bl, _ := img.At(b.Dx()/2, 3000).RGBA(); bl>>8 < 200 || r>>8 > 60 || g>>8 > 60 {
		t.Errorf("pixel at y=3000 is %d,%d,%d; want the blue end of the gradient", r>>8, g>>8, bl>>8)
	}
}

func TestCloseLeavesNothing(t *testing.T) {
	p := open(t, cleanPage, Options{})
	pid := p.cmd.Process.Pid
	if n := len(leftovers(pid, p.dir)); n < 2 {
		t.Errorf("Chromium has %d processes; want its helpers too", n)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("Chromium (pid %d) is still there after Close: kill -0 says %v", pid, err)
	}
	if left := leftovers(pid, p.dir); len(left) > 0 {
		t.Errorf("processes of Chromium's group or with its user-data-dir left after Close: %v", left)
	}
	if _, err := os.Stat(p.dir); !os.IsNotExist(err) {
		t.Errorf("user-data-dir %s: %v; want it removed", p.dir, err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := p.Eval("1", nil); err == nil {
		t.Error("Eval after Close: no error")
	}
}

// A page whose load never ends: Open fails at ctx's deadline, saying so,
// and leaves neither a process nor its user-data-dir.
func TestOpenTimesOut(t *testing.T) {
	need(t)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	path := filepath.Join(tmp, "page.html")
	os.WriteFile(path, []byte(`<!DOCTYPE html><html><body><script>for (;;) {}</script></body></html>`), 0o644)
	// Long enough for Chromium to start on 2 busy cores (make test runs
	// packages in parallel); the load event is then what times out.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	p, err := Open(ctx, path, Options{})
	if err == nil {
		p.Close()
		t.Fatal("Open of a page that never loads: no error")
	}
	if !strings.Contains(err.Error(), "deadline exceeded") {
		t.Errorf("Open: %v; want it to say it ran out of time", err)
	} else if !strings.Contains(err.Error(), "waiting for the load event") {
		t.Logf("Open ran out of time before the load (a slow start?): %v", err)
	}
	if left := leftovers(-1, tmp); len(left) > 0 { // -1: no process group
		t.Errorf("processes left by a failed Open: %v", left)
	}
	if dirs, _ := filepath.Glob(filepath.Join(tmp, "farm-chromium-*")); len(dirs) > 0 {
		t.Errorf("user-data-dirs left by a failed Open: %v", dirs)
	}
	if _, err := Open(context.Background(), filepath.Join(tmp, "missing.html"), Options{}); err == nil {
		t.Error("Open of a missing file: no error")
	}
}
