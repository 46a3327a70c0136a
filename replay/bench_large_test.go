package replay_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/badgerstore"
	"github.com/mcptape/mcptape/protocol"
	"github.com/mcptape/mcptape/replay"
)

// largeTapeMB is the size of BenchmarkLargeTape's tape;
// MCPTAPE_LARGE_TAPE_MB sets another.
func largeTapeMB(b *testing.B) int {
	if v := os.Getenv("MCPTAPE_LARGE_TAPE_MB"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("MCPTAPE_LARGE_TAPE_MB=%q: want a whole number of megabytes", v)
		}
		return n
	}
	return 500
}

// largeTape is what writeLargeTape wrote: where, and a few calls to ask
// the replay for, with their recorded answers.
type largeTape struct {
	path     string
	size     int64
	messages int
	probes   []largeProbe
}

type largeProbe struct {
	session, text string // the session's client, the call's argument
	want          string // a piece of the recorded answer
}

// writeLargeTape streams a tape of about size bytes to dir, the way a long
// recording looks: four 2026-07-28 sessions of tools/call requests, each
// answered on an SSE stream with a result of about 4 kB (every 500th, 1
// MiB), every tenth call with a progress notification first.
func writeLargeTape(b testing.TB, dir string, size int64) *largeTape {
	b.Helper()
	lt := &largeTape{path: filepath.Join(dir, "large.tape.json")}
	f, err := os.Create(lt.path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	bw := bufio.NewWriterSize(f, 1<<20)
	w := &countWriter{w: bw}
	fmt.Fprintf(w, `{"format":%q,"version":%d,"created":"2026-01-01T00:00:00Z","generator":"BenchmarkLargeTape","sessions":[`, replay.TapeFormat, replay.TapeVersion)
	type tapeMessage struct {
		Seq        uint64             `json:"seq"`
		ExchangeID uint64             `json:"exchange"`
		Direction  protocol.Direction `json:"dir"`
		Time       time.Time          `json:"time"`
		Kind       protocol.Kind      `json:"kind"`
		Method     string             `json:"method,omitempty"`
		Name       string             `json:"name,omitempty"`
		Batch      int                `json:"batch"`
		Size       int                `json:"size"`
		SSE        *capture.SSEInfo   `json:"sse,omitempty"`
		Links      capture.Links      `json:"links,omitzero"`
		Raw        json.RawMessage    `json:"raw"`
	}
	filler := strings.Repeat("tape ", 800)      // 4 kB
	big := strings.Repeat("large tape ", 95325) // 1 MiB
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const sessions = 4
	perSession := size / sessions
	seq, xid := uint64(0), uint64(0)
	for si := 0; si < sessions; si++ {
		client := fmt.Sprintf("client-%d", si)
		meta := fmt.Sprintf(`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":%q,"version":"1"}}`, client)
		if si > 0 {
			w.WriteString(",")
		}
		s := &capture.Session{ID: fmt.Sprintf("large-%d", si), Era: protocol.EraModern, Version: "2026-07-28", Path: "/mcp", Opening: "request",
			Client: protocol.Implementation{Name: client, Version: "1"}, ClientCapabilities: json.RawMessage(`{}`), Start: t0}
		sb, _ := json.Marshal(s)
		w.WriteString("\n{\"session\":")
		w.Write(sb)
		// The messages first, the exchanges after: the format allows either
		// order, and a writer that streams may only know its exchanges at
		// the end.
		w.WriteString(",\"messages\":[")
		var xs []*capture.Exchange
		start := w.n
		first := true
		emit := func(m *tapeMessage) {
			if !first {
				w.WriteString(",")
			}
			first = false
			mb, err := json.Marshal(m)
			if err != nil {
				b.Fatal(err)
			}
			w.WriteString("\n")
			w.Write(mb)
			lt.messages++
		}
		for i := 0; ; i++ {
			if w.n-start >= perSession {
				break
			}
			at := t0.Add(time.Duration(i) * time.Millisecond)
			xid++
			xs = append(xs, &capture.Exchange{ID: xid, Method: "POST", URL: "/mcp", Status: 200, Start: at, End: at,
				RequestHeader:  http.Header{"Content-Type": {"application/json"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"fetch"}},
				ResponseHeader: http.Header{"Content-Type": {"text/event-stream"}}, RequestBody: capture.BodyJSON, ResponseBody: capture.BodySSE})
			arg := fmt.Sprintf("page %d of %s", i, client)
			seq++
			req := seq
			raw := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"fetch","arguments":{"page":%q},%s}}`, i+1, arg, meta)
			emit(&tapeMessage{Seq: seq, ExchangeID: xid, Direction: protocol.ClientToServer, Time: at, Kind: protocol.KindRequest,
				Method: "tools/call", Name: "fetch", Batch: -1, Size: len(raw), Raw: json.RawMessage(raw)})
			sse := &capture.SSEInfo{Type: "message", Prefix: []byte("event: message\ndata: "), Suffix: []byte("\n\n")}
			if i%10 == 0 {
				seq++
				raw := fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%d,"progress":1,"total":2}}`, i+1)
				emit(&tapeMessage{Seq: seq, ExchangeID: xid, Direction: protocol.ServerToClient, Time: at, Kind: protocol.KindNotification,
					Method: "notifications/progress", Batch: -1, Size: len(raw), SSE: sse, Links: capture.Links{Request: req}, Raw: json.RawMessage(raw)})
			}
			body := filler
			if i%500 == 499 {
				body = big
			}
			answer := fmt.Sprintf("%s: %s", arg, body)
			seq++
			raw = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"resultType":"complete","content":[{"type":"text","text":%q}]}}`, i+1, answer)
			emit(&tapeMessage{Seq: seq, ExchangeID: xid, Direction: protocol.ServerToClient, Time: at, Kind: protocol.KindResult,
				Method: "tools/call", Name: "fetch", Batch: -1, Size: len(raw), SSE: sse, Links: capture.Links{Request: req}, Raw: json.RawMessage(raw)})
			if i == 0 || i == 499 {
				lt.probes = append(lt.probes, largeProbe{session: client, text: arg, want: answer[:min(len(answer), 120)]})
			}
		}
		w.WriteString("],\n\"exchanges\":[")
		for i, x := range xs {
			if i > 0 {
				w.WriteString(",")
			}
			x.SessionID = s.ID
			xb, _ := json.Marshal(x)
			w.WriteString("\n")
			w.Write(xb)
		}
		w.WriteString("]}")
	}
	w.WriteString("\n]}\n")
	if err := bw.Flush(); err != nil {
		b.Fatal(err)
	}
	st, err := f.Stat()
	if err != nil {
		b.Fatal(err)
	}
	lt.size = st.Size()
	return lt
}

// countWriter counts what it writes.
type countWriter struct {
	w *bufio.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func (c *countWriter) WriteString(s string) (int, error) {
	n, err := c.w.WriteString(s)
	c.n += int64(n)
	return n, err
}

// peakHeap runs fn and returns the most heap it held at once beyond what
// was in use before (sampled every 2 ms, and once more at the end while
// what fn keeps is still alive, reached through keep).
func peakHeap(fn func() (keep any)) (peak uint64, took time.Duration) {
	runtime.GC()
	samples := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/unused:bytes"}}
	base := heapBytes(samples)
	var max atomic.Uint64
	raise := func(v uint64) {
		for {
			old := max.Load()
			if v <= old || max.CompareAndSwap(old, v) {
				return
			}
		}
	}
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		own := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/unused:bytes"}}
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			if h := heapBytes(own); h > base {
				raise(h - base)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	start := time.Now()
	keep := fn()
	took = time.Since(start)
	if h := heapBytes(samples); h > base {
		raise(h - base)
	}
	close(done)
	<-stopped
	runtime.KeepAlive(keep)
	return max.Load(), took
}

// BenchmarkLargeTape opens a large generated tape (500 MB unless
// MCPTAPE_LARGE_TAPE_MB says otherwise) and imports it, then loads it into
// a replay server and asks it for recorded calls: the peak heap of each.
// The import is measured into a store that keeps nothing: what the import
// itself holds, the tape's index and the batch being written. With
// MCPTAPE_LARGE_TAPE_BADGER=1 it is measured again into a Badger store on
// disk, what `mcptape import` holds: Badger's compaction buffers are most
// of it (1.1 to 1.6 GB for the 527 MB tape, however the writes are paced),
// and they take half a minute more, so CI leaves it out. Targets, for the
// 500 MB tape: the import's own peak and the replay's under 200 MB (the
// Badger import is reported, not held to a target).
func BenchmarkLargeTape(b *testing.B) {
	dir := b.TempDir()
	lt := writeLargeTape(b, dir, int64(largeTapeMB(b))<<20)
	b.ResetTimer()
	var importPeak, badgerPeak, loadPeak uint64
	var importTook, badgerTook, loadTook time.Duration
	importInto := func(st capture.Store) any {
		tape, err := openLargeTape(lt.path)
		if err != nil {
			b.Fatal(err)
		}
		defer tape.Close()
		ids, err := replay.Import(context.Background(), st, tape, nil)
		if err != nil || len(ids) != 4 {
			b.Fatalf("import: %v (%d sessions)", err, len(ids))
		}
		return tape
	}
	for i := 0; i < b.N; i++ {
		sink := &sinkStore{}
		p, took := peakHeap(func() any { return importInto(sink) })
		importPeak, importTook = max(importPeak, p), max(importTook, took)
		if sink.messages != lt.messages {
			b.Fatalf("the import wrote %d messages of %d", sink.messages, lt.messages)
		}

		data := filepath.Join(dir, fmt.Sprintf("store-%d", i))
		p, took = 0, 0
		if os.Getenv("MCPTAPE_LARGE_TAPE_BADGER") == "1" {
			p, took = peakHeap(func() any {
				st, err := badgerstore.Open(data, nil)
				if err != nil {
					b.Fatal(err)
				}
				keep := importInto(st)
				if err := st.Close(); err != nil {
					b.Fatal(err)
				}
				return keep
			})
			os.RemoveAll(data)
		}
		badgerPeak, badgerTook = max(badgerPeak, p), max(badgerTook, took)

		p, took = peakHeap(func() any {
			tape, err := openLargeTape(lt.path)
			if err != nil {
				b.Fatal(err)
			}
			defer tape.Close()
			s, err := replay.NewServerHandler(tape, &replay.ServerOptions{Timing: replay.TimingFast, Strict: true})
			if err != nil {
				b.Fatal(err)
			}
			hs := httptest.NewServer(s)
			defer hs.Close()
			for _, pr := range lt.probes {
				meta := fmt.Sprintf(`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":%q,"version":"1"}}`, pr.session)
				_, body, err := postB(hs.URL+"/mcp", fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fetch","arguments":{"page":%q},%s}}`, pr.text, meta))
				if err != nil || !strings.Contains(body, strings.ReplaceAll(pr.want, `"`, `\"`)) {
					b.Fatalf("the replay of %s answered %.200s (%v), want the recorded %.100s", pr.text, body, err, pr.want)
				}
			}
			if r := s.Report(); !r.OK() {
				b.Fatalf("strict replay: %q", r.Failures)
			}
			return s
		})
		loadPeak, loadTook = max(loadPeak, p), max(loadTook, took)
	}
	b.StopTimer()
	b.ReportMetric(float64(lt.size)/(1<<20), "tape-MB")
	b.ReportMetric(float64(lt.messages), "messages")
	b.ReportMetric(float64(importPeak)/(1<<20), "import-peak-heap-MB")
	b.ReportMetric(importTook.Seconds(), "import-s")
	if badgerPeak > 0 {
		b.ReportMetric(float64(badgerPeak)/(1<<20), "import-badger-peak-heap-MB")
		b.ReportMetric(badgerTook.Seconds(), "import-badger-s")
	}
	b.ReportMetric(float64(loadPeak)/(1<<20), "replay-peak-heap-MB")
	b.ReportMetric(loadTook.Seconds(), "replay-load-s")
	// The target: 100 MB (the largest message, the decoder's buffers) and
	// a fifth of the tape (the index, which grows with the messages):
	// 200 MB for 500 MB.
	target := float64(100<<20) + float64(lt.size)/5
	for _, c := range []struct {
		what string
		peak uint64
	}{{"importing", importPeak}, {"loading for replay", loadPeak}} {
		if float64(c.peak) > target {
			b.Errorf("%s the %.0f MB tape took %.0f MB of heap at its peak; the target is under %.0f MB", c.what,
				float64(lt.size)/(1<<20), float64(c.peak)/(1<<20), target/(1<<20))
		}
	}
}

// sinkStore is a store that keeps nothing: what an import holds is then
// the import's alone. It counts what it was given.
type sinkStore struct {
	capture.Store // Import uses only the methods below
	messages      int
}

func (s *sinkStore) Write(_ context.Context, b *capture.Batch) error {
	s.messages += len(b.Messages)
	return nil
}

func (s *sinkStore) Session(context.Context, string) (*capture.Session, error) {
	return nil, capture.ErrNotFound
}

func (s *sinkStore) LastIDs(context.Context) (uint64, uint64, error) { return 0, 0, nil }

// postB posts a 2026-07-28 tools/call to u and returns the body.
func postB(u, body string) (int, string, error) {
	req, _ := http.NewRequest("POST", u, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	tr := &http.Transport{Proxy: nil}
	defer tr.CloseIdleConnections()
	res, err := tr.RoundTrip(req)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	var sb strings.Builder
	_, err = bufio.NewReader(res.Body).WriteTo(&sb)
	return res.StatusCode, sb.String(), err
}

// openLargeTape opens a tape the way the CLI's import and replay do.
func openLargeTape(path string) (*replay.Tape, error) { return replay.OpenTape(path) }

// TestLargeTapeHeapBounded: importing a 48 MB tape and loading it for
// replay each peak at a bounded heap — far less than the tape, which a
// reader that loads the tape whole exceeds. (BenchmarkLargeTape measures
// the same on a 500 MB tape and prints its figures.)
func TestLargeTapeHeapBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 48 MB tape")
	}
	lt := writeLargeTape(t, t.TempDir(), 48<<20)
	bound := uint64(24<<20) + uint64(lt.size)/5
	sink := &sinkStore{}
	importPeak, _ := peakHeap(func() any {
		tape, err := openLargeTape(lt.path)
		if err != nil {
			t.Fatal(err)
		}
		defer tape.Close()
		if _, err := replay.Import(context.Background(), sink, tape, nil); err != nil {
			t.Fatal(err)
		}
		return tape
	})
	if sink.messages != lt.messages {
		t.Fatalf("the import wrote %d messages of %d", sink.messages, lt.messages)
	}
	loadPeak, _ := peakHeap(func() any {
		tape, err := openLargeTape(lt.path)
		if err != nil {
			t.Fatal(err)
		}
		defer tape.Close()
		s, err := replay.NewServerHandler(tape, &replay.ServerOptions{Timing: replay.TimingFast})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
	for _, c := range []struct {
		what string
		peak uint64
	}{{"importing", importPeak}, {"loading for replay", loadPeak}} {
		if c.peak > bound {
			t.Errorf("%s a %.0f MB tape peaked at %.1f MB of heap; want under %.1f MB", c.what, float64(lt.size)/(1<<20), float64(c.peak)/(1<<20), float64(bound)/(1<<20))
		}
	}
	t.Logf("a %.0f MB tape: import peak %.1f MB, replay load peak %.1f MB of heap (bound %.1f MB)", float64(lt.size)/(1<<20), float64(importPeak)/(1<<20), float64(loadPeak)/(1<<20), float64(bound)/(1<<20))
}
