package dashboard

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// related is what a message page links to besides the message's own
// links: its response, the requests it set off, the next round of an MRTR
// call, the other messages of its HTTP exchange (the SSE stream), and a
// URL elicitation's completion.
type related struct {
	// Response answers this request.
	Response uint64 `json:"response,omitempty"`
	// Children are what this request set off: server→client requests on
	// its stream, its progress and log notifications, cancellations.
	Children []messageRow `json:"children"`
	// MoreChildren counts the children left out past maxRelated.
	MoreChildren int `json:"moreChildren,omitempty"`
	// Next is the MRTR retry (or the next sampling request of a tool
	// loop) that follows this request; NextRound, on a response, the
	// retry of the request it answers.
	Next      uint64 `json:"next,omitempty"`
	NextRound uint64 `json:"nextRound,omitempty"`
	// Stream holds the other messages of the same HTTP exchange, frames
	// left out; MoreStream counts those past maxRelated.
	Stream     []messageRow `json:"stream"`
	MoreStream int          `json:"moreStream,omitempty"`
	// Complete is the notifications/elicitation/complete of a URL
	// elicitation.
	Complete uint64 `json:"complete,omitempty"`
	// Inputs are the input requests of an input_required result, by key,
	// with the retry that answered them.
	Inputs []inputRef `json:"inputs,omitempty"`
}

// inputRef names one input request of an MRTR round.
type inputRef struct {
	Key    string `json:"key"`
	Method string `json:"method"`
	// Answered is the retry whose inputResponses hold the answer.
	Answered uint64 `json:"answered,omitempty"`
}

// maxRelated bounds each list of related messages.
const maxRelated = 200

// toolDef is a tool as the session's last tools/list before a message
// described it.
type toolDef struct {
	Name         string          `json:"name"`
	Title        string          `json:"title,omitempty"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema,omitempty"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  json.RawMessage `json:"annotations,omitempty"`
	// From is the tools/list result it comes from.
	From uint64 `json:"from"`
}

// relatedOf scans the session's message index once (no raw bytes) for
// what relates to m, and finds the tool a tools/call names.
func (s *Server) relatedOf(ctx context.Context, m *capture.Message) (*related, *toolDef, error) {
	rel := &related{Children: []messageRow{}, Stream: []messageRow{}}
	var lists []uint64 // tools/list results before m
	for x, err := range s.store.Messages(ctx, m.SessionID, capture.MessageQuery{NoRaw: true}) {
		if err != nil {
			return nil, nil, err
		}
		if x.Seq == m.Seq {
			continue
		}
		if x.Kind == protocol.KindResult && x.Method == protocol.MethodToolsList && x.Direction == protocol.ServerToClient && x.Seq < m.Seq {
			lists = append(lists, x.Seq)
		}
		switch {
		case x.Links.Request == m.Seq && x.Kind.IsResponse():
			rel.Response = x.Seq
		case x.Links.Request == m.Seq && x.Method == protocol.MethodElicitationComplete:
			rel.Complete = x.Seq
		case x.Links.Parent == m.Seq || x.Links.Request == m.Seq || (x.Links.Task == m.Seq && x.Kind != protocol.KindFrame):
			if len(rel.Children) < maxRelated {
				rel.Children = append(rel.Children, messageRowOf(x))
			} else {
				rel.MoreChildren++
			}
		}
		if x.Links.Previous == m.Seq && rel.Next == 0 {
			rel.Next = x.Seq
		}
		if m.Links.Request != 0 && x.Links.Previous == m.Links.Request && x.Kind == protocol.KindRequest && rel.NextRound == 0 {
			rel.NextRound = x.Seq
		}
		if x.ExchangeID == m.ExchangeID && m.ExchangeID != 0 && x.Kind != protocol.KindFrame {
			if len(rel.Stream) < maxRelated {
				rel.Stream = append(rel.Stream, messageRowOf(x))
			} else {
				rel.MoreStream++
			}
		}
	}
	var tool *toolDef
	if m.Method == protocol.MethodToolsCall && m.Name != "" {
		// The latest list that names the tool (a paged list may not);
		// at most 20 lists are read.
		for i := len(lists) - 1; i >= 0 && i >= len(lists)-20; i-- {
			if tool = s.toolIn(ctx, lists[i], m.Name); tool != nil {
				break
			}
		}
	}
	return rel, tool, nil
}

// toolIn is tool name in the tools/list result seq, or nil.
func (s *Server) toolIn(ctx context.Context, seq uint64, name string) *toolDef {
	res, err := s.store.Message(ctx, seq)
	if err != nil {
		return nil
	}
	var env struct {
		Result struct {
			Tools []toolDef `json:"tools"`
		} `json:"result"`
	}
	if json.Unmarshal(res.Raw, &env) != nil {
		return nil
	}
	for i := range env.Result.Tools {
		if env.Result.Tools[i].Name == name {
			t := env.Result.Tools[i]
			t.From = seq
			return &t
		}
	}
	return nil
}

// inputsOf lists the input requests of an input_required result raw, and
// the retry that answered them (next: the request of the following round).
func inputsOf(raw []byte, next uint64) []inputRef {
	var env struct {
		Result struct {
			ResultType    string `json:"resultType"`
			InputRequests map[string]struct {
				Method string `json:"method"`
			} `json:"inputRequests"`
		} `json:"result"`
	}
	if json.Unmarshal(raw, &env) != nil || len(env.Result.InputRequests) == 0 {
		return nil
	}
	out := make([]inputRef, 0, len(env.Result.InputRequests))
	for k, r := range env.Result.InputRequests {
		out = append(out, inputRef{Key: k, Method: r.Method, Answered: next})
	}
	slices.SortFunc(out, func(a, b inputRef) int {
		switch {
		case a.Key < b.Key:
			return -1
		case a.Key > b.Key:
			return 1
		}
		return 0
	})
	return out
}

// inputDetail is GET /api/v1/messages/{seq}/inputs/{key}: one request
// embedded in an MRTR input_required result, as a message of its own, with
// the answer the client gave in its retry.
type inputDetail struct {
	Key     string          `json:"key"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
	Session sessionHead     `json:"session"`
	// In is the input_required result that carries it; Request the round's
	// request that result answers.
	In      messageRow `json:"in"`
	Request uint64     `json:"request,omitempty"`
	// Retry is the next round's request, Answer what its inputResponses
	// hold under Key (absent: the client did not answer it).
	Retry  uint64          `json:"retry,omitempty"`
	Answer json.RawMessage `json:"answer,omitempty"`
	// Findings of the result and the retry that name this key.
	Findings []capture.Finding `json:"findings,omitempty"`
	// Siblings are the other input requests of the same result.
	Siblings []inputRef `json:"siblings"`
}

func (s *Server) apiInput(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	seq, ok := seqVar(r)
	if !ok {
		badRequest(w, "want a message seq")
		return
	}
	key := pathVar(r, "key")
	m, err := s.store.Message(ctx, seq)
	if err != nil {
		storeError(w, err)
		return
	}
	var env struct {
		Result struct {
			InputRequests map[string]struct {
				Method string          `json:"method"`
				Params json.RawMessage `json:"params"`
			} `json:"inputRequests"`
		} `json:"result"`
	}
	if json.Unmarshal(m.Raw, &env) != nil || env.Result.InputRequests == nil {
		writeError(w, http.StatusNotFound, "message "+strconv.FormatUint(seq, 10)+" is not an input_required result", "not_found")
		return
	}
	in, ok := env.Result.InputRequests[key]
	if !ok {
		writeError(w, http.StatusNotFound, "the input_required result asks for no input named "+strconv.Quote(key), "not_found")
		return
	}
	d := inputDetail{Key: key, Method: in.Method, Params: in.Params, In: messageRowOf(m), Request: m.Links.Request, Siblings: []inputRef{}}
	if x, err := s.store.Session(ctx, m.SessionID); err == nil {
		d.Session = sessionHead{ID: x.ID, Era: eraName(x), Version: x.Version, Upstream: x.Upstream, Path: x.Path, Start: x.Start}
	}
	for _, f := range m.Findings {
		if containsKey(f.Message, key) {
			d.Findings = append(d.Findings, f)
		}
	}
	// The retry: the request whose Previous is the round's request.
	if m.Links.Request != 0 {
		for x, err := range s.store.Messages(ctx, m.SessionID, capture.MessageQuery{After: m.Seq, NoRaw: true}) {
			if err != nil {
				storeError(w, err)
				return
			}
			if x.Links.Previous == m.Links.Request && x.Kind == protocol.KindRequest {
				d.Retry = x.Seq
				break
			}
		}
	}
	if d.Retry != 0 {
		if q, err := s.store.Message(ctx, d.Retry); err == nil {
			var p struct {
				Params struct {
					InputResponses map[string]json.RawMessage `json:"inputResponses"`
				} `json:"params"`
			}
			if json.Unmarshal(q.Raw, &p) == nil {
				d.Answer = p.Params.InputResponses[key]
			}
			for _, f := range q.Findings {
				if containsKey(f.Message, key) {
					d.Findings = append(d.Findings, f)
				}
			}
		}
	}
	for _, ref := range inputsOf(m.Raw, d.Retry) {
		if ref.Key != key {
			d.Siblings = append(d.Siblings, ref)
		}
	}
	writeJSON(w, http.StatusOK, d)
}

// containsKey reports whether a finding's message is about input key (the
// recorder prefixes them with `input request "key":` or `input response
// "key":`).
func containsKey(msg, key string) bool {
	q := strconv.Quote(key) + ":"
	return strings.Contains(msg, "input request "+q) || strings.Contains(msg, "input response "+q)
}

// exchangeDetail is GET /api/v1/exchanges/{id}: one HTTP exchange with its
// messages (the SSE stream's events in order).
type exchangeDetail struct {
	Exchange *capture.Exchange `json:"exchange"`
	Session  sessionHead       `json:"session"`
	Messages []messageRow      `json:"messages"`
	More     bool              `json:"more"`
}

// maxExchangeMessages bounds the messages the exchange page lists.
const maxExchangeMessages = 2000

func (s *Server) apiExchange(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id, err := strconv.ParseUint(pathVar(r, "id"), 10, 64)
	if err != nil {
		badRequest(w, "want an exchange id")
		return
	}
	x, err := s.store.Exchange(ctx, id)
	if err != nil {
		storeError(w, err)
		return
	}
	d := exchangeDetail{Exchange: x, Messages: []messageRow{}}
	if sess, err := s.store.Session(ctx, x.SessionID); err == nil {
		d.Session = sessionHead{ID: sess.ID, Era: eraName(sess), Version: sess.Version, Upstream: sess.Upstream, Path: sess.Path, Start: sess.Start}
	}
	for m, err := range s.store.Messages(ctx, x.SessionID, capture.MessageQuery{NoRaw: true}) {
		if err != nil {
			storeError(w, err)
			return
		}
		if m.ExchangeID != id {
			continue
		}
		if len(d.Messages) == maxExchangeMessages {
			d.More = true
			break
		}
		d.Messages = append(d.Messages, messageRowOf(m))
	}
	writeJSON(w, http.StatusOK, d)
}
