package protocol

import (
	"bytes"
	"encoding/binary"
)

// validJSON reports whether b is one valid JSON value (surrounding
// whitespace allowed), as json.Valid does, several times faster on the large
// strings tool results are made of. When the value is an object, member is
// called with each top-level member, its value a sub-slice of b.
func validJSON(b []byte, member func(key, value []byte)) bool {
	v := validator{b: b}
	i := skipSpace(b, 0)
	if i < len(b) && b[i] == '{' && member != nil {
		v.member = member
	}
	end, ok := v.value(i, 0)
	return ok && skipSpace(b, end) == len(b)
}

// validEnvelope is validJSON filling env with the JSON-RPC members of an
// object (Decode's hot path). The validator notes where they are in a
// value of its own: a member function, or a pointer to env, would escape
// through the recursion and take env to the heap with it.
func validEnvelope(b []byte, env *envelope) bool {
	v := validator{b: b}
	i := skipSpace(b, 0)
	v.rpc = i < len(b) && b[i] == '{'
	end, ok := v.value(i, 0)
	if !ok || skipSpace(b, end) != len(b) {
		return false
	}
	for k, at := range v.at {
		if at[1] > 0 {
			*env.member(k) = b[at[0]:at[1]]
		}
	}
	return true
}

// maxDepth bounds nesting, as hostile input may nest arrays 10k deep.
const maxDepth = 10000

type validator struct {
	b      []byte
	member func(key, value []byte)
	rpc    bool                    // note the JSON-RPC members' values in at
	at     [envelopeMembers][2]int // where each is in b (see envelope.member)
}

func (v *validator) value(i, depth int) (int, bool) {
	b := v.b
	if i >= len(b) || depth >= maxDepth {
		return i, false
	}
	switch c := b[i]; {
	case c == '"':
		return v.str(i)
	case c == '{':
		return v.object(i, depth)
	case c == '[':
		return v.array(i, depth)
	case c == 't':
		return lit(b, i, "true")
	case c == 'f':
		return lit(b, i, "false")
	case c == 'n':
		return lit(b, i, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		return number(b, i)
	}
	return i, false
}

func (v *validator) object(i, depth int) (int, bool) {
	b := v.b
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return i, false
		}
		ks := i
		ke, ok := v.str(i)
		if !ok {
			return ke, false
		}
		i = skipSpace(b, ke)
		if i >= len(b) || b[i] != ':' {
			return i, false
		}
		i = skipSpace(b, i+1)
		vs := i
		if i, ok = v.value(i, depth+1); !ok {
			return i, false
		}
		if depth == 0 && v.rpc {
			if k := envelopeMember(memberKey(b[ks:ke])); k >= 0 {
				v.at[k] = [2]int{vs, i}
			}
		} else if depth == 0 && v.member != nil {
			v.member(memberKey(b[ks:ke]), b[vs:i])
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return i, false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return i + 1, true
		default:
			return i, false
		}
	}
}

func (v *validator) array(i, depth int) (int, bool) {
	b := v.b
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, true
	}
	for {
		var ok bool
		if i, ok = v.value(i, depth+1); !ok {
			return i, false
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return i, false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case ']':
			return i + 1, true
		default:
			return i, false
		}
	}
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// str returns the index after the string at b[i] == '"'. It finds the
// string's quote and each backslash with bytes.IndexByte (vector code on
// common CPUs) and checks the bytes between for control characters 8 at a
// time: several times faster on a long string than a byte-wise scan for
// all three.
func (v *validator) str(i int) (int, bool) {
	b := v.b
	i++
	q := -1 // the first quote at or after i, once known (q >= i)
	for {
		if q < i {
			k := bytes.IndexByte(b[i:], '"')
			if k < 0 {
				return len(b), false
			}
			q = i + k
		}
		seg := b[i:q]
		e := bytes.IndexByte(seg, '\\')
		if e >= 0 {
			seg = seg[:e]
		}
		if c := firstControl(seg); c >= 0 {
			return i + c, false
		}
		if e < 0 {
			return q + 1, true
		}
		i += e // b[i] is a backslash before q, so b[i+1] exists
		switch b[i+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			i += 2
		case 'u':
			if i+6 > len(b) || !hex4(b[i+2:i+6]) {
				return i, false
			}
			i += 6
		default:
			return i, false
		}
	}
}

// firstControl is the index of the first control character (below 0x20)
// in s, or -1.
func firstControl(s []byte) int {
	i := 0
	for ; i+32 <= len(s); i += 32 {
		w := s[i : i+32 : i+32]
		if controlBits(binary.LittleEndian.Uint64(w))|controlBits(binary.LittleEndian.Uint64(w[8:]))|
			controlBits(binary.LittleEndian.Uint64(w[16:]))|controlBits(binary.LittleEndian.Uint64(w[24:])) != 0 {
			break
		}
	}
	for ; i+8 <= len(s) && controlBits(binary.LittleEndian.Uint64(s[i:])) == 0; i += 8 {
	}
	for ; i < len(s); i++ {
		if s[i] < 0x20 {
			return i
		}
	}
	return -1
}

// controlBits is non-zero when a byte of the 8 in x is below 0x20: a
// borrow only starts at such a byte, and a byte of 0x80 or more is masked.
func controlBits(x uint64) uint64 { return (x - ones*0x20) &^ x & highs }

func hex4(b []byte) bool {
	for _, c := range b {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

func lit(b []byte, i int, word string) (int, bool) {
	if bytes.HasPrefix(b[i:], []byte(word)) {
		return i + len(word), true
	}
	return i, false
}

func number(b []byte, i int) (int, bool) {
	if b[i] == '-' {
		i++
	}
	digits := func() bool {
		s := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i > s
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case !digits():
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			return i, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			return i, false
		}
	}
	return i, true
}
