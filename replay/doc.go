// Package replay answers from tapes: it stands in for a recorded MCP server
// (for client tests) or a recorded client (for server tests), over
// Streamable HTTP, on both protocol eras.
//
// # Tapes
//
// A [Tape] holds recorded sessions (docs/tape-format.md). [Export] writes a
// store's sessions as a tape, [Import] reads one back, [LoadTape] and
// [ReadTape] read and check a file, refusing a malformed tape or an unknown
// version with [ErrNotTape], [ErrTapeInvalid] or [ErrTapeVersion].
//
// # Matching
//
// A [Matcher] decides which recorded request a live one stands for: same
// method, same params once ids, `_meta` (progress tokens, trace context) and
// MRTR inputResponses are set aside; more paths with [IgnorePaths].
// Repeated identical requests get the recorded answers in recorded order.
// A miss explains itself: the closest recorded request and the fields that
// differ.
package replay
