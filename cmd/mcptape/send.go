package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/mcptape/mcptape/protocol"
	"github.com/mcptape/mcptape/replay"
)

const sendUsage = "--to URL METHOD [PARAMS] [-H 'K: V']... [--profile FILE] [--body TEXT|--body-file FILE] [--json]"

// runSend is `mcptape send`: one request to a live server (through a
// recorder, to have it recorded) in a session of its own.
func runSend(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("send", stderr)
	to := fs.String("to", "", "the MCP endpoint, e.g. http://127.0.0.1:7411/mcp (a recorder's address records the exchange)")
	var headers []string
	fs.Var((*stringList)(&headers), "H", "add the header `'K: V'` to every request of the session (repeatable)")
	profilePath := fs.String("profile", "", "a testing profile `FILE` that answers the server's sampling, elicitation and roots requests (without one, the session declares none of them)")
	body := fs.String("body", "", "send `TEXT` as the request body instead of METHOD and PARAMS (not JSON is allowed: the server's answer to it is the point)")
	bodyFile := fs.String("body-file", "", "send the contents of `FILE` as the request body (see --body)")
	version := fs.String("version", "", "the protocol version to speak (default: 2026-07-28 if the server offers it, else 2025-11-25)")
	asJSON := fs.Bool("json", false, "print the exchange as JSON")
	timeout := fs.Duration("timeout", time.Minute, "bound the whole exchange")
	// Flags may come after the arguments too (`send --to URL tools/call '{…}' -H 'K: V'`).
	var pos []string
	rest := args
	for {
		if err := parse(fs, rest); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	if *to == "" {
		return usagef("--to is required: the MCP endpoint to send to, e.g. --to http://127.0.0.1:7411/mcp")
	}
	o := &replay.SendOptions{URL: *to, Version: *version, Timeout: *timeout, Header: http.Header{}}
	for _, h := range headers {
		k, v, ok := strings.Cut(h, ":")
		if !ok || strings.TrimSpace(k) == "" {
			return usagef("-H %q: want 'Name: value'", h)
		}
		o.Header.Add(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	switch {
	case *body != "" && *bodyFile != "":
		return usagef("give --body or --body-file, not both")
	case *body != "":
		o.Body = []byte(*body)
	case *bodyFile != "":
		b, err := os.ReadFile(*bodyFile)
		if err != nil {
			return fmt.Errorf("--body-file: %w", err)
		}
		o.Body = b
	}
	switch {
	case len(pos) > 2:
		return usagef("unexpected argument %q: give METHOD and PARAMS (quote the JSON)", pos[2])
	case len(pos) == 0 && o.Body == nil:
		return usagef("give the METHOD to call and its PARAMS, e.g. tools/call '{\"name\":\"echo\",\"arguments\":{\"text\":\"hi\"}}', or a --body")
	}
	if len(pos) > 0 {
		o.Method = pos[0]
	}
	if len(pos) > 1 {
		if !json.Valid([]byte(pos[1])) {
			return usagef("PARAMS %q is not JSON: quote it, e.g. '{\"name\":\"echo\"}' (to send bytes that are not JSON on purpose, use --body)", pos[1])
		}
		o.Params = json.RawMessage(pos[1])
	}
	if *profilePath != "" {
		p, err := replay.LoadProfile(*profilePath)
		if err != nil {
			return fmt.Errorf("--profile: %w", err)
		}
		o.Profile = p
	}
	res, err := replay.Send(ctx, o)
	if err != nil {
		if errors.Is(err, replay.ErrSendSession) {
			return fmt.Errorf("sending to %s: %w (is it an MCP endpoint? check the URL's path)", *to, err)
		}
		return fmt.Errorf("sending to %s: %w", *to, err)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return err
		}
	} else {
		replay.FormatSend(stdout, res)
	}
	if res.Response == nil {
		return fmt.Errorf("no JSON-RPC answer: the server answered HTTP %d", res.Status)
	}
	if m := protocol.Decode(res.Response); m.Kind == protocol.KindError {
		e, _ := m.ErrorInfo()
		return fmt.Errorf("the server answered with JSON-RPC error %d: %s", e.Code, e.Message)
	}
	return nil
}
