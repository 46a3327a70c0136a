package proxy_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/badgerstore"
	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/proxy"
)

// BenchmarkEcho measures one echo tools/call on the stateless fixture
// endpoint directly, through a plain httputil.ReverseProxy and through the
// recording proxy on Badger, in one process (profile with -cpuprofile; the
// side-by-side figures across processes come from `mcptape bench`).
func BenchmarkEcho(b *testing.B) {
	up := httptest.NewServer(fixtures.Handler(nil))
	defer up.Close()
	u, _ := url.Parse(up.URL)

	plain := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(u); pr.Out.Host = u.Host },
		FlushInterval: -1,
		Transport:     &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 64},
	})
	defer plain.Close()

	store, err := badgerstore.Open(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	rec, err := capture.NewRecorder(context.Background(), store, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer rec.Close(context.Background())
	p, _ := proxy.New(&proxy.Options{Upstream: u, Recorder: rec})
	rp := serveProxy(b, p)
	defer rp.Close()

	for _, t := range []struct{ name, url string }{{"direct", up.URL}, {"plain", plain.URL}, {"mcptape", rp.URL}} {
		b.Run(t.name, func(b *testing.B) {
			tr := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 64}
			defer tr.CloseIdleConnections()
			c := &http.Client{Transport: tr}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					i++
					if err := echoCall(c, t.url, int64(i)); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkBigResult streams a 1 MiB SSE result from a cheap upstream
// through the recording proxy on Badger: the recorder's cost per MiB (run
// with -cpuprofile to see where it goes).
func BenchmarkBigResult(b *testing.B) {
	payload := []byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"" +
		strings.Repeat("mcptape-fixture-big-0123456789abcdefghij ", 1<<20/40) + "\"}]}}\n\n")
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(payload)
	}))
	defer up.Close()
	u, _ := url.Parse(up.URL)
	store, err := badgerstore.Open(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	rec, _ := capture.NewRecorder(context.Background(), store, nil)
	defer rec.Close(context.Background())
	p, _ := proxy.New(&proxy.Options{Upstream: u, Recorder: rec})
	f := serveProxy(b, p)
	defer f.Close()
	tr := &http.Transport{Proxy: nil}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	b.SetBytes(int64(len(payload)))
	for b.Loop() {
		res, err := c.Post(f.URL+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"big"}}`))
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if n != int64(len(payload)) {
			b.Fatalf("got %d bytes", n)
		}
	}
	if err := rec.Sync(context.Background()); err != nil {
		b.Fatal(err)
	}
}
