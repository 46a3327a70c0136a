package replay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mcptape/mcptape/capture/memstore"
	"github.com/mcptape/mcptape/protocol"
	"github.com/mcptape/mcptape/replay"
)

// discoverServer is a raw 2026-07-28 server that numbers its answers:
// server/discover at 2026-07-28 gets a result, at any other version the
// error a go-sdk server gives; any other request a text result.
func discoverServer(t *testing.T) *httptest.Server {
	t.Helper()
	var n atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		m := protocol.Decode(b)
		p, _ := protocol.ParseParams(m.Params)
		i := n.Add(1)
		w.Header().Set("Content-Type", "application/json")
		switch {
		case m.Method == "server/discover" && p.ProtocolVersion != "2026-07-28":
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32602,"message":"unsupported protocol version (answer %d)","data":{"supported":["2026-07-28"]}}}`, m.ID, i)
		case m.Method == "server/discover":
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"resultType":"complete","supportedVersions":["2026-07-28"],"serverInfo":{"name":"numbered","version":"%d"},"capabilities":{"tools":{}}}}`, m.ID, i)
		default:
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"resultType":"complete","content":[{"type":"text","text":"%d"}]}}`, m.ID, i)
		}
	}))
	t.Cleanup(up.Close)
	return up
}

// discoverAt is a 2026-07-28 client's server/discover at a protocol
// version.
func discoverAt(id int, client, version string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":%q,"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":%q,"version":"1"}}}}`, id, version, client)
}

// answerOf is a response's result serverInfo.version or text, or its
// error message, for comparing what the recording and the replay said.
func answerOf(t *testing.T, body []byte) string {
	t.Helper()
	result, rpcErr := rpcResponse(t, body)
	if rpcErr != nil {
		msg, _, _, _ := protocol.Member(rpcErr, "message")
		return "error " + string(msg)
	}
	if info, _, _, ok := protocol.Member(result, "serverInfo"); ok {
		v, _, _, _ := protocol.Member(info, "version")
		return "discovered " + string(v)
	}
	var r struct{ Content []struct{ Text string } }
	if json.Unmarshal(result, &r) != nil || len(r.Content) == 0 {
		t.Fatalf("no text in %s", body)
	}
	return "text " + r.Content[0].Text
}

// joinTapes is one tape of the sessions of several, as importing each
// into one store and exporting it gives.
func joinTapes(t *testing.T, tapes ...*replay.Tape) *replay.Tape {
	t.Helper()
	ctx := context.Background()
	store := memstore.New()
	for _, tp := range tapes {
		if _, err := replay.Import(ctx, store, tp, nil); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := replay.Export(ctx, store, nil, &buf, "test"); err != nil {
		t.Fatal(err)
	}
	out, err := replay.ReadTape(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A 2026-07-28 client's repeated server/discover (a valid one, then
// versions the server does not support) belongs to the session it is
// being given: each is answered from that session, in turn, as recorded —
// not by starting over on another session, or on the same one.
func TestRepeatedDiscoverStaysInItsSession(t *testing.T) {
	h := func(method string) map[string]string {
		return map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": method}
	}
	script := []struct{ method, body string }{
		{"server/discover", discoverAt(1, "b", "2026-07-28")},
		{"server/discover", discoverAt(2, "b", "2099-01-01")},
		{"server/discover", discoverAt(3, "b", "2098-01-01")},
		{"tools/call", `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"count","arguments":{},` + metaFor("b") + `}}`},
	}
	run := func(u string) []string {
		var got []string
		for _, st := range script {
			_, b, err := post(t, u, st.body, h(st.method))
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, answerOf(t, b))
		}
		return got
	}
	var recorded []string
	tape := recordTape(t, discoverServer(t).URL, func(px string) {
		// Another client's session first: a discover at a version the
		// server refused.
		if _, _, err := post(t, px+"/mcp", discoverAt(1, "a", "2099-01-01"), h("server/discover")); err != nil {
			t.Fatal(err)
		}
		recorded = run(px + "/mcp")
	})
	if len(tape.Sessions) != 2 {
		t.Fatalf("recorded %d sessions, want 2", len(tape.Sessions))
	}
	if want := []string{`discovered "2"`, "error \"unsupported protocol version (answer 3)\"", "error \"unsupported protocol version (answer 4)\"", "text 5"}; strings.Join(recorded, "|") != strings.Join(want, "|") {
		t.Fatalf("the recording saw %q, want %q", recorded, want)
	}
	s, hs := serve(t, tape, &replay.ServerOptions{Timing: replay.TimingFast, Strict: true})
	if got := run(hs.URL + "/mcp"); strings.Join(got, "|") != strings.Join(recorded, "|") {
		t.Errorf("the replay answered %q, the recording %q", got, recorded)
	}
	if r := s.Report(); !r.OK() {
		t.Errorf("strict replay: %q", r.Failures)
	}
}

// Among recorded sessions of one client that are otherwise alike, the
// one whose server/discover asked for the live client's protocol version
// answers it.
func TestDiscoverPicksTheSessionOfItsVersion(t *testing.T) {
	h := map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "server/discover"}
	up := discoverServer(t).URL
	refused := recordTape(t, up, func(px string) {
		if _, _, err := post(t, px+"/mcp", discoverAt(1, "c", "2099-01-01"), h); err != nil {
			t.Fatal(err)
		}
	})
	var want string
	valid := recordTape(t, up, func(px string) {
		_, b, err := post(t, px+"/mcp", discoverAt(1, "c", "2026-07-28"), h)
		if err != nil {
			t.Fatal(err)
		}
		want = answerOf(t, b)
	})
	tape := joinTapes(t, refused, valid)
	if len(tape.Sessions) != 2 {
		t.Fatalf("joined %d sessions, want 2", len(tape.Sessions))
	}
	s, hs := serve(t, tape, &replay.ServerOptions{Timing: replay.TimingFast, Strict: true})
	_, b, err := post(t, hs.URL+"/mcp", discoverAt(1, "c", "2026-07-28"), h)
	if err != nil {
		t.Fatal(err)
	}
	if got := answerOf(t, b); got != want {
		t.Errorf("a valid discover got %s, want the recorded %s", got, want)
	}
	if r := s.Report(); !r.OK() {
		t.Errorf("strict replay: %q", r.Failures)
	}
}
