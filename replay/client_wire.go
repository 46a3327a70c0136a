package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// Bounds on what a live server may send the replay client.
const (
	maxClientBody  = 256 << 20 // one JSON response
	maxClientEvent = 64 << 20  // one SSE event
	maxResumes     = 5         // GET Last-Event-ID reconnects of one stream
)

func (r *sessionRun) post(ctx context.Context, body []byte, h http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = h
	return r.hc.Do(req)
}

// get opens the standalone GET stream, or resumes a stream after
// lastEventID.
func (r *sessionRun) get(ctx context.Context, lastEventID string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.endpoint, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", protocol.ContentTypeSSE)
	r.sessionHeaders(req.Header)
	if lastEventID != "" {
		req.Header.Set(protocol.HeaderLastEventID, lastEventID)
	}
	return r.hc.Do(req)
}

// sessionHeaders sets the legacy session's headers and the user's own.
func (r *sessionRun) sessionHeaders(h http.Header) {
	for k, v := range r.c.opts.Header {
		h[k] = append([]string(nil), v...)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sid != "" {
		h.Set(protocol.HeaderSessionID, r.sid)
	}
	if r.version != "" {
		h.Set(protocol.HeaderProtocolVersion, r.version)
	}
}

// headers are a request's headers: on 2026-07-28 the routing headers
// (Mcp-Protocol-Version, Mcp-Method, Mcp-Name, and Mcp-Param-* as
// recorded); on a legacy session its session id and negotiated version,
// and before the session exists whatever MCP headers the recorded request
// carried (a 2026-07-28 discover probe).
func (r *sessionRun) headers(m *protocol.Message, recX *capture.Exchange) http.Header {
	h := http.Header{}
	h.Set("Content-Type", protocol.ContentTypeJSON)
	h.Set("Accept", protocol.ContentTypeJSON+", "+protocol.ContentTypeSSE)
	r.sessionHeaders(h)
	var recH http.Header
	if recX != nil {
		recH = recX.RequestHeader
	}
	r.mu.Lock()
	inSession := r.sid != "" || r.version != ""
	r.mu.Unlock()
	if !r.plan.modern {
		if !inSession {
			for _, k := range []string{protocol.HeaderProtocolVersion, protocol.HeaderMethod, protocol.HeaderName} {
				if v := recH.Get(k); v != "" {
					h.Set(k, v)
				}
			}
		}
		return h
	}
	p, _ := protocol.ParseParams(m.Params)
	version := recH.Get(protocol.HeaderProtocolVersion)
	if p.Modern {
		version = p.ProtocolVersion
	}
	if version == "" {
		version = r.plan.ts.Session.Version
	}
	h.Set(protocol.HeaderProtocolVersion, version)
	if m.Method != "" {
		h.Set(protocol.HeaderMethod, m.Method)
	}
	switch m.Method {
	case protocol.MethodToolsCall, protocol.MethodPromptsGet, protocol.MethodResourcesRead:
		h.Set(protocol.HeaderName, protocol.EncodeHeaderValue(p.Name))
	}
	for k, vs := range recH {
		if !strings.HasPrefix(http.CanonicalHeaderKey(k), protocol.HeaderParamPrefix) {
			continue
		}
		for _, v := range vs {
			// A redacted value would fail the server's check against the
			// body; leave it out rather than send it.
			if !strings.Contains(v, capture.Redacted) {
				h.Add(k, v)
			}
		}
	}
	return h
}

// readAll reads a response: a JSON body or an SSE stream, resumed with GET
// and Last-Event-ID when it breaks before done() (legacy sessions). handle
// gets each message and returns true to stop reading. A body that is
// neither (an error page) comes back as text.
func (r *sessionRun) readAll(ctx context.Context, res *http.Response, handle func(*protocol.Message) bool, done func() bool) (status int, err error) {
	status = res.StatusCode
	if sid := res.Header.Get(protocol.HeaderSessionID); sid != "" && !r.plan.modern {
		r.mu.Lock()
		if r.sid == "" {
			r.sid = sid
		}
		r.mu.Unlock()
	}
	for resumes := 0; ; resumes++ {
		lastID, retry, stopped, err := r.readOne(res, handle)
		if err != nil || stopped || done == nil || done() || lastID == "" || r.plan.modern || resumes >= maxResumes {
			return status, err
		}
		// SEP-1699: the server closed the connection, not the stream.
		select {
		case <-ctx.Done():
			return status, ctx.Err()
		case <-time.After(min(retry, 2*time.Second)):
		}
		if res, err = r.get(ctx, lastID); err != nil {
			return status, fmt.Errorf("resuming the stream after event %q: %w", lastID, err)
		}
		if res.StatusCode != http.StatusOK {
			res.Body.Close()
			return status, fmt.Errorf("resuming the stream after event %q: HTTP %d", lastID, res.StatusCode)
		}
	}
}

// httpError is a response that carried no JSON-RPC message: its status and
// the start of its body.
type httpError struct {
	status int
	body   string
}

func (e *httpError) Error() string {
	if e.body == "" {
		return fmt.Sprintf("HTTP %d with no JSON-RPC message", e.status)
	}
	return fmt.Sprintf("HTTP %d: %s", e.status, e.body)
}

func (r *sessionRun) readOne(res *http.Response, handle func(*protocol.Message) bool) (lastID string, retry time.Duration, stopped bool, err error) {
	defer res.Body.Close()
	ct, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type"))
	switch ct {
	case protocol.ContentTypeSSE:
		p := &protocol.SSEParser{MaxEventSize: maxClientEvent}
		emit := func(ev *protocol.Event) {
			if stopped {
				return
			}
			if ev.HasID {
				lastID = ev.ID
			}
			if ms, ok := ev.RetryMillis(); ok {
				retry = time.Duration(ms) * time.Millisecond
			}
			if ev.Unterminated || !ev.IsMessage() {
				return
			}
			data := bytes.Clone(ev.Data)
			for _, m := range protocol.Split(data) {
				if handle(&m) {
					stopped = true
					return
				}
			}
		}
		buf := make([]byte, 32<<10)
		for !stopped {
			n, rerr := res.Body.Read(buf)
			p.Feed(buf[:n], emit)
			if rerr == io.EOF {
				p.Close(emit)
				break
			}
			if rerr != nil {
				if stopped {
					break
				}
				return lastID, retry, stopped, fmt.Errorf("reading the SSE stream: %w", rerr)
			}
		}
		return lastID, retry, stopped, nil
	default:
		b, rerr := io.ReadAll(io.LimitReader(res.Body, maxClientBody+1))
		if rerr != nil {
			return "", 0, false, fmt.Errorf("reading the response: %w", rerr)
		}
		if len(b) > maxClientBody {
			return "", 0, false, fmt.Errorf("the response is larger than %d MiB", maxClientBody>>20)
		}
		if t := bytes.TrimSpace(b); len(t) > 0 && (t[0] == '{' || t[0] == '[') && json.Valid(t) {
			for _, m := range protocol.Split(b) {
				if handle(&m) {
					return "", 0, true, nil
				}
			}
			return "", 0, false, nil
		}
		if res.StatusCode/100 != 2 || len(b) > 0 {
			return "", 0, false, &httpError{res.StatusCode, excerpt(b)}
		}
		return "", 0, false, nil
	}
}

// excerpt is the start of a body, printable.
func excerpt(b []byte) string {
	if len(b) > 200 {
		b = b[:200]
	}
	s := strings.ToValidUTF8(string(bytes.TrimSpace(b)), "?")
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if utf8.RuneCountInString(s) == 200 {
		s += "…"
	}
	return s
}

// setOrAddMember returns the JSON object obj with member key set to value:
// replaced in place when present (every other byte kept), else appended.
func setOrAddMember(obj []byte, key string, value []byte) ([]byte, error) {
	if out, ok := protocol.SetMember(obj, value, key); ok {
		return out, nil
	}
	t := bytes.TrimRight(obj, " \t\r\n")
	if len(t) < 2 || t[len(t)-1] != '}' || !json.Valid(t) {
		return nil, errors.New("not a JSON object")
	}
	k, _ := json.Marshal(key)
	inner := bytes.TrimSpace(t[1 : len(t)-1])
	var out bytes.Buffer
	out.Write(t[:len(t)-1])
	if len(inner) > 0 {
		out.WriteByte(',')
	}
	out.Write(k)
	out.WriteByte(':')
	out.Write(value)
	out.WriteByte('}')
	return out.Bytes(), nil
}

// withoutMember returns the JSON object obj without member key; the other
// members' values keep their bytes. obj itself when it lacks the member or
// is not an object.
func withoutMember(obj []byte, key string) []byte {
	if _, _, _, ok := protocol.Member(obj, key); !ok {
		return obj
	}
	dec := json.NewDecoder(bytes.NewReader(obj))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return obj
	}
	var out bytes.Buffer
	out.WriteByte('{')
	n := 0
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return obj
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return obj
		}
		k, _ := tok.(string)
		if k == key {
			continue
		}
		if n > 0 {
			out.WriteByte(',')
		}
		n++
		kb, _ := json.Marshal(k)
		out.Write(kb)
		out.WriteByte(':')
		out.Write(v)
	}
	out.WriteByte('}')
	return out.Bytes()
}
