package node

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the node's certificate authority: one CA signs every serving and client certificate
// of the run, and also serves as the controller-manager's CSR signer. It is made fresh per run.
type pki struct {
	dir    string
	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
	caPEM  []byte
	serial int64
}

// certPair is a certificate and its key on disk and in PEM.
type certPair struct {
	CertFile, KeyFile string
	CertPEM, KeyPEM   []byte
}

func newPKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "actgate-node-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(7 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	p := &pki{dir: dir, ca: ca, caKey: key, serial: 1,
		caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
	keyPEM, err := marshalKey(key)
	if err != nil {
		return nil, err
	}
	if err := writeFiles(map[string][]byte{p.CAFile(): p.caPEM, p.CAKeyFile(): keyPEM}); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *pki) CAFile() string    { return filepath.Join(p.dir, "ca.crt") }
func (p *pki) CAKeyFile() string { return filepath.Join(p.dir, "ca.key") }

// issue signs a certificate for cn in orgs (client auth) or for the given names (server auth
// when any name is given; both usages then) and writes name.crt and name.key.
func (p *pki) issue(name, cn string, orgs []string, dnsNames []string, ips []net.IP) (certPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return certPair{}, err
	}
	p.serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(p.serial), Subject: pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(7 * 24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		DNSNames:    dnsNames, IPAddresses: ips,
	}
	if len(dnsNames)+len(ips) > 0 {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		return certPair{}, fmt.Errorf("sign %s: %w", name, err)
	}
	keyPEM, err := marshalKey(key)
	if err != nil {
		return certPair{}, err
	}
	c := certPair{
		CertFile: filepath.Join(p.dir, name+".crt"), KeyFile: filepath.Join(p.dir, name+".key"),
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), KeyPEM: keyPEM,
	}
	return c, writeFiles(map[string][]byte{c.CertFile: c.CertPEM, c.KeyFile: c.KeyPEM})
}

// serviceAccountKey writes the key pair that signs service-account tokens (sa.key, sa.pub).
func (p *pki) serviceAccountKey() (priv, pub string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	keyPEM, err := marshalKey(key)
	if err != nil {
		return "", "", err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", "", err
	}
	priv, pub = filepath.Join(p.dir, "sa.key"), filepath.Join(p.dir, "sa.pub")
	return priv, pub, writeFiles(map[string][]byte{
		priv: keyPEM, pub: pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}),
	})
}

// kubeconfig writes a kubeconfig for server with the client pair c.
func (p *pki) kubeconfig(path, server string, c certPair) error {
	b64 := base64.StdEncoding.EncodeToString
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: node
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: user
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: node
  context: {cluster: node, user: user}
current-context: node
`, server, b64(p.caPEM), b64(c.CertPEM), b64(c.KeyPEM))
	return writeFiles(map[string][]byte{path: []byte(cfg)})
}

func marshalKey(k *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

func writeFiles(files map[string][]byte) error {
	for path, data := range files {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return err
		}
	}
	return nil
}
