package proxy_test

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/badgerstore"
	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/proxy"
)

// testCA is a CA made for one test: the pool a client trusts, and leaves
// signed per host for the proxy's interception.
type testCA struct {
	pool *x509.CertPool
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	mu   sync.Mutex
	n    int64
}

func newTestCA(t testing.TB) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{pool: pool, cert: cert, key: key, n: 1}
}

func (c *testCA) leaf(host string) (*tls.Certificate, error) {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.n++
	serial := c.n
	c.mu.Unlock()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if ip := net.ParseIP(host); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		return nil, err
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// forwardRig is a recording forward proxy on a Badger store on disk, in
// front of the fixture server over plain HTTP and over TLS.
type forwardRig struct {
	plain, tls *httptest.Server
	ca         *testCA
	store      capture.Store
	rec        *capture.Recorder
	px         *front
	proxyURL   *url.URL
}

func newForwardRig(t *testing.T, mitm ...string) *forwardRig {
	t.Helper()
	r := &forwardRig{ca: newTestCA(t)}
	r.plain = httptest.NewServer(fixtures.Handler(nil))
	r.tls = httptest.NewTLSServer(fixtures.Handler(nil))
	t.Cleanup(func() {
		r.plain.CloseClientConnections()
		r.tls.CloseClientConnections()
		r.plain.Close()
		r.tls.Close()
	})
	store, err := badgerstore.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	r.store = store
	if r.rec, err = capture.NewRecorder(context.Background(), store, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = r.rec.Close(ctx)
	})
	upPool := x509.NewCertPool()
	upPool.AddCert(r.tls.Certificate())
	p, err := proxy.New(&proxy.Options{Recorder: r.rec, TLSConfig: &tls.Config{RootCAs: upPool},
		Forward: &proxy.ForwardOptions{MITM: mitm, Certificate: r.ca.leaf}})
	if err != nil {
		t.Fatal(err)
	}
	r.px = serveProxy(t, p)
	t.Cleanup(r.px.CloseClientConnections)
	r.proxyURL, _ = url.Parse(r.px.URL)
	return r
}

// client is a Go HTTP client that uses the proxy (set explicitly: Go
// ignores HTTP_PROXY for loopback) and trusts roots.
func (r *forwardRig) client(roots *x509.CertPool) *http.Client {
	return &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(r.proxyURL), TLSClientConfig: &tls.Config{RootCAs: roots}}}
}

func (r *forwardRig) sessions(t *testing.T) []*capture.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.rec.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	var out []*capture.Session
	for s, err := range r.store.Sessions(ctx, capture.SessionQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

func runFixtureClient(t *testing.T, u string, hc *http.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rep, err := fixtures.RunClient(ctx, u, &fixtures.ClientOptions{HTTPClient: hc, ProtocolVersion: "2025-11-25",
		Only: []string{fixtures.ToolEcho}})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range rep.Steps {
		if s.Err != "" {
			t.Errorf("step %s failed through the forward proxy: %s", s.Name, s.Err)
		}
	}
}

// A Go client using mcptape as its HTTP proxy (plain HTTP) and through an
// intercepted tunnel (HTTPS, trusting the proxy's CA): both sessions are
// recorded, each on its leg, with the server it went to.
func TestForwardAndMITMRecord(t *testing.T) {
	r := newForwardRig(t, "127.0.0.1")
	runFixtureClient(t, r.plain.URL+fixtures.PathStateful, r.client(nil))
	runFixtureClient(t, r.tls.URL+fixtures.PathStateful, r.client(r.ca.pool))

	byLeg := map[capture.Leg]*capture.Session{}
	for _, s := range r.sessions(t) {
		if s.Messages > 0 {
			if byLeg[s.Leg] != nil {
				t.Errorf("two MCP sessions on leg %v", s.Leg)
			}
			byLeg[s.Leg] = s
		}
	}
	for leg, up := range map[capture.Leg]string{capture.LegForward: r.plain.URL, capture.LegMITM: r.tls.URL} {
		s := byLeg[leg]
		if s == nil {
			t.Errorf("no MCP session recorded on the %v leg", leg)
			continue
		}
		if s.Upstream != up || s.Path != fixtures.PathStateful || s.Calls < 2 {
			t.Errorf("%v session: upstream %q path %q calls %d; want %q %q and the initialize and echo calls", leg, s.Upstream, s.Path, s.Calls, up, fixtures.PathStateful)
		}
	}
}

// A CONNECT to a host no --mitm glob matches is a plain tunnel: the client
// sees the server's own certificate and nothing is recorded.
func TestForwardTunnelsUnmatchedHosts(t *testing.T) {
	r := newForwardRig(t, "*.example.com")
	upPool := x509.NewCertPool()
	upPool.AddCert(r.tls.Certificate())
	hc := r.client(upPool)
	res, err := hc.Get(r.tls.URL + "/health")
	if err != nil {
		t.Fatalf("through the tunnel, trusting the server's own certificate: %v", err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if got := res.TLS.PeerCertificates[0]; !got.Equal(r.tls.Certificate()) {
		t.Errorf("the client saw a certificate for %v, not the server's own", got.Subject)
	}
	runFixtureClient(t, r.tls.URL+fixtures.PathStateful, hc)
	if ss := r.sessions(t); len(ss) != 0 {
		t.Errorf("%d sessions recorded from an unintercepted tunnel, want none", len(ss))
	}
}

// Inside an intercepted tunnel a request must name the tunnel's host; a
// forward request must not name the proxy itself.
func TestForwardRefusals(t *testing.T) {
	r := newForwardRig(t, "127.0.0.1")
	// A tunnel to the TLS server, then a request naming another host.
	conn, err := net.Dial("tcp", r.proxyURL.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	target := strings.TrimPrefix(r.tls.URL, "https://")
	io.WriteString(conn, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n")
	buf := make([]byte, 64)
	n, _ := conn.Read(buf)
	if !strings.HasPrefix(string(buf[:n]), "HTTP/1.1 200") {
		t.Fatalf("CONNECT answered %q", buf[:n])
	}
	host, _, _ := net.SplitHostPort(target)
	tc := tls.Client(conn, &tls.Config{RootCAs: r.ca.pool, ServerName: host})
	io.WriteString(tc, "GET /mcp HTTP/1.1\r\nHost: other.example:443\r\n\r\n")
	res, err := http.ReadResponse(bufioReader(tc), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusMisdirectedRequest || !strings.Contains(string(body), "tunnel") {
		t.Errorf("a request for another host in a tunnel: %d %s, want 421 saying why", res.StatusCode, body)
	}

	// The proxy itself, in absolute form and as a CONNECT.
	req, _ := http.NewRequest(http.MethodGet, r.px.URL+"/x", nil)
	res, err = r.client(nil).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusLoopDetected {
		t.Errorf("a forward request to the proxy itself: %d, want 508", res.StatusCode)
	}
}

// With no forward leg, a CONNECT is refused with a word on what to do.
func TestConnectWithoutForward(t *testing.T) {
	r := newRig(t, http.NotFoundHandler(), nil)
	conn, err := net.Dial("tcp", strings.TrimPrefix(r.px.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n")
	res, err := http.ReadResponse(bufioReader(conn), &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusMethodNotAllowed || !strings.Contains(string(body), "--forward") {
		t.Errorf("CONNECT to a reverse proxy: %d %s", res.StatusCode, body)
	}
}

func bufioReader(r io.Reader) *bufio.Reader { return bufio.NewReader(r) }

// The forward legs answer with the reverse leg's rules: a body over the
// bound is a 413, an unreachable server a 502 carrying a JSON-RPC error
// with the request's id, plain or inside an intercepted tunnel.
func TestForwardSharesThePolicy(t *testing.T) {
	ca := newTestCA(t)
	// Upstreams that read the request and never answer.
	silent := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	slow, slowTLS := httptest.NewServer(silent), httptest.NewTLSServer(silent)
	defer slow.Close()
	defer slowTLS.Close()
	upstreamRoots := x509.NewCertPool()
	upstreamRoots.AddCert(slowTLS.Certificate())
	p, err := proxy.New(&proxy.Options{MaxRequestBody: 90, UpstreamTimeout: 300 * time.Millisecond, TLSConfig: &tls.Config{RootCAs: upstreamRoots},
		Forward: &proxy.ForwardOptions{MITM: []string{"127.0.0.1"}, Certificate: ca.leaf}})
	if err != nil {
		t.Fatal(err)
	}
	px := serveProxy(t, p)
	defer px.CloseClientConnections()
	pu, _ := url.Parse(px.URL)
	hc := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu), TLSClientConfig: &tls.Config{RootCAs: ca.pool}}}
	// A port nothing listens on.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := ln.Addr().String()
	ln.Close()
	call := `{"jsonrpc":"2.0","id":"req-7","method":"tools/call","params":{"name":"echo"}}`
	for _, c := range []struct {
		name, url, body string
		status          int
		want            string
	}{
		{"too large, plain", "http://" + dead + "/mcp", strings.Repeat("x", 200), http.StatusRequestEntityTooLarge, "--max-request-body"},
		{"unreachable, plain", "http://" + dead + "/mcp", call, http.StatusBadGateway, `"id":"req-7"`},
		{"unreachable, in a tunnel", "https://" + dead + "/mcp", call, http.StatusBadGateway, `"id":"req-7"`},
		{"silent, plain", slow.URL + "/mcp", call, http.StatusGatewayTimeout, "--upstream-timeout"},
		{"silent, in a tunnel", slowTLS.URL + "/mcp", call, http.StatusGatewayTimeout, "--upstream-timeout"},
	} {
		res, err := hc.Post(c.url, "application/json", strings.NewReader(c.body))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != c.status || !strings.Contains(string(b), c.want) || !strings.Contains(string(b), `"code":-32000`) {
			t.Errorf("%s: %d %s (header %v); want %d with a JSON-RPC error holding %s", c.name, res.StatusCode, b, res.Header, c.status, c.want)
		}
	}
}

// A shutdown closes the unrecorded tunnels, which net/http's Shutdown does
// not see (their connections were hijacked): nothing is left open.
func TestForwardShutdownClosesTunnels(t *testing.T) {
	// A TCP server that holds every connection open.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	p, err := proxy.New(&proxy.Options{Forward: &proxy.ForwardOptions{}})
	if err != nil {
		t.Fatal(err)
	}
	px := serveProxy(t, p)
	conn, err := net.Dial("tcp", strings.TrimPrefix(px.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	target := ln.Addr().String()
	io.WriteString(conn, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n")
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", res, err)
	}
	io.WriteString(conn, "bytes through the tunnel")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	if err := px.srv.Shutdown(ctx); err != nil {
		t.Logf("shutdown: %v", err)
	}
	conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, err := br.ReadByte(); err == nil || isTimeout(err) {
		t.Errorf("the tunnel is still open after the shutdown (%v)", err)
	}
	if d := time.Since(start); d > 2500*time.Millisecond {
		t.Errorf("the shutdown took %v", d)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Node's fetch sends http:// URLs through its HTTP proxy as CONNECT
// tunnels too: plain HTTP inside a tunnel is served and recorded on the
// forward leg, to any host (no --mitm needed, nothing to decrypt), and a
// request in it must name the tunnel's host. A protocol whose server
// speaks first still gets its tunnel, as bytes.
func TestForwardPlainHTTPInATunnel(t *testing.T) {
	r := newForwardRig(t) // no --mitm host at all
	target := strings.TrimPrefix(r.plain.URL, "http://")
	tunnelTo := func(hostport string) (net.Conn, *bufio.Reader) {
		t.Helper()
		conn, err := net.Dial("tcp", r.proxyURL.Host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		io.WriteString(conn, "CONNECT "+hostport+" HTTP/1.1\r\nHost: "+hostport+"\r\n\r\n")
		br := bufio.NewReader(conn)
		res, err := http.ReadResponse(br, nil)
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("CONNECT %s: %v %v", hostport, res, err)
		}
		return conn, br
	}

	// A whole MCP session through one tunnel, as Node's fetch does it.
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		conn, br := tunnelTo(target)
		return &bufConn{Conn: conn, r: br}, nil
	}}}
	runFixtureClient(t, r.plain.URL+fixtures.PathStateful, hc)
	var mcp []*capture.Session
	for _, s := range r.sessions(t) {
		if s.Opening != "http" {
			mcp = append(mcp, s)
		}
	}
	if len(mcp) != 1 || mcp[0].Leg != capture.LegForward || mcp[0].Messages < 4 {
		t.Fatalf("sessions recorded from plain HTTP in a tunnel: %+v; want one MCP session on the forward leg", mcp)
	}

	// Another host named inside the tunnel: 421.
	conn, br := tunnelTo(target)
	io.WriteString(conn, "GET /mcp HTTP/1.1\r\nHost: other.example\r\n\r\n")
	res, err := http.ReadResponse(br, nil)
	if err != nil || res.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("a request for another host in a plain tunnel: %v %v, want 421", res, err)
	}

	// A server that speaks first (a banner, then an echo): its tunnel
	// carries the bytes both ways, unrecorded.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.WriteString(c, "BANNER server-first\n")
		line, _ := bufio.NewReader(c).ReadString('\n')
		io.WriteString(c, "echo "+line)
	}()
	conn, br = tunnelTo(ln.Addr().String())
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if banner, err := br.ReadString('\n'); err != nil || banner != "BANNER server-first\n" {
		t.Fatalf("the server-first banner through the tunnel: %q %v", banner, err)
	}
	io.WriteString(conn, "hello\n")
	if echo, err := br.ReadString('\n'); err != nil || echo != "echo hello\n" {
		t.Errorf("the echo through the tunnel: %q %v", echo, err)
	}
}

// bufConn reads through r, which may hold bytes read past a response.
type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufConn) Read(p []byte) (int, error) { return c.r.Read(p) }
