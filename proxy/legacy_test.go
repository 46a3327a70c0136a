package proxy_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/memstore"
	"github.com/mcptape/mcptape/proxy"
)

// legacySSEServer opens a legacy HTTP+SSE stream whose endpoint event
// names endpoint (with %s for the server's own URL), then sends one more
// event and holds the stream until the client leaves.
func legacySSEServer(endpoint string) *httptest.Server {
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		ep := endpoint
		if strings.Contains(ep, "%s") {
			ep = fmt.Sprintf(ep, srv.URL)
		}
		// Split across writes: the proxy must wait for the whole event.
		fmt.Fprint(w, "event: endpoint\r\n")
		w.(http.Flusher).Flush()
		time.Sleep(20 * time.Millisecond) // so the proxy reads the event in two pieces
		fmt.Fprintf(w, "data: %s\r\n\r\n", ep)
		fmt.Fprint(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	return srv
}

// The endpoint event of a legacy SSE stream through a reverse route: an
// absolute URL becomes the proxy's (route prefix before the path, query
// kept); an absolute path gets the route's prefix; through a single
// upstream a relative one passes as it was. What the record keeps is the
// upstream's bytes, and the exchange says what changed.
func TestLegacyEndpointRewrite(t *testing.T) {
	cases := []struct {
		name, endpoint string
		route          bool
		want           string // %s: the proxy's URL
		rewritten      bool
	}{
		{"absolute through a route", "%s/messages?sessionId=abc", true, "%s/r/messages?sessionId=abc", true},
		{"absolute path through a route", "/messages?sessionId=abc", true, "/r/messages?sessionId=abc", true},
		{"relative path through a route", "messages?sessionId=abc", true, "messages?sessionId=abc", false},
		{"absolute path, single upstream", "/messages?sessionId=abc", false, "/messages?sessionId=abc", false},
		{"absolute, single upstream", "%s/messages?sessionId=abc", false, "%s/messages?sessionId=abc", true},
		{"another origin", "http://elsewhere.example/messages?sessionId=abc", true, "http://elsewhere.example/messages?sessionId=abc", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			up := legacySSEServer(c.endpoint)
			defer up.Close()
			defer up.CloseClientConnections()
			store := memstore.New()
			rec, err := capture.NewRecorder(context.Background(), store, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer rec.Close(context.Background())
			u, _ := url.Parse(up.URL)
			o := &proxy.Options{Recorder: rec}
			path := "/sse"
			if c.route {
				o.Routes = []proxy.Route{{Name: "r", Upstream: u}}
				path = "/r/sse"
			} else {
				o.Upstream = u
			}
			p, err := proxy.New(o)
			if err != nil {
				t.Fatal(err)
			}
			px := serveProxy(t, p)
			defer px.CloseClientConnections()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, px.URL+path, nil)
			req.Header.Set("Accept", "text/event-stream")
			res, err := px.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(res.Body)
			var got []string
			for len(got) < 5 {
				line, err := br.ReadString('\n')
				if err != nil {
					t.Fatalf("reading the stream: %v (so far %q)", err, got)
				}
				got = append(got, line)
			}
			cancel()
			res.Body.Close()
			want := strings.ReplaceAll(c.want, "%s", px.URL)
			if got[1] != "data: "+want+"\r\n" || got[3] != "event: message\n" {
				t.Errorf("the client got %q, want the endpoint %q and the next event intact", got, want)
			}

			waitIdle(t, p)
			sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer scancel()
			if err := rec.Sync(sctx); err != nil {
				t.Fatal(err)
			}
			var xs []*capture.Exchange
			var raw string
			for s, err := range store.Sessions(sctx, capture.SessionQuery{}) {
				if err != nil {
					t.Fatal(err)
				}
				for x, err := range store.Exchanges(sctx, s.ID) {
					if err != nil {
						t.Fatal(err)
					}
					xs = append(xs, x)
				}
				for m, err := range store.Messages(sctx, s.ID, capture.MessageQuery{}) {
					if err != nil {
						t.Fatal(err)
					}
					raw += string(m.Raw) + "\n"
				}
			}
			if len(xs) != 1 {
				t.Fatalf("%d exchanges recorded, want 1", len(xs))
			}
			if (xs[0].Rewritten != "") != c.rewritten || c.rewritten && !strings.Contains(xs[0].Rewritten, want) {
				t.Errorf("the exchange's Rewritten is %q (want a note: %v)", xs[0].Rewritten, c.rewritten)
			}
			if orig := strings.ReplaceAll(c.endpoint, "%s", up.URL); !strings.Contains(raw, orig) {
				t.Errorf("the record lacks the upstream's endpoint %q:\n%s", orig, raw)
			}
		})
	}
}
