package dashboard_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/badgerstore"
	"github.com/mcptape/mcptape/dashboard"
	"github.com/mcptape/mcptape/fixtures/interop"
	"github.com/mcptape/mcptape/protocol"
	"github.com/mcptape/mcptape/proxy"
)

// TestBrowserInterop records the official TypeScript SDK client talking to
// @modelcontextprotocol/server-everything (both from npm) through the proxy,
// and opens every message of the session in Chromium: each is drawn by its
// view (sampling, form and URL elicitation, progress, roots, resources),
// none falls back to "not shown", none shows [object …], and no page
// reports a console error.
func TestBrowserInterop(t *testing.T) {
	if err := interop.Available(); err != nil {
		if os.Getenv("MCPTAPE_REQUIRE_PEERS") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ev, err := interop.StartEverything(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close()
	store, err := badgerstore.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	d, err := dashboard.New(store, &dashboard.Options{Feed: dashboard.FeedPublish})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	rec, err := capture.NewRecorder(ctx, store, &capture.RecorderOptions{OnBatch: d.Publish})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close(context.Background())
	up, _ := url.Parse(ev.URL())
	p, err := proxy.New(&proxy.Options{Upstream: up, Recorder: rec})
	if err != nil {
		t.Fatal(err)
	}
	px := httptest.NewServer(p)
	defer px.Close()
	defer px.CloseClientConnections()
	rep, err := interop.RunClient(ctx, px.URL+up.Path, nil)
	if err != nil {
		t.Fatalf("TypeScript client through the proxy: %v", err)
	}
	for _, s := range rep.Steps {
		if !s.OK {
			t.Errorf("step %s failed: %s", s.Name, s.Detail)
		}
	}
	if err := rec.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	px.CloseClientConnections()
	var sess *capture.Session
	for s, err := range store.Sessions(ctx, capture.SessionQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		if s.Client.Name != "" && sess == nil {
			sess = s
		}
	}
	if sess == nil {
		t.Fatal("no MCP session recorded")
	}
	base := serve(t, d)
	b := newBrowser(t)
	b.open(base + "/sessions/" + esc(sess.ID))
	b.waitFor("the tree", treeReady, 10*time.Second)
	b.shots("interop-session")
	b.checkClean()
	shot := map[string]bool{}
	for m, err := range store.Messages(ctx, sess.ID, capture.MessageQuery{NoRaw: true}) {
		if err != nil {
			t.Fatal(err)
		}
		if m.Kind == protocol.KindFrame || m.Kind == protocol.KindStderr {
			continue
		}
		b.open(fmt.Sprintf("%s/sessions/%s/messages/%d", base, esc(sess.ID), m.Seq))
		b.waitFor(fmt.Sprintf("message %d", m.Seq), `document.querySelector('section.message-view') !== null && document.querySelector('details.raw-json') !== null`, 10*time.Second)
		if txt := eval[string](b, `document.querySelector('section.message-view').innerText`); txt == "" || containsAny(txt, "Not shown structured", "[object ") {
			t.Errorf("message %d (%s %s): the view shows %q", m.Seq, m.Kind, m.Method, txt)
		}
		// One pair of screenshots per kind of view.
		name := m.Kind.String() + "-" + m.Method
		if !shot[name] && (m.Method == protocol.MethodSampling || m.Method == protocol.MethodElicitation || m.Method == protocol.MethodToolsList) {
			shot[name] = true
			b.shots("interop-" + name)
		}
		b.checkClean()
	}
}

func containsAny(s string, subs ...string) bool {
	for _, x := range subs {
		if contains([]byte(s), x) {
			return true
		}
	}
	return false
}
