// Package protocol holds the wire facts of the Model Context Protocol that
// mcptape needs to decode what it forwards: JSON-RPC framing, Server-Sent
// Events framing, protocol revisions and their eras, the HTTP headers and the
// `_meta` keys.
//
// It performs no I/O beyond readers and writers handed to it and imports
// nothing else of mcptape. Everything here is permissive by design: the proxy
// must record whatever crosses it, so decoders classify rather than reject,
// and report what is wrong as a [Message.Problem] or an [Event] flag instead
// of an error that would lose the bytes.
//
// # JSON-RPC
//
// [Split] turns one body or one SSE data payload into messages, element by
// element for 2025-03-26 batches. Every [Message] keeps the exact bytes it
// came from in [Message.Raw]; ids are kept as raw JSON so that `1`, `1.0` and
// `"1"` stay distinct.
//
//	for _, m := range protocol.Split(body) {
//		fmt.Println(m.Kind, m.Method, string(m.ID))
//	}
//
// # Server-Sent Events
//
// [SSEParser] is a push parser: feed it bytes as they arrive and it emits
// each [Event] with its raw text, including comments, `retry` and priming
// events (an id with empty data), which the stock go-sse reader hides.
//
// # Revisions and eras
//
// The legacy era (2024-11-05 to 2025-11-25) negotiates a version with
// `initialize`; the modern era (2026-07-28 and later) is stateless and carries
// the version in every request's `_meta` and in the MCP-Protocol-Version
// header. [EraOf] maps a version string to its era.
package protocol
