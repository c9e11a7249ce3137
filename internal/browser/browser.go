// Package browser opens a local HTML file in a real headless Chromium, for
// tests: what the page logged as errors, what it requested, what a script
// evaluates to in it, and a screenshot of it.
//
// It speaks the Chrome DevTools Protocol (CDP) over --remote-debugging-pipe:
// Chromium reads commands on its fd 3 and writes replies and events on its
// fd 4, each message one JSON object ended by a NUL byte. That needs no
// WebSocket library, no chromedp and no port, only encoding/json.
//
// The page gets no network: Chromium resolves no host name, not even an IP
// address (--host-resolver-rules), so that each request of the page to a
// host (http, https, ws, wss) fails at once with net::ERR_NAME_NOT_RESOLVED:
// a stray external reference can neither hang its load nor reach a host.
// Requests lists them all the same.
package browser

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Path returns the Chromium binary (chromium, chromium-browser or
// google-chrome, in PATH or /usr/bin), "" if there is none.
func Path() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
		if p := "/usr/bin/" + name; isExecutable(p) {
			return p
		}
	}
	return ""
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// Options of Open.
type Options struct {
	// Width and Height of the viewport in CSS pixels (at a device scale
	// factor of 1); 1280 and 900 when 0.
	Width, Height int
}

const (
	defaultOpenTimeout = 30 * time.Second
	// callTimeout bounds each command of Eval, Count and Screenshot.
	callTimeout = 30 * time.Second
	// settle is the time given to the page after its load event, for the
	// console messages of its last scripts and timers.
	settle = 200 * time.Millisecond
)

// Page is a file opened in its own headless Chromium. Its methods may be
// called from several goroutines.
type Page struct {
	cmd        *exec.Cmd
	toChrome   *os.File // our end of the pipe of Chromium's fd 3
	fromChrome *os.File // our end of the pipe of Chromium's fd 4
	dir        string   // the user-data-dir
	file       string   // the page's absolute path
	url        string   // its file:// URL
	opt        Options
	stderr     *tailBuffer
	exited     chan struct{} // closed when cmd.Wait has returned
	read       chan struct{} // closed when the reader has stopped
	stderrDone chan struct{} // closed when all of Chromium's stderr is in stderr

	writeMu sync.Mutex // one message at a time on the pipe

	mu       sync.Mutex
	nextID   int
	pending  map[int]chan reply
	readErr  error           // why the reader stopped
	session  string          // the page target's sessionId
	loaded   map[string]bool // loaderIds whose load event came
	errs     []string
	requests []string
	seen     map[string]bool // of requests

	closeOnce sync.Once
	closeErr  error
}

type reply struct {
	result json.RawMessage
	err    error
}

// message is any message from Chromium: a reply (ID set) or an event.
type message struct {
	ID        int             `json:"id"`
	Method    string          `json:"method"`
	Params    json.RawMessage `json:"params"`
	Result    json.RawMessage `json:"result"`
	Error     *cdpError       `json:"error"`
	SessionID string          `json:"sessionId"`
}

type cdpError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    string `json:"data"`
}

func (e *cdpError) Error() string {
	if e.Data != "" {
		return fmt.Sprintf("%s (%d): %s", e.Message, e.Code, e.Data)
	}
	return fmt.Sprintf("%s (%d)", e.Message, e.Code)
}

// Open starts a headless Chromium, opens file (a local path) in it as a
// file:// URL and waits for the page's load event, then a further 200 ms
// for late console messages. It gives up at ctx's deadline, or after 30 s
// if ctx has none. ctx bounds Open only: the Page lives until Close.
func Open(ctx context.Context, file string, opt Options) (*Page, error) {
	if opt.Width <= 0 {
		opt.Width = 1280
	}
	if opt.Height <= 0 {
		opt.Height = 900
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultOpenTimeout)
		defer cancel()
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, fmt.Errorf("browser: %w", err)
	}
	if fi, err := os.Stat(abs); err != nil {
		return nil, fmt.Errorf("browser: %w", err)
	} else if fi.IsDir() {
		return nil, fmt.Errorf("browser: %s is a directory", abs)
	}
	u := (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String()
	bin := Path()
	if bin == "" {
		return nil, errors.New("browser: no Chromium found (chromium, chromium-browser or google-chrome)")
	}
	p, err := start(bin, abs, u, opt)
	if err != nil {
		return nil, err
	}
	if err := p.open(ctx); err != nil {
		p.Close()
		return nil, fmt.Errorf("browser: opening %s: %w%s", p.url, err, p.stderrTail())
	}
	return p, nil
}

// chromiumFlags are Chromium's flags: headless, driven over the pipes of
// fds 3 and 4, with its profile in dir, reaching no network.
func chromiumFlags(dir string, opt Options) []string {
	return []string{
		"--headless",
		"--remote-debugging-pipe",
		"--no-sandbox",
		"--disable-gpu",
		"--disable-quic",
		"--no-first-run",
		"--no-default-browser-check",
		"--disable-background-networking",
		"--disable-component-update",
		"--disable-sync",
		"--disable-default-apps",
		"--disable-extensions",
		"--disable-breakpad",
		"--disable-dev-shm-usage",
		"--hide-scrollbars",
		"--mute-audio",
		"--password-store=basic",
		// No name resolves, not even an IP address: every request to a
		// host fails at once.
		"--host-resolver-rules=MAP * ~NOTFOUND",
		"--user-data-dir=" + dir,
		fmt.Sprintf("--window-size=%d,%d", opt.Width, opt.Height),
		"about:blank",
	}
}

// start starts Chromium in a process group of its own, with a fresh
// user-data-dir, and the reader of its replies.
func start(bin, file, pageURL string, opt Options) (*Page, error) {
	dir, err := os.MkdirTemp("", "farm-chromium-")
	if err != nil {
		return nil, fmt.Errorf("browser: %w", err)
	}
	// Chromium's fd 3 is the read end of inR, its fd 4 the write end of outW.
	inR, inW, err := os.Pipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("browser: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("browser: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("browser: %w", err)
	}
	cmd := exec.Command(bin, chromiumFlags(dir, opt)...)
	cmd.Dir = dir
	// Chromium's crash handler (chrome_crashpad_handler, in a session of
	// its own) keeps its database under $XDG_CONFIG_HOME/chromium, not the
	// user-data-dir: in dir too, which Close removes.
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+dir)
	cmd.Stdout = errW
	cmd.Stderr = errW
	cmd.ExtraFiles = []*os.File{inR, outW}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &Page{
		cmd:        cmd,
		toChrome:   inW,
		fromChrome: outR,
		dir:        dir,
		file:       file,
		url:        pageURL,
		opt:        opt,
		stderr:     &tailBuffer{max: 64 << 10},
		exited:     make(chan struct{}),
		read:       make(chan struct{}),
		stderrDone: make(chan struct{}),
		pending:    map[int]chan reply{},
		loaded:     map[string]bool{},
		seen:       map[string]bool{},
	}
	err = cmd.Start()
	// Chromium's ends are its own now (or nobody's).
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("browser: starting %s: %w", bin, err)
	}
	go func() {
		io.Copy(p.stderr, errR)
		errR.Close()
		close(p.stderrDone)
	}()
	go func() {
		cmd.Wait()
		close(p.exited)
	}()
	go p.readLoop()
	return p, nil
}

// open creates a tab, attaches to it, enables the domains whose events are
// kept, navigates to the file and waits for its load.
func (p *Page) open(ctx context.Context) error {
	var target struct {
		TargetID string `json:"targetId"`
	}
	if err := p.call(ctx, "", "Target.createTarget", obj{"url": "about:blank"}, &target); err != nil {
		return err
	}
	var attached struct {
		SessionID string `json:"sessionId"`
	}
	if err := p.call(ctx, "", "Target.attachToTarget", obj{"targetId": target.TargetID, "flatten": true}, &attached); err != nil {
		return err
	}
	p.mu.Lock()
	p.session = attached.SessionID
	p.mu.Unlock()
	s := attached.SessionID
	for _, c := range []struct {
		method string
		params obj
	}{
		{"Runtime.enable", nil},
		{"Log.enable", nil},
		{"Network.enable", nil},
		{"Page.enable", nil},
		{"Page.setLifecycleEventsEnabled", obj{"enabled": true}},
		{"Emulation.setDeviceMetricsOverride", obj{"width": p.opt.Width, "height": p.opt.Height, "deviceScaleFactor": 1, "mobile": false}},
	} {
		if err := p.call(ctx, s, c.method, c.params, nil); err != nil {
			return err
		}
	}
	var nav struct {
		FrameID   string `json:"frameId"`
		LoaderID  string `json:"loaderId"`
		ErrorText string `json:"errorText"`
	}
	if err := p.call(ctx, s, "Page.navigate", obj{"url": p.url}, &nav); err != nil {
		return err
	}
	if nav.ErrorText != "" {
		return fmt.Errorf("Page.navigate: %s", nav.ErrorText)
	}
	// The load event of this navigation: Page.lifecycleEvent "load" with its
	// loaderId (Page.loadEventFired names no loader, and could be the one of
	// about:blank).
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		p.mu.Lock()
		loaded, readErr := p.loaded[nav.LoaderID], p.readErr
		p.mu.Unlock()
		if loaded {
			break
		}
		if readErr != nil {
			return fmt.Errorf("waiting for the load event: %w", readErr)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the load event: %w", ctx.Err())
		case <-tick.C:
		}
	}
	select {
	case <-ctx.Done():
	case <-time.After(settle):
	}
	return nil
}

type obj = map[string]any

// call sends a command (to the browser when session is "", else to that
// session) and decodes its result into out unless out is nil.
func (p *Page) call(ctx context.Context, session, method string, params any, out any) error {
	ch := make(chan reply, 1)
	p.mu.Lock()
	if p.readErr != nil {
		err := p.readErr
		p.mu.Unlock()
		return fmt.Errorf("%s: %w", method, err)
	}
	p.nextID++
	id := p.nextID
	p.pending[id] = ch
	p.mu.Unlock()
	forget := func() {
		p.mu.Lock()
		delete(p.pending, id)
		p.mu.Unlock()
	}

	m := struct {
		ID        int    `json:"id"`
		Method    string `json:"method"`
		Params    any    `json:"params,omitempty"`
		SessionID string `json:"sessionId,omitempty"`
	}{id, method, params, session}
	b, err := json.Marshal(m)
	if err != nil {
		forget()
		return fmt.Errorf("%s: %w", method, err)
	}
	p.writeMu.Lock()
	_, err = p.toChrome.Write(append(b, 0))
	p.writeMu.Unlock()
	if err != nil {
		forget()
		return fmt.Errorf("%s: writing to Chromium: %w", method, err)
	}
	select {
	case r := <-ch:
		if r.err != nil {
			return fmt.Errorf("%s: %w", method, r.err)
		}
		if out != nil {
			if err := json.Unmarshal(r.result, out); err != nil {
				return fmt.Errorf("%s: decoding the result: %w", method, err)
			}
		}
		return nil
	case <-ctx.Done():
		forget()
		return fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

// readLoop reads Chromium's messages until the pipe ends, hands replies to
// their callers and keeps the events of the page's session.
func (p *Page) readLoop() {
	defer close(p.read)
	r := bufio.NewReaderSize(p.fromChrome, 1<<16)
	var err error
	for {
		var b []byte
		b, err = r.ReadBytes(0)
		if err != nil {
			break
		}
		var m message
		if err := json.Unmarshal(b[:len(b)-1], &m); err != nil {
			continue // not CDP; nothing to do with it
		}
		if m.ID != 0 {
			p.mu.Lock()
			ch := p.pending[m.ID]
			delete(p.pending, m.ID)
			p.mu.Unlock()
			if ch != nil {
				r := reply{result: m.Result}
				if m.Error != nil {
					r.err = m.Error
				}
				ch <- r
			}
			continue
		}
		p.event(m)
	}
	if err == io.EOF {
		err = errors.New("Chromium closed the DevTools pipe (it exited?)")
	}
	p.mu.Lock()
	p.readErr = err
	pending := p.pending
	p.pending = map[int]chan reply{}
	p.mu.Unlock()
	for _, ch := range pending {
		ch <- reply{err: err}
	}
}

// remoteObject is a CDP Runtime.RemoteObject, as much of it as is used.
type remoteObject struct {
	Type                string          `json:"type"`
	Subtype             string          `json:"subtype"`
	Value               json.RawMessage `json:"value"`
	UnserializableValue string          `json:"unserializableValue"`
	Description         string          `json:"description"`
	Preview             *struct {
		Overflow   bool `json:"overflow"`
		Properties []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Value string `json:"value"`
		} `json:"properties"`
	} `json:"preview"` // of an object logged by the console
}

// text is o as console.log would print it, on one line.
func (o remoteObject) text() string {
	switch {
	case o.Type == "string":
		var s string
		if json.Unmarshal(o.Value, &s) == nil {
			return s
		}
	case o.UnserializableValue != "":
		return o.UnserializableValue
	case o.Type == "undefined":
		return "undefined"
	case o.Preview != nil && (o.Subtype == "" || o.Subtype == "array"):
		// {a: 1, b: "x"}, [1, 2], Thing {a: 1}
		var b strings.Builder
		lb, rb := "{", "}"
		if o.Subtype == "array" {
			lb, rb = "[", "]"
		} else if o.Description != "Object" {
			b.WriteString(o.Description + " ")
		}
		b.WriteString(lb)
		for i, p := range o.Preview.Properties {
			if i > 0 {
				b.WriteString(", ")
			}
			v := p.Value
			if p.Type == "string" {
				v = strconv.Quote(v)
			}
			if o.Subtype == "array" {
				b.WriteString(v)
			} else {
				b.WriteString(p.Name + ": " + v)
			}
		}
		if o.Preview.Overflow {
			b.WriteString(", …")
		}
		b.WriteString(rb)
		return b.String()
	case o.Description != "":
		return o.Description
	case len(o.Value) > 0:
		return string(o.Value)
	}
	return o.Type
}

type callFrame struct {
	URL          string `json:"url"`
	LineNumber   int    `json:"lineNumber"`
	ColumnNumber int    `json:"columnNumber"`
}

// where is " (url:line:column)", 1-based, or "" without a url.
func where(u string, line, col int) string {
	if u == "" {
		return ""
	}
	return fmt.Sprintf(" (%s:%d:%d)", u, line+1, col+1)
}

// oneLine joins the lines of s with " | ".
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	lines := strings.Split(s, "\n")
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	return strings.Join(lines, " | ")
}

// event keeps what the page's session reports: console errors, exceptions,
// log errors and requests (each by a method of its own below), and loads.
func (p *Page) event(m message) {
	p.mu.Lock()
	session := p.session
	p.mu.Unlock()
	if session == "" || m.SessionID != session {
		return
	}
	switch m.Method {
	case "Runtime.consoleAPICalled":
		p.consoleCalled(m.Params)
	case "Runtime.exceptionThrown":
		p.exceptionThrown(m.Params)
	case "Log.entryAdded":
		p.logEntryAdded(m.Params)
	case "Network.requestWillBeSent", "Network.webSocketCreated":
		p.requestSent(m.Params)
	case "Page.lifecycleEvent":
		var e struct {
			LoaderID string `json:"loaderId"`
			Name     string `json:"name"`
		}
		if json.Unmarshal(m.Params, &e) == nil && e.Name == "load" {
			p.mu.Lock()
			p.loaded[e.LoaderID] = true
			p.mu.Unlock()
		}
	}
}

// consoleCalled keeps a console.error or console.assert of the page as an
// error, with where it was called.
func (p *Page) consoleCalled(params json.RawMessage) {
	var e struct {
		Type       string         `json:"type"`
		Args       []remoteObject `json:"args"`
		StackTrace *struct {
			CallFrames []callFrame `json:"callFrames"`
		} `json:"stackTrace"`
	}
	if json.Unmarshal(params, &e) != nil || (e.Type != "error" && e.Type != "assert") {
		return
	}
	args := make([]string, len(e.Args))
	for i, a := range e.Args {
		args[i] = a.text()
	}
	line := "console." + e.Type + ": " + strings.Join(args, " ")
	if e.StackTrace != nil && len(e.StackTrace.CallFrames) > 0 {
		f := e.StackTrace.CallFrames[0]
		line += where(f.URL, f.LineNumber, f.ColumnNumber)
	}
	p.addError(oneLine(line))
}

// exceptionThrown keeps an uncaught exception of the page as an error.
func (p *Page) exceptionThrown(params json.RawMessage) {
	var e struct {
		ExceptionDetails struct {
			Text         string        `json:"text"`
			URL          string        `json:"url"`
			LineNumber   int           `json:"lineNumber"`
			ColumnNumber int           `json:"columnNumber"`
			Exception    *remoteObject `json:"exception"`
		} `json:"exceptionDetails"`
	}
	if json.Unmarshal(params, &e) != nil {
		return
	}
	d := e.ExceptionDetails
	what := d.Text
	if d.Exception != nil {
		// The description's first line ("Error: kaboom"); the rest is
		// the stack.
		desc, _, _ := strings.Cut(d.Exception.text(), "\n")
		what += " " + desc
	}
	p.addError(oneLine("exception: " + what + where(d.URL, d.LineNumber, d.ColumnNumber)))
}

// logEntryAdded keeps an entry of the browser's log at level error (a
// failed load, a blocked request, …) as an error.
func (p *Page) logEntryAdded(params json.RawMessage) {
	var e struct {
		Entry struct {
			Source     string `json:"source"`
			Level      string `json:"level"`
			Text       string `json:"text"`
			URL        string `json:"url"`
			LineNumber int    `json:"lineNumber"`
		} `json:"entry"`
	}
	if json.Unmarshal(params, &e) != nil || e.Entry.Level != "error" {
		return
	}
	line := "log." + e.Entry.Source + ": " + e.Entry.Text
	if e.Entry.URL != "" {
		line += " (" + e.Entry.URL + ")"
	}
	p.addError(oneLine(line))
}

// requestSent keeps, once each, the URL of a request or WebSocket of the
// page other than the page itself and data: URLs.
func (p *Page) requestSent(params json.RawMessage) {
	var e struct {
		Request struct {
			URL string `json:"url"`
		} `json:"request"`
		URL string `json:"url"` // of a WebSocket
	}
	if json.Unmarshal(params, &e) != nil {
		return
	}
	u := e.Request.URL
	if u == "" {
		u = e.URL
	}
	if u == "" {
		return
	}
	if u == p.url || strings.HasPrefix(u, "data:") {
		return
	}
	if pu, err := url.Parse(u); err == nil && pu.Scheme == "file" && pu.Path == p.file {
		return // the page itself, escaped otherwise
	}
	p.mu.Lock()
	if !p.seen[u] {
		p.seen[u] = true
		p.requests = append(p.requests, u)
	}
	p.mu.Unlock()
}

func (p *Page) addError(line string) {
	p.mu.Lock()
	p.errs = append(p.errs, line)
	p.mu.Unlock()
}

// Eval evaluates the JavaScript expression expr in the page, awaiting it if
// it is a promise, and decodes its value (as JSON) into out unless out is
// nil. An exception is an error that names it.
func (p *Page) Eval(expr string, out any) error {
	what := strconv.QuoteToASCII(expr)
	if len(what) > 80 {
		what = what[:70] + "…" + what[len(what)-8:]
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	var r struct {
		Result           remoteObject `json:"result"`
		ExceptionDetails *struct {
			Text      string        `json:"text"`
			Exception *remoteObject `json:"exception"`
		} `json:"exceptionDetails"`
	}
	p.mu.Lock()
	s := p.session
	p.mu.Unlock()
	err := p.call(ctx, s, "Runtime.evaluate", obj{"expression": expr, "returnByValue": true, "awaitPromise": true}, &r)
	if err != nil {
		return fmt.Errorf("browser: eval of %s: %w", what, err)
	}
	if d := r.ExceptionDetails; d != nil {
		msg := d.Text
		if d.Exception != nil {
			msg += " " + d.Exception.text()
		}
		return fmt.Errorf("browser: eval of %s: %s", what, oneLine(msg))
	}
	if out == nil {
		return nil
	}
	if len(r.Result.Value) == 0 {
		return fmt.Errorf("browser: eval of %s: the value (%s) has no JSON form", what, r.Result.text())
	}
	if err := json.Unmarshal(r.Result.Value, out); err != nil {
		return fmt.Errorf("browser: eval of %s: %w", what, err)
	}
	return nil
}

// Count is the number of the page's elements that match the CSS selector.
func (p *Page) Count(selector string) (int, error) {
	q, _ := json.Marshal(selector)
	var n int
	err := p.Eval("document.querySelectorAll("+string(q)+").length", &n)
	return n, err
}

// Screenshot writes a PNG of the whole page, beyond the viewport: as wide
// as the viewport (or the content, if wider) and as high as the content.
func (p *Page) Screenshot(path string) error {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	p.mu.Lock()
	s := p.session
	p.mu.Unlock()
	type size struct {
		Width  float64 `json:"width"`
		Height float64 `json:"height"`
	}
	var m struct {
		CSSContentSize *size `json:"cssContentSize"`
		ContentSize    *size `json:"contentSize"`
	}
	if err := p.call(ctx, s, "Page.getLayoutMetrics", nil, &m); err != nil {
		return fmt.Errorf("browser: screenshot: %w", err)
	}
	c := m.CSSContentSize
	if c == nil {
		c = m.ContentSize
	}
	if c == nil {
		return errors.New("browser: screenshot: Page.getLayoutMetrics gave no content size")
	}
	w := math.Max(math.Ceil(c.Width), float64(p.opt.Width))
	h := math.Max(math.Ceil(c.Height), 1)
	var shot struct {
		Data string `json:"data"`
	}
	err := p.call(ctx, s, "Page.captureScreenshot", obj{
		"format":                "png",
		"captureBeyondViewport": true,
		"clip":                  obj{"x": 0, "y": 0, "width": w, "height": h, "scale": 1},
	}, &shot)
	if err != nil {
		return fmt.Errorf("browser: screenshot: %w", err)
	}
	png, err := base64.StdEncoding.DecodeString(shot.Data)
	if err != nil {
		return fmt.Errorf("browser: screenshot: %w", err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		return fmt.Errorf("browser: screenshot: %w", err)
	}
	return nil
}

// Errors are the page's errors so far, one line each: console.error and
// failed console.assert calls, uncaught exceptions, and Chromium's own log
// entries of level error (a resource that failed to load, say).
func (p *Page) Errors() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.errs...)
}

// Requests are the URLs the page requested so far, each once, in order:
// every request other than of the page's own file:// URL and of data: URLs.
func (p *Page) Requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.requests...)
}

// Close closes Chromium (Browser.close, then SIGKILL to its process group
// if it has not exited within 5 s), makes sure none of its processes is
// left, and removes its user-data-dir. It may be called more than once.
func (p *Page) Close() error {
	p.closeOnce.Do(func() { p.closeErr = p.close() })
	return p.closeErr
}

func (p *Page) close() error {
	select {
	case <-p.exited:
	default:
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		p.call(ctx, "", "Browser.close", nil, nil)
		cancel()
		select {
		case <-p.exited:
		case <-time.After(5 * time.Second):
		}
	}
	pgid := p.cmd.Process.Pid
	// Whatever is left of the group (all of it if Chromium did not exit).
	syscall.Kill(-pgid, syscall.SIGKILL)
	<-p.exited
	// The helpers that outlived the main process, and its crash handlers
	// (which exit on their own, in a while): gone in a moment. (Not when
	// kill -0 of the group fails: zombies may stay for seconds when PID 1
	// is slow to reap them.)
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
		left := leftovers(pgid, p.dir)
		if len(left) == 0 {
			break
		}
		syscall.Kill(-pgid, syscall.SIGKILL)
		for _, pid := range left {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond)
	}
	select { // for the errors of Open: all that Chromium said
	case <-p.stderrDone:
	case <-time.After(time.Second):
	}
	p.toChrome.Close()
	p.fromChrome.Close() // ends the reader's Read if it is still in one
	<-p.read
	// The directory of Chromium's singleton socket, in $TMPDIR: left there
	// when Chromium was killed.
	if t, err := os.Readlink(filepath.Join(p.dir, "SingletonSocket")); err == nil {
		if d := filepath.Dir(t); strings.HasPrefix(filepath.Base(d), "org.chromium.Chromium.") {
			os.RemoveAll(d)
		}
	}
	var err error
	for i := 0; i < 20; i++ {
		if err = os.RemoveAll(p.dir); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("browser: removing the user-data-dir: %w", err)
	}
	return nil
}

// leftovers lists the processes, other than zombies, of process group
// pgid or whose command line holds dir, from /proc (none without /proc).
func leftovers(pgid int, dir string) []int {
	var pids []int
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		// "pid (comm) state ppid pgrp ...", where comm may hold anything.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if f[2] == strconv.Itoa(pgid) {
			pids = append(pids, pid)
			continue
		}
		if cmdline, err := os.ReadFile("/proc/" + d.Name() + "/cmdline"); err == nil && bytes.Contains(cmdline, []byte(dir)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// stderrTail is the end of what Chromium wrote on stderr, for errors.
func (p *Page) stderrTail() string {
	s := strings.TrimSpace(p.stderr.String())
	if s == "" {
		return "; Chromium wrote nothing on stderr"
	}
	lines := strings.Split(s, "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return "; the end of Chromium's stderr:\n  " + strings.Join(lines, "\n  ")
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   bytes.Buffer
}

func (t *tailBuffer) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b.Write(b)
	if over := t.b.Len() - t.max; over > 0 {
		t.b.Next(over)
	}
	return len(b), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.b.String()
}
