package dashboard

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// messageDetail is GET /api/v1/messages/{seq}.
type messageDetail struct {
	Message messageRow `json:"message"`
	// Raw is the message's bytes as text when they are UTF-8; RawBase64
	// holds them otherwise.
	Raw       *string `json:"raw"`
	RawBase64 string  `json:"rawBase64,omitempty"`
	// Exchange is the HTTP exchange that carried it, headers redacted at
	// record time.
	Exchange *capture.Exchange `json:"exchange"`
	// SSE is how its event looked on the wire, and how many events the
	// exchange's stream had.
	SSE     *sseDetail  `json:"sse,omitempty"`
	Session sessionHead `json:"session"`
	// Curl repeats a client→server message against the upstream; "" for
	// a server→client one.
	Curl string `json:"curl"`
	// Request is the JSON-RPC request this message is or answers, for
	// copying (pretty-printed when it is small enough).
	Request    string `json:"request,omitempty"`
	RequestSeq uint64 `json:"requestSeq,omitempty"`
	// CurlNote says why Curl is empty, or what it cannot repeat.
	CurlNote string `json:"curlNote,omitempty"`
	// Related are the messages the page links to; Tool is the tool a
	// tools/call names, as the session's last tools/list described it.
	Related *related `json:"related"`
	Tool    *toolDef `json:"tool,omitempty"`
	// Answer is the raw response to a request (a client's call, or a
	// server's sampling, elicitation, roots), shown beside the request;
	// "" when there is none or it is larger than maxPageAnswer.
	Answer string `json:"answer,omitempty"`
}

// maxPageAnswer bounds the answer a request's page carries along.
const maxPageAnswer = 1 << 20

type sseDetail struct {
	ID     string `json:"id,omitempty"`
	Type   string `json:"type,omitempty"`
	Prefix string `json:"prefix,omitempty"`
	Suffix string `json:"suffix,omitempty"`
	Whole  string `json:"whole,omitempty"`
	Events int    `json:"events"`
}

// sessionHead is the little of a session a message page shows.
type sessionHead struct {
	ID       string    `json:"id"`
	Era      string    `json:"era"`
	Version  string    `json:"version,omitempty"`
	Upstream string    `json:"upstream,omitempty"`
	Path     string    `json:"path,omitempty"`
	Start    time.Time `json:"start"`
}

func (s *Server) apiMessage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	seq, ok := seqVar(r)
	if !ok {
		badRequest(w, "want a message seq")
		return
	}
	m, err := s.store.Message(ctx, seq)
	if err != nil {
		storeError(w, err)
		return
	}
	d := messageDetail{Message: messageRowOf(m)}
	if utf8.Valid(m.Raw) {
		raw := string(m.Raw)
		d.Raw = &raw
	} else {
		d.RawBase64 = base64.StdEncoding.EncodeToString(m.Raw)
	}
	var sess *capture.Session
	if x, err := s.store.Session(ctx, m.SessionID); err == nil {
		sess = x
		d.Session = sessionHead{ID: x.ID, Era: eraName(x), Version: x.Version, Upstream: x.Upstream, Path: x.Path, Start: x.Start}
	} else {
		d.Session = sessionHead{ID: m.SessionID}
	}
	if m.ExchangeID != 0 {
		if x, err := s.store.Exchange(ctx, m.ExchangeID); err == nil {
			d.Exchange = x
		}
	}
	if m.SSE != nil {
		d.SSE = &sseDetail{ID: m.SSE.ID, Type: m.SSE.Type, Prefix: string(m.SSE.Prefix), Suffix: string(m.SSE.Suffix), Whole: string(m.SSE.Whole)}
		if d.Exchange != nil {
			d.SSE.Events = d.Exchange.Events
		}
	}
	d.Curl, d.CurlNote = s.curlFor(sess, d.Exchange, m)
	rel, tool, err := s.relatedOf(ctx, m)
	if err != nil {
		storeError(w, err)
		return
	}
	d.Related, d.Tool = rel, tool
	if m.Kind == protocol.KindResult && m.Direction == protocol.ServerToClient {
		rel.Inputs = inputsOf(m.Raw, rel.NextRound)
	}
	if m.Kind == protocol.KindRequest && rel.Response != 0 {
		if a, err := s.store.Message(ctx, rel.Response); err == nil && len(a.Raw) <= maxPageAnswer && utf8.Valid(a.Raw) {
			d.Answer = string(a.Raw)
		}
	}
	req := m
	if m.Kind.IsResponse() && m.Links.Request != 0 {
		if q, err := s.store.Message(ctx, m.Links.Request); err == nil {
			req = q
		}
	}
	if req.Kind == protocol.KindRequest || req.Kind == protocol.KindNotification {
		d.Request, d.RequestSeq = prettyJSON(req.Raw), req.Seq
	}
	writeJSON(w, http.StatusOK, d)
}

// prettyJSON indents small valid JSON; anything else is returned as it is.
func prettyJSON(raw []byte) string {
	if len(raw) > 1<<20 {
		return string(raw)
	}
	var b bytes.Buffer
	if json.Indent(&b, raw, "", "  ") != nil {
		return string(raw)
	}
	return b.String()
}

// editJSON is one version of a message as the API shows it.
type editJSON struct {
	Version   int       `json:"version"`
	Time      time.Time `json:"time"`
	Note      string    `json:"note,omitempty"`
	Raw       *string   `json:"raw"`
	RawBase64 string    `json:"rawBase64,omitempty"`
}

// apiEdits is GET /api/v1/messages/{seq}/edits: every version, the
// recorded one first.
func (s *Server) apiEdits(w http.ResponseWriter, r *http.Request) {
	seq, ok := seqVar(r)
	if !ok {
		badRequest(w, "want a message seq")
		return
	}
	var es []capture.Edit
	if s.editor != nil {
		var err error
		if es, err = s.editor.MessageEdits(r.Context(), seq); err != nil {
			storeError(w, err)
			return
		}
	} else {
		m, err := s.store.Message(r.Context(), seq)
		if err != nil {
			storeError(w, err)
			return
		}
		es = []capture.Edit{{Time: m.Time, Raw: m.Raw}}
	}
	out := make([]editJSON, len(es))
	for i, e := range es {
		out[i] = editJSON{Version: e.Version, Time: e.Time, Note: e.Note}
		if utf8.Valid(e.Raw) {
			raw := string(e.Raw)
			out[i].Raw = &raw
		} else {
			out[i].RawBase64 = base64.StdEncoding.EncodeToString(e.Raw)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"edits": out})
}

// maxEdit bounds an edited message.
const maxEdit = 64 << 20

// apiEdit is POST /api/v1/messages/{seq}/edits {"raw": "...", "note": "..."}:
// a new version of the message, which must be valid JSON.
func (s *Server) apiEdit(w http.ResponseWriter, r *http.Request) {
	if s.editor == nil {
		writeError(w, http.StatusNotImplemented, "this store keeps no edits", "unsupported")
		return
	}
	seq, ok := seqVar(r)
	if !ok {
		badRequest(w, "want a message seq")
		return
	}
	var body struct {
		Raw  *string `json:"raw"`
		Note string  `json:"note"`
	}
	if !readJSON(w, r, maxEdit+64<<10, &body) {
		return
	}
	if body.Raw == nil {
		badRequest(w, `the body needs "raw": the message's new JSON, as a string`)
		return
	}
	raw := []byte(*body.Raw)
	if err := checkJSON(raw); err != nil {
		badRequest(w, err.Error())
		return
	}
	if len(body.Note) > 4096 {
		badRequest(w, "the note is at most 4096 bytes")
		return
	}
	v, err := s.editor.EditMessage(r.Context(), seq, raw, body.Note)
	if err != nil {
		storeError(w, err)
		return
	}
	s.log.Info("dashboard: message edited", logKeySeq, seq, "version", v)
	m, err := s.store.Message(r.Context(), seq)
	if err != nil {
		storeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"version": v, "message": messageRowOf(m)})
}

// checkJSON says where raw stops being JSON.
func checkJSON(raw []byte) error {
	if json.Valid(raw) {
		return nil
	}
	var v any
	err := json.Unmarshal(raw, &v)
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		line := 1 + bytes.Count(raw[:min(int(se.Offset), len(raw))], []byte("\n"))
		return fmt.Errorf("not valid JSON: %v (line %d, byte %d)", se, line, se.Offset)
	case err != nil:
		return fmt.Errorf("not valid JSON: %v", err)
	}
	return errors.New("not valid JSON")
}
