package capture

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mcptape/mcptape/protocol"
)

// HAR 1.2 (http://www.softwareishard.com/blog/har-12-spec/), as browsers'
// developer tools import it (the dashboard's HAR download and `mcptape
// export --format har` share it): one page per session, one entry per exchange, SSE
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

func harMs(d time.Duration) float64 {
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

// harBody rebuilds an HTTP body from the messages one side sent in an
// exchange: the stream of SSE blocks, or the JSON message (a batch
// between brackets).
func harBody(ms []*Message, kind BodyKind) []byte {
	var b bytes.Buffer
	if kind == BodySSE {
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

func harMime(h http.Header, kind BodyKind) string {
	if ct := h.Get("Content-Type"); ct != "" {
		return ct
	}
	switch kind {
	case BodyJSON:
		return "application/json"
	case BodySSE:
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

// WriteHAR writes sessions as one HAR 1.2 log: a page per session, an entry
// per exchange in the session's order. version is the creator's version
// (mcptape's).
func WriteHAR(ctx context.Context, store Reader, w io.Writer, sessions []*Session, version string) error {
	f := harFile{Log: harLog{
		Version: "1.2",
		Creator: harCreator{Name: "mcptape", Version: version},
		Pages:   []harPage{},
		Entries: []harEntry{},
		Comment: "Recorded by mcptape; secrets were redacted at record time.",
	}}
	for i, x := range sessions {
		if err := harSession(ctx, store, &f.Log, x, fmt.Sprintf("page_%d", i+1)); err != nil {
			return err
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(f)
}

// harSession adds session x to l as page id with its exchanges.
func harSession(ctx context.Context, store Reader, l *harLog, x *Session, page string) error {
	byX := map[uint64][2][]*Message{}
	for m, err := range store.Messages(ctx, x.ID, MessageQuery{}) {
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
	l.Pages = append(l.Pages, harPage{StartedDateTime: harTime(x.Start), ID: page, Title: title,
		PageTimings: harPageTimings{OnContentLoad: -1, OnLoad: -1}})
	for e, err := range store.Exchanges(ctx, x.ID) {
		if err != nil {
			return err
		}
		l.Entries = append(l.Entries, harEntryOf(base, page, e, byX[e.ID]))
	}
	return nil
}

// harEntryOf is exchange e of a session whose upstream is base, with the
// messages each side sent in it.
func harEntryOf(base, page string, e *Exchange, sides [2][]*Message) harEntry {
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
	if e.RequestBody != BodyEmpty || len(sides[0]) > 0 {
		text, _ := harText(harBody(sides[0], e.RequestBody))
		req.PostData = &harPostData{MimeType: harMime(e.RequestHeader, e.RequestBody), Text: text}
	}
	resp := harResponse{Status: e.Status, StatusText: http.StatusText(e.Status), HTTPVersion: "HTTP/1.1",
		Cookies: []harNV{}, Headers: harHeaders(e.ResponseHeader), RedirectURL: e.ResponseHeader.Get("Location"),
		HeadersSize: -1, BodySize: e.ResponseBytes}
	rb := harBody(sides[1], e.ResponseBody)
	resp.Content = harContent{Size: int64(len(rb)), MimeType: harMime(e.ResponseHeader, e.ResponseBody)}
	resp.Content.Text, resp.Content.Encoding = harText(rb)
	if e.ResponseBody == BodySSE {
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
	t := harTimings{Blocked: -1, DNS: -1, Connect: -1, Send: 0, Wait: harMs(wait), Receive: harMs(receive), SSL: -1}
	entry := harEntry{Pageref: page, StartedDateTime: harTime(e.Start), Time: t.Send + t.Wait + t.Receive,
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
	return entry
}
