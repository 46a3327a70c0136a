package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/memstore"
	"github.com/mcptape/mcptape/proxy"
	"github.com/mcptape/mcptape/replay"
)

// The replay scenario puts `mcptape replay server` beside the live fixture
// server: the same sequence of distinct echo calls, first recorded into a
// tape (through an in-process recording proxy, before any measuring), is
// made against the live server (the direct target) and against a replay
// server serving that tape with --timing fast. The target: the
// replay server answers at least as fast as the live server.

// replayText is the echo text of the k-th call on the replay tape. A worker
// cycles through the tape's calls; past the end, the replay server answers
// repeats with the last recorded answer, which carries the same text.
func replayText(k int) string { return "mcptape-bench-replay-" + strconv.Itoa(k) }

// callReplayEcho makes the worker's next call of the replay tape.
func (w *worker) callReplayEcho(ctx context.Context) (sample, error) {
	k := w.cursor % w.env.cfg.ReplayCalls
	w.cursor++
	_, id := w.nextID()
	return w.echo(ctx, id, replayText(k))
}

// startReplay records the replay tape from the live fixture server and
// starts `mcptape replay server` on it: the replay target.
func (e *benchEnv) startReplay(ctx context.Context) (*target, error) {
	n := e.cfg.ReplayCalls
	tapePath := filepath.Join(e.dir, "replay.tape.json")
	e.progress("replay: recording %d echo calls to the live fixture server into %s", n, tapePath)
	if err := e.recordReplayTape(ctx, tapePath); err != nil {
		return nil, fmt.Errorf("recording the replay scenario's tape: %w", err)
	}
	t := &target{name: tgReplay}
	var err error
	t.proc, t.base, err = e.startListener(ctx, "replay", "mcptape replay: serving ",
		"replay", "server", "--tape", tapePath, "--timing", "fast", "--listen", "127.0.0.1:0", "--log-level", "warn")
	if err != nil {
		return nil, err
	}
	t.hc = benchHTTPClient()
	return t, nil
}

// recordReplayTape makes the tape's calls through an in-process recording
// proxy into a memory store, then exports the store as a tape.
func (e *benchEnv) recordReplayTape(ctx context.Context, path string) (err error) {
	up, err := url.Parse(e.fixtureBase)
	if err != nil {
		return err
	}
	store := memstore.New()
	rec, err := capture.NewRecorder(ctx, store, nil)
	if err != nil {
		return err
	}
	p, err := proxy.New(&proxy.Options{Upstream: up, Recorder: rec})
	if err != nil {
		rec.Close(ctx)
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		rec.Close(ctx)
		return err
	}
	srv := &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)

	t := &target{name: "recording", base: "http://" + ln.Addr().String(), hc: benchHTTPClient()}
	w := e.newWorker(t)
	var callErr error
	last := time.Now()
	for i := range e.cfg.ReplayCalls {
		if _, callErr = w.callReplayEcho(ctx); callErr != nil {
			callErr = fmt.Errorf("call %d of %d: %w", i+1, e.cfg.ReplayCalls, callErr)
			break
		}
		if time.Since(last) > 2*time.Second {
			e.progress("replay: %d of %d calls recorded", i+1, e.cfg.ReplayCalls)
			last = time.Now()
		}
	}
	t.hc.CloseIdleConnections()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	if cerr := rec.Close(sctx); callErr == nil {
		callErr = cerr
	}
	if callErr != nil {
		return callErr
	}
	if st := rec.Stats(); st.Lost > 0 {
		return fmt.Errorf("the recorder lost %d message(s)", st.Lost)
	}

	f, err := os.Create(path)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 256<<10)
	err = replay.Export(ctx, store, nil, bw, "mcptape bench")
	return errors.Join(err, bw.Flush(), f.Close())
}
