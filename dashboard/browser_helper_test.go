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
	// as the context it ran with: no timeout here.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", chromiumPath, err)
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

// waitFor waits until the JavaScript condition holds.
func (b *browser) waitFor(what, cond string, timeout time.Duration) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout+5*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](cond, chromedp.WithPollingTimeout(timeout), chromedp.WithPollingInterval(20*time.Millisecond))); err != nil {
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

// checkClean fails the test if the page threw or logged errors (a CSP
// violation shows up as a console error).
func (b *browser) checkClean() {
	b.t.Helper()
	b.mu.Lock()
	n := len(b.exceptions)
	var errs []string
	for _, c := range b.console {
		if strings.HasPrefix(c, "error") {
			errs = append(errs, c)
		}
	}
	b.mu.Unlock()
	if n > 0 || len(errs) > 0 {
		b.t.Errorf("the page reported problems:%s", b.problems())
	}
}
