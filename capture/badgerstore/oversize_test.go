package badgerstore_test

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
)

// tapCall reports one JSON POST exchange to rec, as the proxy does, from
// the client at remote; header adds request headers, and the response is
// the chunks given (JSON unless ctype says otherwise).
func tapCall(rec *capture.Recorder, remote, body string, header http.Header, ctype string, resp ...string) {
	req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:7411/mcp", strings.NewReader(body))
	req.RemoteAddr = remote
	req.Header.Set("Content-Type", "application/json")
	for k, vs := range header {
		req.Header[k] = vs
	}
	tap := rec.Begin(capture.RequestFrom(req, []byte(body), true))
	if ctype == "" {
		ctype = "application/json"
	}
	tap.Response(http.StatusOK, http.Header{"Content-Type": {ctype}}, false)
	for _, c := range resp {
		tap.ResponseBody([]byte(c))
	}
	tap.End("", false)
}

// TestOversizeCostsNoOtherRecord: beside another client's 300 calls, one
// exchange sends 20 MiB of headers and another an SSE event whose id line
// is 20 MiB (a message record bigger than Badger takes). Before, Badger
// refused the batch that held them and every message written with them
// was lost. Now the headers are stored cut with a marker and a finding,
// the one message Badger cannot take is the only one lost (counted, its
// session marked), and every message of the other client is stored.
func TestOversizeCostsNoOtherRecord(t *testing.T) {
	ctx := context.Background()
	store := open(t, t.TempDir(), nil)
	rec, err := capture.NewRecorder(ctx, store, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rec.Close(ctx) })
	call := func(id int, text string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":%q}}}`, id, text)
	}
	result := func(id int, text string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":%q}]}}`, id, text)
	}
	var wg sync.WaitGroup
	under := make(chan struct{}) // the other client's traffic is under way
	wg.Go(func() {
		for i := range 300 {
			tapCall(rec, "10.0.0.1:1000", call(i, "other"), nil, "", result(i, "other"))
			if i == 10 {
				close(under)
			}
		}
	})
	wg.Go(func() {
		<-under
		tapCall(rec, "10.0.0.2:2000", call(1, "huge headers"), http.Header{"X-Huge": {strings.Repeat("h", 20<<20)}}, "", result(1, "ok"))
	})
	wg.Go(func() {
		<-under
		hugeID := "id: " + strings.Repeat("i", 20<<20) + "\n"
		tapCall(rec, "10.0.0.3:3000", call(1, "huge event"), nil, "text/event-stream",
			"data: "+`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}`+"\n\n",
			hugeID+"data: "+result(1, "cut")+"\n\n")
	})
	wg.Wait()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// Twice: a loss is marked on its session by the write after the one
	// that lost it.
	for range 2 {
		if err := rec.Sync(sctx); err != nil {
			t.Fatal(err)
		}
	}

	sessions := map[string]*capture.Session{} // by the first message's text
	for s, err := range store.Sessions(ctx, capture.SessionQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		for m, err := range store.Messages(ctx, s.ID, capture.MessageQuery{Limit: 1}) {
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"other", "huge headers", "huge event"} {
				if strings.Contains(string(m.Raw), `"text":"`+k+`"`) {
					sessions[k] = s
				}
			}
		}
	}
	other, hdr, ev := sessions["other"], sessions["huge headers"], sessions["huge event"]
	if other == nil || hdr == nil || ev == nil {
		t.Fatalf("sessions found: %v", sessions)
	}
	if n := countMessages(t, store, other.ID); n != 600 || other.Lost != 0 || other.Status == capture.StatusIncomplete {
		t.Errorf("the other client's session holds %d of its 600 messages (lost %d, status %s)", n, other.Lost, other.Status)
	}
	// The huge headers: stored cut, with the marker and a finding.
	var x *capture.Exchange
	for e, err := range store.Exchanges(ctx, hdr.ID) {
		if err != nil {
			t.Fatal(err)
		}
		x = e
	}
	if x == nil {
		t.Fatal("the exchange with huge headers is not stored")
	}
	v := x.RequestHeader.Get("X-Huge")
	if len(v) > 1<<20 || !strings.HasSuffix(v, "[cut by mcptape]") {
		t.Errorf("X-Huge stored as %d bytes ending %q, want at most 1 MiB ending with the cut marker", len(v), v[max(0, len(v)-20):])
	}
	if len(x.FindingList) != 1 || x.FindingList[0].Kind != capture.FindingOversize || !strings.Contains(x.FindingList[0].Message, "forwarded whole") {
		t.Errorf("findings on the exchange: %+v", x.FindingList)
	}
	if n := countMessages(t, store, hdr.ID); n != 2 || hdr.Findings != 1 {
		t.Errorf("the huge-headers session holds %d messages and %d findings, want 2 and 1", n, hdr.Findings)
	}
	// The huge SSE event: only that message is lost, and it is counted.
	if n := countMessages(t, store, ev.ID); n != 2 {
		t.Errorf("the huge-event session holds %d messages, want 2 (its request and the progress notification)", n)
	}
	if ev.Status != capture.StatusIncomplete || ev.Lost != 1 || ev.LossReason == "" {
		t.Errorf("the huge-event session: status %s, lost %d, reason %q; want incomplete, 1 lost, a reason", ev.Status, ev.Lost, ev.LossReason)
	}
	if st := rec.Stats(); st.Lost != 1 || st.Stored != st.Messages-1 {
		t.Errorf("recorder stats: %d messages, %d stored, %d lost; want exactly one lost", st.Messages, st.Stored, st.Lost)
	}
}
