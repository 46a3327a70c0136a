package capture

import (
	"encoding/json"
	"net/http"
	"os"
	"time"

	"github.com/mcptape/mcptape/protocol"
)

// Session is one conversation between one client and one server. See the
// package documentation for how traffic is grouped into sessions.
type Session struct {
	// ID is mcptape's own id: time-ordered, printable, unique in a store.
	ID string `json:"id"`
	// Era and Version are what the traffic has shown so far; Version is
	// the negotiated (legacy) or requested (modern) revision.
	Era     protocol.Era `json:"era"`
	Version string       `json:"version,omitempty"`
	// Client and Server are clientInfo and serverInfo.
	Client protocol.Implementation `json:"client"`
	Server protocol.Implementation `json:"server"`
	// ClientCapabilities and ServerCapabilities are as declared, raw.
	ClientCapabilities json.RawMessage `json:"clientCapabilities,omitempty"`
	ServerCapabilities json.RawMessage `json:"serverCapabilities,omitempty"`
	// Upstream is the server's base URL; Path the MCP endpoint's path.
	Upstream string `json:"upstream,omitempty"`
	Path     string `json:"path,omitempty"`
	// Key is the stored pseudonym of the Mcp-Session-Id (legacy), "" on
	// modern sessions, which have none.
	Key string `json:"key,omitempty"`
	// Opening says how the session began: "initialize",
	// "discover+initialize" (a modern probe that fell back), "discover",
	// "request" (a modern session with no discover), or "mid-session"
	// (the recorder joined a session already under way).
	Opening string `json:"opening,omitempty"`
	// Start and End are the first and the latest traffic seen.
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// Counts.
	Exchanges int `json:"exchanges"`
	Messages  int `json:"messages"`
	Calls     int `json:"calls"`    // client requests
	Errors    int `json:"errors"`   // JSON-RPC errors and isError tool results
	Findings  int `json:"findings"` // findings on its messages and exchanges
	// Status is open, closed (DELETE or recorder shut down) or incomplete
	// (records were lost; see Lost and LossReason).
	Status     Status `json:"status"`
	Lost       int    `json:"lost,omitempty"`
	LossReason string `json:"lossReason,omitempty"`
	// Labels are user labels (set from the dashboard).
	Labels []string `json:"labels,omitempty"`
	// Leg is how the session's traffic reached the recorder; Route names
	// the route (`record --route NAME=URL`) or the wrapped server
	// (`wrap --name`), "" for a recorder's single upstream.
	Leg   Leg    `json:"leg,omitempty"`
	Route string `json:"route,omitempty"`
	// Command is, on a stdio session, the server process the wrap ran,
	// with secrets redacted; nil otherwise.
	Command *Command `json:"command,omitempty"`
}

// Leg is how traffic reached the recorder: one way in, of the several one
// recorder can serve at once.
type Leg uint8

const (
	// LegReverse is a reverse-proxy route to one upstream: the client is
	// pointed at mcptape's address instead of the server's.
	LegReverse Leg = iota
	// LegForward is the forward proxy: the client uses mcptape as its
	// HTTP proxy and names the server's own URL.
	LegForward
	// LegMITM is a CONNECT tunnel the forward proxy intercepted with
	// mcptape's own CA.
	LegMITM
	// LegStdio is a stdio wrap: mcptape launched the server as a child
	// process and relays its stdin and stdout.
	LegStdio
)

func (l Leg) String() string {
	switch l {
	case LegForward:
		return "forward"
	case LegMITM:
		return "mitm"
	case LegStdio:
		return "stdio"
	}
	return "reverse"
}

// MarshalText implements encoding.TextMarshaler.
func (l Leg) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler; an unknown name is
// LegReverse.
func (l *Leg) UnmarshalText(b []byte) error {
	switch string(b) {
	case "forward":
		*l = LegForward
	case "mitm":
		*l = LegMITM
	case "stdio":
		*l = LegStdio
	default:
		*l = LegReverse
	}
	return nil
}

// Command is the server process of a stdio session.
type Command struct {
	// Args is the command line, Args[0] the program; an argument that
	// looks like a secret is redacted.
	Args []string `json:"args"`
	// Env is the environment the wrap gave the server, as NAME=value, the
	// values of secret-looking names and values redacted; Dir its working
	// directory.
	Env []string `json:"env,omitempty"`
	Dir string   `json:"dir,omitempty"`
	// PID is the server's process id.
	PID int `json:"pid,omitempty"`
	// Exit is how the process ended ("exited with code 3", "killed by
	// signal terminated"), "" while it runs.
	Exit string `json:"exit,omitempty"`
}

// Status is a session's state.
type Status uint8

const (
	// StatusOpen means traffic may still come.
	StatusOpen Status = iota
	// StatusClosed means the client ended it (DELETE) or recording stopped.
	StatusClosed
	// StatusIncomplete means some of its records could not be stored.
	StatusIncomplete
)

func (s Status) String() string {
	switch s {
	case StatusClosed:
		return "closed"
	case StatusIncomplete:
		return "incomplete"
	}
	return "open"
}

// MarshalText implements encoding.TextMarshaler.
func (s Status) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (s *Status) UnmarshalText(b []byte) error {
	switch string(b) {
	case "closed":
		*s = StatusClosed
	case "incomplete":
		*s = StatusIncomplete
	default:
		*s = StatusOpen
	}
	return nil
}

// BodyKind says what an HTTP body held.
type BodyKind uint8

const (
	// BodyEmpty is no body (or zero bytes).
	BodyEmpty BodyKind = iota
	// BodyJSON is application/json.
	BodyJSON
	// BodySSE is text/event-stream.
	BodySSE
	// BodyOther is anything else (HTML error pages, OAuth metadata, …).
	BodyOther
)

func (k BodyKind) String() string {
	switch k {
	case BodyJSON:
		return "json"
	case BodySSE:
		return "sse"
	case BodyOther:
		return "other"
	}
	return "empty"
}

// MarshalText implements encoding.TextMarshaler.
func (k BodyKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (k *BodyKind) UnmarshalText(b []byte) error {
	switch string(b) {
	case "json":
		*k = BodyJSON
	case "sse":
		*k = BodySSE
	case "other":
		*k = BodyOther
	default:
		*k = BodyEmpty
	}
	return nil
}

// Exchange is one HTTP request and its response.
type Exchange struct {
	ID        uint64 `json:"id"`
	SessionID string `json:"session"`
	// Method and URL are the request line; URL is path and query.
	Method string `json:"method"`
	URL    string `json:"url"`
	// Status is the response status; 0 when no response came.
	Status int `json:"status,omitempty"`
	// RequestHeader and ResponseHeader are redacted copies.
	RequestHeader  http.Header `json:"requestHeader,omitempty"`
	ResponseHeader http.Header `json:"responseHeader,omitempty"`
	// Start is when the request arrived, FirstByte when the first body
	// byte (or the headers of an empty response) went to the client, End
	// when the exchange finished.
	Start     time.Time `json:"start"`
	FirstByte time.Time `json:"firstByte,omitzero"`
	End       time.Time `json:"end,omitzero"`
	// Forwarded is when the proxy handed the request to the upstream (the
	// last attempt, after a retry on a stale connection), UpstreamHeaders
	// when the upstream's response headers came back: the two instants
	// between which mcptape_proxy_upstream_latency_seconds measures.
	// Both are zero when no upstream answered (a synthesized response)
	// and in records of an mcptape that did not note them.
	Forwarded       time.Time `json:"forwarded,omitzero"`
	UpstreamHeaders time.Time `json:"upstreamHeaders,omitzero"`
	// Body kinds and sizes as they crossed the proxy.
	RequestBody   BodyKind `json:"requestBody"`
	ResponseBody  BodyKind `json:"responseBody"`
	RequestBytes  int64    `json:"requestBytes"`
	ResponseBytes int64    `json:"responseBytes"`
	// Events counts the SSE blocks of the response.
	Events int `json:"events,omitempty"`
	// Aborted is set when the exchange did not finish cleanly: the client
	// went away, the upstream reset, or the proxy aborted the response.
	Aborted bool `json:"aborted,omitempty"`
	// Truncated is set when the response body stopped mid-message (an SSE
	// block or a JSON body cut short).
	Truncated bool `json:"truncated,omitempty"`
	// Error is why it did not finish cleanly, or the upstream error.
	Error string `json:"error,omitempty"`
	// Synthesized is set when the proxy, not the upstream, produced the
	// response (the upstream was unreachable or refused the request).
	Synthesized bool `json:"synthesized,omitempty"`
	// Rewritten says what the proxy changed in the response on its way to
	// the client, "" when it changed nothing: in reverse mode, the
	// resource of OAuth protected-resource metadata and the
	// resource_metadata URL of WWW-Authenticate now name the proxy, so
	// that a client can authenticate through it. The exchange's headers
	// and body are recorded as the upstream sent them.
	Rewritten string `json:"rewritten,omitempty"`
	// Findings are protocol findings about the exchange itself (headers).
	FindingList []Finding `json:"findings,omitempty"`
}

// Message is one JSON-RPC message, or one frame that is not one.
type Message struct {
	// Seq is the store-wide sequence number, in the order the proxy saw
	// the messages.
	Seq        uint64 `json:"seq"`
	SessionID  string `json:"session"`
	ExchangeID uint64 `json:"exchange"`
	// Direction is who sent it.
	Direction protocol.Direction `json:"dir"`
	// Time is when it crossed the proxy, to the microsecond.
	Time time.Time `json:"time"`
	// Kind, Method and ID classify it; ID is the raw JSON id.
	Kind   protocol.Kind   `json:"kind"`
	Method string          `json:"method,omitempty"`
	ID     json.RawMessage `json:"id,omitempty"`
	// Name is the tool, prompt or resource a request names (params.name
	// or params.uri), for display and metrics.
	Name string `json:"name,omitempty"`
	// Batch is the index in a 2025-03-26 batch, -1 when not in one.
	Batch int `json:"batch"`
	// Raw is the exact bytes: the JSON message, or the raw SSE block of a
	// frame. Stored beside the index; readers may leave it nil when asked.
	Raw []byte `json:"raw,omitempty"`
	// Size is len(Raw) as recorded, also when Raw was not loaded.
	Size int `json:"size"`
	// SSE is set for messages that arrived in an SSE event.
	SSE *SSEInfo `json:"sse,omitempty"`
	// Findings are warnings about this message.
	Findings []Finding `json:"findings,omitempty"`
	// Links to other messages, set by the recorder (see package doc).
	Links Links `json:"links,omitzero"`
	// Edited counts the edits made to Raw after it was recorded: those the
	// store keeps (see [Editor]) plus any the message came with (a tape
	// exported from an edited session). Zero means Raw is as recorded.
	// Size is then len of the current Raw.
	Edited int `json:"edited,omitempty"`
	// File, set by the recorder on a large message that arrived through
	// a spill file, holds exactly Raw on disk: a store may move it into
	// place instead of writing Raw again. The recorder closes it once the
	// message's batch is written (or fails to be).
	File RawFile `json:"-"`
}

// RawFile is a file holding exactly a message's Raw (Message.File).
type RawFile interface {
	// MoveTo renames the file to path, on the same file system, and
	// returns it open; the caller then closes it. It fails, leaving the
	// file as it was, where a rename cannot do it.
	MoveTo(path string) (*os.File, error)
	// Close removes the file, unless it was moved.
	Close() error
}

// SSEInfo is how a message's SSE event looked on the wire.
type SSEInfo struct {
	// ID and Type are the event's id and event fields.
	ID   string `json:"id,omitempty"`
	Type string `json:"type,omitempty"`
	// Prefix and Suffix are the event's raw bytes before and after Raw,
	// so that Prefix+Raw+Suffix is the block exactly as sent. When the
	// data was split over several lines or held a batch, Whole holds the
	// whole block instead (on the batch's first element only).
	Prefix []byte `json:"prefix,omitempty"`
	Suffix []byte `json:"suffix,omitempty"`
	Whole  []byte `json:"whole,omitempty"`
}

// Links relate a message to others by Seq; zero means none.
type Links struct {
	// Request is, on a response, the request it answers; on a progress,
	// log or cancelled notification, the request it belongs to.
	Request uint64 `json:"request,omitempty"`
	// Parent is, on a server→client request carried by a client call's
	// stream, that call's request.
	Parent uint64 `json:"parent,omitempty"`
	// Previous is, on an MRTR retry, the request of the round before; on
	// the second and later sampling requests of a tool loop, the previous
	// sampling request.
	Previous uint64 `json:"previous,omitempty"`
	// Task is, on a message that names a task (tasks/get, tasks/result,
	// a status notification, a related-task _meta), the request that
	// created the task.
	Task uint64 `json:"task,omitempty"`
}

// IsZero reports whether no link is set.
func (l Links) IsZero() bool { return l == Links{} }

// Seqs is the four links, 0 where one is not set.
func (l Links) Seqs() [4]uint64 { return [4]uint64{l.Request, l.Parent, l.Previous, l.Task} }

// Finding is a protocol warning attached to a message or an exchange. It
// never blocks traffic.
type Finding struct {
	Kind    FindingKind `json:"kind"`
	Message string      `json:"message"`
}

// FindingKind names a class of finding.
type FindingKind string

// Finding kinds.
const (
	FindingInvalidFrame   FindingKind = "invalid-frame"   // not JSON, or not JSON-RPC
	FindingMalformed      FindingKind = "malformed"       // JSON-RPC that breaks a rule (null id, …)
	FindingBatch          FindingKind = "batch"           // a batch on a revision that forbids them
	FindingOversize       FindingKind = "oversize"        // cut at the size limit
	FindingTruncated      FindingKind = "truncated"       // the stream ended mid-message
	FindingUnanswered     FindingKind = "unanswered"      // a request with no response
	FindingOrphanResponse FindingKind = "orphan-response" // a response to no known request
	FindingDuplicateID    FindingKind = "duplicate-id"    // an id reused while in flight
	FindingHeaderMismatch FindingKind = "header-mismatch" // Mcp-Method/Mcp-Name/Mcp-Param-* vs body
	FindingWrongStream    FindingKind = "wrong-stream"    // a message where the spec forbids it
	FindingCapability     FindingKind = "capability"      // asked of a client that did not declare it
	FindingSchema         FindingKind = "schema"          // arguments or structuredContent vs schema
	FindingRequestState   FindingKind = "request-state"   // requestState altered between rounds
	FindingEncoding       FindingKind = "encoding"        // a Content-Encoding the recorder cannot read
	FindingProxy          FindingKind = "proxy"           // the proxy produced this message
	FindingVersion        FindingKind = "version"         // protocol version disagreements
	FindingRedacted       FindingKind = "redacted"        // part of the message was redacted
	FindingIntercepted    FindingKind = "intercepted"     // held in flight or changed by mcptape; see Intercepted
	FindingDrift          FindingKind = "drift"           // a tools/list that differs from its upstream's baseline
)
