// Package ca is mcptape's own certificate authority, for the forward
// proxy's MITM leg: a client that trusts it lets mcptape read the HTTPS
// traffic it is asked to intercept.
//
// # Files
//
// [Init] writes the CA into a folder of its own (DATA/ca, mode 0700): the
// certificate, [CertFile], which clients are told to trust, and the private
// key, [KeyFile], mode 0600, which never leaves the machine. The key is
// ECDSA P-256; the certificate is valid for ten years and names the host it
// was made on ("mcptape local CA (HOSTNAME)"), so that a user who finds it
// in a trust store knows where it came from. Init refuses to replace an
// existing CA unless told to (Options.Force): every client that trusts the
// old one would have to be told again.
//
// # Use
//
// [Load] reads the CA back, refusing a key file others can read; [CA.Leaf]
// signs a certificate for a host, and [CA.GetCertificate] fits
// tls.Config.GetCertificate.
//
//	c, err := ca.Load(filepath.Join(data, "ca"))
//	if errors.Is(err, ca.ErrNoCA) {
//		// tell the user to run `mcptape ca init`
//	}
//	srv := &http.Server{TLSConfig: &tls.Config{GetCertificate: c.GetCertificate}}
package ca

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
)

// The files of a CA folder.
const (
	CertFile = "mcptape-ca.pem"
	KeyFile  = "mcptape-ca-key.pem"
)

// Validity is how long a CA certificate lasts; LeafValidity how long a
// certificate it signs for a host does (well under the 398 days browsers
// accept; a leaf is signed again when it nears its end).
const (
	Validity     = 10 * 365 * 24 * time.Hour
	LeafValidity = 30 * 24 * time.Hour
)

// Errors callers branch on.
var (
	// ErrNoCA is returned by Load when the folder holds no CA.
	ErrNoCA = errors.New("no mcptape CA")
	// ErrExists is returned by Init when the folder already holds one.
	ErrExists = errors.New("an mcptape CA already exists")
)

// Options configures Init. Nil means the defaults.
type Options struct {
	// Force replaces an existing CA.
	Force bool
	// Hostname names the machine in the certificate's subject. "" means
	// os.Hostname().
	Hostname string
	// Now is the clock. Nil means time.Now.
	Now func() time.Time
}

// CertPath is the certificate's path in a CA folder.
func CertPath(dir string) string { return filepath.Join(dir, CertFile) }

// KeyPath is the private key's path in a CA folder.
func KeyPath(dir string) string { return filepath.Join(dir, KeyFile) }

// Init creates a CA in dir, creating dir (mode 0700) if need be, and
// returns the certificate's path. With an existing CA it fails with
// ErrExists unless opts.Force is set.
func Init(dir string, opts *Options) (string, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Hostname == "" {
		o.Hostname, _ = os.Hostname()
		if o.Hostname == "" {
			o.Hostname = "unknown host"
		}
	}
	if !o.Force {
		for _, p := range []string{CertPath(dir), KeyPath(dir)} {
			if _, err := os.Lstat(p); err == nil {
				return "", fmt.Errorf("%w in %s; clients that trust it would have to be told again if it were replaced: "+
					"keep it, or replace it with --force", ErrExists, dir)
			}
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("creating %s: %w", dir, err)
	}
	// An existing folder may have been made with looser permissions.
	if err := os.Chmod(dir, 0o700); err != nil {
		return "", fmt.Errorf("making %s private: %w", dir, err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", err
	}
	now := o.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject: pkix.Name{
			CommonName:         fmt.Sprintf("mcptape local CA (%s)", o.Hostname),
			Organization:       []string{"mcptape"},
			OrganizationalUnit: []string{"local MITM proxy CA; the key never leaves " + o.Hostname},
		},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(Validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true, // it signs leaves, never another CA
		SubjectKeyId:          keyID(&key.PublicKey),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", err
	}
	if err := writeFile(KeyPath(dir), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		return "", err
	}
	if err := writeFile(CertPath(dir), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return "", err
	}
	return CertPath(dir), nil
}

// writeFile writes b to path through a temporary file beside it, so that a
// reader never sees half a file, with the mode set before any byte is
// written.
func writeFile(path string, b []byte, mode fs.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n.Add(n, big.NewInt(1))
}

func keyID(pub *ecdsa.PublicKey) []byte {
	b, _ := x509.MarshalPKIXPublicKey(pub)
	sum := sha1.Sum(b) // RFC 5280 § 4.2.1.2's method (1)
	return sum[:]
}

// CA is a loaded CA.
type CA struct {
	// Cert is the CA's certificate; Key its private key.
	Cert *x509.Certificate
	Key  crypto.Signer
	tls  tls.Certificate
	now  func() time.Time

	mu     sync.Mutex
	leaves map[string]*tls.Certificate
}

// maxLeaves bounds the leaf cache; it is emptied when full.
const maxLeaves = 1024

// Load reads the CA in dir. It fails with ErrNoCA when there is none, and
// refuses a key file that others than its owner can read.
func Load(dir string) (*CA, error) {
	certPEM, err := os.ReadFile(CertPath(dir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w in %s: create one with `mcptape ca init`", ErrNoCA, dir)
	}
	if err != nil {
		return nil, err
	}
	if runtime.GOOS != "windows" {
		st, err := os.Stat(KeyPath(dir))
		if err == nil && st.Mode().Perm()&0o077 != 0 {
			return nil, fmt.Errorf("the CA's private key %s can be read by others (mode %04o): make it private with `chmod 600 %s`",
				KeyPath(dir), st.Mode().Perm(), KeyPath(dir))
		}
	}
	keyPEM, err := os.ReadFile(KeyPath(dir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w in %s: the certificate is there but its key %s is missing; make a new CA with `mcptape ca init --force`",
			ErrNoCA, dir, KeyFile)
	}
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("the CA in %s does not load (%v); make a new one with `mcptape ca init --force`", dir, err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, err
	}
	if !cert.IsCA {
		return nil, fmt.Errorf("%s is not a CA certificate; make a new CA with `mcptape ca init --force`", CertPath(dir))
	}
	pair.Leaf = cert
	signer, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("the CA's key in %s cannot sign", dir)
	}
	return &CA{Cert: cert, Key: signer, tls: pair, now: time.Now, leaves: map[string]*tls.Certificate{}}, nil
}

// TLSCertificate is the CA as a tls.Certificate (its certificate and key).
func (c *CA) TLSCertificate() tls.Certificate { return c.tls }

// Leaf returns a certificate for host (a name or an IP address, a port
// allowed and ignored) signed by the CA, with the CA's certificate as its
// chain. Leaves are kept and signed again when their end nears.
func (c *CA) Leaf(host string) (*tls.Certificate, error) {
	host = normalize(host)
	if host == "" {
		return nil, errors.New("ca: no host to sign a certificate for")
	}
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if l := c.leaves[host]; l != nil && now.Before(l.Leaf.NotAfter.Add(-LeafValidity/10)) {
		return l, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: host, Organization: []string{"mcptape"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              minTime(now.Add(LeafValidity), c.Cert.NotAfter),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		AuthorityKeyId:        c.Cert.SubjectKeyId,
	}
	if ip := net.ParseIP(host); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.Cert, &key.PublicKey, c.Key)
	if err != nil {
		return nil, fmt.Errorf("ca: signing a certificate for %s: %w", host, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	l := &tls.Certificate{Certificate: [][]byte{der, c.Cert.Raw}, PrivateKey: key, Leaf: leaf}
	if len(c.leaves) >= maxLeaves {
		clear(c.leaves)
	}
	c.leaves[host] = l
	return l, nil
}

// GetCertificate signs (or finds) a leaf for the server name a TLS client
// asked for, for tls.Config.GetCertificate; a client that sent no name
// gets one for the address it connected to.
func (c *CA) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	host := hello.ServerName
	if host == "" && hello.Conn != nil {
		host = hello.Conn.LocalAddr().String()
	}
	return c.Leaf(host)
}

// normalize is host without a port or brackets, lower case.
func normalize(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
