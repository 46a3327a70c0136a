package dashboard_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/protocol"
)

// TestBrowserInterceptMalformedEdit: a held tools/call edited on the
// Intercept page into bytes that are not JSON is refused until the person
// ticks "send it anyway"; then those exact bytes reach the server, the
// client gets the server's answer to them, and the record keeps the
// message as the client sent it, marked as intercepted, with the bytes
// that went on instead as a message of their own.
func TestBrowserInterceptMalformedEdit(t *testing.T) {
	// The fixture server, noting every POST body it gets.
	var mu sync.Mutex
	var bodies [][]byte
	fx := fixtures.Handler(&fixtures.ServerOptions{Showcase: true})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			b, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			mu.Lock()
			bodies = append(bodies, b)
			mu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		fx.ServeHTTP(w, r)
	}))
	t.Cleanup(up.Close)
	t.Cleanup(up.CloseClientConnections)
	ir := newInterceptRig(t, up.URL, "tools/call:echo")
	b := newBrowser(t)
	b.open(ir.srv.URL + "/intercept")
	b.waitFor("the page", `document.querySelector('.held-list[data-ready]') !== null`, 10*time.Second)
	cs := ir.bareClient(t, ir.px.URL+fixtures.PathStateful)

	got := callTool(cs, "echo", map[string]any{"text": "as the client wrote it"})
	card := heldCard(b, "request", "tools/call")
	b.click(card + " details.edit-box summary")
	area := card + " textarea.edit-json"
	edited := eval[string](b, `document.querySelector('`+area+`').value`)
	if !strings.Contains(edited, "as the client wrote it") {
		t.Fatalf("the editor starts from %q, want the held request", edited)
	}
	// Bytes that are not JSON: the request cut short, with a byte no
	// JSON text holds.
	const malformed = `{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"echo","arguments":{"text":"sent malformed on purpose` + "\x01"
	b.run("a malformed edit", chromedp.SetValue(chromedp.CSS(area), malformed))
	eval[bool](b, `(document.querySelector('`+area+`').dispatchEvent(new Event('input')), true)`)
	b.waitFor("the editor's verdict", `document.querySelector('`+card+` .json-state').textContent.startsWith('not JSON')`, 5*time.Second)
	b.click(card + " button.send-edit")
	b.waitFor("the refusal", `document.querySelector('`+card+` > .check').textContent.includes('Tick the box to send it anyway')`, 5*time.Second)
	// Refused on the page, nothing was decided: the queue still holds it.
	if held := ir.icpt.Held(); len(held) != 1 {
		t.Fatalf("%d held after the refused edit, want the request still held", len(held))
	}
	select {
	case a := <-got:
		t.Fatalf("the call went on before the confirmation: %+v", a)
	default:
	}
	if eval[int](b, `document.querySelectorAll('section.held').length`) != 1 {
		t.Fatal("the unconfirmed edit released the held request")
	}
	b.screenshot("malformed-refused")
	b.click(card + " input.malformed-ok")
	b.click(card + " button.send-edit")
	a := wait(t, got)
	if a.err == nil {
		t.Errorf("the client got %+v, want the server's refusal of bytes that are not JSON", a)
	}
	b.waitFor("the card gone", `document.querySelector('`+card+`') === null`, 10*time.Second)
	b.checkClean()

	// The server got exactly the bytes of the edit, and never the
	// request as the client wrote it.
	mu.Lock()
	var exact, original int
	for _, body := range bodies {
		if string(body) == malformed {
			exact++
		}
		if bytes.Contains(body, []byte("as the client wrote it")) {
			original++
		}
	}
	mu.Unlock()
	if exact != 1 || original != 0 {
		t.Errorf("the server got the edit's exact bytes %d times, the client's request %d times; want 1 and 0", exact, original)
	}

	// The record: the request as received, marked, naming the message of
	// what went on; that message, the exact bytes, marked as sent on
	// purpose.
	ir.sync(t)
	ctx := context.Background()
	var received, sent *capture.Message
	for s, err := range ir.store.Sessions(ctx, capture.SessionQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		for m, err := range ir.store.Messages(ctx, s.ID, capture.MessageQuery{}) {
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case m.Kind == protocol.KindRequest && m.Name == "echo":
				received = m
			case m.Direction == protocol.ClientToServer && m.Kind == protocol.KindInvalid && bytes.Contains(m.Raw, []byte("sent malformed on purpose")):
				sent = m
			}
		}
	}
	if received == nil || sent == nil {
		t.Fatalf("the record has the received request %v and the sent bytes %v", received != nil, sent != nil)
	}
	if !bytes.Contains(received.Raw, []byte("as the client wrote it")) || received.Edited != 0 {
		t.Errorf("the received request as recorded: edited %d, raw %s", received.Edited, received.Raw)
	}
	if f := finding(received, capture.FindingIntercepted); !strings.Contains(f, "edited by a person") || !strings.Contains(f, "#"+uitoa(sent.Seq)) {
		t.Errorf("the received request's intercepted finding %q, want it to say it was edited and name message #%d", f, sent.Seq)
	}
	if string(sent.Raw) != malformed || sent.ExchangeID != received.ExchangeID || sent.SessionID != received.SessionID {
		t.Errorf("the sent bytes as recorded: %q in exchange %v, session %s; want %q in the request's exchange %v, session %s",
			sent.Raw, sent.ExchangeID, sent.SessionID, malformed, received.ExchangeID, received.SessionID)
	}
	if f := finding(sent, capture.FindingIntercepted); !strings.Contains(f, "#"+uitoa(received.Seq)) {
		t.Errorf("the sent bytes' intercepted finding %q, want it to name message #%d", f, received.Seq)
	}
	if finding(sent, capture.FindingInvalidFrame) == "" {
		t.Errorf("the sent bytes carry no invalid-frame finding: %+v", sent.Findings)
	}
}

// finding is the message of m's first finding of kind k, or "".
func finding(m *capture.Message, k capture.FindingKind) string {
	for _, f := range m.Findings {
		if f.Kind == k {
			return f.Message
		}
	}
	return ""
}

func uitoa(n uint64) string { return strconv.FormatUint(n, 10) }
