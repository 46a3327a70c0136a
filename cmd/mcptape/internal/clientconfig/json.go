package clientconfig

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// This file is a small JSON reader that keeps the byte span of every value,
// so that an edit can replace one value and leave every other byte of the
// file as it was. encoding/json cannot do that: it keeps no positions, and
// re-marshalling loses key order, formatting and line endings.

// SyntaxError reports where a config file stops being JSON.
type SyntaxError struct {
	Offset int    // byte offset of the problem
	Line   int    // 1-based line
	Column int    // 1-based column, in characters
	Msg    string // what is wrong there
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("line %d, column %d: %s", e.Line, e.Column, e.Msg)
}

type kind uint8

const (
	kindObject kind = iota + 1
	kindArray
	kindString
	kindNumber
	kindBool
	kindNull
)

// value is one JSON value and where it is: data[start:end] is its text.
type value struct {
	kind       kind
	start, end int
	members    []member // kindObject, in file order
	elems      []*value // kindArray
	str        string   // kindString: the decoded string
	// closeStart is the offset of the closing '}' or ']'.
	closeStart int
}

// member is one "key": value pair of an object.
type member struct {
	key              string
	keyStart, keyEnd int // data[keyStart:keyEnd] is the quoted key
	val              *value
}

// lookup returns the member named key, or nil; for a duplicated key it
// returns the last, as JavaScript's JSON.parse (and so the clients) do.
func (v *value) lookup(key string) *member {
	if v == nil || v.kind != kindObject {
		return nil
	}
	var found *member
	for i := range v.members {
		if v.members[i].key == key {
			found = &v.members[i]
		}
	}
	return found
}

// count is how many members are named key.
func (v *value) count(key string) int {
	n := 0
	for _, m := range v.members {
		if m.key == key {
			n++
		}
	}
	return n
}

// maxDepth bounds nesting so a hostile file cannot exhaust the stack.
const maxDepth = 512

// parseJSON parses data as one JSON document. With jsonc, comments (// and
// /* */) and trailing commas are accepted as VS Code accepts them; they are
// kept in the file like whitespace. A UTF-8 byte order mark is skipped.
func parseJSON(data []byte, jsonc bool) (*value, error) {
	p := &parser{data: data, jsonc: jsonc}
	if bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) {
		p.pos = 3
	}
	if err := p.space(); err != nil {
		return nil, err
	}
	if p.pos == len(data) {
		return nil, p.errorf(p.pos, "the file is empty")
	}
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	if err := p.space(); err != nil {
		return nil, err
	}
	if p.pos != len(data) {
		return nil, p.errorf(p.pos, "unexpected %s after the end of the top-level value", p.describe(p.pos))
	}
	return v, nil
}

type parser struct {
	data  []byte
	pos   int
	jsonc bool
}

func (p *parser) errorf(off int, format string, a ...any) *SyntaxError {
	line, col := position(p.data, off)
	return &SyntaxError{Offset: off, Line: line, Column: col, Msg: fmt.Sprintf(format, a...)}
}

// position turns a byte offset into a 1-based line and character column.
func position(data []byte, off int) (line, col int) {
	if off > len(data) {
		off = len(data)
	}
	before := data[:off]
	line = bytes.Count(before, []byte("\n")) + 1
	if i := bytes.LastIndexByte(before, '\n'); i >= 0 {
		before = before[i+1:]
	}
	return line, utf8.RuneCount(before) + 1
}

// describe names the character at off for an error message.
func (p *parser) describe(off int) string {
	if off >= len(p.data) {
		return "end of file"
	}
	r, _ := utf8.DecodeRune(p.data[off:])
	if r == utf8.RuneError {
		return fmt.Sprintf("byte 0x%02x", p.data[off])
	}
	return strconv.QuoteRune(r)
}

// space skips whitespace and, in JSONC, comments.
func (p *parser) space() error {
	for p.pos < len(p.data) {
		switch c := p.data[p.pos]; c {
		case ' ', '\t', '\n', '\r':
			p.pos++
		case '/':
			if p.pos+1 >= len(p.data) || (p.data[p.pos+1] != '/' && p.data[p.pos+1] != '*') {
				return p.errorf(p.pos, "unexpected '/'")
			}
			if !p.jsonc {
				return p.errorf(p.pos, "a comment, which JSON does not allow (this client reads the file with a strict JSON parser)")
			}
			if p.data[p.pos+1] == '/' {
				end := bytes.IndexByte(p.data[p.pos:], '\n')
				if end < 0 {
					p.pos = len(p.data)
				} else {
					p.pos += end
				}
				continue
			}
			end := bytes.Index(p.data[p.pos+2:], []byte("*/"))
			if end < 0 {
				return p.errorf(p.pos, "a comment that is never closed with */")
			}
			p.pos += 2 + end + 2
		default:
			return nil
		}
	}
	return nil
}

func (p *parser) value(depth int) (*value, error) {
	if depth > maxDepth {
		return nil, p.errorf(p.pos, "values nested more than %d deep", maxDepth)
	}
	if p.pos >= len(p.data) {
		return nil, p.errorf(p.pos, "unexpected end of file, expected a value")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		start := p.pos
		s, err := p.str()
		if err != nil {
			return nil, err
		}
		return &value{kind: kindString, start: start, end: p.pos, str: s}, nil
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case c == 't':
		return p.literal("true", kindBool)
	case c == 'f':
		return p.literal("false", kindBool)
	case c == 'n':
		return p.literal("null", kindNull)
	default:
		return nil, p.errorf(p.pos, "unexpected %s, expected a value", p.describe(p.pos))
	}
}

func (p *parser) literal(word string, k kind) (*value, error) {
	if !bytes.HasPrefix(p.data[p.pos:], []byte(word)) {
		return nil, p.errorf(p.pos, "unexpected %s, expected a value", p.describe(p.pos))
	}
	v := &value{kind: k, start: p.pos, end: p.pos + len(word)}
	p.pos += len(word)
	return v, nil
}

func (p *parser) number() (*value, error) {
	start := p.pos
	d := p.data
	i := p.pos
	if d[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
			n++
		}
		return n
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case digits() == 0:
		return nil, p.errorf(i, "invalid number: expected a digit")
	}
	if i < len(d) && d[i] == '.' {
		i++
		if digits() == 0 {
			return nil, p.errorf(i, "invalid number: expected a digit after '.'")
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if digits() == 0 {
			return nil, p.errorf(i, "invalid number: expected a digit in the exponent")
		}
	}
	p.pos = i
	return &value{kind: kindNumber, start: start, end: i}, nil
}

// str reads a quoted string at p.pos and returns it decoded.
func (p *parser) str() (string, error) {
	d := p.data
	i := p.pos + 1
	var b strings.Builder
	for {
		if i >= len(d) {
			return "", p.errorf(p.pos, "a string that is never closed")
		}
		c := d[i]
		switch {
		case c == '"':
			p.pos = i + 1
			return b.String(), nil
		case c == '\\':
			if i+1 >= len(d) {
				return "", p.errorf(p.pos, "a string that is never closed")
			}
			esc := d[i+1]
			switch esc {
			case '"', '\\', '/':
				b.WriteByte(esc)
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'u':
				r, n, err := p.unicodeEscape(i)
				if err != nil {
					return "", err
				}
				b.WriteRune(r)
				i += n
				continue
			default:
				return "", p.errorf(i, "invalid escape %q in a string", "\\"+string(rune(esc)))
			}
			i += 2
		case c < 0x20:
			return "", p.errorf(i, "a control character (0x%02x) in a string; write it as an escape such as \\n", c)
		case c < utf8.RuneSelf:
			b.WriteByte(c)
			i++
		default:
			r, n := utf8.DecodeRune(d[i:])
			if r == utf8.RuneError && n <= 1 {
				return "", p.errorf(i, "bytes that are not valid UTF-8")
			}
			b.WriteRune(r)
			i += n
		}
	}
}

// unicodeEscape decodes \uXXXX (and a following low surrogate) at i,
// returning the rune and how many bytes it took.
func (p *parser) unicodeEscape(i int) (rune, int, error) {
	hex := func(at int) (rune, bool) {
		if at+6 > len(p.data) || p.data[at] != '\\' || p.data[at+1] != 'u' {
			return 0, false
		}
		n, err := strconv.ParseUint(string(p.data[at+2:at+6]), 16, 16)
		return rune(n), err == nil
	}
	r, ok := hex(i)
	if !ok {
		return 0, 0, p.errorf(i, "invalid \\u escape in a string: it takes four hex digits")
	}
	if utf16.IsSurrogate(r) {
		if r2, ok := hex(i + 6); ok {
			if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
				return dec, 12, nil
			}
		}
		// A lone surrogate: JavaScript keeps it; Go can only hold U+FFFD.
		return utf8.RuneError, 6, nil
	}
	return r, 6, nil
}

func (p *parser) object(depth int) (*value, error) {
	v := &value{kind: kindObject, start: p.pos}
	p.pos++ // {
	for {
		if err := p.space(); err != nil {
			return nil, err
		}
		if p.pos >= len(p.data) {
			return nil, p.errorf(p.pos, "unexpected end of file inside an object (opened at line %d)", p.line(v.start))
		}
		if p.data[p.pos] == '}' {
			v.closeStart = p.pos
			p.pos++
			v.end = p.pos
			return v, nil
		}
		if p.data[p.pos] != '"' {
			return nil, p.errorf(p.pos, "unexpected %s, expected a quoted member name", p.describe(p.pos))
		}
		m := member{keyStart: p.pos}
		key, err := p.str()
		if err != nil {
			return nil, err
		}
		m.key, m.keyEnd = key, p.pos
		if err := p.space(); err != nil {
			return nil, err
		}
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return nil, p.errorf(p.pos, "unexpected %s, expected ':' after the member name %q", p.describe(p.pos), key)
		}
		p.pos++
		if err := p.space(); err != nil {
			return nil, err
		}
		m.val, err = p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		v.members = append(v.members, m)
		if err := p.space(); err != nil {
			return nil, err
		}
		if p.pos >= len(p.data) {
			return nil, p.errorf(p.pos, "unexpected end of file inside an object (opened at line %d)", p.line(v.start))
		}
		switch p.data[p.pos] {
		case ',':
			comma := p.pos
			p.pos++
			if err := p.space(); err != nil {
				return nil, err
			}
			if p.pos < len(p.data) && p.data[p.pos] == '}' && !p.jsonc {
				return nil, p.errorf(comma, "a comma before '}', which JSON does not allow")
			}
		case '}':
		default:
			return nil, p.errorf(p.pos, "unexpected %s, expected ',' or '}' after an object member", p.describe(p.pos))
		}
	}
}

func (p *parser) array(depth int) (*value, error) {
	v := &value{kind: kindArray, start: p.pos}
	p.pos++ // [
	for {
		if err := p.space(); err != nil {
			return nil, err
		}
		if p.pos >= len(p.data) {
			return nil, p.errorf(p.pos, "unexpected end of file inside an array (opened at line %d)", p.line(v.start))
		}
		if p.data[p.pos] == ']' {
			v.closeStart = p.pos
			p.pos++
			v.end = p.pos
			return v, nil
		}
		e, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		v.elems = append(v.elems, e)
		if err := p.space(); err != nil {
			return nil, err
		}
		if p.pos >= len(p.data) {
			return nil, p.errorf(p.pos, "unexpected end of file inside an array (opened at line %d)", p.line(v.start))
		}
		switch p.data[p.pos] {
		case ',':
			comma := p.pos
			p.pos++
			if err := p.space(); err != nil {
				return nil, err
			}
			if p.pos < len(p.data) && p.data[p.pos] == ']' && !p.jsonc {
				return nil, p.errorf(comma, "a comma before ']', which JSON does not allow")
			}
		case ']':
		default:
			return nil, p.errorf(p.pos, "unexpected %s, expected ',' or ']' after an array element", p.describe(p.pos))
		}
	}
}

func (p *parser) line(off int) int {
	l, _ := position(p.data, off)
	return l
}
