package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// sniffBytes is how much of a document notATape looks at.
const sniffBytes = 64 << 10

// tapeHint ends every description: what a tape is.
const tapeHint = "mcptape reads tapes, the files `mcptape export` and the dashboard's Export tape write"

// notATape says what the start of a file looks like when it is surely not
// a tape, and "" when it may be one (ReadTape then says what is wrong).
func notATape(head []byte) string {
	b := bytes.TrimLeft(head, " \t\r\n\xef\xbb\xbf")
	switch {
	case len(head) == 0:
		return "the file is empty"
	case len(b) == 0:
		return "the file holds only white space"
	case bytes.HasPrefix(head, []byte{0x1f, 0x8b}):
		return "this is a gzip-compressed file; decompress it first (gunzip), then try again"
	case bytes.HasPrefix(head, []byte("PK\x03\x04")):
		return "this is a ZIP archive; unpack the tape from it first"
	case b[0] == '<':
		return "this looks like HTML or XML, not JSON; " + tapeHint
	case b[0] == '[':
		return "this is a JSON array; a tape is one JSON object with \"format\": \"mcptape-tape\"; " + tapeHint
	case b[0] != '{':
		return fmt.Sprintf("this is not JSON (it begins with %q); %s", clipHead(string(b), 20), tapeHint)
	}
	keys, lines := topKeys(b)
	has := func(k string) bool { return slices.Contains(keys, k) }
	switch {
	case has("format") || has("sessions"):
		return ""
	case has("log"):
		return "this is a HAR file (an HTTP archive, as browsers and the dashboard's Export HAR write), which keeps HTTP, not MCP sessions; " + tapeHint
	case has("jsonrpc") && lines > 1 && has("seq"):
		return "this is `mcptape show --json` output (one message per line); export the session as a tape with `mcptape export`"
	case has("jsonrpc"):
		return "this is a JSON-RPC message, not a tape; " + tapeHint
	case has("seq") && has("dir"):
		return "this is `mcptape show --json` output (one message per line); export the session as a tape with `mcptape export`"
	case has("era") && has("start"):
		return "this is `mcptape ls --json` output; export the sessions as a tape with `mcptape export`"
	case has("mcpServers") || has("servers") && has("inputs"):
		return "this is an MCP client's configuration file, not a tape; " + tapeHint
	case has("sampling") || has("elicitation") || has("faults") || (has("roots") && !has("sessions")):
		return "this is a testing profile; pass it with --profile FILE, and the tape with --tape"
	case len(keys) > 0:
		return fmt.Sprintf("this JSON object has no \"format\" field (its fields: %s); %s", clipHead(fmt.Sprint(keys), 80), tapeHint)
	}
	return ""
}

// topKeys lists the members of the first JSON object in b (as far as b
// goes), and counts the JSON values in b that start a line.
func topKeys(b []byte) (keys []string, lines int) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, 0
	}
	for dec.More() && len(keys) < 64 {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		k, _ := tok.(string)
		keys = append(keys, k)
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			break
		}
	}
	for _, l := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(l)) > 0 && bytes.TrimSpace(l)[0] == '{' {
			lines++
		}
	}
	return keys, lines
}

func clipHead(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// aJSON names a JSON value kind as json.UnmarshalTypeError.Value does
// ("string", "number 1.5", "object"), with an article.
func aJSON(v string) string {
	if v == "" {
		return "a value"
	}
	if strings.HasPrefix(v, "array") || strings.HasPrefix(v, "object") {
		return "an " + v
	}
	return "a " + v
}

// jsonKindOf says what JSON a Go type takes, for errors that must not
// name Go types.
func jsonKindOf(t reflect.Type) string {
	if t == nil {
		return "another value"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Pointer:
		return jsonKindOf(t.Elem())
	}
	return "another value"
}
