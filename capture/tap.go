package capture

import (
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcptape/mcptape/protocol"
)

type evKind uint8

const (
	evBegin evKind = iota
	evReqBody
	evReqEnd
	evResp
	evRespBody
	evEnd
	evSync
	evStreamOpen // a stream starts (Stream)
	evLine       // frames of a stream (a streamBlock); a frame's kind when in one
	evStderr     // a frame of a stream's stderr, in a streamBlock
	evIngest     // records of another recorder (Recorder.Ingest)
	evIntercept  // what became of the exchange's next message (Tap.Intercepted)
)

type event struct {
	kind  evKind
	x     uint64
	at    time.Time
	begin *beginInfo
	// streams: evStreamOpen's info, evLine's frames, evEnd's count of
	// frames not recorded
	stream *StreamInfo
	block  *streamBlock
	lost   int64
	dir    protocol.Direction
	ingest *ingestReq
	// evIntercept
	held *Intercepted
	// evResp, or a response's headers riding on its first body event or
	// its end (one channel send fewer per exchange)
	status int
	header http.Header
	synth  bool
	resp   *event
	// evResp: the upstream's instants (Exchange.Forwarded and
	// UpstreamHeaders)
	forwarded, upHeaders time.Time
	// evResp: what the proxy changed in the response (Exchange.Rewritten)
	rewritten string
	// evBegin: the request body handed to Begin is the whole body
	reqEnd bool
	// body events; data is owned by the pipeline once sent
	data   []byte
	pooled bool
	weight int64 // bytes held against the recorder's queue budget
	// evEnd
	errText string
	aborted bool
	broken  bool // some of this exchange's events were dropped
	sync    chan struct{}
}

// Request describes the request side of an exchange as a leg received
// it, whatever carried it: the recorder needs no *http.Request, so every
// leg (reverse routes, the forward proxy, MITM tunnels) feeds the same
// pipeline. A stdio wrap reports a [Stream] instead.
type Request struct {
	// Leg is how the request reached the recorder; Route names the route
	// ("" for a recorder's single upstream).
	Leg   Leg
	Route string
	// Upstream is the base URL of the server the request goes to, stored
	// on its session; "" means RecorderOptions.Upstream.
	Upstream string
	// Method and Target are the HTTP request line's method and target
	// (the path and query, as sent).
	Method, Target string
	// Header is the request's header, as received. The recorder keeps a
	// redacted copy and reads it later: it must not be modified after
	// Begin.
	Header http.Header
	// Remote is the client's address (host:port); TLS is set when the
	// client connection was TLS.
	Remote string
	TLS    bool
	// Body is the request body when the leg has read it before
	// forwarding, Complete whether that is all of it; with a nil Body the
	// leg reports the body with Tap.RequestBody and Tap.RequestEnd.
	Body     []byte
	Complete bool
	// Refused marks a request the leg answered itself without forwarding
	// it (a policy refusal, such as the DNS-rebinding guard): it is filed
	// with its client's plain-HTTP traffic, never in an MCP session, and
	// its answer is not read as MCP messages.
	Refused bool
	// Intercepted, when set, says what became of the request's message:
	// it was held in flight, or changed on its way (see [Intercepted]).
	// Body is then the message as received.
	Intercepted *Intercepted
}

// RequestFrom describes an *http.Request as a leg that read body before
// forwarding it (complete: all of it) received it; the caller sets Leg,
// Route and the rest.
func RequestFrom(r *http.Request, body []byte, complete bool) *Request {
	return &Request{
		Method: r.Method, Target: r.URL.RequestURI(), Header: r.Header,
		Remote: r.RemoteAddr, TLS: r.TLS != nil, Body: body, Complete: complete,
	}
}

type beginInfo struct {
	Request
	path  string // decoded
	query string
}

// Tap reports one HTTP exchange to the recorder. The proxy calls its methods
// in this order: [Recorder.Begin], RequestBody* and RequestEnd (unless the
// body was handed to Begin), Response once, ResponseBody*, End once.
// RequestBody may interleave with the response methods. A Tap copies what it
// is given and never blocks longer than the recorder's backpressure bound.
type Tap struct {
	r     *Recorder
	id    uint64
	begin beginInfo // the request, read by the pipeline once Begin has sent it
	resp  *event    // headers not sent yet: they go with the first body bytes or End
	// respEv is where Response puts its event, sparing an allocation; the
	// pipeline reads it once it is sent. (A second Response gets one of
	// its own.)
	respEv   event
	respUsed bool
	// body holds Begin's copy of a small request body (most are), sparing
	// it an allocation of its own.
	body [tapBody]byte
	// forwarded and upHeaders are what Upstream reported, for Response
	forwarded, upHeaders time.Time
	rewritten            string      // what Rewritten reported, for Response
	broken               atomic.Bool // an event was dropped: later data events are not sent
	ended                atomic.Bool
}

// ID is the exchange's id in the store.
func (t *Tap) ID() uint64 { return t.id }

// Begin reports a request as it arrives; see [Request]. Begin returns nil
// when the recorder is closed; a nil *Tap accepts every call and does
// nothing.
func (r *Recorder) Begin(req *Request) *Tap {
	if r == nil || r.closing.Load() {
		return nil
	}
	t := &Tap{r: r, id: r.nextExchange.Add(1), begin: beginInfo{Request: *req}}
	b := &t.begin
	b.path, b.query, _ = strings.Cut(req.Target, "?")
	if strings.IndexByte(b.path, '%') >= 0 {
		if p, err := url.PathUnescape(b.path); err == nil {
			b.path = p
		}
	}
	switch {
	case req.Body == nil:
		b.Complete = false
	case len(req.Body) == 0:
		b.Body = nil
	case len(req.Body) <= tapBody:
		b.Body = t.body[:copy(t.body[:], req.Body):len(req.Body)]
	default:
		b.Body = append([]byte(nil), req.Body...)
	}
	r.exchanges.Add(1)
	r.inflight.Add(1)
	t.send(event{kind: evBegin, begin: b, weight: int64(len(b.Body)), reqEnd: b.Complete})
	return t
}

// tapBody is the largest request body a Tap holds itself.
const tapBody = 512

// chunkPool and bigChunkPool hold the buffers body bytes are copied into
// for the pipeline: up to 32 KiB, and up to BodyChunk for the large reads
// of a result arriving fast.
var (
	chunkPool    = sync.Pool{New: func() any { b := make([]byte, 0, 32<<10); return &b }}
	bigChunkPool = sync.Pool{New: func() any { b := make([]byte, 0, BodyChunk); return &b }}
)

// BodyChunk is the largest body chunk a Tap copies into a pooled buffer:
// the size of the proxy's copy buffer, so that a read of a result arriving
// fast is one pooled chunk.
const BodyChunk = 128 << 10

// smallChunk is the largest chunk copied into a slice of its own size
// rather than a pooled 32 KiB buffer: a one-message response is a few
// hundred bytes, and a pool miss (the pipeline puts buffers back on its
// own P, and the GC empties the pool) costs a zeroed 32 KiB.
const smallChunk = 4 << 10

// copyChunk copies p for the pipeline, reporting whether the copy is a
// pooled buffer to hand back with releaseChunk.
func copyChunk(p []byte) ([]byte, bool) {
	pool := &chunkPool
	switch {
	case len(p) <= smallChunk || len(p) > BodyChunk:
		return append([]byte(nil), p...), false
	case len(p) > 32<<10:
		pool = &bigChunkPool
	}
	bp := pool.Get().(*[]byte)
	return append((*bp)[:0], p...), true
}

// releaseKept takes back a chunk the SSE parser kept (pipeline.respBody).
func releaseKept(b []byte) { releaseChunk(b, true) }

// releaseChunk hands a pooled chunk back to the pool of its capacity. A
// chunk of another capacity is left to the collector. (Whether or not it
// came from a pool, a chunk is the pipeline's alone by then.)
func releaseChunk(b []byte, pooled bool) {
	if !pooled {
		return
	}
	switch cap(b) {
	case 32 << 10:
		putChunk(&chunkPool, b)
	case BodyChunk:
		putChunk(&bigChunkPool, b)
	}
}

// putChunk puts b in pool. (Its own function: a pointer to releaseChunk's
// b would put b on the heap at every call, pooled or not.)
func putChunk(pool *sync.Pool, b []byte) {
	b = b[:0]
	pool.Put(&b)
}

func (t *Tap) send(ev event) {
	if t == nil || (ev.kind != evEnd && t.broken.Load()) {
		if ev.pooled {
			releaseChunk(ev.data, true)
		}
		return
	}
	ev.x = t.id
	if ev.at.IsZero() {
		ev.at = t.r.opts.Now()
	}
	if !t.r.send(ev, true) {
		if ev.pooled {
			releaseChunk(ev.data, true)
		}
		t.broken.Store(true)
		t.r.dropped.Add(1)
	}
}

// RequestBody reports bytes of the request body as they go upstream.
func (t *Tap) RequestBody(p []byte) {
	if t == nil || len(p) == 0 {
		return
	}
	d, pooled := copyChunk(p)
	t.send(event{kind: evReqBody, data: d, pooled: pooled, weight: int64(cap(d))})
}

// RequestEnd reports that the request body is complete.
func (t *Tap) RequestEnd() {
	if t != nil {
		t.send(event{kind: evReqEnd})
	}
}

// Upstream reports when the request was handed to the upstream and when
// the upstream's response headers came back, as the proxy's clock read
// them (Exchange.Forwarded and UpstreamHeaders). Call it before Response,
// from Response's goroutine; a zero instant reports nothing.
func (t *Tap) Upstream(forwarded, headers time.Time) {
	if t != nil && !forwarded.IsZero() && !headers.IsZero() {
		t.forwarded, t.upHeaders = forwarded, headers
	}
}

// Rewritten reports that the proxy changed the response on its way to the
// client, saying what (Exchange.Rewritten): Response and ResponseBody then
// report the upstream's original headers and bytes, not the client's. Call
// it before Response, or before the first ResponseBody (a stream whose
// first event was rewritten), from Response's goroutine.
func (t *Tap) Rewritten(what string) {
	if t != nil {
		t.rewritten = what
		if t.resp != nil {
			t.resp.rewritten = what
		}
	}
}

// Response reports the status and headers as sent to the client (as the
// upstream sent them, after Rewritten). They reach
// the recorder with the first body bytes, or with End. Response,
// ResponseBody and End must be called from one goroutine.
// synthesized marks a response the proxy made itself (an upstream error).
func (t *Tap) Response(status int, h http.Header, synthesized bool) {
	if t == nil {
		return
	}
	if t.respUsed {
		t.resp = &event{}
	} else {
		t.resp, t.respUsed = &t.respEv, true
	}
	*t.resp = event{kind: evResp, status: status, header: t.r.headers.clone(h), synth: synthesized, at: t.r.opts.Now(),
		forwarded: t.forwarded, upHeaders: t.upHeaders, rewritten: t.rewritten}
}

// ResponseBody reports bytes written to the client.
func (t *Tap) ResponseBody(p []byte) {
	if t == nil || len(p) == 0 {
		return
	}
	d, pooled := copyChunk(p)
	ev := event{kind: evRespBody, data: d, pooled: pooled, weight: int64(cap(d)), resp: t.resp}
	t.resp = nil
	t.send(ev)
}

// End finishes the exchange. errText is "" for a clean end, else why it was
// cut short; aborted marks a response that did not complete.
func (t *Tap) End(errText string, aborted bool) {
	if t == nil || t.ended.Swap(true) {
		return
	}
	ev := event{kind: evEnd, errText: errText, aborted: aborted, broken: t.broken.Load(), resp: t.resp}
	t.resp = nil
	t.send(ev)
	t.r.inflight.Add(-1)
}

// headerCache clones the response headers Taps report: the same clone
// again for headers equal to the last one it made. An upstream sends the
// same headers with most of its answers (until its Date changes), and the
// recorder never modifies a header map it was handed.
type headerCache struct{ last atomic.Pointer[http.Header] }

func (c *headerCache) clone(h http.Header) http.Header {
	if len(h) == 0 {
		return h.Clone() // nil for nil, as Clone makes it; not kept
	}
	if last := c.last.Load(); last != nil && sameHeader(*last, h) {
		return *last
	}
	cl := h.Clone()
	c.last.Store(&cl)
	return cl
}

// sameHeader reports whether a and b hold the same names and values.
func sameHeader(a, b http.Header) bool {
	if len(a) != len(b) || (a == nil) != (b == nil) {
		return false
	}
	for k, vs := range a {
		ws, ok := b[k]
		if !ok || len(ws) != len(vs) {
			return false
		}
		for i, v := range vs {
			if ws[i] != v {
				return false
			}
		}
	}
	return true
}
