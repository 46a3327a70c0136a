package replay_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/protocol"
	"github.com/mcptape/mcptape/replay"
)

// The testing profile's faults over stdio, as `replay server --stdio
// --profile` serves them: one test per fault, each asserting what a stdio
// client sees.

// faultProfile is a testing profile whose one fault is f.
func faultProfile(t *testing.T, f string) *replay.Profile {
	t.Helper()
	p, err := replay.ReadProfile(strings.NewReader(`{"name":"faulty","faults":[` + f + `]}`))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// echoOverStdio runs the fixture client's echo step against a stdio
// replay of a recording of it, with profile's faults, and returns the step
// and how long the run took.
func echoOverStdio(t *testing.T, profile *replay.Profile) (*fixtures.Step, time.Duration) {
	t.Helper()
	tape, _ := record(t, fixtures.PathStateful, &fixtures.ClientOptions{ProtocolVersion: protocol.V20251125, Only: []string{"echo"}})
	ts := replay.NewStdioServer(t, writeTapeFile(t, tape), replay.WithProfile(profile))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	rep, err := fixtures.RunClient(ctx, "stdio", &fixtures.ClientOptions{ProtocolVersion: protocol.V20251125, Only: []string{"echo"},
		Transport: &mcp.IOTransport{Reader: ts.Conn, Writer: ts.Conn}})
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	s := rep.Step("echo")
	if s == nil {
		t.Fatalf("the run has no echo step: %+v", rep.Steps)
	}
	return s, took
}

// An error fault: the client's call fails with the profile's JSON-RPC
// error, not the recorded result.
func TestStdioFaultError(t *testing.T) {
	step, _ := echoOverStdio(t, faultProfile(t, `{"match":{"method":"tools/call","name":"echo"},"error":{"code":-32603,"message":"injected by the profile"}}`))
	if !strings.Contains(step.Err, "injected by the profile") || step.Text != "" {
		t.Errorf("echo: err %q, text %q; want the profile's error and no result", step.Err, step.Text)
	}
}

// A delay fault: the client gets the recorded result, no sooner than the
// delay.
func TestStdioFaultDelay(t *testing.T) {
	const delay = 400 * time.Millisecond
	step, took := echoOverStdio(t, faultProfile(t, `{"match":{"method":"tools/call","name":"echo"},"delay":"400ms"}`))
	if step.Err != "" || step.Text != "hello, tape" {
		t.Errorf("echo: err %q, text %q; want the recorded result", step.Err, step.Text)
	}
	if took < delay {
		t.Errorf("the run took %v, less than the %v delay", took, delay)
	}
}

// A dropAfterEvents fault: the client reads the first events of the call's
// recorded stream, then the connection ends (EOF) with no result, as with
// a server that crashed mid-answer.
func TestStdioFaultDropAfterEvents(t *testing.T) {
	tape, _ := record(t, fixtures.PathStateless, &fixtures.ClientOptions{Only: []string{"slow"}})
	// What the recorded server sent on the call's stream before its
	// result: a log line and progress notifications.
	var params json.RawMessage
	var notes []string
	for _, m := range tape.Sessions[0].Messages {
		switch {
		case m.Method == "tools/call" && m.Kind == protocol.KindRequest:
			params, _, _, _ = protocol.Member(m.Raw, "params")
		case params != nil && m.Direction == protocol.ServerToClient && m.Kind == protocol.KindNotification:
			notes = append(notes, m.Method)
		}
	}
	if params == nil || len(notes) < 3 {
		t.Fatalf("the recording of slow has notifications %q (want 3 or more), params %s", notes, params)
	}
	ts := replay.NewStdioServer(t, writeTapeFile(t, tape),
		replay.WithProfile(faultProfile(t, `{"match":{"method":"tools/call","name":"slow"},"dropAfterEvents":2}`)))
	// A replay that neither answers nor ends must fail the test, not hang it.
	watchdog := time.AfterFunc(20*time.Second, func() { ts.Conn.Close() })
	defer watchdog.Stop()
	if _, err := fmt.Fprintf(ts.Conn, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":%s}`+"\n", params); err != nil {
		t.Fatal(err)
	}
	var lines []string
	br := bufio.NewReader(ts.Conn)
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			lines = append(lines, line)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("reading the replay: %v (a replay that does not end the connection is cut by the watchdog); read %q", err, lines)
		}
	}
	var got []string
	for _, line := range lines {
		m := protocol.Decode([]byte(strings.TrimSpace(line)))
		got = append(got, m.Method)
		if m.Kind.IsResponse() {
			t.Errorf("the client got an answer before the drop: %s", line)
		}
	}
	if strings.Join(got, " ") != strings.Join(notes[:2], " ") {
		t.Errorf("the client read %q before EOF, want the recorded stream's first 2 events %q", got, notes[:2])
	}
}

// A listChanged fault: after the response to the request it matches, the
// client's list_changed handler is called (over stdio there is no stream
// to open: every stdio client takes them), and not before.
func TestStdioFaultListChanged(t *testing.T) {
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			tape, _ := record(t, era.path, &fixtures.ClientOptions{Only: []string{"list_tools"}})
			ts := replay.NewStdioServer(t, writeTapeFile(t, tape), replay.Lenient(),
				replay.WithProfile(faultProfile(t, `{"match":{"method":"tools/list"},"listChanged":"tools"}`)))
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			listChangedAfterList(t, ctx, &mcp.IOTransport{Reader: ts.Conn, Writer: ts.Conn})
			if r := ts.Report(); len(r.Misses) != 0 {
				t.Errorf("misses: %v", r.Misses)
			}
		})
	}
}
