package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// harRequired are the members HAR 1.2 requires of each object, with the
// JSON type of each ("o" object, "a" array, "s" string, "n" number).
var harRequired = map[string]map[string]string{
	"log":      {"version": "s", "creator": "o", "entries": "a"},
	"creator":  {"name": "s", "version": "s"},
	"page":     {"startedDateTime": "s", "id": "s", "title": "s", "pageTimings": "o"},
	"entry":    {"startedDateTime": "s", "time": "n", "request": "o", "response": "o", "cache": "o", "timings": "o"},
	"request":  {"method": "s", "url": "s", "httpVersion": "s", "cookies": "a", "headers": "a", "queryString": "a", "headersSize": "n", "bodySize": "n"},
	"response": {"status": "n", "statusText": "s", "httpVersion": "s", "cookies": "a", "headers": "a", "content": "o", "redirectURL": "s", "headersSize": "n", "bodySize": "n"},
	"content":  {"size": "n", "mimeType": "s"},
	"timings":  {"send": "n", "wait": "n", "receive": "n"},
}

// readHAR reads a HAR 1.2 file as a HAR reader would, checking every
// member the format requires, and returns its log.
func readHAR(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("the HAR file is not JSON: %v", err)
	}
	need := func(what string, v any) map[string]any {
		o, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("HAR: %s is not an object", what)
		}
		for k, typ := range harRequired[strings.Fields(what)[0]] {
			var ok bool
			switch typ {
			case "o":
				_, ok = o[k].(map[string]any)
			case "a":
				_, ok = o[k].([]any)
			case "s":
				_, ok = o[k].(string)
			case "n":
				_, ok = o[k].(float64)
			}
			if !ok {
				t.Errorf("HAR: %s lacks %s (or it is not of its type)", what, k)
			}
		}
		return o
	}
	l := need("log", doc["log"])
	if l["version"] != "1.2" {
		t.Errorf("HAR version %v", l["version"])
	}
	need("creator", l["creator"])
	pages := map[string]bool{}
	for i, p := range l["pages"].([]any) {
		po := need(fmt.Sprintf("page %d", i), p)
		id := po["id"].(string)
		if pages[id] {
			t.Errorf("HAR: page id %q twice", id)
		}
		pages[id] = true
	}
	for i, e := range l["entries"].([]any) {
		what := fmt.Sprintf("entry %d", i)
		eo := need(what, e)
		if ref, _ := eo["pageref"].(string); !pages[ref] {
			t.Errorf("HAR: %s names page %q, which the log does not hold", what, ref)
		}
		if _, err := time.Parse(time.RFC3339Nano, eo["startedDateTime"].(string)); err != nil {
			t.Errorf("HAR: %s startedDateTime: %v", what, err)
		}
		need("request of "+what, eo["request"])
		need("content of "+what, need("response of "+what, eo["response"])["content"])
		tm := need("timings of "+what, eo["timings"])
		if sum := tm["send"].(float64) + tm["wait"].(float64) + tm["receive"].(float64); sum-eo["time"].(float64) > 0.001 || eo["time"].(float64)-sum > 0.001 {
			t.Errorf("HAR: %s time %v is not the sum of its timings %v", what, eo["time"], tm)
		}
	}
	return l
}

// TestExportFormats: `export --format har` writes a HAR 1.2 log a HAR
// reader takes, a page per session and an entry per exchange; `--format
// jsonl` a line per message, each as `show --json` prints it with its
// session; a format it does not know is a usage error.
func TestExportFormats(t *testing.T) {
	data := t.TempDir()
	if code, out, errOut := mcptape(t, "demo", "--data", data); code != 0 {
		t.Fatalf("demo: %d %s%s", code, out, errOut)
	}
	sessions := lsJSON(t, data)
	messages, exchanges := 0, 0
	for _, s := range sessions {
		messages += s.Messages
		exchanges += s.Exchanges
	}
	dir := t.TempDir()

	har := filepath.Join(dir, "all.har")
	code, _, errOut := mcptape(t, "export", "--data", data, "--format", "har", "-o", har)
	if code != 0 {
		t.Fatalf("export --format har: %d %s", code, errOut)
	}
	if want := fmt.Sprintf("%d session(s), %d message(s)", len(sessions), messages); !strings.Contains(errOut, want) {
		t.Errorf("export's summary lacks %q: %s", want, errOut)
	}
	l := readHAR(t, har)
	if n := len(l["pages"].([]any)); n != len(sessions) {
		t.Errorf("%d HAR pages for %d sessions", n, len(sessions))
	}
	if n := len(l["entries"].([]any)); n != exchanges {
		t.Errorf("%d HAR entries for %d exchanges", n, exchanges)
	}
	one := filepath.Join(dir, "one.har")
	if code, _, errOut := mcptape(t, "export", "--data", data, "--format", "har", "-o", one, sessions[0].ID); code != 0 {
		t.Fatal(errOut)
	}
	if l := readHAR(t, one); len(l["pages"].([]any)) != 1 || len(l["entries"].([]any)) != sessions[0].Exchanges {
		t.Errorf("one session's HAR: %d pages, %d entries; want 1 and %d", len(l["pages"].([]any)), len(l["entries"].([]any)), sessions[0].Exchanges)
	}

	jsonl := filepath.Join(dir, "all.jsonl")
	if code, _, errOut := mcptape(t, "export", "--data", data, "--format", "jsonl", "-o", jsonl); code != 0 {
		t.Fatalf("export --format jsonl: %d %s", code, errOut)
	}
	f, err := os.Open(jsonl)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	lines := 0
	perSession := map[string]int{}
	for sc.Scan() {
		lines++
		var m shownMessage
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %d: %v", lines, err)
		}
		if m.Session == "" || m.Seq == 0 || m.Dir == "" || (len(m.Raw) == 0 && m.RawText == "" && m.Size > 0) {
			t.Errorf("line %d is not a message as show --json prints it: %s", lines, sc.Bytes())
		}
		perSession[m.Session]++
	}
	if lines != messages {
		t.Errorf("%d JSON lines for %d messages", lines, messages)
	}
	for _, s := range sessions {
		if perSession[s.ID] != s.Messages {
			t.Errorf("session %s: %d lines for %d messages", s.ID, perSession[s.ID], s.Messages)
		}
	}
	if code, _, errOut := mcptape(t, "export", "--data", data, "--format", "otlp"); code != exitUsage || !strings.Contains(errOut, "tape, har or jsonl") {
		t.Errorf("--format otlp: exit %d: %s", code, errOut)
	}
}
