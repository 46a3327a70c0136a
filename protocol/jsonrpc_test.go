package protocol

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestDecode(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		kind    Kind
		method  string
		id      string
		problem string // substring; "" means none
	}{
		{"request", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}`, KindRequest, "tools/call", "1", ""},
		{"string id", `{"jsonrpc":"2.0","id":"a-1","method":"ping"}`, KindRequest, "ping", `"a-1"`, ""},
		{"fractional id kept raw", `{"jsonrpc":"2.0","id":1.7,"method":"ping"}`, KindRequest, "ping", "1.7", "neither a string nor an integer"},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, KindNotification, "notifications/initialized", "", ""},
		{"result", `{"jsonrpc":"2.0","id":7,"result":{"content":[]}}`, KindResult, "", "7", ""},
		{"error", `{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"nope"}}`, KindError, "", "7", ""},
		{"error null id", `{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Bad Request: Server not initialized"}}`, KindError, "", "null", ""},
		{"error absent id", `{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error"}}`, KindError, "", "", ""},
		{"null request id", `{"jsonrpc":"2.0","id":null,"method":"x"}`, KindRequest, "x", "null", "request id is null"},
		{"wrong version", `{"jsonrpc":"1.0","id":1,"method":"x"}`, KindRequest, "x", "1", `"jsonrpc" is "1.0"`},
		{"missing version", `{"id":1,"method":"x"}`, KindRequest, "x", "1", `missing "jsonrpc"`},
		{"not json", `{"jsonrpc":"2.0",`, KindInvalid, "", "", "not JSON"},
		{"plain text", `hello`, KindInvalid, "", "", "not JSON"},
		{"scalar", `42`, KindInvalid, "", "", "a JSON number"},
		{"empty", ``, KindInvalid, "", "", "empty frame"},
		{"no members", `{"jsonrpc":"2.0","id":1}`, KindInvalid, "", "1", "no method, result or error"},
		{"method not string", `{"jsonrpc":"2.0","id":1,"method":5}`, KindInvalid, "", "1", "method is not a string"},
		{"bad error member", `{"jsonrpc":"2.0","id":1,"error":"boom"}`, KindError, "", "1", "not {code, message}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := Decode([]byte(tt.in))
			if m.Kind != tt.kind || m.Method != tt.method || string(m.ID) != tt.id {
				t.Errorf("Decode(%s) = kind %v method %q id %q, want %v %q %q", tt.in, m.Kind, m.Method, m.ID, tt.kind, tt.method, tt.id)
			}
			if tt.problem == "" && m.Problem != "" {
				t.Errorf("unexpected problem %q", m.Problem)
			}
			if tt.problem != "" && !strings.Contains(m.Problem, tt.problem) {
				t.Errorf("problem = %q, want it to contain %q", m.Problem, tt.problem)
			}
			if string(m.Raw) != tt.in {
				t.Errorf("Raw = %q, want the input unchanged", m.Raw)
			}
		})
	}
}

func TestSplitBatch(t *testing.T) {
	in := ` [{"jsonrpc":"2.0","id":1,"method":"a"}, {"jsonrpc":"2.0","method":"n"},{"jsonrpc":"2.0","id":"x","result":{}}, 3]`
	ms := Split([]byte(in))
	if len(ms) != 4 {
		t.Fatalf("got %d messages, want 4", len(ms))
	}
	want := []struct {
		kind Kind
		raw  string
	}{
		{KindRequest, `{"jsonrpc":"2.0","id":1,"method":"a"}`},
		{KindNotification, `{"jsonrpc":"2.0","method":"n"}`},
		{KindResult, `{"jsonrpc":"2.0","id":"x","result":{}}`},
		{KindInvalid, `3`},
	}
	for i, w := range want {
		if ms[i].Kind != w.kind || string(ms[i].Raw) != w.raw || ms[i].Batch != i {
			t.Errorf("element %d = %v %q batch %d, want %v %q %d", i, ms[i].Kind, ms[i].Raw, ms[i].Batch, w.kind, w.raw, i)
		}
	}
	for _, bad := range []string{`[]`, `[{"a":1}`} {
		ms := Split([]byte(bad))
		if len(ms) != 1 || ms[0].Kind != KindInvalid || string(ms[0].Raw) != bad {
			t.Errorf("Split(%s) = %+v, want one invalid message holding the input", bad, ms)
		}
	}
}

func TestIDKey(t *testing.T) {
	a := Decode([]byte(`{"jsonrpc":"2.0","id":"1","method":"x"}`))
	b := Decode([]byte(`{"jsonrpc":"2.0","id": "1" ,"result":{}}`))
	c := Decode([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
	if a.IDKey() != b.IDKey() {
		t.Errorf("same string id keys differ: %q %q", a.IDKey(), b.IDKey())
	}
	if a.IDKey() == c.IDKey() {
		t.Errorf(`"1" and 1 must not match: both %q`, a.IDKey())
	}
	n := Decode([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":1,"message":"m"}}`))
	if n.IDKey() != "" || n.HasID() {
		t.Errorf("null id: key %q HasID %v", n.IDKey(), n.HasID())
	}
}

func TestEra(t *testing.T) {
	for v, want := range map[string]Era{
		V20241105: EraLegacy, V20250326: EraLegacy, V20250618: EraLegacy, V20251125: EraLegacy,
		V20260728: EraModern, "2027-01-01": EraModern, "2026-06-30": EraLegacy, "DRAFT": EraUnknown, "": EraUnknown,
	} {
		if got := EraOf(v); got != want {
			t.Errorf("EraOf(%q) = %v, want %v", v, got, want)
		}
	}
}

func TestHeaderValue(t *testing.T) {
	for _, tt := range []struct{ plain, wire string }{
		{"us-west1", "us-west1"},
		{"Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="},
		{"=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="},
		{" padded", "=?base64?IHBhZGRlZA==?="},
	} {
		if got := EncodeHeaderValue(tt.plain); got != tt.wire {
			t.Errorf("Encode(%q) = %q, want %q", tt.plain, got, tt.wire)
		}
		got, err := DecodeHeaderValue(tt.wire)
		if err != nil || got != tt.plain {
			t.Errorf("Decode(%q) = %q, %v; want %q", tt.wire, got, err, tt.plain)
		}
	}
	if _, err := DecodeHeaderValue("=?base64?***?="); err != ErrBadSentinel {
		t.Errorf("bad sentinel: err = %v, want ErrBadSentinel", err)
	}
}

// members must agree with encoding/json on every valid object.
func FuzzMembers(f *testing.F) {
	f.Add([]byte(`{"a":1,"b":"x\"}","c":{"d":[1,{"e":"]"}]},"a":2, "\u0066":null}`))
	f.Add([]byte(` { } `))
	f.Fuzz(func(t *testing.T, b []byte) {
		var want map[string]json.RawMessage
		if json.Unmarshal(b, &want) != nil || want == nil {
			return
		}
		got := map[string]json.RawMessage{}
		if err := members(b, func(k, v []byte) bool { got[string(k)] = v; return true }); err != nil {
			t.Fatalf("members(%q): %v", b, err)
		}
		if len(got) != len(want) {
			t.Fatalf("members(%q) = %d keys, want %d", b, len(got), len(want))
		}
		for k, w := range want {
			var a, c bytes.Buffer
			_ = json.Compact(&a, w)
			_ = json.Compact(&c, got[k])
			if a.String() != c.String() {
				t.Fatalf("members(%q)[%q] = %q, want %q", b, k, got[k], w)
			}
		}
	})
}

func TestSetMember(t *testing.T) {
	in := []byte(`{"jsonrpc":"2.0", "id" : 7,"params":{"_meta":{"progressToken":"p1"}, "x": [1, 2]}}`)
	out, ok := SetMember(in, []byte(`"live-9"`), "id")
	if !ok || string(out) != `{"jsonrpc":"2.0", "id" : "live-9","params":{"_meta":{"progressToken":"p1"}, "x": [1, 2]}}` {
		t.Fatalf("id: %s %v", out, ok)
	}
	out, ok = SetMember(in, []byte(`42`), "params", "_meta", "progressToken")
	if !ok || string(out) != `{"jsonrpc":"2.0", "id" : 7,"params":{"_meta":{"progressToken":42}, "x": [1, 2]}}` {
		t.Fatalf("nested: %s %v", out, ok)
	}
	if _, ok := SetMember(in, []byte(`1`), "params", "nope"); ok {
		t.Error("a missing path was set")
	}
}

// validJSON must agree with json.Valid, and find the same members.
func FuzzValidJSON(f *testing.F) {
	for _, s := range []string{`{"a":"x\u00e9\n","b":[1,-2.5e+3,true,false,null,{}],"c":{"d":"\""}}`, `"\\"`, `[1,]`, "\"\x01\"", `{"a":01}`, `-`, `1.`, `1e`, `{"a" 1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got := map[string]string{}
		ok := validJSON(b, func(k, v []byte) { got[string(k)] = string(v) })
		if ok != json.Valid(b) {
			t.Fatalf("validJSON(%q) = %v, json.Valid says %v", b, ok, !ok)
		}
		if !ok {
			return
		}
		var want map[string]json.RawMessage
		if json.Unmarshal(b, &want) != nil {
			return
		}
		for k, w := range want {
			if got[k] != string(w) {
				t.Fatalf("validJSON(%q) member %q = %q, want %q", b, k, got[k], w)
			}
		}
	})
}

// BenchmarkDecodeLarge decodes a 1 MiB tool result: plain text, and text
// with an escaped newline every 40 bytes (tool output, as it mostly is).
func BenchmarkDecodeLarge(b *testing.B) {
	for _, c := range []struct{ name, unit string }{
		{"plain", "mcptape-fixture-big-0123456789abcdefghij "},
		{"newlines", `a line of tool output, forty bytes long\n`},
	} {
		big := []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + strings.Repeat(c.unit, 1<<20/len(c.unit)) + `"}]}}`)
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(big)))
			for b.Loop() {
				m := Decode(big)
				if m.Kind != KindResult {
					b.Fatal(m.Problem)
				}
				if _, ok := ParseResult(m.Result); !ok {
					b.Fatal("result")
				}
			}
		})
	}
}

func TestValidJSONDeepNesting(t *testing.T) {
	for _, n := range []int{9999, 10000, 10001, 20000} {
		b := []byte(strings.Repeat("[", n) + strings.Repeat("]", n))
		if got, want := validJSON(b, nil), json.Valid(b); got != want {
			t.Errorf("depth %d: validJSON %v, json.Valid %v", n, got, want)
		}
	}
}

// TestValidJSONLongStrings puts each byte a string scan must stop at
// (quote, backslash escape, control character) at every position of a
// string long enough for the scan's 32- and 8-byte steps, and compares
// with encoding/json.
func TestValidJSONLongStrings(t *testing.T) {
	for _, ins := range []string{`"`, `\"`, `\n`, `\u00e9`, "\x01", "\x1f", `\x`, "\x7f", "é"} {
		for n := 0; n < 80; n++ {
			for _, tail := range []int{0, 1, 7, 8, 31, 33} {
				b := []byte(`{"a":"` + strings.Repeat("x", n) + ins + strings.Repeat("y", tail) + `"}`)
				if got, want := validJSON(b, nil), json.Valid(b); got != want {
					t.Fatalf("validJSON(%q) = %v, json.Valid says %v", b, got, want)
				}
			}
		}
	}
}

// validEnvelope must agree with validJSON, and find the JSON-RPC members
// its member function sees (the last of a repeated key).
func FuzzValidEnvelope(f *testing.F) {
	for _, s := range []string{`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"id":2}}`, `{"id":1,"id":"x","result":{}}`,
		`{"error":{"code":1,"message":"m"},"jsonrpc":"1"}`, `[{"id":1}]`, `{"a":1,}`, `{"\u0069d":7}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		want := map[string]string{}
		ok := validJSON(b, func(k, v []byte) { want[string(k)] = string(v) })
		var env envelope
		if got := validEnvelope(b, &env); got != ok {
			t.Fatalf("validEnvelope(%q) = %v, validJSON %v", b, got, ok)
		}
		if !ok {
			return
		}
		for k, key := range []string{"jsonrpc", "id", "method", "params", "result", "error"} {
			w, present := want[key]
			if got := *env.member(k); string(got) != w || (got != nil) != present {
				t.Fatalf("validEnvelope(%q) %s = %q, want %q", b, key, got, w)
			}
		}
	})
}

// BenchmarkDecodeSmall decodes the messages of a small call (a request
// whose method the spec names, and its result): the recorder decodes every
// message it records. Target: no allocation.
func BenchmarkDecodeSmall(b *testing.B) {
	msgs := [][]byte{
		[]byte(`{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`),
		[]byte(`{"jsonrpc":"2.0","id":17,"result":{"content":[{"type":"text","text":"hi"}]}}`),
	}
	var dst []Message
	b.ReportAllocs()
	for b.Loop() {
		for _, raw := range msgs {
			dst = AppendSplit(dst[:0], raw)
			if dst[0].Problem != "" {
				b.Fatal(dst[0].Problem)
			}
		}
	}
	if allocs := testing.AllocsPerRun(100, func() {
		for _, raw := range msgs {
			dst = AppendSplit(dst[:0], raw)
		}
	}); allocs > 0 {
		b.Errorf("decoding a small call's two messages took %.1f allocations; the target is none", allocs)
	}
}

// IDKey's shortcut for plain strings gives what encoding/json's round trip
// gives.
func TestIDKeyPlainStrings(t *testing.T) {
	for _, raw := range []string{`"s-1"`, `"a b"`, `"<x>"`, `"a&b"`, `"é"`, `"\u0041"`, `"a\"b"`, `"\t"`, `""`, `"~!@#$%^*()"`, " \"x\" "} {
		var s string
		want := strings.TrimSpace(raw)
		if json.Unmarshal([]byte(raw), &s) == nil {
			b, _ := json.Marshal(s)
			want = string(b)
		}
		if got := IDKey(json.RawMessage(raw)); got != want {
			t.Errorf("IDKey(%s) = %s, want %s", raw, got, want)
		}
	}
}
