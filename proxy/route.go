package proxy

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/mcptape/mcptape/capture"
)

// Route is one upstream of a proxy that serves several: its clients reach
// it under /NAME/ on the proxy, with the upstream's own path after it
// (http://127.0.0.1:7411/github/mcp is https://api.example.com/mcp).
type Route struct {
	// Name is the path segment the route answers under: letters, digits,
	// '-', '_' and '.', not starting with '.', at most 64 bytes. Required.
	Name string
	// Upstream is the server's URL; its scheme and host are where the
	// route's requests go. Required.
	Upstream *url.URL
}

// Route labels the proxy reserves for its forward legs' metrics.
const (
	routeLabelForward = "forward"
	routeLabelMITM    = "mitm"
)

// maxRoutes bounds the routes of one proxy: names are a metrics label.
const maxRoutes = 256

// route is how requests reach one upstream: a reverse route (the single
// upstream, or one of several under /NAME/), the forward proxy's
// plain-HTTP leg, or a tunnel it intercepts.
type route struct {
	name   string // "" for the single upstream and the forward legs
	leg    capture.Leg
	up     *url.URL // the upstream; only scheme and host are used to forward
	base   string   // scheme://host, stored on sessions
	prefix string   // "/NAME" for a named route, else ""
	label  string   // the metrics' route label
	oauth  *oauthRewrites
}

func newRoute(name string, leg capture.Leg, up *url.URL) *route {
	rt := &route{name: name, leg: leg, up: up, base: up.Scheme + "://" + up.Host, label: name, oauth: &oauthRewrites{}}
	if name != "" {
		rt.prefix = "/" + name
	}
	switch leg {
	case capture.LegForward:
		rt.label = routeLabelForward
	case capture.LegMITM:
		rt.label = routeLabelMITM
	}
	return rt
}

// ErrRouteExists is AddRoute's answer for a name already taken by another
// upstream.
var ErrRouteExists = errors.New("a route of that name exists with another upstream")

// ValidRouteName reports why name cannot name a route, or nil.
func ValidRouteName(name string) error {
	if name == "" || len(name) > 64 || name[0] == '.' {
		return fmt.Errorf("route name %q: want 1 to 64 letters, digits, '-', '_' or '.', not starting with '.'", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("route name %q: want 1 to 64 letters, digits, '-', '_' or '.', not starting with '.'", name)
		}
	}
	if name == routeLabelForward || name == routeLabelMITM {
		return fmt.Errorf("route name %q is reserved for the forward proxy's metrics; choose another", name)
	}
	return nil
}

// checkUpstream reports why u cannot be an upstream, or nil.
func checkUpstream(u *url.URL) error {
	if u == nil {
		return errors.New("proxy: no upstream URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("proxy: upstream %q: the scheme must be http or https", u.Redacted())
	}
	if u.Host == "" {
		return fmt.Errorf("proxy: upstream %q has no host", u.Redacted())
	}
	return nil
}

// routeTable is a proxy's named routes: read on every request without a
// lock, replaced whole when a route is added.
type routeTable struct {
	mu sync.Mutex // serializes writers
	m  atomic.Pointer[map[string]*route]
}

func (t *routeTable) get(name string) *route {
	m := t.m.Load()
	if m == nil {
		return nil
	}
	return (*m)[name]
}

// add adds a route. Adding one that exists with the same upstream is a
// no-op; with another, ErrRouteExists.
func (t *routeTable) add(r Route) (added bool, err error) {
	if err := ValidRouteName(r.Name); err != nil {
		return false, err
	}
	if err := checkUpstream(r.Upstream); err != nil {
		return false, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	old := map[string]*route{}
	if m := t.m.Load(); m != nil {
		old = *m
	}
	if rt := old[r.Name]; rt != nil {
		if rt.base == r.Upstream.Scheme+"://"+r.Upstream.Host {
			return false, nil
		}
		return false, fmt.Errorf("route %q: %w (%s)", r.Name, ErrRouteExists, rt.up.Redacted())
	}
	if len(old) >= maxRoutes {
		return false, fmt.Errorf("route %q: a proxy serves at most %d routes", r.Name, maxRoutes)
	}
	m := make(map[string]*route, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[r.Name] = newRoute(r.Name, capture.LegReverse, r.Upstream)
	t.m.Store(&m)
	return true, nil
}

// names lists the routes' names, sorted.
func (t *routeTable) names() []string {
	m := t.m.Load()
	if m == nil {
		return nil
	}
	var out []string
	for k := range *m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// AddRoute adds a named route to a running proxy (one built with Routes,
// or with neither Upstream nor Routes). Adding a route that exists with
// the same upstream does nothing; with another upstream it is
// [ErrRouteExists]. added reports whether the route is new.
func (p *Proxy) AddRoute(r Route) (added bool, err error) {
	if p.single != nil {
		return false, errors.New("proxy: this proxy serves a single upstream; routes need a proxy started with routes")
	}
	return p.routes.add(r)
}

// Routes lists the proxy's named routes, sorted by name.
func (p *Proxy) Routes() []Route {
	var out []Route
	for _, n := range p.routes.names() {
		if rt := p.routes.get(n); rt != nil {
			out = append(out, Route{Name: rt.name, Upstream: rt.up})
		}
	}
	return out
}

// reverseTarget is the route of an origin-form request and the upstream's
// path for it (escaped: the raw path when the client sent escapes the
// decoded one cannot say). ok is false when no route serves the path.
func (p *Proxy) reverseTarget(u *url.URL) (rt *route, path, rawPath string, ok bool) {
	if p.single != nil {
		return p.single, u.Path, u.RawPath, true
	}
	rt = p.routes.get(routeSegment(u.Path))
	if rt == nil {
		return nil, "", "", false
	}
	m := frontMap{prefix: rt.prefix}
	path, ok = m.upstreamPath(u.Path)
	if !ok {
		return nil, "", "", false
	}
	if u.RawPath != "" {
		if raw, rok := m.upstreamPath(u.RawPath); rok {
			rawPath = raw
		}
	}
	return rt, path, rawPath, true
}

// routeSegment is the route name a path asks for: its first segment, or,
// under /.well-known/NAME/, the segment after NAME (where a client puts a
// resource's path when it discovers its metadata).
func routeSegment(p string) string {
	p = strings.TrimPrefix(p, "/")
	if rest, ok := strings.CutPrefix(p, ".well-known/"); ok {
		if _, tail, ok := strings.Cut(rest, "/"); ok {
			p = tail
		} else {
			return ""
		}
	}
	seg, _, _ := strings.Cut(p, "/")
	return seg
}

// noRoute answers an origin-form request no route serves.
func (p *Proxy) noRoute(w http.ResponseWriter, r *http.Request) {
	names := p.routes.names()
	var msg string
	switch {
	case len(names) == 0 && p.forward != nil:
		msg = "mcptape: this is a forward proxy: set it as your client's proxy (HTTPS_PROXY) and use the server's own URL"
	case len(names) == 0:
		msg = "mcptape: no route yet: add one with `mcptape attach`, or restart with --route NAME=URL"
	default:
		list := make([]string, len(names))
		for i, n := range names {
			list[i] = "/" + n + "/"
		}
		msg = fmt.Sprintf("mcptape: no route serves %q; the routes are %s (a route's server path follows its name, e.g. /%s/mcp)",
			r.URL.Path, strings.Join(list, ", "), names[0])
	}
	p.refuseAs(w, r, nil, []byte{}, true, http.StatusNotFound, msg, true)
}
