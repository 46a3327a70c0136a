package proxy

import (
	"bytes"
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// engineFronts serves h with net/http's server and with the engine, with
// the settings Listen gives both.
func engineFronts(t *testing.T, h http.Handler) (ref, eng string) {
	t.Helper()
	settings := func() *http.Server {
		return &http.Server{Handler: h, ReadHeaderTimeout: 2 * time.Second, IdleTimeout: 2 * time.Second,
			MaxHeaderBytes: DefaultMaxHeaderBytes, ErrorLog: log.New(io.Discard, "", 0)}
	}
	lnRef, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lnEng, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := settings()
	go hs.Serve(lnRef)
	e := newEngine(h, settings())
	go e.Serve(fastListen(lnEng))
	t.Cleanup(func() { hs.Close(); e.Close() })
	return lnRef.Addr().String(), lnEng.Addr().String()
}

// exchangeRaw writes raw to a new connection and returns what comes back
// until the connection closes or stays quiet for quiet.
func exchangeRaw(t *testing.T, addr, raw string, quiet time.Duration) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go io.WriteString(c, raw)
	var out bytes.Buffer
	buf := make([]byte, 64<<10)
	for {
		_ = c.SetReadDeadline(time.Now().Add(quiet))
		n, err := c.Read(buf)
		out.Write(buf[:n])
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				return out.String() + "[open]"
			}
			return out.String() + "[closed]"
		}
	}
}

var dateLine = regexp.MustCompile(`(?m)^Date: [^\r\n]*\r\n`)

// TestEngineAnswersAsNetHTTP: for every shape of response a handler
// writes (lengths, streams, HEAD, HTTP/1.0 with and without keep-alive,
// bodiless statuses, interim responses, trailers, a handler that closes,
// writes too little or leaves the body unread, Expect), the engine sends
// the bytes net/http's server sends, and keeps or closes the connection
// as it does: each request is sent twice on one connection.
func TestEngineAnswersAsNetHTTP(t *testing.T) {
	handlers := map[string]http.HandlerFunc{
		"/length": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", "2")
			io.WriteString(w, "{}")
		},
		"/stream": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: 1\n\n")
			w.(http.Flusher).Flush()
			io.WriteString(w, "data: 2\n\n")
			w.(http.Flusher).Flush()
		},
		"/nothing": func(w http.ResponseWriter, r *http.Request) {},
		"/204": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "5")
			w.WriteHeader(http.StatusNoContent)
			io.WriteString(w, "never")
		},
		"/304": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Set("Content-Length", "5")
			w.Header().Set("Etag", `"x"`)
			w.WriteHeader(http.StatusNotModified)
		},
		"/interim": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Link", "</a>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Set("Content-Length", "2")
			io.WriteString(w, "ok")
		},
		"/trailers": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Set("Trailer", "X-Sum")
			io.WriteString(w, "abc")
			w.(http.Flusher).Flush()
			w.Header().Set("X-Sum", "3")
			w.Header().Set(http.TrailerPrefix+"X-Late", "yes")
		},
		"/close": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Connection", "close")
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Set("Content-Length", "2")
			io.WriteString(w, "ok")
		},
		"/identity": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Transfer-Encoding", "identity")
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, "until the end")
			w.(http.Flusher).Flush()
		},
		// (A Content-Length that does not parse is dropped by both, but
		// net/http still sends it where it does not chunk: the engine
		// does not. The proxy never has one: the upstream's response
		// would not have parsed.)
		"/badlength": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "abc")
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, "x")
			w.(http.Flusher).Flush()
		},
		"/short": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Set("Content-Length", "10")
			io.WriteString(w, "short")
		},
		"/newline": func(w http.ResponseWriter, r *http.Request) {
			w.Header()["X-Split"] = []string{"a\r\nInjected: yes"}
			w.Header()["Bad Name"] = []string{"v"}
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Set("Content-Length", "0")
		},
		"/read": func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Set("Content-Length", "2")
			io.WriteString(w, "ok")
		},
		"/unread": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Set("Content-Length", "2")
			io.WriteString(w, "no")
		},
	}
	mux := http.NewServeMux()
	for p, h := range handlers {
		mux.Handle(p, h)
	}
	ref, eng := engineFronts(t, mux)
	req := func(method, path, proto, extra, body string) string {
		return method + " " + path + " " + proto + "\r\nHost: localhost\r\n" + extra + "\r\n" + body
	}
	big := strings.Repeat("b", 300<<10)
	cases := map[string]string{}
	for path := range handlers {
		cases["GET "+path] = req("GET", path, "HTTP/1.1", "", "")
		cases["HEAD "+path] = req("HEAD", path, "HTTP/1.1", "", "")
		cases["GET "+path+" HTTP/1.0"] = req("GET", path, "HTTP/1.0", "", "")
		cases["GET "+path+" HTTP/1.0 keep-alive"] = req("GET", path, "HTTP/1.0", "Connection: keep-alive\r\n", "")
		cases["GET "+path+" close"] = req("GET", path, "HTTP/1.1", "Connection: close\r\n", "")
	}
	cases["POST /read"] = req("POST", "/read", "HTTP/1.1", "Content-Length: 5\r\n", "hello")
	cases["POST /unread small"] = req("POST", "/unread", "HTTP/1.1", "Content-Length: 5\r\n", "hello")
	cases["POST /unread chunked"] = req("POST", "/unread", "HTTP/1.1", "Transfer-Encoding: chunked\r\n", "5\r\nhello\r\n0\r\n\r\n")
	cases["POST /unread large"] = req("POST", "/unread", "HTTP/1.1", "Content-Length: 307200\r\n", big[:300<<10])
	cases["POST /read 100-continue"] = req("POST", "/read", "HTTP/1.1", "Expect: 100-continue\r\nContent-Length: 5\r\n", "hello")
	cases["POST /unread 100-continue"] = req("POST", "/unread", "HTTP/1.1", "Expect: 100-continue\r\nContent-Length: 5\r\n", "hello")
	cases["POST /read other Expect"] = req("POST", "/read", "HTTP/1.1", "Expect: something\r\nContent-Length: 5\r\n", "hello")
	cases["OPTIONS *"] = req("OPTIONS", "*", "HTTP/1.1", "", "")
	for name, raw := range cases {
		if strings.Contains(name, "/badlength") && (strings.Contains(name, "HTTP/1.0") || strings.HasPrefix(name, "HEAD")) {
			continue // see /badlength
		}
		quiet := 100 * time.Millisecond
		want := dateLine.ReplaceAllString(exchangeRaw(t, ref, raw+raw, quiet), "")
		got := dateLine.ReplaceAllString(exchangeRaw(t, eng, raw+raw, quiet), "")
		if got != want {
			t.Errorf("%s:\nengine:   %.600q\nnet/http: %.600q", name, got, want)
		}
	}
}

// pipeConn is one end of a net.Pipe with the addresses a TCP connection
// has (the engine names the client by its address).
type pipeConn struct{ net.Conn }

func (pipeConn) RemoteAddr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000} }
func (pipeConn) LocalAddr() net.Addr  { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7411} }

// pipeEngine serves h on one in-memory connection (a net.Pipe, which
// testing/synctest can wait on) and returns the client's end.
func pipeEngine(h http.Handler, headTimeout, idleTimeout time.Duration) net.Conn {
	e := newEngine(h, &http.Server{ReadHeaderTimeout: headTimeout, IdleTimeout: idleTimeout,
		MaxHeaderBytes: DefaultMaxHeaderBytes, ErrorLog: log.New(io.Discard, "", 0)})
	client, server := net.Pipe()
	go e.newConn(pipeConn{server}).serve()
	return client
}

// readAll reads c until it ends, noting when it did.
func readAll(c net.Conn, got *bytes.Buffer, ended *time.Time) {
	buf := make([]byte, 4<<10)
	for {
		n, err := c.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			*ended = time.Now()
			return
		}
	}
}

// TestEngineHeadTimeout: a client that trickles a request head is cut
// once the head timeout has passed since its first byte, and nothing is
// answered or forwarded; one that sends it in time is served.
func TestEngineHeadTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		served := false
		c := pipeEngine(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { served = true }), 30*time.Second, 5*time.Minute)
		defer c.Close()
		var got bytes.Buffer
		var ended time.Time
		go readAll(c, &got, &ended)
		start := time.Now()
		for _, part := range []string{"POST /mcp HTTP/1.1\r\n", "Host: localhost\r\n", "Content-Type: application/json\r\n"} {
			io.WriteString(c, part)
			time.Sleep(10 * time.Second) // each part in time, the whole head not
		}
		synctest.Wait()
		if ended.IsZero() || ended.Sub(start) != 30*time.Second || got.Len() != 0 || served {
			t.Fatalf("the connection ended after %v with %q (served %v); want it cut at the 30s head timeout, unanswered", ended.Sub(start), got.String(), served)
		}
	})
}

// TestEngineIdleTimeout: a keep-alive connection left idle is closed
// after the idle timeout, not before; a request that arrives before is
// served.
func TestEngineIdleTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := pipeEngine(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "2")
			io.WriteString(w, "ok")
		}), 30*time.Second, 5*time.Minute)
		defer c.Close()
		var got bytes.Buffer
		var ended time.Time
		go readAll(c, &got, &ended)
		io.WriteString(c, "GET /a HTTP/1.1\r\nHost: localhost\r\n\r\n")
		time.Sleep(4 * time.Minute)
		io.WriteString(c, "GET /b HTTP/1.1\r\nHost: localhost\r\n\r\n")
		idle := time.Now()
		time.Sleep(time.Hour)
		synctest.Wait()
		if n := strings.Count(got.String(), "HTTP/1.1 200 OK"); n != 2 {
			t.Fatalf("%d answers, want 2: %q", n, got.String())
		}
		if ended.IsZero() || ended.Sub(idle) != 5*time.Minute {
			t.Fatalf("the idle connection ended %v after its last answer; want the 5m idle timeout", ended.Sub(idle))
		}
	})
}

// TestEngineWatchesLongCalls: a request that stays in the handler is
// watched once it has been there for watchDelay: the client's going away
// ends its context then; the quick requests before it were answered
// without a watch, on one connection.
func TestEngineWatchesLongCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ended time.Time
		var cause error
		c := pipeEngine(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/slow" {
				<-r.Context().Done()
				ended, cause = time.Now(), r.Context().Err()
				return
			}
			w.Header().Set("Content-Length", "2")
			io.WriteString(w, "ok")
		}), 30*time.Second, 5*time.Minute)
		var got bytes.Buffer
		var closed time.Time
		go readAll(c, &got, &closed)
		for range 3 {
			io.WriteString(c, "GET /quick HTTP/1.1\r\nHost: localhost\r\n\r\n")
			synctest.Wait()
		}
		if n := strings.Count(got.String(), "HTTP/1.1 200 OK"); n != 3 {
			t.Fatalf("%d answers to quick requests, want 3: %q", n, got.String())
		}
		io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: localhost\r\n\r\n")
		sent := time.Now()
		c.Close() // at once: before the watch begins
		time.Sleep(time.Minute)
		synctest.Wait()
		if cause != context.Canceled || ended.Sub(sent) < watchDelay || ended.Sub(sent) > 2*watchDelay {
			t.Fatalf("the request's context ended %v after the client left (%v); want it ended between one and two watch delays (%v)", ended.Sub(sent), cause, watchDelay)
		}
	})
}

// TestEngineLongStreamNotCut: a request that stays in the handler far
// longer than the head timeout (a GET stream waiting for notifications)
// keeps its context while its client stays: the head's deadline ends with
// the head, and the watch waits without one.
func TestEngineLongStreamNotCut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ended time.Duration
		c := pipeEngine(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			select {
			case <-r.Context().Done():
				ended = time.Since(start)
			case <-time.After(time.Hour):
			}
			w.Header().Set("Content-Length", "2")
			io.WriteString(w, "ok")
		}), 30*time.Second, 5*time.Minute)
		defer c.Close()
		var got bytes.Buffer
		var closed time.Time
		go readAll(c, &got, &closed)
		io.WriteString(c, "GET /stream HTTP/1.1\r\nHost: localhost\r\n\r\n")
		time.Sleep(2 * time.Hour)
		synctest.Wait()
		if ended != 0 || !strings.HasSuffix(got.String(), "ok") {
			t.Fatalf("the request's context ended after %v with its client still there; the client got %q", ended, got.String())
		}
	})
}

// TestEngineExchangeContextEndsWithTheRequest: an exchange's context,
// which the engine cancels itself instead of registering it with the
// request's, ends when the client leaves, as the request's does, with the
// same cause; whether it was made before the client left or after, and
// when a handler gave the request a context of its own (then it is a plain
// child of that).
func TestEngineExchangeContextEndsWithTheRequest(t *testing.T) {
	for _, tc := range []struct {
		name        string
		late, wraps bool
	}{{"made before the client left", false, false}, {"made after", true, false}, {"the request's context replaced", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var reqEnded, xEnded time.Time
				var cause error
				var shared bool
				c := pipeEngine(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if tc.wraps {
						r = r.WithContext(context.WithValue(r.Context(), ctxKey{}, "mine"))
					}
					if tc.late {
						<-r.Context().Done()
						reqEnded = time.Now()
					}
					x := new(exchange)
					ctx := x.context(w, r)
					defer x.cancel(nil)
					_, shared = ctx.Value(http.LocalAddrContextKey).(net.Addr)
					if tc.wraps {
						shared = shared && ctx.Value(ctxKey{}) == "mine"
					}
					<-ctx.Done()
					xEnded, cause = time.Now(), context.Cause(ctx)
					if !tc.late {
						reqEnded = xEnded
						if r.Context().Err() == nil {
							reqEnded = time.Time{}
						}
					}
				}), 30*time.Second, 5*time.Minute)
				var got bytes.Buffer
				var closed time.Time
				go readAll(c, &got, &closed)
				io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: localhost\r\n\r\n")
				sent := time.Now()
				c.Close()
				time.Sleep(time.Minute)
				synctest.Wait()
				if xEnded.IsZero() || reqEnded.IsZero() || cause != context.Canceled || xEnded.Sub(sent) > 2*watchDelay {
					t.Fatalf("after the client left: the exchange's context ended %v after (cause %v), the request's at %v; want both ended within two watch delays (%v), cause %v",
						xEnded.Sub(sent), cause, reqEnded, watchDelay, context.Canceled)
				}
				if !shared {
					t.Fatal("the exchange's context lacks the request's values")
				}
			})
		})
	}
}
