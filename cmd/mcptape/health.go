package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Health checks on the metrics listener (--metrics), for a container's
// HEALTHCHECK, an orchestrator's probes, or a load balancer:
//
//	GET /healthz  200 while the process serves
//	GET /readyz   200 when the store takes writes and every upstream
//	              accepts a TCP connection, else 503; the JSON body says
//	              what is wrong either way
//
// They carry no recorded content, so they need no token, like /metrics on
// that listener.

// readiness reports what keeps a recorder from being ready ("" entries
// are skipped); none means ready.
type readiness func(ctx context.Context) []string

type healthReport struct {
	Ready    bool     `json:"ready"`
	Problems []string `json:"problems,omitempty"`
}

func healthHandlers(mux *http.ServeMux, ready readiness) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		rep := healthReport{Ready: true}
		if ready != nil {
			ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
			defer cancel()
			for _, p := range ready(ctx) {
				if p != "" {
					rep.Problems = append(rep.Problems, p)
				}
			}
		}
		rep.Ready = len(rep.Problems) == 0
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if !rep.Ready {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(rep)
	})
}

// readiness is the recorder's: the store is not paused and its writes do
// not fail, and each upstream accepts a connection.
func (rs *recording) readiness() readiness {
	var mu sync.Mutex
	var lastErrors int64
	return func(ctx context.Context) []string {
		var problems []string
		sp := rs.store.Space()
		if sp.Paused {
			problems = append(problems, "recording is paused: "+sp.Reason)
		}
		if rec := rs.live.Load(); rec != nil {
			st := rec.Stats()
			mu.Lock()
			grew := st.StoreErrors > lastErrors
			lastErrors = st.StoreErrors
			mu.Unlock()
			if grew {
				problems = append(problems, "store writes fail: "+st.LastError)
			}
		}
		for _, u := range rs.upstreams() {
			if err := dialUpstream(ctx, u); err != nil {
				problems = append(problems, fmt.Sprintf("upstream %s is not reachable: %v", u.Redacted(), err))
			}
		}
		return problems
	}
}

// upstreams are the servers the recorder forwards to: its --upstream, or
// its routes' (the forward proxy has none of its own).
func (rs *recording) upstreams() []*url.URL {
	var out []*url.URL
	if rs.upURL != nil {
		out = append(out, rs.upURL)
	}
	if rs.proxy != nil && rs.routed {
		for _, r := range rs.proxy.Routes() {
			out = append(out, r.Upstream)
		}
	}
	return out
}

func dialUpstream(ctx context.Context, u *url.URL) error {
	host := u.Host
	if u.Port() == "" {
		port := "80"
		if u.Scheme == "https" {
			port = "443"
		}
		host = net.JoinHostPort(u.Hostname(), port)
	}
	var d net.Dialer
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return err
	}
	return c.Close()
}

// runHealthcheck is `mcptape healthcheck`: GET a recorder's /readyz and
// exit 0 when it is ready, 1 otherwise, saying why. An image without a
// shell or curl runs it as its HEALTHCHECK.
func runHealthcheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("healthcheck", stderr)
	u := fs.String("url", "http://127.0.0.1:9464/readyz", "the readiness endpoint: /readyz on the listener of record --metrics")
	timeout := fs.Duration("timeout", 5*time.Second, "give up after this long")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, *u, nil)
	if err != nil {
		return usagef("--url: %v", err)
	}
	resp, err := (&http.Client{Transport: &http.Transport{Proxy: nil}}).Do(req)
	if err != nil {
		return fmt.Errorf("not healthy: %w (is mcptape record running with --metrics on that address?)", err)
	}
	defer resp.Body.Close()
	var rep healthReport
	_ = json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&rep)
	if resp.StatusCode != http.StatusOK || !rep.Ready {
		if len(rep.Problems) == 0 {
			return fmt.Errorf("not ready: %s answered %s", *u, resp.Status)
		}
		return fmt.Errorf("not ready: %s", strings.Join(rep.Problems, "; "))
	}
	fmt.Fprintln(stdout, "mcptape: ready")
	return nil
}
