// Package proxy moves bytes between an MCP client and an MCP server and
// reports every exchange to a [capture.Recorder].
//
// # Reverse mode
//
// [New] returns an http.Handler that forwards every request to one upstream
// over Streamable HTTP: POST with JSON or SSE responses, the standalone GET
// stream, DELETE, 202s, errors and any other path (OAuth metadata, health
// checks) all pass through. The request path is kept as the client sent it,
// so a client uses the proxy's address with the server's path.
//
// What it guarantees:
//   - Bodies byte for byte, headers except hop-by-hop ones; Host is set to
//     the upstream's (go-sdk's DNS-rebinding check); Origin passes
//     unchanged; nothing is added (no sniffed Content-Type, no Date).
//   - No buffering of responses: each read from the upstream is written and
//     flushed at once, so every SSE event reaches the client as soon as it
//     is read. Request bodies up to [Options.MaxBufferedBody] are read before
//     forwarding and sent with their exact length, which avoids a request
//     body race in net/http that cuts streamed responses.
//   - A client that disconnects cancels the upstream request (on 2026-07-28
//     closing the stream is cancellation); an upstream that resets mid-stream
//     aborts the client's response rather than ending it cleanly.
//   - An unreachable upstream is answered with 502 (504 on a timeout) and a
//     JSON-RPC error carrying the request's id and naming the upstream. A
//     request whose pooled upstream connection turns out closed before any
//     response byte is retried once on a fresh connection when its whole
//     body is in hand.
//   - On a loopback listener, a request whose Host is not a loopback name is
//     refused with 403 (DNS rebinding), as go-sdk's servers do.
//   - OAuth works through it: the one change to what passes is that the
//     resource_metadata URL of a 401's or 403's WWW-Authenticate and the
//     resource of protected-resource metadata (RFC 9728) name the proxy as
//     the client addressed it, path kept, when they named the upstream's
//     origin; every other byte of the metadata is the upstream's. The
//     exchange is recorded as the upstream sent it and marked
//     [capture.Exchange.Rewritten].
//   - Protocol upgrades are never switched to: no unrecorded tunnel opens.
//
// The recorder sees the bytes as they were written to the client, so the
// record shows what the client actually received.
//
// # Routes
//
// With [Options.Routes], one proxy serves several upstreams, each under
// /NAME/ ([Route]): the prefix comes off before the request goes on
// (http://proxy/github/mcp is https://upstream/mcp), Host is set to the
// route's upstream, and the OAuth rewrite and the legacy SSE endpoint
// rewrite use the route's URL. A client's discovery paths reach the route
// both ways it builds them: /NAME/.well-known/… and RFC 9728's
// /.well-known/oauth-protected-resource/NAME/…. A path no route serves
// gets a 404 naming the routes. [Proxy.AddRoute] adds a route while the
// proxy runs. Sessions are recorded with the route's name
// ([capture.Request.Route]) and upstream, and the path the upstream got.
//
// # Forward proxy and MITM
//
// With [Options.Forward], the proxy is also an HTTP(S) proxy: a request in
// absolute form (http://host/path) goes to that host, recorded on
// [capture.LegForward]; a CONNECT to a host a [ForwardOptions.MITM] glob
// matches is intercepted — the proxy answers the TLS handshake with
// [ForwardOptions.Certificate]'s certificate for the host and reads the
// requests inside, recorded on [capture.LegMITM]; a CONNECT whose client
// speaks plain HTTP in it (Node's fetch tunnels http:// URLs that way) is
// served and recorded on LegForward, whatever its host; any other CONNECT
// is tunnelled unrecorded. The client's first bytes tell them apart (a TLS
// handshake, an HTTP request line, or neither within a second: a protocol
// whose server speaks first). Nothing passing a forward leg is rewritten:
// the client uses the servers' own URLs.
//
// goproxy (github.com/elazarl/goproxy) handles the CONNECTs: the decision,
// the tunnels, the hijack. Every HTTP request, plain or read from an
// intercepted tunnel, is served by the proxy's own handler on a net/http
// server with the listener's bounds, so that one policy layer — the bounds
// and refusals below, the Host rules, the synthesized errors, abort
// handling, the tee — serves every leg. (goproxy's own MITM loop reads
// requests with a parser of its own, without those bounds.) The Host
// rules: a reverse route has the DNS-rebinding guard; a request inside a
// tunnel must name the tunnel's host (else 421); a forward request or a
// CONNECT naming the proxy itself is a loop (508). The forward proxy never
// uses the environment's proxy settings.
//
// The proxy itself is any address of this machine (loopback, unspecified,
// an interface's, in any spelling a resolver takes, or a name resolving
// to one) with the port of one of the process's listeners: the proxy's,
// and those given to [Proxy.AddOwnAddr]. A tunnel's dialled connection is
// checked again, and a CONNECT from one of the proxy's own tunnels, or
// inside a tunnel (400), is refused too, so tunnels never nest; one
// client holds at most [ForwardOptions.MaxTunnelsPerClient] tunnels at a
// time (429 past it). Unrecorded tunnels copy through pooled buffers,
// never splice(2), whose pipes the runtime keeps after a tunnel ends.
//
// # Legacy HTTP+SSE
//
// A reverse route rewrites the endpoint event of a 2024-11-05 GET stream
// when the client could not use it as sent: an absolute URL on the
// upstream's origin becomes the proxy's (the route's prefix before its
// path, its query kept), and an absolute path gets the route's prefix.
// Only the stream's first events are held, each until it is whole, while
// the proxy looks for the endpoint event (at most 4 events or 16 KiB). The
// record keeps the upstream's bytes, and the exchange is marked
// [capture.Exchange.Rewritten].
//
// # Bounds
//
// [Listen] serves a reverse proxy's clients with an HTTP/1.1 engine of its
// own (engine.go) that parses every request with net/http's parser
// ([http.ReadRequest]) and checks it as net/http's server does (a head of
// the common shape that came whole is read by a reader of its own,
// engine_head.go, to the request net/http's parser returns for the same
// bytes: FuzzRequestHeadParser compares the two); it frames
// responses and keeps connections by net/http's rules, and refuses with
// net/http's answers: what net/http refuses never reaches the handler.
// It differs in one thing, its cost: net/http reads the connection on a
// goroutine of its own while each request is handled, to notice a client
// going away; the engine does so only for a request in the handler for
// longer than 10 ms. A forward proxy (whose tunnels take over
// connections), and every other handler, is served by net/http's server.
// On Linux both sides' TCP connections read and write with the system
// calls themselves (sock_linux.go), sparing the runtime's bookkeeping for
// calls that may block. On top of it every size and
// wait is bounded, and each refusal is a JSON-RPC error the recorder keeps:
// request heads ([ServerOptions.MaxHeaderBytes], 431; [ServerOptions.HeaderTimeout]),
// request bodies (a per-read idle timeout, [Options.BodyIdleTimeout], 408;
// [Options.MaxRequestBody], 413; malformed framing, 400; memory never beyond
// the bytes that arrived), the upstream's response head
// ([MaxResponseHeaderBytes] in [DefaultTransport], and at most 10 interim
// responses, 502), and the wait for it ([Options.UpstreamTimeout], 504). A
// response that has begun is never cut for being idle: MCP streams wait for
// notifications. The tests check the proxy against net/http's server with
// httputil.ReverseProxy on the same raw bytes: it never forwards what that
// reference does not; and the engine against net/http's server on every
// shape of response (the same bytes back).
//
// # Stopping
//
// [Server.Shutdown] drains a proxy: the streams that carry no call (GET,
// subscriptions/listen) are cut at once, new calls are answered 503, the
// calls in flight (and the client's answers they wait for) go on until the
// context ends; what is then cut is recorded with [ErrShutdown] as its
// error.
//
// # Intercept and answering for the client
//
// With [Options.Intercept] the proxy holds the messages a rule of the
// [capture.Interceptor] matches until a person decides (forward, edit,
// answer in place, fail): a client's message before it is forwarded, a
// JSON response before its headers go out, and an SSE event — the stream
// is split into events only on an exchange a rule can concern, and only
// the held event waits, in a goroutine of its own, while the others are
// written as they arrive. With [Options.Answer] ([ClientAnswers]) it
// answers the server's sampling, elicitation and roots requests itself:
// on a 2025-era session by a POST of its own with the session's headers,
// on 2026-07-28 by retrying an input_required call with inputResponses and
// the echoed requestState; and it adds the capability to what a client
// that lacks it declares. Both are recorded: the message as received with
// an intercepted finding, what went on instead as its next version, and
// the requests mcptape sent itself marked as such.
//
// # Metrics
//
// With [Options.Registerer] set, the proxy registers its series (nil means
// no metrics: the hooks are nil checks). The histograms have classic buckets (100µs to 30s; 10µs to
// 10s for the overhead) and native ones (bucket factor 1.1), which
// Prometheus reads when it scrapes with native histograms enabled.
//
// A proxy with routes or a forward leg adds a route label to each series
// but the in-flight gauge: the route's name, "forward" or "mitm" for the
// forward legs (route names are fixed at start or added by AddRoute, at
// most 256).
//
// The series, with their labels and what each measures, are listed in
// one place for users and code alike: docs/metrics.md.
//
// A request's method and tool come from the 2026-07-28 Mcp-Method and
// Mcp-Name headers when it has them (that is what they are for; a server
// refuses a request whose headers and body disagree), else from the
// buffered body. Labels are bounded, as the recorder's are
// ([capture.MethodLabel], [capture.ToolLabels]): method is a method the MCP
// specification defines, "none" for a request that carries none (a GET
// stream, a DELETE, a client's answer), else "other" (also a batch, and a
// body too large to buffer without an Mcp-Method header); tool is set on
// tools/call only, for the first 100 distinct names, then "other"; code is
// a status net/http knows, else "other". Sessions and ids are never labels.
//
//	rec, _ := capture.NewRecorder(ctx, store, nil)
//	p, _ := proxy.New(&proxy.Options{Upstream: up, Recorder: rec})
//	srv, _ := proxy.Listen("127.0.0.1:7000", p, nil)
//	go srv.Serve()
package proxy
