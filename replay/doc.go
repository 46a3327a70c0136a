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
// Among the recorded requests it matches, the replay server answers with
// the closest in what else a server answers by: the `_meta` members
// (protocol version, capabilities, clientInfo, the rest but progress
// tokens and trace context), the path, the MCP-Protocol-Version,
// Mcp-Method, Mcp-Name and Mcp-Param-* headers, whether credentials came
// (never their value), Origin, Accept and Content-Type. Recorded order
// breaks ties: repeated identical requests get the recorded answers in
// recorded order. A miss explains itself: a [MissError] (wrapping
// [ErrNoMatch]) names the recorded session the client was given, the
// closest recorded request in it with the fields that differ, and the
// other sessions that hold a match.
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
// Each HTTP request is answered with the recorded exchange of the request
// that matches it best: its status, its headers (the live session's id
// where the recording had one and nowhere else; the OAuth metadata and
// challenge URLs mapped to the replay's address; not those of the
// recorded connection) and its body (a JSON body with the live id on the
// response, an SSE stream replayed with live ids and progress tokens,
// paced as recorded or at once, a refusal or a plain body as it was).
// Exchanges that carried no MCP traffic (CORS preflights, OAuth metadata,
// probes) are answered as recorded by method and path; a path the
// recording never saw gets the recorded server's answer to an unknown
// path, else 404. A tape recorded with routes serves each under /NAME.
//
// A legacy initialize opens a live session with the recorded session
// whose initialize is closest, the first not yet given to another client
// among equals (a program run twice gets the second recorded run), with a
// freshly minted Mcp-Session-Id when the recorded server gave one; its
// requests are answered from that session, and after its DELETE from
// what the recorded server answered after the DELETE. Requests without a
// session (2026-07-28 clients, a stateless server's) are answered from
// every recorded session, each client — known by its fingerprint: remote
// host, path, clientInfo and capabilities — in turn. The handshake is
// answered as recorded whatever the client says in it (the recorded
// protocolVersion is the negotiated one); a strict server notes a
// differing one as a failure. A request that matches a recorded one the
// recorded server never answered (the connection broke, or mcptape
// answered in its place) gets a [CodeNoAnswer] error, a failure when
// strict. Server→client requests are replayed with their recorded ids
// and the client's answers awaited; a response that follows its call's
// notifications reaches the client after them in a separate read. MRTR
// input_required rounds are returned and their retries accepted. A strict
// server compares the client's answers with the recorded ones under the
// matcher's ignore rules: an answer by paths relative to its result
// ("content.text"), a retry's inputResponses by params paths
// ("inputResponses.k.content.text").
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
