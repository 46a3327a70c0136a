package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/badgerstore"
	"github.com/mcptape/mcptape/fixtures"
)

// bulkServer answers every JSON-RPC POST with a result of size bytes of
// incompressible text that names the call (the "text" argument).
type bulkServer struct{ size int }

func (b bulkServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	tag := regexp.MustCompile(`"text":"([^"]*)"`).FindSubmatch(body)
	name := "?"
	if tag != nil {
		name = string(tag[1])
	}
	id := "1"
	if m := regexp.MustCompile(`"id":(\d+)`).FindSubmatch(body); m != nil {
		id = string(m[1])
	}
	pad := make([]byte, b.size*3/4)
	_, _ = rand.Read(pad)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"%s %s"}]}}`, id, name, base64.StdEncoding.EncodeToString(pad))
}

var callIDs atomic.Int64

// callTagged makes one tools/call through the proxy and checks that the
// client got the whole result for it.
func callTagged(t *testing.T, hc *http.Client, u, tag string, size int) {
	t.Helper()
	// Each call its own id, as one client's calls have.
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"bulk","arguments":{"text":"%s"}}}`, callIDs.Add(1), tag)
	req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	res, err := hc.Do(req)
	if err != nil {
		t.Fatalf("call %s: %v", tag, err)
	}
	defer res.Body.Close()
	got, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK || len(got) < size || !strings.Contains(string(got), `"text":"`+tag+` `) {
		t.Fatalf("call %s: status %d, %d bytes (want %d or more), err %v: the proxy did not forward the whole answer", tag, res.StatusCode, len(got), size, err)
	}
}

// scrape returns the value of an unlabelled metric at the metrics URL.
func scrape(t *testing.T, hc *http.Client, u, name string) float64 {
	t.Helper()
	res, err := hc.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no %s in the metrics:\n%s", name, b)
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}

var stoppedRE = regexp.MustCompile(`stopped: (\d+) exchanges, (\d+) messages stored, (\d+) lost`)

// TestRecordFullDisk fills the disk under a real `mcptape record` (a child
// process, on a 64 MiB tmpfs) while traffic flows through it: first its
// own recording, then another file that takes the last byte. Every call
// still gets its whole answer; recording pauses at --min-free instead of
// letting Badger's memory-mapped files hit the full disk (SIGBUS); the
// pause is counted, logged once and marked on the sessions; stored + lost
// = sent; and once space is freed, recording resumes by itself.
func TestRecordFullDisk(t *testing.T) {
	disk := tmpfs(t, "64m")
	data := filepath.Join(disk, "store")
	const result = 96 << 10 // below the blob threshold: the bytes go through Badger's mapped log
	up := httptest.NewServer(bulkServer{size: result})
	t.Cleanup(up.Close)
	c := startChild(t, "record", "--upstream", up.URL+"/mcp", "--listen", "127.0.0.1:0", "--data", data,
		"--dashboard", "127.0.0.1:0", "--metrics", "127.0.0.1:0", "--min-free", "24MiB")
	proxyURL := urlRE.FindString(c.wait(t, "point your MCP client at ")) + "/mcp"
	metricsURL := c.wait(t, "Prometheus metrics at ")
	dash := newDashClient(t, c.wait(t, "dashboard at "))
	var status struct {
		Paused bool   `json:"paused"`
		Reason string `json:"reason"`
	}
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 30 * time.Second}
	t.Cleanup(hc.CloseIdleConnections)
	sent := 0
	calls := func(phase string, n int) {
		t.Helper()
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { callTagged(t, hc, proxyURL, fmt.Sprintf("%s-%d", phase, i), result) })
			if i%4 == 3 {
				wg.Wait()
			}
		}
		wg.Wait()
		sent += 2 * n // a request and its result each
	}

	// 1. Room: recorded.
	calls("before", 10)
	// 2. Leave 8 MiB above the floor, then let the traffic fill it.
	ballast := fill(t, disk, "ballast-1", 32<<20)
	calls("filling", 150)
	c.alive(t, "while its own recording filled the disk")
	if v := scrape(t, hc, metricsURL, "mcptape_store_recording_paused"); v != 1 {
		t.Errorf("mcptape_store_recording_paused = %v with %d bytes free, want 1", v, freeOn(t, disk))
	}
	// The dashboard's banner comes from its status: paused, and why.
	if code := dash.do(http.MethodGet, "/api/v1/status", &status); code != http.StatusOK || !status.Paused || !strings.Contains(status.Reason, "--min-free") {
		t.Errorf("the dashboard's status while the disk is full: HTTP %d %+v; want paused, with a reason naming --min-free", code, status)
	}
	// 3. Another file takes every byte left: traffic still flows.
	full := fill(t, disk, "ballast-2", 0)
	if free := freeOn(t, disk); free > 64<<10 {
		t.Fatalf("the disk still has %d bytes free", free)
	}
	lostBefore := scrape(t, hc, metricsURL, "mcptape_capture_messages_lost_total")
	calls("full", 20)
	// The recorder's writer meets the full disk (before space comes back:
	// the losses of the filling alone may be 40 already).
	fixtures.Eventually(t, 10*time.Second, func() error {
		if lost := scrape(t, hc, metricsURL, "mcptape_capture_messages_lost_total"); lost < lostBefore+40 {
			return fmt.Errorf("mcptape_capture_messages_lost_total = %v after 20 calls on a full disk, want at least 40 more than the %v before them", lost, lostBefore)
		}
		return nil
	})
	c.alive(t, "with the disk full")
	// 4. Space comes back: recording resumes by itself.
	for _, p := range []string{ballast, full} {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	calls("after", 10)
	fixtures.Eventually(t, 5*time.Second, func() error {
		if v := scrape(t, hc, metricsURL, "mcptape_store_recording_paused"); v != 0 {
			return fmt.Errorf("mcptape_store_recording_paused = %v after space came back, want 0", v)
		}
		return nil
	})
	if dash.do(http.MethodGet, "/api/v1/status", &status); status.Paused {
		t.Errorf("the dashboard's status after space came back: %+v, want not paused", status)
	}
	if code := c.interrupt(t); code != 0 {
		t.Fatalf("record exited %d:\n%s%s", code, c.out.String(), c.errOut.String())
	}

	// stored + lost = sent, by the recorder's count and by the store's.
	m := stoppedRE.FindStringSubmatch(c.out.String())
	if m == nil {
		t.Fatalf("no summary line:\n%s", c.out.String())
	}
	stored, _ := strconv.Atoi(m[2])
	lostN, _ := strconv.Atoi(m[3])
	if stored+lostN != sent || lostN == 0 {
		t.Errorf("the recorder stored %d and lost %d messages of %d sent; want stored+lost = sent, some lost", stored, lostN, sent)
	}

	// The read commands on the full disk: they work, and write nothing.
	fill(t, disk, "ballast-3", 0)
	before := dirSnapshot(t, data)
	tape := filepath.Join(t.TempDir(), "full.tape.json") // elsewhere: this disk is full
	for _, args := range [][]string{{"ls", "--data", data}, {"verify", "--data", data}, {"export", "--data", data, "-o", tape}} {
		if code, out, errOut := mcptape(t, args...); code != 0 {
			t.Errorf("%s on the full disk: exit %d\n%s%s", args[0], code, out, errOut)
		}
	}
	for _, s := range lsJSON(t, data) {
		if code, _, errOut := mcptape(t, "show", "--data", data, s.ID, "--json"); code != 0 {
			t.Errorf("show %s on the full disk: exit %d: %s", s.ID, code, errOut)
		}
	}
	if after := dirSnapshot(t, data); !equalSnapshots(before, after) {
		t.Error("a read command on the full disk changed the store's directory")
	}

	st, err := badgerstore.Open(data, &badgerstore.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	inStore, incomplete := 0, 0
	tags := map[string]bool{}
	tagRE := regexp.MustCompile(`"text":"((before|filling|full|after)-\d+)[ "]`)
	for s, err := range st.Sessions(ctx, capture.SessionQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		if s.Status == capture.StatusIncomplete {
			incomplete++
			if !strings.Contains(s.LossReason, "--min-free") || s.Lost == 0 {
				t.Errorf("session %s is incomplete with %d lost, reason %q: want the loss and a reason naming --min-free", s.ID, s.Lost, s.LossReason)
			}
		}
		for msg, err := range st.Messages(ctx, s.ID, capture.MessageQuery{}) {
			if err != nil {
				t.Fatal(err)
			}
			inStore++
			if tm := tagRE.FindSubmatch(msg.Raw); tm != nil {
				tags[string(tm[1])] = true
			}
		}
	}
	if inStore != stored {
		t.Errorf("the store holds %d messages, the recorder says it stored %d", inStore, stored)
	}
	if incomplete == 0 {
		t.Error("no session is marked incomplete")
	}
	for _, want := range []string{"before-0", "before-9", "after-0", "after-9"} {
		if !tags[want] {
			t.Errorf("call %s is not in the store", want)
		}
	}
	for i := range 20 {
		if tags[fmt.Sprintf("full-%d", i)] {
			t.Errorf("call full-%d is in the store, written on a full disk", i)
		}
	}
	// Logged once: one line when the pause began, one when it ended.
	errOut := c.errOut.String()
	if n := strings.Count(errOut, "store write failed"); n != 1 {
		t.Errorf("the store failure was logged %d times, want once:\n%s", n, errOut)
	}
	if n := strings.Count(errOut, "store writes succeed again"); n != 1 {
		t.Errorf("the recovery was logged %d times, want once:\n%s", n, errOut)
	}
	t.Logf("%d messages sent, %d stored, %d lost; %d sessions incomplete", sent, stored, lostN, incomplete)

	// Started on the full disk, record cannot open its store: it says why
	// and what to do, rather than Badger's words about its lock file.
	code, _, errOut2 := mcptape(t, "record", "--upstream", up.URL+"/mcp", "--listen", "127.0.0.1:0", "--data", filepath.Join(disk, "another"), "--dashboard", "off")
	if code == 0 || !strings.Contains(errOut2, "is full") || !strings.Contains(errOut2, "--data DIR") {
		t.Errorf("record on the full disk: exit %d, stderr %q; want it to say the disk is full and what to do", code, errOut2)
	}
}

// TestRecordMaxRecordBytes: with --max-record-bytes 1MiB, a 3 MiB result
// reaches the client whole and is stored cut to 1 MiB, with an oversize
// finding that says so; a result under the limit is stored whole.
func TestRecordMaxRecordBytes(t *testing.T) {
	up := httptest.NewServer(bulkServer{size: 3 << 20})
	t.Cleanup(up.Close)
	small := httptest.NewServer(bulkServer{size: 512 << 10})
	t.Cleanup(small.Close)
	r := startRecord(t, "--upstream", up.URL+"/mcp", "--max-record-bytes", "1MiB")
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}}
	t.Cleanup(hc.CloseIdleConnections)
	callTagged(t, hc, r.base+"/mcp", "big", 3<<20)
	_, ms := r.exchanges(t)
	var cut *capture.Message
	for _, m := range ms {
		if m.Direction.String() == "s2c" {
			cut = m
		}
	}
	if cut == nil {
		t.Fatal("the result is not stored")
	}
	if cut.Size != 1<<20 || len(cut.Raw) != 1<<20 || !strings.Contains(string(cut.Raw), `"text":"big `) {
		t.Errorf("the 3 MiB result is stored as %d bytes, want the first 1 MiB", len(cut.Raw))
	}
	if len(cut.Findings) == 0 || cut.Findings[0].Kind != capture.FindingOversize || !strings.Contains(cut.Findings[0].Message, "1048576") {
		t.Errorf("findings on the cut result: %+v", cut.Findings)
	}

	r = startRecord(t, "--upstream", small.URL+"/mcp", "--max-record-bytes", "1MiB")
	callTagged(t, hc, r.base+"/mcp", "small", 512<<10)
	_, ms = r.exchanges(t)
	for _, m := range ms {
		if m.Direction.String() == "s2c" && (len(m.Findings) > 0 || m.Size < 512<<10) {
			t.Errorf("a result under the limit is stored as %d bytes with findings %+v", m.Size, m.Findings)
		}
	}
}

// TestRecordStoreFlagErrors: a size the store's flags cannot read is a
// usage error naming the flag.
func TestRecordStoreFlagErrors(t *testing.T) {
	for _, c := range [][]string{
		{"--min-free", "lots"}, {"--max-store-size", "-1"}, {"--max-record-bytes", "12"}, {"--max-record-bytes", "2GiB"},
	} {
		code, _, errOut := mcptape(t, append([]string{"record", "--upstream", "http://127.0.0.1:1/mcp", "--data", t.TempDir(), "--dashboard", "off"}, c...)...)
		if code != exitUsage || !strings.Contains(errOut, c[0]) {
			t.Errorf("record %v: exit %d, stderr %q; want a usage error naming %s", c, code, errOut, c[0])
		}
	}
}
