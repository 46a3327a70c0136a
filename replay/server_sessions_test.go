package replay_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/protocol"
	"github.com/mcptape/mcptape/replay"
)

func metaFor(client string) string {
	return fmt.Sprintf(`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":%q,"version":"1"}}`, client)
}

// modernClient sends what a 2026-07-28 client named client sends: server/discover,
// then tools/call count; it returns the two answers as resultText gives them.
func modernClient(t *testing.T, u, client string) []string {
	t.Helper()
	var got []string
	for _, req := range []struct{ method, body string }{
		{"server/discover", `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + metaFor(client) + `}}`},
		{"tools/call", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"count","arguments":{},` + metaFor(client) + `}}`},
	} {
		_, b, err := post(t, u, req.body, map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": req.method})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, resultText(t, b))
	}
	return got
}

// clientsTape records one 2026-07-28 session per client name against a raw
// server that numbers its answers: client i's discover gets 2i-1, its
// count call 2i.
func clientsTape(t *testing.T, clients ...string) *replay.Tape {
	t.Helper()
	tape := recordTape(t, countingServer(t).URL, func(px string) {
		for _, c := range clients {
			modernClient(t, px+"/mcp", c)
		}
	})
	if len(tape.Sessions) != len(clients) {
		t.Fatalf("recorded %d sessions for %d clients", len(tape.Sessions), len(clients))
	}
	return tape
}

// A tape of two sessions on one path: each live client gets the answers
// of its own recorded session, not the first session's over again.
func TestEachLiveClientGetsItsOwnSession(t *testing.T) {
	t.Run("legacy", func(t *testing.T) {
		runs := []*fixtures.ClientOptions{{Only: []string{"echo"}}, {Only: []string{"add"}}}
		tape, recorded := recordRuns(t, fixtures.PathStateful, runs...)
		if len(tape.Sessions) != 2 {
			t.Fatalf("recorded %d sessions, want 2", len(tape.Sessions))
		}
		s, hs := serve(t, tape, &replay.ServerOptions{Timing: replay.TimingFast, Strict: true})
		for i, opts := range runs {
			replayed := runClient(t, hs.URL+fixtures.PathStateful, opts)
			recorded[i].URL, replayed.URL = "", ""
			if d := cmp.Diff(recorded[i], replayed); d != "" {
				t.Errorf("live client %d saw something else than recorded client %d (-recorded +replayed):\n%s", i+1, i+1, d)
			}
		}
		if r := s.Report(); !r.OK() {
			t.Errorf("strict replay: %q", r.Failures)
		}
	})
	t.Run("modern by handshake", func(t *testing.T) {
		s, hs := serve(t, clientsTape(t, "a", "b"), &replay.ServerOptions{Timing: replay.TimingFast, Strict: true})
		// Out of recorded order: each gets the session of its clientInfo.
		for _, tc := range []struct {
			client string
			want   []string
		}{{"b", []string{"1 3", "2 4"}}, {"a", []string{"1 1", "2 2"}}} {
			if got := modernClient(t, hs.URL+"/mcp", tc.client); !slicesEqual(got, tc.want) {
				t.Errorf("live client %s got %q, want %q", tc.client, got, tc.want)
			}
		}
		if r := s.Report(); !r.OK() {
			t.Fatalf("strict replay: %q", r.Failures)
		}
		// a's client again: it begins anew, so a's answers are replayed
		// again, and a strict replay says so of each.
		if got := modernClient(t, hs.URL+"/mcp", "a"); !slicesEqual(got, []string{"1 1", "2 2"}) {
			t.Errorf("a live client again got %q", got)
		}
		if r := s.Report(); len(r.Failures) != 2 || !strings.Contains(r.Failures[0], "server/discover") || !strings.Contains(r.Failures[1], "tools/call count") ||
			!strings.Contains(r.Failures[0], "is replayed again") || !strings.Contains(r.Failures[1], "is replayed again") {
			t.Errorf("strict report after a reuse: %q", r.Failures)
		}
	})
	t.Run("modern in order", func(t *testing.T) {
		// Clients the recording does not know apart get the sessions in
		// recorded order, one each.
		s, hs := serve(t, clientsTape(t, "a", "b"), nil)
		for _, want := range [][]string{{"1 1", "2 2"}, {"1 3", "2 4"}, {"1 1", "2 2"}} {
			if got := modernClient(t, hs.URL+"/mcp", "c"); !slicesEqual(got, want) {
				t.Errorf("live client c got %q, want %q", got, want)
			}
		}
		if r := s.Report(); len(r.Misses) != 0 || !r.OK() {
			t.Errorf("lenient replay: misses %q, failures %q", r.Misses, r.Failures)
		}
	})
}

func slicesEqual(a, b []string) bool { return strings.Join(a, "\x00") == strings.Join(b, "\x00") }

// rpcResponse finds the JSON-RPC response in a JSON or SSE body.
func rpcResponse(t *testing.T, body []byte) (result json.RawMessage, rpcErr json.RawMessage) {
	t.Helper()
	for _, cand := range append([]string{string(body)}, strings.Split(string(body), "\n")...) {
		cand = strings.TrimPrefix(cand, "data: ")
		m := protocol.Decode([]byte(cand))
		if m.Kind == protocol.KindResult || m.Kind == protocol.KindError {
			r, _, _, _ := protocol.Member(m.Raw, "result")
			e, _, _, _ := protocol.Member(m.Raw, "error")
			return r, e
		}
	}
	t.Fatalf("no JSON-RPC response in %q", body)
	return nil, nil
}

// The handshake is answered as recorded whoever the client says it is:
// the recorded protocolVersion, server info and capabilities, a fresh
// session; strict mode notes the difference.
func TestHandshakeAnsweredAsRecorded(t *testing.T) {
	tape, _ := record(t, fixtures.PathStateful, &fixtures.ClientOptions{Only: []string{"echo"}})
	var callParams json.RawMessage
	var recordedInit *protocol.Result
	for _, m := range tape.Sessions[0].Messages {
		if m.Direction == protocol.ClientToServer && m.Method == "tools/call" {
			callParams, _, _, _ = protocol.Member(m.Raw, "params")
		}
		if m.Direction == protocol.ServerToClient && m.Method == "initialize" && m.Kind == protocol.KindResult {
			r, _, _, _ := protocol.Member(m.Raw, "result")
			res, _ := protocol.ParseResult(r)
			recordedInit = &res
		}
	}
	if recordedInit == nil || recordedInit.ProtocolVersion == "" || callParams == nil {
		t.Fatal("the recording has no initialize result or no tools/call")
	}
	for _, strict := range []bool{false, true} {
		t.Run(fmt.Sprintf("legacy strict=%v", strict), func(t *testing.T) {
			s, hs := serve(t, tape, &replay.ServerOptions{Timing: replay.TimingFast, Strict: strict})
			u := hs.URL + fixtures.PathStateful
			req, _ := http.NewRequest("POST", u, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"roots":{}},"clientInfo":{"name":"another-client","version":"9.9"}}}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			result, rpcErr := rpcResponse(t, body)
			got, _ := protocol.ParseResult(result)
			if rpcErr != nil || got.ProtocolVersion != recordedInit.ProtocolVersion {
				t.Fatalf("initialize from another client: error %s, protocolVersion %q (want the recorded %q)", rpcErr, got.ProtocolVersion, recordedInit.ProtocolVersion)
			}
			sid := res.Header.Get("Mcp-Session-Id")
			if sid == "" {
				t.Fatal("no session id minted")
			}
			h := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": got.ProtocolVersion}
			if code, _, err := post(t, u, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, h); err != nil || code != http.StatusAccepted {
				t.Fatalf("notifications/initialized: %d %v", code, err)
			}
			_, b, err := post(t, u, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":`+string(callParams)+`}`, h)
			if err != nil {
				t.Fatal(err)
			}
			if txt := resultText(t, b); txt != "2 hello, tape" {
				t.Errorf("the call after the handshake got %q", txt)
			}
			r := s.Report()
			if !strict {
				if !r.OK() {
					t.Errorf("lenient replay failed: %q", r.Failures)
				}
				return
			}
			all := strings.Join(r.Failures, "\n")
			for _, want := range []string{"initialize differs from the recording (answered as recorded)",
				`params.clientInfo.version: live "9.9"`, `params.protocolVersion: live "2025-06-18"`, "params.capabilities"} {
				if !strings.Contains(all, want) {
					t.Errorf("strict report lacks %q: %q", want, r.Failures)
				}
			}
			if len(r.Misses) != 0 {
				t.Errorf("misses: %q", r.Misses)
			}
		})
	}
	t.Run("modern strict", func(t *testing.T) {
		s, hs := serve(t, clientsTape(t, "a"), &replay.ServerOptions{Timing: replay.TimingFast, Strict: true})
		if got := modernClient(t, hs.URL+"/mcp", "z"); !slicesEqual(got, []string{"1 1", "2 2"}) {
			t.Errorf("another client got %q", got)
		}
		r := s.Report()
		if len(r.Failures) != 1 || !strings.Contains(r.Failures[0], `server/discover differs from the recording (answered as recorded): params._meta.io.modelcontextprotocol/clientInfo.name: live "z", recorded "a"`) {
			t.Errorf("strict report: %q", r.Failures)
		}
	})
}
