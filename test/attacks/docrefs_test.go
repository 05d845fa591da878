package attacks

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/actgate/actgate/test/envtest"
)

// testRef matches a test reference in docs/security.md: a repository path, a dot, and the name
// of a Test, Fuzz or Benchmark function, optionally followed by /subtest names (not checked),
// e.g. `internal/sink.TestHandle` or `test/attacks.TestAttacks/T-C_authority_replay`.
var testRef = regexp.MustCompile("`((?:internal|test|webhook|cmd|controllers|api)(?:/[A-Za-z0-9_.-]+)*)\\.((?:Test|Fuzz|Benchmark)[A-Za-z0-9_]*)(?:/[^`]*)?`")

// TestSecurityDocReferences: every test docs/security.md cites as proof exists — a function of
// that name in a *_test.go file of that directory — and the attack table's rows are all cited.
func TestSecurityDocReferences(t *testing.T) {
	root, err := envtest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "security.md"))
	if err != nil {
		t.Fatal(err)
	}
	refs := testRef.FindAllStringSubmatch(string(doc), -1)
	if len(refs) < 20 {
		t.Fatalf("docs/security.md cites %d tests; the checklist, claims and attack table need more", len(refs))
	}
	funcs := map[string]map[string]bool{} // dir → test function names
	for _, r := range refs {
		dir, name := r[1], r[2]
		if funcs[dir] == nil {
			fs, err := testFuncs(filepath.Join(root, filepath.FromSlash(dir)))
			if err != nil {
				t.Errorf("%s.%s: %v", dir, name, err)
				funcs[dir] = map[string]bool{}
				continue
			}
			funcs[dir] = fs
		}
		if !funcs[dir][name] {
			t.Errorf("docs/security.md cites %s.%s, which is not a test function in %s/*_test.go", dir, name, dir)
		}
	}
	for _, a := range attacks {
		row := "test/attacks.TestAttacks/" + strings.ReplaceAll(a.name, " ", "_")
		if !strings.Contains(string(doc), row) {
			t.Errorf("docs/security.md does not cite the attack row %q as %s", a.name, row)
		}
	}
}

// testFuncs parses the *_test.go files of dir and returns the names of its top-level functions.
func testFuncs(dir string) (map[string]bool, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, os.ErrNotExist
	}
	out := map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range files {
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range af.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil {
				out[fd.Name.Name] = true
			}
		}
	}
	return out, nil
}
