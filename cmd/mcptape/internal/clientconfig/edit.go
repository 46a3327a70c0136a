package clientconfig

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// edit replaces data[start:end] with text.
type edit struct {
	start, end int
	text       []byte
}

// apply returns data with edits made; edits must not overlap.
func apply(data []byte, edits []edit) []byte {
	slices.SortFunc(edits, func(a, b edit) int { return a.start - b.start })
	var out bytes.Buffer
	at := 0
	for _, e := range edits {
		out.Write(data[at:e.start])
		out.Write(e.text)
		at = e.end
	}
	out.Write(data[at:])
	return out.Bytes()
}

// quote writes s as a JSON string the way a person would: only what JSON
// requires is escaped; non-ASCII text and '/' stay as they are.
func quote(s string) []byte {
	b := make([]byte, 0, len(s)+2)
	b = append(b, '"')
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == '"':
			b = append(b, `\"`...)
		case r == '\\':
			b = append(b, `\\`...)
		case r == '\n':
			b = append(b, `\n`...)
		case r == '\r':
			b = append(b, `\r`...)
		case r == '\t':
			b = append(b, `\t`...)
		case r < 0x20 || (r == utf8.RuneError && n == 1):
			b = fmt.Appendf(b, `\u%04x`, r)
		default:
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return append(b, '"')
}

func isSpace(b []byte) bool {
	return len(bytes.Trim(b, " \t\r\n")) == 0
}

// newline is the line ending used in gap, "\n" when it has none.
func newline(gap []byte) string {
	if bytes.Contains(gap, []byte("\r\n")) {
		return "\r\n"
	}
	return "\n"
}

// lastIndent is what follows the last line break of gap.
func lastIndent(gap []byte) string {
	i := bytes.LastIndexByte(gap, '\n')
	return string(gap[i+1:])
}

// layout is how the members of an object are laid out in the file, read
// from the text around them, so that a new member or array can follow it.
type layout struct {
	// memberGap is what precedes a member's key (after '{' or ',').
	memberGap string
	// colon is what lies between a key and its value, ":" included.
	colon string
	// closeGap is what precedes the object's '}'.
	closeGap string
}

// objectLayout reads the layout of obj around its member m.
func objectLayout(data []byte, obj *value, m *member) layout {
	l := layout{memberGap: " ", colon: ": ", closeGap: " "}
	for i := range obj.members {
		if &obj.members[i] != m {
			continue
		}
		from := obj.start + 1
		if i > 0 {
			from = obj.members[i-1].val.end
			if c := bytes.IndexByte(data[from:m.keyStart], ','); c >= 0 {
				from += c + 1
			}
		}
		if gap := data[from:m.keyStart]; isSpace(gap) {
			l.memberGap = string(gap)
		}
	}
	if c := data[m.keyEnd:m.val.start]; isSpace(bytes.Replace(c, []byte(":"), nil, 1)) {
		l.colon = string(c)
	}
	last := obj.members[len(obj.members)-1].val.end
	if gap := data[last:obj.closeStart]; isSpace(bytes.TrimLeft(gap, " \t,")) {
		l.closeGap = strings.TrimLeft(string(gap), " \t,")
	}
	if !strings.Contains(l.memberGap, "\n") {
		if l.memberGap == "" && !strings.Contains(l.colon, " ") {
			l.closeGap = "" // compact: {"a":1,"b":2}
		}
	}
	return l
}

// arrayLayout is how an array's elements are laid out: what follows '[',
// what follows each ',' and what precedes ']'.
type arrayLayout struct{ open, sep, close string }

// arrayStyle works out how to write a new array that replaces old (nil
// when there is none) as the value of member m of obj.
func arrayStyle(data []byte, obj *value, m *member, old *value) arrayLayout {
	if old != nil && old.kind == kindArray && len(old.elems) > 0 {
		first, last := old.elems[0], old.elems[len(old.elems)-1]
		open, close := data[old.start+1:first.start], data[last.end:old.closeStart]
		if isSpace(open) && isSpace(close) {
			a := arrayLayout{open: string(open), close: string(close), sep: " "}
			if strings.Contains(a.open, "\n") {
				a.sep = a.open
			} else if len(old.elems) == 1 && !strings.Contains(objectLayout(data, obj, m).colon, " ") {
				a.sep = ""
			}
			if len(old.elems) > 1 {
				between := data[first.end:old.elems[1].start]
				if c := bytes.IndexByte(between, ','); c >= 0 && isSpace(between[c+1:]) {
					a.sep = string(between[c+1:])
				}
			}
			return a
		}
	}
	l := objectLayout(data, obj, m)
	if !strings.Contains(l.memberGap, "\n") {
		if l.memberGap == "" && !strings.Contains(l.colon, " ") {
			return arrayLayout{sep: ""}
		}
		return arrayLayout{sep: " "}
	}
	nl := newline([]byte(l.memberGap))
	indent := lastIndent([]byte(l.memberGap))
	outer := lastIndent([]byte(l.closeGap))
	unit := "  "
	switch {
	case strings.HasPrefix(indent, outer) && len(indent) > len(outer):
		unit = indent[len(outer):]
	case strings.HasPrefix(indent, "\t"):
		unit = "\t"
	}
	return arrayLayout{open: nl + indent + unit, sep: nl + indent + unit, close: nl + indent}
}

// arrayText writes elems as a JSON array laid out as a.
func arrayText(a arrayLayout, elems []string) []byte {
	if len(elems) == 0 {
		return []byte("[]")
	}
	var b bytes.Buffer
	b.WriteByte('[')
	b.WriteString(a.open)
	for i, e := range elems {
		if i > 0 {
			b.WriteByte(',')
			b.WriteString(a.sep)
		}
		b.Write(quote(e))
	}
	b.WriteString(a.close)
	b.WriteByte(']')
	return b.Bytes()
}

// setArray is the edit that makes member key of obj the array elems:
// replacing the member's value when it exists (cur), else adding the member
// after member after.
func setArray(data []byte, obj *value, cur, after *member, key string, elems []string) edit {
	if cur != nil {
		return edit{cur.val.start, cur.val.end, arrayText(arrayStyle(data, obj, cur, cur.val), elems)}
	}
	l := objectLayout(data, obj, after)
	text := append([]byte(","+l.memberGap), quote(key)...)
	text = append(text, l.colon...)
	text = append(text, arrayText(arrayStyle(data, obj, after, nil), elems)...)
	return edit{after.val.end, after.val.end, text}
}

// removeMember is the edit that takes member m out of obj, with the comma
// that joined it to its neighbour.
func removeMember(obj *value, m *member) edit {
	i := slices.IndexFunc(obj.members, func(x member) bool { return x.keyStart == m.keyStart })
	switch {
	case i > 0:
		return edit{obj.members[i-1].val.end, m.val.end, nil}
	case len(obj.members) > 1:
		return edit{m.keyStart, obj.members[1].keyStart, nil}
	}
	return edit{m.keyStart, m.val.end, nil}
}
