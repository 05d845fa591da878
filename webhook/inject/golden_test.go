package inject_test

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/webhook/inject"
)

var update = flag.Bool("update", false, "rewrite testdata/inject/*.yaml.injected from the current output")

// goldenDir is the repository's testdata/inject.
const goldenDir = "../../testdata/inject"

// goldenConfig is the configuration every golden file is rendered with.
func goldenConfig(t testing.TB) *inject.Config {
	t.Helper()
	ca, err := os.ReadFile("testdata/authority-ca.pem")
	if err != nil {
		t.Fatal(err)
	}
	pub, err := os.ReadFile("testdata/authority-public-key.pem")
	if err != nil {
		t.Fatal(err)
	}
	cfg := inject.Config{
		Image:              "ghcr.io/actgate/actgate:v0.0.0-golden",
		AuthorityURL:       "https://actgate-authority.actgate-system.svc:443",
		AuthorityCA:        string(ca),
		AuthorityPublicKey: string(pub),
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
		},
	}.Default()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return &cfg
}

// readCase reads a golden input: a Pod, then ToolPolicies.
func readCase(t testing.TB, path string) (*corev1.Pod, []v1alpha1.ToolPolicy) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r := utilyaml.NewYAMLReader(bufioReader(raw))
	var pod *corev1.Pod
	var policies []v1alpha1.ToolPolicy
	for {
		doc, err := r.Read()
		if err != nil {
			break
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		if pod == nil {
			pod = &corev1.Pod{}
			if err := yaml.UnmarshalStrict(doc, pod); err != nil {
				t.Fatalf("%s: pod: %v", path, err)
			}
			continue
		}
		var p v1alpha1.ToolPolicy
		if err := yaml.UnmarshalStrict(doc, &p); err != nil {
			t.Fatalf("%s: policy: %v", path, err)
		}
		policies = append(policies, p)
	}
	if pod == nil {
		t.Fatalf("%s: no pod", path)
	}
	return pod, policies
}

func stripComments(doc []byte) []byte {
	var out [][]byte
	for _, l := range bytes.Split(doc, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(l), []byte("#")) {
			out = append(out, l)
		}
	}
	return bytes.Join(out, []byte("\n"))
}

func injectCase(t testing.TB, pod *corev1.Pod, policies []v1alpha1.ToolPolicy) []byte {
	t.Helper()
	selected, err := inject.Select(pod, policies)
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := inject.Inject(pod, selected, goldenConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	b, err := yaml.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// goldenInputs are the inputs the injector injects (those with an .injected golden); refused
// lists those it refuses (a .refused golden holds the refusal's text).
func goldenInputs(t *testing.T) []string {
	t.Helper()
	inputs, _ := goldenCases(t)
	return inputs
}

func goldenCases(t *testing.T) (injected, refused []string) {
	t.Helper()
	inputs, err := filepath.Glob(filepath.Join(goldenDir, "*.yaml"))
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no golden inputs in %s: %v", goldenDir, err)
	}
	for _, in := range inputs {
		if _, err := os.Stat(in + ".refused"); err == nil {
			refused = append(refused, in)
		} else {
			injected = append(injected, in)
		}
	}
	return injected, refused
}

func TestGolden(t *testing.T) {
	inputs, refused := goldenCases(t)
	for _, in := range inputs {
		t.Run(filepath.Base(in), func(t *testing.T) {
			pod, policies := readCase(t, in)
			got := injectCase(t, pod, policies)
			want := in + ".injected"
			if *update {
				if err := os.WriteFile(want, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			wantBytes, err := os.ReadFile(want)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(got, wantBytes) {
				t.Errorf("injection of %s differs from %s (run with -update if intended):\n%s", in, want, lineDiff(string(wantBytes), string(got)))
			}
		})
	}
	// A refused input: Inject returns ErrNotInjectable with the .refused text and no pod.
	for _, in := range refused {
		t.Run(filepath.Base(in), func(t *testing.T) {
			pod, policies := readCase(t, in)
			selected, err := inject.Select(pod, policies)
			if err != nil {
				t.Fatal(err)
			}
			out, _, err := inject.Inject(pod, selected, goldenConfig(t))
			if !errors.Is(err, inject.ErrNotInjectable) || out != nil {
				t.Fatalf("Inject = %v, %v; want ErrNotInjectable and no pod", out != nil, err)
			}
			want := in + ".refused"
			got := []byte(err.Error() + "\n")
			if *update {
				if err := os.WriteFile(want, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			wantBytes, err := os.ReadFile(want)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, wantBytes) {
				t.Errorf("refusal of %s:\n got %s\nwant %s", in, got, wantBytes)
			}
		})
	}
}

// TestGoldenNotStale: every input has its .injected or .refused (not both) and every golden its
// input.
func TestGoldenNotStale(t *testing.T) {
	entries, err := os.ReadDir(goldenDir)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, e := range entries {
		names[e.Name()] = true
	}
	for n := range names {
		switch {
		case strings.HasSuffix(n, ".yaml.injected"), strings.HasSuffix(n, ".yaml.refused"):
			in := n[:strings.LastIndex(n, ".")]
			if !names[in] {
				t.Errorf("stale golden %s: no input %s", n, in)
			}
		case strings.HasSuffix(n, ".yaml"):
			if names[n+".injected"] == names[n+".refused"] {
				t.Errorf("input %s needs exactly one of %s.injected and %s.refused (run with -update)", n, n, n)
			}
		case n == "README.md":
		default:
			t.Errorf("unexpected file %s in %s", n, goldenDir)
		}
	}
}

// TestIdempotent: injecting an injected pod again gives the same pod, byte for byte, and
// stripping then injecting does too.
func TestIdempotent(t *testing.T) {
	cfg := goldenConfig(t)
	for _, in := range goldenInputs(t) {
		t.Run(filepath.Base(in), func(t *testing.T) {
			pod, policies := readCase(t, in)
			selected, err := inject.Select(pod, policies)
			if err != nil {
				t.Fatal(err)
			}
			once, _, err := inject.Inject(pod, selected, cfg)
			if err != nil {
				t.Fatal(err)
			}
			twice, _, err := inject.Inject(once, selected, cfg)
			if err != nil {
				t.Fatal(err)
			}
			a, b := mustYAML(t, once), mustYAML(t, twice)
			if a != b {
				t.Errorf("inject(inject(p)) != inject(p):\n%s", lineDiff(a, b))
			}
			again, _, err := inject.Inject(inject.Strip(once), selected, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if c := mustYAML(t, again); a != c {
				t.Errorf("inject(strip(inject(p))) != inject(p):\n%s", lineDiff(a, c))
			}
		})
	}
}

func mustYAML(t testing.TB, v any) string {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// lineDiff shows the lines only in want (-) and only in got (+), enough to see a golden change.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for _, l := range w {
		if !slices.Contains(g, l) {
			b.WriteString("- " + l + "\n")
		}
	}
	for _, l := range g {
		if !slices.Contains(w, l) {
			b.WriteString("+ " + l + "\n")
		}
	}
	return b.String()
}
