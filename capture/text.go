package capture

import "strings"

// TerminalText makes recorded text safe to print on a terminal. Recorded
// content is hostile: a session id, a server's version string or a tool
// name can carry escape sequences that retitle, clear or rewrite a
// terminal, or bidirectional overrides that make a line read differently
// from what it holds. Every rune that could do either becomes '?':
//
//   - C0 controls (ESC, CR, BEL, backspace, tab, newline…) and DEL;
//   - C1 controls U+0080–U+009F (U+009B is a one-rune CSI on some
//     terminals);
//   - bidirectional controls: U+061C, U+200E, U+200F, U+202A–U+202E,
//     U+2066–U+2069;
//   - the line and paragraph separators U+2028 and U+2029.
//
// Invalid UTF-8 becomes U+FFFD. Every line mcptape prints from a store
// goes through it (the tree's text form too).
func TerminalText(s string) string {
	if terminalSafe(s) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if unsafeRune(r) {
			return '?'
		}
		return r
	}, s)
}

// TerminalLines is [TerminalText] for text of several lines: it keeps
// newlines (and so can only add lines, never rewrite one) and replaces
// everything else TerminalText does.
func TerminalLines(s string) string {
	if terminalSafe(s) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if r != '\n' && unsafeRune(r) {
			return '?'
		}
		return r
	}, s)
}

// terminalSafe is the fast path: plain printable ASCII.
func terminalSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			return false
		}
	}
	return true
}

// unsafeRune reports whether r may not reach a terminal as it is.
func unsafeRune(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r < 0xa0:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	case r == 0x2028, r == 0x2029:
		return true
	}
	return false
}

// UnsafeTerminalRune reports whether TerminalText replaces r (a rune
// other than U+FFFD, which stands for invalid UTF-8).
func UnsafeTerminalRune(r rune) bool { return unsafeRune(r) }
