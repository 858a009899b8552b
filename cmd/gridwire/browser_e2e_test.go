//go:build e2e

package main

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// browser drives a real headless chromium over the DevTools protocol on a pipe
// (--remote-debugging-pipe: JSON messages ended by NUL on file descriptors 3 and 4), so
// a test clicks, types and takes screenshots as a person would see the page, with no
// library between it and the browser.
type browser struct {
	t       *testing.T
	cmd     *exec.Cmd
	send    io.WriteCloser
	session string

	mu      sync.Mutex
	nextID  int
	waiting map[int]chan cdpReply
	errors  []string // exceptions the page threw and console errors it logged
	closed  chan struct{}
}

type cdpReply struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// newBrowser starts chromium with a fresh profile and opens one page.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	toChrome, ours, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	theirs, fromChrome, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(chromium(t), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--hide-scrollbars", "--remote-debugging-pipe", "--user-data-dir="+t.TempDir(), "about:blank")
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	cmd.ExtraFiles = []*os.File{toChrome, fromChrome} // fd 3: commands in; fd 4: replies out
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	toChrome.Close()
	fromChrome.Close()
	b := &browser{t: t, cmd: cmd, send: ours, waiting: map[int]chan cdpReply{}, closed: make(chan struct{})}
	go b.read(theirs)
	t.Cleanup(b.close)
	var target struct {
		TargetID string `json:"targetId"`
	}
	b.call("", "Target.createTarget", map[string]any{"url": "about:blank"}, &target)
	var attached struct {
		SessionID string `json:"sessionId"`
	}
	b.call("", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &attached)
	b.session = attached.SessionID
	for _, domain := range []string{"Page.enable", "Runtime.enable"} {
		b.call(b.session, domain, nil, nil)
	}
	return b
}

func (b *browser) close() {
	_ = b.send.Close()
	done := make(chan struct{})
	go func() { _ = b.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = b.cmd.Process.Kill()
		<-done
	}
}

// read dispatches the browser's messages: replies to their callers, page errors to the
// list the test checks.
func (b *browser) read(r io.ReadCloser) {
	defer close(b.closed)
	defer r.Close()
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		msg, err := br.ReadBytes(0)
		if err != nil {
			return
		}
		var m struct {
			ID     int             `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
			cdpReply
		}
		if json.Unmarshal(msg[:len(msg)-1], &m) != nil {
			continue
		}
		b.mu.Lock()
		switch {
		case m.ID != 0:
			if ch := b.waiting[m.ID]; ch != nil {
				ch <- m.cdpReply
				delete(b.waiting, m.ID)
			}
		case m.Method == "Runtime.exceptionThrown":
			b.errors = append(b.errors, "exception: "+string(m.Params))
		case m.Method == "Runtime.consoleAPICalled" && strings.Contains(string(m.Params), `"type":"error"`):
			b.errors = append(b.errors, "console.error: "+string(m.Params))
		}
		b.mu.Unlock()
	}
}

// call sends one command and decodes its result into out.
func (b *browser) call(session, method string, params any, out any) {
	b.t.Helper()
	if err := b.try(session, method, params, out); err != nil {
		b.t.Fatal(err)
	}
}

// try is call that returns what went wrong.
func (b *browser) try(session, method string, params any, out any) error {
	b.mu.Lock()
	b.nextID++
	id := b.nextID
	ch := make(chan cdpReply, 1)
	b.waiting[id] = ch
	b.mu.Unlock()
	msg := map[string]any{"id": id, "method": method}
	if params != nil {
		msg["params"] = params
	}
	if session != "" {
		msg["sessionId"] = session
	}
	data, _ := json.Marshal(msg)
	if _, err := b.send.Write(append(data, 0)); err != nil {
		return fmt.Errorf("%s: %v", method, err)
	}
	select {
	case r := <-ch:
		if r.Error != nil {
			return fmt.Errorf("%s: %s", method, r.Error.Message)
		}
		if out != nil {
			if err := json.Unmarshal(r.Result, out); err != nil {
				return fmt.Errorf("%s: %v", method, err)
			}
		}
		return nil
	case <-b.closed:
		return fmt.Errorf("%s: the browser went away", method)
	case <-time.After(60 * time.Second):
		return fmt.Errorf("%s: no answer in 60s", method)
	}
}

// eval evaluates a JavaScript expression in the page and returns its value as JSON.
func (b *browser) eval(expr string) json.RawMessage {
	b.t.Helper()
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text string `json:"text"`
		} `json:"exceptionDetails"`
	}
	b.call(b.session, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}, &r)
	if r.ExceptionDetails != nil {
		b.t.Fatalf("evaluating %s: %s", expr, r.ExceptionDetails.Text)
	}
	return r.Result.Value
}

// size sets the viewport, a phone's when mobile.
func (b *browser) size(width, height int, mobile bool) {
	b.t.Helper()
	b.call(b.session, "Emulation.setDeviceMetricsOverride", map[string]any{"width": width, "height": height,
		"deviceScaleFactor": 1, "mobile": mobile}, nil)
}

// open loads url and waits until the page holds the selector.
func (b *browser) open(url, selector string) {
	b.t.Helper()
	b.call(b.session, "Page.navigate", map[string]any{"url": url}, nil)
	b.waitFor(selector)
}

// waitFor waits until document.querySelector(selector) finds an element.
func (b *browser) waitFor(selector string) {
	b.t.Helper()
	b.waitUntil(fmt.Sprintf("document.querySelector(%q) !== null", selector), selector)
}

// waitUntil waits until the JavaScript condition holds.
func (b *browser) waitUntil(cond, what string) {
	b.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	// Between two pages (a click on a link) the condition may throw or find no page:
	// that is "not yet".
	js := "(() => { try { return !!(" + cond + "); } catch (e) { return false; } })()"
	for {
		var r struct {
			Result struct {
				Value bool `json:"value"`
			} `json:"result"`
		}
		err := b.try(b.session, "Runtime.evaluate", map[string]any{"expression": js, "returnByValue": true}, &r)
		if err == nil && r.Result.Value {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("waited 30s for %s (%v); the page:\n%s", what, err, b.text("body"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// text is the visible text of the first element the selector finds.
func (b *browser) text(selector string) string {
	b.t.Helper()
	var s string
	_ = json.Unmarshal(b.eval(fmt.Sprintf("(document.querySelector(%q) || {innerText: ''}).innerText", selector)), &s)
	return s
}

// click clicks the middle of the element with the mouse, as a person would.
func (b *browser) click(selector string) {
	b.t.Helper()
	b.waitFor(selector)
	var at []float64
	js := fmt.Sprintf(`(() => { const e = document.querySelector(%q); e.scrollIntoView({block: "center"});
		const r = e.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()`, selector)
	if err := json.Unmarshal(b.eval(js), &at); err != nil || len(at) != 2 {
		b.t.Fatalf("click %s: no position (%v)", selector, err)
	}
	for _, typ := range []string{"mouseMoved", "mousePressed", "mouseReleased"} {
		b.call(b.session, "Input.dispatchMouseEvent", map[string]any{"type": typ, "x": at[0], "y": at[1],
			"button": "left", "clickCount": 1}, nil)
	}
}

// typeText types text into the focused element.
func (b *browser) typeText(text string) {
	b.t.Helper()
	b.call(b.session, "Input.insertText", map[string]any{"text": text}, nil)
}

// screenshot keeps what the page shows (all of it, not only the viewport) as a PNG
// under the artefacts directory, and returns its path.
func (b *browser) screenshot(name string) string {
	b.t.Helper()
	var metrics struct {
		CSSContentSize struct {
			Width, Height float64
		} `json:"cssContentSize"`
	}
	b.call(b.session, "Page.getLayoutMetrics", nil, &metrics)
	var shot struct {
		Data string `json:"data"`
	}
	b.call(b.session, "Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": true,
		"clip": map[string]any{"x": 0, "y": 0, "width": metrics.CSSContentSize.Width, "height": metrics.CSSContentSize.Height, "scale": 1}}, &shot)
	png, err := base64.StdEncoding.DecodeString(shot.Data)
	if err != nil {
		b.t.Fatal(err)
	}
	path := filepath.Join(artefacts(b.t), name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot %s (%d bytes)", path, len(png))
	return path
}

// pageErrors are the exceptions and console errors the page produced so far.
func (b *browser) pageErrors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.errors...)
}

// artefacts is where the web tests keep their screenshots: $GRIDWIRE_ARTEFACTS, else
// .artefacts/web at the top of the repository (ignored by git).
func artefacts(t *testing.T) string {
	dir := os.Getenv("GRIDWIRE_ARTEFACTS")
	if dir == "" {
		_, file, _, _ := runtime.Caller(0)
		dir = filepath.Join(filepath.Dir(file), "..", "..", ".artefacts", "web")
	} else {
		dir = filepath.Join(dir, "web")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// chromium returns Debian's chromium; the e2e suite installs it first
// (scripts/install-chromium.sh), so its absence is a failure, not a skip.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("chromium is not installed; scripts/install-chromium.sh installs it (.ci/e2e runs it)")
	return ""
}
