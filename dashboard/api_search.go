package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// Search and addresses:
//
//	GET /api/v1/search?q=TEXT&limit=N        messages whose content holds TEXT, newest sessions first
//	GET /api/v1/sessions/{id}/search?q=TEXT  the seqs of the session's messages that hold TEXT
//
// A session's address may name it by the start of its id (as `mcptape
// show` does): /sessions/01JX… opens the one session whose id starts so.

// minPrefix is the shortest start of an id that names a session.
const minPrefix = 4

// errAmbiguous is a prefix that names more than one session.
var errAmbiguous = errors.New("more than one session")

// sessionByID is the session id names, or the one session whose id
// starts with it.
func (s *Server) sessionByID(ctx context.Context, id string) (*capture.Session, error) {
	x, err := s.store.Session(ctx, id)
	if !errors.Is(err, capture.ErrNotFound) || utf8.RuneCountInString(id) < minPrefix {
		return x, err
	}
	var found *capture.Session
	var others []string
	for y, err := range s.store.Sessions(ctx, capture.SessionQuery{}) {
		if err != nil {
			return nil, err
		}
		if !strings.HasPrefix(y.ID, id) {
			continue
		}
		if found != nil {
			others = append(others, y.ID)
			if len(others) >= 3 {
				break
			}
			continue
		}
		found = y
	}
	switch {
	case found == nil:
		return nil, fmt.Errorf("session %q: %w", id, capture.ErrNotFound)
	case len(others) > 0:
		return nil, fmt.Errorf("%w: %q starts %s, %s…; give more of the id", errAmbiguous, id, found.ID, strings.Join(others, ", "))
	}
	return found, nil
}

// sessionVar is the session the request's {id} names (by its start, too),
// or false once it has answered why there is none.
func (s *Server) sessionVar(w http.ResponseWriter, r *http.Request) (*capture.Session, bool) {
	x, err := s.sessionByID(r.Context(), pathVar(r, "id"))
	if errors.Is(err, errAmbiguous) {
		writeError(w, http.StatusNotFound, "More than one session: "+strings.TrimPrefix(err.Error(), errAmbiguous.Error()+": "), "not_found")
		return nil, false
	}
	if err != nil {
		storeError(w, err)
		return nil, false
	}
	return x, true
}

// notFoundText reads what a store's ErrNotFound names ("badgerstore:
// session "x": not found") as a sentence for a person.
var notFoundText = regexp.MustCompile(`^(?:[a-z]+store: )?(session|message|exchange) (.*?): `)

func notFoundMessage(err error) string {
	if m := notFoundText.FindStringSubmatch(err.Error()); m != nil {
		hint := ""
		if m[1] == "session" {
			hint = " The Sessions page lists every session."
		}
		return fmt.Sprintf("No %s %s in this store: it was deleted, or the address is mistyped.%s", m[1], m[2], hint)
	}
	return "Not found in this store: it was deleted, or the address is mistyped."
}

// Bounds of a search.
const (
	maxSessionHits = 2000
	defaultHits    = 50
	maxHits        = 200
	maxSnippet     = 160
)

// apiSessionSearch is GET /api/v1/sessions/{id}/search?q=TEXT: the seqs of
// the session's messages whose content (params, results, errors, stderr)
// holds TEXT, without regard to case; more says it stopped at the bound.
func (s *Server) apiSessionSearch(w http.ResponseWriter, r *http.Request) {
	x, ok := s.sessionVar(w, r)
	if !ok {
		return
	}
	text := []byte(strings.TrimSpace(r.URL.Query().Get("q")))
	out := struct {
		Seqs []uint64 `json:"seqs"`
		More bool     `json:"more"`
	}{Seqs: []uint64{}}
	if len(text) > 0 {
		for m, err := range s.store.Messages(r.Context(), x.ID, capture.MessageQuery{}) {
			if err != nil {
				storeError(w, err)
				return
			}
			if m.Kind == protocol.KindFrame || !containsFold(m.Raw, text) {
				continue
			}
			if len(out.Seqs) == maxSessionHits {
				out.More = true
				break
			}
			out.Seqs = append(out.Seqs, m.Seq)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// messageHit is one message a search across sessions found.
type messageHit struct {
	Session string    `json:"session"`
	Client  string    `json:"client,omitempty"`
	Seq     uint64    `json:"seq"`
	Dir     string    `json:"dir"`
	Kind    string    `json:"kind"`
	Method  string    `json:"method,omitempty"`
	Name    string    `json:"name,omitempty"`
	Time    time.Time `json:"time"`
	// Snippet is the text around the first match, cut at both ends.
	Snippet string `json:"snippet"`
}

// apiSearch is GET /api/v1/search?q=TEXT&limit=N: the messages whose
// content holds TEXT, the newest sessions first, at most limit (50 by
// default, 200 at most); more says there are others.
func (s *Server) apiSearch(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	text := strings.TrimSpace(q.Get("q"))
	if text == "" {
		badRequest(w, "say what to search for: ?q=TEXT")
		return
	}
	limit := defaultHits
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			badRequest(w, "limit: want a positive number")
			return
		}
		limit = min(n, maxHits)
	}
	out := struct {
		Messages []messageHit `json:"messages"`
		More     bool         `json:"more"`
	}{Messages: []messageHit{}}
	ctx := r.Context()
	needle := []byte(text)
sessions:
	for x, err := range s.store.Sessions(ctx, capture.SessionQuery{}) {
		if err != nil {
			storeError(w, err)
			return
		}
		for m, err := range s.store.Messages(ctx, x.ID, capture.MessageQuery{}) {
			if err != nil {
				storeError(w, err)
				return
			}
			if m.Kind == protocol.KindFrame || !containsFold(m.Raw, needle) {
				continue
			}
			if len(out.Messages) == limit {
				out.More = true
				break sessions
			}
			out.Messages = append(out.Messages, messageHit{Session: x.ID, Client: x.Client.String(), Seq: m.Seq,
				Dir: m.Direction.String(), Kind: m.Kind.String(), Method: m.Method, Name: m.Name, Time: m.Time,
				Snippet: snippet(m.Raw, needle)})
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// snippet is the text of raw around the first match of needle, cut to
// maxSnippet characters, with … where it was cut.
func snippet(raw, needle []byte) string {
	i := indexFold(raw, needle)
	if i < 0 {
		i = 0
	}
	from := max(0, i-maxSnippet/2)
	to := min(len(raw), from+maxSnippet)
	// Whole characters only.
	for from > 0 && !utf8.RuneStart(raw[from]) {
		from--
	}
	for to < len(raw) && !utf8.RuneStart(raw[to]) {
		to++
	}
	out := strings.ToValidUTF8(string(raw[from:to]), "�")
	if from > 0 {
		out = "…" + out
	}
	if to < len(raw) {
		out += "…"
	}
	return out
}

// indexFold is the index of needle in hay, ASCII letters compared without
// case; -1 when it is not there.
func indexFold(hay, needle []byte) int {
	if len(needle) == 0 {
		return 0
	}
	for i := 0; i+len(needle) <= len(hay); i++ {
		j := 0
		for j < len(needle) && lower(hay[i+j]) == lower(needle[j]) {
			j++
		}
		if j == len(needle) {
			return i
		}
	}
	return -1
}

// stderrLine is one line a stdio server wrote to its standard error.
type stderrLine struct {
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`
	Text string    `json:"text"`
}

// maxStderr bounds the stderr lines the session page gets: the last ones.
const maxStderr = 500

// stderrOf picks a session's stderr lines out of its messages: the last
// maxStderr, and how many earlier ones there were.
func stderrOf(msgs []*capture.Message) ([]stderrLine, int) {
	var lines []stderrLine
	more := 0
	for _, m := range msgs {
		if m.Kind != protocol.KindStderr {
			continue
		}
		if len(lines) == maxStderr {
			copy(lines, lines[1:])
			lines = lines[:maxStderr-1]
			more++
		}
		lines = append(lines, stderrLine{Seq: m.Seq, Time: m.Time, Text: strings.ToValidUTF8(strings.TrimRight(string(m.Raw), "\r\n"), "�")})
	}
	return lines, more
}
