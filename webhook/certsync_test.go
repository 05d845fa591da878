package webhook

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestSecretSyncWrite: the serving pair and CA certificate are copied into the folder (never the
// CA key), an empty Secret writes nothing, an unchanged key is not rewritten (certLoader watches
// modification times), and a rotated pair is what the loader serves next.
func TestSecretSyncWrite(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Server: ServerConfig{CertDir: dir}, Certs: CertConfig{Namespace: "actgate-system", Source: CertSourceSecret}}.Default()
	s := newSecretSync(nil, cfg, logr.Discard())
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "actgate-system", Name: DefaultCertSecretName}}

	if err := s.write(sec); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("an empty Secret wrote %d files", len(ents))
	}
	l := newCertLoader(dir, "tls.crt", "tls.key")
	if l.Check(nil) == nil {
		t.Fatal("ready with no certificate")
	}

	// A pair as the rotator writes it (writePair makes it in a scratch folder).
	src := t.TempDir()
	pairData := func(cn string) map[string][]byte {
		writePair(t, src, cn, time.Unix(1000, 0))
		crt, err := os.ReadFile(filepath.Join(src, "tls.crt"))
		if err != nil {
			t.Fatal(err)
		}
		key, err := os.ReadFile(filepath.Join(src, "tls.key"))
		if err != nil {
			t.Fatal(err)
		}
		return map[string][]byte{"tls.crt": crt, "tls.key": key, "ca.crt": crt, "ca.key": key}
	}
	sec.Data = pairData("first")
	if err := s.write(sec); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"tls.crt", "tls.key", "ca.crt"} {
		got, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil || string(got) != string(sec.Data[f]) {
			t.Errorf("%s: %q, %v; want the Secret's %s", f, got, err, f)
		}
		if st, err := os.Stat(filepath.Join(dir, f)); err == nil && st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", f, st.Mode().Perm())
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "ca.key")); !os.IsNotExist(err) {
		t.Errorf("ca.key written to disk (stat: %v); it must stay in the Secret", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 3 {
		t.Errorf("%d files in the folder, want 3 (no temporary files left)", len(ents))
	}
	if got := commonName(t, l); got != "first" {
		t.Fatalf("serving %q", got)
	}

	// Unchanged data: not rewritten.
	old := time.Unix(5000, 0)
	for _, f := range []string{"tls.crt", "tls.key", "ca.crt"} {
		if err := os.Chtimes(filepath.Join(dir, f), old, old); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.write(sec); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(dir, "tls.crt")); err != nil || !st.ModTime().Equal(old) {
		t.Errorf("an unchanged certificate was rewritten")
	}

	// Rotation: the loader serves the new pair.
	sec.Data = pairData("rotated")
	if err := s.write(sec); err != nil {
		t.Fatal(err)
	}
	if got := commonName(t, l); got != "rotated" {
		t.Fatalf("after rotation serving %q", got)
	}

	// An unwritable folder is an error, not a silent success.
	bad := newSecretSync(nil, Config{Server: ServerConfig{CertDir: filepath.Join(dir, "missing")}}.Default(), logr.Discard())
	if err := bad.write(sec); err == nil {
		t.Error("writing into a missing folder succeeded")
	}
}
