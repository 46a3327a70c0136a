package capture_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/badgerstore"
	"github.com/mcptape/mcptape/capture/memstore"
)

// gathered maps "name{k=v,…}" (labels sorted) to counter and gauge values.
func gathered(t *testing.T, g prometheus.Gatherer) map[string]float64 {
	t.Helper()
	fams, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.Metric {
			var ls []string
			for _, l := range m.Label {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			sort.Strings(ls)
			k := f.GetName() + "{" + strings.Join(ls, ",") + "}"
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out[k] = m.Counter.GetValue()
			case dto.MetricType_GAUGE:
				out[k] = m.Gauge.GetValue()
			}
		}
	}
	return out
}

func TestMetricLabels(t *testing.T) {
	for in, want := range map[string]string{
		"tools/call": "tools/call", "notifications/tasks/status": "notifications/tasks/status",
		"server/discover": "server/discover", "": capture.LabelNone, "tools/call2": capture.LabelOther,
		"x/" + strings.Repeat("a", 1000): capture.LabelOther,
	} {
		if got := capture.MethodLabel(in); got != want {
			t.Errorf("MethodLabel(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{
		"-32700": "-32700", "-32000": "-32000", "-32042": "-32042", "-32020": "-32020",
		"-32099": capture.LabelOther, "0": capture.LabelOther, "42": capture.LabelOther,
		"-32000.0": capture.LabelOther, `"x"`: capture.LabelOther, "99999999999999999999": capture.LabelOther,
	} {
		if got := capture.ErrorCodeLabel([]byte(in)); got != want {
			t.Errorf("ErrorCodeLabel(%s) = %q, want %q", in, got, want)
		}
	}
}

func TestToolLabelsBounded(t *testing.T) {
	tl := capture.NewToolLabels(10)
	for _, bad := range []string{"bad\xffutf8", strings.Repeat("x", 129), "tab\there", "nl\n"} {
		if got := tl.Label(bad); got != capture.LabelOther {
			t.Errorf("Label(%q) = %q, want other", bad, got)
		}
	}
	if tl.Label("") != "" {
		t.Error(`Label("") is not ""`)
	}
	// Many goroutines, a thousand names: ten are kept, whichever came
	// first, and a kept name stays kept.
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				name := fmt.Sprintf("tool-%d", (i*7+g)%1000)
				l := tl.Label(name)
				if l != name && l != capture.LabelOther {
					t.Errorf("Label(%q) = %q", name, l)
				}
				if l == name && string(tl.LabelBytes([]byte(name))) != name {
					t.Errorf("%q was kept, then not", name)
				}
				mu.Lock()
				seen[l] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != 11 || !seen[capture.LabelOther] {
		t.Errorf("%d label values, want 10 names and other", len(seen))
	}
}

func TestRecorderMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	d := newDriver(t, &capture.RecorderOptions{Registerer: reg, IdleGap: time.Minute})
	// A legacy session with a batch (on a version that forbids them), an
	// error with a code MCP defines and one it does not, a tool failure.
	d.exchange(initialize("2025-06-18"))
	sess := map[string]string{"Content-Type": "application/json", "Mcp-Session-Id": "sess-2025-06-18"}
	d.exchange(ex{method: "POST", path: "/mcp", reqHeader: sess,
		body:       `[{"jsonrpc":"2.0","id":2,"method":"ping"},{"jsonrpc":"2.0","id":3,"method":"made/up"}]`,
		respHeader: map[string]string{"Content-Type": "application/json"},
		resp:       []string{`[{"jsonrpc":"2.0","id":2,"result":{}},{"jsonrpc":"2.0","id":3,"error":{"code": -32601,"message":"no"}}]`}})
	d.exchange(ex{method: "POST", path: "/mcp", reqHeader: sess,
		body:       `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"t1"}}`,
		respHeader: map[string]string{"Content-Type": "text/event-stream"},
		resp:       []string{"data: {\"jsonrpc\":\"2.0\",\"id\":4,\"error\":{\"code\":7,\"message\":\"odd\"}}\n\n"}})
	d.exchange(ex{method: "POST", path: "/mcp", reqHeader: sess,
		body:       `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"t2"}}`,
		respHeader: map[string]string{"Content-Type": "application/json"},
		resp:       []string{`{"jsonrpc":"2.0","id":5,"result":{"content":[],"isError":true}}`}})
	d.messages("s01")
	got := gathered(t, reg)
	want := map[string]float64{
		"mcptape_capture_messages_total{direction=c2s,kind=request,method=initialize}": 1,
		"mcptape_capture_messages_total{direction=s2c,kind=result,method=initialize}":  1,
		"mcptape_capture_messages_total{direction=c2s,kind=request,method=ping}":       1,
		"mcptape_capture_messages_total{direction=s2c,kind=result,method=ping}":        1,
		"mcptape_capture_messages_total{direction=c2s,kind=request,method=other}":      1,
		"mcptape_capture_messages_total{direction=s2c,kind=error,method=other}":        1,
		"mcptape_capture_messages_total{direction=c2s,kind=request,method=tools/call}": 2,
		"mcptape_capture_messages_total{direction=s2c,kind=error,method=tools/call}":   1,
		"mcptape_capture_messages_total{direction=s2c,kind=result,method=tools/call}":  1,
		"mcptape_capture_errors_total{code=-32601,method=other,tool=}":                 1,
		"mcptape_capture_errors_total{code=other,method=tools/call,tool=t1}":           1,
		"mcptape_capture_tool_errors_total{tool=t2}":                                   1,
		"mcptape_capture_findings_total{kind=batch}":                                   4, // both requests, both answers
		"mcptape_capture_messages_stored_total{}":                                      10,
		"mcptape_capture_messages_lost_total{}":                                        0,
		"mcptape_capture_events_dropped_total{}":                                       0,
		"mcptape_capture_store_write_errors_total{}":                                   0,
		"mcptape_capture_queue_events{}":                                               0,
		"mcptape_capture_queue_bytes{}":                                                0,
		"mcptape_capture_queue_capacity_events{}":                                      4096,
		"mcptape_capture_queue_capacity_bytes{}":                                       8 << 20,
		"mcptape_capture_sessions_active{}":                                            1,
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s = %v, want %v", k, got[k], w)
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected %s = %v", k, v)
		}
	}

	// Two minutes later a modern client arrives: the legacy session is past
	// the idle gap, so one session is active.
	d.advance(2 * time.Minute)
	d.exchange(ex{method: "POST", path: "/mcp", reqHeader: map[string]string{"Content-Type": "application/json"},
		body:       `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
		respHeader: map[string]string{"Content-Type": "application/json"},
		resp:       []string{`{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}`}})
	d.messages("s02")
	if n := gathered(t, reg)["mcptape_capture_sessions_active{}"]; n != 1 {
		t.Errorf("%v sessions active, want 1", n)
	}
}

// gatedStore holds every Write until open is closed, then fails them
// while fail is set.
type gatedStore struct {
	capture.Store
	open chan struct{}
	fail atomic.Bool
}

func (g *gatedStore) Write(ctx context.Context, b *capture.Batch) error {
	<-g.open
	if g.fail.Load() {
		return errors.New("disk full (simulated)")
	}
	return g.Store.Write(ctx, b)
}

// TestRecorderMetricsQueueAndLoss: while the store does not keep up, the
// queue gauges show what waits; when its writes fail, the scrape counts
// the messages lost and the failed writes; after, the queue is empty.
func TestRecorderMetricsQueueAndLoss(t *testing.T) { synctest.Test(t, testRecorderMetricsQueueAndLoss) }

func testRecorderMetricsQueueAndLoss(t *testing.T) {
	reg := prometheus.NewRegistry()
	store := &gatedStore{Store: memstore.New(), open: make(chan struct{})}
	store.fail.Store(true)
	rec, err := capture.NewRecorder(context.Background(), store, &capture.RecorderOptions{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close(context.Background())
	h := http.Header{"Content-Type": {"application/json"}}
	call := func(i int) {
		req := httptest.NewRequest("POST", "http://127.0.0.1:7411/mcp", nil)
		req.Header.Set("Content-Type", "application/json")
		tap := rec.Begin(capture.RequestFrom(req, []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, i)), true))
		tap.Response(200, h, false)
		tap.ResponseBody([]byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{}}`, i)))
		tap.End("", false)
	}
	// The writer holds a batch, the pipeline waits to hand it more: the
	// events pile up in the queue.
	var got map[string]float64
	for i := 1; ; i++ {
		call(i)
		got = gathered(t, reg)
		if got["mcptape_capture_queue_events{}"] >= 1 && got["mcptape_capture_queue_bytes{}"] >= 1 {
			break
		}
		if i == 1000 {
			t.Fatalf("the queue gauges never rose while the store blocked: %v events, %v bytes",
				got["mcptape_capture_queue_events{}"], got["mcptape_capture_queue_bytes{}"])
		}
		synctest.Wait() // the recorder's goroutines are blocked: on the store, or lingering
	}
	close(store.open) // every held write now fails
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rec.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	got = gathered(t, reg)
	st := rec.Stats()
	if lost := got["mcptape_capture_messages_lost_total{}"]; lost < 2 || lost != float64(st.Lost) {
		t.Errorf("messages lost %v, Stats %+v", lost, st)
	}
	if errs := got["mcptape_capture_store_write_errors_total{}"]; errs < 1 || errs != float64(st.StoreErrors) {
		t.Errorf("store write errors %v, Stats %+v", errs, st)
	}
	if q, b := got["mcptape_capture_queue_events{}"], got["mcptape_capture_queue_bytes{}"]; q != 0 || b != 0 {
		t.Errorf("after the sync, the queue holds %v events, %v bytes", q, b)
	}
}

func TestRecorderMetricsRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	store := memstore.New()
	rec, err := capture.NewRecorder(context.Background(), store, &capture.RecorderOptions{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close(context.Background())
	// A second recorder on the same registry would report the first one's
	// gauges under the same names.
	_, err = capture.NewRecorder(context.Background(), store, &capture.RecorderOptions{Registerer: reg})
	var are prometheus.AlreadyRegisteredError
	if !errors.As(err, &are) {
		t.Errorf("a second recorder on one registry: %v, want AlreadyRegisteredError", err)
	}
	// memstore has no size; Badger on disk has one.
	if _, ok := gathered(t, reg)["mcptape_capture_store_size_bytes{}"]; ok {
		t.Error("a store size for memstore")
	}
	bs, err := badgerstore.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer bs.Close()
	reg2 := prometheus.NewRegistry()
	rec2, err := capture.NewRecorder(context.Background(), bs, &capture.RecorderOptions{Registerer: reg2})
	if err != nil {
		t.Fatal(err)
	}
	defer rec2.Close(context.Background())
	if n := gathered(t, reg2)["mcptape_capture_store_size_bytes{}"]; n <= 0 {
		t.Errorf("badger store size %v", n)
	}
	mem, err := badgerstore.Open("", &badgerstore.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	if _, err := mem.Size(); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("in-memory Size: %v", err)
	}
}

// BenchmarkRecorderEchoMetrics is BenchmarkRecorderEcho with the
// recorder's metrics off and on.
func BenchmarkRecorderEchoMetrics(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			opts := &capture.RecorderOptions{}
			if on {
				opts.Registerer = prometheus.NewRegistry()
			}
			rec, err := capture.NewRecorder(context.Background(), memstore.New(), opts)
			if err != nil {
				b.Fatal(err)
			}
			h := http.Header{"Content-Type": {"text/event-stream"}}
			req := httptest.NewRequest("POST", "http://127.0.0.1:7411/mcp", strings.NewReader(""))
			req.RemoteAddr = "127.0.0.1:50000"
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"}}}}`, i)
				t := rec.Begin(capture.RequestFrom(req, []byte(body), true))
				t.Response(200, h, false)
				t.ResponseBody([]byte(fmt.Sprintf("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%d,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"x\"}]}}\n\n", i)))
				t.End("", false)
			}
			if err := rec.Sync(context.Background()); err != nil {
				b.Fatal(err)
			}
			rec.Close(context.Background())
		})
	}
}
