package capture

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mcptape/mcptape/protocol"
)

// maxPending bounds the in-flight requests tracked per session, so a client
// that never reads its answers cannot grow the recorder without bound.
const maxPending = 10000

// link links m, the message pm that exchange xs carried in direction
// dir, to the session's others and adds the findings that linking finds;
// params are pm's, for a request or a notification. It returns a message
// recorded earlier to store again with the link it has now (a client's
// answer that overtook the request it answers), or nil.
func (st *linker) link(xs *exchange, dir protocol.Direction, pm *protocol.Message, params *protocol.Params, m *Message) (again *Message) {
	switch pm.Kind {
	case protocol.KindRequest:
		return st.request(xs, dir, pm, params, m)
	case protocol.KindNotification:
		st.notification(xs, dir, pm, params, m)
	case protocol.KindResult, protocol.KindError:
		return st.response(xs, dir, pm, m)
	}
	return nil
}

func (st *linker) request(xs *exchange, dir protocol.Direction, pm *protocol.Message, params *protocol.Params, m *Message) (again *Message) {
	m.Name = params.Name
	st.linkTask(params, m)
	if dir == protocol.ClientToServer {
		st.s.Calls++
		st.useID(msgID(pm))
		if xs.reqSeq == 0 && !xs.stream {
			xs.reqSeq, xs.reqID, xs.reqMeth = m.Seq, pm.ID, pm.Method
		}
		st.learnClient(pm.Method, params)
		if len(params.ProgressToken) > 0 {
			st.progress[idOf(params.ProgressToken)] = m.Seq
		}
		switch {
		case params.RequestState != nil:
			key := roundKey(pm.Method, params.Name, *params.RequestState)
			if prev, ok := st.rounds[key]; ok {
				m.Links.Previous = prev
			} else {
				m.Findings = append(m.Findings, Finding{FindingRequestState,
					"requestState matches no input_required result of this call recorded in this session (altered, or from another session)"})
				st.keepRetry(key, m, params.InputResponses)
			}
		case len(params.InputResponses) > 0:
			st.chainStateless(pm.Method, params.Name, params.InputResponses, m)
		}
		if m.Links.Previous != 0 && len(params.InputResponses) > 0 && !st.skeletal {
			m.Findings = append(m.Findings, st.checkInputAnswers(m.Links.Previous, params.InputResponses)...)
		}
		if pm.Method == protocol.MethodToolsCall && !st.skeletal {
			m.Findings = append(m.Findings, st.checkToolCall(params.Name, params.Arguments, xs.headers)...)
		}
	} else {
		// A server→client request belongs to the client call whose stream
		// carried it; on the standalone GET stream it belongs to the session.
		parent := xs.reqSeq
		if xs.stream || st.legacySSE && xs.reqSeq == 0 {
			parent = st.callInFlight()
		}
		m.Links.Parent = parent
		if pm.Method == protocol.MethodSampling && parent != 0 {
			if prev := st.lastSample[parent]; prev != 0 {
				m.Links.Previous = prev
			}
			st.lastSample[parent] = m.Seq
		}
		if params.ElicitationID != "" && len(st.elicit) < maxPending {
			st.elicit[params.ElicitationID] = m.Seq
		}
		if pm.Method == protocol.MethodElicitation && !st.skeletal {
			m.Findings = append(m.Findings, st.noteElicitation(elicitKey{seq: m.Seq}, pm.Params)...)
		}
		if st.s.Era == protocol.EraModern {
			m.Findings = append(m.Findings, Finding{FindingWrongStream,
				fmt.Sprintf("server→client request %s on a 2026-07-28 session, which has none (MRTR replaces them)", pm.Method)})
		} else if f := st.capabilityFinding(pm.Method, params); f != nil {
			m.Findings = append(m.Findings, *f)
		}
	}
	k := pendKey{dir, msgID(pm)}
	if k.id.none() {
		return nil
	}
	if dir == protocol.ServerToClient {
		if again = st.answerEarly(k.id, m, params.Name); again != nil {
			return again
		}
	}
	if len(st.pending[k]) > 0 {
		m.Findings = append(m.Findings, Finding{FindingDuplicateID,
			fmt.Sprintf("id %s is already in flight in this direction", k.id.String())})
	}
	if list := st.pending[k]; len(st.pending) < maxPending && len(list) < maxSameID {
		pd := pending{seq: m.Seq, at: m.Time, x: xs.x.ID, method: pm.Method, name: params.Name, paged: bytes.Contains(pm.Params, []byte(`"cursor"`))}
		if params.Modern {
			pd.caps = params.ClientCapabilities
		}
		if list == nil && len(st.spare) > 0 {
			list, st.spare = st.spare[len(st.spare)-1], st.spare[:len(st.spare)-1]
		}
		st.pending[k] = append(list, pd)
	}
	return nil
}

// maxSameID bounds the requests in flight under one id (a client that
// reuses ids without end).
const maxSameID = 64

// earlyWindow bounds how long a client answer to a server request the
// recorder has not seen yet waits for that request.
const earlyWindow = 10 * time.Second

// findPending finds the request in flight that a message with key k
// refers to: the one exchange x carried (a response on its request's own
// stream), else the only one with that id. Two or more with that id and
// none carried by x is ambiguous: the caller links nothing.
func (st *linker) findPending(k pendKey, x uint64) (pd pending, i int, ambiguous bool) {
	list := st.pending[k]
	if x != 0 {
		for i, pd := range list {
			if pd.x == x {
				return pd, i, false
			}
		}
	}
	switch len(list) {
	case 0:
		return pending{}, -1, false
	case 1:
		return list[0], 0, false
	}
	return pending{}, -1, true
}

// callInFlight is, on a stdio session, the client call that what the
// server sends unasked (a sampling or elicitation request, a log message)
// most likely belongs to: stdio carries no stream per call, so it is the
// latest tools/call (or prompts/get, resources/read, completion) still
// unanswered, else the only client request unanswered, else none.
func (st *linker) callInFlight() uint64 {
	var best, only uint64
	n := 0
	for k, list := range st.pending {
		if k.dir != protocol.ClientToServer {
			continue
		}
		for _, pd := range list {
			n++
			only = pd.seq
			switch pd.method {
			case protocol.MethodToolsCall, protocol.MethodPromptsGet, protocol.MethodResourcesRead, "completion/complete":
				best = max(best, pd.seq)
			}
		}
	}
	switch {
	case best != 0:
		return best
	case n == 1:
		return only
	}
	return 0
}

// maxSpare bounds the lists a session keeps for later ids.
const maxSpare = 64

func (st *linker) donePending(k pendKey, i int) {
	list := st.pending[k]
	if len(list) == 1 {
		delete(st.pending, k)
		if len(st.spare) < maxSpare && cap(list) <= 4 {
			clear(list[:cap(list)])
			st.spare = append(st.spare, list[:0])
		}
		return
	}
	st.pending[k] = append(list[:i:i], list[i+1:]...)
}

// answerEarly links a client answer the recorder indexed before the server
// request it answers (the answer's POST overtook the stream event that
// carried the request): it returns the answer, already recorded as an
// orphan, rewritten with its link, to store again, and the request is not
// left in flight. Nil when no such answer came.
func (st *linker) answerEarly(id rpcID, req *Message, name string) *Message {
	ans := st.early[id]
	if ans == nil {
		return nil
	}
	delete(st.early, id)
	if req.Time.Sub(ans.Time) > earlyWindow {
		return nil
	}
	fixed := *ans
	fixed.Links.Request = req.Seq
	fixed.Method, fixed.Name = req.Method, name
	fixed.Findings = nil
	for _, f := range ans.Findings {
		if f.Kind == FindingOrphanResponse {
			st.s.Findings--
			continue
		}
		fixed.Findings = append(fixed.Findings, f)
	}
	// The store replaces a message written again under its Seq.
	return &fixed
}

// linkTask links a message that names a task to the request that created it.
func (st *linker) linkTask(params *protocol.Params, m *Message) {
	if params.TaskID == "" {
		return
	}
	if seq, ok := st.tasks[params.TaskID]; ok && seq != m.Seq {
		m.Links.Task = seq
	}
}

func (st *linker) learnClient(method string, params *protocol.Params) {
	switch {
	case method == protocol.MethodInitialize:
		st.initialized = true
		st.s.Era = protocol.EraLegacy
		if params.ProtocolVersion != "" {
			st.s.Version = params.ProtocolVersion
		}
		if params.ClientInfo != nil {
			st.s.Client = *params.ClientInfo
		}
		st.learnCapabilities(params.ClientCapabilities)
	case params.Modern:
		if method == protocol.MethodDiscover {
			st.discovered = true
		}
		if !st.initialized {
			if method != protocol.MethodDiscover || st.s.Era == protocol.EraUnknown {
				st.s.Era = protocol.EraOf(params.ProtocolVersion)
				st.s.Version = params.ProtocolVersion
			}
			if params.ClientInfo != nil {
				st.s.Client = *params.ClientInfo
			}
			st.learnCapabilities(params.ClientCapabilities)
		}
	}
}

// learnCapabilities keeps the client's capabilities, unless they are what
// the session holds already (a 2026-07-28 client sends them with every
// request).
func (st *linker) learnCapabilities(caps json.RawMessage) {
	if caps != nil && !bytes.Equal(caps, st.s.ClientCapabilities) {
		st.s.ClientCapabilities = append(json.RawMessage(nil), caps...)
		st.capsRead = false
	}
}

// capabilityFinding is capabilityFinding for the session's client
// capabilities, read once for all the server's requests.
func (st *linker) capabilityFinding(method string, params *protocol.Params) *Finding {
	if !st.capsRead {
		st.caps, st.capsOK = parseCaps(st.s.ClientCapabilities)
		st.capsRead = true
	}
	if !st.capsOK {
		return nil
	}
	return capsFinding(&st.caps, method, params)
}

func roundKey(method, name, state string) string { return method + "\x00" + name + "\x00" + state }

// inputKeys is the sorted keys of an inputRequests or inputResponses map,
// "" when it is not a non-empty object.
func inputKeys(raw json.RawMessage) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || len(m) == 0 {
		return ""
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return strings.Join(keys, "\x00")
}

// chainStateless chains a retry without requestState (optional in an
// input_required result) to the open round of the same method and name
// whose inputRequests keys its inputResponses answer. Two such rounds open
// at once cannot be told apart: the retry is left unchained, with a
// finding.
func (st *linker) chainStateless(method, name string, responses json.RawMessage, m *Message) {
	keys := inputKeys(responses)
	k := roundKey(method, name, keys)
	open := st.stateless[k]
	switch {
	case keys == "" || len(open) == 0:
		m.Findings = append(m.Findings, Finding{FindingRequestState,
			"inputResponses answer no input_required result of this call recorded in this session (their keys differ from every inputRequests)"})
	case len(open) > 1:
		m.Findings = append(m.Findings, Finding{FindingRequestState,
			fmt.Sprintf("inputResponses match %d open input_required rounds without requestState; the retry is not chained", len(open))})
	default:
		m.Links.Previous = open[0]
		delete(st.stateless, k)
	}
}

func (st *linker) notification(xs *exchange, dir protocol.Direction, pm *protocol.Message, params *protocol.Params, m *Message) {
	st.linkTask(params, m)
	switch {
	case pm.Method == protocol.MethodProgress && len(params.ProgressToken) > 0:
		if seq, ok := st.progress[idOf(params.ProgressToken)]; ok {
			m.Links.Request = seq
		}
	case pm.Method == protocol.MethodCancelled && len(params.RequestID) > 0:
		// A sender cancels a request it sent itself.
		if pd, i, _ := st.findPending(pendKey{dir, idOf(params.RequestID)}, xs.x.ID); i >= 0 {
			m.Links.Request = pd.seq
		}
	case pm.Method == protocol.MethodElicitationComplete && params.ElicitationID != "":
		if seq, ok := st.elicit[params.ElicitationID]; ok {
			m.Links.Request = seq
		} else {
			m.Findings = append(m.Findings, Finding{FindingOrphanResponse,
				fmt.Sprintf("elicitation/complete for elicitationId %q, which no recorded elicitation/create carried", params.ElicitationID)})
		}
	case dir == protocol.ServerToClient && (xs.stream || st.legacySSE && xs.reqSeq == 0):
		// stdio, and the 2024-11-05 HTTP+SSE transport's one stream, have
		// no stream per call: a log message belongs to the call in flight,
		// when that is clear.
		m.Links.Request = st.callInFlight()
	case dir == protocol.ServerToClient:
		// Log messages and other notifications belong to the request whose
		// stream carried them (none on the standalone GET stream).
		m.Links.Request = xs.reqSeq
	}
	if dir == protocol.ServerToClient && xs.reqMeth == protocol.MethodSubscriptionsListen {
		switch {
		case pm.Method == protocol.MethodProgress || pm.Method == protocol.MethodLogMessage:
			m.Findings = append(m.Findings, Finding{FindingWrongStream,
				pm.Method + " on a subscriptions/listen stream, which carries only subscription notifications"})
		case len(params.SubscriptionID) == 0:
			m.Findings = append(m.Findings, Finding{FindingMalformed,
				"notification on a subscriptions/listen stream without _meta[\"io.modelcontextprotocol/subscriptionId\"]"})
		case protocol.IDKey(params.SubscriptionID) != protocol.IDKey(xs.reqID):
			m.Findings = append(m.Findings, Finding{FindingMalformed,
				fmt.Sprintf("subscriptionId %s differs from the id %s of the listen request whose stream carries it", params.SubscriptionID, xs.reqID)})
		}
	}
	if dir == protocol.ClientToServer && pm.Method == protocol.MethodInitialized {
		st.initialized = true
	}
}

func (st *linker) response(xs *exchange, dir protocol.Direction, pm *protocol.Message, m *Message) (again *Message) {
	reqDir := protocol.ClientToServer
	if dir == protocol.ClientToServer {
		reqDir = protocol.ServerToClient
	}
	if pm.Kind == protocol.KindError {
		st.s.Errors++
	}
	k := pendKey{reqDir, msgID(pm)}
	// A response on a POST's stream (or in its JSON body) answers a request
	// that POST carried; a client's answer to a server request, and a
	// response on the GET stream, travel apart from their request.
	var carrier uint64
	if dir == protocol.ServerToClient && xs.reqSeq != 0 {
		carrier = xs.x.ID
	}
	pd, i, ambiguous := st.findPending(k, carrier)
	switch {
	case ambiguous:
		m.Findings = append(m.Findings, Finding{FindingDuplicateID,
			fmt.Sprintf("response to id %s, which %d requests in flight share; it is not linked to any of them", k.id.String(), len(st.pending[k]))})
		return
	case i < 0:
		if !k.id.none() {
			m.Findings = append(m.Findings, Finding{FindingOrphanResponse,
				fmt.Sprintf("response to id %s, which no recorded request in flight has", k.id.String())})
			if dir == protocol.ClientToServer && len(st.early) < maxPending {
				st.early[k.id] = m
				st.earlyNew = k.id
			}
		}
		return
	}
	st.donePending(k, i)
	if reqDir == protocol.ClientToServer {
		st.met.call(pd.method, pd.name, st.s.Leg, m.Time.Sub(pd.at))
	}
	if carrier != 0 && pd.x != carrier {
		m.Findings = append(m.Findings, Finding{FindingWrongStream,
			fmt.Sprintf("a response to id %s on the stream of another request (id %s)", k.id.String(), xs.reqID)})
	}
	m.Links.Request = pd.seq
	m.Method = pd.method
	m.Name = pd.name
	if dir == protocol.ServerToClient && xs.x.Method == "GET" && xs.headers.Get(protocol.HeaderLastEventID) == "" && !st.legacySSE {
		m.Findings = append(m.Findings, Finding{FindingWrongStream,
			"a response on the standalone GET stream, where the spec allows none (outside resumption)"})
	}
	if pm.Kind != protocol.KindResult {
		return
	}
	res, _ := st.strs.ParseResult(pm.Result)
	if res.IsError {
		st.s.Errors++
		st.met.toolError(pd.method, pd.name)
	}
	if res.TaskID != "" && len(st.tasks) < maxPending {
		if _, known := st.tasks[res.TaskID]; !known {
			st.tasks[res.TaskID] = pd.seq
		}
	}
	if dir != protocol.ServerToClient {
		if pd.method == protocol.MethodElicitation && !st.skeletal {
			m.Findings = append(m.Findings, st.checkElicitAnswer(elicitKey{seq: pd.seq}, pm.Result)...)
		}
		return
	}
	st.learnServer(pd.method, &res)
	switch {
	case st.skeletal:
		// What a check reads may be what the skeleton left out.
	case pd.method == protocol.MethodToolsList:
		m.Findings = append(m.Findings, st.learnTools(pm.Result, pd.paged)...)
		m.Findings = append(m.Findings, st.drift.toolsList(&st.s, pm.Result, pd.paged)...)
	case pd.method == protocol.MethodToolsCall:
		if res.ResultType != "input_required" {
			m.Findings = append(m.Findings, st.checkStructured(pd.name, &res)...)
		}
	}
	if res.ResultType == "input_required" {
		if res.RequestState != nil {
			key := roundKey(pd.method, pd.name, *res.RequestState)
			st.rounds[key] = pd.seq
			again = st.retryEarly(key, pd.seq, m.Time)
		} else if keys := inputKeys(res.InputRequests); keys != "" && len(st.stateless) < maxPending {
			k := roundKey(pd.method, pd.name, keys)
			st.stateless[k] = append(st.stateless[k], pd.seq)
		}
		caps := pd.caps
		if caps == nil {
			caps = st.s.ClientCapabilities
		}
		if !st.skeletal {
			m.Findings = append(m.Findings, st.checkInputRequests(pd.seq, caps, res.InputRequests)...)
		}
	}
	return again
}

func (st *linker) learnServer(method string, res *protocol.Result) {
	switch method {
	case protocol.MethodInitialize:
		if res.ProtocolVersion != "" {
			st.s.Version = res.ProtocolVersion
			st.s.Era = protocol.EraLegacy
		}
	case protocol.MethodDiscover:
		st.supported = res.SupportedVersions
		if protocol.NewestModern(res.SupportedVersions) == "" && !st.initialized {
			// A legacy server: the client will fall back to initialize.
			st.s.Era = protocol.EraLegacy
			st.s.Version = ""
		}
	default:
		if res.ServerInfo == nil {
			return
		}
	}
	if res.ServerInfo != nil {
		st.s.Server = *res.ServerInfo
	}
	if res.Capabilities != nil {
		st.s.ServerCapabilities = append(json.RawMessage(nil), res.Capabilities...)
	}
}

// earlyRetry is an MRTR retry recorded before the input_required result it
// answers: the proxy hands the recorder a result's end after the client
// has read it, so the client's next round may be recorded first.
type earlyRetry struct {
	m       *Message
	answers json.RawMessage
}

// keepRetry keeps a retry whose requestState matches no round yet, for
// retryEarly.
func (st *linker) keepRetry(key string, m *Message, answers json.RawMessage) {
	if len(st.retries) >= maxPending {
		return
	}
	// m is copied once it is complete (keepEarly): what the batch adds
	// to it after linking (what became of an intercepted message) is
	// part of what is stored again.
	st.retries[key] = earlyRetry{m: m, answers: bytes.Clone(answers)}
	st.retryNew = key
}

// retryEarly is the retry that came before the round whose request is
// seq, now that its result is here, chained to it (Links.Previous) and
// without the finding it got for matching nothing; nil when there is none
// (or it came too long before).
func (st *linker) retryEarly(key string, seq uint64, at time.Time) *Message {
	r, ok := st.retries[key]
	if !ok {
		return nil
	}
	delete(st.retries, key)
	if at.Sub(r.m.Time) > earlyWindow {
		return nil
	}
	fixed := *r.m
	fixed.Links.Previous = seq
	fixed.Findings = nil
	for _, f := range r.m.Findings {
		if f.Kind == FindingRequestState {
			st.s.Findings--
			continue
		}
		fixed.Findings = append(fixed.Findings, f)
	}
	if len(r.answers) > 0 && !st.skeletal {
		more := st.checkInputAnswers(seq, r.answers)
		st.s.Findings += len(more)
		fixed.Findings = append(fixed.Findings, more...)
	}
	// The store replaces a message written again under its Seq.
	return &fixed
}
