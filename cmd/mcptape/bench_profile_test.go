package main

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcptape/mcptape/cmd/mcptape/internal/bench"
)

// BenchmarkRecordingProxy runs what the bench's mcptape target runs —
// `mcptape record`'s proxy, recorder and Badger store, set up by the same
// startRecording — in this process, so that it can be profiled under the
// bench's load generator:
//
//	go test -run '^$' -bench 'RecordingProxy/echo-c32' -benchtime 20000x \
//	    -cpuprofile /tmp/cpu.out -memprofile /tmp/mem.out ./cmd/mcptape
//	go tool pprof -top -cum -focus 'mcptape/(proxy|capture)' /tmp/cpu.out
//
// The fixture server is a child process, as in the bench, so the profile
// holds only the proxy, the recorder, Badger and the load generator (whose
// frames are internal/bench's).
func BenchmarkRecordingProxy(b *testing.B) {
	if !bench.Supported {
		b.Skip("the bench's process handling needs Linux")
	}
	childrenFromTestBinary(b)
	ctx := context.Background()
	prof, err := bench.NewProfiler(ctx, b.TempDir(), b.Logf)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(prof.Close)
	rs, err := startRecording(ctx, &recordConfig{upstream: prof.FixtureURL, listen: "127.0.0.1:0", data: filepath.Join(b.TempDir(), "data"), idleGap: 5 * time.Minute},
		slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = rs.srv.Serve() }()
	b.Cleanup(func() {
		// Not fatal: the profile is what this is for. (With many large
		// results the recorder can need longer than close allows.)
		if _, err := rs.close(); err != nil {
			b.Logf("stopping the recorder: %v", err)
		}
	})
	for _, bc := range []struct {
		name, kind string
		conc, big  int
	}{
		{"echo-c1", "echo", 1, 0},
		{"echo-c32", "echo", 32, 0},
		{"sampling-c1", "sampling", 1, 0},
		{"sse-c4", "sse", 4, 0},
		{"big-1MiB-c4", "big", 4, 1 << 20},
		{"huge-10MiB-c4", "big", 4, 10 << 20},
	} {
		b.Run(bc.name, func(b *testing.B) {
			callers := prof.Callers(rs.srv.URL(), bc.conc)
			if _, err := callers.Run(ctx, bc.kind, bc.big, 2*bc.conc); err != nil { // connections, pools
				b.Fatal(err)
			}
			b.ResetTimer()
			res, err := callers.Run(ctx, bc.kind, bc.big, b.N)
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			if res.Failed > 0 {
				b.Fatalf("%d of %d calls failed: %v", res.Failed, b.N, res.Examples)
			}
			b.ReportMetric(float64(res.Calls)/res.Elapsed.Seconds(), "calls/s")
			b.ReportMetric(float64(res.P50)/float64(time.Microsecond), "p50-µs")
		})
	}
}
