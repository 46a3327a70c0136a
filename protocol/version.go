package protocol

// Protocol revision strings, oldest first.
const (
	V20241105 = "2024-11-05"
	V20250326 = "2025-03-26"
	V20250618 = "2025-06-18"
	V20251125 = "2025-11-25"
	V20260728 = "2026-07-28"
)

// Versions lists the revisions mcptape knows, oldest first.
var Versions = []string{V20241105, V20250326, V20250618, V20251125, V20260728}

// FirstModern is the first revision of the stateless (modern) era.
const FirstModern = V20260728

// Era is the generation of the protocol a session speaks.
type Era uint8

const (
	// EraUnknown means no message has said which era the session speaks yet.
	EraUnknown Era = iota
	// EraLegacy is 2024-11-05 to 2025-11-25: initialize, sessions, server→client requests.
	EraLegacy
	// EraModern is 2026-07-28 and later: stateless, server/discover, MRTR.
	EraModern
)

func (e Era) String() string {
	switch e {
	case EraLegacy:
		return "legacy"
	case EraModern:
		return "modern"
	}
	return "unknown"
}

// ParseEra is the inverse of [Era.String]; anything else is EraUnknown.
func ParseEra(s string) Era {
	switch s {
	case "legacy":
		return EraLegacy
	case "modern":
		return EraModern
	}
	return EraUnknown
}

// MarshalText implements encoding.TextMarshaler.
func (e Era) MarshalText() ([]byte, error) { return []byte(e.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (e *Era) UnmarshalText(b []byte) error { *e = ParseEra(string(b)); return nil }

// EraOf returns the era of a revision string. Revision strings are dates, so
// any well-formed date at or after [FirstModern] is modern, and any earlier
// well-formed date is legacy; a malformed string is EraUnknown.
func EraOf(version string) Era {
	if !isDate(version) {
		return EraUnknown
	}
	if version >= FirstModern {
		return EraModern
	}
	return EraLegacy
}

// Known reports whether version is one of [Versions].
func Known(version string) bool {
	for _, v := range Versions {
		if v == version {
			return true
		}
	}
	return false
}

// AllowsBatches reports whether the revision allows JSON-RPC batches (only 2025-03-26).
func AllowsBatches(version string) bool { return version == V20250326 }

func isDate(s string) bool {
	if len(s) != 10 || s[4] != '-' || s[7] != '-' {
		return false
	}
	for i, c := range []byte(s) {
		if i == 4 || i == 7 {
			continue
		}
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
