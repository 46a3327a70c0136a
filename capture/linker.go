package capture

import (
	"encoding/json"
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
	used        map[string]struct{}   // ids of the client's requests (modern sessions; see grouper.joinable)
	early       map[string]*Message   // client answers to server requests not seen yet, by id
	progress    map[string]uint64     // progress token → request seq
	rounds      map[string]uint64     // method|name|requestState → the input_required round's request seq
	stateless   map[string][]uint64   // method|name|inputRequests keys → rounds without requestState
	lastSample  map[uint64]uint64     // parent call → its latest sampling request
	elicit      map[string]uint64     // elicitationId → the URL elicitation request
	tasks       map[string]uint64     // taskId → the request that created the task
	tools       map[string]*toolInfo
	written     time.Time // when the record was last handed to the writer
	urgent      bool      // a change readers must see at once (a key bound, a loss)

	// forms are the elicitation forms waiting for their answers.
	forms map[elicitKey]*jsonschema.Resolved
}

// newLinker is a session opened at at; the grouper names and files it.
func newLinker(s Session, scope string, at time.Time, met *recorderMetrics, strs *protocol.Strings) *linker {
	return &linker{
		s: s, met: met, strs: strs, scope: scope, last: at,
		pending:    map[pendKey][]pending{},
		early:      map[string]*Message{},
		progress:   map[string]uint64{},
		rounds:     map[string]uint64{},
		stateless:  map[string][]uint64{},
		lastSample: map[uint64]uint64{},
		elicit:     map[string]uint64{},
		tasks:      map[string]uint64{},
	}
}

type pendKey struct {
	dir protocol.Direction
	id  string
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
func (st *linker) usedID(id string) bool {
	_, ok := st.used[id]
	return id != "" && ok
}

// useID notes a client request id, up to maxPending of them.
func (st *linker) useID(id string) {
	if id == "" || st.keyed || len(st.used) >= maxPending {
		return
	}
	if st.used == nil {
		st.used = map[string]struct{}{}
	}
	st.used[id] = struct{}{}
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
