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

// Strings remembers the strings a decoder reads again and again — tool
// names, client names and versions — and the Implementations they make,
// so that reading them once more allocates nothing (the recorder decodes
// every message it records). It forgets everything once it holds
// maxStrings of them, so a hostile peer cannot grow it. Not safe for
// concurrent use; the zero value is ready, and a nil *Strings remembers
// nothing.
type Strings struct {
	s     map[string]string
	impls map[string]*Implementation
}

// maxStrings bounds the strings and Implementations a Strings remembers.
const maxStrings = 4096

// maxRemembered bounds the length of one remembered string.
const maxRemembered = 256

// str is str, remembering what it read.
func (c *Strings) str(v []byte, dst *string) bool {
	if c == nil || len(v) < 2 || len(v) > maxRemembered+2 || v[0] != '"' || v[len(v)-1] != '"' {
		return str(v, dst)
	}
	in := v[1 : len(v)-1]
	if s, ok := known[string(in)]; ok {
		*dst = s
		return true
	}
	if s, ok := c.s[string(in)]; ok {
		*dst = s
		return true
	}
	if !str(v, dst) {
		return false
	}
	if c.s == nil || len(c.s) >= maxStrings {
		c.s = map[string]string{}
	}
	c.s[string(in)] = *dst
	return true
}

// impl is parseImpl, remembered by the member's bytes: the Implementation
// it returns may be one it returned before, which callers must not modify.
func (c *Strings) impl(v []byte) *Implementation {
	if c == nil || len(v) > maxRemembered {
		return parseImpl(v, c)
	}
	if impl, ok := c.impls[string(v)]; ok {
		return impl
	}
	impl := parseImpl(v, c)
	if c.impls == nil || len(c.impls) >= maxStrings {
		c.impls = map[string]*Implementation{}
	}
	c.impls[string(v)] = impl
	return impl
}
