package reports

import (
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"time"
)

// TLSConfig returns a server configuration for the collector endpoint:
// the certificate chain in certFile with the private key in keyFile (PEM,
// as tls.LoadX509KeyPair reads them), TLS 1.2 or newer. The files are
// read again at a handshake after either changed, so that a renewed
// certificate takes effect without a restart; a pair that does not load
// then leaves the previous one in use (onError says why, once per
// change). The pair must load now.
func TLSConfig(certFile, keyFile string, onError func(error)) (*tls.Config, error) {
	c := &certFiles{certFile: certFile, keyFile: keyFile, onError: onError}
	if err := c.load(); err != nil {
		return nil, err
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: c.get}, nil
}

type certFiles struct {
	certFile, keyFile string
	onError           func(error)

	mu   sync.Mutex
	cert *tls.Certificate
	// seen is what the files looked like when last read, loaded or not.
	seen [2]fileStamp
}

type fileStamp struct {
	mod  time.Time
	size int64
}

func stamp(path string) fileStamp {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}
	}
	return fileStamp{fi.ModTime(), fi.Size()}
}

func (c *certFiles) load() error {
	c.seen = [2]fileStamp{stamp(c.certFile), stamp(c.keyFile)}
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return fmt.Errorf("collector TLS certificate %s, key %s: %w", c.certFile, c.keyFile, err)
	}
	c.cert = &cert
	return nil
}

func (c *certFiles) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now := [2]fileStamp{stamp(c.certFile), stamp(c.keyFile)}; now != c.seen {
		if err := c.load(); err != nil && c.onError != nil {
			c.onError(fmt.Errorf("%w; still serving the previous certificate", err))
		}
	}
	return c.cert, nil
}
