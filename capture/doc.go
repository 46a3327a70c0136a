// Package capture is mcptape's data model and recorder: it turns the traffic
// the proxy forwards into sessions, exchanges, messages and the links between
// them, redacts secrets, and writes it all to a [Store].
//
// # Data model
//
// A [Session] is one conversation between one client and one server; an
// [Exchange] is one HTTP request and its response; a [Message] is one
// JSON-RPC message (or one frame that is not one) with its exact bytes. The
// recorder links messages as it records ([Links]): a response to its request,
// a progress notification to the request that set its token, a server→client
// request to the client call whose SSE stream carried it, an MRTR retry to
// the round before.
//
// # Sessions
//
// Legacy sessions (2024-11-05 to 2025-11-25) are grouped by Mcp-Session-Id.
// The exchanges that open one join it: the initialize whose response names
// the session id, and a server/discover probe just before it from the same
// client (same remote address, endpoint path and clientInfo) that found only
// legacy versions, as go-sdk clients send. The session id itself is never
// stored; [Session.Key] is an HMAC pseudonym of it.
//
// Modern sessions (2026-07-28) have no id on the wire. The recorder groups
// requests by client fingerprint — remote address, endpoint path,
// clientInfo and clientCapabilities from `_meta` — and starts a new session
// after [RecorderOptions.IdleGap] (5 minutes by default) of silence.
//
// Exchanges that carry no MCP traffic and name no session (OAuth metadata,
// health checks) are grouped per remote address the same way, in sessions
// opened "http".
//
// # Recording
//
// The proxy reports each exchange through a [Tap]; the tap copies what it is
// given onto a bounded queue and returns. One pipeline goroutine decodes
// (bodies, SSE streams, batches), correlates and redacts; one writer
// goroutine writes a [Batch] per drained queue to the store. When the queue
// is full the tap waits up to [RecorderOptions.Backpressure]; past that, and
// whenever the store fails, traffic still flows and the loss is counted
// ([Stats]), logged once, and marked on the session ([StatusIncomplete]).
//
// # Redaction
//
// At write time by default: Authorization and Proxy-Authorization (the
// scheme is kept), Cookie, Set-Cookie, every header whose name contains
// api-key, apikey, api_key, token, secret or password, plus
// [RedactOptions.Headers]; OAuth codes and tokens in query strings; and any
// of those secret values wherever they reappear in a body. Mcp-Session-Id is
// stored as a stable pseudonym.
package capture
