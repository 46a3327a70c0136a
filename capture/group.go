package capture

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/mcptape/mcptape/protocol"
)

// grouper decides which session an HTTP exchange belongs to. It holds the
// live sessions and the indexes from what a request shows — an
// Mcp-Session-Id, a client fingerprint, a remote address — to them, and
// nothing else: the linking state of a session (requests in flight,
// progress tokens, rounds) is the session's own ([linker]). A stdio stream
// is a session of its own and never passes through here, but opens its
// session here too. Owned by the pipeline goroutine.
type grouper struct {
	out      *batcher              // writes the sessions it opens
	sessions map[string]*linker    // live sessions by ID
	byKey    map[string]*linker    // raw Mcp-Session-Id → session; never stored
	byFP     map[clientKey]*linker // modern fingerprint → latest session
	probes   map[clientKey]*linker // ip, path, client → a session opened by server/discover
	httpOnly map[clientKey]*linker // ip → session of non-MCP exchanges
	recent   map[clientKey]*linker // ip, path → the latest session-less session
	caps     map[string]string     // raw clientCapabilities → capsDigest
}

func newGrouper(out *batcher) *grouper {
	return &grouper{
		out: out, sessions: map[string]*linker{},
		byKey: map[string]*linker{}, byFP: map[clientKey]*linker{}, probes: map[clientKey]*linker{},
		httpOnly: map[clientKey]*linker{}, recent: map[clientKey]*linker{}, caps: map[string]string{},
	}
}

// newSession opens a session for the exchange xs.
func (g *grouper) newSession(xs *exchange, at time.Time, opening string) *linker {
	o := g.out.o
	id := o.NewSessionID(at)
	for g.sessions[id] != nil {
		id += "x"
	}
	up := xs.upstream
	if up == "" && xs.leg != LegStdio {
		up = o.Upstream
	}
	st := newLinker(Session{
		ID: id, Upstream: up, Path: xs.path, Opening: opening, Start: at, End: at,
		Leg: xs.leg, Route: xs.route,
	}, keyScope(xs), at, g.out.met, &g.out.strs)
	st.drift = g.out.drift
	g.sessions[id] = st
	g.out.dirtyS[id] = st
	return st
}

// probeWindow bounds how long after a server/discover that found only
// legacy versions an initialize from the same client still joins its session.
const probeWindow = 30 * time.Second

// clientKey is what the grouper knows a session-less client by: where its
// requests come from and go to, and who it says it is. A field the index
// does not use is empty.
type clientKey struct {
	ip, route, upstream, path string
	name, version             string // clientInfo
	caps                      string // capsHash of its capabilities
}

// sessionFor finds or opens the session of an exchange whose request body
// has been decoded: first is its first request or notification (nil when
// it has none) and params first's params. See the package documentation
// for the rules.
func (g *grouper) sessionFor(xs *exchange, first *protocol.Message, params *protocol.Params, at time.Time) *linker {
	o := g.out.o
	if xs.key != "" && !xs.refused {
		if st := g.byKey[keyScope(xs)+xs.key]; st != nil {
			return st
		}
		st := g.newSession(xs, at, "mid-session")
		g.bindKey(xs.key, st)
		return st
	}
	if first == nil && !xs.mcp || xs.refused {
		// Plain HTTP (OAuth metadata, health checks), and requests the
		// proxy refused itself: filed per client address, never in an MCP
		// session whose traffic they are not.
		hk := clientKey{ip: xs.ip, route: xs.route, upstream: xs.upstream}
		if st := g.httpOnly[hk]; st != nil && at.Sub(st.last) < o.IdleGap {
			return st
		}
		st := g.newSession(xs, at, "http")
		st.plainHTTP, st.httpKey = true, hk
		g.httpOnly[hk] = st
		return st
	}
	near := clientKey{ip: xs.ip, route: xs.route, upstream: xs.upstream, path: xs.path}
	probeFP := near
	if ci := params.ClientInfo; ci != nil {
		probeFP.name, probeFP.version = ci.Name, ci.Version
	}
	fp := probeFP
	fp.caps = g.capsHash(params.ClientCapabilities)
	method, id := "", rpcID{}
	if first != nil {
		method = first.Method
		id = msgID(first)
	}
	// A message that does not say who sent it (go-sdk's HTTP
	// notifications/cancelled has no _meta) belongs with the latest
	// session-less traffic from the same address and endpoint.
	if params.ClientInfo == nil && method != protocol.MethodInitialize && method != protocol.MethodDiscover {
		if st := g.recent[near]; st != nil && !st.keyed && at.Sub(st.last) < o.IdleGap && !st.usedID(id) {
			return st
		}
	}
	st := g.sessionByFP(xs, method, id, probeFP, fp, at)
	g.recent[near] = st
	return st
}

// joinable reports whether a session-less request from the fingerprint of
// st may join it: st is still a modern session, recent, and has not seen
// the request's id. A client never reuses a request id within a session,
// so a reused one is a new run of the same program (a test run twice, say),
// whose ids start again.
func (g *grouper) joinable(st *linker, id rpcID, at time.Time) bool {
	return st != nil && !st.initialized && !st.keyed && at.Sub(st.last) < g.out.o.IdleGap && !st.usedID(id)
}

func (g *grouper) sessionByFP(xs *exchange, method string, id rpcID, probeFP, fp clientKey, at time.Time) *linker {
	switch method {
	case protocol.MethodInitialize:
		if st := g.probes[probeFP]; st != nil && !st.initialized && !st.keyed && at.Sub(st.last) < probeWindow &&
			protocol.NewestModern(st.supported) == "" && !st.usedID(id) {
			st.s.Opening = "discover+initialize"
			delete(g.probes, probeFP)
			if g.byFP[st.fp] == st {
				delete(g.byFP, st.fp)
			}
			return st
		}
		return g.newSession(xs, at, "initialize")
	case protocol.MethodDiscover:
		if st := g.byFP[fp]; g.joinable(st, id, at) {
			return st
		}
		st := g.newSession(xs, at, "discover")
		st.fp, st.probeFP = fp, probeFP
		g.byFP[fp] = st
		g.probes[probeFP] = st
		return st
	}
	if st := g.byFP[fp]; g.joinable(st, id, at) {
		return st
	}
	st := g.newSession(xs, at, "request")
	st.fp = fp
	g.byFP[fp] = st
	return st
}

// bindKey makes key name st: the response that opens a legacy session names
// it, and a server may mint the same id again after the client deleted the
// session that had it — the new session takes the id over.
func (g *grouper) bindKey(key string, st *linker) bool {
	k := st.scope + key
	if other := g.byKey[k]; other != nil && other != st && !other.deleted {
		return false
	}
	g.byKey[k] = st
	st.keyed = true
	st.s.Key = g.out.red.pseudonym(key)
	if g.probes[st.probeFP] == st {
		delete(g.probes, st.probeFP)
	}
	return true
}

// keyScope scopes a session id to the leg, route and upstream that
// carried it: servers mint ids on their own, so two upstreams (or a
// hostile one) naming the same id never share a session.
func keyScope(xs *exchange) string {
	if xs.leg == LegReverse && xs.route == "" && xs.upstream == "" {
		return ""
	}
	return xs.leg.String() + "|" + xs.route + "|" + xs.upstream + "\x00"
}

// forget drops st (a purged session) and every index entry that points at
// it.
func (g *grouper) forget(st *linker) {
	delete(g.sessions, st.s.ID)
	for k, v := range g.byKey {
		if v == st {
			delete(g.byKey, k)
		}
	}
	if g.byFP[st.fp] == st {
		delete(g.byFP, st.fp)
	}
	if g.probes[st.probeFP] == st {
		delete(g.probes, st.probeFP)
	}
	if g.httpOnly[st.httpKey] == st {
		delete(g.httpOnly, st.httpKey)
	}
	for k, v := range g.recent {
		if v == st {
			delete(g.recent, k)
		}
	}
}

// capsCacheMax bounds the distinct capabilities texts whose digest the
// grouper remembers; capsCacheText bounds the length of one.
const (
	capsCacheMax  = 256
	capsCacheText = 4 << 10
)

// capsHash is capsDigest, remembered by the raw text: a 2026-07-28 client
// sends the same capabilities with every request, and canonicalising them
// (a JSON decode, encode and SHA-256) cost more than the rest of the
// request's correlation.
func (g *grouper) capsHash(raw json.RawMessage) string {
	if len(raw) == 0 || len(raw) > capsCacheText {
		return capsDigest(raw)
	}
	if h, ok := g.caps[string(raw)]; ok {
		return h
	}
	h := capsDigest(raw)
	if len(g.caps) >= capsCacheMax {
		clear(g.caps)
	}
	g.caps[string(raw)] = h
	return h
}

// capsDigest is a short digest of canonical capabilities JSON.
func capsDigest(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return "?"
	}
	b, _ := json.Marshal(v) // maps marshal with sorted keys
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:6])
}
