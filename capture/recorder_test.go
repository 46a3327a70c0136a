package capture_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/memstore"
	"github.com/mcptape/mcptape/protocol"
)

// driver feeds exchanges to a recorder through its Tap API, as the proxy does.
type driver struct {
	t     *testing.T
	rec   *capture.Recorder
	store *memstore.Store
	mu    sync.Mutex // the recorder's goroutines read the clock too
	clock time.Time
}

// advance moves the driver's clock on by dur.
func (d *driver) advance(dur time.Duration) {
	d.mu.Lock()
	d.clock = d.clock.Add(dur)
	d.mu.Unlock()
}

func newDriver(t *testing.T, opts *capture.RecorderOptions) *driver {
	return newDriverWith(t, opts, nil)
}

// newDriverWith is newDriver recording into wrap(d.store) when wrap is set.
func newDriverWith(t *testing.T, opts *capture.RecorderOptions, wrap func(*memstore.Store) capture.Writer) *driver {
	d := &driver{t: t, store: memstore.New(), clock: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)}
	var w capture.Writer = d.store
	if wrap != nil {
		w = wrap(d.store)
	}
	if opts == nil {
		opts = &capture.RecorderOptions{}
	}
	n := 0
	opts.Now = func() time.Time {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.clock = d.clock.Add(time.Millisecond)
		return d.clock
	}
	opts.NewSessionID = func(time.Time) string { n++; return fmt.Sprintf("s%02d", n) }
	rec, err := capture.NewRecorder(context.Background(), w, opts)
	if err != nil {
		t.Fatal(err)
	}
	d.rec = rec
	t.Cleanup(func() { rec.Close(context.Background()) })
	return d
}

type ex struct {
	method, path, body string
	reqHeader          map[string]string
	status             int
	respHeader         map[string]string
	resp               []string // chunks written to the client
}

// begin sends e's request, and leaves the exchange open.
func (d *driver) begin(e ex) *capture.Tap {
	req := httptest.NewRequest(e.method, "http://127.0.0.1:7411"+e.path, strings.NewReader(e.body))
	req.RemoteAddr = "127.0.0.1:50000"
	for k, v := range e.reqHeader {
		req.Header.Set(k, v)
	}
	return d.rec.Begin(capture.RequestFrom(req, []byte(e.body), true))
}

func (d *driver) exchange(e ex) {
	tap := d.begin(e)
	h := http.Header{}
	for k, v := range e.respHeader {
		h.Set(k, v)
	}
	if e.status == 0 {
		e.status = 200
	}
	tap.Response(e.status, h, false)
	for _, c := range e.resp {
		tap.ResponseBody([]byte(c))
	}
	tap.End("", false)
}

func (d *driver) messages(session string) []*capture.Message {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.rec.Sync(ctx); err != nil {
		d.t.Fatal(err)
	}
	var out []*capture.Message
	for m, err := range d.store.Messages(ctx, session, capture.MessageQuery{}) {
		if err != nil {
			d.t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

func (d *driver) session(id string) *capture.Session {
	s, err := d.store.Session(context.Background(), id)
	if err != nil {
		d.t.Fatal(err)
	}
	return s
}

func initialize(version string) ex {
	return ex{method: "POST", path: "/mcp", reqHeader: map[string]string{"Content-Type": "application/json"},
		body:       `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + version + `","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`,
		respHeader: map[string]string{"Content-Type": "application/json", "Mcp-Session-Id": "sess-" + version},
		resp:       []string{`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"` + version + `","capabilities":{},"serverInfo":{"name":"s","version":"2"}}}`}}
}

func TestVersionsAndBatches(t *testing.T) {
	batch := `[{"jsonrpc":"2.0","id":2,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"}]`
	for _, tc := range []struct {
		version      string
		batchFinding bool
	}{
		{protocol.V20250326, false},
		{protocol.V20250618, true},
		{protocol.V20251125, true},
	} {
		t.Run(tc.version, func(t *testing.T) {
			d := newDriver(t, nil)
			d.exchange(initialize(tc.version))
			d.exchange(ex{method: "POST", path: "/mcp", body: batch,
				reqHeader:  map[string]string{"Content-Type": "application/json", "Mcp-Session-Id": "sess-" + tc.version},
				respHeader: map[string]string{"Content-Type": "application/json"},
				resp:       []string{`[{"jsonrpc":"2.0","id":2,`, `"result":{}}]`}})
			ms := d.messages("s01")
			s := d.session("s01")
			if s.Version != tc.version || s.Era != protocol.EraLegacy || s.Opening != "initialize" {
				t.Errorf("session version %q era %v opening %q", s.Version, s.Era, s.Opening)
			}
			if len(ms) != 5 {
				t.Fatalf("%d messages, want 5 (initialize, result, 2 batch elements, 1 batch result)", len(ms))
			}
			if ms[2].Batch != 0 || ms[3].Batch != 1 || ms[4].Links.Request != ms[2].Seq {
				t.Errorf("batch elements %d %d; result linked to %d, want %d", ms[2].Batch, ms[3].Batch, ms[4].Links.Request, ms[2].Seq)
			}
			has := false
			for _, f := range ms[2].Findings {
				has = has || f.Kind == capture.FindingBatch
			}
			if has != tc.batchFinding {
				t.Errorf("batch finding on %s: %v, want %v", tc.version, has, tc.batchFinding)
			}
		})
	}
}

// A session id seen before the recorder started gets its own session, and
// the protocol version from the header.
func TestMidSession(t *testing.T) {
	d := newDriver(t, nil)
	d.exchange(ex{method: "POST", path: "/mcp", body: `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`,
		reqHeader:  map[string]string{"Content-Type": "application/json", "Mcp-Session-Id": "abc", "Mcp-Protocol-Version": "2025-06-18"},
		respHeader: map[string]string{"Content-Type": "application/json"},
		resp:       []string{`{"jsonrpc":"2.0","id":9,"result":{"tools":[]}}`}})
	d.messages("s01")
	s := d.session("s01")
	if s.Opening != "mid-session" || s.Version != "2025-06-18" || s.Era != protocol.EraLegacy || s.Key == "" || s.Key == "abc" {
		t.Errorf("session %+v", s)
	}
}

// Modern sessions: one per client fingerprint, a new one after the idle gap.
func TestModernGrouping(t *testing.T) {
	d := newDriver(t, &capture.RecorderOptions{IdleGap: time.Second})
	call := func(client string, id int) ex {
		return ex{method: "POST", path: "/mcp", reqHeader: map[string]string{"Content-Type": "application/json"},
			body:       fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":%q},"io.modelcontextprotocol/clientCapabilities":{}}}}`, id, client),
			respHeader: map[string]string{"Content-Type": "application/json"},
			resp:       []string{fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"resultType":"complete","tools":[]}}`, id)}}
	}
	d.exchange(call("a", 1))
	d.exchange(call("b", 1)) // same id, another client: its own session
	d.exchange(call("a", 2))
	d.advance(2 * time.Second)
	d.exchange(call("a", 3))
	a1, b, a2 := d.messages("s01"), d.messages("s02"), d.messages("s03")
	if len(a1) != 4 || len(b) != 2 || len(a2) != 2 {
		t.Fatalf("sessions hold %d, %d, %d messages; want 4, 2, 2", len(a1), len(b), len(a2))
	}
	for _, id := range []string{"s01", "s02", "s03"} {
		if s := d.session(id); s.Era != protocol.EraModern || s.Version != protocol.V20260728 || s.Opening != "request" {
			t.Errorf("session %s: %+v", id, s)
		}
	}
	if a1[1].Links.Request != a1[0].Seq || a1[3].Links.Request != a1[2].Seq {
		t.Error("responses not linked to their requests")
	}
}

func TestRedaction(t *testing.T) {
	run := func(opts capture.RedactOptions) (*capture.Exchange, []*capture.Message) {
		d := newDriver(t, &capture.RecorderOptions{Redact: opts})
		d.exchange(ex{method: "POST", path: "/mcp?access_token=tok-in-the-url-123&x=1",
			body: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","clientInfo":{"name":"c"}}}`,
			reqHeader: map[string]string{"Content-Type": "application/json", "Authorization": "Bearer sk-0123456789abcdef",
				"X-Api-Key": "key-0123456789", "X-Tenant": "acme-tenant-42", "Cookie": "a=cookie-value-123456"},
			respHeader: map[string]string{"Content-Type": "application/json", "Mcp-Session-Id": "real-session-id", "Set-Cookie": "b=zzzzzzzzzz"},
			resp:       []string{`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","echo":"you sent sk-0123456789abcdef"}}`}})
		ms := d.messages("s01")
		var x *capture.Exchange
		for e := range d.store.Exchanges(context.Background(), "s01") {
			x = e
		}
		return x, ms
	}
	x, ms := run(capture.RedactOptions{Headers: []string{"X-Tenant"}, PseudonymKey: []byte("k")})
	for _, h := range []string{"X-Api-Key", "X-Tenant", "Cookie"} {
		if v := x.RequestHeader.Get(h); v != capture.Redacted {
			t.Errorf("%s stored as %q", h, v)
		}
	}
	if v := x.RequestHeader.Get("Authorization"); v != "Bearer "+capture.Redacted {
		t.Errorf("Authorization stored as %q", v)
	}
	if v := x.ResponseHeader.Get("Set-Cookie"); v != capture.Redacted {
		t.Errorf("Set-Cookie stored as %q", v)
	}
	if v := x.ResponseHeader.Get("Mcp-Session-Id"); !strings.HasPrefix(v, "sid-") {
		t.Errorf("Mcp-Session-Id stored as %q, want a pseudonym", v)
	}
	if strings.Contains(x.URL, "tok-in-the-url") || !strings.Contains(x.URL, "x=1") {
		t.Errorf("URL stored as %q", x.URL)
	}
	if strings.Contains(string(ms[1].Raw), "sk-0123456789abcdef") {
		t.Errorf("a secret from a header, echoed in a body, was stored: %s", ms[1].Raw)
	}
	if len(ms[1].Findings) == 0 || ms[1].Findings[0].Kind != capture.FindingRedacted {
		t.Errorf("scrubbed message carries no redacted finding: %+v", ms[1].Findings)
	}
	// The same id gives the same pseudonym under the same key.
	x2, _ := run(capture.RedactOptions{PseudonymKey: []byte("k")})
	if x2.ResponseHeader.Get("Mcp-Session-Id") != x.ResponseHeader.Get("Mcp-Session-Id") {
		t.Error("pseudonym not stable for one key")
	}
	x3, ms3 := run(capture.RedactOptions{Disabled: true})
	if x3.RequestHeader.Get("Authorization") != "Bearer sk-0123456789abcdef" || x3.ResponseHeader.Get("Mcp-Session-Id") != "real-session-id" ||
		!strings.Contains(string(ms3[1].Raw), "sk-0123456789abcdef") {
		t.Error("--no-redact still redacted")
	}
}

// Hostile ordering: equal ids in flight in both directions link correctly,
// and a response nobody asked for becomes a finding, not a wrong link.
func TestEqualIDsBothDirections(t *testing.T) {
	d := newDriver(t, nil)
	d.exchange(initialize(protocol.V20251125))
	h := map[string]string{"Content-Type": "application/json", "Mcp-Session-Id": "sess-2025-11-25"}
	d.exchange(ex{method: "POST", path: "/mcp", reqHeader: h, body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sample"}}`,
		respHeader: map[string]string{"Content-Type": "text/event-stream"},
		resp: []string{"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"sampling/createMessage\",\"params\":{}}\n\n",
			"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[]}}\n\n"}})
	d.exchange(ex{method: "POST", path: "/mcp", reqHeader: h, body: `{"jsonrpc":"2.0","id":1,"result":{"role":"assistant","content":{"type":"text","text":"x"},"model":"m"}}`, status: 202})
	d.exchange(ex{method: "POST", path: "/mcp", reqHeader: h, body: `{"jsonrpc":"2.0","id":77,"result":{}}`, status: 202})
	ms := d.messages("s01")
	// 0 init, 1 init result, 2 tools/call, 3 sampling req, 4 tools/call result, 5 sampling answer, 6 orphan
	if len(ms) != 7 {
		t.Fatalf("%d messages", len(ms))
	}
	if ms[3].Links.Parent != ms[2].Seq || ms[4].Links.Request != ms[2].Seq || ms[5].Links.Request != ms[3].Seq {
		t.Errorf("links: sampling parent %d, result→%d, answer→%d; want %d, %d, %d",
			ms[3].Links.Parent, ms[4].Links.Request, ms[5].Links.Request, ms[2].Seq, ms[2].Seq, ms[3].Seq)
	}
	if ms[6].Links.Request != 0 || len(ms[6].Findings) != 1 || ms[6].Findings[0].Kind != capture.FindingOrphanResponse {
		t.Errorf("orphan response: links %+v findings %+v", ms[6].Links, ms[6].Findings)
	}
}

// A message is never stored without its exchange: a reader that comes
// while a call's stream is open (a dashboard, an export while recording)
// finds the exchange of every message it finds, as the proxy knew it
// then — its status and response headers too — not only once the stream
// ends.
func TestInFlightExchangeStoredWithItsMessages(t *testing.T) {
	d := newDriver(t, nil)
	d.exchange(initialize(protocol.V20250618))
	tap := d.begin(ex{method: "POST", path: "/mcp", body: `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow"}}`,
		reqHeader: map[string]string{"Content-Type": "application/json", "Mcp-Session-Id": "sess-" + protocol.V20250618}})
	defer tap.End("", false)

	check := func(when string, wantStatus int, wantMessages int) {
		t.Helper()
		ms := d.messages("s01")
		if len(ms) != wantMessages {
			t.Fatalf("%s: %d messages stored, want %d", when, len(ms), wantMessages)
		}
		xs := map[uint64]*capture.Exchange{}
		for x, err := range d.store.Exchanges(context.Background(), "s01") {
			if err != nil {
				t.Fatal(err)
			}
			xs[x.ID] = x
		}
		for _, m := range ms {
			if xs[m.ExchangeID] == nil {
				t.Fatalf("%s: message %d (%s %s) names exchange %d, which the store does not hold yet (it holds %d)",
					when, m.Seq, m.Kind, m.Method, m.ExchangeID, len(xs))
			}
		}
		x := xs[tap.ID()]
		if x.Status != wantStatus || (wantStatus != 0 && x.ResponseHeader.Get("Content-Type") != "text/event-stream") {
			t.Errorf("%s: the open exchange is stored with status %d and headers %v, want status %d", when, x.Status, x.ResponseHeader, wantStatus)
		}
	}
	check("the request sent", 0, 3)
	tap.Response(200, http.Header{"Content-Type": {"text/event-stream"}}, false)
	tap.ResponseBody([]byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1}}\n\n"))
	check("the first event forwarded", 200, 4)
}
