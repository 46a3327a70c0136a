package dashboard

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// sessionRow is a session as the API lists it.
type sessionRow struct {
	ID         string                  `json:"id"`
	Era        string                  `json:"era"` // legacy, modern, http or unknown
	Version    string                  `json:"version,omitempty"`
	Opening    string                  `json:"opening,omitempty"`
	Client     protocol.Implementation `json:"client"`
	Server     protocol.Implementation `json:"server"`
	Upstream   string                  `json:"upstream,omitempty"`
	Path       string                  `json:"path,omitempty"`
	Leg        capture.Leg             `json:"leg"`               // how it reached the recorder
	Route      string                  `json:"route,omitempty"`   // the route's name, for a recorder of several
	Command    *capture.Command        `json:"command,omitempty"` // a stdio server's, redacted
	Start      time.Time               `json:"start"`
	End        time.Time               `json:"end"`
	DurationMs float64                 `json:"durationMs"`
	Exchanges  int                     `json:"exchanges"`
	Messages   int                     `json:"messages"`
	Calls      int                     `json:"calls"`
	Errors     int                     `json:"errors"`
	Findings   int                     `json:"findings"`
	Status     string                  `json:"status"`
	Lost       int                     `json:"lost,omitempty"`
	LossReason string                  `json:"lossReason,omitempty"`
	Labels     []string                `json:"labels"`
}

func eraName(s *capture.Session) string {
	if s.Opening == "http" {
		return "http"
	}
	return s.Era.String()
}

func rowOf(s *capture.Session) sessionRow {
	r := sessionRow{ID: s.ID, Era: eraName(s), Version: s.Version, Opening: s.Opening, Client: s.Client, Server: s.Server,
		Upstream: s.Upstream, Path: s.Path, Leg: s.Leg, Route: s.Route, Command: s.Command, Start: s.Start, End: s.End, Exchanges: s.Exchanges, Messages: s.Messages,
		Calls: s.Calls, Errors: s.Errors, Findings: s.Findings, Status: s.Status.String(), Lost: s.Lost,
		LossReason: s.LossReason, Labels: s.Labels}
	if r.Labels == nil {
		r.Labels = []string{}
	}
	if !s.End.IsZero() && s.End.After(s.Start) {
		r.DurationMs = float64(s.End.Sub(s.Start).Microseconds()) / 1000
	}
	return r
}

// sessionFilter is the query of GET /api/v1/sessions.
type sessionFilter struct {
	method, tool, status, era, label, text string
	findings                               string // "", "1" (some) or "0" (none)
	since, until                           time.Time
	limit, offset                          int
	// sort is the column the list is sorted by ("" is start, newest
	// first), asc its order.
	sort string
	asc  bool
}

// sortKeys are the columns the list sorts by, each compared ascending.
var sortKeys = map[string]func(a, b *sessionRow) int{
	"start":   func(a, b *sessionRow) int { return a.Start.Compare(b.Start) },
	"session": func(a, b *sessionRow) int { return strings.Compare(a.ID, b.ID) },
	"era":     func(a, b *sessionRow) int { return strings.Compare(a.Era+a.Version, b.Era+b.Version) },
	"client": func(a, b *sessionRow) int {
		return strings.Compare(strings.ToLower(a.Client.String()), strings.ToLower(b.Client.String()))
	},
	"server": func(a, b *sessionRow) int {
		return strings.Compare(strings.ToLower(a.Server.String()), strings.ToLower(b.Server.String()))
	},
	"duration": func(a, b *sessionRow) int { return cmp.Compare(a.DurationMs, b.DurationMs) },
	"calls":    func(a, b *sessionRow) int { return cmp.Compare(a.Calls, b.Calls) },
	"errors":   func(a, b *sessionRow) int { return cmp.Compare(a.Errors, b.Errors) },
	"findings": func(a, b *sessionRow) int { return cmp.Compare(a.Findings, b.Findings) },
	"status":   func(a, b *sessionRow) int { return strings.Compare(a.Status, b.Status) },
}

// maxSorted bounds the sessions a sort by a column other than start
// reads: past it, the list says it sorted the newest maxSorted only.
const maxSorted = 20000

const (
	defaultPage = 50
	maxPage     = 500
)

func parseFilter(r *http.Request) (sessionFilter, error) {
	q := r.URL.Query()
	f := sessionFilter{
		method: q.Get("method"), tool: q.Get("tool"), status: q.Get("status"), era: q.Get("era"),
		label: q.Get("label"), text: strings.TrimSpace(q.Get("q")), limit: defaultPage,
	}
	switch v := q.Get("findings"); v {
	case "", "any":
	case "1", "true", "yes":
		f.findings = "1"
	case "0", "false", "no":
		f.findings = "0"
	default:
		return f, errors.New("findings: want 1 (sessions with findings) or 0 (without)")
	}
	switch f.status {
	case "", "open", "closed", "incomplete", "errors", "ok":
	default:
		return f, errors.New("status: want open, closed, incomplete, errors or ok")
	}
	switch f.era {
	case "", "legacy", "modern", "http", "unknown":
	default:
		return f, errors.New("era: want legacy, modern, http or unknown")
	}
	var err error
	if f.since, err = parseTime(q.Get("since")); err != nil {
		return f, errors.New("since: " + err.Error())
	}
	if f.until, err = parseTime(q.Get("until")); err != nil {
		return f, errors.New("until: " + err.Error())
	}
	if v := q.Get("limit"); v != "" {
		if f.limit, err = strconv.Atoi(v); err != nil || f.limit < 1 {
			return f, errors.New("limit: want a positive number")
		}
		f.limit = min(f.limit, maxPage)
	}
	if v := q.Get("offset"); v != "" {
		if f.offset, err = strconv.Atoi(v); err != nil || f.offset < 0 {
			return f, errors.New("offset: want a number ≥ 0")
		}
	}
	if f.sort = q.Get("sort"); f.sort != "" && sortKeys[f.sort] == nil {
		return f, errors.New("sort: want start, session, era, client, server, duration, calls, errors, findings or status")
	}
	switch q.Get("order") {
	case "", "desc":
	case "asc":
		f.asc = true
	default:
		return f, errors.New("order: want asc or desc")
	}
	return f, nil
}

// parseTime reads RFC 3339 or a date; "" is the zero time.
func parseTime(v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, v, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, errors.New("want an RFC 3339 time like 2026-12-02T17:43:00Z, or a date")
}

// cheap reports whether s passes the filters that need no messages.
func (f *sessionFilter) cheap(s *capture.Session) bool {
	switch f.status {
	case "open", "closed", "incomplete":
		if s.Status.String() != f.status {
			return false
		}
	case "errors":
		if s.Errors == 0 {
			return false
		}
	case "ok":
		if s.Errors > 0 || s.Status == capture.StatusIncomplete {
			return false
		}
	}
	if f.era != "" && eraName(s) != f.era {
		return false
	}
	if (f.findings == "1" && s.Findings == 0) || (f.findings == "0" && s.Findings > 0) {
		return false
	}
	if f.label != "" && !slices.Contains(s.Labels, f.label) {
		return false
	}
	return true
}

type sessionsPage struct {
	Sessions []sessionRow `json:"sessions"`
	// Total counts the sessions that match; -1 when a text search stopped
	// once it had filled the page (More then says whether there are more).
	Total  int  `json:"total"`
	Offset int  `json:"offset"`
	Limit  int  `json:"limit"`
	More   bool `json:"more"`
	// Sort and Order are the list's order; Capped says a sort read only
	// the newest maxSorted sessions.
	Sort   string `json:"sort"`
	Order  string `json:"order"`
	Capped bool   `json:"capped,omitempty"`
}

// apiSessions is GET /api/v1/sessions: sessions newest first, filtered and
// paged.
func (s *Server) apiSessions(w http.ResponseWriter, r *http.Request) {
	f, err := parseFilter(r)
	if err != nil {
		badRequest(w, err.Error())
		return
	}
	page, err := s.listSessions(r.Context(), &f)
	if err != nil {
		storeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}

func (s *Server) listSessions(ctx context.Context, f *sessionFilter) (*sessionsPage, error) {
	if f.sort != "" && !(f.sort == "start" && !f.asc) {
		return s.sortedSessions(ctx, f)
	}
	page := &sessionsPage{Sessions: []sessionRow{}, Offset: f.offset, Limit: f.limit, Sort: "start", Order: "desc"}
	matched := 0
	text := []byte(f.text)
	// Unfiltered, a store that counts its sessions spares the walk past
	// the page to count them (a million sessions took seconds).
	counter, counts := s.store.(capture.SessionCounter)
	counts = counts && *f == sessionFilter{limit: f.limit, offset: f.offset, sort: f.sort, asc: f.asc}
	for x, err := range s.store.Sessions(ctx, capture.SessionQuery{Since: f.since, Until: f.until}) {
		if err != nil {
			return nil, err
		}
		if counts && matched >= f.offset+f.limit {
			n, err := counter.CountSessions(ctx)
			if err != nil {
				return nil, err
			}
			page.Total, page.More = n, true
			return page, nil
		}
		if ok, err := s.passes(ctx, f, x); err != nil {
			return nil, err
		} else if !ok {
			continue
		}
		if len(text) > 0 {
			if matched >= f.offset+f.limit {
				// The page is full: a text search stops at the next match.
				ok, err := s.sessionHasText(ctx, x, text)
				if err != nil {
					return nil, err
				}
				if ok {
					page.More, page.Total = true, -1
					return page, nil
				}
				continue
			}
			ok, err := s.sessionHasText(ctx, x, text)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
		}
		if matched >= f.offset && len(page.Sessions) < f.limit {
			page.Sessions = append(page.Sessions, rowOf(x))
		}
		matched++
	}
	page.Total = matched
	page.More = matched > f.offset+len(page.Sessions)
	return page, nil
}

// passes reports whether x passes the filters but the text: those of the
// session itself, and its methods and tools from the index.
func (s *Server) passes(ctx context.Context, f *sessionFilter, x *capture.Session) (bool, error) {
	if !f.cheap(x) {
		return false, nil
	}
	if f.method == "" && f.tool == "" {
		return true, nil
	}
	sum, err := s.index.get(ctx, x)
	if err != nil {
		return false, err
	}
	return (f.method == "" || sum.hasMethod(f.method)) && (f.tool == "" || sum.hasTool(f.tool)), nil
}

// sortedSessions is the list sorted by a column: every match (the newest
// maxSorted) is read, sorted, and paged.
func (s *Server) sortedSessions(ctx context.Context, f *sessionFilter) (*sessionsPage, error) {
	page := &sessionsPage{Sessions: []sessionRow{}, Offset: f.offset, Limit: f.limit, Sort: f.sort, Order: "desc"}
	if f.asc {
		page.Order = "asc"
	}
	text := []byte(f.text)
	var rows []sessionRow
	for x, err := range s.store.Sessions(ctx, capture.SessionQuery{Since: f.since, Until: f.until}) {
		if err != nil {
			return nil, err
		}
		if len(rows) == maxSorted {
			page.Capped = true
			break
		}
		if ok, err := s.passes(ctx, f, x); err != nil {
			return nil, err
		} else if !ok {
			continue
		}
		if len(text) > 0 {
			ok, err := s.sessionHasText(ctx, x, text)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
		}
		rows = append(rows, rowOf(x))
	}
	by := sortKeys[f.sort]
	slices.SortStableFunc(rows, func(a, b sessionRow) int {
		c := by(&a, &b)
		if !f.asc {
			c = -c
		}
		if c == 0 {
			c = b.Start.Compare(a.Start) // the newest first among equals
		}
		return c
	})
	page.Total = len(rows)
	if f.offset < len(rows) {
		page.Sessions = rows[f.offset:min(len(rows), f.offset+f.limit)]
	}
	page.More = f.offset+len(page.Sessions) < len(rows)
	return page, nil
}

// sessionHasText reports whether the text occurs, without regard to case,
// in the session's id, labels, client or server, or the raw bytes of any of
// its messages (params and results).
func (s *Server) sessionHasText(ctx context.Context, x *capture.Session, text []byte) (bool, error) {
	if containsFold([]byte(x.ID), text) || containsFold([]byte(x.Client.String()), text) ||
		containsFold([]byte(x.Server.String()), text) || containsFold([]byte(strings.Join(x.Labels, "\x00")), text) {
		return true, nil
	}
	for m, err := range s.store.Messages(ctx, x.ID, capture.MessageQuery{}) {
		if err != nil {
			return false, err
		}
		if containsFold(m.Raw, text) {
			return true, nil
		}
	}
	return false, nil
}

// containsFold reports whether needle is in hay, ASCII letters compared
// without case (and other text exactly, or with Unicode folding when the
// needle has non-ASCII letters).
func containsFold(hay, needle []byte) bool {
	if len(needle) == 0 {
		return true
	}
	for _, c := range needle {
		if c >= utf8.RuneSelf {
			return strings.Contains(strings.ToLower(string(hay)), strings.ToLower(string(needle)))
		}
	}
	first := lower(needle[0])
	for i := 0; i+len(needle) <= len(hay); i++ {
		if lower(hay[i]) != first {
			continue
		}
		j := 1
		for j < len(needle) && lower(hay[i+j]) == lower(needle[j]) {
			j++
		}
		if j == len(needle) {
			return true
		}
	}
	return false
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// sessionDetail is GET /api/v1/sessions/{id}.
type sessionDetail struct {
	Session            sessionRow `json:"session"`
	ClientCapabilities string     `json:"clientCapabilities,omitempty"`
	ServerCapabilities string     `json:"serverCapabilities,omitempty"`
	Key                string     `json:"key,omitempty"`
	Methods            []string   `json:"methods"`
	Tools              []string   `json:"tools"`
	Replay             replayInfo `json:"replay"`
}

func (s *Server) apiSession(w http.ResponseWriter, r *http.Request) {
	x, ok := s.sessionVar(w, r)
	if !ok {
		return
	}
	d := sessionDetail{Session: rowOf(x), ClientCapabilities: string(x.ClientCapabilities),
		ServerCapabilities: string(x.ServerCapabilities), Key: x.Key, Replay: s.replayInfo(x),
		Methods: []string{}, Tools: []string{}}
	if sum, err := s.index.get(r.Context(), x); err == nil {
		d.Methods = append(d.Methods, sum.methods...)
		d.Tools = append(d.Tools, sum.tools...)
	}
	writeJSON(w, http.StatusOK, d)
}

func (s *Server) apiDeleteSession(w http.ResponseWriter, r *http.Request) {
	id := pathVar(r, "id")
	if err := s.store.DeleteSession(r.Context(), id); err != nil {
		storeError(w, err)
		return
	}
	s.index.forget(id)
	s.log.Info("dashboard: session deleted", logKeySession, id)
	w.WriteHeader(http.StatusNoContent)
}

// treeAnswer is GET /api/v1/sessions/{id}/tree: the causal tree
// (capture.Tree), which of its messages were edited, and a stdio server's
// stderr lines (the last maxStderr; StderrMore counts the earlier ones).
type treeAnswer struct {
	Tree       *capture.Tree  `json:"tree"`
	Edited     map[string]int `json:"edited"`
	Stderr     []stderrLine   `json:"stderr,omitempty"`
	StderrMore int            `json:"stderrMore,omitempty"`
}

func (s *Server) apiTree(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	x, ok := s.sessionVar(w, r)
	if !ok {
		return
	}
	var msgs []*capture.Message
	edited := map[string]int{}
	for m, err := range s.store.Messages(ctx, x.ID, capture.MessageQuery{}) {
		if err != nil {
			storeError(w, err)
			return
		}
		msgs = append(msgs, m)
		if m.Edited > 0 {
			edited[strconv.FormatUint(m.Seq, 10)] = m.Edited
		}
	}
	var xs []*capture.Exchange
	for e, err := range s.store.Exchanges(ctx, x.ID) {
		if err != nil {
			storeError(w, err)
			return
		}
		xs = append(xs, e)
	}
	t := capture.BuildTree(x, msgs, xs)
	if t.Roots == nil {
		t.Roots = []*capture.Node{}
	}
	lines, more := stderrOf(msgs)
	writeJSON(w, http.StatusOK, treeAnswer{Tree: t, Edited: edited, Stderr: lines, StderrMore: more})
}

// messageRow is a message as the API lists it: the index, not the bytes.
type messageRow struct {
	Seq      uint64            `json:"seq"`
	Session  string            `json:"session"`
	Exchange uint64            `json:"exchange"`
	Dir      string            `json:"dir"`
	Time     time.Time         `json:"time"`
	Kind     string            `json:"kind"`
	Method   string            `json:"method,omitempty"`
	Name     string            `json:"name,omitempty"`
	ID       string            `json:"id,omitempty"` // the raw JSON id, as text
	Batch    int               `json:"batch"`
	Size     int               `json:"size"`
	Edited   int               `json:"edited,omitempty"`
	SSE      *sseRow           `json:"sse,omitempty"`
	Findings []capture.Finding `json:"findings,omitempty"`
	Links    capture.Links     `json:"links"`
}

type sseRow struct {
	ID   string `json:"id,omitempty"`
	Type string `json:"type,omitempty"`
}

func messageRowOf(m *capture.Message) messageRow {
	r := messageRow{Seq: m.Seq, Session: m.SessionID, Exchange: m.ExchangeID, Dir: m.Direction.String(), Time: m.Time,
		Kind: m.Kind.String(), Method: m.Method, Name: m.Name, ID: string(m.ID), Batch: m.Batch, Size: m.Size,
		Edited: m.Edited, Findings: m.Findings, Links: m.Links}
	if m.SSE != nil {
		r.SSE = &sseRow{ID: m.SSE.ID, Type: m.SSE.Type}
	}
	return r
}

// apiMessages is GET /api/v1/sessions/{id}/messages?after=SEQ&limit=N.
func (s *Server) apiMessages(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := pathVar(r, "id")
	if _, err := s.store.Session(ctx, id); err != nil {
		storeError(w, err)
		return
	}
	q := capture.MessageQuery{NoRaw: true, Limit: 1000}
	if v := r.URL.Query().Get("after"); v != "" {
		var err error
		if q.After, err = strconv.ParseUint(v, 10, 64); err != nil {
			badRequest(w, "after: want a message seq")
			return
		}
	}
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			badRequest(w, "limit: want a positive number")
			return
		}
		q.Limit = min(n, 10000)
	}
	limit := q.Limit
	q.Limit++ // one more says whether there are more
	out := struct {
		Messages []messageRow `json:"messages"`
		More     bool         `json:"more"`
	}{Messages: []messageRow{}}
	for m, err := range s.store.Messages(ctx, id, q) {
		if err != nil {
			storeError(w, err)
			return
		}
		if len(out.Messages) == limit {
			out.More = true
			break
		}
		out.Messages = append(out.Messages, messageRowOf(m))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) apiExchanges(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := pathVar(r, "id")
	if _, err := s.store.Session(ctx, id); err != nil {
		storeError(w, err)
		return
	}
	out := []*capture.Exchange{}
	for x, err := range s.store.Exchanges(ctx, id) {
		if err != nil {
			storeError(w, err)
			return
		}
		out = append(out, x)
	}
	writeJSON(w, http.StatusOK, map[string]any{"exchanges": out})
}

// Label bounds.
const (
	maxLabels   = 32
	maxLabelLen = 64
)

// apiSetLabels is PUT /api/v1/sessions/{id}/labels {"labels": [...]}:
// labels are trimmed, empty ones dropped, duplicates removed.
func (s *Server) apiSetLabels(w http.ResponseWriter, r *http.Request) {
	if s.editor == nil {
		writeError(w, http.StatusNotImplemented, "this store keeps no labels", "unsupported")
		return
	}
	var body struct {
		Labels []string `json:"labels"`
	}
	if !readJSON(w, r, 64<<10, &body) {
		return
	}
	var labels []string
	for _, l := range body.Labels {
		l = strings.TrimSpace(l)
		if l == "" || slices.Contains(labels, l) {
			continue
		}
		if utf8.RuneCountInString(l) > maxLabelLen || !utf8.ValidString(l) {
			badRequest(w, "a label is at most 64 characters of text")
			return
		}
		labels = append(labels, l)
	}
	if len(labels) > maxLabels {
		badRequest(w, "at most 32 labels")
		return
	}
	id := pathVar(r, "id")
	if err := s.editor.SetLabels(r.Context(), id, labels); err != nil {
		storeError(w, err)
		return
	}
	if labels == nil {
		labels = []string{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"labels": labels})
}

// Log keys.
const (
	logKeySession = "session"
	logKeyError   = "err"
	logKeySeq     = "seq"
)
