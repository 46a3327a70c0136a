package badgerstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// The records store enums as their numeric values; renumbering one would
// silently change what stored data means. If this fails, bump
// schemaVersion and migrate, or restore the numbering.
func TestEnumValuesPinned(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want int
	}{
		{"ClientToServer", int(protocol.ClientToServer), 1},
		{"ServerToClient", int(protocol.ServerToClient), 2},
		{"KindInvalid", int(protocol.KindInvalid), 0},
		{"KindRequest", int(protocol.KindRequest), 1},
		{"KindNotification", int(protocol.KindNotification), 2},
		{"KindResult", int(protocol.KindResult), 3},
		{"KindError", int(protocol.KindError), 4},
		{"KindFrame", int(protocol.KindFrame), 5},
		{"EraUnknown", int(protocol.EraUnknown), 0},
		{"EraLegacy", int(protocol.EraLegacy), 1},
		{"EraModern", int(protocol.EraModern), 2},
		{"StatusOpen", int(capture.StatusOpen), 0},
		{"StatusClosed", int(capture.StatusClosed), 1},
		{"StatusIncomplete", int(capture.StatusIncomplete), 2},
		{"BodyEmpty", int(capture.BodyEmpty), 0},
		{"BodyJSON", int(capture.BodyJSON), 1},
		{"BodySSE", int(capture.BodySSE), 2},
		{"BodyOther", int(capture.BodyOther), 3},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, stored records say %d", c.name, c.got, c.want)
		}
	}
}

func testMessage() *capture.Message {
	return &capture.Message{
		Seq: 42, SessionID: "01KB8ZJ4R2V6C3W9ZK1ZP7M0QX", ExchangeID: 7,
		Direction: protocol.ServerToClient, Time: time.Unix(1785231000, 123456000),
		Kind: protocol.KindResult, Method: "tools/call", ID: json.RawMessage(`"req-1"`), Name: "search",
		Batch: -1, Size: 400,
		SSE:      &capture.SSEInfo{ID: "ev1", Type: "message", Prefix: []byte("data: "), Suffix: []byte("\n\n")},
		Findings: []capture.Finding{{Kind: capture.FindingSchema, Message: "structuredContent does not match outputSchema"}},
		Links:    capture.Links{Request: 41},
	}
}

func TestTimeKeyOrder(t *testing.T) {
	times := []time.Time{
		{},
		time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC),
		time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Unix(-1, 999999999),
		time.Unix(0, 0),
		time.Unix(0, 1),
		time.Unix(1785231000, 5),
		time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	for i, tm := range times {
		k := makeTimeKey(tm)
		if got := k.time(); !got.Equal(tm) || got.IsZero() != tm.IsZero() {
			t.Errorf("timeKey(%v).time() = %v", tm, got)
		}
		if i > 0 {
			prev := makeTimeKey(times[i-1])
			if string(prev[:]) >= string(k[:]) {
				t.Errorf("timeKey(%v) does not sort after timeKey(%v)", tm, times[i-1])
			}
		}
	}
}

// Every truncation of a valid record is reported as corrupt, not decoded
// into something plausible, and never panics.
func TestDecodeTruncated(t *testing.T) {
	m := testMessage()
	x := &capture.Exchange{ID: 1, SessionID: "s", Method: "POST", RequestHeader: http.Header{"A": {"b", "c"}},
		FindingList: []capture.Finding{{Kind: "k", Message: "m"}},
		Forwarded:   time.Unix(1, 2), UpstreamHeaders: time.Unix(3, 4)}
	// A version 1 exchange record ends before the upstream's instants.
	v1Exchange := len(appendExchange(nil, x)) - len(appendTime(appendTime(nil, x.Forwarded), x.UpstreamHeaders))
	// One marked rewritten ends there, or before its note.
	rx := *x
	rx.Rewritten = "resource → http://127.0.0.1:7411/mcp"
	plain := len(appendExchange(nil, x))
	s := &capture.Session{ID: "s", Labels: []string{"a", "b"}, ClientCapabilities: json.RawMessage(`{}`)}
	records := map[string]struct {
		b      []byte
		decode func([]byte) error
	}{
		"message":  {appendMessage(nil, m), func(b []byte) error { _, err := decodeMessage(1, "s", b); return err }},
		"exchange": {appendExchange(nil, x), func(b []byte) error { _, err := decodeExchange(1, "s", b); return err }},
		"rewritten": {appendExchange(nil, &rx), func(b []byte) error {
			got, err := decodeExchange(1, "s", b)
			if err == nil && len(b) == len(appendExchange(nil, &rx)) && got.Rewritten != rx.Rewritten {
				return fmt.Errorf("Rewritten = %q", got.Rewritten)
			}
			return err
		}},
		"session": {appendSession(nil, s), func(b []byte) error { _, err := decodeSession("s", b); return err }},
	}
	for name, r := range records {
		if err := r.decode(r.b); err != nil {
			t.Errorf("%s: whole record: %v", name, err)
		}
		for n := range len(r.b) {
			if (name == "exchange" || name == "rewritten") && n == v1Exchange || name == "rewritten" && n == plain {
				continue
			}
			if err := r.decode(r.b[:n]); !errors.Is(err, errCorrupt) {
				t.Errorf("%s cut to %d of %d bytes: err = %v, want errCorrupt", name, n, len(r.b), err)
			}
		}
		if err := r.decode(append(r.b[:len(r.b):len(r.b)], 0)); !errors.Is(err, errCorrupt) {
			t.Errorf("%s with a trailing byte: err = %v, want errCorrupt", name, err)
		}
	}
}

// A version 1 exchange record (before Forwarded and UpstreamHeaders)
// decodes with those zero.
func TestDecodeExchangeV1(t *testing.T) {
	x := &capture.Exchange{ID: 1, SessionID: "s", Method: "POST", Status: 200, Start: time.Unix(5, 6),
		Forwarded: time.Unix(7, 8), UpstreamHeaders: time.Unix(9, 10)}
	b := appendExchange(nil, x)
	b = b[:len(b)-len(appendTime(appendTime(nil, x.Forwarded), x.UpstreamHeaders))]
	got, err := decodeExchange(1, "s", b)
	if err != nil {
		t.Fatal(err)
	}
	want := *x
	want.Forwarded, want.UpstreamHeaders = time.Time{}, time.Time{}
	if d := cmp.Diff(&want, got); d != "" {
		t.Errorf("version 1 exchange (-want +got):\n%s", d)
	}
}

func FuzzDecodeMessage(f *testing.F) {
	f.Add(appendMessage(nil, testMessage()))
	f.Add([]byte{})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeMessage(1, "s", b)
		if err != nil {
			return
		}
		// What decodes survives another round trip unchanged.
		again, err := decodeMessage(1, "s", appendMessage(nil, m))
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		if d := cmp.Diff(m, again); d != "" {
			t.Errorf("second round trip differs (-first +second):\n%s", d)
		}
	})
}

func TestMessageRoundTrip(t *testing.T) {
	m := testMessage()
	got, err := decodeMessage(m.Seq, m.SessionID, appendMessage(nil, m))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(m, got); d != "" {
		t.Errorf("mismatch (-want +got):\n%s", d)
	}
}

// BenchmarkMessageCodec compares the index record's encoding with
// encoding/json, the obvious alternative.
func BenchmarkMessageCodec(b *testing.B) {
	m := testMessage()
	b.Run("binary/encode", func(b *testing.B) {
		buf := make([]byte, 0, 256)
		for b.Loop() {
			buf = appendMessage(buf[:0], m)
		}
		b.ReportMetric(float64(len(buf)), "bytes")
	})
	b.Run("binary/decode", func(b *testing.B) {
		enc := appendMessage(nil, m)
		for b.Loop() {
			if _, err := decodeMessage(m.Seq, m.SessionID, enc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json/encode", func(b *testing.B) {
		var enc []byte
		for b.Loop() {
			enc, _ = json.Marshal(m)
		}
		b.ReportMetric(float64(len(enc)), "bytes")
	})
	b.Run("json/decode", func(b *testing.B) {
		enc, _ := json.Marshal(m)
		for b.Loop() {
			var got capture.Message
			if err := json.Unmarshal(enc, &got); err != nil {
				b.Fatal(err)
			}
		}
	})
}
