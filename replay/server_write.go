package replay

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// Writing a recorded HTTP response: its status, its headers as the
// recorded server sent them (less what belonged to the recorded
// connection, with the live session's id and the replay's own address
// where the recording had the server's), its body as recorded.

// liveReq is a live HTTP request as the replay server reads it: the
// route it came to, its path below the route's prefix, its facts.
type liveReq struct {
	r     *http.Request
	route string // "" for a tape recorded with one upstream
	path  string // the path below the route's prefix
	// prefixed says that the path named the route (a tape of one route
	// answers without it too)
	prefixed bool
	facts    *httpFacts
}

// writeHeader writes the status and headers of recorded exchange x
// (recorded in session rs) as the answer to lr; sid is the live session's
// id, put where the recording had one ("" leaves it out).
func (s *Server) writeHeader(w http.ResponseWriter, lr *liveReq, rs *recSession, x *capture.Exchange, sid string) {
	h := w.Header()
	if x == nil {
		return
	}
	s.copyHeaders(h, lr, rs, x, sid)
	writeStatus(w, x, cmpStatus(x.Status))
}

// writeStatus writes a replayed response's status. A recorded response
// without a Content-Length gets none (Go would add one to a short body).
func writeStatus(w http.ResponseWriter, x *capture.Exchange, status int) {
	w.WriteHeader(status)
	if x.ResponseHeader.Get("Content-Length") == "" {
		flush(w)
	}
}

// copyHeaders copies recorded response headers, leaving out what belongs
// to the recorded connection and redacted values, with the live session's
// id in place of the recorded one and the OAuth URLs of the recorded
// server mapped to the replay's address; they replace what the replay set
// before. A response recorded without a Content-Type gets none (Go would
// guess one), unless the tape holds no headers at all (one made by hand).
func (s *Server) copyHeaders(dst http.Header, lr *liveReq, rs *recSession, x *capture.Exchange, sid string) {
	hadType := false
	for k, vs := range x.ResponseHeader {
		switch ck := http.CanonicalHeaderKey(k); ck {
		case "Content-Length", "Date", "Connection", "Keep-Alive", "Transfer-Encoding", "Set-Cookie", "Content-Encoding", "Trailer":
			continue
		case "Mcp-Session-Id":
			if len(vs) > 0 && sid != "" {
				dst.Set(protocol.HeaderSessionID, sid)
			}
			continue
		case "Content-Type":
			hadType = len(vs) > 0
		case "Www-Authenticate":
			vs = s.mapChallenges(lr, rs, vs)
		}
		var out []string
		for _, v := range vs {
			if !strings.Contains(v, capture.Redacted) {
				out = append(out, v)
			}
		}
		if len(out) > 0 {
			dst[http.CanonicalHeaderKey(k)] = out // in place of what the replay set itself
		}
	}
	if !hadType && len(x.ResponseHeader) > 0 {
		dst["Content-Type"] = nil
	}
}

// bodyOf is the body the recorded server sent in an exchange: msgs, the
// messages recorded in it (a JSON body's message or batch, a plain body's
// frame), the response to the live request given the live id (ref names
// the recorded request it answered; 0: none).
func bodyOf(rs *recSession, msgs []*msgRef, req uint64, id []byte) ([]byte, bool) {
	var b bytes.Buffer
	batch := false
	n := 0
	for _, ref := range msgs {
		if ref.Direction != protocol.ServerToClient || ref.Kind == protocol.KindStderr {
			continue
		}
		m := rs.message(ref)
		if m == nil {
			return nil, false
		}
		raw := m.Raw
		if m.Kind.IsResponse() && req != 0 && m.Links.Request == req {
			raw = responseWithID(raw, id)
		}
		if m.Batch >= 0 {
			if !batch {
				b.WriteByte('[')
			} else {
				b.WriteByte(',')
			}
			batch = true
		} else if batch {
			b.WriteByte(']')
			batch = false
		}
		b.Write(raw)
		n++
	}
	if batch {
		b.WriteByte(']')
	}
	return b.Bytes(), true
}

// sizeAs gives a replayed body a Content-Length where the recorded
// response had one (the body may differ in length: a live id).
func sizeAs(h http.Header, x *capture.Exchange, body []byte) {
	if x.ResponseHeader.Get("Content-Length") != "" {
		h.Set("Content-Length", strconv.Itoa(len(body)))
	}
}

// writeExchange answers lr with recorded exchange x of rs as it was: its
// status, headers and body (msgs). It reports false when the tape could
// not give the records (the report says why).
func (s *Server) writeExchange(w http.ResponseWriter, lr *liveReq, rs *recSession, ref *xRef, msgs []*msgRef, sid string) bool {
	x := rs.exchange(ref)
	if x == nil {
		return false
	}
	body, ok := bodyOf(rs, msgs, 0, nil)
	if !ok {
		return false
	}
	body = s.mapMetadata(lr, rs, x, body)
	sizeAs(w.Header(), x, body)
	s.writeHeader(w, lr, rs, x, sid)
	_, _ = w.Write(body)
	return true
}
