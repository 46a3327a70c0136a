// Package replay answers from tapes: it stands in for a recorded MCP server
// (for client tests) or a recorded client (for server tests), over
// Streamable HTTP, on both protocol eras.
//
// # Tapes
//
// A [Tape] holds recorded sessions (docs/tape-format.md). [Export] writes a
// store's sessions as a tape, [Import] reads one back, [LoadTape] and
// [ReadTape] read and check a file whole, refusing a malformed tape or an
// unknown version with [ErrNotTape], [ErrTapeInvalid] or [ErrTapeVersion].
// [OpenTape] checks a file the same way but keeps only an index (about 190
// bytes a message, whatever its size) and reads each record from the file
// when a replay or an import needs it: what the CLI uses, so that a tape
// of hundreds of megabytes replays and imports in tens.
//
// # Matching
//
// A [Matcher] decides which recorded request a live one stands for: same
// method, same params once ids, `_meta` (progress tokens, trace context) and
// MRTR inputResponses are set aside; more paths with [IgnorePaths].
// Repeated identical requests get the recorded answers in recorded order.
// A miss explains itself: a [MissError] (wrapping [ErrNoMatch]) names the
// recorded session the client was given, the closest recorded request in
// it with the fields that differ, and the other sessions that hold a
// match.
//
// # Replay server
//
// [NewServerHandler] returns a [Server], an http.Handler that answers live
// clients from a tape as the recorded server did; [NewServer] runs one for
// a Go test:
//
//	ts := replay.NewServer(t, "testdata/weather.tape.json") // strict: differences fail t
//	client.Connect(ts.Endpoint())
//
// The handshake is answered as recorded whatever the client says in it:
// initialize (with a freshly minted Mcp-Session-Id, and the recorded
// protocolVersion as the negotiated one) and server/discover; a strict
// server notes a differing clientInfo, capabilities or protocolVersion as
// a failure, and answers anyway. Every other request is matched as above
// and answered with the live id: a miss gets a [CodeNoMatch] error, and a
// request that matches a recorded one the recorded server never answered
// (over HTTP, a JSON response that carried no JSON-RPC message) a
// [CodeNoAnswer] error, a failure when strict. Server→client requests are
// replayed and the client's answers awaited; MRTR input_required rounds are returned
// and their retries accepted. A strict server compares the client's
// answers with the recorded ones under the matcher's ignore rules: an
// answer by paths relative to its result ("content.text"), a retry's
// inputResponses by params paths ("inputResponses.k.content.text").
//
// A tape can hold several sessions, and each live client gets one of its
// own. A legacy client is one session (from initialize to DELETE); a
// 2026-07-28 client is known by its fingerprint — remote host, path,
// clientInfo and capabilities from `_meta` — from its server/discover or
// first request on. Its repeated discovers (a probe, then other versions)
// are answered in turn from the session it was given, each by the recorded
// discover whose `_meta` is closest; a discover that session has no answer
// left for starts the client over. A new live client gets, of the recorded
// sessions that fit it (with an initialize, or of its era), preferring
// those recorded on the request's path: the one whose handshake is closest
// (the initialize params; or, on 2026-07-28, whether the session holds the
// request, then clientInfo and capabilities, then for a discover the
// protocol version and the rest of its `_meta`), and among equals the
// first that no live client has had yet, so that a second client of the
// same program gets the second session. When every such
// session is taken they are replayed again, the least used first, then in
// recorded order; a strict server reports each reuse as a failure.
//
// [Server.ServeStdio] serves the same replay to one stdio client —
// newline-delimited JSON-RPC on a server's stdin and stdout — whichever
// transport the tape was recorded over; [NewStdioServer] runs one for a Go
// test, its Conn an io.ReadWriteCloser for go-sdk's mcp.IOTransport.
//
// [Annotation]s inject faults (docs/tape-format.md): from the tape, from
// [ServerOptions.Profile], from [ServerOptions.Faults] (or [WithFault] for
// the helper).
//
// # Replay client
//
// [RunClient] (or [NewClient] and [Client.Run]) replays the recorded client
// side of a tape against a live server, for server tests:
//
//	tape, err := replay.LoadTape("testdata/fixture.tape.json")
//	if err != nil {
//		return err
//	}
//	rep, err := replay.RunClient(ctx, tape, "http://127.0.0.1:3001", nil)
//	if err != nil {
//		return err
//	}
//	if !rep.OK() {
//		rep.WriteText(os.Stderr, false) // each differing call: path, recorded, live
//	}
//
// Each tape session is replayed in turn, its recorded client messages in
// order. A legacy session opens its own: initialize with the recorded
// params, then notifications/initialized, and the live Mcp-Session-Id and
// negotiated MCP-Protocol-Version on every later request, the standalone GET
// stream if one was recorded, DELETE at the end if recorded. A 2026-07-28
// session sends server/discover and every request with its recorded `_meta`,
// with the Mcp-Protocol-Version, Mcp-Method and Mcp-Name headers (and
// Mcp-Param-* as recorded). Every request gets a fresh JSON-RPC id; the
// recorded ids are only for finding what belongs together. The client's
// recorded replies are not sent: they are what the answering produces.
//
// The live server's requests are answered as they come: sampling,
// elicitation and roots requests on a call's SSE stream (legacy; the
// answer is POSTed back with the session's headers), and the input requests
// of an input_required result (2026-07-28; the call is retried with a new
// id, inputResponses under the same keys, and the requestState exactly as
// the live server sent it). An answer is the recorded answer to the
// recorded request the live one stands for — matched as the replay server
// matches client requests ([ClientOptions].Matcher: the same method and
// params but for ids and `_meta`), among those of the call, preferring the
// same input request key — else the testing profile's (or a person's);
// [ClientOptions].Strict makes each such unmatched request a difference. A
// subscriptions/listen request, or one the recorded server never answered,
// runs in the background until the recorded client cancelled it (or the
// session ends), once it has carried what it carried in the recording, or
// [ClientOptions.StreamWait] passed.
//
// Each call is compared with the recording as a document: `status` (the
// HTTP status), `result` or `error` (the final response), `rounds` (the
// input_required results before it, as rounds[i].result), `requests` and
// `notifications` (what the server sent on the call's stream, method and
// params). The comparison is structural: member order and number spelling
// do not count, ids are not part of the document, and [DefaultIgnoreKeys]
// (`_meta`, `requestState`, task and resource timestamps) are left out
// wherever they appear; [ClientOptions.Ignore] leaves out more, by path
// (`result.content[0].text`, `notifications[*].params.progress`). The
// [ClientReport] lists each call's [Difference]s, writes them for people
// ([ClientReport.WriteText]) and as JUnit XML for CI
// ([ClientReport.WriteJUnit]), and gives the replay's [TranscriptEntry]
// list, the same for two replays of a tape against a deterministic server.
//
// # Checking and comparing recordings
//
// [Check] tells whether recordings — the sessions of tape files
// ([TapeRecording]) or of a store ([StoreRecording]) — are healthy: each
// client call with its status, and every [Problem] by rule (a JSON-RPC
// error or isError result, a call with no answer, lost messages, findings
// of a kind), failing as [CheckOptions].FailOn says ([DefaultFailOn]).
// The [CheckReport] writes a line per problem at the tape's file:line
// ([CheckReport.WriteText]), JUnit XML with a test case per call
// ([CheckReport.WriteJUnit]) and SARIF 2.1.0 for code-scanning tabs
// ([CheckReport.WriteSARIF]). [Diff] compares two recordings: tools,
// prompts and resources added, removed and changed, each field as a path
// ([capture.CatalogChange]), the calls whose params or answers differ
// (the replay client's comparison), the calls only one made, and latency
// per method. A project's own tests gate on them with [AssertHealthy] and
// [AssertSameRecording].
//
// # Testing profiles
//
// A [Profile] (docs/testing-profiles.md) answers what a recording cannot:
// [Profile.AnswerSampling] (a mock template, model and stop reason,
// overridden by model-hint globs, with tool_use blocks for tool-enabled
// sampling, or [ErrManual] for a person to answer), [Profile.AnswerElicitation]
// (accept, decline or cancel by message glob, else the default), and
// [Profile.AnswerRoots]; the replay server takes its Faults. [LoadProfile]
// reads and checks one, refusing unknown fields and broken rules with
// [ErrProfileInvalid] naming the field.
//
// With the manual sampling provider, the replay client hands the sampling
// requests it has no recorded answer for to [ClientOptions].Manual, a
// person behind it (`mcptape replay client` wires the dashboard's pending
// requests page), and waits up to ManualTimeout while it reads on; the
// call's own CallTimeout stops meanwhile.
package replay
