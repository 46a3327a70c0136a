package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/mcptape/mcptape/capture"
)

// Recorded content is hostile: a session id, a server's version, a tool
// name or an error quoting one can carry escape sequences that drive the
// terminal. Everything the CLI prints from a store or a tape goes through
// capture.TerminalText (one field), terminalWriter (a report of several
// lines) or jsonLines (JSON output), and error messages through
// capture.TerminalLines in run.

// clean is capture.TerminalText: one recorded field, safe to print.
func clean(s string) string { return capture.TerminalText(s) }

// terminalWriter passes text through capture's terminal filter, keeping
// newlines and tabs (a report's layout). It holds back a rune split
// across writes until the rest of it comes.
type terminalWriter struct {
	w    io.Writer
	tail []byte // the start of a rune cut by the last write
	buf  []byte
}

func (t *terminalWriter) Write(p []byte) (int, error) {
	data := p
	if len(t.tail) > 0 {
		data = append(t.tail, p...)
		t.tail = nil
	}
	t.buf = t.buf[:0]
	for i := 0; i < len(data); {
		r, n := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && n <= 1 && !utf8.FullRune(data[i:]) {
			t.tail = append([]byte(nil), data[i:]...)
			break
		}
		switch {
		case r == '\n' || r == '\t':
			t.buf = append(t.buf, byte(r))
		case r == utf8.RuneError && n == 1:
			t.buf = utf8.AppendRune(t.buf, utf8.RuneError)
		case capture.UnsafeTerminalRune(r):
			t.buf = append(t.buf, '?')
		default:
			t.buf = append(t.buf, data[i:i+n]...)
		}
		i += n
	}
	if _, err := t.w.Write(t.buf); err != nil {
		return 0, err
	}
	return len(p), nil
}

// jsonLines writes one JSON value per line, like json.Encoder, with every
// rune the terminal filter would replace written as a \u escape instead:
// the JSON means the same, and a terminal shows it harmlessly. (Such runes
// can only occur inside JSON strings, where an escape is equivalent; the
// encoder escapes C0 controls already.)
type jsonLines struct {
	w      io.Writer
	indent string
	buf    bytes.Buffer
	out    []byte
}

func newJSONLines(w io.Writer) *jsonLines { return &jsonLines{w: w} }

func (j *jsonLines) Encode(v any) error {
	j.buf.Reset()
	enc := json.NewEncoder(&j.buf)
	if j.indent != "" {
		enc.SetIndent("", j.indent)
	}
	if err := enc.Encode(v); err != nil {
		return err
	}
	b := j.buf.Bytes()
	j.out = j.out[:0]
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if n > 1 && capture.UnsafeTerminalRune(r) {
			j.out = fmt.Appendf(j.out, `\u%04x`, r)
		} else {
			j.out = append(j.out, b[i:i+n]...)
		}
		i += n
	}
	_, err := j.w.Write(j.out)
	return err
}
