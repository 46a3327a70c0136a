// Package remotestore reads a capture.Store that another process holds open.
//
// Badger allows one process per directory, so while `mcptape record` runs,
// `mcptape ls` and `mcptape show` cannot open the store themselves. The
// recorder serves [Handler] on a loopback port, guarded by a random token,
// and announces both in a file in the data directory ([WriteAnnouncement]);
// the CLI finds it with [Discover] and reads through [Client], which
// implements the read side of capture.Store.
//
// # API
//
// All endpoints are GET, answer JSON, and need `Authorization: Bearer TOKEN`.
// Lists are newline-delimited JSON, streamed:
//
//	/v1/sessions?limit=N&since=RFC3339&until=RFC3339   one Session per line
//	/v1/sessions/{id}                                  a Session
//	/v1/sessions/{id}/exchanges                        one Exchange per line
//	/v1/sessions/{id}/messages?after=SEQ&limit=N&raw=0 one Message per line
//	/v1/exchanges/{id}                                 an Exchange
//	/v1/messages/{seq}                                 a Message
//	/v1/lastids                                        {"seq":N,"exchange":N}
//	/v1/status                                         the recorder's Status
//
// Errors are {"error": "..."} with 404 for capture.ErrNotFound.
package remotestore

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/mcptape/mcptape/capture"
)

// ErrReadOnly is returned by the client's write methods.
var ErrReadOnly = errors.New("remotestore: the running recorder's store is read-only from here")

// Status is what the recording process reports about itself.
type Status struct {
	PID      int           `json:"pid"`
	Listen   string        `json:"listen"`
	Upstream string        `json:"upstream"`
	Started  time.Time     `json:"started"`
	Stats    capture.Stats `json:"stats"`
}

// Handler serves store read-only at /v1/… for clients holding token.
// status, if not nil, answers /v1/status.
func Handler(store capture.Store, token string, status func() Status) http.Handler {
	mux := http.NewServeMux()
	h := &handler{store: store}
	mux.HandleFunc("GET /v1/sessions", h.sessions)
	mux.HandleFunc("GET /v1/sessions/{id}", h.session)
	mux.HandleFunc("GET /v1/sessions/{id}/exchanges", h.exchanges)
	mux.HandleFunc("GET /v1/sessions/{id}/messages", h.messages)
	mux.HandleFunc("GET /v1/exchanges/{id}", h.exchange)
	mux.HandleFunc("GET /v1/messages/{seq}", h.message)
	mux.HandleFunc("GET /v1/lastids", h.lastIDs)
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {
		if status == nil {
			writeErr(w, http.StatusNotFound, errors.New("no status"))
			return
		}
		writeJSON(w, status())
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		if subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
			writeErr(w, http.StatusUnauthorized, errors.New("missing or wrong token"))
			return
		}
		mux.ServeHTTP(w, r)
	})
}

type handler struct{ store capture.Store }

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, code int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
}

func storeErr(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	if errors.Is(err, capture.ErrNotFound) {
		code = http.StatusNotFound
	}
	writeErr(w, code, err)
}

func stream[T any](w http.ResponseWriter, seq iter.Seq2[T, error]) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	enc := json.NewEncoder(w)
	for v, err := range seq {
		if err != nil {
			// Headers are gone; a final error line tells the client.
			_ = enc.Encode(map[string]string{"error": err.Error()})
			return
		}
		if enc.Encode(v) != nil {
			return
		}
	}
}

func (h *handler) sessions(w http.ResponseWriter, r *http.Request) {
	var q capture.SessionQuery
	v := r.URL.Query()
	q.Limit, _ = strconv.Atoi(v.Get("limit"))
	q.Since, _ = time.Parse(time.RFC3339Nano, v.Get("since"))
	q.Until, _ = time.Parse(time.RFC3339Nano, v.Get("until"))
	stream(w, h.store.Sessions(r.Context(), q))
}

func (h *handler) session(w http.ResponseWriter, r *http.Request) {
	s, err := h.store.Session(r.Context(), r.PathValue("id"))
	if err != nil {
		storeErr(w, err)
		return
	}
	writeJSON(w, s)
}

func (h *handler) exchanges(w http.ResponseWriter, r *http.Request) {
	stream(w, h.store.Exchanges(r.Context(), r.PathValue("id")))
}

func (h *handler) messages(w http.ResponseWriter, r *http.Request) {
	var q capture.MessageQuery
	v := r.URL.Query()
	q.After, _ = strconv.ParseUint(v.Get("after"), 10, 64)
	q.Limit, _ = strconv.Atoi(v.Get("limit"))
	q.NoRaw = v.Get("raw") == "0"
	stream(w, h.store.Messages(r.Context(), r.PathValue("id"), q))
}

func (h *handler) exchange(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil {
		writeErr(w, http.StatusBadRequest, err)
		return
	}
	x, err := h.store.Exchange(r.Context(), id)
	if err != nil {
		storeErr(w, err)
		return
	}
	writeJSON(w, x)
}

func (h *handler) message(w http.ResponseWriter, r *http.Request) {
	seq, err := strconv.ParseUint(r.PathValue("seq"), 10, 64)
	if err != nil {
		writeErr(w, http.StatusBadRequest, err)
		return
	}
	m, err := h.store.Message(r.Context(), seq)
	if err != nil {
		storeErr(w, err)
		return
	}
	writeJSON(w, m)
}

func (h *handler) lastIDs(w http.ResponseWriter, r *http.Request) {
	seq, x, err := h.store.LastIDs(r.Context())
	if err != nil {
		storeErr(w, err)
		return
	}
	writeJSON(w, map[string]uint64{"seq": seq, "exchange": x})
}

// Client reads a remote store. It implements capture.Store; writes return
// ErrReadOnly.
type Client struct {
	base  string
	token string
	hc    *http.Client
}

var _ capture.Store = (*Client)(nil)

// NewClient reads the store served at base (e.g. "http://127.0.0.1:41234").
func NewClient(base, token string) *Client {
	return &Client{base: strings.TrimRight(base, "/"), token: token, hc: &http.Client{Transport: &http.Transport{Proxy: nil}}}
}

func (c *Client) get(ctx context.Context, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	res, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("asking the running recorder at %s: %w", c.base, err)
	}
	if res.StatusCode != http.StatusOK {
		defer res.Body.Close()
		var e struct{ Error string }
		_ = json.NewDecoder(io.LimitReader(res.Body, 1<<16)).Decode(&e)
		if res.StatusCode == http.StatusNotFound {
			return nil, fmt.Errorf("%s: %w", e.Error, capture.ErrNotFound)
		}
		return nil, fmt.Errorf("the running recorder answered %s: %s", res.Status, e.Error)
	}
	return res, nil
}

func getJSON[T any](c *Client, ctx context.Context, path string) (*T, error) {
	res, err := c.get(ctx, path)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	v := new(T)
	if err := json.NewDecoder(res.Body).Decode(v); err != nil {
		return nil, fmt.Errorf("reading the recorder's answer: %w", err)
	}
	return v, nil
}

func getStream[T any](c *Client, ctx context.Context, path string) iter.Seq2[*T, error] {
	return func(yield func(*T, error) bool) {
		res, err := c.get(ctx, path)
		if err != nil {
			yield(nil, err)
			return
		}
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 64<<10), 256<<20)
		for sc.Scan() {
			line := sc.Bytes()
			if strings.HasPrefix(string(line), `{"error":`) {
				var e struct{ Error string }
				_ = json.Unmarshal(line, &e)
				yield(nil, errors.New(e.Error))
				return
			}
			v := new(T)
			if err := json.Unmarshal(line, v); err != nil {
				yield(nil, fmt.Errorf("reading the recorder's answer: %w", err))
				return
			}
			if !yield(v, nil) {
				return
			}
		}
		if err := sc.Err(); err != nil {
			yield(nil, err)
		}
	}
}

// Status asks the recording process about itself.
func (c *Client) Status(ctx context.Context) (*Status, error) {
	return getJSON[Status](c, ctx, "/v1/status")
}

// Write implements capture.Store; it always fails.
func (c *Client) Write(context.Context, *capture.Batch) error { return ErrReadOnly }

// DeleteSession implements capture.Store; it always fails.
func (c *Client) DeleteSession(context.Context, string) error { return ErrReadOnly }

// Session implements capture.Store.
func (c *Client) Session(ctx context.Context, id string) (*capture.Session, error) {
	return getJSON[capture.Session](c, ctx, "/v1/sessions/"+url.PathEscape(id))
}

// Sessions implements capture.Store.
func (c *Client) Sessions(ctx context.Context, q capture.SessionQuery) iter.Seq2[*capture.Session, error] {
	v := url.Values{}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.Format(time.RFC3339Nano))
	}
	if !q.Until.IsZero() {
		v.Set("until", q.Until.Format(time.RFC3339Nano))
	}
	return getStream[capture.Session](c, ctx, "/v1/sessions?"+v.Encode())
}

// Exchanges implements capture.Store.
func (c *Client) Exchanges(ctx context.Context, sessionID string) iter.Seq2[*capture.Exchange, error] {
	return getStream[capture.Exchange](c, ctx, "/v1/sessions/"+url.PathEscape(sessionID)+"/exchanges")
}

// Exchange implements capture.Store.
func (c *Client) Exchange(ctx context.Context, id uint64) (*capture.Exchange, error) {
	return getJSON[capture.Exchange](c, ctx, "/v1/exchanges/"+strconv.FormatUint(id, 10))
}

// Messages implements capture.Store.
func (c *Client) Messages(ctx context.Context, sessionID string, q capture.MessageQuery) iter.Seq2[*capture.Message, error] {
	v := url.Values{}
	if q.After > 0 {
		v.Set("after", strconv.FormatUint(q.After, 10))
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.NoRaw {
		v.Set("raw", "0")
	}
	return getStream[capture.Message](c, ctx, "/v1/sessions/"+url.PathEscape(sessionID)+"/messages?"+v.Encode())
}

// Message implements capture.Store.
func (c *Client) Message(ctx context.Context, seq uint64) (*capture.Message, error) {
	return getJSON[capture.Message](c, ctx, "/v1/messages/"+strconv.FormatUint(seq, 10))
}

// LastIDs implements capture.Store.
func (c *Client) LastIDs(ctx context.Context) (uint64, uint64, error) {
	v, err := getJSON[struct{ Seq, Exchange uint64 }](c, ctx, "/v1/lastids")
	if err != nil {
		return 0, 0, err
	}
	return v.Seq, v.Exchange, nil
}

// Close implements capture.Store.
func (c *Client) Close() error { c.hc.CloseIdleConnections(); return nil }

// AnnouncementFile is the file, in the data directory, through which a
// recording process tells others where its API is.
const AnnouncementFile = "recorder.json"

// Announcement is the content of AnnouncementFile.
type Announcement struct {
	PID   int    `json:"pid"`
	API   string `json:"api"`
	Token string `json:"token"`
}

// NewToken returns a random API token.
func NewToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// WriteAnnouncement writes dir/AnnouncementFile (mode 0600, since it holds
// the token) and returns a function that removes it.
func WriteAnnouncement(dir string, a Announcement) (remove func(), err error) {
	b, _ := json.Marshal(a)
	path := filepath.Join(dir, AnnouncementFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, err
	}
	return func() {
		// Remove only our own announcement.
		if cur, err := ReadAnnouncement(dir); err == nil && cur.PID == a.PID && cur.Token == a.Token {
			_ = os.Remove(path)
		}
	}, nil
}

// ReadAnnouncement reads dir/AnnouncementFile.
func ReadAnnouncement(dir string) (*Announcement, error) {
	b, err := os.ReadFile(filepath.Join(dir, AnnouncementFile))
	if err != nil {
		return nil, err
	}
	var a Announcement
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, AnnouncementFile), err)
	}
	return &a, nil
}

// Discover returns a client for the recorder announced in dir, after
// checking that it answers. It returns an error wrapping os.ErrNotExist
// when nothing is announced.
func Discover(ctx context.Context, dir string) (*Client, *Status, error) {
	a, err := ReadAnnouncement(dir)
	if err != nil {
		return nil, nil, err
	}
	c := NewClient(a.API, a.Token)
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	st, err := c.Status(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("the recorder announced in %s (pid %d) does not answer: %w", filepath.Join(dir, AnnouncementFile), a.PID, err)
	}
	return c, st, nil
}
