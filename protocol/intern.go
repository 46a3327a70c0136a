package protocol

// known holds the strings the decoders meet in nearly every message —
// method names, protocol versions, result types, roles — so that reading
// one from the wire takes the constant instead of allocating a copy.
// Read-only after init.
var known = func() map[string]string {
	m := map[string]string{}
	add := func(ss ...string) {
		for _, s := range ss {
			m[s] = s
		}
	}
	for s := range specMethods {
		add(s)
	}
	add(V20241105, V20250326, V20250618, V20251125, V20260728,
		"2.0", "message", "endpoint", "complete", "input_required", "task",
		"user", "assistant", "text", "endTurn", "stopSequence", "maxTokens", "toolUse",
		"form", "url", "accept", "decline", "cancel")
	return m
}()

// knownString is string(b), without allocating when b is one of known.
func knownString(b []byte) string {
	if s, ok := known[string(b)]; ok {
		return s
	}
	return string(b)
}
