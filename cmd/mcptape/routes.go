package main

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/mcptape/mcptape/capture/remotestore"
	"github.com/mcptape/mcptape/proxy"
)

// parseRoutes reads --route NAME=URL values.
func parseRoutes(vals []string) ([]proxy.Route, error) {
	var out []proxy.Route
	seen := map[string]bool{}
	for _, v := range vals {
		name, raw, ok := strings.Cut(v, "=")
		if !ok {
			return nil, usagef("--route %q: want NAME=URL, e.g. --route github=https://api.example.com/mcp", v)
		}
		if err := proxy.ValidRouteName(name); err != nil {
			return nil, usagef("--route: %v", err)
		}
		if seen[name] {
			return nil, usagef("--route %s is given twice; each route needs its own name", name)
		}
		seen[name] = true
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, usagef("--route %s=%s: the URL is not an http(s) URL like http://127.0.0.1:3001/mcp", name, raw)
		}
		out = append(out, proxy.Route{Name: name, Upstream: u})
	}
	return out, nil
}

// routeURL is where a client reaches upstream through the route name: the
// proxy's URL, /name, then the upstream's own path and query.
func routeURL(proxyURL, name string, upstream *url.URL) string {
	return strings.TrimRight(proxyURL, "/") + "/" + name + upstream.RequestURI()
}

// printHow says what the recorder records and how a client reaches it.
func (rs *recording) printHow(w io.Writer, c *recordConfig) {
	base := rs.srv.URL()
	if rs.upstream != "" {
		up, _ := url.Parse(c.upstream)
		fmt.Fprintf(w, "mcptape: recording %s into %s\n", up.Redacted(), c.data)
		fmt.Fprintf(w, "mcptape: point your MCP client at %s%s\n", base, up.RequestURI())
	}
	for _, r := range rs.proxy.Routes() {
		fmt.Fprintf(w, "mcptape: route %s: recording %s; point its client at %s\n", r.Name, r.Upstream.Redacted(), routeURL(base, r.Name, r.Upstream))
	}
	if rs.routed && len(c.routes) == 0 && !c.forward {
		fmt.Fprintf(w, "mcptape: no route yet: add servers with `mcptape attach CLIENT NAME`\n")
	}
	if c.forward {
		fmt.Fprintf(w, "mcptape: forward proxy at %s (in the client set HTTPS_PROXY=%s and HTTP_PROXY=%s; Node also needs NODE_USE_ENV_PROXY=1)\n", base, base, base)
		if len(c.mitm) > 0 {
			fmt.Fprintf(w, "mcptape: intercepting HTTPS to %s; the client must trust mcptape's CA (`mcptape ca path --data %s`); other tunnels pass unrecorded\n",
				strings.Join(c.mitm, ", "), c.data)
		} else {
			fmt.Fprintf(w, "mcptape: HTTPS tunnels pass unrecorded; add --mitm HOST-GLOB to record them\n")
		}
	}
	if rs.routed {
		fmt.Fprintf(w, "mcptape: recording into %s\n", c.data)
	}
}

// routeInfos are the routes, for the local API's status.
func (rs *recording) routeInfos() []remotestore.RouteInfo {
	if rs.proxy == nil || !rs.routed {
		return nil
	}
	var out []remotestore.RouteInfo
	for _, r := range rs.proxy.Routes() {
		out = append(out, remotestore.RouteInfo{Name: r.Name, Upstream: r.Upstream.Redacted(), URL: routeURL(rs.srv.URL(), r.Name, r.Upstream)})
	}
	return out
}

// addRoute is the local API's POST /v1/routes, for a recorder of routes.
func (rs *recording) addRoute() func(name, upstream string) (remotestore.RouteInfo, error) {
	if !rs.routed {
		return nil
	}
	return func(name, upstream string) (remotestore.RouteInfo, error) {
		u, err := url.Parse(upstream)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return remotestore.RouteInfo{}, fmt.Errorf("%q is not an http(s) URL", upstream)
		}
		if _, err := rs.proxy.AddRoute(proxy.Route{Name: name, Upstream: u}); err != nil {
			if errors.Is(err, proxy.ErrRouteExists) {
				return remotestore.RouteInfo{}, fmt.Errorf("%w: %v", remotestore.ErrRouteConflict, err)
			}
			return remotestore.RouteInfo{}, err
		}
		return remotestore.RouteInfo{Name: name, Upstream: u.Redacted(), URL: routeURL(rs.srv.URL(), name, u)}, nil
	}
}
