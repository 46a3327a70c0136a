package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/memstore"
	"github.com/mcptape/mcptape/protocol"
)

// TestSearchAPI: messages are found by their content, in a session and
// across sessions (the text around each match, cut), and a session by
// the start of its id, when one session's id starts so.
func TestSearchAPI(t *testing.T) {
	store := memstore.New()
	t.Cleanup(func() { store.Close() })
	at := time.Now().Add(-time.Hour)
	seq := uint64(0)
	for i, id := range []string{"abcd-1", "abcd-2", "abce-3"} {
		b := &capture.Batch{Sessions: []*capture.Session{{ID: id, Start: at.Add(time.Duration(i) * time.Minute), Messages: 2}}}
		for _, raw := range []string{
			fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"greet","arguments":{"city":"%s"}}}`, []string{"Paris", "Lyon", "Zanzibar " + strings.Repeat("x", 400)}[i]),
			`{"jsonrpc":"2.0","id":1,"result":{"messages":[]}}`,
		} {
			seq++
			kind := protocol.KindRequest
			if strings.Contains(raw, `"result"`) {
				kind = protocol.KindResult
			}
			b.Messages = append(b.Messages, &capture.Message{Seq: seq, SessionID: id, Direction: protocol.ClientToServer, Time: at, Kind: kind,
				Method: "prompts/get", Batch: -1, Raw: []byte(raw), Size: len(raw)})
		}
		if err := store.Write(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	_, c := newMemDash(t, store, nil)

	var one struct {
		Seqs []uint64 `json:"seqs"`
	}
	c.get("/api/v1/sessions/abce-3/search?q=zanZIBAR", &one)
	if len(one.Seqs) != 1 || one.Seqs[0] != 5 {
		t.Errorf("in a session: %v, want message 5", one.Seqs)
	}
	var all struct {
		Messages []struct {
			Session string `json:"session"`
			Seq     uint64 `json:"seq"`
			Snippet string `json:"snippet"`
		} `json:"messages"`
		More bool `json:"more"`
	}
	c.get("/api/v1/search?q=zanzibar", &all)
	if len(all.Messages) != 1 || all.Messages[0].Session != "abce-3" || all.Messages[0].Seq != 5 || all.More {
		t.Fatalf("across sessions: %+v", all)
	}
	if s := all.Messages[0].Snippet; !strings.Contains(s, `"city":"Zanzibar`) || !strings.HasSuffix(s, "…") || len([]rune(s)) > 170 {
		t.Errorf("the snippet: %q", s)
	}
	c.get("/api/v1/search?q=prompts&limit=2", &all)
	if len(all.Messages) != 2 || !all.More {
		t.Errorf("limit=2: %d messages, more=%v", len(all.Messages), all.More)
	}
	if code, body, _ := c.do(http.MethodGet, "/api/v1/search", nil, nil); code != http.StatusBadRequest {
		t.Errorf("no text: %d %s", code, body)
	}

	// By the start of the id.
	var d struct {
		Session struct {
			ID string `json:"id"`
		} `json:"session"`
	}
	c.get("/api/v1/sessions/abce", &d)
	if d.Session.ID != "abce-3" {
		t.Errorf("abce names %q, want abce-3", d.Session.ID)
	}
	if code, body, _ := c.do(http.MethodGet, "/api/v1/sessions/abcd", nil, nil); code != http.StatusNotFound || !contains(body, "More than one session") || !contains(body, "give more of the id") {
		t.Errorf("a start two ids share: %d %s", code, body)
	}
	if code, body, _ := c.do(http.MethodGet, "/api/v1/sessions/abc", nil, nil); code != http.StatusNotFound || !contains(body, `No session \"abc\"`) {
		t.Errorf("a start too short to name a session: %d %s", code, body)
	}
}
