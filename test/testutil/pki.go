package testutil

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// PKI is a CA made here with crypto/x509 and a serving certificate it signed for 127.0.0.1 and
// localhost (in a cluster the operator's cert-controller makes them for the Services' names).
type PKI struct {
	// CAPEM is the CA certificate; CAFile holds it.
	CAPEM  []byte
	CAFile string
	// Pool trusts the CA.
	Pool *x509.CertPool
	// Cert is the serving certificate and its key; CertFile and KeyFile (tls.crt and tls.key in
	// Dir) hold them.
	Cert              tls.Certificate
	CertFile, KeyFile string
	Dir               string
}

// NewPKI makes a CA and a serving certificate for 127.0.0.1, localhost and dnsNames (DNS names
// or IP addresses), and writes them (mode 0600) into dir: ca.crt, tls.crt and tls.key.
func NewPKI(t testing.TB, dir string, dnsNames ...string) *PKI {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "actgate-test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	// A name that parses as an IP address goes into the IP SANs (a client checks an address
	// host against those only).
	ips := []net.IP{net.ParseIP("127.0.0.1")}
	var names []string
	for _, n := range dnsNames {
		if ip := net.ParseIP(n); ip != nil {
			ips = append(ips, ip)
		} else {
			names = append(names, n)
		}
	}
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "actgate-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames:    append([]string{"localhost"}, names...),
		IPAddresses: ips,
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	p := &PKI{CAPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), Pool: x509.NewCertPool(), Dir: dir}
	p.Pool.AddCert(ca)
	if p.Cert, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	p.CAFile = WriteFile(t, dir, "ca.crt", p.CAPEM)
	p.CertFile = WriteFile(t, dir, "tls.crt", certPEM)
	p.KeyFile = WriteFile(t, dir, "tls.key", keyPEM)
	return p
}

// SigningKey writes a fresh Ed25519 authority-signing key (PKCS#8, mode 0600) and its public
// key (PKIX) into dir, signing.key and signing.pub, and returns their paths.
func SigningKey(t testing.TB, dir string) (priv, pub string) {
	t.Helper()
	pk, sk, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	skDER, err := x509.MarshalPKCS8PrivateKey(sk)
	if err != nil {
		t.Fatal(err)
	}
	pkDER, err := x509.MarshalPKIXPublicKey(pk)
	if err != nil {
		t.Fatal(err)
	}
	return WriteFile(t, dir, "signing.key", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: skDER})),
		WriteFile(t, dir, "signing.pub", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pkDER}))
}

// WriteFile writes data to dir/name (mode 0600, creating the folders it needs) and returns the
// path.
func WriteFile(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
