package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/memstore"
	"github.com/mcptape/mcptape/dashboard"
	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/protocol"
)

// The JSON the API answers, as far as the tests read it.

type sessionRow struct {
	ID         string   `json:"id"`
	Era        string   `json:"era"`
	Status     string   `json:"status"`
	Calls      int      `json:"calls"`
	Errors     int      `json:"errors"`
	Messages   int      `json:"messages"`
	Labels     []string `json:"labels"`
	DurationMs float64  `json:"durationMs"`
}

type sessionsPage struct {
	Sessions []sessionRow `json:"sessions"`
	Total    int          `json:"total"`
	More     bool         `json:"more"`
}

type node struct {
	Kind     string  `json:"kind"`
	Method   string  `json:"method"`
	Name     string  `json:"name"`
	Request  uint64  `json:"request"`
	Response uint64  `json:"response"`
	Status   string  `json:"status"`
	Rounds   []*node `json:"rounds"`
	Children []*node `json:"children"`
}

type treeAnswer struct {
	Tree struct {
		Roots []*node `json:"roots"`
	} `json:"tree"`
	Edited map[string]int `json:"edited"`
}

type messageRow struct {
	Seq      uint64 `json:"seq"`
	Session  string `json:"session"`
	Exchange uint64 `json:"exchange"`
	Dir      string `json:"dir"`
	Kind     string `json:"kind"`
	Method   string `json:"method"`
	Name     string `json:"name"`
	Size     int    `json:"size"`
	Edited   int    `json:"edited"`
	SSE      *struct {
		ID string `json:"id"`
	} `json:"sse"`
	Links capture.Links `json:"links"`
}

type messageDetail struct {
	Message  messageRow        `json:"message"`
	Raw      *string           `json:"raw"`
	Exchange *capture.Exchange `json:"exchange"`
	SSE      *struct {
		Events int `json:"events"`
	} `json:"sse"`
	Curl       string `json:"curl"`
	CurlNote   string `json:"curlNote"`
	Request    string `json:"request"`
	RequestSeq uint64 `json:"requestSeq"`
}

func walk(ns []*node, f func(*node)) {
	for _, n := range ns {
		f(n)
		walk(n.Rounds, f)
		walk(n.Children, f)
	}
}

func find(ns []*node, pred func(*node) bool) *node {
	var out *node
	walk(ns, func(n *node) {
		if out == nil && pred(n) {
			out = n
		}
	})
	return out
}

func sessionIDs(p sessionsPage) []string {
	var ids []string
	for _, s := range p.Sessions {
		ids = append(ids, s.ID)
	}
	return ids
}

// TestAPIRead covers the read side over two real sessions, one per era.
func TestAPIRead(t *testing.T) {
	r := newRig(t, nil)
	r.runClient(t, fixtures.PathStateful)
	legacy := r.sessionOn(t, fixtures.PathStateful)
	r.runClient(t, fixtures.PathStateless)
	modern := r.sessionOn(t, fixtures.PathStateless)
	c := newAPIClient(t, r.srv.URL)

	t.Run("Sessions/Filters", func(t *testing.T) {
		future := url.QueryEscape(time.Now().Add(time.Hour).Format(time.RFC3339))
		past := url.QueryEscape(time.Now().Add(-time.Hour).Format(time.RFC3339))
		for _, tt := range []struct {
			query string
			want  []string
		}{
			{"", []string{modern.ID, legacy.ID}},
			{"era=legacy", []string{legacy.ID}},
			{"era=modern", []string{modern.ID}},
			{"era=http", nil},
			{"status=closed", []string{legacy.ID}},
			{"status=open", []string{modern.ID}},
			{"status=errors", []string{modern.ID, legacy.ID}},
			{"status=ok", nil},
			{"findings=1", nil},
			{"findings=0", []string{modern.ID, legacy.ID}},
			// Server→client sampling requests on legacy; on 2026-07-28 the
			// requests inside MRTR rounds, found by their method too.
			{"method=sampling/createMessage", []string{modern.ID, legacy.ID}},
			{"method=elicitation/create&era=modern", []string{modern.ID}},
			// A method's start finds it: tools finds tools/call.
			{"method=tools", []string{modern.ID, legacy.ID}},
			{"method=sampling&era=legacy", []string{legacy.ID}},
			{"method=tools/callx", nil},
			{"method=tools/call", []string{modern.ID, legacy.ID}},
			{"method=server/discover&era=modern", []string{modern.ID}},
			{"tool=sample_tools", []string{modern.ID, legacy.ID}},
			{"tool=no-such-tool", nil},
			{"q=Paris", []string{modern.ID, legacy.ID}},
			{"q=pArIs+AND+lOnDoN", []string{modern.ID, legacy.ID}},
			{"q=london", []string{modern.ID, legacy.ID}},
			{"q=" + url.QueryEscape(`"city":"Paris"`), []string{modern.ID, legacy.ID}},
			{"q=zz-nothing-like-this", nil},
			{"q=Paris&era=legacy", []string{legacy.ID}},
			{"since=" + future, nil},
			{"until=" + past, nil},
			{"since=" + past + "&until=" + future, []string{modern.ID, legacy.ID}},
			{"label=none", nil},
		} {
			var p sessionsPage
			c.get("/api/v1/sessions?"+tt.query, &p)
			if got := sessionIDs(p); !slices.Equal(got, tt.want) {
				t.Errorf("sessions?%s = %q, want %q", tt.query, got, tt.want)
			}
			if p.Total != len(tt.want) {
				t.Errorf("sessions?%s: total %d, want %d", tt.query, p.Total, len(tt.want))
			}
		}
	})

	t.Run("Sessions/Paging", func(t *testing.T) {
		var p sessionsPage
		c.get("/api/v1/sessions?limit=1", &p)
		if got := sessionIDs(p); !slices.Equal(got, []string{modern.ID}) || !p.More || p.Total != 2 {
			t.Errorf("limit=1: %q more=%v total=%d, want the newest, more, total 2", got, p.More, p.Total)
		}
		c.get("/api/v1/sessions?limit=1&offset=1", &p)
		if got := sessionIDs(p); !slices.Equal(got, []string{legacy.ID}) || p.More {
			t.Errorf("limit=1&offset=1: %q more=%v, want the older, no more", got, p.More)
		}
		c.get("/api/v1/sessions?offset=5", &p)
		if len(p.Sessions) != 0 || p.Total != 2 || p.More {
			t.Errorf("offset past the end: %+v", p)
		}
		// A text search stops once the page is full: the total is unknown.
		c.get("/api/v1/sessions?q=Paris&limit=1", &p)
		if got := sessionIDs(p); !slices.Equal(got, []string{modern.ID}) || !p.More || p.Total != -1 {
			t.Errorf("q=Paris&limit=1: %q more=%v total=%d, want the newest, more, total -1", got, p.More, p.Total)
		}
		for _, bad := range []string{"limit=0", "limit=x", "offset=-1", "status=weird", "era=x", "findings=maybe", "since=yesterday"} {
			code, body, _ := c.do(http.MethodGet, "/api/v1/sessions?"+bad, nil, nil)
			if code != http.StatusBadRequest || !contains(body, `"code":"bad_request"`) {
				t.Errorf("sessions?%s: %d %s, want 400 bad_request", bad, code, body)
			}
		}
	})

	t.Run("Session", func(t *testing.T) {
		var d struct {
			Session sessionRow `json:"session"`
			Methods []string   `json:"methods"`
			Tools   []string   `json:"tools"`
			Replay  struct {
				Command  string `json:"command"`
				Replay   string `json:"replay"`
				CanStart bool   `json:"canStart"`
			} `json:"replay"`
		}
		c.get("/api/v1/sessions/"+esc(legacy.ID), &d)
		if d.Session.ID != legacy.ID || d.Session.Era != "legacy" || d.Session.Calls != legacy.Calls || d.Session.DurationMs <= 0 {
			t.Errorf("session = %+v", d.Session)
		}
		if !slices.Contains(d.Methods, "sampling/createMessage") || !slices.Contains(d.Tools, "sample_tools") {
			t.Errorf("methods %q, tools %q", d.Methods, d.Tools)
		}
		tape := strings.ReplaceAll(legacy.ID, "/", "_") + ".tape.json"
		if want := "mcptape replay server --tape '" + tape + "'"; d.Replay.Replay != want || !strings.HasPrefix(d.Replay.Command, "mcptape export -o '"+tape+"' '"+legacy.ID+"' && ") {
			t.Errorf("replay commands: %q / %q", d.Replay.Command, d.Replay.Replay)
		}
		if d.Replay.CanStart {
			t.Error("canStart without Options.Backend")
		}
		code, body, _ := c.do(http.MethodGet, "/api/v1/sessions/no-such-session", nil, nil)
		if code != http.StatusNotFound || !contains(body, `"code":"not_found"`) {
			t.Errorf("a missing session: %d %s", code, body)
		}
	})

	t.Run("Tree", func(t *testing.T) {
		var tr treeAnswer
		c.get("/api/v1/sessions/"+esc(legacy.ID)+"/tree", &tr)
		call := find(tr.Tree.Roots, func(n *node) bool { return n.Method == "tools/call" && n.Name == "sample_tools" })
		if call == nil || call.Status != "success" {
			t.Fatalf("no successful tools/call sample_tools in the tree: %+v", call)
		}
		var sampling []*node
		for _, ch := range call.Children {
			if ch.Method == "sampling/createMessage" && ch.Kind == "server-request" {
				sampling = append(sampling, ch)
			}
		}
		if len(sampling) != 2 {
			t.Errorf("sample_tools has %d sampling children, want the two of the tool loop", len(sampling))
		}
		// 2026-07-28: the MRTR rounds are one call.
		c.get("/api/v1/sessions/"+esc(modern.ID)+"/tree", &tr)
		mrtr := find(tr.Tree.Roots, func(n *node) bool { return n.Method == "tools/call" && n.Name == "sample" })
		if mrtr == nil || len(mrtr.Rounds) < 2 || mrtr.Status != "success" {
			t.Errorf("modern sample call: %+v, want MRTR rounds", mrtr)
		}
	})

	t.Run("Messages", func(t *testing.T) {
		var page struct {
			Messages []messageRow `json:"messages"`
			More     bool         `json:"more"`
		}
		c.get("/api/v1/sessions/"+esc(legacy.ID)+"/messages", &page)
		if len(page.Messages) != legacy.Messages || page.More {
			t.Fatalf("%d messages more=%v, want %d", len(page.Messages), page.More, legacy.Messages)
		}
		all := page.Messages
		c.get("/api/v1/sessions/"+esc(legacy.ID)+"/messages?limit=10", &page)
		if len(page.Messages) != 10 || !page.More || page.Messages[9].Seq != all[9].Seq {
			t.Errorf("limit=10: %d messages, more=%v", len(page.Messages), page.More)
		}
		c.get(fmt.Sprintf("/api/v1/sessions/%s/messages?after=%d&limit=5", esc(legacy.ID), all[9].Seq), &page)
		if len(page.Messages) != 5 || page.Messages[0].Seq != all[10].Seq {
			t.Errorf("after the 10th: %+v", page.Messages)
		}
		var xs struct {
			Exchanges []capture.Exchange `json:"exchanges"`
		}
		c.get("/api/v1/sessions/"+esc(legacy.ID)+"/exchanges", &xs)
		if len(xs.Exchanges) != legacy.Exchanges {
			t.Errorf("%d exchanges, want %d", len(xs.Exchanges), legacy.Exchanges)
		}

		// A sampling request on the call's SSE stream, and the client's
		// answer, which is a POST of its own.
		var req, answer messageRow
		for _, m := range all {
			if m.Method == "sampling/createMessage" && m.Kind == "request" && req.Seq == 0 {
				req = m
			}
		}
		for _, m := range all {
			if m.Links.Request == req.Seq && m.Kind == "result" {
				answer = m
			}
		}
		var d messageDetail
		c.get(fmt.Sprintf("/api/v1/messages/%d", req.Seq), &d)
		if d.Raw == nil || !strings.Contains(*d.Raw, `"sampling/createMessage"`) || d.Exchange == nil || d.SSE == nil || d.SSE.Events == 0 {
			t.Fatalf("sampling request detail: %+v", d)
		}
		if d.Curl != "" {
			t.Errorf("a server→client message has a curl command: %s", d.Curl)
		}
		if d.Exchange.ResponseHeader.Get("Content-Type") != "text/event-stream" {
			t.Errorf("exchange response headers: %v", d.Exchange.ResponseHeader)
		}
		c.get(fmt.Sprintf("/api/v1/messages/%d", answer.Seq), &d)
		// A client's answer cannot be sent on its own: no command, and a
		// note that says why.
		if d.Curl != "" || !strings.Contains(d.CurlNote, "the server must be waiting for it") {
			t.Errorf("curl of the client's answer: %q, note %q", d.Curl, d.CurlNote)
		}
		if d.RequestSeq != req.Seq || !strings.Contains(d.Request, "\n  \"method\": \"sampling/createMessage\"") {
			t.Errorf("the answer's request: #%d %s", d.RequestSeq, d.Request)
		}
		for _, bad := range []string{"/api/v1/messages/999999", "/api/v1/messages/x", "/api/v1/sessions/nope/messages"} {
			if code, _, _ := c.do(http.MethodGet, bad, nil, nil); code != http.StatusNotFound {
				t.Errorf("GET %s: %d, want 404", bad, code)
			}
		}
	})

	t.Run("Latency", func(t *testing.T) {
		var l struct {
			Methods []struct {
				Method string  `json:"method"`
				N      int     `json:"n"`
				P50    float64 `json:"p50"`
				P99    float64 `json:"p99"`
				Points []struct {
					N int `json:"n"`
				} `json:"points"`
			} `json:"methods"`
			BucketMs float64 `json:"bucketMs"`
		}
		c.get("/api/v1/latency?buckets=10", &l)
		var calls int
		for _, m := range l.Methods {
			if m.P99 < m.P50 || m.P50 < 0 {
				t.Errorf("%s: p50 %v p99 %v", m.Method, m.P50, m.P99)
			}
			n := 0
			for _, p := range m.Points {
				n += p.N
			}
			if n != m.N || len(m.Points) > 10 {
				t.Errorf("%s: points hold %d of %d samples in %d buckets", m.Method, n, m.N, len(m.Points))
			}
			if m.Method == "tools/call" {
				calls = m.N
			}
		}
		if calls < 2*12 || l.BucketMs <= 0 {
			t.Errorf("tools/call latencies: %d samples, bucket %vms", calls, l.BucketMs)
		}
		c.get("/api/v1/latency?method=tools/call&session="+url.QueryEscape(legacy.ID), &l)
		if len(l.Methods) != 1 || l.Methods[0].Method != "tools/call" || l.Methods[0].N >= calls {
			t.Errorf("one session's tools/call: %+v", l.Methods)
		}
		if code, _, _ := c.do(http.MethodGet, "/api/v1/latency?buckets=0", nil, nil); code != http.StatusBadRequest {
			t.Errorf("buckets=0: %d, want 400", code)
		}
		if code, _, _ := c.do(http.MethodGet, "/api/v1/latency?measure=bogus", nil, nil); code != http.StatusBadRequest {
			t.Errorf("measure=bogus: %d, want 400", code)
		}
		// Both measures see every call; by tool, the calls add up.
		var both struct {
			Measure string `json:"measure"`
			Methods []struct {
				Method string `json:"method"`
				N      int    `json:"n"`
			} `json:"methods"`
			Tools []struct {
				Method string  `json:"method"`
				Tool   string  `json:"tool"`
				N      int     `json:"n"`
				P50    float64 `json:"p50"`
			} `json:"tools"`
		}
		for _, measure := range []string{"upstream", "duration"} {
			c.get("/api/v1/latency?measure="+measure, &both)
			if both.Measure != measure {
				t.Errorf("measure=%s answered %q", measure, both.Measure)
			}
			byTool := 0
			for _, x := range both.Tools {
				if x.Method != "tools/call" || x.Tool == "" || x.P50 <= 0 {
					t.Errorf("%s: tool series %+v", measure, x)
				}
				byTool += x.N
			}
			calls := 0
			for _, m := range both.Methods {
				if m.Method == "tools/call" {
					calls = m.N
				}
			}
			if calls < 2*12 || byTool != calls {
				t.Errorf("%s: %d tools/call samples, %d by tool", measure, calls, byTool)
			}
		}
		c.get("/api/v1/latency?tool=echo", &both)
		if len(both.Methods) != 1 || len(both.Tools) != 1 || both.Tools[0].Tool != "echo" || both.Methods[0].N != both.Tools[0].N {
			t.Errorf("tool=echo: %+v %+v", both.Methods, both.Tools)
		}
	})

	t.Run("HAR", func(t *testing.T) {
		code, b, hdr := c.do(http.MethodGet, "/api/v1/sessions/"+esc(legacy.ID)+"/har", nil, nil)
		if code != http.StatusOK || !strings.HasPrefix(hdr.Get("Content-Disposition"), "attachment") {
			t.Fatalf("HAR: %d %v", code, hdr)
		}
		checkHAR(t, b, legacy)
	})

	t.Run("NotWired", func(t *testing.T) {
		for _, tt := range []struct{ method, path string }{
			{http.MethodGet, "/api/v1/sessions/" + esc(legacy.ID) + "/tape"},
			{http.MethodPost, "/api/v1/sessions/" + esc(legacy.ID) + "/replay"},
			{http.MethodPost, "/api/v1/tapes"},
			{http.MethodGet, "/api/v1/profiles"},
		} {
			code, body, _ := c.do(tt.method, tt.path, nil, nil)
			if code != http.StatusNotImplemented || !contains(body, `"code":"unsupported"`) {
				t.Errorf("%s %s without the option: %d %s, want 501", tt.method, tt.path, code, body)
			}
		}
		var i struct {
			Live     string          `json:"live"`
			Features map[string]bool `json:"features"`
		}
		c.get("/api/v1/info", &i)
		if i.Live != "publish" || !i.Features["edit"] || i.Features["export"] || i.Features["startReplay"] {
			t.Errorf("info: %+v", i)
		}
	})
}

// checkHAR checks a HAR file the way Chrome DevTools' importer reads it.
func checkHAR(t *testing.T, b []byte, s *capture.Session) {
	t.Helper()
	var har struct {
		Log struct {
			Version string `json:"version"`
			Creator struct {
				Name string `json:"name"`
			} `json:"creator"`
			Pages []struct {
				ID              string `json:"id"`
				StartedDateTime string `json:"startedDateTime"`
			} `json:"pages"`
			Entries []struct {
				Pageref         string  `json:"pageref"`
				StartedDateTime string  `json:"startedDateTime"`
				Time            float64 `json:"time"`
				Request         struct {
					Method      string `json:"method"`
					URL         string `json:"url"`
					HTTPVersion string `json:"httpVersion"`
					Headers     []struct {
						Name, Value string
					} `json:"headers"`
					PostData *struct {
						MimeType string `json:"mimeType"`
						Text     string `json:"text"`
					} `json:"postData"`
				} `json:"request"`
				Response struct {
					Status  int `json:"status"`
					Content struct {
						Size     int64  `json:"size"`
						MimeType string `json:"mimeType"`
						Text     string `json:"text"`
					} `json:"content"`
					Headers []struct{ Name, Value string } `json:"headers"`
				} `json:"response"`
				Timings struct {
					Send, Wait, Receive float64
				} `json:"timings"`
			} `json:"entries"`
		} `json:"log"`
	}
	if err := json.Unmarshal(b, &har); err != nil {
		t.Fatalf("HAR is not JSON: %v", err)
	}
	l := har.Log
	if l.Version != "1.2" || l.Creator.Name != "mcptape" || len(l.Pages) != 1 || l.Pages[0].ID == "" {
		t.Errorf("HAR log: version %q creator %q pages %+v", l.Version, l.Creator.Name, l.Pages)
	}
	if len(l.Entries) != s.Exchanges {
		t.Errorf("%d entries, want one per exchange (%d)", len(l.Entries), s.Exchanges)
	}
	sse, posts := 0, 0
	for i, e := range l.Entries {
		if _, err := time.Parse(time.RFC3339Nano, e.StartedDateTime); err != nil {
			t.Errorf("entry %d startedDateTime %q: %v", i, e.StartedDateTime, err)
		}
		u, err := url.Parse(e.Request.URL)
		if err != nil || !u.IsAbs() {
			t.Errorf("entry %d url %q is not absolute", i, e.Request.URL)
		}
		if e.Pageref != l.Pages[0].ID || e.Request.HTTPVersion == "" || e.Request.Method == "" {
			t.Errorf("entry %d: %+v", i, e.Request)
		}
		if e.Timings.Send < 0 || e.Timings.Wait < 0 || e.Timings.Receive < 0 {
			t.Errorf("entry %d timings %+v", i, e.Timings)
		}
		if d := e.Time - (e.Timings.Send + e.Timings.Wait + e.Timings.Receive); d > 0.001 || d < -0.001 {
			t.Errorf("entry %d time %v is not the sum of its timings %+v", i, e.Time, e.Timings)
		}
		if e.Response.Content.MimeType == "text/event-stream" {
			sse++
			if !strings.Contains(e.Response.Content.Text, "data: {") || int64(len(e.Response.Content.Text)) != e.Response.Content.Size {
				t.Errorf("entry %d: SSE body %q", i, e.Response.Content.Text[:min(200, len(e.Response.Content.Text))])
			}
		}
		if e.Request.Method == http.MethodPost {
			posts++
			if e.Request.PostData == nil || !json.Valid([]byte(e.Request.PostData.Text)) {
				t.Errorf("entry %d: POST without its JSON body: %+v", i, e.Request.PostData)
			}
		}
	}
	if sse == 0 || posts == 0 {
		t.Errorf("%d SSE responses and %d POSTs in the HAR", sse, posts)
	}
}

// TestAPIEdits covers the changes: edits, labels, delete.
func TestAPIEdits(t *testing.T) {
	r := newRig(t, nil)
	r.runClient(t, fixtures.PathStateful, fixtures.ToolEcho)
	s := r.sessionOn(t, fixtures.PathStateful)
	c := newAPIClient(t, r.srv.URL)
	var echo *capture.Message
	for m, err := range r.store.Messages(context.Background(), s.ID, capture.MessageQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		if m.Kind == protocol.KindResult && bytes.Contains(m.Raw, []byte("hello, tape")) {
			echo = m
		}
	}
	if echo == nil {
		t.Fatal("no echo result recorded")
	}
	path := fmt.Sprintf("/api/v1/messages/%d/edits", echo.Seq)

	// Refused: not JSON, not a string, unknown fields.
	for _, body := range []any{
		map[string]any{"raw": `{"jsonrpc":"2.0",`},
		map[string]any{"raw": map[string]any{"a": 1}},
		map[string]any{"raw": `{}`, "extra": 1},
		map[string]any{"note": "no raw"},
	} {
		code, b, _ := c.do(http.MethodPost, path, body, nil)
		if code != http.StatusBadRequest {
			t.Errorf("edit %v: %d %s, want 400", body, code, b)
		}
	}
	code, b, _ := c.do(http.MethodPost, path, map[string]any{"raw": "{\n  \"a\": 1,\n  \"b\": ]\n}"}, nil)
	if code != http.StatusBadRequest || !contains(b, "not valid JSON") || !contains(b, "line 3") {
		t.Errorf("invalid edit: %d %s, want 400 naming the line", code, b)
	}

	edited := `{"jsonrpc":"2.0","id":` + string(echo.ID) + `,"result":{"content":[{"type":"text","text":"edited by the test"}]}}`
	var res struct {
		Version int        `json:"version"`
		Message messageRow `json:"message"`
	}
	c.send(http.MethodPost, path, map[string]any{"raw": edited, "note": "for the bug report"}, &res)
	if res.Version != 1 || res.Message.Edited != 1 || res.Message.Size != len(edited) {
		t.Errorf("first edit: %+v", res)
	}
	var d messageDetail
	c.get(fmt.Sprintf("/api/v1/messages/%d", echo.Seq), &d)
	if d.Raw == nil || *d.Raw != edited || d.Message.Edited != 1 {
		t.Errorf("after the edit: raw %v edited %d", d.Raw, d.Message.Edited)
	}
	var edits struct {
		Edits []struct {
			Version int     `json:"version"`
			Note    string  `json:"note"`
			Raw     *string `json:"raw"`
		} `json:"edits"`
	}
	c.get(path, &edits)
	if len(edits.Edits) != 2 || *edits.Edits[0].Raw != string(echo.Raw) || edits.Edits[1].Note != "for the bug report" {
		t.Errorf("versions: %+v", edits.Edits)
	}
	var tr treeAnswer
	c.get("/api/v1/sessions/"+esc(s.ID)+"/tree", &tr)
	if tr.Edited[strconv.FormatUint(echo.Seq, 10)] != 1 {
		t.Errorf("tree edited = %v, want message %d", tr.Edited, echo.Seq)
	}
	if n := find(tr.Tree.Roots, func(n *node) bool { return n.Response == echo.Seq }); n == nil {
		t.Error("the edited response is not in the tree")
	}

	// Labels: trimmed, deduplicated, empty ones dropped; they filter.
	var l struct {
		Labels []string `json:"labels"`
	}
	c.send(http.MethodPut, "/api/v1/sessions/"+esc(s.ID)+"/labels", map[string]any{"labels": []string{" bug-7 ", "", "fixture", "bug-7"}}, &l)
	if !slices.Equal(l.Labels, []string{"bug-7", "fixture"}) {
		t.Errorf("labels = %q", l.Labels)
	}
	var p sessionsPage
	c.get("/api/v1/sessions?label=bug-7", &p)
	if len(p.Sessions) != 1 || !slices.Equal(p.Sessions[0].Labels, []string{"bug-7", "fixture"}) {
		t.Errorf("label filter: %+v", p)
	}
	// The recorder writing the session again keeps them.
	r.runClient(t, fixtures.PathStateful, fixtures.ToolEcho)
	c.get("/api/v1/sessions?label=bug-7", &p)
	if len(p.Sessions) != 1 || p.Sessions[0].ID != s.ID {
		t.Errorf("after more recording: %+v", p)
	}
	code, b, _ = c.do(http.MethodPut, "/api/v1/sessions/"+esc(s.ID)+"/labels", map[string]any{"labels": []string{strings.Repeat("x", 65)}}, nil)
	if code != http.StatusBadRequest {
		t.Errorf("a 65-character label: %d %s", code, b)
	}

	// Delete.
	code, _, _ = c.do(http.MethodDelete, "/api/v1/sessions/"+esc(s.ID), nil, nil)
	if code != http.StatusNoContent {
		t.Fatalf("delete: %d", code)
	}
	if code, _, _ = c.do(http.MethodGet, "/api/v1/sessions/"+esc(s.ID), nil, nil); code != http.StatusNotFound {
		t.Errorf("after delete: %d, want 404", code)
	}
	if code, _, _ = c.do(http.MethodDelete, "/api/v1/sessions/"+esc(s.ID), nil, nil); code != http.StatusNotFound {
		t.Errorf("deleting again: %d, want 404", code)
	}
}

// tapeOptions wires tapes and replay the way cmd/mcptape does; started
// collects the sessions a replay server was started for.
func tapeOptions(started *[]string) *dashboard.Options {
	return &dashboard.Options{
		DataDir: "/data dir",
		Backend: &testBackend{start: func(ctx context.Context, id string) (string, error) {
			*started = append(*started, id)
			return "http://127.0.0.1:1/mcp", nil
		}},
	}
}

func TestAPITapes(t *testing.T) {
	var started []string
	r := newRig(t, tapeOptions(&started))
	r.runClient(t, fixtures.PathStateful, fixtures.ToolEcho, fixtures.ToolSample)
	s := r.sessionOn(t, fixtures.PathStateful)
	r.settle(t, s.ID)
	c := newAPIClient(t, r.srv.URL)

	code, tape, hdr := c.do(http.MethodGet, "/api/v1/sessions/"+esc(s.ID)+"/tape", nil, nil)
	if code != http.StatusOK || hdr.Get("Content-Disposition") != `attachment; filename="`+s.ID+`.tape.json"` {
		t.Fatalf("export: %d %v", code, hdr)
	}
	if !bytes.HasPrefix(tape, []byte(`{"format":"mcptape-tape"`)) {
		t.Fatalf("export: not a tape: %.100s", tape)
	}

	// Into another store, and into this one (a second copy, renamed).
	other, err := dashboard.New(memstore.New(), tapeOptions(&started))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for _, tt := range []struct {
		name string
		base string
		want string
	}{
		{"empty store", serve(t, other), s.ID},
		{"same store", r.srv.URL, s.ID + "-2"},
	} {
		oc := newAPIClient(t, tt.base)
		var res struct {
			Sessions []string `json:"sessions"`
		}
		oc.send(http.MethodPost, "/api/v1/tapes", tape, &res)
		if !slices.Equal(res.Sessions, []string{tt.want}) {
			t.Errorf("%s: imported %q, want %q", tt.name, res.Sessions, tt.want)
		}
		var tr treeAnswer
		oc.get("/api/v1/sessions/"+esc(tt.want)+"/tree", &tr)
		if find(tr.Tree.Roots, func(n *node) bool { return n.Method == "sampling/createMessage" }) == nil {
			t.Errorf("%s: the imported session has no sampling node", tt.name)
		}
	}
	code, b, _ := c.do(http.MethodPost, "/api/v1/tapes", []byte(`{"format":"something-else"}`), nil)
	if code != http.StatusBadRequest || !contains(b, "importing the tape") {
		t.Errorf("a bad tape: %d %s", code, b)
	}

	// The replay command, and the button's hook.
	var info struct {
		Export   string `json:"export"`
		CanStart bool   `json:"canStart"`
	}
	c.get("/api/v1/sessions/"+esc(s.ID)+"/replay", &info)
	if !info.CanStart || info.Export != "mcptape export --data '/data dir' -o '"+s.ID+".tape.json' '"+s.ID+"'" {
		t.Errorf("replay info: %+v", info)
	}
	var res struct {
		URL string `json:"url"`
	}
	c.send(http.MethodPost, "/api/v1/sessions/"+esc(s.ID)+"/replay", nil, &res)
	if res.URL != "http://127.0.0.1:1/mcp" || !slices.Equal(started, []string{s.ID}) {
		t.Errorf("start replay: %+v, started %q", res, started)
	}
}

// serve serves a dashboard on a loopback test server.
func serve(t testing.TB, d *dashboard.Server) string {
	srv := newTestServer(d)
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	knowToken(t, srv.URL, d.Token())
	return srv.URL
}

// TestAPIRelated: the endpoints behind the message page's links answer
// what does not exist with a 404 that says what is missing.
func TestAPIRelated(t *testing.T) {
	r := newRig(t, nil)
	r.runClient(t, fixtures.PathStateless, fixtures.ToolSample)
	s := r.sessionOn(t, fixtures.PathStateless)
	r.settle(t, s.ID)
	c := newAPIClient(t, r.srv.URL)
	var round uint64
	for m, err := range r.store.Messages(context.Background(), s.ID, capture.MessageQuery{}) {
		if err == nil && m.Kind == protocol.KindResult && strings.Contains(string(m.Raw), `"input_required"`) {
			round = m.Seq
		}
	}
	if round == 0 {
		t.Fatal("no input_required result recorded")
	}
	var in struct {
		Key    string          `json:"key"`
		Method string          `json:"method"`
		Retry  uint64          `json:"retry"`
		Answer json.RawMessage `json:"answer"`
	}
	c.get(fmt.Sprintf("/api/v1/messages/%d/inputs/sample", round), &in)
	if in.Method != protocol.MethodSampling || in.Retry == 0 || !strings.Contains(string(in.Answer), `"model"`) {
		t.Errorf("the input request: %+v", in)
	}
	for path, says := range map[string]string{
		fmt.Sprintf("/api/v1/messages/%d/inputs/nope", round): `asks for no input named \"nope\"`,
		fmt.Sprintf("/api/v1/messages/%d/inputs/x", round-1):  "is not an input_required result",
		"/api/v1/exchanges/999999":                            "No exchange 999999 in this store",
	} {
		code, body, _ := c.do(http.MethodGet, path, nil, nil)
		if code != http.StatusNotFound || !contains(body, says) {
			t.Errorf("GET %s: %d %s, want 404 saying %q", path, code, body, says)
		}
	}
}
