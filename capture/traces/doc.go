// Package traces exports recorded MCP calls as OpenTelemetry spans over
// OTLP/HTTP, to any collector or tracing backend (the OpenTelemetry
// Collector, Jaeger, Tempo).
//
// An [Exporter] reads what a [capture.Recorder] stores, through the
// recorder's OnBatch hook, and so sees every leg alike (reverse, forward,
// MITM, stdio, and what a store's owner ingests from wraps' spools). It
// never touches traffic: OnBatch copies the few fields a span needs into a
// bounded queue and returns; when the queue is full (a collector that
// cannot keep up or is down) the messages are left out of the traces and
// counted, never waited for.
//
// # Spans
//
// Each JSON-RPC request that gets an answer is one span, from the request
// to its answer as each crossed mcptape, named after the OpenTelemetry
// semantic conventions for MCP: "METHOD TARGET" (tools/call echo,
// prompts/get summary) or just "METHOD". A server→client request
// (sampling, elicitation, roots) is a child span of the call whose stream
// carried it; the rounds of a 2026-07-28 multi round-trip request are
// child spans of one span for the logical call, which ends with the last
// round's answer; progress, log and cancellation notifications are span
// events of the request they belong to. A request whose traceparent (W3C
// Trace Context) is in params._meta (SEP-414) or in the HTTP request's
// traceparent header joins the client's trace.
//
// Attributes follow the conventions where they exist: mcp.method.name,
// gen_ai.tool.name, gen_ai.prompt.name, gen_ai.operation.name,
// mcp.resource.uri, jsonrpc.request.id, mcp.protocol.version,
// mcp.session.id (mcptape's session id, the one `mcptape ls` prints, never
// a server's Mcp-Session-Id), network.transport, network.protocol.name,
// server.address and server.port (the upstream), error.type,
// rpc.response.status_code; and mcptape's own: mcptape.era, mcptape.leg,
// mcptape.route, mcptape.upstream, mcptape.message.seq,
// mcptape.direction, http.response.status_code of the exchange.
// A JSON-RPC error or an isError tool result sets the span's status to
// Error. A request never answered ends when its session does, or after
// [Options.OpenTimeout], with error.type "unanswered".
//
// # Metrics
//
// With [Options.Registerer] set, the exporter counts
// mcptape_traces_spans_exported_total, mcptape_traces_spans_failed_total
// (spans whose export failed), mcptape_traces_messages_dropped_total
// (messages left out of the traces when the queue was full) and shows
// mcptape_traces_calls_open.
package traces
