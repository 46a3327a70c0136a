package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"unicode/utf8"
)

// errNotObject is returned by members for input that is not a JSON object.
var errNotObject = errors.New("not a JSON object")

// members calls f with each top-level member of the JSON object b, the
// value as a sub-slice of b (never a copy: a 10 MiB result costs nothing
// here). b must be valid JSON; check with json.Valid first. A key with
// escapes is unquoted; f returning false stops the walk. The key is a view
// into b too (unless unquoted), valid during the call: compare it with
// string(key), which does not allocate.
func members(b []byte, f func(key, value []byte) bool) error {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return errNotObject
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return nil
	}
	for i < len(b) {
		if b[i] != '"' {
			return errNotObject
		}
		ks := i
		i = skipString(b, i)
		if i-ks < 2 {
			return errNotObject
		}
		key := memberKey(b[ks:i])
		i = skipSpace(b, i)
		if i >= len(b) || b[i] != ':' {
			return errNotObject
		}
		i = skipSpace(b, i+1)
		vs := i
		i = skipValue(b, i)
		if !f(key, b[vs:i]) {
			return nil
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			break
		}
		if b[i] == '}' {
			return nil
		}
		if b[i] != ',' {
			return errNotObject
		}
		i = skipSpace(b, i+1)
	}
	return errNotObject
}

// memberKey unquotes a member name (raw with its quotes): a view into raw
// unless it has escapes.
func memberKey(raw []byte) []byte {
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return raw[1 : len(raw)-1]
	}
	key, _ := unquote(raw)
	return []byte(key)
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at b[i] == '"'
// (the input is valid JSON, so it only looks for the closing quote, with
// IndexByte, and counts the backslashes before it).
func skipString(b []byte, i int) int {
	i++
	for {
		k := bytes.IndexByte(b[i:], '"')
		if k < 0 {
			return len(b)
		}
		q := i + k
		n := 0
		for j := q - 1; j >= i && b[j] == '\\'; j-- {
			n++
		}
		if n%2 == 0 {
			return q + 1
		}
		i = q + 1
	}
}

// skipValue returns the index after the (valid) JSON value at b[i].
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = skipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return len(b)
	}
	for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && b[i] != ' ' && b[i] != '\t' && b[i] != '\n' && b[i] != '\r' {
		i++
	}
	return i
}

// Member returns the value of the top-level member key of the JSON object
// obj, as a sub-slice, and its offsets; ok is false when obj is not valid
// JSON, not an object, or lacks the member.
func Member(obj []byte, key string) (value []byte, start, end int, ok bool) {
	if !json.Valid(obj) {
		return nil, 0, 0, false
	}
	_ = members(obj, func(k, v []byte) bool {
		if string(k) == key {
			value, ok = v, true
			start = cap(obj) - cap(v)
			end = start + len(v)
		}
		return true // the last of duplicate keys wins, as in encoding/json
	})
	return value, start, end, ok
}

// SetMember returns a copy of the JSON object obj with the value of member
// path (keys of nested objects, outermost first) replaced by value, every
// other byte as it was. ok is false when the path does not exist.
func SetMember(obj []byte, value []byte, path ...string) (out []byte, ok bool) {
	if len(path) == 0 {
		return nil, false
	}
	v, start, end, found := Member(obj, path[0])
	if !found {
		return nil, false
	}
	if len(path) > 1 {
		inner, ok := SetMember(v, value, path[1:]...)
		if !ok {
			return nil, false
		}
		value = inner
	}
	out = make([]byte, 0, len(obj)-len(v)+len(value))
	out = append(out, obj[:start]...)
	out = append(out, value...)
	return append(out, obj[end:]...), true
}
