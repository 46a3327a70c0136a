package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/proxy"
)

func runFixture(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("say which: `mcptape fixture server` or `mcptape fixture client --url URL`")
	}
	switch args[0] {
	case "server":
		return runFixtureServer(ctx, args[1:], stdout, stderr)
	case "client":
		return runFixtureClient(ctx, args[1:], stdout, stderr)
	}
	return usagef("unknown fixture %q: want server or client", args[0])
}

func runFixtureServer(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("fixture server", stderr)
	listen := fs.String("listen", "127.0.0.1:3001", "address to listen on")
	stdio := fs.Bool("stdio", false, "serve one client over stdin and stdout instead (a stdio server, e.g. for `mcptape wrap`)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *stdio {
		// Nothing but the protocol goes to stdout.
		return fixtures.NewServer(nil).Run(ctx, &mcp.StdioTransport{})
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
	timeout := fs.Duration("timeout", 60*time.Second, "give up after this long")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *u == "" {
		return usagef("--url is required")
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	opts := &fixtures.ClientOptions{ProtocolVersion: *version, HTTPClient: &http.Client{Transport: &http.Transport{Proxy: nil}}}
	if *only != "" {
		opts.Only = strings.Split(*only, ",")
	}
	rep, err := fixtures.RunClient(ctx, *u, opts)
	if err != nil {
		return err
	}
	if *asJSON {
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
