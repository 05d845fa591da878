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

// docCite matches a citation of the repository's docs in Go source, after comment line breaks
// are joined: docs/NAME.md, optionally followed by a quoted section title.
var docCite = regexp.MustCompile(`docs/([a-z-]+\.md)(?: "([^"]+)")?`)

// commentBreak is a line break inside a // comment block, with the next line's comment marker.
var commentBreak = regexp.MustCompile(`\n[ \t]*//[ \t]?`)

// outsideRefs are what code comments must not cite: a design file that is not in the repository,
// tracker references, and sibling folders of the checkout.
var outsideRefs = regexp.MustCompile(`DESIGN` + `\.md|DESIGN "|[Ii]ssue [0-9]|[Tt]he issue('s| text| asks| calls)|as the issue |\.\./shared/|STYLE` + `\.md`)

// TestCodeDocReferences: the Go sources explain themselves with the repository's own docs. Every
// docs/NAME.md a comment cites exists, every quoted section title after it is a heading of that
// page, and nothing cites a file outside the repository or an issue tracker (third_party/ is
// upstream code and not checked).
func TestCodeDocReferences(t *testing.T) {
	root, err := envtest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	headings := map[string]map[string]bool{} // doc → its heading titles
	titlesOf := func(doc string) (map[string]bool, error) {
		if h, ok := headings[doc]; ok {
			return h, nil
		}
		b, err := os.ReadFile(filepath.Join(root, "docs", doc))
		if err != nil {
			return nil, err
		}
		h := map[string]bool{}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "#") {
				h[strings.TrimSpace(strings.TrimLeft(line, "#"))] = true
			}
		}
		headings[doc] = h
		return h, nil
	}
	cites := 0
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch rel {
			case ".git", "bin", "third_party":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		af, err := parser.ParseFile(token.NewFileSet(), path, b, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if rel != filepath.Join("test", "attacks", "docrefs_test.go") {
			for _, cg := range af.Comments {
				if m := outsideRefs.FindString(cg.Text()); m != "" {
					t.Errorf("%s cites %q: cite docs/ or a spec section instead", rel, m)
				}
			}
		}
		// Comments and strings (a command's help text) alike: a title may span lines.
		text := commentBreak.ReplaceAllString(string(b), " ")
		for _, m := range docCite.FindAllStringSubmatch(text, -1) {
			cites++
			h, err := titlesOf(m[1])
			if err != nil {
				t.Errorf("%s cites docs/%s: %v", rel, m[1], err)
				continue
			}
			if title := strings.Join(strings.Fields(m[2]), " "); title != "" && !h[title] {
				t.Errorf("%s cites docs/%s %q, which is not a heading of that page", rel, m[1], title)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if cites < 50 {
		t.Fatalf("found %d citations of docs/ in the Go sources; the walk missed them", cites)
	}
}
