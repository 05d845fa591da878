package authority

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

func TestLoadOrCreateKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "authority.pem")
	first, err := LoadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("created key has mode %v, want 0600", fi.Mode().Perm())
	}
	second, err := LoadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if first.KeyID() != second.KeyID() {
		t.Fatal("second start generated a new key instead of loading the first")
	}
	// An authority signed before the restart verifies after it.
	a, err := first.Sign(testBinding(), t0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := second.Verifier().Verify(a, testBinding(), t0); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
}

func TestLoadOrCreateKeyConcurrentStarters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "authority.pem")
	ids := make([]string, 8)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Go(func() {
			s, err := LoadOrCreateKey(path)
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = s.KeyID()
		})
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("concurrent starters ended with different keys: %v", ids)
		}
	}
}

func TestLoadOrCreateKeyRefusesOpenPermissions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "authority.pem")
	if _, err := LoadOrCreateKey(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateKey(path); err == nil {
		t.Fatal("a world-readable key was accepted")
	}
}

func TestLoadKey(t *testing.T) {
	dir := t.TempDir()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	ecPath := filepath.Join(dir, "ec.pem")
	if err := os.WriteFile(ecPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := LoadKey(ecPath) // a Secret-mounted key: no permission check
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := KeyID(&priv.PublicKey); s.KeyID() != want {
		t.Fatalf("key ID %s, want %s", s.KeyID(), want)
	}

	cases := map[string][]byte{
		"not PEM":       []byte("hello"),
		"public key":    pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: []byte{1, 2, 3}}),
		"garbage DER":   pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1, 2, 3}}),
		"encrypted key": pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: []byte{1, 2, 3}}),
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(dir, "bad.pem")
			if err := os.WriteFile(p, data, 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := LoadKey(p); err == nil {
				t.Fatal("bad key accepted")
			}
		})
	}
	if _, err := LoadKey(filepath.Join(dir, "missing.pem")); err == nil {
		t.Fatal("missing key accepted")
	}
}
