package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// ClientAnswers has the proxy answer a server's sampling, elicitation and
// roots requests itself, in place of the client: a server under
// development can then use them behind a client that lacks them.
//
// On 2025-era sessions the server's request is not delivered to the
// client: the proxy posts the answer to the server itself, with the
// session's Mcp-Session-Id and protocol version. On 2026-07-28, an
// input_required result whose input requests it can all answer is not
// delivered either: the proxy retries the call with inputResponses and the
// echoed requestState, round after round, and the client gets the final
// result. And when the client did not declare the capability, the proxy
// adds it to what the client sends (initialize's capabilities, and
// _meta's client capabilities on 2026-07-28). Every change is recorded.
type ClientAnswers struct {
	// Methods maps each method answered (sampling/createMessage,
	// elicitation/create, roots/list) to how the record names who
	// answers it, e.g. "--answer sampling=profile:quick-mock".
	Methods map[string]string
	// Answer answers one request. It may wait (a person answers); ctx
	// ends when nobody waits for the answer any more.
	Answer func(ctx context.Context, q AnswerQuestion) (AnswerReply, error)
}

// AnswerQuestion is one request the proxy answers for the client.
type AnswerQuestion struct {
	// Method and Params are the request's.
	Method string
	Params json.RawMessage
	// Key is the inputRequests key on 2026-07-28, "" for a server's
	// request on a legacy session.
	Key string
	// Upstream and Version say where it came from.
	Upstream, Version string
	// By is Methods[Method].
	By string
	// MCPSession and Client say whose exchange it is (the Mcp-Session-Id,
	// the clientInfo name a 2026-07-28 request gives), for a person's
	// page to find its session (capture.HeldMessage's fields).
	MCPSession, Client string
}

// AnswerReply is an answer: a Result or an Error. Forward gives the
// request to the client instead (By then says why).
type AnswerReply struct {
	Result  json.RawMessage
	Error   *protocol.ErrorInfo
	Forward bool
	// By says who answered, when not ClientAnswers.Methods' text (a
	// person who picked another profile, say).
	By string
}

// capabilityFor is the capability the client declares for each method
// answered, and what the proxy adds when it does not.
var capabilityFor = map[string]struct{ key, value string }{
	protocol.MethodSampling:    {"sampling", `{"tools":{}}`},
	protocol.MethodElicitation: {"elicitation", `{"form":{},"url":{}}`},
	protocol.MethodRootsList:   {"roots", `{}`},
}

func (a *ClientAnswers) handles(method string) bool {
	if a == nil {
		return false
	}
	_, ok := a.Methods[method]
	return ok
}

// handlesAll reports whether the proxy answers every one of an
// input_required result's input requests.
func (a *ClientAnswers) handlesAll(raw json.RawMessage) bool {
	in := inputRequests(raw)
	if a == nil || len(in) == 0 {
		return false
	}
	for _, ir := range in {
		if !a.handles(ir.Method) {
			return false
		}
	}
	return true
}

// addCapabilities adds the capabilities of the methods answered that the
// client's message does not declare: to initialize's capabilities, and
// to _meta's client capabilities (2026-07-28). It returns the message to
// forward and what it added ("" when nothing).
func (a *ClientAnswers) addCapabilities(method string, body []byte) ([]byte, string) {
	var path []string
	switch {
	case method == protocol.MethodInitialize:
		path = []string{"params", "capabilities"}
	default:
		params, _, _, ok := protocol.Member(body, "params")
		if !ok {
			return body, ""
		}
		meta, _, _, ok := protocol.Member(params, "_meta")
		if !ok {
			return body, ""
		}
		if _, _, _, ok := protocol.Member(meta, protocol.MetaClientCapabilities); !ok {
			return body, ""
		}
		path = []string{"params", "_meta", protocol.MetaClientCapabilities}
	}
	caps := map[string]json.RawMessage{}
	if v, ok := memberAt(body, path...); ok {
		if json.Unmarshal(v, &caps) != nil || caps == nil {
			return body, ""
		}
	}
	var added []string
	for _, m := range slices.Sorted(maps.Keys(a.Methods)) {
		c, ok := capabilityFor[m]
		if !ok {
			continue
		}
		if _, has := caps[c.key]; !has {
			caps[c.key] = json.RawMessage(c.value)
			added = append(added, c.key)
		}
	}
	if len(added) == 0 {
		return body, ""
	}
	enc, err := json.Marshal(caps)
	if err != nil {
		return body, ""
	}
	out, ok := setMemberAt(body, enc, path...)
	if !ok {
		return body, ""
	}
	return out, fmt.Sprintf("--answer added the %s capabilit%s, which the client did not declare",
		strings.Join(added, " and "), map[bool]string{true: "y", false: "ies"}[len(added) == 1])
}

// memberAt is the value at a path of nested members.
func memberAt(obj []byte, path ...string) ([]byte, bool) {
	v := obj
	for _, k := range path {
		var ok bool
		if v, _, _, ok = protocol.Member(v, k); !ok {
			return nil, false
		}
	}
	return v, true
}

// setMemberAt sets the value at path, adding the last member (and
// params) when missing.
func setMemberAt(obj, value []byte, path ...string) ([]byte, bool) {
	if out, ok := protocol.SetMember(obj, value, path...); ok {
		return out, true
	}
	// The member is missing: rebuild its parent object with it.
	parentPath, key := path[:len(path)-1], path[len(path)-1]
	parent := []byte("{}")
	if len(parentPath) > 0 {
		if v, ok := memberAt(obj, parentPath...); ok {
			parent = v
		}
	} else {
		parent = obj
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(parent, &m) != nil {
		return nil, false
	}
	if m == nil {
		m = map[string]json.RawMessage{}
	}
	m[key] = value
	enc, err := json.Marshal(m)
	if err != nil {
		return nil, false
	}
	if len(parentPath) == 0 {
		return enc, true
	}
	return setMemberAt(obj, enc, parentPath...)
}

// answerForClient answers a server's request on a legacy session in the
// client's place: the answer goes to the server in a POST of the
// proxy's own, and the request goes no further. ok is false when the
// answer says to give the request to the client after all.
func (c *callInfo) answerForClient(ctx context.Context, m *protocol.Message) ([]byte, *capture.Intercepted, func(), bool) {
	a := c.p.ans
	by := a.Methods[m.Method]
	reply, err := a.Answer(ctx, AnswerQuestion{Method: m.Method, Params: paramsOf(m), Upstream: c.x.rt.up.Redacted(), Version: c.version, By: by,
		MCPSession: c.mcpSession(), Client: c.client()})
	if err != nil {
		return nil, &capture.Intercepted{Note: "to be answered by mcptape for the client (" + by + "), not delivered to the client; no answer came: " + err.Error()}, nil, true
	}
	if reply.Forward {
		return nil, &capture.Intercepted{Note: by + ": " + cmpOr(reply.By, "left to the client") + "; passed on to the client"}, nil, false
	}
	if reply.By != "" {
		by = reply.By
	}
	v := capture.Verdict{Action: capture.ActionAnswer, Result: reply.Result, Error: reply.Error}
	if reply.Error != nil {
		v.Action = capture.ActionFail
	}
	note := &capture.Intercepted{Note: "answered by mcptape for the client (" + by + "); not delivered to the client, mcptape sent the answer to the server"}
	return nil, note, func() { c.postAnswer(context.WithoutCancel(ctx), responseBody(m.ID, v), "the answer of "+by) }, true
}

func paramsOf(m *protocol.Message) json.RawMessage {
	if len(m.Params) == 0 {
		return json.RawMessage("{}")
	}
	return m.Params
}

// postAnswer sends the answer to a server's request to the server, as the
// client would have: a POST on the exchange's endpoint with its session
// headers. It is recorded as the client's message, marked as sent by
// mcptape.
// A failure is in the record of that POST.
func (c *callInfo) postAnswer(ctx context.Context, body []byte, what string) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := c.sendOwn(ctx, body, body, "sent by mcptape, not by the client: "+what); err != nil {
		c.p.log.Warn("sending an answer for the client", capture.LogKeyUpstream, c.x.rt.up.Redacted(), capture.LogKeyError, err)
	}
}

// retryIDs numbers the requests mcptape sends for the client.
var retryIDs atomic.Uint64

// answerRounds answers a 2026-07-28 input_required result for the client:
// each input request answered, the call retried with inputResponses and
// the echoed requestState, until a final result, which the client gets
// with its own id.
func (c *callInfo) answerRounds(ctx context.Context, first *protocol.Message) ([]byte, *capture.Intercepted) {
	a := c.p.ans
	msg := first
	var bys []string
	for round := 1; ; round++ {
		r, _ := protocol.ParseResult(msg.Result)
		if msg.Kind != protocol.KindResult || r.ResultType != "input_required" {
			break
		}
		fail := func(why string) ([]byte, *capture.Intercepted) {
			return first.Raw, &capture.Intercepted{Note: fmt.Sprintf("mcptape could not answer round %d of this call for the client (%s), so the client got the input_required result: %s", round, strings.Join(bys, ", "), why)}
		}
		if round > maxRounds {
			return fail(fmt.Sprintf("more than %d rounds", maxRounds))
		}
		answers := map[string]json.RawMessage{}
		ins := inputRequests(r.InputRequests)
		for _, key := range slices.Sorted(maps.Keys(ins)) {
			ir := ins[key]
			by := a.Methods[ir.Method]
			reply, err := a.Answer(ctx, AnswerQuestion{Method: ir.Method, Params: ir.Params, Key: key, Upstream: c.x.rt.up.Redacted(), Version: c.version, By: by,
				MCPSession: c.mcpSession(), Client: c.client()})
			switch {
			case err != nil:
				if ctx.Err() != nil {
					return nil, &capture.Intercepted{Note: "to be answered by mcptape for the client (" + by + "); the client went away first"}
				}
				return fail(err.Error())
			case reply.Forward:
				return first.Raw, &capture.Intercepted{Note: by + ": " + cmpOr(reply.By, "left to the client") + "; the client got the input_required result (input request " + key + ")"}
			case reply.Error != nil:
				// Rejected: the call fails with that error.
				out := responseBody(c.id, capture.Verdict{Action: capture.ActionFail, Error: reply.Error})
				return out, &capture.Intercepted{Note: fmt.Sprintf("input request %s rejected by %s with JSON-RPC error %d: %s; the client got that error", key, cmpOr(reply.By, by), reply.Error.Code, reply.Error.Message), Sent: out}
			}
			if !slices.Contains(bys, cmpOr(reply.By, by)) {
				bys = append(bys, cmpOr(reply.By, by))
			}
			answers[key] = reply.Result
		}
		id, _ := json.Marshal(fmt.Sprintf("mcptape-%d", retryIDs.Add(1)))
		sent, err1 := retryBody(c.fwd, id, answers, r.RequestState)
		recorded, err2 := retryBody(c.recv, id, answers, r.RequestState)
		if err := errors.Join(err1, err2); err != nil {
			return fail(err.Error())
		}
		res, err := c.sendOwn(context.WithoutCancel(ctx), sent, recorded,
			fmt.Sprintf("sent by mcptape, not by the client: round %d of the client's call, answering its input requests (%s)", round+1, strings.Join(bys, ", ")))
		if err != nil {
			return fail(err.Error())
		}
		next := res.find(id)
		if next == nil {
			return fail(fmt.Sprintf("the server's answer to the retry (HTTP %d) holds no response to it", res.status))
		}
		msg = next
	}
	out, ok := protocol.SetMember(msg.Raw, orNull(c.id), "id")
	if !ok {
		out = msg.Raw
	}
	return out, &capture.Intercepted{Note: fmt.Sprintf("input_required answered by mcptape for the client (%s): the client got the final result of the rounds mcptape sent instead", strings.Join(bys, ", ")), Sent: out}
}

func orNull(id json.RawMessage) json.RawMessage {
	if len(id) == 0 {
		return json.RawMessage("null")
	}
	return id
}

// maxRounds bounds the rounds of one call the proxy answers, as go-sdk's
// client does.
const maxRounds = 10

// retryBody is a request retried with inputResponses and the echoed
// requestState, under a new id.
func retryBody(body []byte, id json.RawMessage, answers map[string]json.RawMessage, state *string) ([]byte, error) {
	var msg map[string]json.RawMessage
	if err := json.Unmarshal(body, &msg); err != nil {
		return nil, fmt.Errorf("the client's request does not decode: %w", err)
	}
	var params map[string]json.RawMessage
	if p := msg["params"]; len(p) > 0 {
		if err := json.Unmarshal(p, &params); err != nil {
			return nil, fmt.Errorf("the client's params do not decode: %w", err)
		}
	}
	if params == nil {
		params = map[string]json.RawMessage{}
	}
	ir, err := json.Marshal(answers)
	if err != nil {
		return nil, err
	}
	params["inputResponses"] = ir
	delete(params, "requestState")
	if state != nil {
		params["requestState"], _ = json.Marshal(*state)
	}
	if msg["params"], err = json.Marshal(params); err != nil {
		return nil, err
	}
	msg["id"] = id
	return json.Marshal(msg)
}

// ownResponse is the server's answer to a request mcptape sent itself.
type ownResponse struct {
	status int
	msgs   []protocol.Message
}

func (r *ownResponse) find(id json.RawMessage) *protocol.Message {
	key := protocol.IDKey(id)
	for i := range r.msgs {
		if m := &r.msgs[i]; m.Kind.IsResponse() && protocol.IDKey(m.ID) == key {
			return m
		}
	}
	return nil
}

// maxOwnResponse bounds the answer to a request mcptape sends itself (it
// streams to no client, so it is read whole).
const maxOwnResponse = 64 << 20

// sendOwn sends a request of mcptape's own to the upstream, on the
// exchange's endpoint and session, and records it as the client's, with
// recorded as its body and note saying what it is.
func (c *callInfo) sendOwn(ctx context.Context, body, recorded []byte, note string) (*ownResponse, error) {
	p := c.p
	u := *c.x.rt.up
	target := c.target
	if t, err := url.ParseRequestURI(target); err == nil {
		u.Path, u.RawPath, u.RawQuery = t.Path, t.RawPath, t.RawQuery
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", protocol.ContentTypeJSON)
	req.Header.Set("Accept", protocol.ContentTypeJSON+", "+protocol.ContentTypeSSE)
	for _, k := range []string{protocol.HeaderSessionID, protocol.HeaderProtocolVersion, "Authorization"} {
		if v := c.header.Get(k); v != "" {
			req.Header.Set(k, v)
		}
	}
	m := protocol.Decode(body)
	if c.header.Get(protocol.HeaderMethod) != "" && m.Method != "" {
		req.Header.Set(protocol.HeaderMethod, m.Method)
		if name := c.header.Get(protocol.HeaderName); name != "" {
			req.Header.Set(protocol.HeaderName, name)
		}
	}
	var tap *capture.Tap
	if p.rec != nil {
		in := &capture.Intercepted{Note: note}
		if !bytes.Equal(body, recorded) {
			in.Sent = body
		}
		rt := c.x.rt
		tap = p.rec.Begin(&capture.Request{Leg: rt.leg, Route: rt.name, Upstream: rt.base, Method: http.MethodPost, Target: u.RequestURI(),
			Header: req.Header.Clone(), Remote: c.remote, Body: recorded, Complete: true, Intercepted: in})
	}
	forwarded := time.Now()
	res, err := p.up.RoundTrip(req)
	if err != nil {
		tap.End("mcptape's own request failed: "+cleanErr(err).Error(), true)
		return nil, cleanErr(err)
	}
	defer res.Body.Close()
	tap.Upstream(forwarded, time.Now())
	tap.Response(res.StatusCode, res.Header, false)
	var all []byte
	buf := make([]byte, 32<<10)
	var rerr error
	for {
		n, err := res.Body.Read(buf)
		if n > 0 {
			tap.ResponseBody(buf[:n])
			if len(all)+n > maxOwnResponse {
				rerr = fmt.Errorf("the answer is larger than %d bytes", maxOwnResponse)
				break
			}
			all = append(all, buf[:n]...)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			rerr = err
			break
		}
	}
	if rerr != nil {
		tap.End("reading the answer to mcptape's own request: "+rerr.Error(), true)
		return nil, rerr
	}
	tap.End("", false)
	out := &ownResponse{status: res.StatusCode}
	mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type"))
	switch mt {
	case protocol.ContentTypeSSE:
		var ps protocol.SSEParser
		emit := func(e *protocol.Event) {
			if e.IsMessage() {
				out.msgs = append(out.msgs, protocol.Split(bytes.Clone(e.Data))...)
			}
		}
		ps.Feed(all, emit)
		ps.Close(emit)
	case protocol.ContentTypeJSON:
		if len(bytes.TrimSpace(all)) > 0 {
			out.msgs = protocol.Split(all)
		}
	}
	return out, nil
}
