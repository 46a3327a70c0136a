package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mcptape/mcptape/capture/remotestore"
	"github.com/mcptape/mcptape/cmd/mcptape/internal/ca"
	"github.com/mcptape/mcptape/fixtures"
)

// Command returns a command that runs mcptape with args: the bench's
// servers and proxies are mcptape processes. By default it re-executes
// this program (the mcptape binary); a test, whose binary is not mcptape,
// replaces it.
var Command = func(args ...string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this program to start the bench's servers: %w", err)
	}
	return exec.Command(exe, args...), nil
}

// How long a child may take to say where it listens, and to stop.
const (
	childStartTimeout = 30 * time.Second
	childStopGrace    = 10 * time.Second
)

// benchEnv is the bench's processes and their targets.
type benchEnv struct {
	cfg      *Config
	dir      string
	progress func(format string, a ...any)

	fixtureBase  string
	children     []*child
	targets      []*target
	nginxVersion string

	recorder    *remotestore.Client
	recorderDir string

	nextID atomic.Int64
}

// target is one way to reach the fixture server.
type target struct {
	name string
	base string // scheme://host:port, no path
	skip string // why it does not run; "" when it does
	proc *child // the proxy's process; nil for direct
	// group is set for nginx: its workers are children of proc.
	group bool
	hc    *http.Client
	// peakKB is the highest VmHWM seen over the run, in KiB.
	peakKB int64
}

// pids are the processes whose CPU time and memory count for t.
func (t *target) pids() []int {
	if t.proc == nil || t.skip != "" {
		return nil
	}
	pids := []int{t.proc.pid()}
	if t.group {
		pids = append(pids, procChildren(t.proc.pid())...)
	}
	return pids
}

func (t *target) live() bool { return t.skip == "" }

// child is a process the bench started, in its own process group.
type child struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	waitErr error
	// stopping is set when the bench itself stops the child.
	stopping atomic.Bool
}

func (c *child) pid() int { return c.cmd.Process.Pid }

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// stop ends the child's process group: SIGTERM, then SIGKILL after the
// grace period, and waits for the child.
func (c *child) stop(grace time.Duration) {
	c.stopping.Store(true)
	if c.exited() {
		return
	}
	_ = killGroup(c.pid(), syscall.SIGTERM)
	select {
	case <-c.done:
		return
	case <-time.After(grace):
	}
	_ = killGroup(c.pid(), syscall.SIGKILL)
	<-c.done
}

// logTail is the end of the child's log, for error messages.
func (c *child) logTail() string {
	b, err := os.ReadFile(c.logPath)
	if err != nil || len(b) == 0 {
		return "(its log " + c.logPath + " is empty)"
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return c.logPath + ":\n" + strings.TrimRight(string(b), "\n")
}

// spawn starts cmd as a child with its stdout going to the returned pipe
// reader and its stderr to a log file.
func (e *benchEnv) spawn(name string, cmd *exec.Cmd) (*child, *os.File, error) {
	logPath := filepath.Join(e.dir, name+".log")
	// O_APPEND: the child's stderr and our copy of its stdout share the file.
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, err
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		logf.Close()
		return nil, nil, err
	}
	// os.Pipe, not StdoutPipe: Wait must not close our end while we read.
	cmd.Stdout, cmd.Stderr = pw, logf
	cmd.SysProcAttr = childSysProcAttr()
	err = cmd.Start()
	pw.Close()
	logf.Close()
	if err != nil {
		pr.Close()
		return nil, nil, fmt.Errorf("starting %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	e.children = append(e.children, c)
	go func() {
		c.waitErr = cmd.Wait()
		close(c.done)
	}()
	return c, pr, nil
}

var urlRE = regexp.MustCompile(`https?://[^\s/,]+`)

// startListener starts this program with args and returns the base URL it
// prints on the first stdout line that contains marker. The rest of its
// stdout goes to its log.
func (e *benchEnv) startListener(ctx context.Context, name, marker string, args ...string) (*child, string, error) {
	cmd, err := Command(args...)
	if err != nil {
		return nil, "", err
	}
	return e.startCmd(ctx, name, marker, cmd)
}

// startCmd is startListener with the command given: another program, or
// another mcptape binary (Config.Versus).
func (e *benchEnv) startCmd(ctx context.Context, name, marker string, cmd *exec.Cmd) (*child, string, error) {
	args := cmd.Args[1:]
	c, out, err := e.spawn(name, cmd)
	if err != nil {
		return nil, "", err
	}
	urlc := make(chan string, 1)
	go func() {
		defer out.Close()
		logf, _ := os.OpenFile(c.logPath, os.O_WRONLY|os.O_APPEND, 0)
		if logf != nil {
			defer logf.Close()
		}
		sc := bufio.NewScanner(out)
		found := false
		for sc.Scan() {
			line := sc.Text()
			if logf != nil {
				fmt.Fprintln(logf, line)
			}
			if found {
				continue
			}
			if _, after, ok := strings.Cut(line, marker); ok {
				if u := urlRE.FindString(after); u != "" {
					found = true
					urlc <- u
				}
			}
		}
	}()
	timer := time.NewTimer(childStartTimeout)
	defer timer.Stop()
	select {
	case u := <-urlc:
		return c, u, nil
	case <-c.done:
		return nil, "", fmt.Errorf("%s (`%s`) exited before it was ready: %v\n%s", name, strings.Join(args, " "), c.waitErr, c.logTail())
	case <-timer.C:
		c.stop(time.Second)
		return nil, "", fmt.Errorf("%s (`%s`) did not print its address within %s\n%s", name, strings.Join(args, " "), childStartTimeout, c.logTail())
	case <-ctx.Done():
		return nil, "", ctx.Err()
	}
}

// checkChildren fails when a child has exited that the bench did not stop:
// the figures after that would measure nothing.
func (e *benchEnv) checkChildren() error {
	for _, c := range e.children {
		if !c.exited() || c.stopping.Load() {
			continue
		}
		how := fmt.Sprintf("with %v", c.waitErr)
		if c.waitErr == nil {
			how = "cleanly, as on SIGTERM or SIGINT (did a pkill or killall match it?)"
		}
		return fmt.Errorf("%s (pid %d) exited during the run %s, so the bench stops; %s", c.name, c.pid(), how, c.logTail())
	}
	return nil
}

// recordArgs is the command line of a `mcptape record` target in front of
// the fixture server at base, recording into data; recordMarker begins
// the line on which it says where it listens.
func recordArgs(base, data string) []string {
	return []string{"record", "--upstream", base, "--listen", "127.0.0.1:0", "--data", data, "--log-level", "warn"}
}

const recordMarker = "point your MCP client at "

// start launches the fixture server and every target's proxy, and checks
// each target with one call.
func (e *benchEnv) start(ctx context.Context) error {
	_, base, err := e.startListener(ctx, "fixture", "mcptape fixture server:", "fixture", "server", "--listen", "127.0.0.1:0")
	if err != nil {
		return err
	}
	e.fixtureBase = base
	e.progress("fixture server at %s", base)
	for _, name := range e.cfg.Targets {
		t := &target{name: name}
		switch name {
		case tgDirect:
			t.base = base
		case tgPlain:
			t.proc, t.base, err = e.startListener(ctx, "plain", "listening on ", "bench", "plain-proxy", "--upstream", base, "--listen", "127.0.0.1:0")
		case tgNginx:
			err = e.startNginx(ctx, t)
		case tgMcptape:
			e.recorderDir = filepath.Join(e.dir, "mcptape-data")
			t.proc, t.base, err = e.startListener(ctx, "mcptape", recordMarker, recordArgs(base, e.recorderDir)...)
			if err == nil {
				e.recorder, _, err = remotestore.Discover(ctx, e.recorderDir)
				if err != nil {
					err = fmt.Errorf("asking the mcptape recorder for its status: %w", err)
				}
			}
		case tgVersus:
			// Its dashboard beside mcptape's, which has the default address.
			args := append(recordArgs(base, filepath.Join(e.dir, "versus-data")), "--dashboard", "127.0.0.1:0")
			t.proc, t.base, err = e.startCmd(ctx, tgVersus, recordMarker, exec.Command(e.cfg.Versus, args...))
		case tgForward:
			var px string
			t.base = base
			t.proc, px, err = e.startListener(ctx, "mcptape-forward", "forward proxy at ",
				"record", "--forward", "--listen", "127.0.0.1:0", "--data", filepath.Join(e.dir, "forward-data"), "--log-level", "warn", "--dashboard", "off")
			if err == nil {
				t.hc, err = proxiedClient(px, nil)
			}
		case tgMITM:
			err = e.startMITM(ctx, t)
		}
		if err != nil {
			return err
		}
		if t.hc == nil {
			t.hc = benchHTTPClient()
		}
		e.targets = append(e.targets, t)
		if !t.live() {
			e.progress("%s: skipped: %s", name, t.skip)
			continue
		}
		if err := e.probe(ctx, t); err != nil {
			if name == tgNginx {
				t.skip = fmt.Sprintf("nginx started but a call through it failed (%v); see %s", err, t.proc.logPath)
				e.progress("%s: skipped: %s", name, t.skip)
				t.proc.stop(childStopGrace)
				continue
			}
			msg := fmt.Sprintf("a call through %s (%s) failed: %v", name, t.base, err)
			if t.proc != nil {
				msg += "\n" + t.proc.logTail()
			}
			return errors.New(msg)
		}
		e.progress("%s at %s", name, t.base)
	}
	if slices.Contains(e.cfg.Scenarios, scReplay) {
		t, err := e.startReplay(ctx)
		if err != nil {
			return err
		}
		e.targets = append(e.targets, t)
		if err := e.probe(ctx, t); err != nil {
			return fmt.Errorf("a call to the replay server (%s) failed: %v\n%s", t.base, err, t.proc.logTail())
		}
		e.progress("replay at %s", t.base)
	}
	return nil
}

// probe makes one echo call through t.
func (e *benchEnv) probe(ctx context.Context, t *target) error {
	w := e.newWorker(t)
	call := (*worker).callEcho
	if t.name == tgReplay {
		call = (*worker).callReplayEcho // the replay server knows only the tape's calls
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := call(w, ctx)
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop ends every child, proxies before the fixture server.
func (e *benchEnv) stop() {
	for _, t := range e.targets {
		if t.hc != nil {
			t.hc.CloseIdleConnections()
		}
	}
	if e.recorder != nil {
		_ = e.recorder.Close()
	}
	for i := len(e.children) - 1; i >= 0; i-- {
		e.children[i].stop(childStopGrace)
	}
}

// proxiedClient is benchHTTPClient using the proxy at proxyURL, trusting
// roots for https (nil: the system's).
func proxiedClient(proxyURL string, roots *x509.CertPool) (*http.Client, error) {
	u, err := url.Parse(proxyURL)
	if err != nil {
		return nil, err
	}
	hc := benchHTTPClient()
	tr := hc.Transport.(*http.Transport)
	tr.Proxy = http.ProxyURL(u) // explicit: Go never proxies loopback from the environment
	tr.TLSClientConfig = &tls.Config{RootCAs: roots}
	return hc, nil
}

// startMITM starts the fixture server over TLS (its certificate from a CA
// of its own, which the recorder is told to trust) and a recorder that
// intercepts the tunnels to it with mcptape's CA, which the load
// generator trusts.
func (e *benchEnv) startMITM(ctx context.Context, t *target) error {
	dir := filepath.Join(e.dir, "mitm")
	certFile, keyFile, upCA, err := writeServerCert(filepath.Join(dir, "upstream"), "127.0.0.1")
	if err != nil {
		return fmt.Errorf("a certificate for the TLS fixture server: %w", err)
	}
	_, tlsBase, err := e.startListener(ctx, "fixture-tls", "mcptape fixture server:",
		"fixture", "server", "--listen", "127.0.0.1:0", "--tls-cert", certFile, "--tls-key", keyFile)
	if err != nil {
		return err
	}
	data := filepath.Join(dir, "data")
	if _, err := ca.Init(filepath.Join(data, "ca"), nil); err != nil {
		return fmt.Errorf("mcptape's CA for the MITM target: %w", err)
	}
	var px string
	t.proc, px, err = e.startListener(ctx, "mcptape-mitm", "forward proxy at ",
		"record", "--forward", "--mitm", "127.0.0.1", "--upstream-ca", upCA, "--listen", "127.0.0.1:0", "--data", data, "--log-level", "warn", "--dashboard", "off")
	if err != nil {
		return err
	}
	pem, err := os.ReadFile(ca.CertPath(filepath.Join(data, "ca")))
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	t.base = tlsBase
	t.hc, err = proxiedClient(px, pool)
	return err
}

// writeServerCert makes a CA in dir and a certificate for host signed by
// it, and writes the certificate (with its chain), its key and the CA's
// certificate as PEM files.
func writeServerCert(dir, host string) (certFile, keyFile, caFile string, err error) {
	if _, err = ca.Init(filepath.Join(dir, "ca"), nil); err != nil {
		return
	}
	auth, err := ca.Load(filepath.Join(dir, "ca"))
	if err != nil {
		return
	}
	leaf, err := auth.Leaf(host)
	if err != nil {
		return
	}
	var certPEM []byte
	for _, der := range leaf.Certificate {
		certPEM = append(certPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	key, err := x509.MarshalPKCS8PrivateKey(leaf.PrivateKey)
	if err != nil {
		return
	}
	certFile, keyFile = filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem")
	if err = os.WriteFile(certFile, certPEM, 0o600); err != nil {
		return
	}
	if err = os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}), 0o600); err != nil {
		return
	}
	return certFile, keyFile, ca.CertPath(filepath.Join(dir, "ca")), nil
}

func benchHTTPClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:               nil,
			MaxIdleConns:        1024,
			MaxIdleConnsPerHost: 256,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
		},
		// A call that takes longer is broken: the largest default result
		// takes about a second here.
		Timeout: time.Minute,
	}
}

// findNginx is the nginx binary to run, or "".
func findNginx(flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	if p, err := exec.LookPath("nginx"); err == nil {
		return p
	}
	for _, p := range []string{"/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/nginx/sbin/nginx"} {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p
		}
	}
	return ""
}

// nginxConf is a non-daemon nginx that keeps all its files in dir and
// proxies to upstream without buffering, over kept-alive HTTP/1.1.
func nginxConf(dir string, port int, upstream string, root bool) string {
	up, _ := url.Parse(upstream)
	user := ""
	if root {
		// Workers would otherwise run as nobody, who cannot enter dir.
		user = "user root;\n"
	}
	p := func(name string) string { return filepath.Join(dir, name) }
	return fmt.Sprintf(`# written by mcptape bench
%sdaemon off;
master_process on;
worker_processes auto;
pid %s;
error_log %s warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path %s;
    proxy_temp_path %s;
    fastcgi_temp_path %s;
    uwsgi_temp_path %s;
    scgi_temp_path %s;
    keepalive_requests 1000000;
    keepalive_timeout 300s;
    client_max_body_size 64m;
    upstream fixture {
        server %s;
        keepalive 256;
        keepalive_requests 1000000;
    }
    server {
        listen 127.0.0.1:%d;
        location / {
            proxy_pass http://fixture;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            # The upstream's own Host, as httputil's SetURL sends it (go-sdk
            # refuses non-loopback Hosts).
            proxy_set_header Host %s;
            proxy_buffering off;
            proxy_read_timeout 300s;
        }
    }
}
`, user, p("nginx.pid"), p("error.log"), p("client_body"), p("proxy"), p("fastcgi"), p("uwsgi"), p("scgi"),
		up.Host, port, up.Host)
}

// startNginx starts nginx in front of the fixture server, or marks t
// skipped when there is no nginx.
func (e *benchEnv) startNginx(ctx context.Context, t *target) error {
	const install = "install it with `apt-get install nginx` (or pass --nginx PATH) to compare with nginx"
	bin := findNginx(e.cfg.Nginx)
	if bin == "" {
		t.skip = "no nginx binary found; " + install
		return nil
	}
	if _, err := os.Stat(bin); err != nil {
		t.skip = fmt.Sprintf("--nginx %s: %v; %s", bin, err, install)
		return nil
	}
	if out, err := exec.Command(bin, "-v").CombinedOutput(); err == nil {
		e.nginxVersion = strings.TrimPrefix(strings.TrimSpace(string(out)), "nginx version: ")
	} else {
		t.skip = fmt.Sprintf("%s -v failed: %v", bin, err)
		return nil
	}
	dir := filepath.Join(e.dir, "nginx")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := freePort()
		if err != nil {
			return err
		}
		conf := filepath.Join(dir, "nginx.conf")
		if err := os.WriteFile(conf, []byte(nginxConf(dir, port, e.fixtureBase, os.Geteuid() == 0)), 0o600); err != nil {
			return err
		}
		c, out, err := e.spawn("nginx", exec.Command(bin, "-p", dir+"/", "-e", filepath.Join(dir, "error.log"), "-c", conf))
		if err != nil {
			t.skip = err.Error()
			return nil
		}
		go func() { _, _ = io.Copy(io.Discard, out); out.Close() }()
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		if lastErr = waitDial(ctx, c, addr); lastErr == nil {
			t.proc, t.base, t.group = c, "http://"+addr, true
			return nil
		}
		c.stop(time.Second)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	errLog, _ := os.ReadFile(filepath.Join(dir, "error.log"))
	t.skip = fmt.Sprintf("nginx did not start (%v): %s", lastErr, strings.TrimSpace(string(lastBytes(errLog, 500))))
	return nil
}

func lastBytes(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// waitDial waits until addr accepts connections while c runs, and until
// nginx's workers exist.
func waitDial(ctx context.Context, c *child, addr string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		if c.exited() {
			return fmt.Errorf("it exited: %v", c.waitErr)
		}
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			if len(procChildren(c.pid())) > 0 {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nothing listens on %s after 10s", addr)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// PlainProxy is the hidden `mcptape bench plain-proxy`: a stock
// httputil.ReverseProxy to upstream, as a Go programmer would write one,
// recording nothing, listening on listen until ctx ends. It deliberately
// forwards the inbound body as it is, so it has the request-body race
// that cuts streamed responses now and then.
func PlainProxy(ctx context.Context, up *url.URL, listen string, stdout, stderr io.Writer) error {
	errLog := log.New(stderr, "plain-proxy: ", log.LstdFlags|log.Lmicroseconds)
	rp := &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(up) },
		FlushInterval: -1,
		Transport: &http.Transport{
			Proxy:               nil,
			MaxIdleConns:        1024,
			MaxIdleConnsPerHost: 256,
			IdleConnTimeout:     90 * time.Second,
		},
		ErrorLog: errLog,
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: rp, ReadHeaderTimeout: 30 * time.Second, ErrorLog: errLog}
	fmt.Fprintf(stdout, "mcptape bench plain-proxy: listening on http://%s\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
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

// The fixture server's endpoints, as the load generator uses them.
const (
	pathStateless = fixtures.PathStateless
	pathStateful  = fixtures.PathStateful
)

// excerpt is the start of b, for error messages.
func excerpt(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}
