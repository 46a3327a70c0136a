package ca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestInit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	at := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	path, err := Init(dir, &Options{Hostname: "devbox", Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	if path != filepath.Join(dir, CertFile) {
		t.Errorf("path %s", path)
	}
	for _, f := range []struct {
		path string
		mode os.FileMode
	}{{dir, 0o700 | os.ModeDir}, {KeyPath(dir), 0o600}, {CertPath(dir), 0o644}} {
		st, err := os.Stat(f.path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode() != f.mode {
			t.Errorf("%s: mode %v, want %v", f.path, st.Mode(), f.mode)
		}
	}
	c, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	cert := c.Cert
	if cert.Subject.CommonName != "mcptape local CA (devbox)" || !cert.IsCA || !cert.MaxPathLenZero ||
		cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Errorf("certificate: %v, CA %v, max path 0 %v, usage %v", cert.Subject, cert.IsCA, cert.MaxPathLenZero, cert.KeyUsage)
	}
	if pub, ok := cert.PublicKey.(*ecdsa.PublicKey); !ok || pub.Curve != elliptic.P256() {
		t.Errorf("key %T, want ECDSA P-256", cert.PublicKey)
	}
	if years := cert.NotAfter.Sub(at).Hours() / 24 / 365; years < 9.99 || years > 10.01 || cert.NotBefore.After(at) {
		t.Errorf("valid %v … %v: want ten years from now", cert.NotBefore, cert.NotAfter)
	}
	if err := cert.CheckSignatureFrom(cert); err != nil {
		t.Errorf("not self-signed: %v", err)
	}

	// Not replaced unless forced.
	before, _ := os.ReadFile(CertPath(dir))
	if _, err := Init(dir, nil); !errors.Is(err, ErrExists) || !strings.Contains(err.Error(), "--force") {
		t.Errorf("second Init: %v, want ErrExists saying --force", err)
	}
	if after, _ := os.ReadFile(CertPath(dir)); string(after) != string(before) {
		t.Error("a refused Init changed the certificate")
	}
	if _, err := Init(dir, &Options{Force: true}); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(CertPath(dir)); string(after) == string(before) {
		t.Error("Init with Force kept the old certificate")
	}
	if matches, _ := filepath.Glob(filepath.Join(dir, ".*")); len(matches) > 0 {
		t.Errorf("temporary files left: %v", matches)
	}
}

func TestLoadRefuses(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(dir); !errors.Is(err, ErrNoCA) || !strings.Contains(err.Error(), "mcptape ca init") {
		t.Errorf("no CA: %v", err)
	}
	if _, err := Init(dir, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(KeyPath(dir), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a key others can read: %v, want a refusal saying chmod 600", err)
	}
	os.Chmod(KeyPath(dir), 0o600)
	os.Remove(KeyPath(dir))
	if _, err := Load(dir); !errors.Is(err, ErrNoCA) || !strings.Contains(err.Error(), "--force") {
		t.Errorf("a certificate without its key: %v", err)
	}
}

// TestLeafTrusted: a real TLS server with leaves signed by the CA is
// trusted by a Go client that trusts only that CA, for a name and for an
// IP address; a client with the system roots, or trusting another mcptape
// CA, refuses it; a leaf for one host does not pass for another.
func TestLeafTrusted(t *testing.T) {
	dir := t.TempDir()
	if _, err := Init(dir, nil); err != nil {
		t.Fatal(err)
	}
	c, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Not httptest's StartTLS: it adds a certificate of its own, which
	// serves clients that send no server name (those dialing an IP).
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{GetCertificate: c.GetCertificate})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello over "+r.TLS.ServerName)
	}), ErrorLog: log.New(io.Discard, "", 0)}
	go srv.Serve(ln)
	defer srv.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())

	pool := x509.NewCertPool()
	pool.AddCert(c.Cert)
	client := func(roots *x509.CertPool) *http.Client {
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil, TLSClientConfig: &tls.Config{RootCAs: roots}}}
	}
	for _, host := range []string{"localhost", "127.0.0.1"} {
		res, err := client(pool).Get("https://" + net.JoinHostPort(host, port) + "/")
		if err != nil {
			t.Fatalf("%s, trusting the CA: %v", host, err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || !strings.HasPrefix(string(b), "hello over") {
			t.Errorf("%s: %d %s", host, res.StatusCode, b)
		}
	}
	if _, err := client(nil).Get("https://127.0.0.1:" + port + "/"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("with the system roots: %v, want a certificate error", err)
	}
	other := t.TempDir()
	if _, err := Init(other, nil); err != nil {
		t.Fatal(err)
	}
	oc, _ := Load(other)
	otherPool := x509.NewCertPool()
	otherPool.AddCert(oc.Cert)
	if _, err := client(otherPool).Get("https://127.0.0.1:" + port + "/"); err == nil {
		t.Error("a client trusting another mcptape CA accepted this one's leaf")
	}

	// A leaf is for its host only.
	leaf, err := c.Leaf("api.example.com:443")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "api.example.com"}); err != nil {
		t.Errorf("the leaf for api.example.com: %v", err)
	}
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "evil.example.com"}); err == nil {
		t.Error("the leaf for api.example.com passes for evil.example.com")
	}
	again, _ := c.Leaf("API.example.com")
	if again != leaf {
		t.Error("the leaf was signed again instead of reused")
	}
	if leaf.Leaf.NotAfter.Sub(leaf.Leaf.NotBefore) > LeafValidity+2*time.Hour {
		t.Errorf("leaf valid %v … %v", leaf.Leaf.NotBefore, leaf.Leaf.NotAfter)
	}
	if tc := c.TLSCertificate(); len(tc.Certificate) != 1 || tc.Leaf != c.Cert {
		t.Errorf("TLSCertificate: %d certificates", len(tc.Certificate))
	}
}
