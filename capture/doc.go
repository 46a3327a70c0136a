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
// client registration, token requests, health checks) are grouped per
// remote address the same way, in sessions opened "http"; their bodies are
// stored as frames, up to [MaxPlainBody] each, redacted. A JSON POST that is
// no JSON-RPC message and names no MCP header (no session id, no
// text/event-stream in Accept) is such plain HTTP: an OAuth dynamic client
// registration, say.
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
// A leg whose transport frames the messages itself — a stdio server's
// newline-delimited stdin and stdout, which `mcptape wrap` relays — reports
// a [Stream] instead: one session and one exchange for the conversation,
// each side's frames written through a [FrameWriter] (Write, End at each
// frame's end, Flush once per read). The frames of one Flush travel as one
// event weighed in bytes; when the queue is full they wait in order in a
// backlog file in [RecorderOptions.SpillDir] rather than being dropped, and a
// frame past 1 MiB is kept in a file there, never in memory: a [Writer] that
// is a [RawReaderTaker] (the spool) copies it from there, classified from
// the frame's skeleton.
//
// # Drift
//
// [RecorderOptions].Baselines gives each upstream's trusted tools/list
// ([BaselineFile]: the data directory's baselines.json, which `mcptape
// baseline accept` writes); a complete tools/list that differs from its
// upstream's gets a [FindingDrift] per tool added, removed or changed,
// naming each changed field with both values ([DiffCatalog]).
//
// # Retention
//
// A store that is a [Pruner] deletes old sessions on request, never one
// that is open or saw traffic within [PruneGrace].
//
// # Redaction
//
// At write time by default: Authorization and Proxy-Authorization (the
// scheme is kept), Cookie, Set-Cookie, every header whose name contains
// api-key, apikey, api_key, token, secret or password, plus
// [RedactOptions.Headers]; OAuth codes, verifiers, tokens, assertions and
// client secrets in query strings (a redirect's Location included), in the
// form and JSON bodies of plain HTTP exchanges (members at any depth), and
// the password of a Basic Authorization; and any of those secret values
// wherever they reappear later, in any body. A stdio server's command line
// and environment are redacted by the rules of [RedactArgs] and
// [RedactEnvValue] (secret-named flags and variables, key-looking values,
// secret headers, URL passwords), plus [RedactOptions.Args] and
// [RedactOptions.Env]. A plain body in a
// Content-Encoding the recorder cannot decode is not stored. Mcp-Session-Id
// is stored as a stable pseudonym.
//
// # Metrics
//
// With [RecorderOptions.Registerer] set, the recorder registers its
// series (nil means no metrics: the hooks are nil checks).
// The series, with their labels and what each measures, are listed in
// one place: docs/metrics.md.
//
// Labels are bounded whatever the traffic, so that a hostile peer cannot
// grow the registry: direction is c2s or s2c; kind is one of the
// [protocol.Kind] names; method is a method the MCP specification defines
// ([protocol.IsSpecMethod]), "none" when there is none, else "other"
// ([MethodLabel]); tool is set on tools/call only and keeps the first
// [MaxToolLabels] (100) distinct names, later ones (and names that are not
// short printable UTF-8) become "other" ([ToolLabels]); code is a code
// JSON-RPC or MCP defines (-32700, -32600…-32603, -32000…-32004, -32020…-32022,
// -32042), else "other" ([ErrorCodeLabel]); kind of a finding is a
// [FindingKind]; leg is a [Leg]'s name. Sessions and ids are never labels.
package capture
