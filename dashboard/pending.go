package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// Pending requests: a replay client whose testing profile leaves sampling
// to a person (the manual provider) asks through [Pending.Ask], which cmd
// passes as replay.ClientOptions.Manual. Each question waits in the queue
// until a person answers it on the /pending page (POST
// /api/v1/pending/{id}), the asker gives up (its ctx ends), or the queue
// is closed.

// Errors of the pending queue.
var (
	// ErrPendingClosed is returned by Ask once the queue is closed: nobody
	// is left to answer.
	ErrPendingClosed = errors.New("the dashboard no longer takes answers (closed)")
	// ErrNoPending is returned by Answer for an id that is not waiting:
	// unknown, answered already, or given up by the replay client.
	ErrNoPending = errors.New("no such pending request")
	// ErrBadAnswer is returned by Answer for an answer that breaks the
	// rules: not a JSON object, a sampling result without role, content or
	// model, an error without code or message. The request stays pending.
	ErrBadAnswer = errors.New("bad answer")
)

// Pending is a queue of requests that wait for a person's answer, safe for
// concurrent use: a [capture.HoldQueue] of requests and answers. Set it as
// Options.Pending to show it on the dashboard's /pending page and API. The
// zero value is not usable: use [NewPending].
type Pending struct {
	q *capture.HoldQueue[PendingRequest, PendingAnswer]
}

// PendingRequest is one request waiting for a person.
type PendingRequest struct {
	// ID names the request in the API: /api/v1/pending/{id}.
	ID string `json:"id"`
	// Method is the JSON-RPC method asked, e.g. sampling/createMessage.
	Method string `json:"method"`
	// Params are the request's params as the live server sent them.
	Params json.RawMessage `json:"params,omitempty"`
	// Since is when it started waiting.
	Since time.Time `json:"since"`
}

// PendingAnswer is a person's answer: a Result, or an Error (JSON-RPC code
// and message), not both.
type PendingAnswer struct {
	Result json.RawMessage     `json:"result,omitempty"`
	Error  *protocol.ErrorInfo `json:"error,omitempty"`
}

// NewPending returns an empty queue.
func NewPending() *Pending {
	return &Pending{q: capture.NewHoldQueue(&capture.HoldQueueOptions[PendingRequest, PendingAnswer]{
		Check: func(q PendingRequest, a *PendingAnswer) error { return checkAnswer(q.Method, *a) }})}
}

// Ask queues a request and waits for a person's answer: the result, or,
// when the person answers with a JSON-RPC error, a *protocol.ErrorInfo
// error. It returns ctx's error when ctx ends first (the request leaves
// the queue), and ErrPendingClosed when the queue is closed. Its signature
// is replay.ClientOptions.Manual's.
func (p *Pending) Ask(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	a, err := p.q.Hold(ctx, PendingRequest{Method: method, Params: bytes.Clone(params)}, 0)
	switch {
	case errors.Is(err, capture.ErrHoldClosed):
		return nil, ErrPendingClosed
	case err != nil:
		return nil, err
	case a.Error != nil:
		return nil, a.Error
	}
	return a.Result, nil
}

// Answer answers the pending request id, after checking the answer (see
// ErrBadAnswer): the result must be a JSON object, and a
// sampling/createMessage result must carry role, content and model.
func (p *Pending) Answer(id string, a PendingAnswer) error {
	err := p.q.Answer(id, a)
	if errors.Is(err, capture.ErrNotWaiting) {
		return fmt.Errorf("%w %q: it was answered already, or the replay client stopped waiting for it", ErrNoPending, id)
	}
	return err
}

// Requests lists the pending requests, oldest first.
func (p *Pending) Requests() []PendingRequest {
	ws := p.q.Waiting()
	out := make([]PendingRequest, len(ws))
	for i, w := range ws {
		out[i] = w.Q
		out[i].ID, out[i].Since = w.ID, w.Since
	}
	return out
}

// Close ends the queue: waiting Asks return ErrPendingClosed, and so do
// later ones. It is safe to call more than once.
func (p *Pending) Close() error {
	p.q.Close()
	return nil
}

// watch returns the number of pending requests and a channel closed on
// the next change.
func (p *Pending) watch() (int, <-chan struct{}) { return p.q.Watch() }

// checkAnswer applies the rules of ErrBadAnswer.
func checkAnswer(method string, a PendingAnswer) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrBadAnswer, fmt.Sprintf(format, args...))
	}
	result := bytes.TrimSpace(a.Result)
	hasResult := len(result) > 0 && string(result) != "null"
	switch {
	case hasResult && a.Error != nil:
		return bad("give a result or an error, not both")
	case a.Error != nil:
		if a.Error.Code == 0 {
			return bad("error.code is missing: a JSON-RPC error code, e.g. -1 (the user rejected the request)")
		}
		if strings.TrimSpace(a.Error.Message) == "" {
			return bad("error.message is missing: say why the request is refused")
		}
		return nil
	case !hasResult:
		return bad(`give {"result": {...}} or {"error": {"code": ..., "message": ...}}`)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(a.Result, &obj); err != nil {
		if err := checkJSON(a.Result); err != nil {
			return bad("result: %v", err)
		}
		return bad("result must be a JSON object, not %s", jsonKind(a.Result))
	}
	if method != protocol.MethodSampling {
		return nil
	}
	// A CreateMessageResult: role, content (a block or a list of blocks,
	// each with a type) and model; stopReason is optional.
	var role, model string
	if err := json.Unmarshal(obj["role"], &role); err != nil || (role != "assistant" && role != "user") {
		return bad(`result.role is missing or wrong: a sampling answer has "role": "assistant"`)
	}
	content := bytes.TrimSpace(obj["content"])
	type block struct {
		Type string `json:"type"`
	}
	var blocks []block
	switch {
	case len(content) == 0 || string(content) == "null":
		return bad(`result.content is missing: a sampling answer has content, e.g. {"type": "text", "text": "…"}`)
	case content[0] == '[':
		if json.Unmarshal(content, &blocks) != nil || len(blocks) == 0 {
			return bad("result.content must be a content block or a non-empty list of them")
		}
	default:
		blocks = []block{{}}
		if json.Unmarshal(content, &blocks[0]) != nil {
			return bad("result.content must be a content block (an object with a type) or a list of them")
		}
	}
	for i, b := range blocks {
		if b.Type == "" {
			return bad("result.content: block %d has no type (text, image, audio, tool_use, …)", i)
		}
	}
	if err := json.Unmarshal(obj["model"], &model); err != nil || strings.TrimSpace(model) == "" {
		return bad(`result.model is missing: name the model that answered, e.g. "model": "human"`)
	}
	if sr, ok := obj["stopReason"]; ok {
		var s string
		if json.Unmarshal(sr, &s) != nil {
			return bad("result.stopReason must be a string, e.g. endTurn")
		}
	}
	return nil
}

// jsonKind names the kind of a JSON value for messages.
func jsonKind(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return "nothing"
	}
	switch b[0] {
	case '[':
		return "a list"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// pendingRow is one entry of GET /api/v1/pending.
type pendingRow struct {
	PendingRequest
	// AgeMs is how long it has waited, in milliseconds.
	AgeMs int64 `json:"ageMs"`
}

// apiPending is GET /api/v1/pending.
func (s *Server) apiPending(w http.ResponseWriter, r *http.Request) {
	out := struct {
		// Active says a replay client is waiting on this dashboard for
		// answers (Options.Pending is set).
		Active   bool         `json:"active"`
		Requests []pendingRow `json:"requests"`
	}{Requests: []pendingRow{}}
	if p := s.opts.Pending; p != nil {
		out.Active = true
		now := p.q.Now()
		for _, q := range p.Requests() {
			out.Requests = append(out.Requests, pendingRow{q, now.Sub(q.Since).Milliseconds()})
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// maxAnswer bounds an answer's body.
const maxAnswer = 16 << 20

// apiAnswerPending is POST /api/v1/pending/{id}.
func (s *Server) apiAnswerPending(w http.ResponseWriter, r *http.Request) {
	p := s.opts.Pending
	if p == nil {
		writeError(w, http.StatusNotImplemented, "no replay client waits for answers here: see /pending", "unsupported")
		return
	}
	var a PendingAnswer
	if !readJSON(w, r, maxAnswer, &a) {
		return
	}
	id := pathVar(r, "id")
	switch err := p.Answer(id, a); {
	case errors.Is(err, ErrNoPending):
		writeError(w, http.StatusNotFound, err.Error(), "not_found")
	case errors.Is(err, ErrBadAnswer):
		badRequest(w, err.Error())
	case err != nil:
		writeError(w, http.StatusInternalServerError, err.Error(), "internal")
	default:
		writeJSON(w, http.StatusOK, map[string]string{"answered": id})
	}
}

// watchPending tells the live tail's subscribers how many requests are
// pending, on every change, until the server closes.
func (s *Server) watchPending() {
	p := s.opts.Pending
	for {
		n, ch := p.watch()
		s.live.offer(liveItem{pending: &livePending{Count: n}})
		select {
		case <-ch:
		case <-s.ctx.Done():
			return
		}
	}
}

// livePending is the data of a pending event of the live tail.
type livePending struct {
	Count int `json:"count"`
}
