package proxy_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"context"

	"github.com/mcptape/mcptape/proxy"
)

// The proxy's tests run against the engine users get from `mcptape record`
// (the proxy's own HTTP/1.1 engine); MCPTAPE_PROXY_ENGINE=net/http runs
// them against the net/http path instead (.ci/run does both).
var testEngine = os.Getenv("MCPTAPE_PROXY_ENGINE")

// front is the proxy as clients reach it.
type front struct {
	URL string
	hs  *httptest.Server
	srv *proxy.Server
}

func serveProxy(t testing.TB, p *proxy.Proxy) *front {
	t.Helper()
	if testEngine == "net/http" {
		hs := httptest.NewServer(p)
		return &front{URL: hs.URL, hs: hs}
	}
	srv, err := proxy.Listen("127.0.0.1:0", p, nil)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve() }()
	return &front{URL: srv.URL(), srv: srv}
}

func (f *front) Close() {
	if f.hs != nil {
		f.hs.Close()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = f.srv.Shutdown(ctx)
}

func (f *front) CloseClientConnections() {
	if f.hs != nil {
		f.hs.CloseClientConnections()
		return
	}
	_ = f.srv.Close()
}

// Client is an HTTP client for the proxy (keep-alive, no environment proxy).
func (f *front) Client() *http.Client {
	if f.hs != nil {
		return f.hs.Client()
	}
	return &http.Client{Transport: &http.Transport{Proxy: nil}}
}
