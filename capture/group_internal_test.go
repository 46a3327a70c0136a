package capture

import (
	"encoding/json"
	"fmt"
	"testing"
)

// The digest a pipeline remembers for a capabilities text is the one it
// would compute, the same for the same capabilities in another key order,
// and the memory stays bounded.
func TestCapsHashRemembersCanonicalDigest(t *testing.T) {
	p := &grouper{caps: map[string]string{}}
	a := json.RawMessage(`{"sampling":{},"roots":{"listChanged":true}}`)
	b := json.RawMessage(`{"roots":{"listChanged":true},"sampling":{}}`)
	c := json.RawMessage(`{"roots":{}}`)
	for range 2 {
		if got, want := p.capsHash(a), capsDigest(a); got != want {
			t.Fatalf("capsHash(a) = %q, want %q", got, want)
		}
		if p.capsHash(a) != p.capsHash(b) {
			t.Fatal("the same capabilities in another key order hash differently")
		}
		if p.capsHash(a) == p.capsHash(c) {
			t.Fatal("different capabilities hash the same")
		}
	}
	if p.capsHash(nil) != "" || p.capsHash(json.RawMessage(`{`)) != "?" {
		t.Fatal("empty or malformed capabilities hash differently than before")
	}
	for i := range 3 * capsCacheMax {
		raw := json.RawMessage(fmt.Sprintf(`{"x%d":{}}`, i))
		if got, want := p.capsHash(raw), capsDigest(raw); got != want {
			t.Fatalf("capsHash(%s) = %q, want %q", raw, got, want)
		}
	}
	if len(p.caps) > capsCacheMax {
		t.Fatalf("%d digests remembered, want at most %d", len(p.caps), capsCacheMax)
	}
}
