package replay

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// Comparing two recordings (two runs of a client, a run against the tape
// kept in a repository): what the server offers (tools, prompts,
// resources), what each call was answered, which calls one made and the
// other did not, and how long calls took.
//
// Calls are paired by method, name and occurrence: the second tools/call
// of "echo" in A with the second in B. Their documents — the request's
// params and the answer's result or error (a list's items aside, which
// the catalog compares by name) — are compared as the replay
// client compares answers, the JSON-RPC ids never, and the members of
// DiffOptions.IgnoreKeys (by default DefaultIgnoreKeys: _meta, task and
// resource timestamps, requestState) left out.

// DiffOptions configures Diff. Nil means defaults.
type DiffOptions struct {
	// Ignore lists more paths the comparison of calls leaves out, dotted
	// from the call's document root with [i] or [*] for list elements:
	// "result.content[0].text", "params.arguments.when".
	Ignore []string
	// IgnoreIn lists more paths left out of the calls of one method (and
	// name), as reports name them without the occurrence: "tools/call
	// toggle-subscriber-updates" → "result.content[0].text", for an
	// answer that quotes the server's session id.
	IgnoreIn map[string][]string
	// IgnoreKeys are member names left out wherever they appear. Nil
	// means DefaultIgnoreKeys; an empty, non-nil slice compares
	// everything.
	IgnoreKeys []string
}

// DiffReport is what Diff found.
type DiffReport struct {
	// A and B name the recordings compared.
	A string `json:"a"`
	B string `json:"b"`
	// Catalog lists the tools, prompts, resources and resource templates
	// added, removed and changed from A to B, as each recording's latest
	// complete list shows them; Unlisted the lists only one recording
	// holds (so not compared), as "prompts/list: only in A".
	Catalog  []capture.CatalogChange `json:"catalog"`
	Unlisted []string                `json:"unlisted,omitempty"`
	// Answers are the calls paired in A and B whose documents differ.
	Answers []AnswerChange `json:"answers"`
	// OnlyA and OnlyB are the calls one recording made and the other not.
	OnlyA []CallRef `json:"onlyA"`
	OnlyB []CallRef `json:"onlyB"`
	// Compared counts the calls paired.
	Compared int `json:"compared"`
	// Latency is per method (per tool for tools/call): the calls' counts
	// and times in A and B. It does not make recordings differ.
	Latency []LatencyShift `json:"latency"`
}

// CallRef is one call of a recording: "tools/call echo #2" (its second
// call of that method and name), in which session, at which request.
type CallRef struct {
	Call    string `json:"call"`
	Session string `json:"session"`
	Seq     uint64 `json:"seq"`
}

// AnswerChange is a call whose document differs between A and B.
type AnswerChange struct {
	Call  string       `json:"call"`
	A     CallRef      `json:"a"`
	B     CallRef      `json:"b"`
	Diffs []Difference `json:"diffs"`
}

// LatencyShift is one method's call times in A and B.
type LatencyShift struct {
	Method string       `json:"method"`
	A      LatencyStats `json:"a"`
	B      LatencyStats `json:"b"`
}

// LatencyStats are the answered calls of a method: how many, and the
// median and 95th percentile of their times.
type LatencyStats struct {
	Count int           `json:"count"`
	P50   time.Duration `json:"p50"`
	P95   time.Duration `json:"p95"`
}

// Differ reports whether A and B differ: in their catalogs, their
// answers, or the calls they made. Latency alone does not count.
func (r *DiffReport) Differ() bool {
	return len(r.Catalog)+len(r.Unlisted)+len(r.Answers)+len(r.OnlyA)+len(r.OnlyB) > 0
}

// diffSide is what Diff keeps of one recording.
type diffSide struct {
	calls []*diffCall
	lists map[string]json.RawMessage // list method → its latest complete list's items
	times map[string][]time.Duration // method (and tool) → answered calls' times
}

// diffCall is one call of a recording. Its document's parts are kept as
// the recorded JSON, decoded only to be compared: decoded, a recording's
// every answer would take several times its size in memory.
type diffCall struct {
	ref  CallRef
	what string                     // method and name
	doc  map[string]json.RawMessage // params, and result, error or answer
}

// value is the call's document as JSON values.
func (c *diffCall) value() map[string]any {
	v := make(map[string]any, len(c.doc))
	for k, raw := range c.doc {
		v[k] = decodeAny(raw)
	}
	return v
}

// Diff compares recordings a and b.
func Diff(ctx context.Context, a, b Recording, opts *DiffOptions) (*DiffReport, error) {
	var o DiffOptions
	if opts != nil {
		o = *opts
	}
	if o.IgnoreKeys == nil {
		o.IgnoreKeys = DefaultIgnoreKeys
	}
	ig, err := newIgnoreRules(o.IgnoreKeys, o.Ignore)
	if err != nil {
		return nil, err
	}
	igIn := map[string]*ignoreRules{}
	for what, paths := range o.IgnoreIn {
		if igIn[what], err = newIgnoreRules(o.IgnoreKeys, append(slices.Clip(o.Ignore), paths...)); err != nil {
			return nil, err
		}
	}
	sa, err := readSide(ctx, a)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", a.Name, err)
	}
	sb, err := readSide(ctx, b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", b.Name, err)
	}
	rep := &DiffReport{A: a.Name, B: b.Name, Catalog: []capture.CatalogChange{}, Answers: []AnswerChange{},
		OnlyA: []CallRef{}, OnlyB: []CallRef{}, Latency: []LatencyShift{}}
	for _, k := range capture.CatalogKinds {
		la, inA := sa.lists[k.Method]
		lb, inB := sb.lists[k.Method]
		switch {
		case inA && inB:
			rep.Catalog = append(rep.Catalog, capture.DiffCatalog(k, la, lb)...)
		case inA:
			rep.Unlisted = append(rep.Unlisted, k.Method+": only in A")
		case inB:
			rep.Unlisted = append(rep.Unlisted, k.Method+": only in B")
		}
	}
	inB := map[string]*diffCall{}
	for _, c := range sb.calls {
		inB[c.ref.Call] = c
	}
	paired := map[string]bool{}
	for _, ca := range sa.calls {
		cb := inB[ca.ref.Call]
		if cb == nil {
			rep.OnlyA = append(rep.OnlyA, ca.ref)
			continue
		}
		paired[ca.ref.Call] = true
		rep.Compared++
		rules := ig
		if r := igIn[ca.what]; r != nil {
			rules = r
		}
		if d := diffDocs(ca.value(), cb.value(), rules); len(d) > 0 {
			rep.Answers = append(rep.Answers, AnswerChange{Call: ca.ref.Call, A: ca.ref, B: cb.ref, Diffs: d})
		}
	}
	for _, c := range sb.calls {
		if !paired[c.ref.Call] {
			rep.OnlyB = append(rep.OnlyB, c.ref)
		}
	}
	methods := slices.Sorted(maps.Keys(sa.times))
	for m := range sb.times {
		if _, ok := sa.times[m]; !ok {
			methods = append(methods, m)
		}
	}
	slices.Sort(methods)
	for _, m := range methods {
		rep.Latency = append(rep.Latency, LatencyShift{Method: m, A: latencyOf(sa.times[m]), B: latencyOf(sb.times[m])})
	}
	return rep, nil
}

// readSide reads a recording's client calls with their answers, its
// latest lists, and its call times.
func readSide(ctx context.Context, r Recording) (*diffSide, error) {
	side := &diffSide{lists: map[string]json.RawMessage{}, times: map[string][]time.Duration{}}
	seen := map[string]int{}
	err := r.each(ctx, func(rs *recordedSession) error {
		answers := map[uint64]*capture.Message{}
		for _, m := range rs.Messages {
			if m.Direction == protocol.ServerToClient && m.Kind.IsResponse() && m.Links.Request != 0 {
				answers[m.Links.Request] = m
			}
		}
		pages := map[string][]json.RawMessage{}
		for _, m := range rs.Messages {
			if m.Direction != protocol.ClientToServer || m.Kind != protocol.KindRequest {
				continue
			}
			what := m.Method
			if m.Name != "" {
				what += " " + m.Name
			}
			seen[what]++
			c := &diffCall{ref: CallRef{Call: what + " #" + strconv.Itoa(seen[what]), Session: rs.ID, Seq: m.Seq}, what: what, doc: map[string]json.RawMessage{}}
			pm := protocol.Decode(m.Raw)
			if len(pm.Params) > 0 {
				c.doc["params"] = slices.Clone(pm.Params)
			}
			a := answers[m.Seq]
			switch {
			case a == nil:
				c.doc["answer"] = json.RawMessage(`"(none)"`)
			case a.Kind == protocol.KindError:
				c.doc["error"] = slices.Clone(protocol.Decode(a.Raw).Error)
			default:
				res := protocol.Decode(a.Raw).Result
				// A list's items are compared as the catalog, by name:
				// not again as an answer, where a tool moved in the list
				// would differ at every index after it.
				if !side.list(pages, m.Method, res) {
					c.doc["result"] = slices.Clone(res)
				}
			}
			if a != nil {
				side.times[what] = append(side.times[what], max(a.Time.Sub(m.Time), 0))
			}
			side.calls = append(side.calls, c)
		}
		return ctx.Err()
	})
	return side, err
}

// list notes a list method's result: its items join the pages before it,
// and a page without nextCursor completes the list. It reports whether
// method lists a catalog.
func (s *diffSide) list(pages map[string][]json.RawMessage, method string, result json.RawMessage) bool {
	i := slices.IndexFunc(capture.CatalogKinds, func(k capture.CatalogKind) bool { return k.Method == method })
	if i < 0 {
		return false
	}
	var r map[string]json.RawMessage
	if json.Unmarshal(result, &r) != nil {
		return false
	}
	var items []json.RawMessage
	_ = json.Unmarshal(r[capture.CatalogKinds[i].Member], &items)
	pages[method] = append(pages[method], items...)
	var next string
	_ = json.Unmarshal(r["nextCursor"], &next)
	if next != "" {
		return true
	}
	if b, err := json.Marshal(pages[method]); err == nil {
		s.lists[method] = b
	}
	delete(pages, method)
	return true
}

func latencyOf(ds []time.Duration) LatencyStats {
	if len(ds) == 0 {
		return LatencyStats{}
	}
	s := slices.Clone(ds)
	slices.SortFunc(s, cmp.Compare)
	rank := func(p int) time.Duration { return s[max(0, (len(s)*p+99)/100-1)] }
	return LatencyStats{Count: len(s), P50: rank(50), P95: rank(95)}
}
