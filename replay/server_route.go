package replay

import (
	"net/url"
	"strings"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// Routes and the replay's own address. A tape recorded with `record
// --route NAME=URL` holds each route's sessions under its name; the replay
// serves each under /NAME/, as the recorder did. The OAuth URLs a recorded
// server named itself by are mapped to the replay's address as the client
// addressed it, as the recorder mapped them to its own.

// splitRoute is the route a live path names and the path below it: a
// tape recorded with routes serves each under /NAME, and a well-known
// path with the route inside it (a client discovering metadata for
// /NAME/mcp asks /.well-known/oauth-protected-resource/NAME/mcp) is the
// route's well-known path.
func (s *Server) splitRoute(p string) (route, rest string, prefixed bool) {
	route, rest = s.routeOf(p)
	if route != "" {
		return route, rest, true
	}
	// A tape of one route, none without: its paths answer without the
	// prefix too.
	if len(s.routes) == 1 && !s.unrouted {
		for name := range s.routes {
			return name, p, false
		}
	}
	return "", p, false
}

func (s *Server) routeOf(p string) (route, rest string) {
	if len(s.routes) == 0 {
		return "", p
	}
	seg, tail, _ := strings.Cut(strings.TrimPrefix(p, "/"), "/")
	if s.routes[seg] {
		return seg, "/" + tail
	}
	if name, ok := strings.CutPrefix(p, "/.well-known/"); ok {
		kind, in, _ := strings.Cut(name, "/")
		seg, tail, _ := strings.Cut(in, "/")
		if s.routes[seg] {
			if tail == "" {
				return seg, "/.well-known/" + kind
			}
			return seg, "/.well-known/" + kind + "/" + tail
		}
	}
	return "", p
}

// front is the replay's own address as the client of lr addressed it,
// and the route's prefix as it did.
func front(lr *liveReq) (scheme, host, prefix string) {
	scheme = "http"
	if lr.r.TLS != nil {
		scheme = "https"
	}
	host = lr.r.Host
	if lr.prefixed {
		prefix = "/" + lr.route
	}
	return scheme, host, prefix
}

// mapChallenges maps the resource_metadata URLs of recorded
// WWW-Authenticate values from the recorded server's origin to the
// replay's, as the recorder maps them to its own: a client fetches the
// metadata from the replay.
func (s *Server) mapChallenges(lr *liveReq, rs *recSession, vs []string) []string {
	up, err := url.Parse(rs.s.Upstream)
	if err != nil || up.Host == "" {
		return vs
	}
	scheme, host, prefix := front(lr)
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = protocol.EditAuthParam(v, "resource_metadata", func(u string) (string, bool) {
			return protocol.MapOrigin(u, up, scheme, host, prefix)
		})
	}
	return out
}

// mapMetadata maps the resource of recorded protected-resource metadata
// (RFC 9728) to the replay's address, as the recorder does: a client
// checks it against the URL it connects to.
func (s *Server) mapMetadata(lr *liveReq, rs *recSession, x *capture.Exchange, body []byte) []byte {
	if x.Rewritten == "" || !strings.Contains(x.Rewritten, "protected-resource metadata") {
		return body
	}
	up, err := url.Parse(rs.s.Upstream)
	if err != nil || up.Host == "" {
		return body
	}
	scheme, host, prefix := front(lr)
	out, _ := protocol.EditStringMember(body, "resource", func(u string) (string, bool) {
		return protocol.MapOrigin(u, up, scheme, host, prefix)
	})
	return out
}
