package clientconfig_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcptape/mcptape/cmd/mcptape/internal/clientconfig"
)

// TestRandomLayouts attaches and detaches servers of configs laid out in
// many random ways (indent units, CRLF, one-line objects, spacing around
// ':' and ',', unicode, escapes, members in any order, with and without
// "args") and checks what a client would see: after attach, the config
// decodes to the original with only the attached entries' command and args
// changed, to the wrap command line; after detach, the file is byte for
// byte the original.
func TestRandomLayouts(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 4))
	exe := "/opt/mcp tape/mcptape"
	for i := range 300 {
		text := randomConfig(r)
		path := filepath.Join(t.TempDir(), "c.json")
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		locs := clientconfig.LocationsIn(clientconfig.Cursor, path, nil)
		servers, err := clientconfig.Servers(locs[0])
		if err != nil {
			t.Fatalf("case %d: %v\n%s", i, err, text)
		}
		var names []string
		for _, s := range servers {
			if r.IntN(2) == 0 {
				names = append(names, s.Name)
			}
		}
		if len(names) == 0 {
			continue
		}
		data := ""
		if r.IntN(2) == 0 {
			data = "/var/lib/mcptape data"
		}
		if _, err := clientconfig.Attach(locs, names, &clientconfig.AttachOptions{Executable: exe, Data: data}); err != nil {
			t.Fatalf("case %d: attach %q: %v\n%s", i, names, err, text)
		}
		after := string(read(t, path))

		want := decodeJSON(t, text)
		servers2 := want["mcpServers"].(map[string]any)
		for _, n := range names {
			e := servers2[n].(map[string]any)
			args := []any{"wrap", "--name", n}
			if data != "" {
				args = append(args, "--data", data)
			}
			args = append(args, "--", e["command"])
			if a, ok := e["args"].([]any); ok {
				args = append(args, a...)
			}
			e["command"], e["args"] = exe, args
		}
		if d := cmp.Diff(want, decodeJSON(t, after)); d != "" {
			t.Fatalf("case %d: attach %q: the config reads differently than meant (-want +got):\n%s\nbefore:\n%s\nafter:\n%s", i, names, d, text, after)
		}
		if strings.Contains(text, "\r\n") && strings.Count(after, "\n") != strings.Count(after, "\r\n") {
			t.Fatalf("case %d: a CRLF file got a bare LF:\n%q", i, after)
		}

		if _, err := clientconfig.Detach(locs, nil); err != nil {
			t.Fatalf("case %d: detach: %v", i, err)
		}
		if got := string(read(t, path)); got != text {
			t.Fatalf("case %d: detach did not restore the file:\n%s", i, cmp.Diff(text, got))
		}
	}
}

func decodeJSON(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(strings.TrimPrefix(s, "\xef\xbb\xbf")), &m); err != nil {
		t.Fatalf("%v:\n%s", err, s)
	}
	return m
}

// layout is one random way of writing JSON.
type randLayout struct {
	r       *rand.Rand
	nl      string
	unit    string
	colon   string
	inline  string // what follows ',' on one line
	compact float64
}

func randomConfig(r *rand.Rand) string {
	l := &randLayout{
		r:       r,
		nl:      []string{"\n", "\r\n"}[r.IntN(2)],
		unit:    []string{"  ", "    ", "\t", " "}[r.IntN(4)],
		colon:   []string{":", ": ", " : "}[r.IntN(3)],
		inline:  []string{"", " "}[r.IntN(2)],
		compact: []float64{0, 0.3, 1}[r.IntN(3)],
	}
	servers := map[string]any{}
	var order []string
	for n := range 1 + r.IntN(4) {
		name := []string{"fs", "github", "café", "日本語", `quote"d`, "sp ace", "srv"}[r.IntN(7)] + fmt.Sprint(n)
		e := map[string]any{"command": []string{"npx", "uvx", `C:\srv\a.exe`, "/usr/bin/x y", "node"}[r.IntN(5)]}
		keys := []string{"command"}
		switch r.IntN(4) {
		case 0: // no args
		case 1:
			e["args"] = []any{}
			keys = append(keys, "args")
		default:
			var args []any
			for range 1 + r.IntN(4) {
				args = append(args, []string{"-y", "@scope/pkg", "--flag=1", "ü", "tab\there", "/path with space", "😀"}[r.IntN(7)])
			}
			e["args"] = args
			keys = append(keys, "args")
		}
		if r.IntN(2) == 0 {
			e["env"] = map[string]any{"TOKEN": "x", "N": 1.5, "\x00order": []string{"TOKEN", "N"}}
			keys = append(keys, "env")
		}
		if r.IntN(3) == 0 {
			e["cwd"] = "/srv"
			keys = append(keys, "cwd")
		}
		r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		e["\x00order"] = keys
		servers[name] = e
		order = append(order, name)
	}
	servers["\x00order"] = order
	root := map[string]any{"mcpServers": servers, "x-other": []any{true, nil, -1e3, "ok"}, "\x00order": []string{"x-other", "mcpServers"}}
	if r.IntN(2) == 0 {
		root["\x00order"] = []string{"mcpServers", "x-other"}
	}
	var b strings.Builder
	if r.IntN(8) == 0 {
		b.WriteString("\xef\xbb\xbf")
	}
	l.write(&b, root, 0)
	if r.IntN(2) == 0 {
		b.WriteString(l.nl)
	}
	return b.String()
}

func (l *randLayout) write(b *strings.Builder, v any, depth int) {
	oneLine := l.r.Float64() < l.compact
	ind := func(d int) string { return l.nl + strings.Repeat(l.unit, d) }
	switch v := v.(type) {
	case map[string]any:
		keys := v["\x00order"].([]string)
		b.WriteString("{")
		for i, k := range keys {
			if i > 0 {
				b.WriteString(",")
				if oneLine {
					b.WriteString(l.inline)
				}
			}
			if !oneLine {
				b.WriteString(ind(depth + 1))
			}
			kb, _ := json.Marshal(k)
			b.Write(kb)
			b.WriteString(l.colon)
			l.write(b, v[k], depth+1)
		}
		if !oneLine && len(keys) > 0 {
			b.WriteString(ind(depth))
		}
		b.WriteString("}")
	case []any:
		b.WriteString("[")
		for i, e := range v {
			if i > 0 {
				b.WriteString(",")
				if oneLine {
					b.WriteString(l.inline)
				}
			}
			if !oneLine {
				b.WriteString(ind(depth + 1))
			}
			l.write(b, e, depth+1)
		}
		if !oneLine && len(v) > 0 {
			b.WriteString(ind(depth))
		}
		b.WriteString("]")
	default:
		vb, _ := json.Marshal(v)
		b.Write(vb)
	}
}
