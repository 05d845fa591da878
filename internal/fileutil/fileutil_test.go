package fileutil

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestWriteAtomic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "endpoint")
	for _, content := range []string{"first\n", "second, longer\n"} {
		if err := WriteAtomic(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(p)
		if err != nil || string(b) != content {
			t.Fatalf("read %q %v, want %q", b, err, content)
		}
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("mode %v %v, want 0600", fi.Mode().Perm(), err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v %v", entries, err)
	}
	if err := WriteAtomic(filepath.Join(dir, "missing", "x"), []byte("x"), 0o600); err == nil {
		t.Fatal("no error for a missing directory")
	}
}

func TestReadToken(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, content, want string
		ok                  bool
	}{
		{"trimmed", " tok-1\n", "tok-1", true},
		{"empty", "", "", false},
		{"only whitespace", " \r\n\t", "", false},
	} {
		p := filepath.Join(dir, tc.name)
		if err := os.WriteFile(p, []byte(tc.content), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := ReadToken(p)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("%s: ReadToken = %q, %v; want %q (ok %v)", tc.name, got, err, tc.want, tc.ok)
		}
	}
	if _, err := ReadToken(filepath.Join(dir, "missing")); err == nil {
		t.Error("no error for a missing file")
	}
}

func TestReadCertPool(t *testing.T) {
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(good, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, withSystem := range []bool{false, true} {
		pool, err := ReadCertPool(good, withSystem)
		if err != nil || pool == nil {
			t.Fatalf("withSystem=%v: %v", withSystem, err)
		}
		cert, _ := x509.ParseCertificate(der)
		if _, err := cert.Verify(x509.VerifyOptions{Roots: pool}); err != nil {
			t.Fatalf("withSystem=%v: the pool does not hold the CA: %v", withSystem, err)
		}
	}
	empty := filepath.Join(dir, "empty.pem")
	if err := os.WriteFile(empty, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadCertPool(empty, true); err == nil || !strings.Contains(err.Error(), "holds no PEM certificate") {
		t.Fatalf("a file without a certificate: %v", err)
	}
	if _, err := ReadCertPool(filepath.Join(dir, "missing.pem"), false); err == nil {
		t.Fatal("a missing file read as a pool")
	}
}

// TestTokenSource: a credential is read from its file, kept for the TTL, and read
// again after it: a rotated file applies within the TTL. A missing or empty file is an error
// each time (nothing is kept from a failed read), and a file restored is read at once.
func TestTokenSource(t *testing.T) {
	path := filepath.Join(t.TempDir(), "credential")
	if err := os.WriteFile(path, []byte("token-a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const ttl = 200 * time.Millisecond
	read := TokenSource(path, ttl)
	get := func() (string, error) { return read(context.Background()) }
	if tok, err := get(); err != nil || tok != "token-a" {
		t.Fatalf("first read: %q %v", tok, err)
	}
	if err := os.WriteFile(path, []byte("token-b"), 0o600); err != nil {
		t.Fatal(err)
	}
	if tok, err := get(); err != nil || tok != "token-a" {
		t.Fatalf("within the TTL: %q %v", tok, err)
	}
	time.Sleep(ttl + 50*time.Millisecond)
	if tok, err := get(); err != nil || tok != "token-b" {
		t.Fatalf("after the TTL the rotated credential applies: %q %v", tok, err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	time.Sleep(ttl + 50*time.Millisecond)
	for range 2 {
		if tok, err := get(); err == nil {
			t.Fatalf("a removed credential file read %q", tok)
		}
	}
	if err := os.WriteFile(path, []byte("  \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if tok, err := get(); err == nil {
		t.Fatalf("an empty credential file read %q", tok)
	}
	if err := os.WriteFile(path, []byte("token-c"), 0o600); err != nil {
		t.Fatal(err)
	}
	if tok, err := get(); err != nil || tok != "token-c" {
		t.Fatalf("a restored credential file: %q %v", tok, err)
	}
}
