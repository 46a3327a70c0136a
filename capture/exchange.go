package capture

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/mcptape/mcptape/protocol"
)

// exchange decodes one exchange: it gathers the request's and the
// response's bodies (or feeds an SSE response to its parser as it comes),
// undoes their Content-Encoding, splits them into JSON-RPC messages and
// hands those to its batcher, which numbers and links them. It keeps the
// exchange's record (x) up to date as it goes. The grouper files it into
// a session once its request is decoded. Owned by the pipeline goroutine.
type exchange struct {
	x        Exchange
	out      *batcher // where its messages go
	groups   *grouper // who files it into a session
	sess     *linker
	mcp      bool // the exchange carries MCP traffic (its bodies are decoded)
	path     string
	key      string // raw Mcp-Session-Id of the request
	leg      Leg
	route    string
	upstream string
	refused  bool // the leg answered it itself (Request.Refused)
	stream   bool // a stdio stream: one exchange for the process's life
	// legacyStream is the GET stream of a 2024-11-05 HTTP+SSE session:
	// when it ends, so does the session.
	legacyStream bool
	reqBuf       []byte
	reqDone      bool
	reqOver      bool
	reqCut       bool // the exchange was aborted before its request body ended
	reqEnc       string
	deferred     []event // response events that arrived before the request was complete
	resp         bool
	respEnc      string
	respLen      int64 // the response's Content-Length, -1 when none
	respDone     bool  // the JSON body was decoded as soon as it was complete
	respBuf      []byte
	respOver     bool
	sse          *protocol.SSEParser
	reqSeq       uint64 // the exchange's first client request: parent of what its stream carries
	reqID        json.RawMessage
	reqMeth      string
	headers      http.Header
	ip           string
	// held are what became of messages not decoded yet (Tap.Intercepted)
	held []heldNote
}

// newExchange starts decoding the exchange whose request ev reports
// (evBegin). The caller hands it the request body Begin carried, if any.
func newExchange(ev event, out *batcher, groups *grouper) *exchange {
	b := ev.begin
	xs := &exchange{out: out, groups: groups, path: b.path, headers: b.Header, leg: b.Leg, route: b.Route, upstream: b.Upstream, refused: b.Refused}
	xs.x = Exchange{
		ID: ev.x, Method: b.Method, Start: ev.at,
		RequestHeader: out.red.header(b.Header),
	}
	xs.x.RequestHeader, _ = xs.capHeader(xs.x.RequestHeader, "request") // limits.go
	xs.x.URL = redactTarget(out.red, b.Target)
	xs.key = b.Header.Get(protocol.HeaderSessionID)
	if xs.key == "" {
		xs.key = legacyKey(b.query)
	}
	xs.reqEnc = strings.ToLower(b.Header.Get("Content-Encoding"))
	xs.x.RequestBody = bodyKind(b.Header.Get("Content-Type"), 0)
	xs.ip = remoteIP(b.Remote)
	return xs
}

// redactTarget is a request target with its secrets redacted.
func redactTarget(red *redactor, raw string) string {
	if plainPath(raw) {
		return raw // no query, and nothing to escape: as RequestURI makes it
	}
	u, err := url.ParseRequestURI(raw)
	if err != nil {
		return raw
	}
	return red.url(u)
}

// legacyKey is the key of a 2024-11-05 HTTP+SSE session named in a
// request's query (the message endpoint's sessionId, as the endpoint event
// gave it), "" when there is none.
// plainPath reports whether target is an absolute path of unreserved
// characters and slashes only.
func plainPath(target string) bool {
	if target == "" || target[0] != '/' {
		return false
	}
	for i := 1; i < len(target); i++ {
		c := target[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '/' || c == '-' || c == '.' || c == '_' || c == '~') {
			return false
		}
	}
	return true
}

func legacyKey(query string) string {
	if query == "" || !strings.Contains(query, "ession") {
		return ""
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return ""
	}
	for _, k := range []string{"sessionId", "session_id"} {
		if v := q.Get(k); v != "" {
			return "sse:" + v
		}
	}
	return ""
}

// legacyEndpoint handles the endpoint event that opens a 2024-11-05
// HTTP+SSE session on its GET stream: the message URL it names carries the
// session's id, by which the client's POSTs join this session.
func (xs *exchange) legacyEndpoint(data []byte) {
	u, err := url.Parse(strings.TrimSpace(string(data)))
	if err != nil {
		return
	}
	key := legacyKey(u.RawQuery)
	st := xs.sess
	if key == "" || st == nil {
		return
	}
	if xs.groups.bindKey(key, st) {
		xs.legacyStream = true
		st.legacySSE = true
		st.s.Opening = "sse"
		st.s.Era = protocol.EraLegacy
		st.urgent = true
	}
}

func remoteIP(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return host
}

// reqBodyOwned is reqBody for bytes the exchange may keep (Begin's copy of
// the body): the first of them are kept as they are, not copied.
func (xs *exchange) reqBodyOwned(b []byte) {
	if len(xs.reqBuf) == 0 && !xs.reqOver && len(b) <= xs.out.o.MaxMessageSize {
		xs.x.RequestBytes += int64(len(b))
		xs.reqBuf = b
		return
	}
	xs.reqBody(b)
}

func (xs *exchange) reqBody(b []byte) {
	xs.x.RequestBytes += int64(len(b))
	if xs.reqOver {
		return
	}
	if len(xs.reqBuf)+len(b) > xs.out.o.MaxMessageSize {
		xs.reqBuf = appendUpTo(xs.reqBuf, b[:xs.out.o.MaxMessageSize-len(xs.reqBuf)], xs.out.o.MaxMessageSize)
		xs.reqOver = true
		return
	}
	xs.reqBuf = appendUpTo(xs.reqBuf, b, xs.out.o.MaxMessageSize)
}

// reqEnd decodes the request body, finds the exchange's session and records
// the client's messages.
func (xs *exchange) reqEnd(at time.Time) {
	xs.reqDone = true
	body, encProblem := decodeBody(xs.reqBuf, xs.reqEnc)
	var msgs []protocol.Message
	if len(body) > 0 && encProblem == "" {
		msgs = xs.out.splitBody(body)
	}
	rpc, first := false, -1
	for i := range msgs {
		if msgs[i].Kind != protocol.KindInvalid {
			rpc = true
		}
		if first < 0 && (msgs[i].Kind == protocol.KindRequest || msgs[i].Kind == protocol.KindNotification) {
			first = i
		}
	}
	// The first request's params, read once: for grouping, linking and the
	// routing headers' check.
	var params protocol.Params
	var firstMsg *protocol.Message
	if first >= 0 {
		firstMsg = &msgs[first]
		params, _ = xs.out.strs.ParseParams(firstMsg.Params)
	}
	xs.mcp = !xs.refused && (rpc || xs.key != "" || strings.Contains(xs.headers.Get("Accept"), protocol.ContentTypeSSE) ||
		xs.x.RequestBody == BodyJSON && xs.x.Method == http.MethodPost && !plainJSON(body))
	st := xs.groups.sessionFor(xs, firstMsg, &params, at)
	xs.sess = st
	xs.x.SessionID = st.s.ID
	st.s.Exchanges++
	st.s.Findings += len(xs.x.FindingList) // capHeader's, from before the session was known
	xs.out.touch(st, at)
	if xs.x.Method == http.MethodDelete && xs.key != "" && !xs.refused {
		st.s.Status = closedUnlessIncomplete(st.s.Status)
		st.deleted = true
	}
	if v := xs.headers.Get(protocol.HeaderProtocolVersion); v != "" && st.s.Version == "" {
		st.s.Version = v
		if st.s.Era == protocol.EraUnknown {
			st.s.Era = protocol.EraOf(v)
		}
	}
	if !xs.mcp {
		xs.plainBody(protocol.ClientToServer, xs.reqBuf, xs.reqOver, xs.x.RequestBytes, xs.headers.Get("Content-Type"), xs.reqEnc, at)
		xs.reqBuf = nil
		return
	}
	if encProblem != "" {
		xs.out.add(xs, xs.out.invalidMsg(xs, protocol.ClientToServer, xs.reqBuf, at, FindingEncoding, encProblem), nil)
		return
	}
	if xs.reqCut {
		// The client stopped sending (or the exchange was cut) before the
		// body's end: what arrived is kept as it is, marked as cut rather
		// than taken for malformed JSON.
		xs.x.Truncated = true
		if len(xs.reqBuf) > 0 {
			xs.out.add(xs, xs.out.invalid(xs, protocol.ClientToServer, xs.reqBuf, true, at, FindingTruncated,
				fmt.Sprintf("the request body was cut after %d bytes (see the exchange's error)", xs.x.RequestBytes)), nil)
		}
		xs.reqBuf = nil
		return
	}
	if xs.reqOver {
		m := xs.out.invalid(xs, protocol.ClientToServer, xs.reqBuf, true, at, FindingOversize,
			fmt.Sprintf("request body larger than %d bytes; stored cut", xs.out.o.MaxMessageSize))
		xs.reqBuf = nil
		xs.out.add(xs, m, nil)
		return
	}
	for i := range msgs {
		var pp *protocol.Params
		if i == first {
			pp = &params
		}
		xs.out.messageWith(xs, protocol.ClientToServer, &msgs[i], pp, at, nil, true) // reqBuf is not reused
	}
	xs.checkHeaders(msgs, &params)
	xs.reqBuf = nil
}

func (xs *exchange) response(ev event) {
	xs.resp = true
	xs.x.Status = ev.status
	xs.x.ResponseHeader = xs.out.red.header(ev.header)
	if h, cut := xs.capHeader(xs.x.ResponseHeader, "response"); cut {
		xs.x.ResponseHeader = h
		xs.sess.s.Findings++
	}
	xs.x.Synthesized = ev.synth
	xs.x.Rewritten = ev.rewritten
	if !ev.synth {
		xs.x.Forwarded, xs.x.UpstreamHeaders = ev.forwarded, ev.upHeaders
	}
	xs.x.ResponseBody = bodyKind(ev.header.Get("Content-Type"), ev.status)
	xs.respEnc = strings.ToLower(ev.header.Get("Content-Encoding"))
	if xs.respEnc == "identity" {
		xs.respEnc = ""
	}
	xs.respLen = -1
	if cl := ev.header.Get("Content-Length"); cl != "" {
		if n, err := strconv.ParseInt(cl, 10, 64); err == nil && n >= 0 {
			xs.respLen = n
		}
	}
	if xs.x.ResponseBody == BodySSE && xs.respEnc == "" {
		xs.sse = &protocol.SSEParser{MaxEventSize: xs.out.o.MaxMessageSize, Release: releaseKept}
		if xs.out.o.SpillDir != "" {
			xs.sse.Spill = xs.spill
			if xs.out.bufs != nil {
				xs.sse.Buffer = xs.out.bufs.get
			}
		}
	}
	if xs.x.FirstByte.IsZero() {
		xs.x.FirstByte = ev.at
	}
	st := xs.sess
	if key := ev.header.Get(protocol.HeaderSessionID); key != "" && xs.key == "" && xs.mcp {
		// The response that opens a legacy session names it.
		if xs.groups.bindKey(key, st) {
			st.urgent = true
		}
	}
	xs.out.touch(st, ev.at)
}

// respBody handles bytes of a response body, which the pipeline owns; it
// reports whether it kept b (the SSE parser keeps a long line's pieces, and
// hands them back to the pool itself).
func (xs *exchange) respBody(b []byte, at time.Time) (kept bool) {
	if !xs.resp {
		return false
	}
	xs.x.ResponseBytes += int64(len(b))
	if !xs.mcp {
		xs.bufferPlain(b)
		return false
	}
	if xs.sse != nil {
		return xs.sse.FeedOwned(b, func(e *protocol.Event) { xs.sseEvent(e, at) })
	}
	if xs.respOver {
		return false
	}
	if len(xs.respBuf)+len(b) > xs.out.o.MaxMessageSize {
		xs.respBuf = appendUpTo(xs.respBuf, b[:xs.out.o.MaxMessageSize-len(xs.respBuf)], xs.out.o.MaxMessageSize)
		xs.respOver = true
		return false
	}
	xs.respBuf = appendUpTo(xs.respBuf, b, xs.out.o.MaxMessageSize)
	if xs.respLen >= 0 && xs.x.ResponseBytes == xs.respLen && xs.x.ResponseBody != BodyOther && xs.x.Status != http.StatusAccepted {
		// The body is complete: decode it now rather than at the
		// exchange's end, so that a reader (a Sync) after the client had
		// the whole answer finds its messages.
		xs.jsonResponse(at, false)
		xs.respDone, xs.respBuf = true, nil
	}
	return false
}

// appendUpTo is append that doubles a full buffer, but never past limit:
// append grows large slices by a quarter at a time (five times a 64 MiB
// body's size allocated along the way, and up to a quarter past the
// limit kept).
func appendUpTo(buf, b []byte, limit int) []byte {
	if need := len(buf) + len(b); need > cap(buf) {
		nb := make([]byte, len(buf), max(need, min(max(2*cap(buf), 512), limit)))
		copy(nb, buf)
		buf = nb
	}
	return append(buf, b...)
}

// end finishes the exchange: what is left of its response is decoded.
func (xs *exchange) end(ev event) {
	xs.x.End = ev.at
	if ev.errText != "" {
		xs.x.Error = ev.errText
	}
	xs.x.Aborted = ev.aborted
	st := xs.sess
	if ev.broken {
		st.s.Status = StatusIncomplete
		st.s.Lost++
		st.s.LossReason = fmt.Sprintf("the store could not keep up for %s, so part of an exchange was not recorded", xs.out.o.Backpressure)
	}
	if xs.x.FirstByte.IsZero() && xs.resp {
		xs.x.FirstByte = ev.at
	}
	if xs.mcp && xs.resp {
		switch {
		case xs.sse != nil:
			xs.sse.Close(func(e *protocol.Event) { xs.sseEvent(e, ev.at) })
		case xs.x.ResponseBody == BodySSE:
			// Compressed stream: decoded now that it is complete.
			body, problem := decodeBody(xs.respBuf, xs.respEnc)
			if problem != "" {
				xs.out.add(xs, xs.out.invalidMsg(xs, protocol.ServerToClient, xs.respBuf, ev.at, FindingEncoding, problem), nil)
				break
			}
			parser := protocol.SSEParser{MaxEventSize: xs.out.o.MaxMessageSize}
			emit := func(e *protocol.Event) { xs.sseEvent(e, ev.at) }
			parser.Feed(body, emit)
			parser.Close(emit)
		case xs.respDone:
		case len(xs.respBuf) > 0 && (xs.x.ResponseBody == BodyOther || xs.x.Status == http.StatusAccepted):
			// A plain-text or HTML answer (a 405 to a GET, a proxy's
			// refusal) is no JSON-RPC message: kept raw, as a frame.
			xs.out.add(xs, xs.out.rawFrame(xs, protocol.ServerToClient, xs.respBuf, ev.at), nil)
		case len(xs.respBuf) > 0:
			xs.jsonResponse(ev.at, ev.aborted)
		}
	} else if xs.resp {
		xs.plainBody(protocol.ServerToClient, xs.respBuf, xs.respOver, xs.x.ResponseBytes,
			xs.x.ResponseHeader.Get("Content-Type"), xs.respEnc, ev.at)
	}
	xs.respBuf = nil
	if xs.legacyStream {
		st.s.Status = closedUnlessIncomplete(st.s.Status)
		st.urgent = true
	}
	xs.out.dirtyX[xs.x.ID] = xs
	xs.out.touch(st, ev.at)
}

func (xs *exchange) jsonResponse(at time.Time, aborted bool) {
	body, problem := decodeBody(xs.respBuf, xs.respEnc)
	if problem != "" {
		xs.out.add(xs, xs.out.invalidMsg(xs, protocol.ServerToClient, xs.respBuf, at, FindingEncoding, problem), nil)
		return
	}
	if xs.respOver {
		// body is respBuf (or its decoding), dropped after: no copy.
		xs.out.add(xs, xs.out.invalid(xs, protocol.ServerToClient, body, true, at, FindingOversize,
			fmt.Sprintf("response body larger than %d bytes; stored cut", xs.out.o.MaxMessageSize)), nil)
		return
	}
	if xs.x.Status >= 400 && plainJSON(body) {
		// An HTTP error's own JSON (an OAuth 401's), no JSON-RPC message.
		xs.plainBody(protocol.ServerToClient, body, false, int64(len(body)), xs.x.ResponseHeader.Get("Content-Type"), "", at)
		return
	}
	msgs := xs.out.splitBody(body)
	if aborted && len(msgs) == 1 && msgs[0].Kind == protocol.KindInvalid {
		xs.x.Truncated = true
		xs.out.add(xs, xs.out.invalidMsg(xs, protocol.ServerToClient, body, at, FindingTruncated,
			"the response ended before its JSON body was complete"), nil)
		return
	}
	for i := range msgs {
		xs.out.message(xs, protocol.ServerToClient, &msgs[i], at, nil, true) // respBuf is not reused
	}
}

func (xs *exchange) sseEvent(e *protocol.Event, at time.Time) {
	xs.x.Events++
	// A value, copied into each message's own: taking its address here
	// would allocate it as well as those.
	info := SSEInfo{ID: e.ID, Type: e.Type}
	if e.Unterminated {
		xs.x.Truncated = true
	}
	if e.Type == "endpoint" && xs.x.Method == http.MethodGet {
		xs.legacyEndpoint(e.Data)
	}
	if !e.HasData || len(e.Data) == 0 || (e.Type != "" && e.Type != "message") {
		fi := info
		m := xs.out.frame(xs, e, at, xs.out.newSSE(fi))
		if e.Unterminated {
			m.Findings = append(m.Findings, Finding{FindingTruncated, "the stream ended in the middle of this SSE block"})
		}
		if e.Oversize {
			m.Findings = append(m.Findings, Finding{FindingOversize, fmt.Sprintf("SSE block larger than %d bytes; stored cut", xs.out.o.MaxMessageSize)})
		}
		xs.out.add(xs, m, nil)
		return
	}
	if e.Oversize || e.Unterminated {
		kind, text := FindingOversize, fmt.Sprintf("SSE block larger than %d bytes; stored cut", xs.out.o.MaxMessageSize)
		if e.SpillErr != nil {
			kind, text = FindingTruncated, fmt.Sprintf("the recorder lost this SSE block, which the client received whole: %v", e.SpillErr)
		}
		if e.Unterminated {
			kind, text = FindingTruncated, "the stream ended in the middle of this SSE block; a client discards it"
		}
		m := xs.out.invalid(xs, protocol.ServerToClient, e.Raw, e.Oversize, at, kind, text)
		ii := info
		m.SSE = xs.out.newSSE(ii)
		xs.out.add(xs, m, nil)
		return
	}
	msgs := xs.out.splitBody(e.Data)
	i := e.DataStart
	contiguous := len(msgs) == 1 && msgs[0].Batch < 0 && i >= 0
	// A large message keeps the parser's bytes instead of a copy of them.
	owned := contiguous && len(e.Data) >= 64<<10
	var file protocol.SpillFile
	var back []byte
	if owned {
		e.Detach()
		file = e.TakeSpill()
		if xs.out.bufs != nil {
			back = e.Buffer()
		}
	}
	for k := range msgs {
		inf := info
		switch {
		case contiguous:
			// Prefix and Suffix share one allocation (Prefix's capacity
			// ends where Suffix begins); either is nil when empty.
			j := i + len(e.Data)
			if n := i + len(e.Raw) - j; n > 0 {
				ps := xs.out.copyBytes(e.Raw[:i], e.Raw[j:])
				if i > 0 {
					inf.Prefix = ps[:i:i]
				}
				if n > i {
					inf.Suffix = ps[i:]
				}
			}
		case k == 0:
			inf.Whole = xs.out.copyBytes(e.Raw)
		}
		m := xs.out.message(xs, protocol.ServerToClient, &msgs[k], at, xs.out.newSSE(inf), owned)
		if !owned {
			continue
		}
		// Raw is e.Data itself (not redacted, nor trimmed): the spill file
		// holds exactly it, and it is the only view of the buffer.
		asData := len(m.Raw) == len(e.Data) && &m.Raw[0] == &e.Data[0]
		if back != nil && asData && (m.Kind == protocol.KindResult || m.Kind == protocol.KindError) {
			// The buffer serves again once m is written. (A response: what
			// the pipeline keeps of one is copied out of it.)
			xs.out.kept = append(xs.out.kept, back)
		}
		if file != nil {
			if rf, ok := file.(RawFile); ok && asData {
				m.File = rf
			} else {
				_ = file.Close()
			}
		}
	}
}

// checkHeaders compares the 2026-07-28 routing headers with the body;
// params are its first request's or notification's.
func (xs *exchange) checkHeaders(msgs []protocol.Message, params *protocol.Params) {
	h := xs.headers
	hm, hn := h.Get(protocol.HeaderMethod), h.Get(protocol.HeaderName)
	if (hm == "" && hn == "") || len(msgs) != 1 || (msgs[0].Kind != protocol.KindRequest && msgs[0].Kind != protocol.KindNotification) {
		return
	}
	pm := &msgs[0]
	var fs []Finding
	if hm != "" && hm != pm.Method {
		fs = append(fs, Finding{FindingHeaderMismatch, fmt.Sprintf("Mcp-Method is %q but the body's method is %q", hm, pm.Method)})
	}
	if hn != "" {
		name, err := protocol.DecodeHeaderValue(hn)
		switch {
		case err != nil:
			fs = append(fs, Finding{FindingHeaderMismatch, "Mcp-Name: " + err.Error()})
		case name != params.Name:
			fs = append(fs, Finding{FindingHeaderMismatch, fmt.Sprintf("Mcp-Name is %q but the body names %q", name, params.Name)})
		}
	}
	if len(fs) > 0 {
		xs.x.FindingList = append(xs.x.FindingList, fs...)
		xs.sess.s.Findings += len(fs)
		xs.out.met.findingList(fs)
	}
}

func bodyKind(contentType string, status int) BodyKind {
	switch contentType {
	case "":
		return BodyEmpty
	case protocol.ContentTypeJSON: // the usual two, without parsing them
		return BodyJSON
	case protocol.ContentTypeSSE:
		return BodySSE
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return BodyOther
	}
	switch {
	case mt == protocol.ContentTypeSSE:
		return BodySSE
	case mt == protocol.ContentTypeJSON || strings.HasSuffix(mt, "+json"):
		return BodyJSON
	}
	return BodyOther
}

// decodeBody undoes a Content-Encoding; problem is non-empty when it cannot.
func decodeBody(b []byte, enc string) ([]byte, string) {
	switch enc {
	case "", "identity":
		return b, ""
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, "gzip body does not decode: " + err.Error()
		}
		out, err := io.ReadAll(zr)
		if err != nil {
			return nil, "gzip body does not decode: " + err.Error()
		}
		return out, ""
	case "deflate":
		out, err := io.ReadAll(flate.NewReader(bytes.NewReader(b)))
		if err != nil {
			return nil, "deflate body does not decode: " + err.Error()
		}
		return out, ""
	}
	return nil, fmt.Sprintf("Content-Encoding %q is not decoded by the recorder; the raw bytes are stored", enc)
}
