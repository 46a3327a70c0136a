package dashboard_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// chromiumPath is Debian's chromium package, which .ci/run installs.
const chromiumPath = "/usr/bin/chromium"

// browser is a headless Chromium tab driven with chromedp. It records the
// page's uncaught exceptions and console errors, and saves screenshots as
// test artifacts.
type browser struct {
	t         testing.TB
	ctx       context.Context
	artifacts string

	mu         sync.Mutex
	exceptions []string
	console    []string
	loggedIn   map[string]bool // dashboards whose token cookie the browser holds
	// logged are the browser's own error reports (an invalid pattern, a
	// CSP violation, a failed load), which pages do not log themselves.
	logged []string
	// allowed are patterns of logged errors a test provokes on purpose
	// (a 400 answer the page shows).
	allowed []*regexp.Regexp
}

// newBrowser starts Chromium, or skips the test when it is not installed
// (fails instead when MCPTAPE_REQUIRE_BROWSER=1, as in CI).
func newBrowser(t testing.TB) *browser {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv("MCPTAPE_REQUIRE_BROWSER") == "1" {
			t.Fatalf("%s is missing and MCPTAPE_REQUIRE_BROWSER=1: install Debian's chromium package (apt-get install chromium)", chromiumPath)
		}
		t.Skipf("browser tests need %s (Debian's chromium package: apt-get install chromium); skipped", chromiumPath)
	}
	// Screenshots are test artifacts: they outlive the test, in
	// $MCPTAPE_ARTIFACTS (.ci/run sets ./artifacts) or else in
	// $TMPDIR/mcptape-artifacts.
	b := &browser{t: t, artifacts: os.Getenv("MCPTAPE_ARTIFACTS"), loggedIn: map[string]bool{}}
	if b.artifacts == "" {
		b.artifacts = filepath.Join(os.TempDir(), "mcptape-artifacts")
	}
	b.artifacts = filepath.Join(b.artifacts, "dashboard")
	if err := os.MkdirAll(b.artifacts, 0o755); err != nil {
		t.Fatal(err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1000),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx, chromedp.WithListener(b.listen))
	b.ctx = ctx
	t.Cleanup(func() { cancelC(); cancelA() })
	// The first action starts the browser, and the browser lives as long
	// as the context it ran with: no timeout on that context, but a start
	// that takes over a minute is given up (and the browser ended).
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(ctx) }()
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("starting %s: %v", chromiumPath, err)
		}
	case <-time.After(time.Minute):
		cancelC()
		cancelA()
		t.Fatalf("%s did not start within a minute", chromiumPath)
	}
	return b
}

func (b *browser) listen(ev any) {
	switch ev := ev.(type) {
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		msg := d.Text
		if d.Exception != nil && d.Exception.Description != "" {
			msg += " " + d.Exception.Description
		}
		b.mu.Lock()
		b.exceptions = append(b.exceptions, fmt.Sprintf("%s (%s:%d)", msg, d.URL, d.LineNumber+1))
		b.mu.Unlock()
	case *cdplog.EventEntryAdded:
		e := ev.Entry
		if e.Level != cdplog.EntryLevelError {
			return
		}
		b.mu.Lock()
		b.logged = append(b.logged, fmt.Sprintf("%s: %s (%s)", e.Source, e.Text, e.URL))
		b.mu.Unlock()
	case *runtime.EventConsoleAPICalled:
		if ev.Type != runtime.ConsoleAPICalledTypeError && ev.Type != runtime.ConsoleAPICalledTypeWarning {
			return
		}
		var parts []string
		for _, a := range ev.Args {
			if a.Description != "" {
				parts = append(parts, a.Description)
			} else {
				parts = append(parts, strings.Trim(string(a.Value), `"`))
			}
		}
		b.mu.Lock()
		b.console = append(b.console, string(ev.Type)+": "+strings.Join(parts, " "))
		b.mu.Unlock()
	}
}

// run runs actions with a timeout, failing the test on error.
func (b *browser) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.screenshot("failed-" + what)
		b.t.Fatalf("%s: %v%s", what, err, b.problems())
	}
}

// eval evaluates a JavaScript expression.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluating %s: %v%s", expr, err, b.problems())
	}
	return v
}

// evalAsync evaluates a JavaScript expression that gives a promise, and
// waits for its value.
func evalAsync[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("evaluating %s: %v%s", expr, err, b.problems())
	}
	return v
}

// waitFor waits until the JavaScript condition holds.
func (b *browser) waitFor(what, cond string, timeout time.Duration) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout+5*time.Second)
	defer cancel()
	deadline := time.Now().Add(timeout)
	for {
		_, err := chromedp.Run(ctx, chromedp.Poll[bool](cond, chromedp.WithPollingTimeout(time.Until(deadline)), chromedp.WithPollingInterval(20*time.Millisecond)))
		if err == nil {
			return
		}
		// A navigation that was still settling replaced the page's
		// JavaScript context under the poll: poll the new one.
		if gone := strings.Contains(err.Error(), "Cannot find context with specified id") || strings.Contains(err.Error(), "Execution context was destroyed"); gone && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond) // for the new context: Chromium tells this poll of no event for it
			continue
		}
		b.screenshot("failed-" + what)
		b.t.Fatalf("waiting for %s (%s): %v%s", what, cond, err, b.problems())
	}
}

// open navigates to url. The first time it opens a test dashboard, it goes
// through the address mcptape prints, with ?token=, which trades the
// token for the cookie the rest of the visit carries.
func (b *browser) open(url string) {
	b.t.Helper()
	if tok := tokenOf(url); tok != "" {
		base := url[:len("http://")+strings.IndexByte(url[len("http://"):]+"/", '/')]
		if !b.loggedIn[base] {
			b.run("log in to "+base, chromedp.Navigate(base+"/?token="+tok))
			b.loggedIn[base] = true
		}
	}
	b.run("open "+url, chromedp.Navigate(url))
}

func (b *browser) click(sel string) {
	b.t.Helper()
	b.run("click "+sel, chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible))
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// maxFullScreenshot is the tallest page, in CSS pixels, that a screenshot
// takes whole.
const maxFullScreenshot = 6000

// screenshot saves a PNG of the whole page as a test artifact.
func (b *browser) screenshot(name string) string {
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	// A very tall page (a 5 MB string shown in full) makes a whole-page
	// image that can take Chromium longer than the timeout and cost the
	// tab: take what is on screen then.
	height, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.documentElement.scrollHeight`))
	var png []byte
	if err == nil && height <= maxFullScreenshot {
		png, err = chromedp.Run(ctx, chromedp.FullScreenshot(100))
	}
	if err != nil || png == nil {
		png, err = chromedp.Run(ctx, chromedp.CaptureScreenshot())
	}
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return ""
	}
	path := filepath.Join(b.artifacts, unsafeName.ReplaceAllString(b.t.Name()+"-"+name, "_")+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return ""
	}
	b.t.Logf("screenshot: %s", path)
	return path
}

func (b *browser) problems() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var s string
	if len(b.exceptions) > 0 {
		s += "\npage exceptions:\n  " + strings.Join(b.exceptions, "\n  ")
	}
	if len(b.console) > 0 {
		s += "\nconsole:\n  " + strings.Join(b.console, "\n  ")
	}
	return s
}

// allow lets a logged error matching pattern pass checkClean (an API
// answer of 400 or 404 that a test provokes and the page shows).
func (b *browser) allow(pattern string) {
	b.mu.Lock()
	b.allowed = append(b.allowed, regexp.MustCompile(pattern))
	b.mu.Unlock()
}

// checkClean fails the test if the page threw, logged errors, or the
// browser reported one (an invalid pattern attribute, a CSP violation, a
// failed load): every page must be free of console errors. It clears
// what it checked, so each check is about what came since the last.
func (b *browser) checkClean() {
	b.t.Helper()
	b.mu.Lock()
	var errs []string
	errs = append(errs, b.exceptions...)
	for _, c := range b.console {
		if strings.HasPrefix(c, "error") {
			errs = append(errs, c)
		}
	}
	for _, l := range b.logged {
		ok := false
		for _, re := range b.allowed {
			ok = ok || re.MatchString(l)
		}
		if !ok {
			errs = append(errs, l)
		}
	}
	b.exceptions, b.console, b.logged, b.allowed = nil, nil, nil, nil
	b.mu.Unlock()
	if len(errs) > 0 {
		b.t.Errorf("the page reported problems:\n  %s", strings.Join(errs, "\n  "))
	}
}

// settle waits for two animation frames: layout and paint are done.
func (b *browser) settle() {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`new Promise((ok) => requestAnimationFrame(() => requestAnimationFrame(() => ok(true))))`, chromedp.EvalAwaitPromise)); err != nil {
		b.t.Fatalf("waiting for a frame: %v%s", err, b.problems())
	}
}

// widths are the window widths every view is checked and shot at.
var widths = []int64{1400, 1000}

// resize sets the window's width (and a height of 1000).
func (b *browser) resize(width int64) {
	b.t.Helper()
	b.run(fmt.Sprintf("resize to %d", width), chromedp.EmulateViewport(width, 1000))
}

// shots takes a screenshot of the page at each of widths, named name-WIDTH,
// and checks that nothing is wider than the window; it leaves the window
// at the first width.
func (b *browser) shots(name string) {
	b.t.Helper()
	for _, w := range widths {
		b.resize(w)
		// Let layout settle after the resize.
		b.settle()
		if eval[bool](b, `document.body.innerText.includes('[object ')`) {
			b.t.Errorf("%s at %d px: the page shows [object …] where text should be", name, w)
		}
		if over := eval[int](b, `document.documentElement.scrollWidth - window.innerWidth`); over > 0 {
			b.screenshot(fmt.Sprintf("%s-%d-too-wide", name, w))
			b.t.Errorf("%s at %d px: the page is %d px wider than the window", name, w, over)
		}
		b.screenshot(fmt.Sprintf("%s-%d", name, w))
	}
	b.resize(widths[0])
}
