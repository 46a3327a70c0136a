package main

import (
	"context"
	"crypto/tls"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcptape/mcptape/cmd/mcptape/internal/ca"
)

func TestCACommands(t *testing.T) {
	data := t.TempDir()
	if code, out, e := mcptape(t, "ca", "path", "--data", data); code != 1 || out != "" || !strings.Contains(e, "mcptape ca init") {
		t.Errorf("ca path before init: %d %q %q, want exit 1 saying to run ca init", code, out, e)
	}
	code, out, e := mcptape(t, "ca", "init", "--data", data)
	if code != 0 {
		t.Fatalf("ca init: %d %s", code, e)
	}
	cert := filepath.Join(data, "ca", ca.CertFile)
	if !strings.Contains(out, cert) || !strings.Contains(out, "NODE_EXTRA_CA_CERTS") {
		t.Errorf("ca init said:\n%s", out)
	}
	for _, f := range []struct {
		path string
		mode os.FileMode
	}{{filepath.Join(data, "ca"), 0o700 | os.ModeDir}, {filepath.Join(data, "ca", ca.KeyFile), 0o600}} {
		if st, err := os.Stat(f.path); err != nil || st.Mode() != f.mode {
			t.Errorf("%s: %v %v, want mode %v", f.path, st.Mode(), err, f.mode)
		}
	}
	if code, out, _ := mcptape(t, "ca", "path", "--data", data); code != 0 || out != cert+"\n" {
		t.Errorf("ca path: %d %q, want %q", code, out, cert)
	}
	before, _ := os.ReadFile(cert)
	if code, _, e := mcptape(t, "ca", "init", "--data", data); code != 1 || !strings.Contains(e, "--force") {
		t.Errorf("ca init again: %d %q, want exit 1 saying --force", code, e)
	}
	if after, _ := os.ReadFile(cert); string(after) != string(before) {
		t.Error("a refused ca init changed the certificate")
	}
	if code, _, e := mcptape(t, "ca", "init", "--force", "--data", data); code != 0 {
		t.Errorf("ca init --force: %d %s", code, e)
	}
	if after, _ := os.ReadFile(cert); string(after) == string(before) {
		t.Error("ca init --force kept the old certificate")
	}
	if code, _, e := mcptape(t, "ca", "path", "--force", "--data", data); code != 2 {
		t.Errorf("ca path --force: %d %s, want a usage error", code, e)
	}
}

// TestCATrustedByClients: what the README tells users to do makes curl,
// Node and Python trust a server whose certificate mcptape's CA signed
// (the MITM leg's position), and nothing else does.
func TestCATrustedByClients(t *testing.T) {
	data := t.TempDir()
	if code, _, e := mcptape(t, "ca", "init", "--data", data); code != 0 {
		t.Fatal(e)
	}
	c, err := ca.Load(caDir(data))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{GetCertificate: c.GetCertificate})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "intercepted") }),
		ErrorLog: log.New(io.Discard, "", 0)}
	go srv.Serve(ln)
	defer srv.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	u := "https://localhost:" + port + "/"
	cert := ca.CertPath(caDir(data))

	for _, tc := range []struct {
		name    string
		cmd     []string
		trusted []string // environment that makes it trust the CA
	}{
		{"curl", []string{"curl", "-sS", "--max-time", "10", "--cacert", cert, u}, nil},
		{"node", []string{"node", "-e", `fetch(process.argv[1]).then(r => r.text()).then(t => console.log(t), e => { console.error(e.cause?.code ?? e); process.exit(1) })`, u},
			[]string{"NODE_EXTRA_CA_CERTS=" + cert}},
		{"python3", []string{"python3", "-c", "import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())", u},
			[]string{"SSL_CERT_FILE=" + cert}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := exec.LookPath(tc.cmd[0]); err != nil {
				t.Skipf("%s is not installed", tc.cmd[0])
			}
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			run := func(cmd []string, env []string) (string, error) {
				x := exec.CommandContext(ctx, cmd[0], cmd[1:]...)
				x.Env = append(os.Environ(), env...)
				out, err := x.CombinedOutput()
				return string(out), err
			}
			out, err := run(tc.cmd, tc.trusted)
			if err != nil || !strings.Contains(out, "intercepted") {
				t.Errorf("trusting mcptape's CA: %v\n%s", err, out)
			}
			// Without it: refused.
			plain := tc.cmd
			if tc.name == "curl" {
				plain = []string{"curl", "-sS", "--max-time", "10", u}
			}
			if out, err := run(plain, nil); err == nil {
				t.Errorf("without mcptape's CA, %s accepted the certificate:\n%s", tc.name, out)
			}
		})
	}
}
