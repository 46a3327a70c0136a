package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/dashboard"
	"github.com/mcptape/mcptape/protocol"
	"github.com/mcptape/mcptape/proxy"
	"github.com/mcptape/mcptape/replay"
)

// answerKinds maps --answer's kinds to the methods they answer.
var answerKinds = map[string]string{
	"sampling":    protocol.MethodSampling,
	"elicitation": protocol.MethodElicitation,
	"roots":       protocol.MethodRootsList,
}

// answerSpec is one --answer KIND=profile[:NAME]|person.
type answerSpec struct {
	kind, method string
	person       bool
	profile      string // "" means the default profile, or built-in defaults
	text         string // as given, for the record
}

// parseAnswers reads the --answer flags.
func parseAnswers(vals []string) ([]answerSpec, error) {
	var out []answerSpec
	for _, v := range vals {
		kind, how, ok := strings.Cut(v, "=")
		method, known := answerKinds[kind]
		if !ok || !known {
			return nil, usagef("--answer %q: want KIND=profile[:NAME] or KIND=person, KIND one of sampling, elicitation, roots (e.g. --answer sampling=profile:quick-mock)", v)
		}
		s := answerSpec{kind: kind, method: method, text: "--answer " + v}
		switch {
		case how == "person":
			s.person = true
		case how == "profile":
		case strings.HasPrefix(how, "profile:"):
			s.profile = strings.TrimPrefix(how, "profile:")
			if s.profile == "" || strings.ContainsAny(s.profile, `/\`) {
				return nil, usagef("--answer %q: name a testing profile of the dashboard's Profiles page, e.g. profile:quick-mock", v)
			}
		default:
			return nil, usagef("--answer %q: answer from a testing profile (profile or profile:NAME) or by a person on the dashboard's Intercept page (person)", v)
		}
		if slices.ContainsFunc(out, func(o answerSpec) bool { return o.kind == kind }) {
			return nil, usagef("--answer %s is given twice", kind)
		}
		out = append(out, s)
	}
	return out, nil
}

// clientAnswerer answers for the client what --answer says: from a
// testing profile in DATA/profiles (read afresh for each request, so an
// edit on the Profiles page applies at once), or from a person through
// the intercept queue.
type clientAnswerer struct {
	data   string
	specs  map[string]answerSpec // by method
	icpt   *capture.Interceptor
	logger *slog.Logger
}

func newClientAnswerer(data string, specs []answerSpec, icpt *capture.Interceptor, logger *slog.Logger) (*clientAnswerer, error) {
	a := &clientAnswerer{data: data, specs: map[string]answerSpec{}, icpt: icpt, logger: logger}
	for _, s := range specs {
		if s.person && icpt == nil {
			return nil, usagef("%s needs the dashboard, where a person answers: drop --dashboard off", s.text)
		}
		if !s.person {
			p, name, err := a.profile(s.profile)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", s.text, err)
			}
			if icpt == nil && s.method == protocol.MethodSampling && p != nil && p.Sampling != nil && p.Sampling.Provider == replay.ProviderManual {
				return nil, usagef("%s: the testing profile %q leaves sampling to a person, who answers in the dashboard: drop --dashboard off, or give sampling a mock provider in that profile", s.text, name)
			}
		}
		a.specs[s.method] = s
	}
	return a, nil
}

// proxyAnswers is what the proxy takes.
func (a *clientAnswerer) proxyAnswers() *proxy.ClientAnswers {
	if a == nil || len(a.specs) == 0 {
		return nil
	}
	m := map[string]string{}
	for method, s := range a.specs {
		m[method] = s.text
	}
	return &proxy.ClientAnswers{Methods: m, Answer: a.answer}
}

// profilesDir is where the dashboard keeps testing profiles.
func profilesDir(data string) string { return filepath.Join(data, "profiles") }

// profile loads the testing profile name, or the default one when name
// is "" (nil, with no default: the built-in defaults). It returns the
// name used.
func (a *clientAnswerer) profile(name string) (*replay.Profile, string, error) {
	return loadNamedProfile(a.data, name)
}

func loadNamedProfile(data, name string) (*replay.Profile, string, error) {
	dir := profilesDir(data)
	if name == "" {
		b, err := os.ReadFile(filepath.Join(dir, dashboard.DefaultProfileFile))
		if err != nil {
			return nil, "", nil
		}
		if name = strings.TrimSpace(string(b)); name == "" || strings.ContainsAny(name, `/\`) {
			return nil, "", nil
		}
	}
	p, err := replay.LoadProfile(filepath.Join(dir, name+".json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, "", fmt.Errorf("no testing profile %q in %s: create it on the dashboard's Profiles page, or write %s.json there", name, dir, name)
	}
	return p, name, err
}

// answerFromProfile answers one request from a testing profile.
func answerFromProfile(p *replay.Profile, method string, params json.RawMessage) (json.RawMessage, error) {
	switch method {
	case protocol.MethodSampling:
		return p.AnswerSampling(params)
	case protocol.MethodElicitation:
		return p.AnswerElicitation(params)
	case protocol.MethodRootsList:
		return p.AnswerRoots(), nil
	}
	return nil, fmt.Errorf("a testing profile does not answer %s", method)
}

func (a *clientAnswerer) answer(ctx context.Context, q proxy.AnswerQuestion) (proxy.AnswerReply, error) {
	s := a.specs[q.Method]
	if !s.person {
		p, name, err := a.profile(s.profile)
		if err != nil {
			return proxy.AnswerReply{}, err
		}
		res, err := answerFromProfile(p, q.Method, q.Params)
		switch {
		case errors.Is(err, replay.ErrManual):
			// The profile leaves sampling to a person.
			return a.askPerson(ctx, q, s, name)
		case err != nil:
			return proxy.AnswerReply{Error: &protocol.ErrorInfo{Code: -32603, Message: "mcptape: the testing profile could not answer: " + err.Error()}}, nil
		}
		return proxy.AnswerReply{Result: res}, nil
	}
	return a.askPerson(ctx, q, s, s.profile)
}

// askPerson holds the request on the Intercept page until a person
// answers it (from the profile, edited, or rejected), or gives it to the
// client.
func (a *clientAnswerer) askPerson(ctx context.Context, q proxy.AnswerQuestion, s answerSpec, profile string) (proxy.AnswerReply, error) {
	if a.icpt == nil {
		// The profile changed to a manual provider after the start, with
		// no dashboard to ask a person on.
		return proxy.AnswerReply{Error: &protocol.ErrorInfo{Code: -32603,
			Message: fmt.Sprintf("mcptape: the testing profile %q leaves %s to a person, and this recorder has no dashboard", profile, q.Method)}}, nil
	}
	v, err := a.icpt.Hold(ctx, capture.HeldMessage{What: capture.HeldAnswer, Direction: protocol.ServerToClient, Method: q.Method,
		Raw: q.Params, Key: q.Key, Rule: s.text, Upstream: q.Upstream, Version: q.Version, Profile: profile,
		MCPSession: q.MCPSession, Client: q.Client})
	if err != nil {
		return proxy.AnswerReply{}, err
	}
	by := v.By
	if by == "" {
		by = "a person on the Intercept page"
	}
	switch {
	case v.Stopped:
		return proxy.AnswerReply{Forward: true, By: "the recorder stopped while a person was to answer it"}, nil
	case v.TimedOut:
		return proxy.AnswerReply{Forward: true, By: "nobody answered within the intercept timeout (--intercept-timeout)"}, nil
	case v.Action == capture.ActionForward:
		return proxy.AnswerReply{Forward: true, By: by + " gave it to the client"}, nil
	case v.Action == capture.ActionFail:
		return proxy.AnswerReply{Error: v.Error, By: by}, nil
	}
	return proxy.AnswerReply{Result: v.Result, By: by}, nil
}

// parseRules reads the --intercept flags.
func parseRules(vals []string) ([]capture.InterceptRule, error) {
	var out []capture.InterceptRule
	for _, v := range vals {
		r, err := capture.ParseInterceptRule(v)
		if err != nil {
			return nil, usagef("--intercept %q: %v (e.g. --intercept 'tools/call:delete_*', --intercept elicitation/create, --intercept response:tools/call)", v, strings.TrimPrefix(err.Error(), capture.ErrBadRule.Error()+": "))
		}
		out = append(out, r)
	}
	return out, nil
}
