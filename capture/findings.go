package capture

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/mcptape/mcptape/protocol"
)

// toolInfo is what the last tools/list said about one tool.
type toolInfo struct {
	input, output *jsonschema.Resolved
	// headers maps a lower-cased Mcp-Param-* suffix to its property.
	headers map[string]headerParam
}

type headerParam struct {
	header string // as declared in x-mcp-header
	prop   string
	typ    string // string, integer or boolean
}

// maxTools bounds the catalog kept per session (hostile servers).
const maxTools = 2000

// learnTools reads a tools/list result into the session's catalog and
// returns findings about invalid x-mcp-header annotations and schemas.
func (st *linker) learnTools(result json.RawMessage, paged bool) []Finding {
	var r struct {
		Tools []struct {
			Name         string          `json:"name"`
			InputSchema  json.RawMessage `json:"inputSchema"`
			OutputSchema json.RawMessage `json:"outputSchema"`
		} `json:"tools"`
	}
	if json.Unmarshal(result, &r) != nil {
		return nil
	}
	if st.tools == nil || !paged {
		st.tools = map[string]*toolInfo{}
	}
	var fs []Finding
	for _, t := range r.Tools {
		if len(st.tools) >= maxTools {
			break
		}
		ti := &toolInfo{}
		var err error
		if ti.input, err = resolveSchema(t.InputSchema); err != nil {
			fs = append(fs, Finding{FindingSchema, fmt.Sprintf("tool %q: inputSchema does not compile: %v", t.Name, err)})
		}
		if ti.output, err = resolveSchema(t.OutputSchema); err != nil {
			fs = append(fs, Finding{FindingSchema, fmt.Sprintf("tool %q: outputSchema does not compile: %v", t.Name, err)})
		}
		var hfs []string
		ti.headers, hfs = headerAnnotations(t.InputSchema)
		for _, h := range hfs {
			fs = append(fs, Finding{FindingHeaderMismatch, fmt.Sprintf("tool %q: %s (clients must drop this tool)", t.Name, h)})
		}
		st.tools[t.Name] = ti
	}
	return fs
}

func resolveSchema(raw json.RawMessage) (*jsonschema.Resolved, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	// No loader: a recorded schema never makes the recorder fetch anything.
	return s.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: false})
}

// headerAnnotations finds the x-mcp-header annotations of an inputSchema,
// checking the rules of SEP-2243: a token, unique case-insensitively, on a
// string, integer or boolean property reachable only through properties.
func headerAnnotations(raw json.RawMessage) (map[string]headerParam, []string) {
	var root map[string]json.RawMessage
	if json.Unmarshal(raw, &root) != nil {
		return nil, nil
	}
	out := map[string]headerParam{}
	var problems []string
	var walk func(node map[string]json.RawMessage, path string, direct bool)
	walk = func(node map[string]json.RawMessage, path string, direct bool) {
		if h, ok := node["x-mcp-header"]; ok && path != "" {
			var name string
			var typ string
			_ = json.Unmarshal(node["type"], &typ)
			switch {
			case json.Unmarshal(h, &name) != nil || name == "":
				problems = append(problems, fmt.Sprintf("x-mcp-header on %s is not a non-empty string", path))
			case !isToken(name):
				problems = append(problems, fmt.Sprintf("x-mcp-header %q on %s is not an HTTP token", name, path))
			case !direct:
				problems = append(problems, fmt.Sprintf("x-mcp-header %q on %s is not reachable through properties alone", name, path))
			case typ != "string" && typ != "integer" && typ != "boolean":
				problems = append(problems, fmt.Sprintf("x-mcp-header %q on %s: the property's type is %q, not string, integer or boolean", name, path, typ))
			default:
				key := strings.ToLower(name)
				if _, dup := out[key]; dup {
					problems = append(problems, fmt.Sprintf("x-mcp-header %q is declared twice (case-insensitively)", name))
				} else if !strings.Contains(path, ".") {
					out[key] = headerParam{header: name, prop: path, typ: typ}
				}
			}
		}
		for k, v := range node {
			switch k {
			case "properties":
				var props map[string]json.RawMessage
				if json.Unmarshal(v, &props) != nil {
					continue
				}
				for name, p := range props {
					var child map[string]json.RawMessage
					if json.Unmarshal(p, &child) == nil {
						sub := name
						if path != "" {
							sub = path + "." + name
						}
						walk(child, sub, direct)
					}
				}
			case "items", "oneOf", "anyOf", "allOf", "not", "if", "then", "else", "additionalProperties", "$defs", "definitions":
				var child map[string]json.RawMessage
				if json.Unmarshal(v, &child) == nil {
					walk(child, path+"/"+k, false)
					continue
				}
				var list []map[string]json.RawMessage
				if json.Unmarshal(v, &list) == nil {
					for i, c := range list {
						walk(c, fmt.Sprintf("%s/%s[%d]", path, k, i), false)
					}
				}
			}
		}
	}
	walk(root, "", true)
	sort.Strings(problems)
	return out, problems
}

func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return s != ""
}

// checkToolCall validates a tools/call request's arguments against the
// tool's inputSchema and its Mcp-Param-* headers against the tool's
// x-mcp-header annotations.
func (st *linker) checkToolCall(name string, args json.RawMessage, h http.Header) []Finding {
	ti := st.tools[name]
	if ti == nil {
		return nil
	}
	var fs []Finding
	var argv map[string]any
	if len(args) > 0 {
		_ = json.Unmarshal(args, &argv)
	}
	if ti.input != nil {
		var inst any = map[string]any{}
		if argv != nil {
			inst = argv
		}
		if err := ti.input.Validate(inst); err != nil {
			fs = append(fs, Finding{FindingSchema, fmt.Sprintf("arguments of %q do not validate against its inputSchema: %v", name, clip(err.Error(), 300))})
		}
	}
	modern := st.s.Era == protocol.EraModern
	for key, hp := range ti.headers {
		hv, present := headerValue(h, key)
		v, hasArg := argv[hp.prop]
		if v == nil {
			hasArg = false
		}
		switch {
		case hasArg && !present:
			if modern {
				fs = append(fs, Finding{FindingHeaderMismatch, fmt.Sprintf("argument %s of %q is annotated x-mcp-header %q but Mcp-Param-%s is missing", hp.prop, name, hp.header, hp.header)})
			}
		case !hasArg && present:
			fs = append(fs, Finding{FindingHeaderMismatch, fmt.Sprintf("Mcp-Param-%s is sent but argument %s of %q is absent", hp.header, hp.prop, name)})
		case hasArg && present:
			decoded, err := protocol.DecodeHeaderValue(hv)
			if err != nil {
				fs = append(fs, Finding{FindingHeaderMismatch, fmt.Sprintf("Mcp-Param-%s: %v", hp.header, err)})
			} else if !sameParam(v, decoded, hp.typ) {
				fs = append(fs, Finding{FindingHeaderMismatch, fmt.Sprintf("Mcp-Param-%s is %q but argument %s of %q is %s", hp.header, clip(decoded, 60), hp.prop, name, clip(fmt.Sprint(v), 60))})
			}
		}
	}
	return fs
}

func headerValue(h http.Header, lowerSuffix string) (string, bool) {
	for k, vs := range h {
		if len(k) > len(protocol.HeaderParamPrefix) && strings.EqualFold(k[:len(protocol.HeaderParamPrefix)], protocol.HeaderParamPrefix) &&
			strings.ToLower(k[len(protocol.HeaderParamPrefix):]) == lowerSuffix && len(vs) > 0 {
			return vs[0], true
		}
	}
	return "", false
}

// sameParam compares an argument with its header value as SEP-2243 says:
// strings as they are, integers numerically, booleans as true/false.
func sameParam(v any, header, typ string) bool {
	switch x := v.(type) {
	case string:
		return x == header
	case bool:
		return strconv.FormatBool(x) == header
	case float64:
		n, err := strconv.ParseInt(header, 10, 64)
		return err == nil && float64(n) == x && math.Abs(x) <= 1<<53-1
	}
	return false
}

// checkStructured validates a tool result's structuredContent against the
// tool's outputSchema.
func (st *linker) checkStructured(name string, res *protocol.Result) []Finding {
	ti := st.tools[name]
	if ti == nil || ti.output == nil || res.IsError {
		return nil
	}
	if len(res.StructuredContent) == 0 || string(res.StructuredContent) == "null" {
		return []Finding{{FindingSchema, fmt.Sprintf("tool %q declares an outputSchema but its result has no structuredContent", name)}}
	}
	var inst any
	if json.Unmarshal(res.StructuredContent, &inst) != nil {
		return nil
	}
	if err := ti.output.Validate(inst); err != nil {
		return []Finding{{FindingSchema, fmt.Sprintf("structuredContent of %q does not validate against its outputSchema: %v", name, clip(err.Error(), 300))}}
	}
	return nil
}

// clientCaps is what capabilityFinding reads of a client's capabilities.
type clientCaps struct {
	Sampling    *struct{ Tools json.RawMessage } `json:"sampling"`
	Elicitation *struct {
		URL  json.RawMessage `json:"url"`
		Form json.RawMessage `json:"form"`
	} `json:"elicitation"`
	Roots json.RawMessage `json:"roots"`
}

// parseCaps reads caps; false when they are malformed.
func parseCaps(caps json.RawMessage) (c clientCaps, ok bool) {
	if len(caps) > 0 && json.Unmarshal(caps, &c) != nil {
		return c, false
	}
	return c, true
}

// capabilityFinding says whether a client that declared caps may be asked
// method with params (a server→client request, or an MRTR input request).
func capabilityFinding(caps json.RawMessage, method string, p *protocol.Params) *Finding {
	c, ok := parseCaps(caps)
	if !ok {
		return nil
	}
	return capsFinding(&c, method, p)
}

// capsFinding is capabilityFinding for capabilities parseCaps read.
func capsFinding(c *clientCaps, method string, p *protocol.Params) *Finding {
	missing := ""
	switch method {
	case protocol.MethodSampling:
		switch {
		case c.Sampling == nil:
			missing = "sampling"
		case p.Tools && c.Sampling.Tools == nil:
			missing = "sampling.tools"
		}
	case protocol.MethodElicitation:
		switch {
		case c.Elicitation == nil:
			missing = "elicitation"
		case p.Mode == "url" && c.Elicitation.URL == nil:
			missing = "elicitation.url"
		}
	case protocol.MethodRootsList:
		if c.Roots == nil {
			missing = "roots"
		}
	}
	if missing == "" {
		return nil
	}
	return &Finding{FindingCapability, fmt.Sprintf("%s asked of a client that did not declare the %s capability", method, missing)}
}

// checkInputRequests applies capabilityFinding to each request of an MRTR
// input_required result, against the capabilities its request declared,
// and checks its elicitation forms (noteElicitation); round is the seq of
// the request the result answers.
func (st *linker) checkInputRequests(round uint64, caps json.RawMessage, inputRequests json.RawMessage) []Finding {
	var reqs map[string]struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(inputRequests, &reqs) != nil {
		return nil
	}
	keys := make([]string, 0, len(reqs))
	for k := range reqs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var fs []Finding
	for _, k := range keys {
		r := reqs[k]
		p, _ := protocol.ParseParams(r.Params)
		if f := capabilityFinding(caps, r.Method, &p); f != nil {
			f.Message = "input request " + strconv.Quote(k) + ": " + f.Message
			fs = append(fs, *f)
		}
		if r.Method == protocol.MethodElicitation {
			for _, f := range st.noteElicitation(elicitKey{round, k}, r.Params) {
				f.Message = "input request " + strconv.Quote(k) + ": " + f.Message
				fs = append(fs, f)
			}
		}
	}
	return fs
}

// elicitKey names an elicitation waiting for its answer: a server→client
// request by its seq (key ""), or an MRTR input request by the seq of the
// round whose input_required result asked it and its key.
type elicitKey struct {
	seq uint64
	key string
}

// maxForms bounds the elicitation forms kept per session until answered.
const maxForms = 1000

// formField is a property of a requested schema, for the flat-primitive
// rule: what the spec allows an elicitation form to ask.
type formField struct {
	Type       string            `json:"type"`
	Enum       []json.RawMessage `json:"enum"`
	OneOf      []json.RawMessage `json:"oneOf"`
	Properties json.RawMessage   `json:"properties"`
	Items      *struct {
		Type  string            `json:"type"`
		Enum  []json.RawMessage `json:"enum"`
		AnyOf []json.RawMessage `json:"anyOf"`
	} `json:"items"`
	Format string `json:"format"`
}

// flatProblems checks a form elicitation's requestedSchema against the
// spec's rule: an object whose properties are primitives (string, number,
// integer, boolean, or a single- or multi-select enum); no nesting.
func flatProblems(raw json.RawMessage) []string {
	var root struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if len(bytes.TrimSpace(raw)) == 0 || string(raw) == "null" {
		return []string{"a form elicitation without requestedSchema"}
	}
	if json.Unmarshal(raw, &root) != nil {
		return []string{"requestedSchema is not a JSON object"}
	}
	var out []string
	if root.Type != "object" {
		out = append(out, fmt.Sprintf("requestedSchema has type %q, not \"object\"", root.Type))
	}
	names := make([]string, 0, len(root.Properties))
	for k := range root.Properties {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		var f formField
		if json.Unmarshal(root.Properties[name], &f) != nil {
			out = append(out, fmt.Sprintf("property %q is not a schema object", name))
			continue
		}
		switch f.Type {
		case "string", "number", "integer", "boolean":
			if len(f.Properties) > 0 {
				out = append(out, fmt.Sprintf("property %q nests properties", name))
			}
			switch f.Format {
			case "", "email", "uri", "date", "date-time":
			default:
				out = append(out, fmt.Sprintf("property %q has format %q (a form allows email, uri, date and date-time)", name, f.Format))
			}
		case "array":
			if f.Items == nil || (len(f.Items.Enum) == 0 && len(f.Items.AnyOf) == 0) {
				out = append(out, fmt.Sprintf("property %q is an array that is not a multi-select enum (items with enum or anyOf)", name))
			}
		case "object":
			out = append(out, fmt.Sprintf("property %q is an object; a form is flat", name))
		case "":
			out = append(out, fmt.Sprintf("property %q has no type", name))
		default:
			out = append(out, fmt.Sprintf("property %q has type %q, not a primitive", name, f.Type))
		}
	}
	return out
}

// noteElicitation checks an elicitation/create (a server→client request,
// or an MRTR input request) and keeps its form's schema until the answer
// comes, to validate the answer against it.
func (st *linker) noteElicitation(k elicitKey, params json.RawMessage) []Finding {
	var p struct {
		Mode            string          `json:"mode"`
		RequestedSchema json.RawMessage `json:"requestedSchema"`
	}
	if json.Unmarshal(params, &p) != nil || (p.Mode != "" && p.Mode != "form") {
		return nil
	}
	var fs []Finding
	for _, pr := range flatProblems(p.RequestedSchema) {
		fs = append(fs, Finding{FindingSchema, "elicitation form outside the flat-primitive rule: " + pr})
	}
	rs, err := resolveSchema(p.RequestedSchema)
	if err != nil {
		fs = append(fs, Finding{FindingSchema, fmt.Sprintf("elicitation requestedSchema does not compile: %v", clip(err.Error(), 200))})
	}
	if rs != nil {
		if st.forms == nil {
			st.forms = map[elicitKey]*jsonschema.Resolved{}
		}
		if len(st.forms) < maxForms {
			st.forms[k] = rs
		}
	}
	return fs
}

// checkElicitAnswer validates an elicitation result against the form it
// answers: an accepted form's content must validate against its
// requestedSchema, and only accept carries content.
func (st *linker) checkElicitAnswer(k elicitKey, result json.RawMessage) []Finding {
	rs := st.forms[k]
	delete(st.forms, k)
	var r struct {
		Action  string          `json:"action"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(result, &r) != nil {
		return nil
	}
	hasContent := len(bytes.TrimSpace(r.Content)) > 0 && string(r.Content) != "null"
	switch r.Action {
	case "accept":
	case "decline", "cancel":
		if hasContent {
			return []Finding{{FindingSchema, fmt.Sprintf("elicitation answer %q carries content; only accept does", r.Action)}}
		}
		return nil
	default:
		return []Finding{{FindingMalformed, fmt.Sprintf("elicitation answer with action %q (want accept, decline or cancel)", clip(r.Action, 40))}}
	}
	if rs == nil {
		return nil
	}
	var inst any = map[string]any{}
	if hasContent && json.Unmarshal(r.Content, &inst) != nil {
		return nil
	}
	if err := rs.Validate(inst); err != nil {
		return []Finding{{FindingSchema, "elicitation answer does not validate against the form's requestedSchema: " + clip(formProblems(rs.Schema(), inst, err), 300)}}
	}
	return nil
}

// formProblems explains why a form's answer does not validate: every
// missing required field and every field whose value its property's schema
// refuses, in name order. (The validator stops at its first problem, found
// in map order, so it named a different one from run to run.) err is the
// validator's, for what a field-by-field check does not find.
func formProblems(form *jsonschema.Schema, inst any, err error) string {
	content, ok := inst.(map[string]any)
	if form == nil || !ok {
		return err.Error()
	}
	var out []string
	missing := slices.Clone(form.Required)
	slices.Sort(missing)
	for _, name := range missing {
		if _, ok := content[name]; !ok {
			out = append(out, fmt.Sprintf("%q is required", name))
		}
	}
	names := slices.Sorted(maps.Keys(content))
	for _, name := range names {
		ps := form.Properties[name]
		if ps == nil {
			continue
		}
		r, rerr := ps.Resolve(nil)
		if rerr != nil {
			continue
		}
		if verr := r.Validate(content[name]); verr != nil {
			out = append(out, fmt.Sprintf("%q: %v", name, verr))
		}
	}
	if len(out) == 0 {
		return err.Error()
	}
	return strings.Join(out, "; ")
}

// checkInputAnswers validates the elicitation answers of an MRTR retry
// (its inputResponses) against the forms the round before asked.
func (st *linker) checkInputAnswers(prev uint64, responses json.RawMessage) []Finding {
	if len(st.forms) == 0 {
		return nil
	}
	var rs map[string]json.RawMessage
	if json.Unmarshal(responses, &rs) != nil {
		return nil
	}
	keys := make([]string, 0, len(rs))
	for k := range rs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var fs []Finding
	for _, k := range keys {
		ek := elicitKey{prev, k}
		if _, ok := st.forms[ek]; !ok {
			continue
		}
		for _, f := range st.checkElicitAnswer(ek, rs[k]) {
			f.Message = "input response " + strconv.Quote(k) + ": " + f.Message
			fs = append(fs, f)
		}
	}
	return fs
}
