package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// CodeUpstream is the JSON-RPC error code of the proxy's own errors (the
// upstream is unreachable or timed out, the request was refused): -32000,
// the first of the range JSON-RPC leaves to implementations.
const CodeUpstream = -32000

// ErrorBody is a JSON-RPC error response; a nil id is written as null.
func ErrorBody(id json.RawMessage, code int, message string, data any) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Data    any    `json:"data,omitempty"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id, Error: struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Data    any    `json:"data,omitempty"`
	}{code, message, data}})
	return b
}

// requestID is the id of the single request in body, if any.
func requestID(body []byte) json.RawMessage {
	if protocol.IsBatch(body) {
		return nil
	}
	m := protocol.Decode(body)
	if m.Kind == protocol.KindRequest && m.HasID() {
		return m.ID
	}
	return nil
}

func cleanErr(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// upstreamError answers when the upstream could not be reached or did not
// answer, or the request could not be forwarded whole: a JSON-RPC error
// with the request's own id, naming the upstream and the cause — 502, 504
// when the upstream was silent too long, 408, 413 or 400 when the client's
// body stalled, grew too large or broke its framing, 503 when the proxy is
// shutting down. A client
// that went away gets nothing: its exchange is recorded as aborted.
func (p *Proxy) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	x, _ := r.Context().Value(ctxKey{}).(*exchange)
	if x == nil {
		// Every request comes through ServeHTTP; this is a safety net.
		http.Error(w, "mcptape: "+err.Error(), http.StatusBadGateway)
		return
	}
	up := x.rt.up.Scheme + "://" + x.rt.up.Host
	if x.rt.name != "" {
		up += " (route " + x.rt.name + ")"
	}
	status := http.StatusBadGateway
	var msg, recorded string
	body := reportByWriter
	var tl *errTooLarge
	var st *errStalled
	var bad *errMalformed
	switch ferr := x.in.failure(); {
	case errors.Is(context.Cause(x.ctx), ErrShutdown):
		status = http.StatusServiceUnavailable
		msg = "mcptape: the recorder is shutting down and the upstream had not answered yet; retry once it runs again"
		recorded = ErrShutdown.Error()
	case errors.As(ferr, &tl):
		status, msg = http.StatusRequestEntityTooLarge, "mcptape: "+tl.Error()+"; raise --max-request-body to allow it"
	case errors.As(ferr, &st):
		status, msg = http.StatusRequestTimeout, "mcptape: "+st.Error()+"; the request was not completed"
	case errors.As(ferr, &bad):
		status, msg = http.StatusBadRequest, "mcptape: "+bad.Error()+"; the request was not completed"
	case ferr != nil:
		// The client went away while sending its body: nobody is left to
		// answer.
		x.w.aborted = true
		x.w.abortText = "reading the request body: " + ferr.Error()
		return
	case x.client.Err() != nil && errors.Is(err, errClientGone):
		// A held response whose client left: recorded as it came in
		// (holdJSON), nobody is left to answer.
		x.w.aborted = true
		x.w.abortText = "the client went away before the upstream answered"
		return
	case x.client.Err() != nil:
		// net/http ends the request's context when the client's side of
		// the connection ends, and so does a client that half-closed once
		// its request was sent (shutdown(SHUT_WR)): that one can still
		// read, and gets a 502 (one that is gone gets nothing either way).
		// The exchange is recorded cut (a call cancelled), with the status
		// but without the body, which only a half-closed client reads.
		x.w.aborted = true
		x.w.abortText = "the client closed its connection (or its sending side) before the upstream answered; the request was cancelled upstream, and the proxy answered 502 in case the client still reads"
		msg = "mcptape: the client closed its side of the connection before the upstream answered, so the request was cancelled upstream; keep the connection open until the response has arrived"
		body = reportNone
	case errors.Is(err, errSwitched), errors.Is(err, errTooManyInterim):
		msg = fmt.Sprintf("mcptape: upstream %s: %v", up, err)
	case strings.Contains(err.Error(), "response headers exceeded"):
		msg = fmt.Sprintf("mcptape: upstream %s sent a response head larger than the proxy accepts (%d bytes); nothing was forwarded", up, MaxResponseHeaderBytes)
	case isTimeout(err):
		status = http.StatusGatewayTimeout
		var ht *headTimeoutError
		if errors.As(err, &ht) {
			msg = fmt.Sprintf("mcptape: upstream %s did not answer within %v; the request was cancelled (raise --upstream-timeout for slower tools)", up, ht.d)
		} else {
			msg = fmt.Sprintf("mcptape: upstream %s did not answer: %v", up, cleanErr(err))
		}
	default:
		msg = fmt.Sprintf("mcptape: upstream %s did not answer: %v", up, cleanErr(err))
	}
	if recorded == "" {
		recorded = msg
	}
	p.log.Warn("upstream error", capture.LogKeyUpstream, up, capture.LogKeyError, err, "status", status)
	var id json.RawMessage
	if x.complete {
		id = requestID(x.body)
	}
	x.w.synthesized = true
	x.w.body = body // the proxy's own answer, not the upstream's body
	x.w.upstreamErr = recorded
	writeError(x.w, status, id, msg, map[string]any{"upstream": up, "status": status})
}

func writeError(w http.ResponseWriter, status int, id json.RawMessage, msg string, data any) {
	body := ErrorBody(id, CodeUpstream, msg, data)
	h := w.Header()
	h.Set("Content-Type", protocol.ContentTypeJSON)
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// refuse answers a request the proxy does not forward, and records it.
func (p *Proxy) refuse(w http.ResponseWriter, r *http.Request, rt *route, body []byte, complete bool, status int, msg string) {
	p.refuseAs(w, r, rt, body, complete, status, msg, false)
}

// refuseAs is refuse; policy marks a policy refusal (no route, a Host the
// leg does not serve), filed with the client's plain-HTTP traffic rather
// than in an MCP session.
func (p *Proxy) refuseAs(w http.ResponseWriter, r *http.Request, rt *route, body []byte, complete bool, status int, msg string, policy bool) {
	tap := p.begin(r, rt, body, complete, policy)
	x := &exchange{tap: tap}
	x.mx.begin(p.m, rt, r, orEmpty(body), complete, time.Time{})
	defer x.mx.end()
	tw := &teeWriter{ResponseWriter: w, x: x, synthesized: true}
	var id json.RawMessage
	if complete {
		id = requestID(body)
	}
	writeError(tw, status, id, msg, map[string]any{"status": status})
	tap.End(msg, false)
}

func orEmpty(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// bodyFailed records a request whose body could not be read before
// forwarding, and answers it when someone is left to answer: 408 to a
// client that stalled, 413 to one whose body grew too large, 400 to one
// whose body broke its framing (a bad chunk size). A client that
// went away is recorded with the bytes it sent and why they stopped; the
// record never holds bytes it did not send.
func (p *Proxy) bodyFailed(w http.ResponseWriter, r *http.Request, rt *route, body []byte, err error) {
	var tl *errTooLarge
	var st *errStalled
	var bad *errMalformed
	switch {
	case errors.As(err, &tl):
		p.answerCut(w, r, rt, body, http.StatusRequestEntityTooLarge, "mcptape: "+tl.Error()+"; raise --max-request-body to allow it")
	case errors.As(err, &st):
		p.answerCut(w, r, rt, body, http.StatusRequestTimeout, "mcptape: "+st.Error()+"; the request was not forwarded")
	case errors.As(err, &bad):
		p.answerCut(w, r, rt, body, http.StatusBadRequest, "mcptape: "+bad.Error()+"; the request was not forwarded")
	default:
		tap := p.begin(r, rt, body, false, false)
		tap.End("reading the request body: "+err.Error(), true)
		// The client's own body broke; there is nobody to answer.
		panic(http.ErrAbortHandler)
	}
}

// answerCut answers a request whose body was cut, with the part that
// arrived recorded as such.
func (p *Proxy) answerCut(w http.ResponseWriter, r *http.Request, rt *route, body []byte, status int, msg string) {
	tap := p.begin(r, rt, body, false, false)
	x := &exchange{tap: tap}
	x.mx.begin(p.m, rt, r, body, false, time.Time{})
	defer x.mx.end()
	tw := &teeWriter{ResponseWriter: w, x: x, synthesized: true}
	writeError(tw, status, nil, msg, map[string]any{"status": status})
	tap.End(msg, true)
}

func (p *Proxy) refuseHost(w http.ResponseWriter, r *http.Request) {
	tap := p.begin(r, nil, []byte{}, true, true)
	x := &exchange{tap: tap}
	x.mx.begin(p.m, nil, r, []byte{}, true, time.Time{})
	defer x.mx.end()
	tw := &teeWriter{ResponseWriter: w, x: x, synthesized: true}
	msg := fmt.Sprintf("mcptape: refused: Host %q is not a loopback name, but the request arrived on a loopback address (DNS rebinding protection; run with --allow-any-host to turn it off)", r.Host)
	tw.Header().Set("Content-Type", "text/plain; charset=utf-8")
	tw.WriteHeader(http.StatusForbidden)
	_, _ = io.WriteString(tw, msg+"\n")
	tap.End("", false)
}
