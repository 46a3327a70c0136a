package dashboard

import (
	"context"
	"encoding/json"
	"io"
	"net/url"
	"strings"

	"github.com/mcptape/mcptape/capture"
)

// Backend is what the dashboard cannot do itself, so that it depends on
// capture and protocol only: tapes and testing profiles in replay's
// formats, and replay servers. cmd implements it; a dashboard in front of
// a running recorder gets one that is a [Recording] too.
type Backend interface {
	// ExportTape writes the sessions named by ids as a tape.
	ExportTape(ctx context.Context, store capture.Store, ids []string, w io.Writer) error
	// ImportTape reads a tape into store and returns the ids its
	// sessions have there.
	ImportTape(ctx context.Context, store capture.Store, r io.Reader) ([]string, error)
	// CheckProfile says what is wrong with a testing profile before it
	// is saved (nil: nothing).
	CheckProfile(b []byte) error
	// AnswerFromProfile answers a request (sampling, elicitation, roots)
	// from a testing profile, by name ("" is the default profile): the
	// Intercept page's Auto-respond.
	AnswerFromProfile(ctx context.Context, profile, method string, params json.RawMessage) (json.RawMessage, error)
	// StartReplay starts a replay server for a session and returns the
	// URL an MCP client connects to; StopReplay stops the one at url.
	StartReplay(ctx context.Context, sessionID string) (url string, err error)
	StopReplay(ctx context.Context, url string) error
}

// StatusReporter is what a [Backend] that knows the store's state (its
// size, bound, age limit, the recording into it) does besides: the banner
// and the footer report it.
type StatusReporter interface {
	// Status is the store's and the recording's state.
	Status() RecordingStatus
}

// Recording is what a [Backend] in front of a running recorder does
// besides: the recording's state, and sending through the recording proxy
// (Options.ProxyURL).
type Recording interface {
	StatusReporter
	// Sync waits until the recorder has written what it was given. The
	// dashboard calls it before exporting a tape and after a send, so
	// that what it reads next holds what was just exchanged.
	Sync(ctx context.Context) error
	// Routes are the upstreams the recording proxy serves now (routes
	// may be added while it runs): the Tools page sends a tool's call to
	// the upstream that listed it, through the route that serves it, or
	// not at all.
	Routes() []Route
	// Send sends a request to the live upstream through the recording
	// proxy, in a session of its own (cmd wires replay.Send). The result
	// goes to the page as JSON as it is: replay.SendResult's shape.
	Send(ctx context.Context, r SendRequest) (any, error)
}

// Route is one way the recording proxy reaches an upstream.
type Route struct {
	// Name is the route's name (record --route NAME=URL), "" for a
	// recorder's single upstream.
	Name string `json:"name,omitempty"`
	// Upstream is the server's URL (its scheme and host are what
	// sessions record as their upstream).
	Upstream string `json:"upstream"`
}

// serves reports whether the route reaches the upstream a session
// recorded (scheme://host).
func (r Route) serves(upstream string) bool {
	u, err := url.Parse(r.Upstream)
	if err != nil || u.Host == "" {
		return false
	}
	return strings.EqualFold(strings.TrimRight(upstream, "/"), u.Scheme+"://"+u.Host)
}

// recording is the backend's Recording, or nil.
func (s *Server) recording() Recording {
	r, _ := s.opts.Backend.(Recording)
	return r
}

// sync waits for the recorder, when there is one.
func (s *Server) sync(ctx context.Context) error {
	if rec := s.recording(); rec != nil {
		return rec.Sync(ctx)
	}
	return nil
}
