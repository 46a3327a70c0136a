package replay_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/mcptape/mcptape/replay"
)

// chromiumPath is Debian's chromium package, which .ci/run installs.
const chromiumPath = "/usr/bin/chromium"

// corsPage is a page of another origin whose script talks to an MCP
// server with fetch: initialize (reading Mcp-Session-Id, which the server
// must expose), then notifications/initialized and a tool call with the
// session's headers (each preflighted: custom headers). It reports what
// it got, or the error fetch threw.
const corsPage = `<!doctype html><meta charset="utf-8"><script>
async function talk(url) {
  const out = [];
  try {
    const h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"};
    let r = await fetch(url, {method: "POST", headers: h, body: JSON.stringify({jsonrpc: "2.0", id: 1, method: "initialize",
      params: {protocolVersion: "2025-11-25", capabilities: {}, clientInfo: {name: "browser", version: "1"}}})});
    const sid = r.headers.get("mcp-session-id");
    out.push("initialize " + r.status + " session id " + (sid ? "read" : "hidden"));
    await r.text();
    h["Mcp-Session-Id"] = sid;
    h["Mcp-Protocol-Version"] = "2025-11-25";
    r = await fetch(url, {method: "POST", headers: h, body: JSON.stringify({jsonrpc: "2.0", method: "notifications/initialized"})});
    out.push("initialized " + r.status);
    r = await fetch(url, {method: "POST", headers: h, body: JSON.stringify({jsonrpc: "2.0", id: 2, method: "tools/call",
      params: {name: "echo", arguments: {message: "from a browser"}}})});
    const text = await r.text();
    out.push("echo " + r.status + " " + (text.includes("Echo: from a browser") ? "answered" : "unanswered"));
  } catch (e) {
    out.push("error: " + e.message);
  }
  return out.join("; ");
}
</script>`

// A browser client on another origin (a preflighted fetch, the session
// id read from a CORS-exposed header, a 202 it must be allowed to read)
// works against the replay of server-everything as it did through the
// recorder: the replay answers the CORS preflight and puts the recorded
// CORS headers on every response, the 202s included.
func TestBrowserClientOfAnotherOrigin(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv("MCPTAPE_REQUIRE_BROWSER") == "1" {
			t.Fatalf("%s is missing and MCPTAPE_REQUIRE_BROWSER=1: install Debian's chromium package", chromiumPath)
		}
		t.Skipf("this test needs %s (Debian's chromium package)", chromiumPath)
	}
	ev := everything(t, "")
	page := liveServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, corsPage)
	}))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), chromedp.ExecPath(chromiumPath), chromedp.Headless,
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()))
	defer cancelA()
	bctx, cancelB := chromedp.NewContext(actx)
	defer cancelB()
	// The first action starts the browser, which lives as long as the
	// context it ran with: no timeout on that context, but a start that
	// takes over a minute is given up (and the browser ended).
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(bctx) }()
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("starting %s: %v", chromiumPath, err)
		}
	case <-time.After(time.Minute):
		cancelB()
		cancelA()
		t.Fatalf("%s did not start within a minute", chromiumPath)
	}
	talk := func(mcpURL string) string {
		ctx, cancel := context.WithTimeout(bctx, 30*time.Second)
		defer cancel()
		// The page is served on localhost, the server on 127.0.0.1: two
		// origins.
		pageURL := strings.Replace(page.URL, "127.0.0.1", "localhost", 1)
		if _, err := chromedp.Run(ctx, chromedp.Navigate(pageURL)); err != nil {
			t.Fatalf("loading the page: %v", err)
		}
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf("talk(%q)", mcpURL), chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("the page's script: %v", err)
		}
		return got
	}
	want := "initialize 200 session id read; initialized 202; echo 200 answered"
	var recorded string
	tape := recordTape(t, ev.URL(), func(px string) { recorded = talk(px + "/mcp") })
	if recorded != want {
		t.Fatalf("the browser through the recorder: %s; want %s", recorded, want)
	}
	ev.Close()
	s, hs := serve(t, tape, &replay.ServerOptions{Timing: replay.TimingFast})
	if got := talk(hs.URL + "/mcp"); got != want {
		t.Errorf("the browser against the replay: %s; want %s\n%+v", got, want, s.Report())
	}
}
