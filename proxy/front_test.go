package proxy_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/mcptape/mcptape/proxy"
)

// front is the proxy as clients reach it: served by proxy.Listen, as
// `mcptape record` serves it.
type front struct {
	URL string
	srv *proxy.Server
}

func serveProxy(t testing.TB, p *proxy.Proxy) *front {
	t.Helper()
	return serveWith(t, p, nil)
}

func serveWith(t testing.TB, h http.Handler, o *proxy.ServerOptions) *front {
	t.Helper()
	srv, err := proxy.Listen("127.0.0.1:0", h, o)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve() }()
	return &front{URL: srv.URL(), srv: srv}
}

func (f *front) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = f.srv.Shutdown(ctx)
}

func (f *front) CloseClientConnections() { _ = f.srv.Close() }

// Client is an HTTP client for the proxy (keep-alive, no environment proxy).
func (f *front) Client() *http.Client {
	return &http.Client{Transport: &http.Transport{Proxy: nil}}
}
