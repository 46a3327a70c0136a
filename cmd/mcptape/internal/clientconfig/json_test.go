package clientconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSyntaxErrorPosition(t *testing.T) {
	for _, tc := range []struct {
		name, in  string
		jsonc     bool
		line, col int
		msg       string
	}{
		{"missing comma", "{\n  \"a\": 1\n  \"b\": 2\n}", false, 3, 3, "expected ',' or '}'"},
		{"trailing comma", "{\"a\": [1, 2,]}", false, 1, 12, "comma before ']'"},
		{"trailing comma in object", "{\r\n  \"a\": 1,\r\n}", false, 2, 9, "comma before '}'"},
		{"comment", "{\n  // servers\n  \"a\": 1\n}", false, 2, 3, "comment"},
		{"unclosed comment", "{\n  /* servers\n}", true, 2, 3, "never closed"},
		{"unquoted key", "{a: 1}", false, 1, 2, "quoted member name"},
		{"single quotes", "{'a': 1}", false, 1, 2, "quoted member name"},
		{"column counts characters", "{\"é😀\": x}", false, 1, 8, "expected a value"},
		{"empty", "", false, 1, 1, "empty"},
		{"only space", " \n ", false, 2, 2, "empty"},
		{"truncated", "{\"mcpServers\": {", false, 1, 17, "end of file inside an object"},
		{"two values", "{} {}", false, 1, 4, "after the end"},
		{"bad escape", `{"a": "\x"}`, false, 1, 8, "invalid escape"},
		{"raw newline in string", "{\"a\": \"x\ny\"}", false, 1, 9, "control character"},
		{"leading zero", `{"a": 01}`, false, 1, 8, "after an object member"},
		{"bad number", `{"a": -}`, false, 1, 8, "expected a digit"},
		{"invalid utf-8", "{\"a\": \"\xff\"}", false, 1, 8, "not valid UTF-8"},
		{"word", `{"a": nul}`, false, 1, 7, "expected a value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseJSON([]byte(tc.in), tc.jsonc)
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("got %v, want a syntax error", err)
			}
			if se.Line != tc.line || se.Column != tc.col || !strings.Contains(se.Msg, tc.msg) {
				t.Errorf("got %v, want line %d, column %d: …%s…", se, tc.line, tc.col, tc.msg)
			}
		})
	}
}

func TestParseSpans(t *testing.T) {
	in := "\xef\xbb\xbf{ \"a\" : [1, -2.5e+3, true, null, \"x\\u00e9\\ud83d\\ude00\\n\"], \"b\": {}}"
	v, err := parseJSON([]byte(in), false)
	if err != nil {
		t.Fatal(err)
	}
	a := v.lookup("a").val
	if got := in[a.start:a.end]; got != `[1, -2.5e+3, true, null, "x\u00e9\ud83d\ude00\n"]` {
		t.Errorf("span of a: %q", got)
	}
	if s := a.elems[4].str; s != "xé😀\n" {
		t.Errorf("decoded string: %q", s)
	}
	if b := v.lookup("b").val; in[b.start:b.end] != "{}" {
		t.Errorf("span of b: %q", in[b.start:b.end])
	}
}

func TestJSONCOnlyWhereAllowed(t *testing.T) {
	in := []byte("{\n  // c\n  \"servers\": {/* x */},\n}\n")
	if _, err := parseJSON(in, true); err != nil {
		t.Errorf("JSONC refused: %v", err)
	}
	if _, err := parseJSON(in, false); err == nil {
		t.Error("strict JSON accepted a comment")
	}
}

func TestNestingBounded(t *testing.T) {
	deep := strings.Repeat("[", 100000) + strings.Repeat("]", 100000)
	_, err := parseJSON([]byte(deep), false)
	var se *SyntaxError
	if !errors.As(err, &se) || !strings.Contains(se.Msg, "nested") {
		t.Fatalf("got %v, want a nesting error", err)
	}
}

// FuzzParseAgreesWithEncodingJSON checks that the span-keeping reader
// accepts exactly the JSON that encoding/json accepts (leaving aside what
// encoding/json is lenient about: invalid UTF-8 and depth), and that a
// string's decoded value is the same.
func FuzzParseAgreesWithEncodingJSON(f *testing.F) {
	for _, s := range []string{
		`{}`, `[]`, `{"a":1}`, `{"a":[1,2,{"b":null}]}`, `{"a":1,}`, `[1,]`, `{"a" 1}`, `"x"`, `1e5`, `-0.0`,
		`01`, `1.`, `.5`, `{"a":"\ud800"}`, `{"a":"\u00"}`, `{"a":"\/"}`, " {\t\"a\"\r\n:\n true } ", `nul`, `{"a":1}}`,
		`{"mcpServers":{"x":{"command":"npx","args":["-y"]}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !utf8.Valid(data) || bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) || bytes.Count(data, []byte("["))+bytes.Count(data, []byte("{")) > maxDepth {
			return
		}
		v, err := parseJSON(data, false)
		if ok := json.Valid(data); ok != (err == nil) {
			t.Fatalf("%q: encoding/json valid=%v, ours: %v", data, ok, err)
		}
		if err != nil || v.kind != kindString {
			return
		}
		var want string
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatal(err)
		}
		if v.str != want {
			t.Errorf("%q decodes to %q, encoding/json to %q", data, v.str, want)
		}
	})
}

func TestQuoteRoundTrips(t *testing.T) {
	for _, s := range []string{"", `C:\Program Files\mcptape\mcptape.exe`, "a\"b", "tab\there", "\x01\x1f", "日本語 😀", "</script>&"} {
		q := quote(s)
		var back string
		if err := json.Unmarshal(q, &back); err != nil || back != s {
			t.Errorf("quote(%q) = %s, reads back as %q (%v)", s, q, back, err)
		}
		if strings.ContainsAny(s, "<>&") && bytes.Contains(q, []byte(`\u00`)) {
			t.Errorf("quote(%q) = %s escapes HTML characters a person would not", s, q)
		}
	}
}
