package policy

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const specOnlyYAML = `
servers:
- name: s
  url: https://s.example
rules:
- name: r
  tools: ["*"]
`

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadFileForms(t *testing.T) {
	for name, content := range map[string]string{
		"spec only, YAML": specOnlyYAML,
		"spec only, JSON": `{"servers":[{"name":"s","url":"https://s.example"}],"rules":[{"name":"r","tools":["*"]}]}`,
		"whole object": `apiVersion: actgate.io/v1alpha1
kind: ToolPolicy
metadata: {name: p, namespace: shop}
spec:` + strings.ReplaceAll(specOnlyYAML, "\n", "\n  "),
		"leading document marker": "---\n" + specOnlyYAML,
		"comments only after":     specOnlyYAML + "# the end\n",
	} {
		t.Run(name, func(t *testing.T) {
			spec, err := LoadFile(writeFile(t, content))
			if err != nil {
				t.Fatal(err)
			}
			if len(spec.Servers) != 1 || spec.Servers[0].URL != "https://s.example" || spec.Rules[0].Tools[0] != "*" {
				t.Fatalf("decoded %+v", spec)
			}
			if _, err := Compile("gate", spec, 0); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestLoadFileRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, content, detail string
	}{
		{"unknown field", specOnlyYAML + "extra: 1\n", `unknown field "extra"`},
		{"unknown nested field", strings.Replace(specOnlyYAML, "  url:", "  URI: x\n  url:", 1), `unknown field "servers[0].URI"`},
		{"field differing only in case", specOnlyYAML + "Mode: Audit\n", `unknown field "Mode"`},
		{"case-variant duplicate", specOnlyYAML + "Servers: []\n", `unknown field "Servers"`},
		{"duplicate key", specOnlyYAML + "rules: []\n", "already set"},
		{"duplicate JSON key", `{"servers":[],"servers":[{"name":"s","url":"https://s.example"}]}`, "already set"},
		{"two documents", specOnlyYAML + "---\nmode: Audit\n", "more than one YAML document"},
		{"empty", "", "empty document"},
		{"only a comment", "# nothing\n", "empty document"},
		{"a list", "- a\n- b\n", "not a mapping"},
		{"a scalar", "hello\n", "not a mapping"},
		{"null", "null\n", "not a mapping"},
		{"wrong kind", "apiVersion: actgate.io/v1alpha1\nkind: Act\nspec: {}\n", "apiVersion/kind must be actgate.io/v1alpha1/ToolPolicy"},
		{"wrong version", "apiVersion: actgate.io/v1\nkind: ToolPolicy\nspec: {}\n", "apiVersion/kind"},
		{"kind without apiVersion", "kind: ToolPolicy\nspec: {}\n", "apiVersion/kind"},
		{"spec field at top level of an object", "apiVersion: actgate.io/v1alpha1\nkind: ToolPolicy\nservers: []\n", `unknown field "servers"`},
		{"wrong type", "servers: 3\n", "servers"},
		{"bad YAML", "servers: [\n", "did not find expected"},
		{"tabs", "servers:\n\t- name: s\n", "found character that cannot start any token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := LoadFile(writeFile(t, tc.content))
			if err == nil {
				t.Fatalf("accepted: %+v", spec)
			}
			if !errors.Is(err, ErrPolicyFile) {
				t.Fatalf("not ErrPolicyFile: %v", err)
			}
			if !strings.Contains(err.Error(), tc.detail) {
				t.Fatalf("error %q does not contain %q", err, tc.detail)
			}
		})
	}
}

func TestLoadFileSizeAndPath(t *testing.T) {
	big := specOnlyYAML + "# " + strings.Repeat("x", MaxFileBytes) + "\n"
	if _, err := LoadFile(writeFile(t, big)); !errors.Is(err, ErrPolicyFile) || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("oversized: %v", err)
	}
	_, err := LoadFile(filepath.Join(t.TempDir(), "missing.yaml"))
	if !errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrPolicyFile) {
		t.Fatalf("missing file: %v", err)
	}
}
