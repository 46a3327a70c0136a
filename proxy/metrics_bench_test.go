package proxy_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/badgerstore"
	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/proxy"
)

// BenchmarkEchoMetrics is BenchmarkEcho's mcptape case with the proxy's
// and the recorder's metrics off and on, side by side.
func BenchmarkEchoMetrics(b *testing.B) {
	up := httptest.NewServer(fixtures.Handler(nil))
	defer up.Close()
	u, _ := url.Parse(up.URL)
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			store, err := badgerstore.Open(b.TempDir(), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer store.Close()
			var reg prometheus.Registerer
			if on {
				reg = prometheus.NewRegistry()
			}
			rec, err := capture.NewRecorder(context.Background(), store, &capture.RecorderOptions{Registerer: reg})
			if err != nil {
				b.Fatal(err)
			}
			defer rec.Close(context.Background())
			p, err := proxy.New(&proxy.Options{Upstream: u, Recorder: rec, Registerer: reg})
			if err != nil {
				b.Fatal(err)
			}
			rp := httptest.NewServer(p)
			defer rp.Close()
			benchEchoCalls(b, rp.URL)
		})
	}
}

func benchEchoCalls(b *testing.B, target string) {
	tr := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 64}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			if err := echoCall(c, target, int64(i)); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
