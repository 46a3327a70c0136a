package replay

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/mcptape/mcptape/protocol"
)

// DefaultIgnore lists the params paths the default matcher ignores: `_meta`
// (progress tokens, trace context, client info and capabilities of 2026-07-28
// requests) and, on MRTR retries, the client's `inputResponses` (a strict
// replay compares those separately). JSON-RPC ids are never compared.
var DefaultIgnore = []string{"_meta", "inputResponses"}

// Matcher decides which recorded request a live request stands for. The
// zero value is not usable; build one with NewMatcher.
type Matcher struct {
	ignore map[string]bool // dotted paths under params
	byMeth map[string]map[string]bool
	custom MatcherFunc
}

// MatcherFunc, when set with WithMatcherFunc, decides alone: it reports
// whether a live request (method and params) matches a recorded one.
type MatcherFunc func(method string, live, recorded json.RawMessage) bool

// MatchOption configures a Matcher.
type MatchOption func(*Matcher)

// IgnorePaths ignores these dotted params paths for every method, e.g.
// "arguments.timestamp".
func IgnorePaths(paths ...string) MatchOption {
	return func(m *Matcher) {
		for _, p := range paths {
			m.ignore[p] = true
		}
	}
}

// IgnorePathsFor ignores these dotted params paths for one method only.
func IgnorePathsFor(method string, paths ...string) MatchOption {
	return func(m *Matcher) {
		if m.byMeth[method] == nil {
			m.byMeth[method] = map[string]bool{}
		}
		for _, p := range paths {
			m.byMeth[method][p] = true
		}
	}
}

// WithMatcherFunc replaces the comparison of params with f (methods must
// still be equal).
func WithMatcherFunc(f MatcherFunc) MatchOption { return func(m *Matcher) { m.custom = f } }

// NewMatcher returns the default matcher with opts applied.
func NewMatcher(opts ...MatchOption) *Matcher {
	m := &Matcher{ignore: map[string]bool{}, byMeth: map[string]map[string]bool{}}
	for _, p := range DefaultIgnore {
		m.ignore[p] = true
	}
	for _, o := range opts {
		o(m)
	}
	return m
}

func (m *Matcher) ignored(method, path string) bool {
	return m.ignore[path] || m.byMeth[method][path]
}

// canonical is params as a canonical JSON string, ignored paths removed:
// two requests match when their canonical forms are equal.
func (m *Matcher) canonical(method string, params json.RawMessage) string {
	return m.canonicalOf(method, decodeAny(params))
}

// canonicalOf is canonical of params decoded (as decodeAny gives them).
func (m *Matcher) canonicalOf(method string, params any) string {
	b, _ := json.Marshal(m.strip(method, "", params)) // maps marshal with sorted keys
	return string(b)
}

// key is what matches a request, as a map key: its method and a digest of
// its canonical params (params can be large; the digest is not).
func (m *Matcher) key(method string, params json.RawMessage) string {
	return m.keyOf(method, decodeAny(params))
}

// keyOf is key of params decoded.
func (m *Matcher) keyOf(method string, params any) string {
	sum := sha256.Sum256([]byte(m.canonicalOf(method, params)))
	return method + "\x00" + string(sum[:16])
}

func decodeAny(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return string(raw)
	}
	return v
}

func (m *Matcher) strip(method, path string, v any) any {
	obj, ok := v.(map[string]any)
	if !ok {
		return v
	}
	out := make(map[string]any, len(obj))
	for k, x := range obj {
		p := k
		if path != "" {
			p = path + "." + k
		}
		if m.ignored(method, p) {
			continue
		}
		out[k] = m.strip(method, p, x)
	}
	if len(out) == 0 && path == "" {
		return nil // {} and absent params match
	}
	return out
}

// Match reports whether live params match recorded ones for method.
func (m *Matcher) Match(method string, live, recorded json.RawMessage) bool {
	if m.custom != nil {
		return m.custom(method, live, recorded)
	}
	return m.canonical(method, live) == m.canonical(method, recorded)
}

// Diff lists the params paths where live and recorded differ, with both
// values, ignored paths left out: what a miss reports.
func (m *Matcher) Diff(method string, live, recorded json.RawMessage) []string {
	var out []string
	diffValues(&out, "params", m.strip(method, "", decodeAny(live)), m.strip(method, "", decodeAny(recorded)))
	sort.Strings(out)
	return out
}

// answerDiff lists where a client's answer to a replayed server→client
// request differs from the recorded answer: the two results (or errors)
// compared as documents, leaving out what the matcher ignores — the
// ignore rules apply to a result as they do to params, by paths relative
// to it ("content.text", "_meta"), the per-method rules by the method of
// the request answered. Paths are written from "result" (or "error").
// Empty means the same.
func (m *Matcher) answerDiff(method string, live, recorded json.RawMessage) []string {
	lroot, lv := answerBody(live)
	rroot, rv := answerBody(recorded)
	var out []string
	if lroot != rroot {
		a, _ := json.Marshal(decodeAny(lv))
		b, _ := json.Marshal(decodeAny(rv))
		return []string{fmt.Sprintf("live %s %s, recorded %s %s", lroot, clip(string(a), 60), rroot, clip(string(b), 60))}
	}
	diffValues(&out, lroot, m.strip(method, "", decodeAny(lv)), m.strip(method, "", decodeAny(rv)))
	sort.Strings(out)
	return out
}

// answerBody is a JSON-RPC response's result or error member, and which.
func answerBody(raw json.RawMessage) (string, json.RawMessage) {
	if v, _, _, ok := protocol.Member(raw, "result"); ok {
		return "result", v
	}
	v, _, _, _ := protocol.Member(raw, "error")
	return "error", v
}

// inputResponsesDiff lists where an MRTR retry's inputResponses differ
// from the recorded ones, by params paths ("params.inputResponses.k.…"):
// the default rules set inputResponses aside for matching, but the other
// ignore rules apply within them ("inputResponses.k.content.text").
// Empty means the same.
func (m *Matcher) inputResponsesDiff(method string, live, recorded json.RawMessage) []string {
	var out []string
	diffValues(&out, "params.inputResponses",
		m.strip(method, "inputResponses", decodeAny(live)), m.strip(method, "inputResponses", decodeAny(recorded)))
	sort.Strings(out)
	return out
}

// handshakeMetaDiff lists how a 2026-07-28 request's client (protocol
// version, clientInfo and capabilities in `_meta`) differs from the
// recorded request's.
func handshakeMetaDiff(live, recorded json.RawMessage) []string {
	lm, _, _, _ := protocol.Member(live, "_meta")
	rm, _, _, _ := protocol.Member(recorded, "_meta")
	var out []string
	for _, k := range []string{protocol.MetaProtocolVersion, protocol.MetaClientInfo, protocol.MetaClientCapabilities} {
		a, _, _, _ := protocol.Member(lm, k)
		b, _, _, _ := protocol.Member(rm, k)
		diffValues(&out, "params._meta."+k, decodeAny(a), decodeAny(b))
	}
	sort.Strings(out)
	return out
}

func diffValues(out *[]string, path string, a, b any) {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		for k := range keys {
			diffValues(out, path+"."+k, am[k], bm[k])
		}
		return
	}
	al, alok := a.([]any)
	bl, blok := b.([]any)
	if alok && blok && len(al) == len(bl) {
		for i := range al {
			diffValues(out, path+"["+strconv.Itoa(i)+"]", al[i], bl[i])
		}
		return
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) == string(jb) {
		return
	}
	*out = append(*out, fmt.Sprintf("%s: live %s, recorded %s", path, clip(string(ja), 60), clip(string(jb), 60)))
}

func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
