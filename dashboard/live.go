package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	sse "github.com/tmaxmax/go-sse"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// The live tail: GET /api/v1/live is an SSE stream (go-sse) of what is
// recorded while the page is open. Each event's data is one JSON object:
//
//	event: message   a new message: liveMessage
//	event: session   a session written anew (counts, status): sessionRow
//	event: lagged    the tail fell behind and skipped records: reload
//	event: pending   the requests waiting for a person changed: {"count": N}
//	                 (with Options.Pending; GET /api/v1/pending lists them)
//	event: intercept the held messages or the rules changed: {"count": N}
//	                 (with Options.Intercept; GET /api/v1/intercept lists them)
//
// Event ids are sequence numbers of the stream, and a reconnecting browser
// (Last-Event-ID) gets the events it missed from the last 2048.

// liveMessage is the data of a message event.
type liveMessage struct {
	Seq     uint64    `json:"seq"`
	Session string    `json:"session"`
	Dir     string    `json:"dir"`
	Kind    string    `json:"kind"`
	Method  string    `json:"method,omitempty"`
	Name    string    `json:"name,omitempty"`
	Time    time.Time `json:"time"`
	Size    int       `json:"size"`
	Request uint64    `json:"request,omitempty"`
	// Error marks a JSON-RPC error or a tool result with isError.
	Error bool `json:"error,omitempty"`
	// Progress is a notifications/progress's progress, total and
	// message, for the pages that show a call's progress as it goes.
	Progress *liveProgress `json:"progress,omitempty"`
}

// liveProgress is what a progress notification says.
type liveProgress struct {
	Progress float64 `json:"progress"`
	Total    float64 `json:"total,omitempty"`
	Message  string  `json:"message,omitempty"`
}

// maxProgressRaw bounds the progress notifications the tail reads (on
// the recorder's path): a larger one goes without its numbers.
const maxProgressRaw = 4 << 10

type liveItem struct {
	msg     *liveMessage
	session *sessionRow
	pending *livePending
	// intercept: the number of held messages (intercept.go)
	intercept *livePending
}

type liveTail struct {
	s      *Server
	sse    *sse.Server
	items  chan liveItem
	lagged atomic.Bool
	once   sync.Once
	// watched is set once a page has subscribed, and stays set (a page
	// that lost its stream comes back for what it missed). Until then
	// there is no one to send records to: messages are only remembered
	// for the Live page's first load, on the caller's goroutine, and
	// sessions are left to the store.
	watched atomic.Bool

	// recent are the latest messages sent, for a page that opens
	// (GET /api/v1/live/recent); filled from the store on first use.
	recentMu sync.Mutex
	recent   []liveMessage
	filled   bool
}

// recentMax bounds the messages the Live page opens with.
const recentMax = 200

const liveQueue = 8192

func newLiveTail(s *Server) (*liveTail, error) {
	rp, err := sse.NewFiniteReplayer(2048, true)
	if err != nil {
		return nil, err
	}
	lt := &liveTail{s: s, items: make(chan liveItem, liveQueue)}
	lt.sse = &sse.Server{Provider: &sse.Joe{Replayer: rp}, OnSession: func(w http.ResponseWriter, r *http.Request) ([]string, bool) {
		lt.watched.Store(true)
		return open(w, r)
	}}
	s.wg.Go(lt.run)
	if s.opts.Feed == FeedPoll {
		s.wg.Go(lt.poll)
	}
	return lt, nil
}

// open starts a subscriber's stream at once, with a comment, so that the
// browser's EventSource opens before the first record arrives.
func open(w http.ResponseWriter, r *http.Request) ([]string, bool) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(": mcptape live tail\n\n"))
	_ = http.NewResponseController(w).Flush()
	return nil, true
}

func (lt *liveTail) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	lt.sse.ServeHTTP(w, r)
}

func (lt *liveTail) shutdown() {
	lt.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = lt.sse.Shutdown(ctx)
	})
}

// publish queues what a written batch holds, without blocking.
func (lt *liveTail) publish(b *capture.Batch) {
	for _, m := range b.Messages {
		lt.offer(liveItem{msg: liveOf(m)})
	}
	for _, x := range b.Sessions {
		row := rowOf(x)
		row.Labels = nil // the store's own labels may differ: pages fetch them
		lt.offer(liveItem{session: &row})
	}
}

func (lt *liveTail) offer(it liveItem) {
	if !lt.watched.Load() {
		// Encoding records for a stream no one has opened cost the
		// recorder as much as a fifth of storing them.
		switch {
		case it.msg != nil:
			if it.msg.Kind != protocol.KindFrame.String() {
				lt.remember(it.msg)
			}
			return
		case it.session != nil:
			return
		}
	}
	select {
	case lt.items <- it:
	default:
		lt.lagged.Store(true)
	}
}

func liveOf(m *capture.Message) *liveMessage {
	lm := &liveMessage{Seq: m.Seq, Session: m.SessionID, Dir: m.Direction.String(), Kind: m.Kind.String(),
		Method: m.Method, Name: m.Name, Time: m.Time, Size: m.Size, Request: m.Links.Request,
		Error: m.Kind == protocol.KindError || (m.Kind == protocol.KindResult && m.Method == protocol.MethodToolsCall && isErrorResult(m.Raw))}
	if m.Method == protocol.MethodProgress && m.Kind == protocol.KindNotification && len(m.Raw) <= maxProgressRaw {
		var p struct {
			Params liveProgress `json:"params"`
		}
		if json.Unmarshal(m.Raw, &p) == nil {
			lm.Progress = &p.Params
		}
	}
	return lm
}

// isErrorResult reports whether a tool result's raw bytes say isError:
// true. It is on the recorder's path, so it looks only at the first and
// the last KiB, where a result's isError sits beside its content.
func isErrorResult(raw []byte) bool {
	if len(raw) > 2048 {
		return hasIsError(raw[:1024]) || hasIsError(raw[len(raw)-1024:])
	}
	return hasIsError(raw)
}

func hasIsError(raw []byte) bool {
	i := bytes.Index(raw, []byte(`"isError"`))
	if i < 0 {
		return false
	}
	rest := bytes.TrimLeft(raw[i+len(`"isError"`):], " \t\r\n")
	if len(rest) == 0 || rest[0] != ':' {
		return false
	}
	return bytes.HasPrefix(bytes.TrimLeft(rest[1:], " \t\r\n"), []byte("true"))
}

// remember keeps m among the recent messages.
func (lt *liveTail) remember(m *liveMessage) {
	lt.recentMu.Lock()
	lt.recent = append(lt.recent, *m)
	if len(lt.recent) > 2*recentMax {
		lt.recent = append(lt.recent[:0], lt.recent[len(lt.recent)-recentMax:]...)
	}
	lt.recentMu.Unlock()
}

// recentMessages are the latest messages, oldest first: those the tail
// sent, and before any, the store's newest (read once).
func (lt *liveTail) recentMessages(ctx context.Context) []liveMessage {
	lt.recentMu.Lock()
	defer lt.recentMu.Unlock()
	if !lt.filled {
		lt.filled = true
		var older []liveMessage
		if top, _, err := lt.s.store.LastIDs(ctx); err == nil {
			low := uint64(0)
			if top > recentMax {
				low = top - recentMax
			}
			for seq := low + 1; seq <= top && ctx.Err() == nil; seq++ {
				if len(lt.recent) > 0 && seq >= lt.recent[0].Seq {
					break
				}
				if m, err := lt.s.store.Message(ctx, seq); err == nil && m.Kind != protocol.KindFrame {
					older = append(older, *liveOf(m))
				}
			}
		}
		lt.recent = append(older, lt.recent...)
	}
	n := len(lt.recent)
	return append([]liveMessage(nil), lt.recent[max(0, n-recentMax):]...)
}

// serveRecent is GET /api/v1/live/recent: the latest messages, oldest
// first, and the sessions they belong to.
func (lt *liveTail) serveRecent(w http.ResponseWriter, r *http.Request) {
	msgs := lt.recentMessages(r.Context())
	sessions := []sessionRow{}
	seen := map[string]bool{}
	for i := len(msgs) - 1; i >= 0 && len(sessions) < 50; i-- {
		id := msgs[i].Session
		if seen[id] {
			continue
		}
		seen[id] = true
		if x, err := lt.s.store.Session(r.Context(), id); err == nil {
			sessions = append(sessions, rowOf(x))
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"messages": msgs, "sessions": sessions, "proxy": lt.s.proxyBase()})
}

// run sends queued items to the subscribers.
func (lt *liveTail) run() {
	ctx := lt.s.ctx
	for {
		select {
		case <-ctx.Done():
			return
		case it := <-lt.items:
			if lt.lagged.Swap(false) {
				lt.send("lagged", map[string]string{"reason": "the live tail fell behind; reload the page"})
			}
			switch {
			case it.msg != nil:
				if it.msg.Kind != protocol.KindFrame.String() {
					lt.remember(it.msg)
				}
				lt.send("message", it.msg)
			case it.pending != nil:
				lt.send("pending", it.pending)
			case it.intercept != nil:
				lt.send("intercept", it.intercept)
			default:
				lt.send("session", it.session)
			}
		}
	}
}

func (lt *liveTail) send(typ string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	m := &sse.Message{Type: sse.Type(typ)}
	m.AppendData(string(b))
	if err := lt.sse.Publish(m); err != nil && !errors.Is(err, sse.ErrProviderClosed) {
		lt.s.log.Debug("dashboard: live tail publish", logKeyError, err)
	}
}

// pollBatch bounds the messages one poll reads; a store that grew by more
// skips ahead and says the tail lagged.
const pollBatch = 2000

// poll feeds the tail from the store: every PollInterval it reads the
// messages after the last one it saw. A seq the store's high-water mark
// covers but a read cannot find yet (a write being committed) is retried
// on the next polls, then skipped (lost or deleted records).
func (lt *liveTail) poll() {
	ctx := lt.s.ctx
	store := lt.s.store
	last, _, err := store.LastIDs(ctx)
	if err != nil {
		return
	}
	t := time.NewTicker(lt.s.opts.PollInterval)
	defer t.Stop()
	stuck := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		top, _, err := store.LastIDs(ctx)
		if err != nil {
			if errors.Is(err, capture.ErrClosed) {
				return
			}
			continue
		}
		if top > last+pollBatch {
			last = top - pollBatch
			lt.lagged.Store(true)
		}
		sessions := map[string]bool{}
		for seq := last + 1; seq <= top; seq++ {
			m, err := store.Message(ctx, seq)
			if errors.Is(err, capture.ErrNotFound) {
				if stuck < 3 {
					break
				}
				last = seq
				continue
			}
			if err != nil {
				break
			}
			stuck = 0
			last = seq
			lt.offer(liveItem{msg: liveOf(m)})
			sessions[m.SessionID] = true
		}
		if last < top {
			stuck++
		} else {
			stuck = 0
		}
		for id := range sessions {
			if x, err := store.Session(ctx, id); err == nil {
				row := rowOf(x)
				lt.offer(liveItem{session: &row})
			}
		}
	}
}
