package capture

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
)

// maxHeaderBytes bounds the request or the response headers the recorder
// stores for one exchange: what net/http's server accepts in a request
// head (http.DefaultMaxHeaderBytes), or RecorderOptions.MaxMessageSize when
// that is smaller. Larger headers are forwarded whole and stored cut, with
// a finding: one exchange's headers must never make a record the store
// cannot hold (which would cost the records written beside it).
const maxHeaderBytes = http.DefaultMaxHeaderBytes

// headerCutMarker ends a header value the recorder cut.
const headerCutMarker = "…[cut by mcptape]"

// capHeader returns h, or when its names and values take more than the
// limit, a copy cut to it: values in name order until the budget is
// spent, the value that crosses it cut and marked with headerCutMarker,
// the headers after it left out; cut reports that. The finding on the
// exchange's record says so.
func (xs *exchange) capHeader(h http.Header, which string) (_ http.Header, cut bool) {
	limit := min(maxHeaderBytes, xs.out.o.MaxMessageSize)
	size := 0
	for k, vs := range h {
		for _, v := range vs {
			size += len(k) + len(v) + 4 // "k: v\r\n"
		}
	}
	if size <= limit {
		return h, false
	}
	out := make(http.Header, len(h))
	left, dropped := limit, 0
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range h {
			if !yield(k) {
				return
			}
		}
	}) {
		for _, v := range h[k] {
			cost := len(k) + len(v) + 4
			switch {
			case left <= 0:
				dropped++
			case cost <= left:
				out[k] = append(out[k], v)
				left -= cost
			default:
				keep := max(0, left-len(k)-4-len(headerCutMarker))
				out[k] = append(out[k], v[:min(keep, len(v))]+headerCutMarker)
				left = 0
			}
		}
	}
	text := fmt.Sprintf("%s headers of %d bytes are over the recording limit of %d bytes: stored cut (values marked %q",
		which, size, limit, headerCutMarker)
	if dropped > 0 {
		text += fmt.Sprintf(", %d header value(s) left out", dropped)
	}
	text += "); the traffic was forwarded whole"
	f := Finding{FindingOversize, text}
	xs.x.FindingList = append(xs.x.FindingList, f)
	xs.out.met.findingList([]Finding{f})
	return out, true
}

// MaxSessionIDLen bounds a session id, in bytes. The recorder's ids are
// about 30 bytes; the id is part of the store's key of every record of
// its session, so a store refuses a longer one, and an import refuses it
// before writing anything.
const MaxSessionIDLen = 256

// CheckSessionID says why id cannot be a session's id (empty, or longer
// than MaxSessionIDLen), or returns nil.
func CheckSessionID(id string) error {
	switch {
	case id == "":
		return errors.New("a session id is empty")
	case len(id) > MaxSessionIDLen:
		return fmt.Errorf("a session id of %d bytes is longer than the %d bytes a session id may have", len(id), MaxSessionIDLen)
	}
	return nil
}
