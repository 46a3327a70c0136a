package replay

import (
	"encoding/json"
	"fmt"
	"time"
)

// Annotation is a fault the replay server injects into the live requests
// it matches (docs/tape-format.md, "Annotations"). It comes from a tape's
// annotations, a testing profile's faults ([ServerOptions.Profile]),
// [ServerOptions.Faults], or the test helper's [WithFault].
type Annotation struct {
	// Match selects requests: Method, and optionally Name (the tool,
	// prompt or resource). An empty Method matches every request.
	Match Match `json:"match"`
	// Delay waits this long before answering.
	Delay Duration `json:"delay,omitzero"`
	// Error answers with this JSON-RPC error instead of the recorded response.
	Error *RPCError `json:"error,omitempty"`
	// Status answers with this HTTP status and an empty body.
	Status int `json:"status,omitempty"`
	// DropAfterEvents aborts an SSE response after this many events.
	DropAfterEvents int `json:"dropAfterEvents,omitempty"`
	// ListChanged ("tools", "prompts" or "resources") sends the matching
	// notifications/…/list_changed after the response, on the client's
	// open streams that take it (the standalone GET stream; a
	// subscriptions/listen that opted into the kind); with none open, it
	// waits for one, and the server logs a warning.
	ListChanged string `json:"listChanged,omitempty"`
}

// Match selects live requests by method and name.
type Match struct {
	Method string `json:"method,omitempty"`
	Name   string `json:"name,omitempty"`
}

func (m Match) matches(method, name string) bool {
	return (m.Method == "" || m.Method == method) && (m.Name == "" || m.Name == name)
}

// RPCError is a JSON-RPC error object.
type RPCError struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Duration is a time.Duration written as a string ("1.5s") in JSON.
type Duration time.Duration

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON implements json.Unmarshaler; it takes "1.5s" or a number
// of milliseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %q: %w", s, err)
		}
		*d = Duration(v)
		return nil
	}
	var ms float64
	if err := json.Unmarshal(b, &ms); err != nil {
		return fmt.Errorf("duration %s: want a string like \"1.5s\" or milliseconds", b)
	}
	*d = Duration(ms * float64(time.Millisecond))
	return nil
}

func (a *Annotation) check() error {
	switch a.ListChanged {
	case "", "tools", "prompts", "resources":
	default:
		return fmt.Errorf("listChanged %q: want tools, prompts or resources", a.ListChanged)
	}
	if a.Status != 0 && (a.Status < 100 || a.Status > 599) {
		return fmt.Errorf("status %d is not an HTTP status", a.Status)
	}
	if a.Delay < 0 || a.DropAfterEvents < 0 {
		return fmt.Errorf("delay and dropAfterEvents cannot be negative")
	}
	return nil
}

// faultsFor lists the faults that match a live request, in the order they
// apply: the tape's, the profile's, the options'.
func (s *Server) faultsFor(method, name string) []Annotation {
	var out []Annotation
	for _, f := range s.faults {
		if f.Match.matches(method, name) {
			out = append(out, f)
		}
	}
	return out
}
