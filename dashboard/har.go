package dashboard

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// HAR 1.2 (http://www.softwareishard.com/blog/har-12-spec/), as Chrome
// DevTools imports it: one page per session, one entry per exchange, SSE
// bodies as the text of the stream, timings from the recorded start, first
// byte and end. Fields starting with _ are custom (allowed by the spec).

type harFile struct {
	Log harLog `json:"log"`
}

type harLog struct {
	Version string     `json:"version"`
	Creator harCreator `json:"creator"`
	Pages   []harPage  `json:"pages"`
	Entries []harEntry `json:"entries"`
	Comment string     `json:"comment,omitempty"`
}

type harCreator struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

type harPage struct {
	StartedDateTime string         `json:"startedDateTime"`
	ID              string         `json:"id"`
	Title           string         `json:"title"`
	PageTimings     harPageTimings `json:"pageTimings"`
}

type harPageTimings struct {
	OnContentLoad float64 `json:"onContentLoad"`
	OnLoad        float64 `json:"onLoad"`
}

type harEntry struct {
	Pageref         string      `json:"pageref"`
	StartedDateTime string      `json:"startedDateTime"`
	Time            float64     `json:"time"`
	Request         harRequest  `json:"request"`
	Response        harResponse `json:"response"`
	Cache           struct{}    `json:"cache"`
	Timings         harTimings  `json:"timings"`
	Comment         string      `json:"comment,omitempty"`
	ResourceType    string      `json:"_resourceType"`
}

type harNV struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type harRequest struct {
	Method      string       `json:"method"`
	URL         string       `json:"url"`
	HTTPVersion string       `json:"httpVersion"`
	Cookies     []harNV      `json:"cookies"`
	Headers     []harNV      `json:"headers"`
	QueryString []harNV      `json:"queryString"`
	PostData    *harPostData `json:"postData,omitempty"`
	HeadersSize int          `json:"headersSize"`
	BodySize    int64        `json:"bodySize"`
}

type harPostData struct {
	MimeType string `json:"mimeType"`
	Text     string `json:"text"`
}

type harResponse struct {
	Status      int        `json:"status"`
	StatusText  string     `json:"statusText"`
	HTTPVersion string     `json:"httpVersion"`
	Cookies     []harNV    `json:"cookies"`
	Headers     []harNV    `json:"headers"`
	Content     harContent `json:"content"`
	RedirectURL string     `json:"redirectURL"`
	HeadersSize int        `json:"headersSize"`
	BodySize    int64      `json:"bodySize"`
}

type harContent struct {
	Size     int64  `json:"size"`
	MimeType string `json:"mimeType"`
	Text     string `json:"text,omitempty"`
	Encoding string `json:"encoding,omitempty"`
	Comment  string `json:"comment,omitempty"`
}

type harTimings struct {
	Blocked float64 `json:"blocked"`
	DNS     float64 `json:"dns"`
	Connect float64 `json:"connect"`
	Send    float64 `json:"send"`
	Wait    float64 `json:"wait"`
	Receive float64 `json:"receive"`
	SSL     float64 `json:"ssl"`
}

func harTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

func ms(d time.Duration) float64 {
	if d < 0 {
		return 0
	}
	return float64(d.Microseconds()) / 1000
}

func harHeaders(h http.Header) []harNV {
	out := []harNV{}
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		for _, v := range h[k] {
			out = append(out, harNV{k, v})
		}
	}
	return out
}

// body rebuilds an HTTP body from the messages one side sent in an
// exchange: the stream of SSE blocks, or the JSON message (a batch
// between brackets).
func body(ms []*capture.Message, kind capture.BodyKind) []byte {
	var b bytes.Buffer
	if kind == capture.BodySSE {
		for _, m := range ms {
			switch {
			case m.SSE != nil && len(m.SSE.Whole) > 0:
				b.Write(m.SSE.Whole)
			case m.SSE != nil && m.Batch > 0:
				// Inside a batch's block, written whole with the first.
			case m.SSE != nil:
				b.Write(m.SSE.Prefix)
				b.Write(m.Raw)
				b.Write(m.SSE.Suffix)
			case m.Kind == protocol.KindFrame:
				b.Write(m.Raw)
			default:
				b.WriteString("data: ")
				b.Write(m.Raw)
				b.WriteString("\n\n")
			}
		}
		return b.Bytes()
	}
	if len(ms) == 1 && ms[0].Batch < 0 {
		return ms[0].Raw
	}
	batch := len(ms) > 0 && ms[0].Batch >= 0
	if batch {
		b.WriteByte('[')
	}
	for i, m := range ms {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(m.Raw)
	}
	if batch {
		b.WriteByte(']')
	}
	return b.Bytes()
}

func mimeOf(h http.Header, kind capture.BodyKind) string {
	if ct := h.Get("Content-Type"); ct != "" {
		return ct
	}
	switch kind {
	case capture.BodyJSON:
		return "application/json"
	case capture.BodySSE:
		return "text/event-stream"
	}
	return "application/octet-stream"
}

func harText(b []byte) (text, encoding string) {
	if utf8.Valid(b) {
		return string(b), ""
	}
	return base64.StdEncoding.EncodeToString(b), "base64"
}

// writeHAR writes session id's exchanges as a HAR 1.2 log.
func (s *Server) writeHAR(ctx context.Context, w io.Writer, x *capture.Session) error {
	byX := map[uint64][2][]*capture.Message{}
	for m, err := range s.store.Messages(ctx, x.ID, capture.MessageQuery{}) {
		if err != nil {
			return err
		}
		sides := byX[m.ExchangeID]
		i := 0
		if m.Direction == protocol.ServerToClient {
			i = 1
		}
		sides[i] = append(sides[i], m)
		byX[m.ExchangeID] = sides
	}
	base := strings.TrimRight(x.Upstream, "/")
	if base == "" {
		base = "http://upstream.invalid"
	}
	title := "mcptape session " + x.ID
	if c := x.Client.String(); c != "" {
		title += " · " + c
	}
	if sv := x.Server.String(); sv != "" {
		title += " → " + sv
	}
	f := harFile{Log: harLog{
		Version: "1.2",
		Creator: harCreator{Name: "mcptape", Version: s.opts.Version},
		Pages: []harPage{{StartedDateTime: harTime(x.Start), ID: "page_1", Title: title,
			PageTimings: harPageTimings{OnContentLoad: -1, OnLoad: -1}}},
		Entries: []harEntry{},
		Comment: "Recorded by mcptape; secrets were redacted at record time.",
	}}
	for e, err := range s.store.Exchanges(ctx, x.ID) {
		if err != nil {
			return err
		}
		sides := byX[e.ID]
		full := base + e.URL
		req := harRequest{Method: e.Method, URL: full, HTTPVersion: "HTTP/1.1", Cookies: []harNV{},
			Headers: harHeaders(e.RequestHeader), QueryString: []harNV{}, HeadersSize: -1, BodySize: e.RequestBytes}
		if u, err := url.Parse(full); err == nil {
			for k, vs := range u.Query() {
				for _, v := range vs {
					req.QueryString = append(req.QueryString, harNV{k, v})
				}
			}
			slices.SortFunc(req.QueryString, func(a, b harNV) int { return strings.Compare(a.Name, b.Name) })
		}
		if e.RequestBody != capture.BodyEmpty || len(sides[0]) > 0 {
			text, _ := harText(body(sides[0], e.RequestBody))
			req.PostData = &harPostData{MimeType: mimeOf(e.RequestHeader, e.RequestBody), Text: text}
		}
		resp := harResponse{Status: e.Status, StatusText: http.StatusText(e.Status), HTTPVersion: "HTTP/1.1",
			Cookies: []harNV{}, Headers: harHeaders(e.ResponseHeader), RedirectURL: e.ResponseHeader.Get("Location"),
			HeadersSize: -1, BodySize: e.ResponseBytes}
		rb := body(sides[1], e.ResponseBody)
		resp.Content = harContent{Size: int64(len(rb)), MimeType: mimeOf(e.ResponseHeader, e.ResponseBody)}
		resp.Content.Text, resp.Content.Encoding = harText(rb)
		if e.ResponseBody == capture.BodySSE {
			resp.Content.Comment = "the SSE stream as recorded"
		}
		var wait, receive time.Duration
		end := e.End
		if end.IsZero() {
			end = e.Start
		}
		if !e.FirstByte.IsZero() {
			wait, receive = e.FirstByte.Sub(e.Start), end.Sub(e.FirstByte)
		} else {
			wait = end.Sub(e.Start)
		}
		t := harTimings{Blocked: -1, DNS: -1, Connect: -1, Send: 0, Wait: ms(wait), Receive: ms(receive), SSL: -1}
		entry := harEntry{Pageref: "page_1", StartedDateTime: harTime(e.Start), Time: t.Send + t.Wait + t.Receive,
			Request: req, Response: resp, Timings: t, ResourceType: "fetch"}
		var notes []string
		if e.Aborted {
			notes = append(notes, "aborted")
		}
		if e.Truncated {
			notes = append(notes, "truncated")
		}
		if e.Synthesized {
			notes = append(notes, "answered by the proxy")
		}
		if e.Error != "" {
			notes = append(notes, e.Error)
		}
		entry.Comment = strings.Join(notes, "; ")
		f.Log.Entries = append(f.Log.Entries, entry)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(f)
}

// apiExportHAR is GET /api/v1/sessions/{id}/har.
func (s *Server) apiExportHAR(w http.ResponseWriter, r *http.Request) {
	x, err := s.store.Session(r.Context(), pathVar(r, "id"))
	if err != nil {
		storeError(w, err)
		return
	}
	var b bytes.Buffer
	if err := s.writeHAR(r.Context(), &b, x); err != nil {
		storeError(w, err)
		return
	}
	download(w, strings.TrimSuffix(tapeName(x.ID), ".tape.json")+".har", "application/json")
	_, _ = w.Write(b.Bytes())
}
