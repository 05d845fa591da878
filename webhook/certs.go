package webhook

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// certLoader serves the certificate in a folder that may be empty yet: in operator mode the
// manager fills the Secret after it starts, and the files follow (at once with
// CertSourceSecret, on the kubelet's next sync with a Secret volume); controller-runtime's
// own watcher refuses to start without the files. Until they appear every handshake fails,
// which the API server treats as a webhook failure: with failurePolicy Fail, a denial (fail
// closed). The files are re-read when their modification time changes (rotation).
type certLoader struct {
	certFile, keyFile string

	mu      sync.Mutex
	cert    *tls.Certificate
	certMod time.Time
	keyMod  time.Time
}

func newCertLoader(dir, certName, keyName string) *certLoader {
	return &certLoader{certFile: filepath.Join(dir, certName), keyFile: filepath.Join(dir, keyName)}
}

// GetCertificate is a tls.Config.GetCertificate.
func (l *certLoader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return l.load()
}

func (l *certLoader) load() (*tls.Certificate, error) {
	cs, err := os.Stat(l.certFile)
	if err != nil {
		return nil, fmt.Errorf("webhook serving certificate: %w", err)
	}
	ks, err := os.Stat(l.keyFile)
	if err != nil {
		return nil, fmt.Errorf("webhook serving key: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cert != nil && cs.ModTime().Equal(l.certMod) && ks.ModTime().Equal(l.keyMod) {
		return l.cert, nil
	}
	pair, err := tls.LoadX509KeyPair(l.certFile, l.keyFile)
	if err != nil {
		if l.cert != nil { // mid-rotation: keep serving the last good pair
			return l.cert, nil
		}
		return nil, fmt.Errorf("webhook serving certificate: %w", err)
	}
	l.cert, l.certMod, l.keyMod = &pair, cs.ModTime(), ks.ModTime()
	return l.cert, nil
}

// Check is a healthz.Checker: ready once a certificate loads.
func (l *certLoader) Check(*http.Request) error {
	if _, err := l.load(); err != nil {
		return errors.Join(errors.New("webhook: no serving certificate yet"), err)
	}
	return nil
}
