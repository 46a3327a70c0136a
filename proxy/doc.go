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
//     JSON-RPC error carrying the request's id and naming the upstream.
//   - On a loopback listener, a request whose Host is not a loopback name is
//     refused with 403 (DNS rebinding), as go-sdk's servers do.
//
// The recorder sees the bytes as they were written to the client, so the
// record shows what the client actually received.
//
//	rec, _ := capture.NewRecorder(ctx, store, nil)
//	p, _ := proxy.New(&proxy.Options{Upstream: up, Recorder: rec})
//	srv, _ := proxy.Listen("127.0.0.1:7000", p, nil)
//	go srv.Serve()
package proxy
