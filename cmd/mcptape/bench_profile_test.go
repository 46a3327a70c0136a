package main

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"
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
// frames are bench_load.go's).
func BenchmarkRecordingProxy(b *testing.B) {
	if !benchSupported {
		b.Skip("the bench's process handling needs Linux")
	}
	childrenFromTestBinary(b)
	ctx := context.Background()
	env := &benchEnv{cfg: &benchConfig{sseDuration: 40 * time.Millisecond, sseSteps: 4}, dir: b.TempDir(), progress: b.Logf}
	b.Cleanup(env.stop)
	_, base, err := env.startListener(ctx, "fixture", "mcptape fixture server:", "fixture", "server", "--listen", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	rs, err := startRecording(ctx, &recordConfig{upstream: base, listen: "127.0.0.1:0", data: filepath.Join(env.dir, "data"), idleGap: 5 * time.Minute},
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
	t := &target{name: tgMcptape, base: rs.srv.URL(), hc: benchHTTPClient()}
	big := func(n int) func(*worker, context.Context) (sample, error) {
		return func(w *worker, ctx context.Context) (sample, error) { return w.callBig(ctx, n) }
	}
	for _, bc := range []struct {
		name string
		conc int
		call func(*worker, context.Context) (sample, error)
	}{
		{"echo-c1", 1, (*worker).callEcho},
		{"echo-c32", 32, (*worker).callEcho},
		{"sse-c4", 4, (*worker).callSlow},
		{"big-1MiB-c4", 4, big(1 << 20)},
		{"huge-10MiB-c4", 4, big(10 << 20)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			sc := &scenarioSpec{conc: bc.conc, call: bc.call}
			ws := make([]*worker, bc.conc)
			for i := range ws {
				ws[i] = env.newWorker(t)
			}
			runBatch(ctx, ws, sc, 2*bc.conc, 0) // connections, pools
			b.ResetTimer()
			res := runBatch(ctx, ws, sc, b.N, 0)
			b.StopTimer()
			if res.failed > 0 {
				b.Fatalf("%d of %d calls failed: %v", res.failed, b.N, res.examples)
			}
			b.ReportMetric(float64(res.calls)/res.elapsed.Seconds(), "calls/s")
			b.ReportMetric(us(percentile(res.lats, 0.5)), "p50-µs")
		})
	}
}
