package proxy_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/proxy"
)

// connectOn sends a CONNECT for target on conn and reads the answer (the
// tunnel, when it is 200, continues on br; another answer's body is in
// res.Body, read).
func connectOn(t *testing.T, conn net.Conn, br *bufio.Reader, target string) *http.Response {
	t.Helper()
	conn.SetDeadline(time.Now().Add(15 * time.Second))
	if _, err := io.WriteString(conn, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n"); err != nil {
		t.Fatalf("CONNECT %s: %v", target, err)
	}
	res, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatalf("CONNECT %s: reading the answer: %v", target, err)
	}
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		res.Body = io.NopCloser(strings.NewReader(string(b)))
	}
	return res
}

// A CONNECT to the proxy's own port, in every spelling that reaches it,
// is refused with 508: before, 0.0.0.0 and [::] (and the other spellings
// a resolver takes) got 200, a tunnel into the proxy itself, and one
// client socket nested CONNECT in CONNECT without end, each level costing
// the proxy connections and pipes it kept after the client left. The
// nesting is tried for real on one raw socket: the first CONNECT must be
// refused, and the process must hold no more files afterwards than
// before.
func TestForwardRefusesTunnelsIntoItself(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("counts open files in /proc/self/fd")
	}
	p, err := proxy.New(&proxy.Options{Forward: &proxy.ForwardOptions{}})
	if err != nil {
		t.Fatal(err)
	}
	px := serveProxy(t, p)
	defer px.Close()
	// Another listener of the same process (a dashboard, say).
	other, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	go func() {
		for {
			c, err := other.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	p.AddOwnAddr(other.Addr().String())
	addr := strings.TrimPrefix(px.URL, "http://")
	_, port, _ := net.SplitHostPort(addr)
	_, otherPort, _ := net.SplitHostPort(other.Addr().String())

	before := openFDs()
	spellings := []string{
		"0.0.0.0", "[::]", "0", "127.0.0.1", "127.1", "2130706433", "0x7f000001", "0x7f.0.0.1", "0177.0.0.1",
		"017700000001", "[::ffff:127.0.0.1]", "[::ffff:0.0.0.0]", "[::1]", "localhost", "LOCALHOST.", "app.localhost",
		"127.0.0.1.", "[0:0:0:0:0:ffff:7f00:1]",
	}
	// The machine's own name, when it resolves to one of its addresses.
	if name, err := os.Hostname(); err == nil {
		if addrs, err := net.LookupHost(name); err == nil && len(addrs) > 0 {
			spellings = append(spellings, name)
		}
	}
	for _, host := range spellings {
		for _, p := range []string{port, otherPort} {
			target := net.JoinHostPort(strings.Trim(host, "[]"), p)
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(conn)
			// Nest as a client would, for as long as the proxy lets it.
			depth := 0
			for ; depth < 20; depth++ {
				if res := connectOn(t, conn, br, target); res.StatusCode != http.StatusOK {
					if res.StatusCode != http.StatusLoopDetected {
						t.Errorf("CONNECT %s: %d, want 508", target, res.StatusCode)
					}
					break
				}
			}
			if depth > 0 {
				t.Errorf("CONNECT %s: %d tunnels into the proxy itself nested on one socket, want none", target, depth)
			}
			conn.Close()
		}
	}
	// An interface address of this machine, with the proxy's port.
	if ifs, _ := net.InterfaceAddrs(); len(ifs) > 0 {
		for _, a := range ifs {
			ipn, ok := a.(*net.IPNet)
			if !ok || ipn.IP.IsLoopback() || ipn.IP.IsLinkLocalUnicast() {
				continue
			}
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			target := net.JoinHostPort(ipn.IP.String(), port)
			if res := connectOn(t, conn, bufio.NewReader(conn), target); res.StatusCode != http.StatusLoopDetected {
				t.Errorf("CONNECT %s (an address of this machine): %d, want 508", target, res.StatusCode)
			}
			conn.Close()
		}
	}
	// A forward request in absolute form to the other listener.
	res, err := (&http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: addr})}}).Get("http://0.0.0.0:" + otherPort + "/")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusLoopDetected {
		t.Errorf("a forward request to another listener of the proxy's process: %d, want 508", res.StatusCode)
	}
	waitFDs(t, before, "after refusing tunnels into itself")
}

// waitFDs waits (a few seconds at most) until the process holds no more
// open files than want (and a few, for the runtime's own), and fails
// saying how many it holds.
func waitFDs(t *testing.T, want int, when string) {
	t.Helper()
	fixtures.Eventually(t, 5*time.Second, func() error {
		n := openFDs()
		if n <= want+4 {
			return nil
		}
		ents, _ := os.ReadDir("/proc/self/fd")
		kinds := map[string]int{}
		for _, e := range ents {
			l, _ := os.Readlink("/proc/self/fd/" + e.Name())
			kinds[strings.SplitN(l, ":", 2)[0]]++
		}
		return fmt.Errorf("%s the process holds %d open files, %d before (by kind: %v)", when, n, want, kinds)
	})
}

// A tunnel gives back everything it held when it ends: 60 tunnels that
// carried bytes both ways, once closed by their clients, leave the
// process with the files it had before (before, each left pipes that
// only a garbage collection, minutes later, closed).
func TestForwardTunnelsReleaseFiles(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("counts open files in /proc/self/fd")
	}
	echo := tcpEcho(t)
	p, err := proxy.New(&proxy.Options{Forward: &proxy.ForwardOptions{}})
	if err != nil {
		t.Fatal(err)
	}
	px := serveProxy(t, p)
	defer px.Close()
	addr := strings.TrimPrefix(px.URL, "http://")
	before := openFDs()
	var conns []net.Conn
	payload := strings.Repeat("x", 200<<10)
	for i := range 60 {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, conn)
		br := bufio.NewReader(conn)
		if res := connectOn(t, conn, br, echo); res.StatusCode != http.StatusOK {
			t.Fatalf("tunnel %d: CONNECT answered %d", i, res.StatusCode)
		}
		go io.WriteString(conn, payload)
		got := make([]byte, len(payload))
		if _, err := io.ReadFull(br, got); err != nil || string(got) != payload {
			t.Fatalf("tunnel %d: the echo came back wrong (%v)", i, err)
		}
	}
	for _, c := range conns {
		c.Close()
	}
	waitFDs(t, before, "60 tunnels after their clients left:")
}

// tcpEcho is a TCP server that sends back what it reads, until its
// client half-closes; it returns its address.
func tcpEcho(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				// Through a buffer: io.Copy between two TCP connections
				// would borrow the runtime's splice pipes, which stay
				// open after it.
				io.CopyBuffer(struct{ io.Writer }{c}, struct{ io.Reader }{c}, make([]byte, 32<<10))
			}()
		}
	}()
	return ln.Addr().String()
}

// One client holds at most MaxTunnelsPerClient tunnels at a time: the
// next CONNECT gets 429 saying so, and a tunnel closed gives its place
// back. A CONNECT sent inside a tunnel (to be served as plain HTTP) is
// refused: tunnels do not nest. Bytes a client sends right behind its
// CONNECT, before the answer, reach the host.
func TestForwardTunnelBounds(t *testing.T) {
	echo := tcpEcho(t)
	p, err := proxy.New(&proxy.Options{Forward: &proxy.ForwardOptions{MaxTunnelsPerClient: 3}})
	if err != nil {
		t.Fatal(err)
	}
	px := serveProxy(t, p)
	defer px.Close()
	addr := strings.TrimPrefix(px.URL, "http://")
	var open []net.Conn
	for i := range 3 {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if res := connectOn(t, conn, bufio.NewReader(conn), echo); res.StatusCode != http.StatusOK {
			t.Fatalf("tunnel %d of 3: %d", i, res.StatusCode)
		}
		open = append(open, conn)
	}
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	res := connectOn(t, conn, bufio.NewReader(conn), echo)
	body, _ := io.ReadAll(res.Body)
	conn.Close()
	if res.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(body), "--max-tunnels-per-client") {
		t.Errorf("a fourth tunnel with a bound of 3: %d %s, want 429 naming the bound", res.StatusCode, body)
	}
	open[0].Close()
	// The proxy gives the place back as it notices the close.
	fixtures.Eventually(t, 5*time.Second, func() error {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		// Pipelined: the bytes after the CONNECT's head come in the same
		// write, before the 200 (goproxy's hijack used to drop them).
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(conn, "CONNECT "+echo+" HTTP/1.1\r\nHost: "+echo+"\r\n\r\nping\n")
		br := bufio.NewReader(conn)
		res, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != http.StatusOK {
			return fmt.Errorf("a tunnel closed did not give its place back: still %d", res.StatusCode)
		}
		if line, err := br.ReadString('\n'); err != nil || line != "ping\n" {
			t.Errorf("the bytes sent right behind the CONNECT: echoed %q (%v), want \"ping\\n\"", line, err)
		}
		return nil
	})

	// CONNECT inside a plain-HTTP tunnel.
	for _, c := range open[1:] {
		c.Close()
	}
	up := httpServer(t)
	var br *bufio.Reader
	fixtures.Eventually(t, 5*time.Second, func() error {
		if conn, err = net.Dial("tcp", addr); err != nil {
			t.Fatal(err)
		}
		br = bufio.NewReader(conn)
		if res := connectOn(t, conn, br, up); res.StatusCode != http.StatusOK {
			conn.Close()
			return fmt.Errorf("CONNECT %s: %d", up, res.StatusCode)
		}
		return nil
	})
	defer conn.Close()
	io.WriteString(conn, "GET / HTTP/1.1\r\nHost: "+up+"\r\n\r\n")
	if res, err := http.ReadResponse(br, nil); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("a plain request in the tunnel: %v %v", res, err)
	} else {
		io.Copy(io.Discard, res.Body)
	}
	if res := connectOn(t, conn, br, echo); res.StatusCode != http.StatusBadRequest {
		t.Errorf("a CONNECT inside a tunnel: %d, want 400", res.StatusCode)
	}
}

// httpServer is a plain HTTP server answering 200 "ok"; it returns its
// address.
func httpServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}
