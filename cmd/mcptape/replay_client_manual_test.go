package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
	"github.com/mcptape/mcptape/replay"
)

// manualTape is the demo's tape without the client's sampling answers, so
// that the live server's sampling requests go to the testing profile.
func manualTape(t *testing.T) string {
	t.Helper()
	full := filepath.Join(t.TempDir(), "demo.tape.json")
	if code, _, errOut := mcptape(t, "export", "--data", demoStore(t), "-o", full, "-q"); code != 0 {
		t.Fatal(errOut)
	}
	tape, err := replay.LoadTape(full)
	if err != nil {
		t.Fatal(err)
	}
	for _, ts := range tape.Sessions {
		drop := map[uint64]bool{}
		for _, m := range ts.Messages {
			// Legacy answers are c2s responses to sampling requests;
			// 2026-07-28 ones travel in the retries.
			if m.Direction == protocol.ClientToServer && (m.Kind.IsResponse() || m.Links.Previous != 0) {
				drop[m.Seq] = true
			}
		}
		var kept []*capture.Message
		for _, m := range ts.Messages {
			if !drop[m.Seq] && !drop[m.Links.Request] {
				kept = append(kept, m)
			}
		}
		ts.Messages = kept
	}
	var b bytes.Buffer
	if err := replay.WriteTape(&b, tape); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "manual.tape.json")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// pendingClient talks to a dashboard's API as its page does: the CSRF cookie
// sent back in the X-CSRF-Token header, from the dashboard's origin.
type pendingClient struct {
	base string
	hc   *http.Client
}

// newPendingClient logs in at printed, the pending page's URL mcptape
// printed, with its token.
func newPendingClient(t *testing.T, printed string) *pendingClient {
	jar, _ := cookiejar.New(nil)
	c := &pendingClient{hc: &http.Client{Jar: jar, Transport: &http.Transport{Proxy: nil}, Timeout: 10 * time.Second}}
	c.base = dashLogin(t, c.hc, printed)
	var info struct {
		Features map[string]bool `json:"features"`
	}
	if code := c.call(t, http.MethodGet, "/api/v1/info", nil, &info); code != 200 || !info.Features["pending"] {
		t.Fatalf("info: %d %v", code, info.Features)
	}
	return c
}

// poll GETs path like call, but a dashboard that has gone (the run ended
// between two polls) is not an error: it returns 0.
func (c *pendingClient) poll(t *testing.T, path string, v any) int {
	t.Helper()
	res, err := c.hc.Do(pageRequest(c.hc, c.base, http.MethodGet, path, nil))
	if err != nil {
		return 0
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode == http.StatusOK && json.Unmarshal(b, v) != nil {
		t.Errorf("GET %s: %d %s", path, res.StatusCode, b)
	}
	return res.StatusCode
}

func (c *pendingClient) call(t *testing.T, method, path string, body, v any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req := pageRequest(c.hc, c.base, method, path, rd)
	if method != http.MethodGet {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.hc.Do(req)
	if err != nil {
		t.Errorf("%s %s: %v", method, path, err)
		return 0
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if v != nil && json.Unmarshal(b, v) != nil {
		t.Errorf("%s %s: %d %s", method, path, res.StatusCode, b)
	}
	return res.StatusCode
}

// `mcptape replay client` with a manual testing profile serves a dashboard
// where the live server's sampling requests wait; answered through its
// API, the answers reach the live fixture server, whose tools return
// them.
func TestReplayClientManual(t *testing.T) {
	tape := manualTape(t)
	profile := filepath.Join(t.TempDir(), "manual.json")
	if err := os.WriteFile(profile, []byte(`{"name":"manual","sampling":{"provider":"manual"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"replay", "client", "--tape", tape, "--target", fixtureServer(t, false), "--profile", profile,
			"--dashboard", "127.0.0.1:0", "--timeout", "5s"}, &out, &errOut)
	}()

	announce := regexp.MustCompile(`sampling requests wait for you at (http://127\.0\.0\.1:\d+/pending\?token=[0-9a-f]+) \(each for at most 10m0s\)`)
	var base string
	for base == "" {
		if m := announce.FindStringSubmatch(errOut.String()); m != nil {
			base = m[1]
			break
		}
		select {
		case code := <-done:
			t.Fatalf("replay client exited %d before announcing its dashboard\n%s%s", code, out.String(), errOut.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	c := newPendingClient(t, base)
	// The person sees the recorded sessions too.
	var sessions struct {
		Sessions []json.RawMessage `json:"sessions"`
	}
	if c.call(t, http.MethodGet, "/api/v1/sessions", nil, &sessions); len(sessions.Sessions) != 2 {
		t.Errorf("the dashboard shows %d sessions, want the tape's 2", len(sessions.Sessions))
	}

	// Answer every sampling request as it comes, with its prompt.
	answered := 0
	var code int
answering:
	for {
		select {
		case code = <-done:
			break answering
		case <-time.After(20 * time.Millisecond):
		}
		var l struct {
			Active   bool `json:"active"`
			Requests []struct {
				ID     string `json:"id"`
				Method string `json:"method"`
				Params struct {
					Messages []struct {
						Content json.RawMessage `json:"content"`
					} `json:"messages"`
				} `json:"params"`
			} `json:"requests"`
		}
		if c.poll(t, "/api/v1/pending", &l) != http.StatusOK {
			continue // the run ended meanwhile
		}
		for _, q := range l.Requests {
			if q.Method != protocol.MethodSampling {
				t.Errorf("pending %s", q.Method)
				continue
			}
			// A refused answer first: the request stays.
			var e struct{ Error string }
			if got := c.call(t, http.MethodPost, "/api/v1/pending/"+q.ID, map[string]any{"result": map[string]any{"role": "assistant"}}, &e); got != http.StatusBadRequest || !strings.Contains(e.Error, "result.content is missing") {
				t.Errorf("a bad answer: %d %q", got, e.Error)
			}
			var first struct {
				Text string `json:"text"`
			}
			if n := len(q.Params.Messages); n > 0 {
				_ = json.Unmarshal(q.Params.Messages[0].Content, &first)
			}
			answer := map[string]any{"role": "assistant", "content": map[string]any{"type": "text", "text": "a person answers: " + first.Text},
				"model": "human", "stopReason": "endTurn"}
			if got := c.call(t, http.MethodPost, "/api/v1/pending/"+q.ID, map[string]any{"result": answer}, nil); got != http.StatusOK {
				t.Errorf("answering %s: %d", q.ID, got)
				continue
			}
			answered++
		}
	}
	// Both sessions' sample calls, and the tool loops' first requests
	// (a text answer ends a loop).
	if answered < 4 {
		t.Errorf("answered %d sampling requests, want at least 4", answered)
	}
	// The answers changed what the tools returned: the diff shows them.
	o := out.String()
	if code != exitError || !strings.Contains(o, "tools/call sample ") || !strings.Contains(o, `live:     "a person answers: Say hello to the tape."`) {
		t.Errorf("exit %d, want 1 with the person's answer in the diff\n%s%s", code, o, errOut.String())
	}
	if strings.Contains(o, "ERROR") {
		t.Errorf("a call failed:\n%s", o)
	}
	// The dashboard is gone with the run.
	if _, err := http.Get(c.base + "/api/v1/info"); err == nil {
		t.Error("the dashboard still serves after the run")
	}
}

// With --dashboard off the manual provider keeps today's behaviour: no
// dashboard, an error for the server, and a warning.
func TestReplayClientManualOff(t *testing.T) {
	profile := filepath.Join(t.TempDir(), "manual.json")
	if err := os.WriteFile(profile, []byte(`{"sampling":{"provider":"manual"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, out, errOut := mcptape(t, "replay", "client", "--tape", manualTape(t), "--target", fixtureServer(t, false),
		"--profile", profile, "--dashboard", "off")
	if !strings.Contains(errOut, "--dashboard off leaves nobody to ask") || strings.Contains(errOut, "wait for you at") {
		t.Errorf("stderr:\n%s\nstdout:\n%s", errOut, out)
	}
}
