package capture

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcptape/mcptape/protocol"
)

var skeletonSeeds = []string{
	`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hi"}],"isError":true}}`,
	`{"result":{"content":[{"type":"text","text":"` + strings.Repeat("x", 10000) + `"}]},"jsonrpc":"2.0","id":"a\"b"}`,
	`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"big","arguments":{"blob":"` + strings.Repeat("y", 9000) + `"},"_meta":{"progressToken":3}}}`,
	`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"n"}]`,
	` {"a" : [ 1 , -2.5e+3 , true , false , null , "\u00e9\n" , {} , [] ] } `,
	`{"a":1,}`, `{"a" 1}`, `[1,]`, `[01]`, `"\x"`, "\"\x01\"", `{"a":tru}`, `{"a":1}{}`, `-`, `1.`, `1e`, `{`, `"abc`, `[[[]]`, ``, `   `,
	`{"deep":` + strings.Repeat("[", 50) + strings.Repeat("]", 50) + `}`,
	`"\ud83d\ude00"`, `"\u12G4"`, `{"k\"ey":"v"}`, `0`, `-0.0e0`, `[1 2]`, `{"a":1 "b":2}`,
}

// A skeleton is made exactly of the frames encoding/json takes for one
// JSON value, and is valid JSON itself.
func FuzzSkeleton(f *testing.F) {
	for _, s := range skeletonSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		sk, err := skeleton(bytes.NewReader(b))
		if valid := json.Valid(b); valid != (err == nil) {
			t.Fatalf("skeleton(%q): %v; encoding/json says valid %v", b, err, valid)
		}
		if err == nil && !json.Valid(sk) {
			t.Fatalf("skeleton(%q) = %q, not JSON", b, sk)
		}
	})
}

// A message's skeleton classifies as the message does: kind, method, id,
// the tool's name, isError, and the progress token, with its large values
// gone.
func TestSkeletonClassifies(t *testing.T) {
	for _, s := range skeletonSeeds[:3] {
		sk, err := skeleton(strings.NewReader(s))
		if err != nil {
			t.Fatalf("%.60s: %v", s, err)
		}
		if len(sk) > 2*skeletonKeep {
			t.Errorf("skeleton of %d bytes kept %d", len(s), len(sk))
		}
		want, got := protocol.Split([]byte(s)), protocol.Split(sk)
		if len(want) != 1 || len(got) != 1 {
			t.Fatalf("%d and %d messages", len(want), len(got))
		}
		w, g := want[0], got[0]
		if w.Kind != g.Kind || w.Method != g.Method || string(w.ID) != string(g.ID) {
			t.Errorf("skeleton %s: kind %s method %q id %s; the message: %s %q %s", sk, g.Kind, g.Method, g.ID, w.Kind, w.Method, w.ID)
		}
		if w.Kind == protocol.KindRequest {
			wp, _ := protocol.ParseParams(w.Params)
			gp, _ := protocol.ParseParams(g.Params)
			if wp.Name != gp.Name || string(wp.ProgressToken) != string(gp.ProgressToken) {
				t.Errorf("params: name %q token %s; want %q %s", gp.Name, gp.ProgressToken, wp.Name, wp.ProgressToken)
			}
		}
	}
}
