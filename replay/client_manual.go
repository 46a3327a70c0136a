package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mcptape/mcptape/protocol"
)

// A person answers: when the testing profile's sampling provider is
// "manual" and ClientOptions.Manual is set, the replay client hands the
// live server's sampling requests that the recording has no answer for to
// Manual (cmd wires the dashboard's pending queue) and waits, at most
// ManualTimeout, for what a person answers. The time a person takes does
// not count against CallTimeout: the call's clock stops while it waits.

// DefaultManualTimeout is how long the replay client waits for a person's
// answer when ClientOptions.ManualTimeout is zero.
const DefaultManualTimeout = 10 * time.Minute

// errNobody is the error the server gets when nobody answered in time.
var errNobody = errors.New("nobody answered")

// manual reports whether a live request of method is for a person.
func (r *sessionRun) manual(method string) bool {
	o := &r.c.opts
	return method == protocol.MethodSampling && o.Manual != nil && o.Profile != nil && o.Profile.Sampling != nil &&
		o.Profile.Sampling.Provider == ProviderManual
}

// manualOn reports whether any request may wait for a person.
func (r *sessionRun) manualOn() bool { return r.manual(protocol.MethodSampling) }

// askPerson hands a request to ClientOptions.Manual and waits for the
// answer, with the call's clock stopped. It returns the result, or the
// JSON-RPC error to answer with; from is "manual", or "none" when nobody
// answered in time or the answer was not a JSON object.
func (r *sessionRun) askPerson(ctx context.Context, cr *CallResult, method string, params json.RawMessage) (result json.RawMessage, rpcErr *protocol.ErrorInfo, from string) {
	release := cr.clock.hold()
	defer release()
	timeout := r.c.opts.ManualTimeout
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r.c.opts.Logger.Info("waiting for a person to answer", clientLogSession, r.result.ID, clientLogCall, cr.Title(),
		clientLogMethod, method, clientLogTimeout, timeout)
	res, err := r.c.opts.Manual(actx, method, params)
	var ei *protocol.ErrorInfo
	switch {
	case err == nil && !isObject(res):
		err = fmt.Errorf("the answer to %s is not a JSON object", method)
	case err == nil:
		return res, nil, "manual"
	case errors.As(err, &ei):
		// The person answered with an error: the server gets it as given.
		return nil, ei, "manual"
	case actx.Err() != nil && ctx.Err() == nil:
		err = fmt.Errorf("%w to %s within %s (--manual-timeout)", errNobody, method, timeout)
	}
	return nil, clientError(-32603, err), "none"
}

// clientError is the JSON-RPC error saying err.
func clientError(code int, err error) *protocol.ErrorInfo {
	return &protocol.ErrorInfo{Code: int64(code), Message: "mcptape replay client: " + err.Error()}
}

// rpcError is a JSON-RPC error member saying err.
func rpcError(code int, err error) json.RawMessage { return errorMember(clientError(code, err)) }

// errorMember is e as a JSON-RPC error member; nil when e is.
func errorMember(e *protocol.ErrorInfo) json.RawMessage {
	if e == nil {
		return nil
	}
	b, _ := json.Marshal(e)
	return b
}

func isObject(b json.RawMessage) bool {
	t := bytes.TrimSpace(b)
	return len(t) > 1 && t[0] == '{' && json.Valid(t)
}

// backgroundAnswers are the answers of one stream that wait for a person:
// they run beside the reading of the stream, so that the server's
// notifications, pings and other requests keep flowing meanwhile. stop
// withdraws the questions nobody has answered yet (the stream ended, so
// the server no longer waits) and waits for the replies under way.
type backgroundAnswers struct {
	ask    context.Context // ends on stop: the person's wait
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newBackgroundAnswers(ctx context.Context) *backgroundAnswers {
	b := &backgroundAnswers{}
	b.ask, b.cancel = context.WithCancel(ctx)
	return b
}

func (b *backgroundAnswers) stop() {
	b.cancel()
	b.wg.Wait()
}

// callClock is a call's CallTimeout, which stops while a person answers:
// a person's minutes are bounded by ManualTimeout, not by the call's
// budget for the machines.
type callClock struct {
	mu     sync.Mutex
	timer  *time.Timer
	left   time.Duration
	since  time.Time
	held   int
	paused bool
}

// errCallTimeout is the cause of a call context whose clock ran out.
var errCallTimeout = errors.New("the call took longer than --timeout")

// withCallClock is context.WithTimeout(ctx, d) with a clock that hold
// stops.
func withCallClock(ctx context.Context, d time.Duration) (context.Context, *callClock, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	c := &callClock{left: d, since: time.Now()}
	c.timer = time.AfterFunc(d, func() { cancel(fmt.Errorf("%w (%s): %w", errCallTimeout, d, context.DeadlineExceeded)) })
	return ctx, c, func() { c.timer.Stop(); cancel(context.Canceled) }
}

// hold stops the clock until release is called; holds nest. A nil clock
// (a long-lived stream has none) holds nothing.
func (c *callClock) hold() (release func()) {
	if c == nil {
		return func() {}
	}
	c.mu.Lock()
	if c.held == 0 && c.timer.Stop() {
		c.left -= time.Since(c.since)
		c.paused = true
	}
	c.held++
	c.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.held--
			if c.held == 0 && c.paused {
				c.paused = false
				c.since = time.Now()
				c.timer.Reset(max(c.left, 0))
			}
		})
	}
}
