package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// The Intercept page's API (Options.Intercept, a running recorder's
// queue of held messages):
//
//	GET  /api/v1/intercept               the rules, the timeout and what is held
//	PUT  /api/v1/intercept/rules         {"rules": [{"rule": "tools/call:delete_*", "enabled": true}, …]}
//	POST /api/v1/intercept/{id}          a verdict: {"action": "forward"|"edit"|"answer"|"fail", …}
//	GET  /api/v1/intercept/{id}/suggest?profile=NAME
//	                                     a testing profile's answer to a held request
//
// The live tail announces every change as an intercept event.

// heldRow is one held message in GET /api/v1/intercept.
type heldRow struct {
	capture.HeldMessage
	// AgeMs is how long it has been held; LeftMs how long until it goes on
	// unchanged (-1: it waits as long as it takes).
	AgeMs  int64 `json:"ageMs"`
	LeftMs int64 `json:"leftMs"`
	// RPCID is the held message's JSON-RPC id (the held request's, or
	// the request's a response answers), as its raw JSON.
	RPCID json.RawMessage `json:"rpcId,omitempty"`
	// Session is the session the message belongs to, when the store
	// shows which (null: not found, e.g. a session's first request); Tool
	// is the tool a held tools/call names, as that session's tools/list
	// described it.
	Session *heldSession `json:"session"`
	Tool    *toolDef     `json:"tool,omitempty"`
}

// heldSession is the little of a session a held message's card shows.
type heldSession struct {
	ID      string                  `json:"id"`
	Client  protocol.Implementation `json:"client"`
	Server  protocol.Implementation `json:"server"`
	Era     string                  `json:"era"`
	Version string                  `json:"version,omitempty"`
	Status  string                  `json:"status"`
}

// ruleRow is one rule, as the page shows and sends it.
type ruleRow struct {
	Rule    string `json:"rule"`
	Enabled bool   `json:"enabled"`
}

func (s *Server) apiIntercept(w http.ResponseWriter, r *http.Request) {
	out := struct {
		// Active says a recorder holds messages here (Options.Intercept).
		Active    bool      `json:"active"`
		TimeoutMs int64     `json:"timeoutMs"`
		Rules     []ruleRow `json:"rules"`
		Held      []heldRow `json:"held"`
		// Profiles are the testing profiles Auto-respond may use.
		Profiles []string `json:"profiles"`
		// Suggest says the dashboard can answer from a profile.
		Suggest bool `json:"suggest"`
	}{Rules: []ruleRow{}, Held: []heldRow{}, Profiles: s.profileNames()}
	if i := s.opts.Intercept; i != nil {
		out.Active, out.TimeoutMs, out.Suggest = true, i.Timeout().Milliseconds(), s.opts.Backend != nil
		for _, rule := range i.Rules() {
			out.Rules = append(out.Rules, ruleRow{rule.String(), rule.Enabled})
		}
		now := time.Now()
		for _, h := range i.Held() {
			row := heldRow{HeldMessage: h, AgeMs: now.Sub(h.Since).Milliseconds(), LeftMs: -1}
			if !h.Deadline.IsZero() {
				row.LeftMs = max(0, h.Deadline.Sub(now).Milliseconds())
			}
			s.heldContext(r.Context(), &row)
			out.Held = append(out.Held, row)
		}
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, out)
}

// maxRules bounds the rules the page may set.
const maxRules = 200

func (s *Server) apiSetRules(w http.ResponseWriter, r *http.Request) {
	i := s.opts.Intercept
	if i == nil {
		writeError(w, http.StatusNotImplemented, "nothing records through this dashboard, so there is nothing to intercept: run mcptape record", "unsupported")
		return
	}
	var body struct {
		Rules []ruleRow `json:"rules"`
	}
	if !readJSON(w, r, 1<<20, &body) {
		return
	}
	if len(body.Rules) > maxRules {
		badRequest(w, fmt.Sprintf("at most %d rules", maxRules))
		return
	}
	rules := make([]capture.InterceptRule, 0, len(body.Rules))
	for k, row := range body.Rules {
		rule, err := capture.ParseInterceptRule(row.Rule)
		if err != nil {
			badRequest(w, fmt.Sprintf("rule %d (%q): %v; write METHOD[:NAME], e.g. tools/call:delete_*, or response:tools/call", k+1, row.Rule,
				strings.TrimPrefix(err.Error(), capture.ErrBadRule.Error()+": ")))
			return
		}
		rule.Enabled = row.Enabled
		rules = append(rules, rule)
	}
	if err := i.SetRules(rules); err != nil {
		badRequest(w, err.Error())
		return
	}
	s.log.Info("intercept rules set from the dashboard", "rules", len(rules))
	s.apiIntercept(w, r)
}

// maxVerdict bounds a verdict's body (an edited message).
const maxVerdict = 16 << 20

func (s *Server) apiDecide(w http.ResponseWriter, r *http.Request) {
	i := s.opts.Intercept
	if i == nil {
		writeError(w, http.StatusNotImplemented, "nothing records through this dashboard, so nothing is held here", "unsupported")
		return
	}
	var v capture.Verdict
	if !readJSON(w, r, maxVerdict, &v) {
		return
	}
	v.TimedOut, v.Stopped = false, false
	if len(v.By) > 200 {
		v.By = v.By[:200]
	}
	id := pathVar(r, "id")
	switch err := i.Decide(id, v); {
	case errors.Is(err, capture.ErrNotHeld):
		writeError(w, http.StatusNotFound, err.Error(), "not_found")
	case errors.Is(err, capture.ErrBadVerdict):
		badRequest(w, err.Error())
	case err != nil:
		writeError(w, http.StatusInternalServerError, err.Error(), "internal")
	default:
		writeJSON(w, http.StatusOK, map[string]string{"decided": id, "action": string(v.Action)})
	}
}

// apiSuggest is a testing profile's answer to a held request, for
// Auto-respond and as a start for Edit & Send.
func (s *Server) apiSuggest(w http.ResponseWriter, r *http.Request) {
	i := s.opts.Intercept
	if i == nil || s.opts.Backend == nil {
		writeError(w, http.StatusNotImplemented, "this dashboard cannot answer from testing profiles", "unsupported")
		return
	}
	id := pathVar(r, "id")
	var held *capture.HeldMessage
	for _, h := range i.Held() {
		if h.ID == id {
			held = &h
			break
		}
	}
	if held == nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no held message %q: it went on already", id), "not_found")
		return
	}
	profile := r.URL.Query().Get("profile")
	if strings.ContainsAny(profile, `/\`) {
		badRequest(w, "a profile name has no slashes")
		return
	}
	params := json.RawMessage(held.Raw)
	if held.What != capture.HeldAnswer {
		m := protocol.Decode(held.Raw)
		if m.Kind != protocol.KindRequest {
			badRequest(w, "only a request can be answered from a testing profile")
			return
		}
		params = m.Params
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	res, err := s.opts.Backend.AnswerFromProfile(ctx, profile, held.Method, params)
	if err != nil {
		badRequest(w, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"result": res, "profile": profile})
}

// heldContext fills in a held message's JSON-RPC id, its session and the
// tool it calls.
func (s *Server) heldContext(ctx context.Context, row *heldRow) {
	h := &row.HeldMessage
	switch {
	case h.What == capture.HeldResponse && len(h.Request) > 0:
		row.RPCID = protocol.Decode(h.Request).ID
	case h.What != capture.HeldAnswer:
		row.RPCID = protocol.Decode(h.Raw).ID
	}
	sess := s.heldSessionOf(ctx, h)
	if sess == nil {
		return
	}
	row.Session = &heldSession{ID: sess.ID, Client: sess.Client, Server: sess.Server, Era: eraName(sess), Version: sess.Version, Status: sess.Status.String()}
	if h.Method == protocol.MethodToolsCall && h.Name != "" {
		row.Tool = s.sessionTool(ctx, sess.ID, h.Name)
	}
}

// maxHeldScan bounds the sessions read to find a held message's.
const maxHeldScan = 500

// heldSessionOf finds the session a held message belongs to: the legacy
// session whose stored key the message's Mcp-Session-Id has, or else the
// newest open session with its upstream and client. What it found is
// kept for the message's next showing.
func (s *Server) heldSessionOf(ctx context.Context, h *capture.HeldMessage) *capture.Session {
	s.heldMu.Lock()
	id, known := s.heldSessions[h.ID]
	s.heldMu.Unlock()
	if known {
		if x, err := s.store.Session(ctx, id); err == nil {
			return x
		}
	}
	up := h.Upstream
	if u, err := url.Parse(h.Upstream); err == nil && u.Host != "" {
		up = u.Scheme + "://" + u.Host
	}
	var found *capture.Session
	n := 0
	for x, err := range s.store.Sessions(ctx, capture.SessionQuery{}) {
		if err != nil || n == maxHeldScan {
			break
		}
		n++
		if x.Upstream != up {
			continue
		}
		if h.SessionKey != "" {
			if x.Key == h.SessionKey {
				found = x
				break
			}
			continue
		}
		if x.Status == capture.StatusOpen && (h.Client == "" || x.Client.Name == h.Client) {
			found = x
			break
		}
	}
	if found == nil {
		return nil
	}
	s.heldMu.Lock()
	if s.heldSessions == nil || len(s.heldSessions) > 2*maxHeldScan {
		s.heldSessions = map[string]string{}
	}
	s.heldSessions[h.ID] = found.ID
	s.heldMu.Unlock()
	return found
}

// sessionTool is tool name as the session's latest tools/list that names
// it described it.
func (s *Server) sessionTool(ctx context.Context, sessionID, name string) *toolDef {
	var lists []uint64
	for x, err := range s.store.Messages(ctx, sessionID, capture.MessageQuery{NoRaw: true}) {
		if err != nil {
			return nil
		}
		if x.Kind == protocol.KindResult && x.Method == protocol.MethodToolsList && x.Direction == protocol.ServerToClient {
			lists = append(lists, x.Seq)
		}
	}
	for i := len(lists) - 1; i >= 0 && i >= len(lists)-20; i-- {
		if t := s.toolIn(ctx, lists[i], name); t != nil {
			return t
		}
	}
	return nil
}

// watchIntercept tells the live tail's subscribers how many messages are
// held, on every change of the queue (rules included), until the server
// closes.
func (s *Server) watchIntercept() {
	i := s.opts.Intercept
	for {
		n, ch := i.Watch()
		s.live.offer(liveItem{intercept: &livePending{Count: n}})
		select {
		case <-ch:
		case <-s.ctx.Done():
			return
		}
	}
}

// profileNames lists the testing profiles' names, sorted.
func (s *Server) profileNames() []string {
	names := []string{}
	if s.opts.Profiles == "" {
		return names
	}
	entries, err := os.ReadDir(s.opts.Profiles)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return names
	}
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), ".json"); ok && e.Type().IsRegular() && validProfileName(name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}
