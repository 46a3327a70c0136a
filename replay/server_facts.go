package replay

import (
	"encoding/json"
	"mime"
	"net/http"
	"slices"
	"strings"

	"github.com/mcptape/mcptape/protocol"
)

// Facts: what a request says, beyond its method and params, that a server
// may answer it by. Two requests alike in method and params can get
// different answers from one server: a server/discover at another
// protocol version, a request without `_meta` or without credentials, a
// Mcp-Method header that contradicts the body. The replay server answers
// a live request with the recorded one whose facts are closest (see
// distance): its recorded order breaks ties only among equally close
// ones.

// httpFacts is what an HTTP request says in its path and headers. A
// recorded exchange's are kept in the tape's index (interned: most
// exchanges share them).
type httpFacts struct {
	path      string // the URL's path, below a route's prefix
	sid       bool   // carries Mcp-Session-Id
	lastEvent bool   // resumes a stream (Last-Event-ID)
	// creds names the headers that carry credentials (Authorization,
	// Cookie, API keys), sorted: their values never count, so that a
	// recording answers a client holding another token.
	creds     string
	version   string // MCP-Protocol-Version
	mcpMethod string // Mcp-Method
	mcpName   string // Mcp-Name
	mcpParams string // the Mcp-Param-* headers, sorted NAME=value lines
	accept    string // Accept's media types, sorted, lower case
	ctype     string // Content-Type's media type
	origin    string
}

// factsOf reads the facts of a request to path with headers h.
func factsOf(path string, h http.Header) httpFacts {
	f := httpFacts{path: path}
	var creds, params []string
	for k, vs := range h {
		// Go's server gives canonical names; a tape's headers are too.
		switch k = http.CanonicalHeaderKey(k); {
		case k == protocol.HeaderSessionID:
			f.sid = true
		case k == protocol.HeaderLastEventID:
			f.lastEvent = true
		case k == protocol.HeaderProtocolVersion:
			f.version = first(vs)
		case k == protocol.HeaderMethod:
			f.mcpMethod = first(vs)
		case k == protocol.HeaderName:
			f.mcpName = first(vs)
		case strings.HasPrefix(k, protocol.HeaderParamPrefix):
			params = append(params, strings.ToLower(k)+"="+strings.Join(vs, ","))
		case k == "Accept":
			f.accept = mediaTypes(vs)
		case k == "Content-Type":
			f.ctype = mediaTypes(vs)
		case k == "Origin":
			f.origin = first(vs)
		case isCredential(k):
			creds = append(creds, strings.ToLower(k))
		}
	}
	slices.Sort(creds)
	slices.Sort(params)
	f.creds = strings.Join(creds, ",")
	f.mcpParams = strings.Join(params, "\n")
	return f
}

// isCredential reports whether a header (its canonical name) carries a
// credential, as the recorder's redaction knows them.
func isCredential(name string) bool {
	switch name {
	case "Authorization", "Proxy-Authorization", "Cookie":
		return true
	}
	for _, s := range []string{"api-key", "apikey", "api_key", "token", "secret", "password"} {
		if containsFold(name, s) {
			return true
		}
	}
	return false
}

// containsFold reports whether s contains sub (lower case ASCII), case
// ignored, without allocating.
func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}

func first(vs []string) string {
	if len(vs) == 0 {
		return ""
	}
	return vs[0]
}

// mediaTypes is the media types of header values, without parameters,
// lower case, sorted: "application/json,text/event-stream".
func mediaTypes(vs []string) string {
	var out []string
	for _, v := range vs {
		for _, part := range strings.Split(v, ",") {
			mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil {
				mt = strings.ToLower(strings.TrimSpace(part))
			}
			if mt != "" && !slices.Contains(out, mt) {
				out = append(out, mt)
			}
		}
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// reqFacts is all a request says beyond method and params: the members
// of its `_meta` (as canonical JSON; progress tokens and trace context,
// which every run makes anew, and the matcher's ignored paths left out)
// and, over HTTP, its httpFacts (nil over stdio, and for a recording
// without HTTP).
type reqFacts struct {
	meta map[string]string
	http *httpFacts
	// later, on a live request's facts, computes meta when first needed:
	// most live requests are told apart by their params alone.
	later func() map[string]string
}

// metaMembers is f's `_meta` members, computed now if they were left
// for later.
func (f *reqFacts) metaMembers() map[string]string {
	if f.later != nil {
		f.meta, f.later = f.later(), nil
	}
	return f.meta
}

// volatileMeta reports whether a `_meta` member is made anew by every run
// of a client, and so says nothing about what it asks.
func volatileMeta(key string) bool {
	switch strings.ToLower(key) {
	case protocol.MetaProgressToken, "traceparent", "tracestate", "baggage":
		return true
	}
	return false
}

// metaOf is the canonical members of params' `_meta` (params decoded,
// as decodeAny gives it), less the volatile ones and those the matcher
// ignores for method.
func (m *Matcher) metaOf(method string, params any) map[string]string {
	p, _ := params.(map[string]any)
	raw, ok := p["_meta"]
	if !ok {
		return nil
	}
	obj, ok := raw.(map[string]any)
	if !ok {
		b, _ := json.Marshal(raw)
		return map[string]string{"": string(b)} // not an object: compared whole
	}
	out := make(map[string]string, len(obj))
	for k, v := range obj {
		if volatileMeta(k) || m.ignored(method, "_meta."+k) {
			continue
		}
		b, _ := json.Marshal(m.strip(method, "_meta."+k, v))
		out[k] = string(b)
	}
	return out
}

// keyAndMeta is a request's match key ("" with a custom matcher) and a
// function that gives its `_meta` facts, from one decoding of its params.
func (m *Matcher) keyAndMeta(method string, params json.RawMessage) (string, func() map[string]string) {
	v := decodeAny(params)
	meta := func() map[string]string { return m.metaOf(method, v) }
	if m.custom != nil {
		return "", meta
	}
	return m.keyOf(method, v), meta
}

// factsKey is a reqFacts as a string, for interning: equal keys, equal
// facts.
func factsKey(meta map[string]string, hf *httpFacts) string {
	keys := make([]string, 0, len(meta))
	for k := range meta {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k + "\x01" + meta[k] + "\x02")
	}
	b.WriteString("\x03")
	if hf != nil {
		b.WriteString(hf.path + "\x00" + hf.creds + "\x00" + hf.version + "\x00" + hf.mcpMethod + "\x00" + hf.mcpName + "\x00" +
			hf.mcpParams + "\x00" + hf.accept + "\x00" + hf.ctype + "\x00" + hf.origin)
		if hf.sid {
			b.WriteString("\x00sid")
		}
		if hf.lastEvent {
			b.WriteString("\x00last")
		}
	}
	return b.String()
}

// Weights of distance: a difference that changes what a server answers
// more often weighs more. The path weighs most (another endpoint), then
// the protocol version asked for and whether credentials came (a refusal
// or a result), then the headers a server checks against the body, the
// capabilities declared and the Origin, then the rest.
const (
	weighPath    = 10000
	weighVersion = 1000
	weighCreds   = 1000
	weighHeader  = 100
	weighCaps    = 100
	weighOrigin  = 100
	weighMeta    = 10
	weighMedia   = 10
	weighClient  = 1
)

// distance is how far a live request's facts are from a recorded one's:
// 0 when alike, more the more they differ in what a server answers by.
// Facts that one side lacks altogether (a stdio request has no HTTP)
// do not count.
func distance(live, rec *reqFacts) int {
	if live == rec || live == nil || rec == nil {
		return 0
	}
	d := 0
	lm, rm := live.metaMembers(), rec.metaMembers()
	for k, v := range lm {
		if w, ok := rm[k]; !ok || w != v {
			d += metaWeight(k)
		}
	}
	for k := range rm {
		if _, ok := lm[k]; !ok {
			d += metaWeight(k)
		}
	}
	if a, b := live.http, rec.http; a != nil && b != nil && a != b {
		d += weigh(a.path != b.path, weighPath) + weigh(a.version != b.version, weighVersion) +
			weigh(a.creds != b.creds, weighCreds) + weigh(a.mcpMethod != b.mcpMethod, weighHeader) +
			weigh(a.mcpName != b.mcpName, weighHeader) + weigh(a.mcpParams != b.mcpParams, weighHeader) +
			weigh(a.lastEvent != b.lastEvent, weighHeader) + weigh(a.origin != b.origin, weighOrigin) +
			weigh(a.accept != b.accept, weighMedia) + weigh(a.ctype != b.ctype, weighMedia)
	}
	return d
}

func metaWeight(key string) int {
	switch key {
	case protocol.MetaProtocolVersion:
		return weighVersion
	case protocol.MetaClientCapabilities:
		return weighCaps
	case protocol.MetaClientInfo:
		return weighClient
	}
	return weighMeta
}

func weigh(differ bool, w int) int {
	if differ {
		return w
	}
	return 0
}

// interner keeps one copy of equal strings and facts: a tape's index
// holds many of each.
type interner struct {
	names map[string]string
	facts map[httpFacts]*httpFacts
}

// maxInterned bounds each of an interner's tables.
const maxInterned = 1 << 16

func (in *interner) name(s string) string {
	if s == "" {
		return ""
	}
	if v, ok := in.names[s]; ok {
		return v
	}
	if in.names == nil {
		in.names = map[string]string{}
	}
	if len(in.names) < maxInterned {
		in.names[s] = s
	}
	return s
}

func (in *interner) httpFacts(f httpFacts) *httpFacts {
	if p, ok := in.facts[f]; ok {
		return p
	}
	p := &f
	if in.facts == nil {
		in.facts = map[httpFacts]*httpFacts{}
	}
	if len(in.facts) < maxInterned {
		in.facts[f] = p
	}
	return p
}
