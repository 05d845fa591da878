package webhook

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadConfig(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, err string
	}{
		{"minimal operator config", "injection: {image: i, authorityURL: 'https://a:443'}\ncerts: {namespace: actgate-system}\n", ""},
		{"external certificates need no namespace", "injection: {image: i, authorityURL: 'https://a:443'}\ncerts: {mode: external}\n", ""},
		{"operator certificates need a namespace", "injection: {image: i, authorityURL: 'https://a:443'}\n", "certs.namespace is required"},
		{"unknown field", "injection: {image: i, authorityURL: 'https://a:443'}\ncerts: {mode: external}\nextra: 1\n", "unknown field"},
		{"unknown nested field", "injection: {image: i, authorityURL: 'https://a:443', imagee: x}\ncerts: {mode: external}\n", "unknown field"},
		{"bad mode", "injection: {image: i, authorityURL: 'https://a:443'}\ncerts: {mode: magic}\n", `certs.mode "magic"`},
		{"certificates from the Secret", "injection: {image: i, authorityURL: 'https://a:443'}\ncerts: {namespace: actgate-system, source: secret}\n", ""},
		{"external certificates from the Secret", "injection: {image: i, authorityURL: 'https://a:443'}\ncerts: {mode: external, namespace: actgate-system, source: secret}\n", ""},
		{"the Secret source needs a namespace", "injection: {image: i, authorityURL: 'https://a:443'}\ncerts: {mode: external, source: secret}\n", "certs.namespace is required with certs.source secret"},
		{"bad source", "injection: {image: i, authorityURL: 'https://a:443'}\ncerts: {namespace: actgate-system, source: kubelet}\n", `certs.source "kubelet"`},
		{"bad injection", "injection: {authorityURL: 'https://a:443'}\ncerts: {mode: external}\n", "image is required"},
		{"bad port", "injection: {image: i, authorityURL: 'https://a:443'}\ncerts: {mode: external}\nserver: {port: 99999}\n", "server.port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "webhook.yaml")
			if err := os.WriteFile(f, []byte(tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := LoadConfig(f)
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				if cfg.Server.Port != DefaultPort || cfg.Injection.Port != 15080 || cfg.NamespaceAdminGroups[0] != DefaultNamespaceAdmins ||
					cfg.Certs.MutatingWebhookConfiguration != DefaultMutatingName || cfg.Certs.SecretName != DefaultCertSecretName {
					t.Errorf("defaults not applied: %+v", cfg)
				}
				return
			}
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("LoadConfig = %v, want ErrConfig containing %q", err, tc.err)
			}
		})
	}
	if _, err := LoadConfig(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Errorf("a missing file loaded")
	}
}

// The two shipped configurations (kustomize and the chart's rendering, tested in
// test/integration/webhook) are valid; this one reads the kustomize file directly.
func TestShippedKustomizeConfig(t *testing.T) {
	raw, err := os.ReadFile("../config/manager/webhook-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, body, ok := strings.Cut(string(raw), "webhook.yaml: |\n")
	if !ok {
		t.Fatal("no webhook.yaml in config/manager/webhook-config.yaml")
	}
	var lines []string
	for _, l := range strings.Split(body, "\n") {
		lines = append(lines, strings.TrimPrefix(l, "    "))
	}
	f := filepath.Join(t.TempDir(), "webhook.yaml")
	if err := os.WriteFile(f, []byte(strings.Join(lines, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(f)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Certs.Mode != CertModeOperator || len(cfg.Injection.ExemptNamespaces) != 4 {
		t.Errorf("shipped config: %+v", cfg)
	}
}
