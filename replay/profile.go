package replay

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
	// Provider is "mock" (the default) or "manual".
	Provider string `json:"provider,omitempty"`
	// Template is the default response text; {{prompt}} is replaced by the
	// last user message's text.
	Template string `json:"template,omitempty"`
	// Model and StopReason of the default response.
	Model      string `json:"model,omitempty"`
	StopReason string `json:"stopReason,omitempty"`
	// Overrides apply by model hint (modelPreferences.hints[].name),
	// matched as globs ("claude-*"); the first match wins.
	Overrides []SamplingOverride `json:"overrides,omitempty"`
	// ToolUse answers tool-enabled sampling (a request that offers tools
	// and carries no tool results yet) with tool_use blocks.
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
// pattern matches the request's message, else the default.
type ElicitationProfile struct {
	Rules   []ElicitationRule `json:"rules,omitempty"`
	Default *ElicitationRule  `json:"default,omitempty"`
}

// ElicitationRule is one elicitation answer.
type ElicitationRule struct {
	// Message is a glob matched against the request's message ("" matches all).
	Message string `json:"message,omitempty"`
	// Action is accept, decline or cancel.
	Action string `json:"action"`
	// Content is the form content of an accept.
	Content map[string]any `json:"content,omitempty"`
}

// Root is one roots/list entry.
type Root struct {
	URI  string `json:"uri"`
	Name string `json:"name,omitempty"`
}
