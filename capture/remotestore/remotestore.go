// Package remotestore reads a capture.Store that another process holds open.
//
// Badger allows one process per directory, so while `mcptape record` runs,
// `mcptape ls` and `mcptape show` cannot open the store themselves. The
// recorder serves [Handler] on a loopback port, guarded by a random token,
// and announces both in a file in the data directory ([WriteAnnouncement]);
// the CLI finds it with [Discover] and reads through [Client], which
// implements capture.Reader.
//
// # API
//
// All endpoints are GET and need `Authorization: Bearer TOKEN` and a Host
// header that names the loopback host (localhost, 127.0.0.1, [::1]; else
// 403, as the dashboard does). They answer
// in encoding/gob (application/x-gob), which keeps raw JSON fields byte for
// byte where encoding/json would compact and re-escape them; lists are a
// stream of frames, each a record or an error:
//
//	/v1/sessions?limit=N&since=RFC3339&until=RFC3339       Sessions
//	/v1/session?id=ID                                      a Session
//	/v1/exchanges?session=ID                               Exchanges
//	/v1/messages?session=ID&after=SEQ&limit=N&raw=0        Messages
//	/v1/exchange?id=N                                      an Exchange
//	/v1/message?seq=N                                      a Message
//	/v1/lastids                                            the highest Seq and exchange ID
//	/v1/status                                             the recorder's Status
//	/v1/verify                                             a capture.VerifyReport (stores that verify)
//
// One endpoint writes, for a recorder that serves routes: POST /v1/routes
// with a JSON body {"name": NAME, "upstream": URL} adds a route (or finds
// the same one) and answers its [RouteInfo]; 409 when the name is taken by
// another upstream, 400 for a bad name or URL, 404 when the recorder has
// no routes.
//
// One more writes, for a store that prunes (capture.Pruner): POST
// /v1/prune with a JSON capture.PruneOptions answers the
// capture.PruneReport; 404 when the store does not prune.
//
// Ids travel in the query string, since session ids are arbitrary text.
//
// Errors are an errorBody frame, with 404 for capture.ErrNotFound and 503
// for capture.ErrClosed.
package remotestore

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/gob"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// Status is what the recording process reports about itself.
type Status struct {
	PID      int    `json:"pid"`
	Listen   string `json:"listen"`
	Upstream string `json:"upstream"`
	// Routes are the recorder's routes, when it serves several upstreams.
	Routes  []RouteInfo   `json:"routes,omitempty"`
	Started time.Time     `json:"started"`
	Stats   capture.Stats `json:"stats"`
	// Paused says why the store records nothing now (no room on its
	// disk, its size bound reached); empty while it records.
	Paused string `json:"paused,omitempty"`
}

// RouteInfo is one route of a recorder: its name, its upstream (redacted)
// and the URL a client uses for it.
type RouteInfo struct {
	Name     string `json:"name"`
	Upstream string `json:"upstream"`
	URL      string `json:"url"`
}

// ErrRouteConflict is AddRoute's error for a name another upstream has.
var ErrRouteConflict = errors.New("the recorder has a route of that name to another upstream")

// ErrNoRoutes is AddRoute's error from a recorder that serves one upstream.
var ErrNoRoutes = errors.New("the running recorder serves a single upstream (--upstream), not routes: restart it with --route NAME=URL to add servers to it")

// HandlerOptions configures Handler. Nil means defaults.
type HandlerOptions struct {
	// AddRoute, if not nil, serves POST /v1/routes: it adds a route to
	// the recorder (the same name and upstream again is no change) and
	// returns it. Its errors wrap ErrRouteConflict, or mean a bad request.
	AddRoute func(name, upstream string) (RouteInfo, error)
	// Status, if not nil, answers /v1/status.
	Status func() Status
	// Sync, if not nil, is called before every read, so that a read sees
	// everything the recording process forwarded before it (the recorder
	// writes in batches and rewrites busy sessions' records at intervals;
	// capture.Recorder.Sync flushes both). Its error is the read's.
	Sync func(ctx context.Context) error
}

// Handler serves store read-only at /v1/… for clients holding token.
func Handler(store capture.Reader, token string, opts *HandlerOptions) http.Handler {
	var o HandlerOptions
	if opts != nil {
		o = *opts
	}
	status := o.Status
	mux := http.NewServeMux()
	h := &handler{store: store}
	mux.HandleFunc("GET /v1/sessions", h.sessions)
	mux.HandleFunc("GET /v1/session", h.session)
	mux.HandleFunc("GET /v1/exchanges", h.exchanges)
	mux.HandleFunc("GET /v1/messages", h.messages)
	mux.HandleFunc("GET /v1/exchange", h.exchange)
	mux.HandleFunc("GET /v1/message", h.message)
	mux.HandleFunc("GET /v1/lastids", h.lastIDs)
	mux.HandleFunc("GET /v1/verify", h.verify)
	mux.HandleFunc("POST /v1/prune", h.prune)
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {
		if status == nil {
			writeErr(w, http.StatusNotFound, errors.New("no status"))
			return
		}
		writeOne(w, status())
	})
	mux.HandleFunc("POST /v1/routes", func(w http.ResponseWriter, r *http.Request) {
		if o.AddRoute == nil {
			writeErr(w, http.StatusNotFound, ErrNoRoutes)
			return
		}
		var req struct{ Name, Upstream string }
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 16<<10)).Decode(&req); err != nil {
			writeErr(w, http.StatusBadRequest, fmt.Errorf("reading the route: %w", err))
			return
		}
		ri, err := o.AddRoute(req.Name, req.Upstream)
		switch {
		case errors.Is(err, ErrRouteConflict):
			writeErr(w, http.StatusConflict, err)
		case err != nil:
			writeErr(w, http.StatusBadRequest, err)
		default:
			writeOne(w, ri)
		}
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The rule of every mcptape listener (the dashboard's too): on
		// loopback, a request naming another host is a page that rebound
		// its name to 127.0.0.1 (DNS rebinding).
		if !protocol.HostAllowed(r) {
			writeErr(w, http.StatusForbidden, errors.New("the Host header names no loopback host, on a loopback listener (DNS rebinding?)"))
			return
		}
		got := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		if subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
			writeErr(w, http.StatusUnauthorized, errors.New("missing or wrong token"))
			return
		}
		if o.Sync != nil && r.Method == http.MethodGet && r.URL.Path != "/v1/status" {
			if err := o.Sync(r.Context()); err != nil {
				writeErr(w, http.StatusServiceUnavailable, fmt.Errorf("waiting for the recorder to write what it has: %w", err))
				return
			}
		}
		mux.ServeHTTP(w, r)
	})
}

type handler struct{ store capture.Reader }

const contentType = "application/x-gob"

// frame is one value on the wire: a record, or the error that ended a list.
type frame[T any] struct {
	V   *T
	Err *errorBody
}

func writeOne[T any](w http.ResponseWriter, v T) {
	w.Header().Set("Content-Type", contentType)
	_ = gob.NewEncoder(w).Encode(frame[T]{V: &v})
}

// errorBody is an error on the wire; Code names the sentinel it wraps.
type errorBody struct {
	Error string `json:"error"`
	Code  string `json:"code,omitempty"`
}

func errCode(err error) string {
	switch {
	case errors.Is(err, capture.ErrNotFound):
		return "not_found"
	case errors.Is(err, capture.ErrClosed):
		return "closed"
	}
	return ""
}

func (e errorBody) err() error {
	switch e.Code {
	case "not_found":
		return fmt.Errorf("%s: %w", e.Error, capture.ErrNotFound)
	case "closed":
		return fmt.Errorf("the recorder's store: %w", capture.ErrClosed)
	}
	return errors.New(e.Error)
}

func writeErr(w http.ResponseWriter, code int, err error) {
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(code)
	_ = gob.NewEncoder(w).Encode(frame[struct{}]{Err: &errorBody{Error: err.Error(), Code: errCode(err)}})
}

func storeErr(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	switch errCode(err) {
	case "not_found":
		code = http.StatusNotFound
	case "closed":
		code = http.StatusServiceUnavailable
	}
	writeErr(w, code, err)
}

func stream[T any](w http.ResponseWriter, seq iter.Seq2[*T, error]) {
	w.Header().Set("Content-Type", contentType)
	enc := gob.NewEncoder(w)
	for v, err := range seq {
		if err != nil {
			// Headers are gone; a final error frame tells the client.
			_ = enc.Encode(frame[T]{Err: &errorBody{Error: err.Error(), Code: errCode(err)}})
			return
		}
		if enc.Encode(frame[T]{V: v}) != nil {
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
	s, err := h.store.Session(r.Context(), r.URL.Query().Get("id"))
	if err != nil {
		storeErr(w, err)
		return
	}
	writeOne(w, *s)
}

func (h *handler) exchanges(w http.ResponseWriter, r *http.Request) {
	stream(w, h.store.Exchanges(r.Context(), r.URL.Query().Get("session")))
}

func (h *handler) messages(w http.ResponseWriter, r *http.Request) {
	var q capture.MessageQuery
	v := r.URL.Query()
	q.After, _ = strconv.ParseUint(v.Get("after"), 10, 64)
	q.Limit, _ = strconv.Atoi(v.Get("limit"))
	q.NoRaw = v.Get("raw") == "0"
	stream(w, h.store.Messages(r.Context(), v.Get("session"), q))
}

func (h *handler) exchange(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseUint(r.URL.Query().Get("id"), 10, 64)
	if err != nil {
		writeErr(w, http.StatusBadRequest, err)
		return
	}
	x, err := h.store.Exchange(r.Context(), id)
	if err != nil {
		storeErr(w, err)
		return
	}
	writeOne(w, *x)
}

func (h *handler) message(w http.ResponseWriter, r *http.Request) {
	seq, err := strconv.ParseUint(r.URL.Query().Get("seq"), 10, 64)
	if err != nil {
		writeErr(w, http.StatusBadRequest, err)
		return
	}
	m, err := h.store.Message(r.Context(), seq)
	if err != nil {
		storeErr(w, err)
		return
	}
	writeOne(w, *m)
}

func (h *handler) verify(w http.ResponseWriter, r *http.Request) {
	v, ok := h.store.(capture.Verifier)
	if !ok {
		writeErr(w, http.StatusNotFound, errors.New("this store cannot check itself"))
		return
	}
	rep, err := v.Verify(r.Context())
	if err != nil {
		storeErr(w, err)
		return
	}
	writeOne(w, *rep)
}

func (h *handler) prune(w http.ResponseWriter, r *http.Request) {
	p, ok := h.store.(capture.Pruner)
	if !ok {
		writeErr(w, http.StatusNotFound, errors.New("this store does not prune"))
		return
	}
	var o capture.PruneOptions
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 16<<10)).Decode(&o); err != nil {
		writeErr(w, http.StatusBadRequest, fmt.Errorf("reading what to prune: %w", err))
		return
	}
	rep, err := p.Prune(r.Context(), o)
	if err != nil {
		storeErr(w, err)
		return
	}
	writeOne(w, *rep)
}

type lastIDs struct{ Seq, Exchange uint64 }

func (h *handler) lastIDs(w http.ResponseWriter, r *http.Request) {
	seq, x, err := h.store.LastIDs(r.Context())
	if err != nil {
		storeErr(w, err)
		return
	}
	writeOne(w, lastIDs{Seq: seq, Exchange: x})
}

// Client reads a remote store. It implements capture.Reader.
type Client struct {
	base  string
	token string
	hc    *http.Client
}

var _ capture.Reader = (*Client)(nil)

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
		var f frame[struct{}]
		if gob.NewDecoder(io.LimitReader(res.Body, 1<<16)).Decode(&f) == nil && f.Err != nil {
			if f.Err.Code != "" {
				return nil, f.Err.err()
			}
			return nil, fmt.Errorf("the running recorder answered %s: %s", res.Status, f.Err.Error)
		}
		return nil, fmt.Errorf("the running recorder answered %s", res.Status)
	}
	return res, nil
}

// AddRoute asks the recorder to add a route to upstream under name; see
// the package documentation.
func (c *Client) AddRoute(ctx context.Context, name, upstream string) (*RouteInfo, error) {
	f, status, err := postOne[RouteInfo](c, ctx, "/v1/routes", map[string]string{"name": name, "upstream": upstream})
	switch {
	case err != nil:
		return nil, err
	case f.Err != nil && status == http.StatusConflict:
		return nil, fmt.Errorf("%w: %s", ErrRouteConflict, f.Err.Error)
	case f.Err != nil && status == http.StatusNotFound:
		return nil, ErrNoRoutes
	case f.Err != nil:
		return nil, errors.New(f.Err.Error)
	case f.V == nil:
		return nil, errors.New("the recorder's answer was empty")
	}
	return f.V, nil
}

// Prune implements capture.Pruner: the process that holds the store
// prunes it.
func (c *Client) Prune(ctx context.Context, o capture.PruneOptions) (*capture.PruneReport, error) {
	f, status, err := postOne[capture.PruneReport](c, ctx, "/v1/prune", o)
	switch {
	case err != nil:
		return nil, err
	case f.Err != nil && status == http.StatusNotFound:
		return nil, fmt.Errorf("the process that holds the store does not prune (an older mcptape?): %s", f.Err.Error)
	case f.Err != nil:
		return nil, f.Err.err()
	case f.V == nil:
		return nil, errors.New("the recorder's answer was empty")
	}
	return f.V, nil
}

var _ capture.Pruner = (*Client)(nil)

// postOne posts body as JSON to path and decodes the one frame answered,
// with the answer's status.
func postOne[T any](c *Client, ctx context.Context, path string, body any) (*frame[T], int, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(b))
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	res, err := c.hc.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("asking the running recorder at %s: %w", c.base, err)
	}
	defer res.Body.Close()
	var f frame[T]
	if err := gob.NewDecoder(io.LimitReader(res.Body, 16<<20)).Decode(&f); err != nil {
		return nil, 0, fmt.Errorf("the running recorder answered %s", res.Status)
	}
	return &f, res.StatusCode, nil
}

func getOne[T any](c *Client, ctx context.Context, path string) (*T, error) {
	res, err := c.get(ctx, path)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	var f frame[T]
	if err := gob.NewDecoder(res.Body).Decode(&f); err != nil {
		return nil, fmt.Errorf("reading the recorder's answer: %w", err)
	}
	if f.Err != nil {
		return nil, f.Err.err()
	}
	if f.V == nil {
		return nil, errors.New("the recorder's answer was empty")
	}
	return f.V, nil
}

func getStream[T any](c *Client, ctx context.Context, path string) iter.Seq2[*T, error] {
	return func(yield func(*T, error) bool) {
		res, err := c.get(ctx, path)
		if err != nil {
			yield(nil, err)
			return
		}
		defer res.Body.Close()
		dec := gob.NewDecoder(res.Body)
		for {
			var f frame[T]
			err := dec.Decode(&f)
			switch {
			case err == io.EOF:
				return
			case err != nil:
				if ctx.Err() != nil {
					err = ctx.Err()
				}
				yield(nil, fmt.Errorf("reading the recorder's answer: %w", err))
				return
			case f.Err != nil:
				yield(nil, f.Err.err())
				return
			}
			if err := ctx.Err(); err != nil {
				yield(nil, err)
				return
			}
			if !yield(f.V, nil) {
				return
			}
		}
	}
}

// Status asks the recording process about itself.
func (c *Client) Status(ctx context.Context) (*Status, error) {
	return getOne[Status](c, ctx, "/v1/status")
}

// Session implements capture.Reader.
func (c *Client) Session(ctx context.Context, id string) (*capture.Session, error) {
	return getOne[capture.Session](c, ctx, "/v1/session?id="+url.QueryEscape(id))
}

// Sessions implements capture.Reader.
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

// Exchanges implements capture.Reader.
func (c *Client) Exchanges(ctx context.Context, sessionID string) iter.Seq2[*capture.Exchange, error] {
	return getStream[capture.Exchange](c, ctx, "/v1/exchanges?session="+url.QueryEscape(sessionID))
}

// Exchange implements capture.Reader.
func (c *Client) Exchange(ctx context.Context, id uint64) (*capture.Exchange, error) {
	return getOne[capture.Exchange](c, ctx, "/v1/exchange?id="+strconv.FormatUint(id, 10))
}

// Messages implements capture.Reader.
func (c *Client) Messages(ctx context.Context, sessionID string, q capture.MessageQuery) iter.Seq2[*capture.Message, error] {
	v := url.Values{"session": {sessionID}}
	if q.After > 0 {
		v.Set("after", strconv.FormatUint(q.After, 10))
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.NoRaw {
		v.Set("raw", "0")
	}
	return getStream[capture.Message](c, ctx, "/v1/messages?"+v.Encode())
}

// Message implements capture.Reader.
func (c *Client) Message(ctx context.Context, seq uint64) (*capture.Message, error) {
	return getOne[capture.Message](c, ctx, "/v1/message?seq="+strconv.FormatUint(seq, 10))
}

// LastIDs implements capture.Reader.
func (c *Client) LastIDs(ctx context.Context) (uint64, uint64, error) {
	v, err := getOne[lastIDs](c, ctx, "/v1/lastids")
	if err != nil {
		return 0, 0, err
	}
	return v.Seq, v.Exchange, nil
}

// Verify implements capture.Verifier: the recorder that holds the store
// checks it.
func (c *Client) Verify(ctx context.Context) (*capture.VerifyReport, error) {
	return getOne[capture.VerifyReport](c, ctx, "/v1/verify")
}

var _ capture.Verifier = (*Client)(nil)

// Close releases the client's idle connections.
func (c *Client) Close() error { c.hc.CloseIdleConnections(); return nil }

// AnnouncementFile is the file, in the data directory, through which a
// recording process tells others where its API is.
const AnnouncementFile = "recorder.json"

// Announcement is the content of AnnouncementFile.
type Announcement struct {
	PID   int    `json:"pid"`
	API   string `json:"api"`
	Token string `json:"token"`
	// Dashboard is the URL of the recorder's web dashboard (with its
	// token, if it has one); "" when it serves none.
	Dashboard string `json:"dashboard,omitempty"`
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
	// A new file of our own, whatever was there (os.WriteFile would keep
	// the mode of a file someone else left): the token stays 0600.
	tmp, err := os.CreateTemp(dir, "."+AnnouncementFile+".*")
	if err != nil {
		return nil, err
	}
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return nil, err
	}
	_, werr := tmp.Write(b)
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), path)
	}
	if werr != nil {
		os.Remove(tmp.Name())
		return nil, werr
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

// RemoveStale removes dir's announcement, if there is one, for a process
// that holds the store itself (and so knows that no other process serves
// it): one left by a recorder that was killed. It reports whether there
// was one.
func RemoveStale(dir string) (bool, error) {
	err := os.Remove(filepath.Join(dir, AnnouncementFile))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	}
	return false, err
}

// Discover returns a client for the recorder announced in dir, after
// checking that it answers. It returns an error wrapping os.ErrNotExist
// when nothing is announced, or only a process that no longer runs.
func Discover(ctx context.Context, dir string) (*Client, *Status, error) {
	a, err := ReadAnnouncement(dir)
	if err != nil {
		return nil, nil, err
	}
	if !processAlive(a.PID) {
		return nil, nil, fmt.Errorf("%s names pid %d, which no longer runs (a recorder that was killed): %w",
			filepath.Join(dir, AnnouncementFile), a.PID, fs.ErrNotExist)
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
