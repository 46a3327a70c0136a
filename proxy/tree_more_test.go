//lint:file-ignore SA1019 the test drives roots, which the 2026-07-28 revision deprecates but mcptape still records

package proxy_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/protocol"
)

// waitEnded waits until every exchange recorded so far has ended.
func (r *rig) waitEnded(t *testing.T) {
	t.Helper()
	fixtures.Eventually(t, 10*time.Second, func() error {
		r.sync(t)
		open := 0
		for _, x := range r.exchanges(t) {
			if x.End.IsZero() && x.Method != http.MethodGet {
				open++
			}
		}
		if open != 0 {
			return fmt.Errorf("%d exchanges never ended", open)
		}
		return nil
	})
}

// TestTreeGoldenCancellation records go-sdk's client giving up on the
// fixture's slow tool after its first progress notification: on legacy it
// sends notifications/cancelled, linked to the call; on 2026-07-28 it
// closes the stream, and the call is cancelled.
func TestTreeGoldenCancellation(t *testing.T) {
	for _, era := range []struct{ name, path, comment string }{
		{"legacy", fixtures.PathStateful, "cancellation: notifications/cancelled names the call (legacy)"},
		{"modern", fixtures.PathStateless, "cancellation: the client closed the call's stream (2026-07-28)"},
	} {
		t.Run(era.name, func(t *testing.T) {
			r := newFixtureRig(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			callCtx, giveUp := context.WithCancel(ctx)
			defer giveUp()
			var once sync.Once
			client := mcp.NewClient(&mcp.Implementation{Name: "cancel-client", Version: "1.0"}, &mcp.ClientOptions{
				ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { once.Do(giveUp) },
			})
			tr := &http.Transport{Proxy: nil}
			defer tr.CloseIdleConnections()
			cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: r.px.URL + era.path,
				HTTPClient: &http.Client{Transport: tr}, MaxRetries: -1}, nil)
			if err != nil {
				t.Fatal(err)
			}
			params := &mcp.CallToolParams{Name: fixtures.ToolSlow, Arguments: map[string]any{"duration_ms": 20000, "steps": 50}}
			params.SetProgressToken("cancel-me")
			_, err = cs.CallTool(callCtx, params)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("call ended with %v, want it cancelled", err)
			}
			// go-sdk sends notifications/cancelled asynchronously (on
			// both eras); wait for it to be recorded before the session
			// closes.
			fixtures.Eventually(t, 10*time.Second, func() error {
				r.sync(t)
				for _, m := range r.messages(t, r.sessionAt(t, era.path).ID) {
					if m.Method == "notifications/cancelled" {
						return nil
					}
				}
				return errors.New("the client's notifications/cancelled was not recorded")
			})
			cs.Close()
			r.waitEnded(t)
			s := r.sessionAt(t, era.path)
			got := callText(t, r.store, s.ID, tool(fixtures.ToolSlow))
			name := era.name + "-cancelled"
			if era.name == "legacy" && strings.Contains(got, "after the client cancelled it") && !*update {
				// The notification can reach go-sdk's server before the
				// closed stream does; then the server answers anyway, and
				// the proxy records the answer it relayed.
				name += "-late"
			}
			golden(t, name, era.comment, got)
			if era.name == "modern" {
				// Closing the stream is the cancellation on 2026-07-28: the
				// call's exchange is recorded aborted, which alone marks it
				// cancelled (TestClientDisconnectBeforeResponseCancelsUpstream
				// covers a stream closed with no notification).
				for m, err := range r.store.Messages(ctx, s.ID, capture.MessageQuery{NoRaw: true}) {
					if err != nil {
						t.Fatal(err)
					}
					if m.Kind == protocol.KindRequest && m.Name == fixtures.ToolSlow {
						x, err := r.store.Exchange(ctx, m.ExchangeID)
						if err != nil {
							t.Fatal(err)
						}
						if !x.Aborted {
							t.Errorf("the stream the client closed is not recorded aborted: %+v", x)
						}
					}
				}
			}
		})
	}
}

// TestTreeGoldenGetStreamRequest records a server request that no client
// request set off (go-sdk sends it on the standalone GET stream): it
// belongs to the session, a root of the tree with the client's answer, not
// under any call.
func TestTreeGoldenGetStreamRequest(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "roots-asker", Version: "1.0"}, &mcp.ServerOptions{
		InitializedHandler: func(_ context.Context, req *mcp.InitializedRequest) {
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_, _ = req.Session.ListRoots(ctx, nil)
			}()
		},
	})
	mcp.AddTool(server, &mcp.Tool{Name: "echo"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echoed"}}}, nil, nil
	})
	up := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	r := newRig(t, up, nil)
	t.Cleanup(func() { r.px.CloseClientConnections(); r.up.CloseClientConnections() })
	answered := make(chan struct{})
	var once sync.Once
	client := mcp.NewClient(&mcp.Implementation{Name: "roots-client", Version: "1.0"}, &mcp.ClientOptions{})
	client.AddRoots(&mcp.Root{URI: "file:///work", Name: "work"})
	client.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if method == protocol.MethodRootsList {
				once.Do(func() { close(answered) })
			}
			return res, err
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tr := &http.Transport{Proxy: nil}
	defer tr.CloseIdleConnections()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: r.px.URL + "/mcp",
		HTTPClient: &http.Client{Transport: tr}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-answered:
	case <-ctx.Done():
		t.Fatal("the server's roots/list never reached the client")
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	cs.Close()
	r.waitEnded(t)
	ss := r.sessions(t)
	if len(ss) != 1 {
		t.Fatalf("%d sessions, want 1", len(ss))
	}
	tree, err := capture.SessionTree(ctx, r.store, ss[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	tree.WriteText(&b, &capture.TextOptions{NoTimes: true})
	golden(t, "legacy-get-stream-request", "a server→client request on the standalone GET stream belongs to the session, not a call (legacy)", b.String())
}
