package webhook

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func writePair(t *testing.T, dir, cn string, mod time.Time) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Unix(0, 0), NotAfter: time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC), DNSNames: []string{cn}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{certFile, keyFile} {
		if err := os.Chtimes(f, mod, mod); err != nil {
			t.Fatal(err)
		}
	}
}

func commonName(t *testing.T, l *certLoader) string {
	t.Helper()
	c, err := l.GetCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	x, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return x.Subject.CommonName
}

func TestCertLoader(t *testing.T) {
	dir := t.TempDir()
	l := newCertLoader(dir, "tls.crt", "tls.key")
	if _, err := l.GetCertificate(nil); err == nil {
		t.Fatal("served a certificate before the files existed")
	}
	if err := l.Check(nil); err == nil {
		t.Fatal("ready before the files existed")
	}
	writePair(t, dir, "first", time.Unix(1000, 0))
	if got := commonName(t, l); got != "first" {
		t.Fatalf("serving %q", got)
	}
	if err := l.Check(nil); err != nil {
		t.Fatalf("not ready with a certificate: %v", err)
	}
	writePair(t, dir, "rotated", time.Unix(2000, 0))
	if got := commonName(t, l); got != "rotated" {
		t.Fatalf("after rotation serving %q", got)
	}
	// A half-written rotation (cert and key do not match) keeps the last good pair.
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := commonName(t, l); got != "rotated" {
		t.Fatalf("mid-rotation serving %q", got)
	}
}
