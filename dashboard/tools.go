package dashboard

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// The Tools page: every tool each upstream listed (the union of its
// tools/list answers, each tool as its newest listing describes it, marked
// by when it was seen), where a call of it can be sent, and its recorded
// calls.
//
//	GET /api/v1/tools                 the tools of each upstream
//	GET /api/v1/tools/history?upstream=URL&path=P&name=TOOL&offset=N&limit=N
//	                                  the recorded calls of a tool, newest first, a page at a time

// Bounds of the tools scans.
const (
	maxToolSessions = 2000
	maxHistory      = 200
	defaultHistory  = 20
	maxToolsKept    = 2000
)

// toolsOf is one upstream's tools.
type toolsOf struct {
	Upstream string `json:"upstream"`
	Path     string `json:"path"`
	// Session, Seq and Time are those of the newest tools/list; Version
	// the protocol version its session spoke.
	Session string    `json:"session"`
	Seq     uint64    `json:"seq"`
	Time    time.Time `json:"time"`
	Version string    `json:"version,omitempty"`
	// Tools are every tool the upstream listed, oldest first seen first,
	// each as its newest listing described it; Seen says when each was
	// listed (by name, in the same order).
	Tools []json.RawMessage `json:"tools"`
	Seen  []toolSeen        `json:"seen"`
	// Listings counts the tools/list answers read.
	Listings int `json:"listings"`
	// Send is where a call of these tools goes, or why it cannot.
	Send sendTarget `json:"send"`
}

// toolSeen is when a tool was listed: first and last, and whether the
// newest tools/list has it (a client with fewer capabilities, or a server
// that changed, may list fewer).
type toolSeen struct {
	Name   string    `json:"name"`
	First  time.Time `json:"first"`
	Last   time.Time `json:"last"`
	Latest bool      `json:"latest"`
}

// recentSessions are the sessions, newest first, at most maxToolSessions.
func (s *Server) recentSessions(ctx context.Context) ([]*capture.Session, error) {
	var all []*capture.Session
	for sess, err := range s.store.Sessions(ctx, capture.SessionQuery{}) {
		if err != nil {
			return nil, err
		}
		all = append(all, sess)
	}
	slices.SortFunc(all, func(a, b *capture.Session) int { return b.End.Compare(a.End) })
	if len(all) > maxToolSessions {
		all = all[:maxToolSessions]
	}
	return all, nil
}

// upstreamTools gathers one upstream's listings, newest session first.
type upstreamTools struct {
	out    *toolsOf
	sess   *capture.Session // the newest listing's
	byName map[string]int   // tool name → index in out.Tools
}

func (s *Server) apiTools(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	sessions, err := s.recentSessions(ctx)
	if err != nil {
		storeError(w, err)
		return
	}
	ups := map[string]*upstreamTools{}
	var order []string
	for _, sess := range sessions {
		if sess.Leg == capture.LegStdio {
			continue
		}
		// The session's tools/list answers, newest last.
		var lists []*capture.Message
		for m, err := range s.store.Messages(ctx, sess.ID, capture.MessageQuery{NoRaw: true}) {
			if err != nil {
				storeError(w, err)
				return
			}
			if m.Direction == protocol.ServerToClient && m.Kind == protocol.KindResult && m.Method == protocol.MethodToolsList {
				lists = append(lists, m)
			}
		}
		key := sess.Upstream + "|" + sess.Path
		for i := len(lists) - 1; i >= 0; i-- {
			m, err := s.store.Message(ctx, lists[i].Seq)
			if err != nil {
				continue
			}
			res, _ := protocol.ParseResult(protocol.Decode(m.Raw).Result)
			var tools []json.RawMessage
			if json.Unmarshal(res.Tools, &tools) != nil || len(tools) == 0 {
				continue
			}
			u := ups[key]
			if u == nil {
				u = &upstreamTools{sess: sess, byName: map[string]int{}, out: &toolsOf{Upstream: sess.Upstream, Path: sess.Path,
					Session: sess.ID, Seq: m.Seq, Time: m.Time, Version: sess.Version, Tools: []json.RawMessage{}, Seen: []toolSeen{}}}
				ups[key] = u
				order = append(order, key)
			}
			u.add(tools, m.Time, m.Seq == u.out.Seq)
		}
	}
	out := make([]toolsOf, 0, len(order))
	for _, key := range order {
		u := ups[key]
		u.out.Send = s.sendTarget(u.sess)
		// Oldest first seen first: the order the upstream grew in.
		idx := make([]int, len(u.out.Tools))
		for i := range idx {
			idx[i] = i
		}
		slices.SortStableFunc(idx, func(a, b int) int { return u.out.Seen[a].First.Compare(u.out.Seen[b].First) })
		tools, seen := make([]json.RawMessage, len(idx)), make([]toolSeen, len(idx))
		for i, k := range idx {
			tools[i], seen[i] = u.out.Tools[k], u.out.Seen[k]
		}
		u.out.Tools, u.out.Seen = tools, seen
		out = append(out, *u.out)
	}
	slices.SortFunc(out, func(a, b toolsOf) int { return cmp.Compare(a.Upstream+a.Path, b.Upstream+b.Path) })
	writeJSON(w, http.StatusOK, map[string]any{"upstreams": out, "send": s.recording() != nil && s.proxyBase() != ""})
}

// add takes one listing (read newest first): a tool not yet known is
// described by it; every tool's first sighting moves back to it.
func (u *upstreamTools) add(tools []json.RawMessage, at time.Time, latest bool) {
	u.out.Listings++
	for _, t := range tools {
		var head struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(t, &head) != nil || head.Name == "" {
			continue
		}
		if i, ok := u.byName[head.Name]; ok {
			if at.Before(u.out.Seen[i].First) {
				u.out.Seen[i].First = at
			}
			continue
		}
		if len(u.out.Tools) >= maxToolsKept {
			continue
		}
		u.byName[head.Name] = len(u.out.Tools)
		u.out.Tools = append(u.out.Tools, t)
		u.out.Seen = append(u.out.Seen, toolSeen{Name: head.Name, First: at, Last: at, Latest: latest})
	}
}

// historyRow is one recorded call of a tool.
type historyRow struct {
	Session   string          `json:"session"`
	Seq       uint64          `json:"seq"`
	Time      time.Time       `json:"time"`
	Client    string          `json:"client,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Status is success, error (JSON-RPC), isError, pending or
	// input_required; Summary the result's first text, cut.
	Status   string  `json:"status"`
	Summary  string  `json:"summary,omitempty"`
	Response uint64  `json:"response,omitempty"`
	Ms       float64 `json:"ms,omitempty"`
}

// apiToolHistory is a page of a tool's recorded calls, newest first:
// ?offset= and ?limit= (20 by default, 200 at most); more says there are
// older ones.
func (s *Server) apiToolHistory(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	upstream, path, name := q.Get("upstream"), q.Get("path"), q.Get("name")
	if name == "" {
		badRequest(w, "name the tool: ?name=TOOL (with ?upstream= and ?path= of its server)")
		return
	}
	offset, limit := 0, defaultHistory
	if v := q.Get("offset"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			badRequest(w, "offset: want a number ≥ 0")
			return
		}
		offset = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			badRequest(w, "limit: want a positive number")
			return
		}
		limit = min(n, maxHistory)
	}
	sessions, err := s.recentSessions(ctx)
	if err != nil {
		storeError(w, err)
		return
	}
	rows := []historyRow{}
	skipped, more := 0, false
	for _, sess := range sessions {
		if more {
			break
		}
		if (upstream != "" && sess.Upstream != upstream) || (path != "" && sess.Path != path) {
			continue
		}
		calls := map[uint64]*historyRow{}
		var order []uint64
		answers := map[uint64]*capture.Message{}
		for m, err := range s.store.Messages(ctx, sess.ID, capture.MessageQuery{NoRaw: true}) {
			if err != nil {
				storeError(w, err)
				return
			}
			switch {
			case m.Direction == protocol.ClientToServer && m.Kind == protocol.KindRequest && m.Method == protocol.MethodToolsCall && m.Name == name:
				calls[m.Seq] = &historyRow{Session: sess.ID, Seq: m.Seq, Time: m.Time, Client: sess.Client.String(), Status: "pending"}
				order = append(order, m.Seq)
			case m.Direction == protocol.ServerToClient && m.Kind.IsResponse() && m.Links.Request != 0:
				answers[m.Links.Request] = m
			}
		}
		for i := len(order) - 1; i >= 0; i-- {
			if skipped < offset {
				skipped++
				continue
			}
			if len(rows) == limit {
				more = true
				break
			}
			row := calls[order[i]]
			if q, err := s.store.Message(ctx, row.Seq); err == nil {
				p, _ := protocol.ParseParams(protocol.Decode(q.Raw).Params)
				row.Arguments = p.Arguments
			}
			if a := answers[row.Seq]; a != nil {
				row.Response = a.Seq
				row.Ms = float64(a.Time.Sub(row.Time).Microseconds()) / 1000
				row.Status = "success"
				if full, err := s.store.Message(ctx, a.Seq); err == nil {
					row.Status, row.Summary = summarize(full)
				}
			}
			rows = append(rows, *row)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"calls": rows, "offset": offset, "more": more})
}

// summarize is a tool answer's status and the start of its text.
func summarize(m *capture.Message) (status, summary string) {
	pm := protocol.Decode(m.Raw)
	if pm.Kind == protocol.KindError {
		e, _ := pm.ErrorInfo()
		return "error", clipText(strconv.FormatInt(e.Code, 10)+": "+e.Message, 200)
	}
	res, _ := protocol.ParseResult(pm.Result)
	status = "success"
	switch {
	case res.ResultType == "input_required":
		status = "input_required"
	case res.IsError:
		status = "isError"
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(res.Content, &blocks)
	for _, b := range blocks {
		if b.Type == "text" && b.Text != "" {
			return status, clipText(b.Text, 200)
		}
	}
	if len(res.StructuredContent) > 0 {
		return status, clipText(string(res.StructuredContent), 200)
	}
	return status, ""
}

func clipText(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
