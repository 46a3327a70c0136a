package capture

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/mcptape/mcptape/protocol"
)

// linker is one live session: its record, and the state that links its
// messages into calls ([linker.link], correlate.go) and checks them
// (findings.go). The grouper files exchanges into linkers; only the
// pipeline goroutine touches them.
type linker struct {
	s           Session
	met         *recorderMetrics  // nil without metrics
	strs        *protocol.Strings // what its results' strings are read into
	drift       *driftCheck       // nil without baselines
	skeletal    bool              // the message being linked is a skeleton's (batcher.skeletal)
	scope       string            // keyScope of its traffic
	last        time.Time
	keyed       bool // has an Mcp-Session-Id
	deleted     bool // the client ended it with DELETE
	legacySSE   bool // the 2024-11-05 HTTP+SSE transport: answers come on the GET stream
	fp, probeFP clientKey
	plainHTTP   bool      // a session of plain HTTP exchanges (opening "http")
	httpKey     clientKey // its key in grouper.httpOnly
	initialized bool      // initialize seen
	discovered  bool      // server/discover seen
	supported   []string
	pending     map[pendKey][]pending // in flight; more than one when an id is reused
	spare       [][]pending           // lists pending no longer uses, for the next ids (see donePending)
	used        map[rpcID]struct{}    // ids of the client's requests (modern sessions; see grouper.joinable)
	early       map[rpcID]*Message    // client answers to server requests not seen yet, by id
	earlyNew    rpcID                 // the id of the one just added to early (see keepEarly)
	progress    map[rpcID]uint64      // progress token → request seq
	rounds      map[string]uint64     // method|name|requestState → the input_required round's request seq
	retries     map[string]earlyRetry // method|name|requestState → a retry that came before that round's result (see retryEarly)
	retryNew    string                // the key of the one just added to retries (see keepEarly)
	stateless   map[string][]uint64   // method|name|inputRequests keys → rounds without requestState
	lastSample  map[uint64]uint64     // parent call → its latest sampling request
	elicit      map[string]uint64     // elicitationId → the URL elicitation request
	tasks       map[string]uint64     // taskId → the request that created the task
	tools       map[string]*toolInfo
	// caps is s.ClientCapabilities read (capsOK: they were well formed),
	// once capsRead.
	caps             clientCaps
	capsOK, capsRead bool
	written          time.Time // when the record was last handed to the writer
	urgent           bool      // a change readers must see at once (a key bound, a loss)

	// forms are the elicitation forms waiting for their answers.
	forms map[elicitKey]*jsonschema.Resolved
}

// newLinker is a session opened at at; the grouper names and files it.
func newLinker(s Session, scope string, at time.Time, met *recorderMetrics, strs *protocol.Strings) *linker {
	return &linker{
		s: s, met: met, strs: strs, scope: scope, last: at,
		pending:    map[pendKey][]pending{},
		early:      map[rpcID]*Message{},
		progress:   map[rpcID]uint64{},
		rounds:     map[string]uint64{},
		retries:    map[string]earlyRetry{},
		stateless:  map[string][]uint64{},
		lastSample: map[uint64]uint64{},
		elicit:     map[string]uint64{},
		tasks:      map[string]uint64{},
	}
}

type pendKey struct {
	dir protocol.Direction
	id  rpcID
}

type pending struct {
	seq    uint64
	at     time.Time // when the request crossed
	x      uint64    // the exchange whose body carried the request
	method string
	name   string
	caps   json.RawMessage // a modern request's clientCapabilities
	paged  bool            // a list request with a cursor
}

// usedID reports whether the client already sent a request with id in this
// session.
func (st *linker) usedID(id rpcID) bool {
	_, ok := st.used[id]
	return !id.none() && ok
}

// useID notes a client request id, up to maxPending of them.
func (st *linker) useID(id rpcID) {
	if id.none() || st.keyed || len(st.used) >= maxPending {
		return
	}
	if st.used == nil {
		st.used = map[rpcID]struct{}{}
	}
	st.used[id] = struct{}{}
}

// keepEarly gives the client answer just added to early (if any) memory
// of its own, now that it is complete: a message lies in its batch's
// arena, which an answer kept for up to earlyWindow would hold on to.
func (st *linker) keepEarly() {
	if st.retryNew != "" {
		// Likewise an MRTR retry that came before its round (keepRetry).
		r := st.retries[st.retryNew]
		r.m = ownedCopy(r.m)
		st.retries[st.retryNew] = r
		st.retryNew = ""
	}
	if st.earlyNew.none() {
		return
	}
	id := st.earlyNew
	st.earlyNew = rpcID{}
	st.early[id] = ownedCopy(st.early[id])
}

// ownedCopy is m with memory of its own.
func ownedCopy(m *Message) *Message {
	c := *m
	c.Raw, c.ID = bytes.Clone(m.Raw), bytes.Clone(m.ID)
	c.Findings = slices.Clone(m.Findings)
	if m.SSE != nil {
		sse := *m.SSE
		sse.Prefix, sse.Suffix, sse.Whole = bytes.Clone(sse.Prefix), bytes.Clone(sse.Suffix), bytes.Clone(sse.Whole)
		c.SSE = &sse
	}
	return &c
}

// touch notes traffic at at.
func (st *linker) touch(at time.Time) {
	if at.After(st.last) {
		st.last = at
	}
	if at.After(st.s.End) {
		st.s.End = at
	}
}

func closedUnlessIncomplete(s Status) Status {
	if s == StatusIncomplete {
		return s
	}
	return StatusClosed
}

// rpcID is a JSON-RPC id (or a progress token) as the linker matches it:
// a non-negative integer, the usual id, by its value, so that keeping and
// finding one allocates nothing; anything else by protocol.IDKey's
// canonical text. The zero rpcID is no id.
type rpcID struct {
	n uint64 // the integer plus one; 0 when the id is not one
	s string // protocol.IDKey of any other id
}

// msgID is pm's id; the zero rpcID when it has none, or a null one.
func msgID(pm *protocol.Message) rpcID {
	if !pm.HasID() {
		return rpcID{}
	}
	return idOf(pm.ID)
}

// idOf is the rpcID of raw id bytes (see protocol.IDKey).
func idOf(raw json.RawMessage) rpcID {
	t := bytes.TrimSpace(raw)
	if n := len(t); n > 0 && n <= 18 && (t[0] != '0' || n == 1) {
		v := uint64(0)
		for _, c := range t {
			if c < '0' || c > '9' {
				return rpcID{s: protocol.IDKey(raw)}
			}
			v = v*10 + uint64(c-'0')
		}
		return rpcID{n: v + 1}
	}
	return rpcID{s: protocol.IDKey(raw)}
}

// String is the id as protocol.IDKey writes it.
func (id rpcID) String() string {
	if id.n > 0 {
		return strconv.FormatUint(id.n-1, 10)
	}
	return id.s
}

// none reports whether id is no id.
func (id rpcID) none() bool { return id == rpcID{} }
