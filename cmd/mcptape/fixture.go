package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/proxy"
)

func runFixture(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("say which: `mcptape fixture server`, `mcptape fixture oauth` or `mcptape fixture client --url URL`")
	}
	if isHelp(args[0]) {
		return groupHelp(stderr, "fixture", "server", "oauth", "client")
	}
	switch args[0] {
	case "server":
		return runFixtureServer(ctx, args[1:], stdout, stderr)
	case "oauth":
		return runFixtureOAuth(ctx, args[1:], stdout, stderr)
	case "client":
		return runFixtureClient(ctx, args[1:], stdout, stderr)
	}
	return usagef("unknown fixture %q: want server, oauth or client%s", args[0], didYouMean(args[0], "server", "oauth", "client"))
}

func runFixtureOAuth(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("fixture oauth", stderr)
	var o fixtures.OAuthOptions
	fs.StringVar(&o.Listen, "listen", "127.0.0.1:3001", "address of the protected MCP server")
	fs.StringVar(&o.AuthListen, "auth-listen", "127.0.0.1:3002", "address of the authorization server")
	fs.StringVar(&o.IssuerURL, "issuer", "", "the authorization server's public URL, when clients reach it through a proxy (default: its own)")
	fs.Var((*stringList)(&o.Resources), "accept-resource", "also grant tokens for this resource URL (repeatable): a proxy's, e.g. http://127.0.0.1:7411/mcp for mcptape record")
	fs.Var((*stringList)(&o.AdminTools), "admin-tool", "a tool whose calls also need the scope "+fixtures.ScopeAdmin+" (repeatable; without it they get 403)")
	fs.BoolVar(&o.MetadataAtRoot, "metadata-at-root", false, "serve the protected-resource metadata at the root well-known path, for the whole origin")
	fs.BoolVar(&o.NoResourceMetadata, "no-resource-metadata", false, "leave resource_metadata out of WWW-Authenticate (clients probe the well-known paths)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	srv, err := fixtures.StartOAuth(&o)
	if err != nil {
		return err
	}
	defer srv.Close()
	fmt.Fprintf(stdout, "mcptape fixture oauth: MCP server (bearer tokens) at %s\n", srv.MCPURL())
	fmt.Fprintf(stdout, "mcptape fixture oauth: authorization server at %s (issuer %s)\n", srv.AuthServerURL(), srv.IssuerURL())
	fmt.Fprintf(stdout, "mcptape fixture oauth: it approves every authorization request at once; to record through mcptape, "+
		"start it with --accept-resource naming mcptape's URL (a client asks for a token for the URL it connects to)\n")
	<-ctx.Done()
	return nil
}

func runFixtureServer(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("fixture server", stderr)
	listen := fs.String("listen", "127.0.0.1:3001", "address to listen on")
	stdio := fs.Bool("stdio", false, "serve one client over stdin and stdout instead (a stdio server, e.g. for mcptape wrap)")
	tlsCert := fs.String("tls-cert", "", "serve HTTPS with this PEM certificate (chain) `FILE`, with --tls-key")
	tlsKey := fs.String("tls-key", "", "the PEM private key `FILE` of --tls-cert")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *stdio {
		// Nothing but the protocol goes to stdout.
		return fixtures.NewServer(nil).Run(ctx, &mcp.StdioTransport{})
	}
	if *tlsCert != "" || *tlsKey != "" {
		return serveFixtureTLS(ctx, *listen, *tlsCert, *tlsKey, stdout)
	}
	srv, err := proxy.Listen(*listen, fixtures.Handler(nil), nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "mcptape fixture server: 2025-11-25 (stateful) at %s%s\n", srv.URL(), fixtures.PathStateful)
	fmt.Fprintf(stdout, "mcptape fixture server: 2026-07-28 (stateless) at %s%s\n", srv.URL(), fixtures.PathStateless)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve() }()
	select {
	case <-ctx.Done():
	case err := <-errc:
		return err
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	return nil
}

func runFixtureClient(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("fixture client", stderr)
	u := fs.String("url", "", "the MCP endpoint, e.g. http://127.0.0.1:3001/mcp (required)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	only := fs.String("only", "", "comma-separated steps to run (default all): "+strings.Join(fixtures.StepNames(), ","))
	version := fs.String("protocol-version", "", "offer this protocol version instead of the latest")
	timeout := fs.Duration("timeout", 60*time.Second, "give up on a run after this long")
	every := fs.Duration("every", 0, "run again this long after each run starts, until stopped (traffic for a dashboard to show); a failed run is reported and the next one goes on")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *u == "" {
		return usagef("--url is required")
	}
	if *every < 0 {
		return usagef("--every %v: give a positive duration, e.g. 10s", *every)
	}
	opts := &fixtures.ClientOptions{ProtocolVersion: *version, HTTPClient: &http.Client{Transport: &http.Transport{Proxy: nil}}}
	if *only != "" {
		opts.Only = strings.Split(*only, ",")
	}
	if *every == 0 {
		return fixtureClientRun(ctx, *u, opts, *timeout, *asJSON, stdout)
	}
	tick := time.NewTicker(*every)
	defer tick.Stop()
	for run := 1; ; run++ {
		if err := fixtureClientRun(ctx, *u, opts, *timeout, *asJSON, stdout); err != nil {
			fmt.Fprintf(stderr, "mcptape fixture client: run %d: %v\n", run, err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// fixtureClientRun runs the scripted client once and prints its report.
func fixtureClientRun(ctx context.Context, u string, opts *fixtures.ClientOptions, timeout time.Duration, asJSON bool, stdout io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	rep, err := fixtures.RunClient(ctx, u, opts)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		fmt.Fprint(stdout, rep.String())
	}
	return failures(rep)
}

// failures reports the steps that failed, except the `error` tool's
// deliberate JSON-RPC error.
func failures(rep *fixtures.Report) error {
	var bad []string
	for _, s := range rep.Steps {
		if s.Err != "" && s.Name != fixtures.ToolError {
			bad = append(bad, s.Name+": "+s.Err)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%d step(s) failed against %s: %s", len(bad), rep.URL, strings.Join(bad, "; "))
	}
	return nil
}

// serveFixtureTLS serves the fixture server over HTTPS.
func serveFixtureTLS(ctx context.Context, listen, certFile, keyFile string, stdout io.Writer) error {
	if certFile == "" || keyFile == "" {
		return usagef("--tls-cert and --tls-key go together")
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return fmt.Errorf("--tls-cert/--tls-key: %w", err)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", listen, err)
	}
	srv := &http.Server{Handler: fixtures.Handler(nil), ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	base := "https://" + ln.Addr().String()
	fmt.Fprintf(stdout, "mcptape fixture server: 2025-11-25 (stateful) at %s%s\n", base, fixtures.PathStateful)
	fmt.Fprintf(stdout, "mcptape fixture server: 2026-07-28 (stateless) at %s%s\n", base, fixtures.PathStateless)
	errc := make(chan error, 1)
	go func() { errc <- srv.ServeTLS(ln, "", "") }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		return nil
	case err := <-errc:
		return err
	}
}
