// Package dashboard is mcptape's web dashboard: browse, search, edit and
// live-tail the sessions of a [capture.Store] in a browser.
//
//	d, err := dashboard.New(store, &dashboard.Options{Feed: dashboard.FeedPublish})
//	// with a recorder: capture.RecorderOptions{OnBatch: d.Publish}
//	ln, err := dashboard.Listen(dashboard.DefaultAddr, "")
//	go d.Serve(ln)
//	defer d.Shutdown(ctx)
//
// It reads the store and changes it only through [capture.Editor] (message
// edits, labels) and DeleteSession. What it cannot do itself — tapes,
// replay servers, testing profiles' format, and in front of a recorder its
// status and sending through it — cmd implements as a [Backend] (and a
// [Recording]), so that the package depends on capture and protocol only.
//
// # Pages
//
// A single-page app of plain ES modules and CSS, embedded with embed.FS
// (no build step). Every page is a deep link the server answers with
// index.html: /sessions (filters in the query string), /sessions/{id},
// /sessions/{id}/messages/{seq}, /live, /latency, /profiles, /import,
// /pending, /intercept, /tools, /send?from={seq}. They are listed once, in
// static/js/pages.json ([Server.Pages]), which the app routes on too. The
// modules import one another without a cycle (a test checks the graph):
// pages import nav.js to navigate, never app.js, which loads them; the
// live tail is one connection (tail.js) that pages subscribe to.
//
// # API
//
// JSON under /api/v1. Errors are {"error": "...", "code": "..."} with an
// HTTP status to match (404 not_found, 400 bad_request, 403 csrf, origin
// or host, 401 token, 501 unsupported).
//
//	GET    /info                              version, data dir, which features cmd wired
//	GET    /status                            the recording's state (Recording.Status): {"recording", "paused",
//	                                          "reason", "since", "stored", "lost", "free", "minFree", "size",
//	                                          "maxSize"}; the page polls it and shows a banner when recording is
//	                                          paused or messages were lost
//	GET    /sessions                          sessions newest first: ?method= (or its start) &tool= &status=open|closed|incomplete|errors|ok
//	                                          &era=legacy|modern|http &findings=1|0 &label= &since= &until= (RFC 3339)
//	                                          &q= (text in params and results) &limit= (≤500) &offset=
//	                                          &sort=start|session|era|client|server|duration|calls|errors|findings|status &order=asc|desc
//	GET    /search?q=TEXT&limit=N             the messages that hold TEXT (≤200), newest sessions first, with the text around it
//	GET    /sessions/{id}                     one session, its methods and tools, how to replay it; {id} may be
//	                                          the start of one session's id, here and below
//	GET    /sessions/{id}/search?q=TEXT       the seqs of the session's messages that hold TEXT
//	DELETE /sessions/{id}                     delete it
//	GET    /sessions/{id}/tree                the causal tree (capture.Tree), which messages were edited, a stdio
//	                                          server's stderr lines (the last 500)
//	GET    /sessions/{id}/messages            message index: ?after=SEQ &limit=N (≤10000)
//	GET    /sessions/{id}/exchanges           the HTTP exchanges, headers redacted
//	PUT    /sessions/{id}/labels              {"labels": [...]}
//	GET    /sessions/{id}/tape                download the session as a tape (Backend.ExportTape)
//	GET    /sessions/{id}/har                 download it as HAR 1.2 (opens in Chrome DevTools)
//	GET    /sessions/{id}/replay              the commands that replay it
//	POST   /sessions/{id}/replay              start a replay server (Backend.StartReplay): {"url": ...}
//	DELETE /sessions/{id}/replay              ?url=URL: stop one it started (Backend.StopReplay)
//	GET    /messages/{seq}                    one message: raw, exchange and headers, SSE info, curl (or why
//	                                          none), request, related messages, the tool's schema, a request's answer
//	GET    /messages/{seq}/inputs/{key}       a request inside an MRTR input_required result, with its answer
//	GET    /exchanges/{id}                    one HTTP exchange and its messages
//	GET    /messages/{seq}/edits              every version, the recorded one first
//	POST   /messages/{seq}/edits              {"raw": "<json>", "note": "..."}: a new version
//	POST   /tapes                             import the tape in the body (Backend.ImportTape): {"sessions": [...]}
//	GET    /live/recent                       the latest messages (oldest first), their sessions, the proxy's URL
//	GET    /live                              SSE: message (with a progress notification's numbers), session and
//	                                          lagged events as they are recorded, pending
//	                                          events (Options.Pending) as requests start and stop waiting, intercept
//	                                          events (Options.Intercept) as messages are held and released
//	GET    /latency                           p50/p99 per method and per tool over time: ?measure=upstream (the
//	                                          default: forwarded → upstream response headers, the span and labels of
//	                                          mcptape_proxy_upstream_latency_seconds) or duration (request message →
//	                                          response message) &since= &until= (default: the day before the newest
//	                                          session) &buckets= &method= &tool= &session=
//	GET    /profiles                          testing profiles in Options.Profiles, and the default
//	GET    /profiles/{name}                   one profile's text
//	PUT    /profiles/{name}                   {"content": "..."}: create or replace (validated)
//	DELETE /profiles/{name}                   delete one
//	PUT    /default-profile                   {"name": "..."} ("" clears it)
//	GET    /pending                           requests a replay client waits on a person to answer (Options.Pending):
//	                                          {"active": bool, "requests": [{id, method, params, since, ageMs}]}
//	POST   /pending/{id}                      answer one: {"result": {...}} or {"error": {"code": N, "message": "..."}};
//	                                          400 says what is wrong with an answer (it stays pending), 404 when
//	                                          nothing waits under id, 501 without Options.Pending
//	GET    /intercept                         what a recorder holds (Options.Intercept): {"active", "timeoutMs",
//	                                          "rules": [{rule, enabled}], "held": [capture.HeldMessage + ageMs, leftMs,
//	                                          rpcId, session (id, client, server, status; null until stored), tool],
//	                                          "profiles", "suggest"}
//	PUT    /intercept/rules                   {"rules": [{"rule": "tools/call:delete_*", "enabled": true}, …]}
//	POST   /intercept/{id}                    a capture.Verdict: {"action": "forward"|"edit"|"answer"|"fail", "raw",
//	                                          "malformed", "result", "error", "by"}; 400 says what is wrong (it
//	                                          stays held), 404 when it went on already
//	GET    /intercept/{id}/suggest?profile=N  a testing profile's answer to a held request (Backend.AnswerFromProfile)
//	POST   /send                              {"session"|"path", "method", "params" | "raw" (+ "malformed": true),
//	                                          "headers", "version"}: sent through the recording proxy, to the route
//	                                          that reaches the session's upstream, in a session of the dashboard's
//	                                          own (Recording.Send): replay's SendResult; 409 says why it cannot go
//	GET    /tools                             every tool each upstream listed: {"upstreams": [{…, "tools", "seen",
//	                                          "send": {ok, route, reason}}], "send"}
//	GET    /tools/history?upstream=&path=&name=&offset=&limit=  the recorded calls of a tool, newest first (20 a
//	                                          page, at most 200), and whether there are more
//
// With Options.Metrics the same listener serves /metrics.
//
// # Security
//
// Recorded content is hostile. The pages render it with textContent only
// (never innerHTML, never as a link target), bound what they show (long
// strings are cut, with a "show all" that is still text; the JSON tree
// opens one level at a time and stops at a depth cap), and build data:
// URLs for media content blocks only for image/* and audio/* types whose
// base64 checks out. Every response carries [ContentSecurityPolicy] (no
// inline script or style) and X-Content-Type-Options: nosniff.
//
// Every request needs the dashboard's token (Options.Token, random by
// default), on loopback too, since every user of the machine reaches
// loopback: given once as ?token= (traded for an HttpOnly, SameSite=Strict
// cookie named after the port, and a redirect to the address without it),
// then by that cookie, or as Authorization: Bearer (Prometheus scraping
// /metrics; the local read API of remotestore has a token of its own).
// [Listen] refuses to serve without one. On a loopback listener the Host
// header must name a loopback host, against DNS rebinding. Requests that
// change anything (POST, PUT, DELETE) must come from the dashboard's own
// origin (Origin and Sec-Fetch-Site, when the browser sends them) and
// carry the mcptape_csrf cookie's value in an X-CSRF-Token header
// (double-submit).
//
// # Pending requests
//
// A replay client whose testing profile leaves sampling to a person asks
// through a [Pending] queue ([Pending.Ask] is replay.ClientOptions.Manual);
// with Options.Pending the /pending page shows each request (messages,
// system prompt, model preferences, tools, all as text) with an answer
// editor, the nav counts them, and the live tail announces changes.
// Answers are checked ([ErrBadAnswer]): a JSON object, and for
// sampling/createMessage one with role, content and model.
//
// # Live tail
//
// With [FeedPublish] the recorder calls [Server.Publish] after each batch
// it writes; with [FeedPoll] (a dashboard over a store nothing records
// into) the server polls the store. Either way subscribers get go-sse
// events, and a reconnecting page the ones it missed.
package dashboard
