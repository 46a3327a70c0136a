package replay

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDiffDocs(t *testing.T) {
	for _, tc := range []struct {
		name           string
		recorded, live string
		ignore         []string
		want           []Difference
	}{
		{"equal but for order, spelling and _meta",
			`{"result":{"a":1,"b":[1.0,"x"],"_meta":{"t":1}}}`, `{"result":{"b":[1,"x"],"a":1e0,"_meta":{"t":2}}}`, nil, nil},
		{"a changed text",
			`{"result":{"content":[{"type":"text","text":"hello"}]}}`, `{"result":{"content":[{"type":"text","text":"HELLO"}]}}`, nil,
			[]Difference{{"result.content[0].text", `"hello"`, `"HELLO"`}}},
		{"members and elements that appear and go",
			`{"result":{"a":1,"list":[1,2,3]}}`, `{"result":{"b":true,"list":[1,2]},"error":{"code":-1}}`, nil,
			[]Difference{{"error", absent, `{"code":-1}`}, {"result.a", "1", absent}, {"result.b", absent, "true"}, {"result.list[2]", "3", absent}}},
		{"a type change", `{"result":{"a":[1]}}`, `{"result":{"a":{"0":1}}}`, nil, []Difference{{"result.a", "[1]", `{"0":1}`}}},
		{"requestState and timestamps anywhere",
			`{"rounds":[{"result":{"requestState":"a"}}],"result":{"task":{"createdAt":"x","lastUpdatedAt":"y"}}}`,
			`{"rounds":[{"result":{"requestState":"b"}}],"result":{"task":{"createdAt":"z","lastUpdatedAt":"w"}}}`, nil, nil},
		{"an ignored path and what is under it",
			`{"result":{"content":[{"text":"a","n":1}],"x":1}}`, `{"result":{"content":[{"text":"b","n":2}],"x":2}}`, []string{"result.content"},
			[]Difference{{"result.x", "1", "2"}}},
		{"[*] and * in ignored paths",
			`{"notifications":[{"params":{"p":1,"q":1}},{"params":{"p":2,"q":2}}]}`, `{"notifications":[{"params":{"p":9,"q":1}},{"params":{"p":8,"q":2}}]}`,
			[]string{"notifications[*].params.p"}, nil},
		{"an index in an ignored path",
			`{"result":{"content":[{"text":"a"},{"text":"b"}]}}`, `{"result":{"content":[{"text":"x"},{"text":"y"}]}}`, []string{"result.content[0].text"},
			[]Difference{{"result.content[1].text", `"b"`, `"y"`}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ig, err := newIgnoreRules(DefaultIgnoreKeys, tc.ignore)
			if err != nil {
				t.Fatal(err)
			}
			got := diffDocs(decodeAny([]byte(tc.recorded)), decodeAny([]byte(tc.live)), ig)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
	t.Run("bounded", func(t *testing.T) {
		var a, b []string
		for i := range 80 {
			a, b = append(a, "0"), append(b, strings.Repeat("1", i+1))
		}
		ig, _ := newIgnoreRules(nil, nil)
		got := diffDocs(decodeAny([]byte("["+strings.Join(a, ",")+"]")), decodeAny([]byte("["+strings.Join(b, ",")+"]")), ig)
		if len(got) != maxDiffs+1 || !strings.Contains(got[maxDiffs].Recorded, "30 more") {
			t.Errorf("%d differences, last %v", len(got), got[len(got)-1])
		}
	})
}

func TestParseDocPath(t *testing.T) {
	for p, want := range map[string][]string{
		"result.content[0].text": {"result", "content", "[0]", "text"},
		"notifications[*]":       {"notifications", "[*]"},
		"rounds[1][2].x":         {"rounds", "[1]", "[2]", "x"},
		"result.*.text":          {"result", "*", "text"},
	} {
		got, err := parseDocPath(p)
		if err != nil || !cmp.Equal(got, want) {
			t.Errorf("parseDocPath(%q) = %q, %v; want %q", p, got, err, want)
		}
	}
	for _, p := range []string{"", "result..text", ".result", "a[x]", "a[1", "a]"} {
		if _, err := parseDocPath(p); !errors.Is(err, ErrBadIgnorePath) {
			t.Errorf("parseDocPath(%q): %v, want ErrBadIgnorePath", p, err)
		}
	}
}

func TestEditMembers(t *testing.T) {
	for _, tc := range []struct{ obj, key, value, want string }{
		{`{"a": 1, "requestState" : "old"}`, "requestState", `"new"`, `{"a": 1, "requestState" : "new"}`},
		{`{"a":1}`, "requestState", `"s"`, `{"a":1,"requestState":"s"}`},
		{`{ }`, "k", `{}`, `{ "k":{}}`},
	} {
		got, err := setOrAddMember([]byte(tc.obj), tc.key, []byte(tc.value))
		if err != nil || string(got) != tc.want {
			t.Errorf("setOrAddMember(%s, %s) = %s, %v; want %s", tc.obj, tc.key, got, err, tc.want)
		}
	}
	if _, err := setOrAddMember([]byte(`[1]`), "k", []byte(`1`)); err == nil {
		t.Error("setOrAddMember on a list succeeded")
	}
	for _, tc := range []struct{ obj, key, want string }{
		{`{"a": {"x" : 1}, "requestState":"s", "b":2}`, "requestState", `{"a":{"x" : 1},"b":2}`},
		{`{"a":1}`, "requestState", `{"a":1}`},
		{`{"requestState":"s"}`, "requestState", `{}`},
	} {
		if got := withoutMember([]byte(tc.obj), tc.key); string(got) != tc.want {
			t.Errorf("withoutMember(%s, %s) = %s, want %s", tc.obj, tc.key, got, tc.want)
		}
	}
}
