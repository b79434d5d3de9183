package reports

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// selfSigned writes a certificate for 127.0.0.1 named cn and its key, and
// returns the certificate.
func selfSigned(t *testing.T, certFile, keyFile, cn string) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// The endpoint serves TLS with the configured pair, and a renewed pair
// without a restart; a broken renewal leaves the previous one in use.
func TestTLSConfigReloads(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if _, err := TLSConfig(certFile, keyFile, nil); err == nil {
		t.Fatal("TLSConfig accepted missing files")
	}
	first := selfSigned(t, certFile, keyFile, "first")
	var mu sync.Mutex
	var errs []error
	cfg, err := TLSConfig(certFile, keyFile, func(err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MinVersion < tls.VersionTLS12 {
		t.Errorf("MinVersion %x", cfg.MinVersion)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), ErrorLog: log.New(io.Discard, "", 0)}
	go srv.Serve(ln)
	defer srv.Close()
	served := func() string {
		t.Helper()
		conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	if got := served(); got != first.Subject.CommonName {
		t.Errorf("served %q, want %q", got, first.Subject.CommonName)
	}
	// A renewal: new files, later times.
	selfSigned(t, certFile, keyFile, "second")
	later := time.Now().Add(time.Minute)
	os.Chtimes(certFile, later, later)
	os.Chtimes(keyFile, later, later)
	if got := served(); got != "second" {
		t.Errorf("served %q after the renewal, want second", got)
	}
	// A broken renewal: the key of another certificate.
	selfSigned(t, filepath.Join(dir, "other.pem"), keyFile, "other")
	later = later.Add(time.Minute)
	os.Chtimes(keyFile, later, later)
	if got := served(); got != "second" {
		t.Errorf("served %q after a broken renewal, want second still", got)
	}
	served()
	mu.Lock()
	defer mu.Unlock()
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "previous certificate") {
		t.Errorf("errors %v, want one saying the previous certificate stays", errs)
	}
}
