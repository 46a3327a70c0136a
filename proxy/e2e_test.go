package proxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/badgerstore"
	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/protocol"
	"github.com/mcptape/mcptape/proxy"
)

// fixtureRig is the fixture server behind a recording proxy on a Badger
// store on disk.
type fixtureRig struct {
	*rig
}

func newFixtureRig(t *testing.T) *fixtureRig {
	t.Helper()
	store, err := badgerstore.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	r := newRig(t, fixtures.Handler(nil), &rigOptions{store: store})
	// Long-lived GET and listen streams must not hold up Close.
	t.Cleanup(func() { r.px.CloseClientConnections(); r.up.CloseClientConnections() })
	return &fixtureRig{r}
}

func (r *fixtureRig) runClient(t *testing.T, path string, opts *fixtures.ClientOptions) *fixtures.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if opts == nil {
		opts = &fixtures.ClientOptions{}
	}
	tr := &http.Transport{Proxy: nil}
	defer tr.CloseIdleConnections()
	opts.HTTPClient = &http.Client{Transport: tr}
	rep, err := fixtures.RunClient(ctx, r.px.URL+path, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range rep.Steps {
		if s.Err != "" && s.Name != fixtures.ToolError {
			t.Errorf("step %s failed through the proxy: %s", s.Name, s.Err)
		}
	}
	return rep
}

// sessionAt returns the only session recorded on path.
func (r *fixtureRig) sessionAt(t *testing.T, path string) *capture.Session {
	t.Helper()
	var found []*capture.Session
	for _, s := range r.sessions(t) {
		if s.Path == path {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		for _, s := range found {
			t.Logf("session %s opening %s era %v calls %d", s.ID, s.Opening, s.Era, s.Calls)
			for _, m := range r.messages(t, s.ID) {
				t.Logf("  %d %v %v %s %s", m.Seq, m.Direction, m.Kind, m.Method, m.Raw[:min(len(m.Raw), 300)])
			}
		}
		t.Fatalf("%d sessions on %s, want 1", len(found), path)
	}
	return found[0]
}

type callView struct {
	req  *capture.Message
	resp *capture.Message
	kids []*capture.Message // server→client requests under it
}

// calls indexes the client requests of a session by tool name (in order).
func callsByTool(ms []*capture.Message) (map[string][]*callView, map[uint64]*capture.Message) {
	bySeq := map[uint64]*capture.Message{}
	views := map[uint64]*callView{}
	byTool := map[string][]*callView{}
	for _, m := range ms {
		bySeq[m.Seq] = m
		if m.Direction == protocol.ClientToServer && m.Kind == protocol.KindRequest {
			v := &callView{req: m}
			views[m.Seq] = v
			if m.Method == protocol.MethodToolsCall {
				byTool[m.Name] = append(byTool[m.Name], v)
			}
		}
	}
	for _, m := range ms {
		if m.Direction == protocol.ServerToClient && m.Kind.IsResponse() && m.Links.Request != 0 {
			if v := views[m.Links.Request]; v != nil {
				v.resp = m
			}
		}
		if m.Direction == protocol.ServerToClient && m.Kind == protocol.KindRequest && m.Links.Parent != 0 {
			if v := views[m.Links.Parent]; v != nil {
				v.kids = append(v.kids, m)
			}
		}
	}
	return byTool, bySeq
}

func TestEndToEndLegacy(t *testing.T) {
	r := newFixtureRig(t)
	rep := r.runClient(t, fixtures.PathStateful, nil)
	if rep.ProtocolVersion != protocol.V20251125 {
		t.Fatalf("negotiated %s through the proxy, want 2025-11-25", rep.ProtocolVersion)
	}
	r.sync(t)
	s := r.sessionAt(t, fixtures.PathStateful)
	if s.Era != protocol.EraLegacy || s.Version != protocol.V20251125 || s.Opening != "discover+initialize" ||
		s.Client.Name != fixtures.ClientName || s.Server.Name != fixtures.ServerName || s.Status != capture.StatusClosed || s.Key == "" {
		t.Errorf("session %+v", s)
	}
	ms := r.messages(t, s.ID)
	checkOrderAndPairs(t, ms)
	first := ms[0]
	if first.Method != protocol.MethodDiscover || first.Direction != protocol.ClientToServer {
		t.Errorf("first message %s %v: want the server/discover probe", first.Method, first.Direction)
	}
	byTool, bySeq := callsByTool(ms)
	for _, tool := range []string{fixtures.ToolEcho, fixtures.ToolAdd, fixtures.ToolSlow, fixtures.ToolSample, fixtures.ToolSampleTools,
		fixtures.ToolElicitForm, fixtures.ToolElicitURL, fixtures.ToolRoots, fixtures.ToolBig, fixtures.ToolFail, fixtures.ToolError, fixtures.ToolNotifyChanges} {
		vs := byTool[tool]
		if len(vs) != 1 {
			t.Errorf("tool %s: %d tools/call requests recorded, want 1", tool, len(vs))
			continue
		}
		v := vs[0]
		if v.resp == nil {
			t.Errorf("tool %s: no response linked", tool)
			continue
		}
		if !bytes.Equal(v.resp.ID, v.req.ID) || v.resp.Method != protocol.MethodToolsCall || v.resp.Name != tool {
			t.Errorf("tool %s: response id %s method %s name %s, request id %s", tool, v.resp.ID, v.resp.Method, v.resp.Name, v.req.ID)
		}
		wantKind := protocol.KindResult
		if tool == fixtures.ToolError {
			wantKind = protocol.KindError
		}
		if v.resp.Kind != wantKind {
			t.Errorf("tool %s: response kind %v, want %v", tool, v.resp.Kind, wantKind)
		}
	}
	kidMethods := func(tool string) []string {
		var out []string
		if vs := byTool[tool]; len(vs) == 1 {
			for _, k := range vs[0].kids {
				out = append(out, k.Method)
			}
		}
		return out
	}
	for tool, want := range map[string]string{
		fixtures.ToolSample:      "sampling/createMessage",
		fixtures.ToolSampleTools: "sampling/createMessage sampling/createMessage",
		fixtures.ToolElicitForm:  "elicitation/create",
		fixtures.ToolElicitURL:   "elicitation/create",
		fixtures.ToolRoots:       "roots/list",
		fixtures.ToolEcho:        "",
	} {
		if got := strings.Join(kidMethods(tool), " "); got != want {
			t.Errorf("server→client requests under %s: %q, want %q", tool, got, want)
		}
	}
	// The tool loop is a chain, and every nested request has its answer.
	if vs := byTool[fixtures.ToolSampleTools]; len(vs) == 1 && len(vs[0].kids) == 2 {
		if vs[0].kids[1].Links.Previous != vs[0].kids[0].Seq {
			t.Errorf("second sampling request does not chain to the first")
		}
	}
	answered := map[uint64]bool{}
	progress := 0
	for _, m := range ms {
		if m.Direction == protocol.ClientToServer && m.Kind.IsResponse() {
			answered[m.Links.Request] = true
		}
		if m.Method == protocol.MethodProgress {
			if req := bySeq[m.Links.Request]; req == nil || req.Name != fixtures.ToolSlow {
				t.Errorf("progress %d not linked to the slow call", m.Seq)
			}
			progress++
		}
	}
	for _, vs := range byTool {
		for _, k := range vs[0].kids {
			if !answered[k.Seq] {
				t.Errorf("%s %s: the client's answer is not linked", k.Method, k.ID)
			}
		}
	}
	if progress != rep.Seen.Progress {
		t.Errorf("%d progress notifications recorded, the client saw %d", progress, rep.Seen.Progress)
	}
	// The big result is stored whole.
	if vs := byTool[fixtures.ToolBig]; len(vs) == 1 && vs[0].resp != nil {
		full, err := r.store.Message(context.Background(), vs[0].resp.Seq)
		if err != nil || !bytes.Contains(full.Raw, []byte(fixtures.BigText(fixtures.DefaultBigBytes))) {
			t.Errorf("big result not stored whole (%v)", err)
		}
	}
}

func TestEndToEndModern(t *testing.T) {
	r := newFixtureRig(t)
	rep := r.runClient(t, fixtures.PathStateless, nil)
	if rep.ProtocolVersion != protocol.V20260728 {
		t.Fatalf("negotiated %s through the proxy, want 2026-07-28", rep.ProtocolVersion)
	}
	r.sync(t)
	s := r.sessionAt(t, fixtures.PathStateless)
	if s.Era != protocol.EraModern || s.Version != protocol.V20260728 || s.Opening != "discover" ||
		s.Client.Name != fixtures.ClientName || s.Server.Name != fixtures.ServerName || s.Key != "" {
		t.Errorf("session %+v", s)
	}
	ms := r.messages(t, s.ID)
	checkOrderAndPairs(t, ms)
	byTool, bySeq := callsByTool(ms)
	rounds := map[string]int{fixtures.ToolSample: 2, fixtures.ToolSampleTools: 3, fixtures.ToolElicitForm: 2, fixtures.ToolElicitURL: 2, fixtures.ToolRoots: 2, fixtures.ToolEcho: 1}
	for tool, want := range rounds {
		vs := byTool[tool]
		if len(vs) != want {
			t.Errorf("tool %s: %d rounds recorded, want %d", tool, len(vs), want)
			continue
		}
		for i, v := range vs {
			if v.resp == nil {
				t.Errorf("tool %s round %d: no response", tool, i)
				continue
			}
			res, _ := protocol.ParseResult(json.RawMessage(resultOf(v.resp.Raw)))
			if i < want-1 && res.ResultType != "input_required" {
				t.Errorf("tool %s round %d: resultType %q, want input_required", tool, i, res.ResultType)
			}
			if i > 0 && v.req.Links.Previous != vs[i-1].req.Seq {
				t.Errorf("tool %s round %d: not chained to round %d", tool, i, i-1)
			}
			if len(v.kids) != 0 {
				t.Errorf("tool %s: server→client requests on a 2026-07-28 session", tool)
			}
		}
	}
	acks := 0
	for _, m := range ms {
		if m.Method == protocol.MethodSubscriptionsAck {
			acks++
			if req := bySeq[m.Links.Request]; req == nil || req.Method != protocol.MethodSubscriptionsListen {
				t.Errorf("acknowledgement %d not linked to its subscriptions/listen", m.Seq)
			}
		}
	}
	if acks != rep.Seen.SubscriptionAcks {
		t.Errorf("%d acknowledgements recorded, client saw %d", acks, rep.Seen.SubscriptionAcks)
	}
}

func resultOf(raw []byte) []byte {
	var v struct{ Result json.RawMessage }
	_ = json.Unmarshal(raw, &v)
	return v.Result
}

// checkOrderAndPairs checks what must hold in any session: seqs increase,
// each response comes after the request it answers, with the same id, in
// the other direction.
func checkOrderAndPairs(t *testing.T, ms []*capture.Message) {
	t.Helper()
	bySeq := map[uint64]*capture.Message{}
	var last uint64
	for _, m := range ms {
		if m.Seq <= last {
			t.Fatalf("seq %d after %d", m.Seq, last)
		}
		last = m.Seq
		bySeq[m.Seq] = m
		for _, f := range m.Findings {
			if f.Kind != capture.FindingRedacted {
				t.Errorf("message %d %s: unexpected finding %s: %s", m.Seq, m.Method, f.Kind, f.Message)
			}
		}
		if !m.Kind.IsResponse() {
			continue
		}
		req := bySeq[m.Links.Request]
		if req == nil {
			t.Errorf("response %d (%s id %s) is not linked to an earlier request", m.Seq, m.Direction, m.ID)
			continue
		}
		if req.Direction == m.Direction || !bytes.Equal(req.ID, m.ID) {
			t.Errorf("response %d linked to request %d: directions %v/%v ids %s/%s", m.Seq, req.Seq, req.Direction, m.Direction, req.ID, m.ID)
		}
	}
}

// TestTransparentGoSDK compares what a client receives from go-sdk's
// stateless server directly and through the proxy, byte for byte.
func TestTransparentGoSDK(t *testing.T) {
	r := newFixtureRig(t)
	h := map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "echo"}
	body := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"text":"byte for byte"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"}}}}`
	direct := do(t, "POST", r.up.URL+fixtures.PathStateless, body, h)
	via := do(t, "POST", r.px.URL+fixtures.PathStateless, body, h)
	if direct.status != 200 || !bytes.Contains(direct.body, []byte("byte for byte")) {
		t.Fatalf("direct: %d %s", direct.status, direct.body)
	}
	if via.status != direct.status || !bytes.Equal(via.body, direct.body) {
		t.Fatalf("through the proxy:\n%q\ndirect:\n%q", via.body, direct.body)
	}
}

// TestStreamsNeverCut makes 3,000 streaming calls in a row: every response
// must arrive whole (libraries.md §3.6b: the stock reverse proxy cuts about
// 4% of them), and the record must match what the client received.
func TestStreamsNeverCut(t *testing.T) {
	r := newFixtureRig(t)
	const n = 3000
	h := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"},
		"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"echo"}}
	tr := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	cut := 0
	for i := 1; i <= n; i++ {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"call %d"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"loop","version":"1"}}}}`, i, i)
		req, _ := http.NewRequest("POST", r.px.URL+fixtures.PathStateless, strings.NewReader(body))
		req.Header = h.Clone()
		res, err := client.Do(req)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		got, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil || !bytes.Contains(got, []byte(fmt.Sprintf(`"id":%d,"result"`, i))) || !bytes.HasSuffix(got, []byte("\n\n")) {
			cut++
			t.Errorf("call %d: truncated or wrong response (%v): %q", i, err, got)
			if cut > 5 {
				t.FailNow()
			}
		}
	}
	r.sync(t)
	results := 0
	for _, m := range r.all(t) {
		if m.Kind == protocol.KindResult && m.Direction == protocol.ServerToClient {
			results++
		}
	}
	if results != n {
		t.Errorf("%d results recorded for %d calls", results, n)
	}
}

// TestNoLossUnderLoad runs concurrent calls and checks the store holds
// every message the clients exchanged.
func TestNoLossUnderLoad(t *testing.T) {
	r := newFixtureRig(t)
	const workers = 32
	d := 2 * time.Second
	if testing.Short() {
		d = 500 * time.Millisecond
	}
	var calls atomic.Int64
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	tr := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: workers}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(deadline); i++ {
				body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"w%d"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"load","version":"1"}}}}`, i, w)
				req, _ := http.NewRequest("POST", r.px.URL+fixtures.PathStateless, strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
				req.Header.Set("Mcp-Method", "tools/call")
				req.Header.Set("Mcp-Name", "echo")
				res, err := client.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if !bytes.Contains(b, []byte(`"result"`)) {
					t.Errorf("bad response %q", b)
					return
				}
				calls.Add(1)
			}
		}()
	}
	wg.Wait()
	r.sync(t)
	stored := 0
	for _, m := range r.all(t) {
		if m.Kind == protocol.KindRequest || m.Kind == protocol.KindResult {
			stored++
		}
	}
	st := r.rec.Stats()
	t.Logf("%d calls in %v at concurrency %d; %d messages stored; stats %+v", calls.Load(), d, workers, stored, st)
	if int64(stored) != 2*calls.Load() || st.Lost != 0 || st.Dropped != 0 {
		t.Errorf("clients exchanged %d messages, the store holds %d (lost %d, dropped %d)", 2*calls.Load(), stored, st.Lost, st.Dropped)
	}
}

var _ = url.Parse
var _ = httptest.NewServer
var _ = proxy.New
