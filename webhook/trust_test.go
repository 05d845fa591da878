package webhook

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/actgate/actgate/webhook/inject"
)

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestPublicKeysPEM(t *testing.T) {
	cert, pub := read(t, "testdata/authority-ca.pem"), read(t, "testdata/authority-public-key.pem")
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	private := string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}))
	for _, tc := range []struct {
		name, in, want, err string
	}{
		{"a public key passes through", pub, pub, ""},
		{"a certificate gives its public key", cert, pub, ""},
		{"several blocks, in order (key rotation)", cert + pub, pub + pub, ""},
		{"a private key is refused", pub + private, "", `"EC PRIVATE KEY" block`},
		{"nothing", "not pem", "", "no PUBLIC KEY"},
		{"a broken public key", "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n", "", "public key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := PublicKeysPEM([]byte(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("PublicKeysPEM = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if _, err := certificatesOnly([]byte(cert + private)); err == nil {
		t.Errorf("a CA bundle with a private key was accepted")
	}
}

func TestPodInjectorTrust(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "signing.crt"), []byte(read(t, "testdata/authority-ca.pem")), 0o600); err != nil {
		t.Fatal(err)
	}
	h := injector(t, nil, namespaceObj("agents", map[string]string{inject.LabelInject: "true"}), toolPolicy("agents", map[string]string{"app": "agent"}))
	req := podRequest(t, admissionv1.Create, "", tokenPod("agents", "a", map[string]string{"app": "agent"}), nil)

	h.Trust = AuthorityTrust{CAFile: filepath.Join(dir, "ca.crt"), PublicKeyFile: filepath.Join(dir, "signing.crt")}
	resp := h.Handle(context.Background(), req)
	if resp.Allowed || resp.Result.Code != http.StatusInternalServerError || !strings.Contains(resp.Result.Message, "CA file") {
		t.Fatalf("missing CA file: %+v, want an error (fail closed)", resp.Result)
	}

	h.Trust.CAFile = "testdata/authority-ca.pem"
	resp = h.Handle(context.Background(), req)
	if !resp.Allowed {
		t.Fatalf("refused: %+v", resp.Result)
	}
	patch, err := json.Marshal(resp.Patches)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ACTGATE_AUTHORITY_CA", "BEGIN CERTIFICATE", "BEGIN PUBLIC KEY", "ACTGATE_AUTHORITY_PUBLIC_KEY"} {
		if !strings.Contains(string(patch), strings.ReplaceAll(want, "/", "~1")) && !strings.Contains(string(patch), want) {
			t.Errorf("patch lacks %s", want)
		}
	}
}

// Anchors larger than an environment variable can carry refuse the pod (fail closed) rather
// than give the sidecar a value the kubelet could not start it with.
func TestAuthorityTrustBounded(t *testing.T) {
	dir := t.TempDir()
	cert := read(t, "testdata/authority-ca.pem")
	big := filepath.Join(dir, "big.pem")
	if err := os.WriteFile(big, []byte(strings.Repeat(cert, MaxTrustBytes/len(cert)+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := (AuthorityTrust{CAFile: big}).load(); !errors.Is(err, ErrTrust) || !strings.Contains(err.Error(), "exceed") {
		t.Fatalf("oversized CA bundle: %v", err)
	}
	// A certificate gives a public key of about a third of its size.
	keys := filepath.Join(dir, "keys.pem")
	if err := os.WriteFile(keys, []byte(strings.Repeat(cert, 4*MaxTrustBytes/len(cert))), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := (AuthorityTrust{PublicKeyFile: keys}).load(); !errors.Is(err, ErrTrust) || !strings.Contains(err.Error(), "exceed") {
		t.Fatalf("oversized public keys: %v", err)
	}
	if ca, pub, err := (AuthorityTrust{CAFile: "testdata/authority-ca.pem", PublicKeyFile: "testdata/authority-ca.pem"}).load(); err != nil || ca == "" || pub == "" {
		t.Fatalf("the test anchors: %v", err)
	}
}
