package capture

import (
	"testing"
	"time"

	"github.com/mcptape/mcptape/protocol"
)

// The per-session linker on its own: handed decoded messages as the
// batcher hands them, it links each to what it answers or belongs to.

// linkOne links raw, carried in direction dir by xs, as message seq.
func linkOne(st *linker, xs *exchange, dir protocol.Direction, seq uint64, raw string) (*Message, *Message) {
	pm := protocol.Decode([]byte(raw))
	m := &Message{Seq: seq, Direction: dir, Time: t0.Add(time.Duration(seq) * time.Millisecond), Kind: pm.Kind, Method: pm.Method}
	params, _ := protocol.ParseParams(pm.Params)
	return m, st.link(xs, dir, &pm, &params, m)
}

func TestLinkerLinksCalls(t *testing.T) {
	st := newLinker(Session{ID: "s", Era: protocol.EraLegacy, Version: "2025-11-25"}, "", t0, nil, nil)
	post := &exchange{x: Exchange{ID: 1}, sess: st}
	get := &exchange{x: Exchange{ID: 2, Method: "GET"}, sess: st}
	answer := &exchange{x: Exchange{ID: 3}, sess: st}
	c2s, s2c := protocol.ClientToServer, protocol.ServerToClient

	call, _ := linkOne(st, post, c2s, 1, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sample","_meta":{"progressToken":"t1"}}}`)
	if post.reqSeq != 1 || st.s.Calls != 1 {
		t.Fatalf("the call is not the exchange's request: reqSeq %d, calls %d", post.reqSeq, st.s.Calls)
	}
	progress, _ := linkOne(st, post, s2c, 2, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t1","progress":1}}`)
	sampling, _ := linkOne(st, post, s2c, 3, `{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{"messages":[]}}`)
	reply, _ := linkOne(st, answer, c2s, 4, `{"jsonrpc":"2.0","id":"s1","result":{"role":"assistant"}}`)
	result, _ := linkOne(st, post, s2c, 5, `{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`)
	orphan, _ := linkOne(st, get, s2c, 6, `{"jsonrpc":"2.0","id":99,"result":{}}`)

	for _, c := range []struct {
		name string
		got  uint64
		want uint64
	}{
		{"progress → its request (by token)", progress.Links.Request, call.Seq},
		{"sampling request → the call whose stream carried it", sampling.Links.Parent, call.Seq},
		{"the client's answer → the sampling request", reply.Links.Request, sampling.Seq},
		{"the result → the call", result.Links.Request, call.Seq},
	} {
		if c.got != c.want {
			t.Errorf("%s: linked to %d, want %d", c.name, c.got, c.want)
		}
	}
	if result.Method != "tools/call" || result.Name != "sample" || reply.Method != protocol.MethodSampling {
		t.Errorf("a response takes its request's method and name: %q %q, %q", result.Method, result.Name, reply.Method)
	}
	if len(orphan.Findings) != 1 || orphan.Findings[0].Kind != FindingOrphanResponse {
		t.Errorf("a response nobody asked for: findings %+v", orphan.Findings)
	}
	if len(st.pending) != 0 {
		t.Errorf("%d requests still in flight after their answers", len(st.pending))
	}
}

// A client's answer that overtook the server request it answers is linked
// once the request comes: link hands it back, rewritten, to store again.
func TestLinkerAnswerBeforeItsRequest(t *testing.T) {
	st := newLinker(Session{ID: "s", Era: protocol.EraLegacy, Version: "2025-11-25"}, "", t0, nil, nil)
	post := &exchange{x: Exchange{ID: 1}, sess: st}
	answer := &exchange{x: Exchange{ID: 2}, sess: st}
	linkOne(st, post, protocol.ClientToServer, 1, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sample"}}`)
	early, again := linkOne(st, answer, protocol.ClientToServer, 2, `{"jsonrpc":"2.0","id":"s1","result":{}}`)
	if again != nil || len(early.Findings) != 1 || early.Findings[0].Kind != FindingOrphanResponse {
		t.Fatalf("the early answer: findings %+v, again %v", early.Findings, again)
	}
	st.s.Findings = 1 // the batcher counted its finding
	req, again := linkOne(st, post, protocol.ServerToClient, 3, `{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{}}`)
	if again == nil || again.Seq != early.Seq || again.Links.Request != req.Seq || len(again.Findings) != 0 || again.Method != protocol.MethodSampling {
		t.Fatalf("the answer again: %+v, want seq %d linked to %d without findings", again, early.Seq, req.Seq)
	}
	if st.s.Findings != 0 || len(st.pending) != 1 {
		t.Errorf("session findings %d (want the orphan's taken back), %d in flight (want only the call)", st.s.Findings, len(st.pending))
	}
}
