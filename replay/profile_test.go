package replay_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcptape/mcptape/replay"
)

func ExampleLoadProfile() {
	p, err := replay.LoadProfile("testdata/profiles/default.json")
	if err != nil {
		fmt.Println(err)
		return
	}
	ask := `{"messages":[{"role":"user","content":{"type":"text","text":"Say hello."}}],"maxTokens":100,` +
		`"modelPreferences":{"hints":[{"name":"claude-sonnet"}]}}`
	answer, _ := p.AnswerSampling(json.RawMessage(ask))
	fmt.Println(string(answer))

	loop := `{"messages":[{"role":"user","content":{"type":"text","text":"Weather in Paris?"}}],"maxTokens":100,` +
		`"tools":[{"name":"get_weather","inputSchema":{"type":"object"}}]}`
	answer, _ = p.AnswerSampling(json.RawMessage(loop))
	fmt.Println(string(answer))

	answer, _ = p.AnswerElicitation(json.RawMessage(`{"mode":"form","message":"Who are you?","requestedSchema":{"type":"object"}}`))
	fmt.Println(string(answer))
	answer, _ = p.AnswerElicitation(json.RawMessage(`{"mode":"url","message":"Please confirm in your browser.","url":"https://example.com/ok"}`))
	fmt.Println(string(answer))
	fmt.Println(string(p.AnswerRoots()))
	// Output:
	// {"role":"assistant","content":{"type":"text","text":"Claude (mock) says: Say hello."},"model":"claude-mock","stopReason":"endTurn"}
	// {"role":"assistant","content":[{"type":"tool_use","id":"toolu_mcptape_1","name":"get_weather","input":{"city":"Paris"}},{"type":"tool_use","id":"toolu_mcptape_2","name":"get_weather","input":{"city":"London"}}],"model":"mock-model","stopReason":"toolUse"}
	// {"action":"accept","content":{"age":36,"name":"Ada Lovelace","subscribe":true}}
	// {"action":"accept"}
	// {"roots":[{"uri":"file:///fixture/root","name":"fixture-root"},{"uri":"file:///fixture/workspace","name":"fixture-workspace"}]}
}

func TestReadProfileRefuses(t *testing.T) {
	for _, tc := range []struct{ name, doc, says string }{
		{"not JSON", `{"name": default}`, "not JSON at byte"},
		{"empty", ``, "ends early"},
		{"unknown field", `{"name":"x","sampilng":{}}`, `unknown field "sampilng"`},
		{"unknown nested field", `{"sampling":{"templte":"x"}}`, `unknown field "templte"`},
		{"wrong type", `{"roots":"file:///x"}`, `field "roots"`},
		{"two documents", `{"name":"a"} {"name":"b"}`, "more than one JSON value"},
		{"provider", `{"sampling":{"provider":"openai"}}`, `sampling.provider: "openai": want mock or manual`},
		{"empty hint", `{"sampling":{"overrides":[{"model":"m"}]}}`, "sampling.overrides[0].hint: empty"},
		{"bad hint glob", `{"sampling":{"overrides":[{"hint":"claude-*"},{"hint":"gpt-["}]}}`, `sampling.overrides[1].hint: "gpt-[": syntax error in pattern`},
		{"tool use without a name", `{"sampling":{"toolUse":[{"input":{}}]}}`, "sampling.toolUse[0].name: empty"},
		{"bad action", `{"elicitation":{"rules":[{"message":"*","action":"approve"}]}}`, `elicitation.rules[0]: action "approve": want accept, decline or cancel`},
		{"missing action", `{"elicitation":{"default":{"content":{}}}}`, "elicitation.default: action is missing"},
		{"content with decline", `{"elicitation":{"rules":[{"action":"decline","content":{"a":1}}]}}`, "content goes only with accept, not decline"},
		{"bad message glob", `{"elicitation":{"rules":[{"message":"[abc","action":"accept"}]}}`, `elicitation.rules[0]: message "[abc"`},
		{"root without scheme", `{"roots":[{"uri":"/home/me"}]}`, `roots[0].uri: "/home/me" is not a URI`},
		{"bad fault", `{"faults":[{"match":{"method":"tools/list"},"listChanged":"everything"}]}`, `faults[0]: listChanged "everything"`},
		{"bad duration", `{"faults":[{"delay":"soon"}]}`, `duration "soon"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := replay.ReadProfile(strings.NewReader(tc.doc))
			if !errors.Is(err, replay.ErrProfileInvalid) || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("ReadProfile: %v\nwant ErrProfileInvalid saying %q", err, tc.says)
			}
		})
	}
	if _, err := replay.LoadProfile("testdata/profiles/missing.json"); err == nil {
		t.Error("LoadProfile of a missing file succeeded")
	}
	p, err := replay.LoadProfile("testdata/profiles/default.json")
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "default" || len(p.Faults) != 1 || len(p.Roots) != 2 {
		t.Errorf("default.json read as %+v", p)
	}
}

func profile(t *testing.T, doc string) *replay.Profile {
	t.Helper()
	p, err := replay.ReadProfile(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func jsonEqual(t *testing.T, what string, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: %s is not JSON: %v", what, got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(w, g); d != "" {
		t.Errorf("%s (-want +got):\n%s", what, d)
	}
}

func TestAnswerSampling(t *testing.T) {
	p := profile(t, `{"sampling":{"template":"T: {{prompt}} [{{toolResults}}]","model":"base","stopReason":"endTurn",
		"overrides":[{"hint":"claude-3-*","model":"old-claude"},{"hint":"claude-*","template":"C: {{prompt}}","model":"claude"},{"hint":"gpt-?","stopReason":"maxTokens"}],
		"toolUse":[{"name":"get_weather","input":{"city":"Paris"}},{"name":"not_offered"},{"name":"get_time"}]}}`)
	user := func(text string) string {
		return `{"role":"user","content":{"type":"text","text":` + mustJSON(text) + `}}`
	}
	hints := func(names ...string) string {
		var hs []string
		for _, n := range names {
			hs = append(hs, `{"name":`+mustJSON(n)+`}`)
		}
		return `,"modelPreferences":{"hints":[` + strings.Join(hs, ",") + `]}`
	}
	tools := `,"tools":[{"name":"get_weather","inputSchema":{"type":"object"}},{"name":"get_time","inputSchema":{"type":"object"}}]`
	toolUseTurn := `{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"get_weather","input":{"city":"Paris"}}]}`
	toolResult := `{"role":"user","content":[{"type":"tool_result","toolUseId":"a","content":[{"type":"text","text":"sunny"}]},{"type":"tool_result","toolUseId":"b","content":[{"type":"text","text":"noon"}]}]}`
	for _, tc := range []struct{ name, params, want string }{
		{"defaults of the profile", `{"messages":[` + user("hi") + `],"maxTokens":10}`,
			`{"role":"assistant","content":{"type":"text","text":"T: hi []"},"model":"base","stopReason":"endTurn"}`},
		{"the last user text", `{"messages":[` + user("first") + `,{"role":"assistant","content":{"type":"text","text":"x"}},` + user("second") + `]}`,
			`{"role":"assistant","content":{"type":"text","text":"T: second []"},"model":"base","stopReason":"endTurn"}`},
		{"the first matching override wins", `{"messages":[` + user("hi") + `]` + hints("claude-3-opus") + `}`,
			`{"role":"assistant","content":{"type":"text","text":"T: hi []"},"model":"old-claude","stopReason":"endTurn"}`},
		{"by any hint, in override order", `{"messages":[` + user("hi") + `]` + hints("mistral", "claude-sonnet") + `}`,
			`{"role":"assistant","content":{"type":"text","text":"C: hi"},"model":"claude","stopReason":"endTurn"}`},
		{"only some fields overridden", `{"messages":[` + user("hi") + `]` + hints("gpt-4") + `}`,
			`{"role":"assistant","content":{"type":"text","text":"T: hi []"},"model":"base","stopReason":"maxTokens"}`},
		{"no override matches", `{"messages":[` + user("hi") + `]` + hints("gpt-4o", "gemini") + `}`,
			`{"role":"assistant","content":{"type":"text","text":"T: hi []"},"model":"base","stopReason":"endTurn"}`},
		{"tools offered: tool_use for the offered ones", `{"messages":[` + user("weather?") + `]` + tools + hints("claude-x") + `}`,
			`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_mcptape_1","name":"get_weather","input":{"city":"Paris"}},{"type":"tool_use","id":"toolu_mcptape_2","name":"get_time","input":{}}],"model":"claude","stopReason":"toolUse"}`},
		{"tool results present: the text", `{"messages":[` + user("weather?") + `,` + toolUseTurn + `,` + toolResult + `]` + tools + `}`,
			`{"role":"assistant","content":{"type":"text","text":"T: weather? [sunny; noon]"},"model":"base","stopReason":"endTurn"}`},
		{"toolChoice none: the text", `{"messages":[` + user("weather?") + `]` + tools + `,"toolChoice":{"mode":"none"}}`,
			`{"role":"assistant","content":{"type":"text","text":"T: weather? []"},"model":"base","stopReason":"endTurn"}`},
		{"no params", ``, `{"role":"assistant","content":{"type":"text","text":"T:  []"},"model":"base","stopReason":"endTurn"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := p.AnswerSampling(json.RawMessage(tc.params))
			if err != nil {
				t.Fatal(err)
			}
			jsonEqual(t, "answer", got, tc.want)
		})
	}

	t.Run("no profile", func(t *testing.T) {
		var none *replay.Profile
		got, err := none.AnswerSampling(json.RawMessage(`{"messages":[` + user("hi") + `]` + tools + `}`))
		if err != nil {
			t.Fatal(err)
		}
		jsonEqual(t, "answer", got, `{"role":"assistant","content":{"type":"text","text":"mock response to: hi"},"model":"mcptape-mock","stopReason":"endTurn"}`)
	})
	t.Run("manual", func(t *testing.T) {
		m := profile(t, `{"sampling":{"provider":"manual"}}`)
		if _, err := m.AnswerSampling(json.RawMessage(`{"messages":[]}`)); !errors.Is(err, replay.ErrManual) {
			t.Errorf("manual provider: %v, want ErrManual", err)
		}
	})
	t.Run("malformed params", func(t *testing.T) {
		if _, err := p.AnswerSampling(json.RawMessage(`{"messages":7}`)); err == nil {
			t.Error("no error for messages that are a number")
		}
	})
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func TestAnswerElicitation(t *testing.T) {
	p := profile(t, `{"elicitation":{"rules":[
		{"message":"*delete*","action":"decline"},
		{"message":"Path: /tmp/*","action":"cancel"},
		{"message":"*schema defaults*","action":"accept"},
		{"message":"*","action":"accept","content":{"name":"any"}}],
		"default":{"action":"decline"}}}`)
	schema := `,"requestedSchema":{"type":"object","properties":{"name":{"type":"string","default":"Ada"},"age":{"type":"integer"},"ok":{"type":"boolean","default":true}}}`
	for _, tc := range []struct{ name, params, want string }{
		{"first matching rule", `{"mode":"form","message":"Really delete it?"` + schema + `}`, `{"action":"decline"}`},
		{"a star matches slashes in prose", `{"mode":"form","message":"Path: /tmp/a/b/c"}`, `{"action":"cancel"}`},
		{"schema defaults when no content is set", `{"mode":"form","message":"use the schema defaults"` + schema + `}`, `{"action":"accept","content":{"name":"Ada","ok":true}}`},
		{"configured content", `{"message":"Who?"` + schema + `}`, `{"action":"accept","content":{"name":"any"}}`},
		{"URL mode accepts without content", `{"mode":"url","message":"Open this","url":"https://example.com","elicitationId":"e1"}`, `{"action":"accept"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := p.AnswerElicitation(json.RawMessage(tc.params))
			if err != nil {
				t.Fatal(err)
			}
			jsonEqual(t, "answer", got, tc.want)
		})
	}
	d := profile(t, `{"elicitation":{"rules":[{"message":"only this","action":"accept"}],"default":{"action":"accept","content":{"x":1}}}}`)
	got, _ := d.AnswerElicitation(json.RawMessage(`{"message":"something else","requestedSchema":{"type":"object"}}`))
	jsonEqual(t, "default", got, `{"action":"accept","content":{"x":1}}`)
	got, _ = d.AnswerElicitation(json.RawMessage(`{"message":"only this","requestedSchema":{"type":"object"}}`))
	jsonEqual(t, "accept with nothing to fill", got, `{"action":"accept","content":{}}`)
	var none *replay.Profile
	got, _ = none.AnswerElicitation(json.RawMessage(`{"message":"anything"}`))
	jsonEqual(t, "no profile", got, `{"action":"decline"}`)
	jsonEqual(t, "no roots", none.AnswerRoots(), `{"roots":[]}`)
}
