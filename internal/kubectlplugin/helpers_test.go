package kubectlplugin

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/envelope"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the current output")

// testNow is the clock of every unit test: the inputs' times are written against it.
var testNow = time.Date(2026, 11, 29, 15, 0, 0, 0, time.UTC)

// objects is what one testdata YAML file holds.
type objects struct {
	acts    []v1alpha1.Act
	moments []v1alpha1.BindingMoment
}

// loadObjects reads a multi-document YAML file of Acts and BindingMoments, strictly.
func loadObjects(t testing.TB, path string) objects {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out objects
	r := utilyaml.NewYAMLReader(bufio.NewReader(f))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		var head struct{ Kind string }
		if err := yaml.Unmarshal(doc, &head); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		switch head.Kind {
		case "Act":
			var a v1alpha1.Act
			if err := yaml.UnmarshalStrict(doc, &a); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			out.acts = append(out.acts, a)
		case "BindingMoment":
			var bm v1alpha1.BindingMoment
			if err := yaml.UnmarshalStrict(doc, &bm); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			out.moments = append(out.moments, bm)
		case "":
			// a document of comments only
		default:
			t.Fatalf("%s: unexpected kind %q", path, head.Kind)
		}
	}
}

// goldenSet compares outputs with testdata/golden/<prefix>-<name>.txt, rewrites them under
// -update, and reports golden files of the prefix that no case produced (stale files).
type goldenSet struct {
	prefix string
	seen   map[string]bool
}

func newGoldenSet(prefix string) *goldenSet {
	return &goldenSet{prefix: prefix, seen: map[string]bool{}}
}

func (g *goldenSet) check(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", g.prefix+"-"+name+".txt")
	g.seen[path] = true
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("missing golden file (run go test ./internal/kubectlplugin -update and check the diff): %v", err)
	}
	if string(want) != got {
		t.Errorf("stale golden file %s (rerun with -update after checking the diff)\n--- got ---\n%s\n--- want ---\n%s", path, got, want)
	}
}

// orphans fails t for golden files of the prefix that no case wrote or read.
func (g *goldenSet) orphans(t *testing.T) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "golden", g.prefix+"-*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !g.seen[f] {
			if *update {
				if err := os.Remove(f); err != nil {
					t.Fatal(err)
				}
				continue
			}
			t.Errorf("stale golden file %s: no test case produces it (-update removes it)", f)
		}
	}
}

// mustContainInOrder fails t unless every part occurs in s, in order.
func mustContainInOrder(t *testing.T, s string, parts ...string) {
	t.Helper()
	rest := s
	for _, p := range parts {
		i := strings.Index(rest, p)
		if i < 0 {
			t.Errorf("missing (in order) %q in:\n%s", p, s)
			return
		}
		rest = rest[i+len(p):]
	}
}

// noTerminalControl fails t if s carries an ESC or another control character besides newline.
func noTerminalControl(t *testing.T, s string) {
	t.Helper()
	for _, r := range s {
		if r != '\n' && unsafeRune(r) {
			t.Errorf("output carries control or bidi character %U:\n%q", r, s)
			return
		}
	}
}

func render(t *testing.T, f func(*bytes.Buffer) error) string {
	t.Helper()
	var b bytes.Buffer
	if err := f(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// slotsInOrder is what a rendering of c must show, in order, to keep envelope-04 §9.1: the four
// briefing slots, the stem, and each option with its reasoning and action digest, the
// recommended one marked "* … (recommended)".
func slotsInOrder(c envelope.Content) []string {
	parts := []string{"Synopsis: " + c.Synopsis}
	for _, f := range c.Findings {
		parts = append(parts, "- "+f)
	}
	for _, r := range c.Recommendations {
		parts = append(parts, "- "+r)
	}
	parts = append(parts, "Offer: "+c.Offer, "Question: "+c.Question.Stem)
	for i, o := range c.Question.Options {
		line := fmt.Sprintf("[%d] %s", i+1, o.Label)
		if i == c.Question.RecommendedIdx {
			line = "* " + line + "  (recommended)"
		}
		parts = append(parts, line, "Why: "+o.Reasoning, "Authorises: "+o.ActionDigest)
	}
	return parts
}
