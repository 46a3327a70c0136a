package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"

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
		added, err := rs.proxy.AddRoute(proxy.Route{Name: name, Upstream: u})
		if err != nil {
			if errors.Is(err, proxy.ErrRouteExists) {
				return remotestore.RouteInfo{}, fmt.Errorf("%w: %v", remotestore.ErrRouteConflict, err)
			}
			return remotestore.RouteInfo{}, err
		}
		if added {
			if err := rememberRoute(rs.data, proxy.Route{Name: name, Upstream: u}); err != nil {
				rs.log.Warn("the route works, but could not be remembered for the next recorder", "route", name, "error", err)
			}
		}
		return remotestore.RouteInfo{Name: name, Upstream: u.Redacted(), URL: routeURL(rs.srv.URL(), name, u)}, nil
	}
}

// routesFile, in the data directory, remembers the routes attach added, so
// that the next `record --routes` on it serves them again (a client's
// config keeps pointing at them until detach).
const routesFile = "routes.json"

var routesFileMu sync.Mutex

type savedRoute struct {
	Name     string `json:"name"`
	Upstream string `json:"upstream"`
}

// savedRoutes reads the routes remembered in data; none when there is no
// file.
func savedRoutes(data string) ([]proxy.Route, error) {
	b, err := os.ReadFile(filepath.Join(data, routesFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var list []savedRoute
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, fmt.Errorf("%s: %w (remove it to forget the routes attach added)", filepath.Join(data, routesFile), err)
	}
	var out []proxy.Route
	for _, r := range list {
		u, err := url.Parse(r.Upstream)
		if err != nil || proxy.ValidRouteName(r.Name) != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			continue
		}
		out = append(out, proxy.Route{Name: r.Name, Upstream: u})
	}
	return out, nil
}

// rememberRoute adds r to data's routes file (mode 0600: an upstream URL
// may carry a key), replacing one of the same name.
func rememberRoute(data string, r proxy.Route) error {
	routesFileMu.Lock()
	defer routesFileMu.Unlock()
	old, err := savedRoutes(data)
	if err != nil {
		return err
	}
	list := []savedRoute{}
	for _, o := range old {
		if o.Name != r.Name {
			list = append(list, savedRoute{o.Name, o.Upstream.String()})
		}
	}
	list = append(list, savedRoute{r.Name, r.Upstream.String()})
	b, _ := json.MarshalIndent(list, "", "  ")
	tmp, err := os.CreateTemp(data, "."+routesFile+".*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(append(b, '\n'))
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), filepath.Join(data, routesFile))
	}
	if werr != nil {
		os.Remove(tmp.Name())
	}
	return werr
}
