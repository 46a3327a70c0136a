package dashboard

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// curlFor is "Copy as curl" for a client message: a command that sends it
// again, through the recording proxy when the dashboard knows its address
// (Options.ProxyURL), else to the upstream. A request of a legacy session
// cannot reuse the recorded Mcp-Session-Id (only its pseudonym is stored),
// so the command opens a session of its own first: initialize, with the
// recorded client's version, capabilities and clientInfo, then
// notifications/initialized, then the message with the new session's id.
// note says what the command cannot repeat, or why there is none.
func (s *Server) curlFor(sess *capture.Session, x *capture.Exchange, m *capture.Message) (cmd, note string) {
	switch {
	case m.Direction != protocol.ClientToServer:
		return "", ""
	case m.Kind == protocol.KindFrame || m.Kind == protocol.KindInvalid:
		return "", "not a JSON-RPC message, so there is nothing to send again"
	case m.Kind.IsResponse():
		return "", "a client's answer to a server request is not sent on its own: the server must be waiting for it; repeat the call that set it off"
	case x == nil:
		return "", "the HTTP exchange that carried it is not stored"
	}
	base, via := strings.TrimRight(s.proxyBase(), "/"), "through the recording proxy"
	switch {
	case base == "" && sess != nil:
		base, via = strings.TrimRight(sess.Upstream, "/"), "to the upstream directly (this dashboard is not serving a recorder)"
	case sess != nil && (sess.Leg == capture.LegForward || sess.Leg == capture.LegMITM):
		// The client used the server's own URL, with mcptape as its proxy.
		base, via = strings.TrimRight(sess.Upstream, "/"), "to the server's own URL (add -x "+strings.TrimRight(s.proxyBase(), "/")+" to send it through the recording forward proxy)"
	case sess != nil && sess.Route != "":
		base += "/" + url.PathEscape(sess.Route)
	}
	if base == "" {
		return "", "the session's upstream is not recorded"
	}
	var notes []string
	headers := curlHeaders(x.RequestHeader, &notes)
	url := base + x.URL
	if strings.Contains(x.URL, capture.Redacted) {
		url = strings.ReplaceAll(url, capture.Redacted, "<secret>")
		notes = append(notes, "fill in <secret> in the URL: it was redacted when recorded")
	}
	if strings.Contains(string(m.Raw), capture.Redacted) {
		notes = append(notes, "the body holds "+capture.Redacted+" where a secret was removed when recorded")
	}
	method := x.Method
	if method == "" {
		method = http.MethodPost
	}
	legacy := sess != nil && sess.Era != protocol.EraModern && headerHas(x.RequestHeader, protocol.HeaderSessionID) &&
		m.Method != protocol.MethodInitialize && m.Method != protocol.MethodDiscover
	var b strings.Builder
	b.WriteString("# Sends message #" + strconv.FormatUint(m.Seq, 10) + " again " + via + ".\n")
	for _, n := range notes {
		b.WriteString("# Note: " + n + ".\n")
	}
	if !legacy {
		b.WriteString(curlLine(method, "'"+strings.ReplaceAll(url, "'", `'\''`)+"'", headers, m.Raw, ""))
		return b.String(), strings.Join(notes, "; ")
	}
	b.WriteString("# The recorded Mcp-Session-Id is not kept (only a pseudonym of it), so this opens a new session first.\n")
	b.WriteString("URL=" + shellQuote(url) + "\n")
	version := sess.Version
	if version == "" {
		version = protocol.V20251125
	}
	caps := json.RawMessage(sess.ClientCapabilities)
	if len(caps) == 0 {
		caps = json.RawMessage(`{}`)
	}
	client := sess.Client
	if client.Name == "" {
		client.Name = "mcptape-curl"
	}
	init, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "mcptape-curl-init", "method": protocol.MethodInitialize,
		"params": map[string]any{"protocolVersion": version, "capabilities": caps, "clientInfo": client}})
	base2 := []string{"Content-Type: application/json", "Accept: application/json, text/event-stream"}
	b.WriteString("SID=$(curl -sS -D - -o /dev/null \"$URL\"")
	for _, h := range base2 {
		b.WriteString(" -H " + shellQuote(h))
	}
	b.WriteString(" \\\n  --data-raw " + shellQuote(string(init)) + " | tr -d '\\r' | awk 'tolower($1) == \"mcp-session-id:\" { print $2 }')\n")
	b.WriteString("if [ -z \"$SID\" ]; then echo 'initialize returned no Mcp-Session-Id: is the server up, and is this its MCP endpoint?' >&2; else\n")
	b.WriteString("curl -sS -o /dev/null \"$URL\"")
	for _, h := range append(base2, protocol.HeaderProtocolVersion+": "+version) {
		b.WriteString(" -H " + shellQuote(h))
	}
	b.WriteString(" -H \"Mcp-Session-Id: $SID\" --data-raw '{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}'\n")
	b.WriteString(curlLine(method, `"$URL"`, headers, m.Raw, `"Mcp-Session-Id: $SID"`))
	b.WriteString("fi\n")
	return b.String(), strings.Join(notes, "; ")
}

// curlLine is one curl command; extra is a header already quoted.
func curlLine(method, url string, headers []string, body []byte, extra string) string {
	var b strings.Builder
	b.WriteString("curl -sS -N")
	if method != http.MethodGet && method != http.MethodPost {
		b.WriteString(" -X " + shellQuote(method))
	}
	b.WriteString(" " + url)
	for _, h := range headers {
		b.WriteString(" \\\n  -H " + shellQuote(h))
	}
	if extra != "" {
		b.WriteString(" \\\n  -H " + extra)
	}
	if len(body) > 0 && method != http.MethodGet {
		b.WriteString(" \\\n  --data-raw " + shellQuote(string(body)))
	}
	b.WriteString("\n")
	return b.String()
}

// curlHeaders are the recorded request headers a repeat sends: not the
// hop-by-hop ones, nor those curl sets itself, nor the session id; a
// redacted value becomes a placeholder, with a note.
func curlHeaders(h http.Header, notes *[]string) []string {
	keys := make([]string, 0, len(h))
	for k := range h {
		switch http.CanonicalHeaderKey(k) {
		case "Host", "Content-Length", "Accept-Encoding", "Connection", "Keep-Alive", "Te", "Trailer",
			"Transfer-Encoding", "Upgrade", "Proxy-Connection", "User-Agent", "Mcp-Session-Id", "Last-Event-Id":
			continue
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var out []string
	for _, k := range keys {
		for _, v := range h[k] {
			if strings.Contains(v, capture.Redacted) {
				ph := "<" + strings.ToLower(k) + ">"
				v = strings.ReplaceAll(v, capture.Redacted, ph)
				*notes = append(*notes, "fill in "+ph+": it was redacted when recorded")
			}
			out = append(out, k+": "+v)
		}
	}
	return out
}

func headerHas(h http.Header, name string) bool {
	for k := range h {
		if strings.EqualFold(k, name) {
			return true
		}
	}
	return false
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
