package replay

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"strings"
)

// Profile is a testing profile: how a stand-in answers what it cannot replay
// (docs/testing-profiles.md). The replay client answers a live server's
// sampling, elicitation and roots requests (or MRTR input requests) from the
// recording first and from the profile when the recording has no answer;
// the replay server takes its Faults.
type Profile struct {
	// Name identifies the profile (the dashboard lists profiles by name).
	Name string `json:"name"`
	// Sampling answers sampling/createMessage.
	Sampling *SamplingProfile `json:"sampling,omitempty"`
	// Elicitation answers elicitation/create.
	Elicitation *ElicitationProfile `json:"elicitation,omitempty"`
	// Roots is the roots/list answer.
	Roots []Root `json:"roots,omitempty"`
	// Faults are injected by the replay server.
	Faults []Annotation `json:"faults,omitempty"`
}

// SamplingProfile answers sampling requests: by hand (the dashboard asks a
// person) or from a mock template.
type SamplingProfile struct {
	// Provider is "mock" (the default) or "manual": a person answers,
	// through ClientOptions.Manual (the dashboard's pending requests in
	// `mcptape replay client`); see ErrManual.
	Provider string `json:"provider,omitempty"`
	// Template is the default response text; {{prompt}} is replaced by the
	// text of the last user message that has text, {{toolResults}} by the
	// text of the tool results in the last message. Empty means
	// DefaultSamplingTemplate.
	Template string `json:"template,omitempty"`
	// Model and StopReason of the default response; empty means
	// DefaultSamplingModel and DefaultSamplingStopReason.
	Model      string `json:"model,omitempty"`
	StopReason string `json:"stopReason,omitempty"`
	// Overrides apply by model hint (modelPreferences.hints[].name),
	// matched as globs with path.Match ("claude-*"): the first override
	// that matches any hint wins, and its non-empty fields replace the
	// defaults.
	Overrides []SamplingOverride `json:"overrides,omitempty"`
	// ToolUse answers tool-enabled sampling (a request that offers tools
	// and carries no tool results yet) with tool_use blocks: one for each
	// entry whose Name is among the offered tools, stop reason "toolUse".
	// Once the messages carry tool results, the answer is the text.
	ToolUse []ToolUse `json:"toolUse,omitempty"`
}

// SamplingOverride replaces parts of the default response for model hints
// matching Hint.
type SamplingOverride struct {
	Hint       string `json:"hint"`
	Template   string `json:"template,omitempty"`
	Model      string `json:"model,omitempty"`
	StopReason string `json:"stopReason,omitempty"`
}

// ToolUse is one tool_use block of a mock sampling response.
type ToolUse struct {
	Name  string         `json:"name"`
	Input map[string]any `json:"input,omitempty"`
}

// ElicitationProfile answers elicitation requests: the first rule whose
// pattern matches the request's message, else the default, else decline.
type ElicitationProfile struct {
	Rules   []ElicitationRule `json:"rules,omitempty"`
	Default *ElicitationRule  `json:"default,omitempty"`
}

// ElicitationRule is one elicitation answer.
type ElicitationRule struct {
	// Message is a glob matched against the request's message ("" matches
	// all): path.Match syntax, except that * and ? match "/" too.
	Message string `json:"message,omitempty"`
	// Action is accept, decline or cancel.
	Action string `json:"action"`
	// Content is the form content of an accept. Nil takes the defaults
	// of the requested schema's properties; a URL-mode accept carries no
	// content.
	Content map[string]any `json:"content,omitempty"`
}

// Root is one roots/list entry.
type Root struct {
	URI  string `json:"uri"`
	Name string `json:"name,omitempty"`
}

// Sampling providers.
const (
	// ProviderMock answers from the profile's template.
	ProviderMock = "mock"
	// ProviderManual leaves sampling to a person: the replay client asks
	// ClientOptions.Manual (the dashboard's /pending page).
	ProviderManual = "manual"
)

// Defaults of the mock sampling provider.
const (
	DefaultSamplingTemplate   = "mock response to: {{prompt}}"
	DefaultSamplingModel      = "mcptape-mock"
	DefaultSamplingStopReason = "endTurn"
)

// Profile errors callers branch on.
var (
	// ErrManual is returned by AnswerSampling when the provider is
	// "manual": a person answers (ClientOptions.Manual, the dashboard), not
	// the profile. A replay client without Manual answers the server with
	// this error.
	ErrManual = errors.New("the testing profile leaves sampling to a person (provider manual)")
	// ErrProfileInvalid is returned for a profile that breaks the format's
	// rules (docs/testing-profiles.md).
	ErrProfileInvalid = errors.New("invalid testing profile")
)

// LoadProfile reads and checks a testing profile file.
func LoadProfile(path string) (*Profile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p, err := ReadProfile(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// ReadProfile reads and checks a testing profile document. Unknown fields
// are refused: a misspelt field would otherwise silently do nothing.
func ReadProfile(r io.Reader) (*Profile, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var p Profile
	if err := dec.Decode(&p); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return nil, fmt.Errorf("%w: not JSON at byte %d: %v", ErrProfileInvalid, se.Offset, err)
		case errors.As(err, &te):
			return nil, fmt.Errorf("%w: field %q: want %s, not a JSON %s", ErrProfileInvalid, te.Field, te.Type, te.Value)
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			return nil, fmt.Errorf("%w: the document ends early, at byte %d", ErrProfileInvalid, dec.InputOffset())
		}
		// encoding/json says `json: unknown field "x"`.
		return nil, fmt.Errorf("%w: %s", ErrProfileInvalid, strings.TrimPrefix(err.Error(), "json: "))
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: more than one JSON value (at byte %d)", ErrProfileInvalid, dec.InputOffset())
	}
	if err := p.Check(); err != nil {
		return nil, err
	}
	return &p, nil
}

// Check reports the first rule of the format p breaks, naming the field.
func (p *Profile) Check() error {
	bad := func(field string, format string, a ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrProfileInvalid, field, fmt.Sprintf(format, a...))
	}
	if s := p.Sampling; s != nil {
		switch s.Provider {
		case "", ProviderMock, ProviderManual:
		default:
			return bad("sampling.provider", "%q: want mock or manual", s.Provider)
		}
		for i, o := range s.Overrides {
			if o.Hint == "" {
				return bad(fmt.Sprintf("sampling.overrides[%d].hint", i), "empty: say which model hints it applies to, e.g. \"claude-*\"")
			}
			if _, err := path.Match(o.Hint, ""); err != nil {
				return bad(fmt.Sprintf("sampling.overrides[%d].hint", i), "%q: %v", o.Hint, err)
			}
		}
		for i, u := range s.ToolUse {
			if u.Name == "" {
				return bad(fmt.Sprintf("sampling.toolUse[%d].name", i), "empty: name the tool to call")
			}
		}
	}
	if e := p.Elicitation; e != nil {
		for i := range e.Rules {
			if err := e.Rules[i].check(); err != nil {
				return bad(fmt.Sprintf("elicitation.rules[%d]", i), "%v", err)
			}
		}
		if e.Default != nil {
			if err := e.Default.check(); err != nil {
				return bad("elicitation.default", "%v", err)
			}
		}
	}
	for i, r := range p.Roots {
		if u, err := url.Parse(r.URI); err != nil || u.Scheme == "" {
			return bad(fmt.Sprintf("roots[%d].uri", i), "%q is not a URI (roots are URIs such as file:///home/me/project)", r.URI)
		}
	}
	for i := range p.Faults {
		if err := p.Faults[i].check(); err != nil {
			return bad(fmt.Sprintf("faults[%d]", i), "%v", err)
		}
	}
	return nil
}

func (r *ElicitationRule) check() error {
	switch r.Action {
	case "accept", "decline", "cancel":
	case "":
		return errors.New("action is missing: want accept, decline or cancel")
	default:
		return fmt.Errorf("action %q: want accept, decline or cancel", r.Action)
	}
	if r.Content != nil && r.Action != "accept" {
		return fmt.Errorf("content goes only with accept, not %s", r.Action)
	}
	if _, err := path.Match(r.Message, ""); err != nil {
		return fmt.Errorf("message %q: %v", r.Message, err)
	}
	return nil
}

// samplingRequest is what the mock provider reads of sampling params.
type samplingRequest struct {
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	ModelPreferences *struct {
		Hints []struct {
			Name string `json:"name"`
		} `json:"hints"`
	} `json:"modelPreferences"`
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
	ToolChoice *struct {
		Mode string `json:"mode"`
	} `json:"toolChoice"`
}

// samplingBlock is one block of sampling content (text, tool_use, tool_result).
type samplingBlock struct {
	Type    string          `json:"type"`
	Text    string          `json:"text"`
	Content json.RawMessage `json:"content"` // a tool_result's blocks
}

// samplingBlocks reads a content member: one block or a list of them.
func samplingBlocks(raw json.RawMessage) []samplingBlock {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil
	}
	if raw[0] == '[' {
		var bs []samplingBlock
		_ = json.Unmarshal(raw, &bs)
		return bs
	}
	var b samplingBlock
	if json.Unmarshal(raw, &b) != nil {
		return nil
	}
	return []samplingBlock{b}
}

func samplingText(bs []samplingBlock) string {
	var parts []string
	for _, b := range bs {
		if b.Type == "text" && b.Text != "" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// samplingAnswer is a CreateMessageResult, fields in the spec's order.
type samplingAnswer struct {
	Role       string `json:"role"`
	Content    any    `json:"content"`
	Model      string `json:"model"`
	StopReason string `json:"stopReason"`
}

type samplingToolUse struct {
	Type  string         `json:"type"`
	ID    string         `json:"id"`
	Name  string         `json:"name"`
	Input map[string]any `json:"input"`
}

type samplingTextBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// AnswerSampling answers sampling/createMessage params as the profile says:
// with ErrManual for the manual provider, else a mock CreateMessageResult
// (see SamplingProfile). A nil Profile, or one without a sampling section,
// answers with the defaults.
func (p *Profile) AnswerSampling(params json.RawMessage) (json.RawMessage, error) {
	var sp SamplingProfile
	if p != nil && p.Sampling != nil {
		sp = *p.Sampling
	}
	if sp.Provider == ProviderManual {
		return nil, ErrManual
	}
	var req samplingRequest
	if len(bytes.TrimSpace(params)) > 0 {
		if err := json.Unmarshal(params, &req); err != nil {
			return nil, fmt.Errorf("sampling params: %w", err)
		}
	}
	tmpl := cmp.Or(sp.Template, DefaultSamplingTemplate)
	model := cmp.Or(sp.Model, DefaultSamplingModel)
	stop := cmp.Or(sp.StopReason, DefaultSamplingStopReason)
	if o := sp.override(&req); o != nil {
		tmpl, model, stop = cmp.Or(o.Template, tmpl), cmp.Or(o.Model, model), cmp.Or(o.StopReason, stop)
	}

	// The conversation so far: the last user text, the latest tool results,
	// and whether any tool has answered yet.
	prompt, results, answered := "", "", false
	for i, m := range req.Messages {
		bs := samplingBlocks(m.Content)
		var res []string
		for _, b := range bs {
			if b.Type == "tool_result" {
				answered = true
				res = append(res, samplingText(samplingBlocks(b.Content)))
			}
		}
		if t := samplingText(bs); m.Role == "user" && t != "" {
			prompt = t
		}
		if i == len(req.Messages)-1 {
			results = strings.Join(res, "; ")
		}
	}

	if len(req.Tools) > 0 && !answered && (req.ToolChoice == nil || req.ToolChoice.Mode != "none") {
		offered := map[string]bool{}
		for _, t := range req.Tools {
			offered[t.Name] = true
		}
		var uses []samplingToolUse
		for _, u := range sp.ToolUse {
			if offered[u.Name] {
				in := u.Input
				if in == nil {
					in = map[string]any{}
				}
				uses = append(uses, samplingToolUse{"tool_use", fmt.Sprintf("toolu_mcptape_%d", len(uses)+1), u.Name, in})
			}
		}
		if len(uses) > 0 {
			return json.Marshal(samplingAnswer{"assistant", uses, model, "toolUse"})
		}
	}
	text := strings.NewReplacer("{{prompt}}", prompt, "{{toolResults}}", results).Replace(tmpl)
	return json.Marshal(samplingAnswer{"assistant", samplingTextBlock{"text", text}, model, stop})
}

// override is the first override matching one of the request's hints.
func (sp *SamplingProfile) override(req *samplingRequest) *SamplingOverride {
	if req.ModelPreferences == nil {
		return nil
	}
	for i := range sp.Overrides {
		for _, h := range req.ModelPreferences.Hints {
			if ok, _ := path.Match(sp.Overrides[i].Hint, h.Name); ok {
				return &sp.Overrides[i]
			}
		}
	}
	return nil
}

// elicitationAnswer is an ElicitResult.
type elicitationAnswer struct {
	Action  string         `json:"action"`
	Content map[string]any `json:"content,omitempty"`
}

// AnswerElicitation answers elicitation/create params: the first rule whose
// message pattern matches, else the default, else decline. An accept of a
// URL-mode request carries no content; an accept of a form without
// configured content takes the schema's defaults.
func (p *Profile) AnswerElicitation(params json.RawMessage) (json.RawMessage, error) {
	var req struct {
		Mode            string `json:"mode"`
		Message         string `json:"message"`
		RequestedSchema struct {
			Properties map[string]struct {
				Default any `json:"default"`
			} `json:"properties"`
		} `json:"requestedSchema"`
	}
	if len(bytes.TrimSpace(params)) > 0 {
		if err := json.Unmarshal(params, &req); err != nil {
			return nil, fmt.Errorf("elicitation params: %w", err)
		}
	}
	rule := &ElicitationRule{Action: "decline"}
	if p != nil && p.Elicitation != nil {
		if e := p.Elicitation; e.Default != nil {
			rule = e.Default
		}
		for i := range p.Elicitation.Rules {
			if r := &p.Elicitation.Rules[i]; messageMatch(r.Message, req.Message) {
				rule = r
				break
			}
		}
	}
	ans := elicitationAnswer{Action: rule.Action}
	if rule.Action == "accept" && req.Mode != "url" {
		ans.Content = rule.Content
		if ans.Content == nil {
			ans.Content = map[string]any{}
			for k, prop := range req.RequestedSchema.Properties {
				if prop.Default != nil {
					ans.Content[k] = prop.Default
				}
			}
		}
	}
	b, err := json.Marshal(ans)
	if err != nil {
		return nil, err
	}
	if ans.Action == "accept" && req.Mode != "url" && len(ans.Content) == 0 {
		// An accepted form always carries its content, even empty.
		b = []byte(`{"action":"accept","content":{}}`)
	}
	return b, nil
}

// messageMatch matches an elicitation message against a rule's glob: "" is
// every message, and unlike path.Match, * and ? match "/" too (messages
// are prose, not paths).
func messageMatch(pattern, message string) bool {
	if pattern == "" {
		return true
	}
	const slash = "\uE000" // a private-use rune stands in for "/"
	ok, _ := path.Match(strings.ReplaceAll(pattern, "/", slash), strings.ReplaceAll(message, "/", slash))
	return ok
}

// AnswerRoots is the roots/list result the profile gives: its roots, or
// none.
func (p *Profile) AnswerRoots() json.RawMessage {
	roots := []Root{}
	if p != nil && p.Roots != nil {
		roots = p.Roots
	}
	b, _ := json.Marshal(struct {
		Roots []Root `json:"roots"`
	}{roots})
	return b
}
