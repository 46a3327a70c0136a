package replay_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/protocol"
	"github.com/mcptape/mcptape/replay"
)

// The same fault, from each place it can come from: the tape's
// annotations (as written in a tape file), a testing profile's faults (as
// --profile reads one), and ServerOptions.Faults.
func TestFaultSources(t *testing.T) {
	fault := replay.Annotation{Match: replay.Match{Method: "tools/call", Name: "count"}, Error: &replay.RPCError{Code: -32603, Message: "injected"}}
	withAnnotations := func(t *testing.T) *replay.Tape {
		tape := counterTape(t)
		tape.Annotations = []replay.Annotation{fault}
		var buf bytes.Buffer
		if err := replay.WriteTape(&buf, tape); err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(buf.Bytes(), []byte(`"annotations":[{"match":{"method":"tools/call","name":"count"},"error":{"code":-32603,"message":"injected"}}]`)) {
			t.Fatalf("the tape file lacks the annotation: %.300s", buf.Bytes())
		}
		tape, err := replay.ReadTape(&buf)
		if err != nil {
			t.Fatal(err)
		}
		return tape
	}
	profile, err := replay.ReadProfile(strings.NewReader(`{"name":"faulty","faults":[{"match":{"method":"tools/call","name":"count"},"error":{"code":-32603,"message":"injected"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		tape func(*testing.T) *replay.Tape
		opts replay.ServerOptions
	}{
		{"tape annotations", withAnnotations, replay.ServerOptions{}},
		{"profile", counterTape, replay.ServerOptions{Profile: profile}},
		{"options", counterTape, replay.ServerOptions{Faults: []replay.Annotation{fault}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			opts.Timing = replay.TimingFast
			_, hs := serve(t, tc.tape(t), &opts)
			_, body, err := post(t, hs.URL+"/mcp", modernCall(1, "count", `{}`), modernHeaders)
			if err != nil {
				t.Fatal(err)
			}
			if got := resultText(t, body); got != "error -32603: injected" {
				t.Errorf("the faulty call got %q", got)
			}
			_, body, _ = post(t, hs.URL+"/mcp", modernCall(2, "other", `{}`), modernHeaders)
			if got := resultText(t, body); strings.Contains(got, "injected") {
				t.Errorf("a call the fault does not match got %q", got)
			}
		})
	}
}

// A listChanged fault reaches a real client's list_changed handler after
// the response, on each era: over the standalone GET stream, or over the
// subscriptions/listen stream go-sdk opens.
func TestFaultListChanged(t *testing.T) {
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			tape, _ := record(t, era.path, &fixtures.ClientOptions{Only: []string{"list_tools"}})
			s, hs := serve(t, tape, &replay.ServerOptions{Timing: replay.TimingFast,
				Faults: []replay.Annotation{{Match: replay.Match{Method: "tools/list"}, ListChanged: "tools"}}})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			tr := &http.Transport{Proxy: nil}
			defer tr.CloseIdleConnections()
			listChangedAfterList(t, ctx, &mcp.StreamableClientTransport{Endpoint: hs.URL + era.path, HTTPClient: &http.Client{Transport: tr}, MaxRetries: -1})
			if r := s.Report(); len(r.Misses) != 0 {
				t.Errorf("misses: %q", r.Misses)
			}
		})
	}
}

// syncBuffer is a bytes.Buffer safe for a logger and a test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// With no stream open, a listChanged fault warns, saying what to do, and
// the notification waits for the client's standalone GET stream.
func TestFaultListChangedWaitsForAStream(t *testing.T) {
	tape, _ := record(t, fixtures.PathStateful, &fixtures.ClientOptions{ProtocolVersion: protocol.V20251125, Only: []string{"list_tools"}})
	var logs syncBuffer
	_, hs := serve(t, tape, &replay.ServerOptions{Timing: replay.TimingFast, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Faults: []replay.Annotation{{Match: replay.Match{Method: "tools/list"}, ListChanged: "tools"}}})
	u := hs.URL + fixtures.PathStateful
	h := openLegacy(t, tape, u)
	_, b, err := post(t, u, `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`, h)
	if err != nil || !bytes.Contains(b, []byte(`"tools"`)) {
		t.Fatalf("tools/list: %v %s", err, b)
	}
	// The server warns after it has sent the answer: wait for the warning.
	fixtures.Eventually(t, 10*time.Second, func() error {
		if !strings.Contains(logs.String(), "listChanged fault") {
			return fmt.Errorf("no listChanged warning in the log:\n%s", logs.String())
		}
		return nil
	})
	for _, want := range []string{"level=WARN", "listChanged fault", "no open stream", "standalone GET stream", "subscriptions/listen", "method=notifications/tools/list_changed"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, logs.String())
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	get, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
	get.Header.Set("Accept", "text/event-stream")
	for k, v := range h {
		get.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(get)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			if d != `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}` {
				t.Errorf("the GET stream's first event: %s", d)
			}
			return
		}
	}
	t.Fatalf("the GET stream ended without the notification: %v", sc.Err())
}

// listChangedAfterList connects a go-sdk client over transport and checks
// that its tools list_changed handler is called after its tools/list, and
// not before.
func listChangedAfterList(t *testing.T, ctx context.Context, transport mcp.Transport) {
	t.Helper()
	changed := make(chan struct{}, 4)
	client := mcp.NewClient(&mcp.Implementation{Name: "list-changed-test", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	select {
	case <-changed:
		t.Fatal("list_changed arrived before the request the fault matches")
	case <-time.After(50 * time.Millisecond):
	}
	res, err := cs.ListTools(ctx, nil)
	if err != nil || len(res.Tools) == 0 {
		t.Fatalf("tools/list: %v %v", res, err)
	}
	select {
	case <-changed:
	case <-ctx.Done():
		t.Fatal("the client's list_changed handler was never called")
	}
}
