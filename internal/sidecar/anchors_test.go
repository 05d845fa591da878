package sidecar

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/actgate/actgate/internal/hostloop"
)

// selfSignedCA is a PEM CA certificate of a fresh P-256 key (httptest's servers all share one
// certificate, so another server's is no other CA).
func selfSignedCA(t testing.TB) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "another CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func TestParseCABundle(t *testing.T) {
	srvA := httptest.NewTLSServer(http.NotFoundHandler())
	defer srvA.Close()
	a, b := certPEM(srvA), []byte(selfSignedCA(t))
	key := publicKeyPEM(t, signerFrom(t, "ca-test"))
	for _, tc := range []struct {
		name string
		in   []byte
		n    int // certificates expected; 0 = error
	}{
		{"one certificate", a, 1},
		{"two, with blank lines", append(append(append([]byte("\n"), a...), '\n'), b...), 2},
		{"empty", nil, 0},
		{"only whitespace", []byte(" \n\t\n"), 0},
		{"text before", append([]byte("trust me\n"), a...), 0},
		{"text after", append(append([]byte{}, a...), []byte("and this")...), 0},
		{"a public key", key, 0},
		{"a private key beside it", append(append([]byte{}, a...), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1}})...), 0},
		{"garbage DER", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1, 2, 3}}), 0},
		{"headers", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Headers: map[string]string{"X": "y"}, Bytes: srvA.Certificate().Raw}), 0},
		{"truncated", a[:len(a)-20], 0},
		{"too large", append(append([]byte{}, a...), []byte(strings.Repeat("\n", maxCABytes))...), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			certs, err := ParseCABundle(tc.in)
			if tc.n == 0 {
				if err == nil {
					t.Fatalf("accepted %d certificates", len(certs))
				}
				return
			}
			if err != nil || len(certs) != tc.n {
				t.Fatalf("got %d certificates, %v; want %d", len(certs), err, tc.n)
			}
		})
	}
}

func FuzzParseCABundle(f *testing.F) {
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	f.Add(certPEM(srv))
	srv.Close()
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"))
	f.Add([]byte("-----BEGIN "))
	f.Add([]byte{0xff, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		certs, err := ParseCABundle(b)
		if err == nil && len(certs) == 0 {
			t.Fatal("no error and no certificate")
		}
	})
}

// TestTrustAnchorsInline: the sidecar built from inline anchors (what the injector gives it as
// ACTGATE_AUTHORITY_PUBLIC_KEY and ACTGATE_AUTHORITY_CA) trusts exactly them: the service's
// key and CA let a call through; another key refuses the service's authorities (EF_002, the
// upstream never called); another CA refuses the service itself. Missing, garbled or doubled
// anchors stop the sidecar before it serves (ErrTrustAnchor).
func TestTrustAnchorsInline(t *testing.T) {
	s := newStub(t, bankModes)
	s.spec, s.epoch = testPolicy(t, "http://127.0.0.1:1/mcp"), 1
	files := writeSidecarFiles(t, s)
	goodKey, goodCA := string(publicKeyPEM(t, s.signer)), string(certPEM(s.srv))
	wrongKey, wrongCA := string(publicKeyPEM(t, signerFrom(t, "not-the-authority"))), selfSignedCA(t)
	cfg := func(key, ca string) Config {
		return Config{
			Listen: "127.0.0.1:0", AuthorityURL: s.srv.URL, AuthorityCA: ca, TokenFile: files.token,
			PublicKey: key, Namespace: testNS, Agent: testAgent, SinkID: testSink,
			Upstreams:  []Upstream{{Name: "payments", URL: "http://127.0.0.1:1/mcp", CredentialFile: files.cred}},
			JournalDir: filepath.Join(t.TempDir(), "journal"),
		}
	}
	enforce := func(c Config) hostloop.Decision {
		t.Helper()
		sc, err := New(c)
		if err != nil {
			t.Fatal(err)
		}
		base, stop := serveOnLoopback(t, sc)
		defer stop()
		resp, err := http.Post(base+hostloop.EnforcePath, "application/json", strings.NewReader(
			`{"vendor":"anthropic","block":{"type":"tool_use","id":"toolu_1","name":"send_payment","input":{"amount":2}}}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var d hostloop.Decision
		if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
			t.Fatal(err)
		}
		return d
	}

	if d := enforce(cfg(goodKey, goodCA)); !d.Allow {
		t.Fatalf("the service's own anchors: %+v", d)
	}
	// An authority that does not verify with the sidecar's anchors is never journaled or
	// dispatched (the service spent it in the same request that issued it; nothing ran).
	if d := enforce(cfg(wrongKey, goodCA)); d.Allow || d.Code != "EF_002" || d.OperationID != "" {
		t.Fatalf("another public key: %+v, want a deny with EF_002", d)
	}
	reviews := s.reviewCount()
	if d := enforce(cfg(goodKey, wrongCA)); d.Allow {
		t.Fatalf("another CA: %+v, want a deny", d)
	}
	if n := s.reviewCount(); n != reviews {
		t.Fatalf("the service was reviewed through an untrusted TLS connection (%d → %d)", reviews, n)
	}

	for _, tc := range []struct {
		name string
		edit func(*Config)
	}{
		{"no public key", func(c *Config) { c.PublicKey = "" }},
		{"garbled public key", func(c *Config) { c.PublicKey = "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n" }},
		{"a certificate as the public key", func(c *Config) { c.PublicKey = goodCA }},
		{"public key inline and as a file", func(c *Config) { c.PublicKeyFile = files.key }},
		{"garbled CA", func(c *Config) { c.AuthorityCA = goodCA[:len(goodCA)-30] }},
		{"a key as the CA", func(c *Config) { c.AuthorityCA = goodKey }},
		{"text after the CA", func(c *Config) { c.AuthorityCA = goodCA + "trust me" }},
		{"CA inline and as a file", func(c *Config) { c.AuthorityCAFile = files.ca }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cfg(goodKey, goodCA)
			tc.edit(&c)
			sc, err := New(c)
			if err == nil {
				_ = sc.Close()
				t.Fatal("the sidecar started")
			}
			if !errors.Is(err, ErrTrustAnchor) {
				t.Fatalf("err = %v, want ErrTrustAnchor", err)
			}
		})
	}
}
