package node_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// quickstart is README.md's "Quickstart: Kubernetes" as a user copies it: its shell commands in
// order and its values file. The suite runs each command as written, with the "…" a user fills
// in filled in (take), or says why it does not run it (skip); a command it neither runs nor
// skips fails the suite, and so does one the suite asks for that the README no longer has. So
// the suite breaks when the README drifts from what works.
type quickstart struct {
	t    *testing.T
	doc  string   // the document's path, for the log
	cmds []string // one command per entry, continuation lines joined, comments dropped
	used []bool
	// values is the YAML block (approval-values.yaml).
	values string
}

// readQuickstart reads README.md's Kubernetes quickstart, which has a values file.
func readQuickstart(t *testing.T, root string) *quickstart {
	t.Helper()
	q := readSection(t, root, "README.md", "## Quickstart: Kubernetes")
	if q.values == "" {
		fatal(t, "README.md's Kubernetes quickstart has no values file")
	}
	return q
}

// readSection reads the commands of a section of a document of the repository.
func readSection(t *testing.T, root, doc, heading string) *quickstart {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, doc))
	if err != nil {
		fatal(t, err)
	}
	q, err := parseSection(string(raw), heading)
	if err != nil {
		fatalf(t, "%s: %v", doc, err)
	}
	q.t, q.doc = t, doc
	return q
}

// parseSection extracts the commands of the ```sh blocks and the first ```yaml block of the
// section under heading (to the next heading of its level or above).
func parseSection(doc, heading string) (*quickstart, error) {
	i := strings.Index(doc, heading+"\n")
	if i < 0 {
		return nil, fmt.Errorf("no section %q", heading)
	}
	section := doc[i+len(heading)+1:]
	// The section ends at the next heading of its level or above, outside a code block.
	level := strings.Index(heading, " ")
	inFence, end := false, 0
	for line := range strings.SplitSeq(section, "\n") {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
		} else if hashes := len(line) - len(strings.TrimLeft(line, "#")); !inFence && hashes > 0 && hashes <= level && strings.HasPrefix(line[hashes:], " ") {
			section = section[:end]
			break
		}
		end += len(line) + 1
	}
	q := &quickstart{}
	var block string // "" outside a fence, else its language
	var pending string
	yamlBlocks := 0
	for line := range strings.SplitSeq(section, "\n") {
		if fence, ok := strings.CutPrefix(line, "```"); ok {
			if block == "" {
				block = strings.TrimSpace(fence)
				if block == "" {
					block = "text"
				}
				if block == "yaml" {
					yamlBlocks++
				}
			} else {
				block = ""
			}
			continue
		}
		switch block {
		case "yaml":
			if yamlBlocks == 1 {
				q.values += line + "\n"
			}
		case "sh":
			// A comment starts at "#" after a space (or at the line's start); the commands
			// hold no "#" otherwise.
			if k := strings.Index(line, " #"); k >= 0 {
				line = line[:k]
			}
			if strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue
			}
			line = strings.TrimSpace(line)
			if cont, ok := strings.CutSuffix(line, `\`); ok {
				pending += strings.TrimSpace(cont) + " "
				continue
			}
			if cmd := strings.TrimSpace(pending + line); cmd != "" {
				q.cmds = append(q.cmds, cmd)
			}
			pending = ""
		}
	}
	if block != "" || pending != "" {
		return nil, fmt.Errorf("the section ends inside a code block or a continued command")
	}
	if len(q.cmds) == 0 {
		return nil, fmt.Errorf("the section %q has no commands", heading)
	}
	q.used = make([]bool, len(q.cmds))
	return q, nil
}

// take returns the fields of the README command that begins with prefix, each "…" replaced by
// the next of fill in order; it fails the test unless exactly one unused command matches and
// the fill covers every "…".
func (q *quickstart) take(prefix string, fill ...string) []string {
	q.t.Helper()
	i := q.find(prefix)
	fields := strings.Fields(q.cmds[i])
	for k, f := range fields {
		for strings.Contains(f, "…") {
			if len(fill) == 0 {
				fatalf(q.t, "README command %q: nothing to fill its %q with", q.cmds[i], f)
			}
			f = strings.Replace(f, "…", fill[0], 1)
			fill = fill[1:]
		}
		fields[k] = f
	}
	if len(fill) > 0 {
		fatalf(q.t, "README command %q has fewer placeholders than the suite fills", q.cmds[i])
	}
	q.used[i] = true
	q.t.Logf("%s: %s", q.doc, q.cmds[i])
	return fields
}

// skip marks the README command that begins with prefix as deliberately not run, and says why.
func (q *quickstart) skip(prefix, why string) {
	q.t.Helper()
	i := q.find(prefix)
	q.used[i] = true
	q.t.Logf("%s (not run here: %s): %s", q.doc, why, q.cmds[i])
}

// has reports whether an unused command begins with prefix.
func (q *quickstart) has(prefix string) bool {
	for i, c := range q.cmds {
		if !q.used[i] && strings.HasPrefix(c, prefix) {
			return true
		}
	}
	return false
}

func (q *quickstart) find(prefix string) int {
	q.t.Helper()
	var at []int
	for i, c := range q.cmds {
		if !q.used[i] && strings.HasPrefix(c, prefix) {
			at = append(at, i)
		}
	}
	if len(at) != 1 {
		fatalf(q.t, "%s has %d unused commands beginning %q, want 1: %q", q.doc, len(at), prefix, q.cmds)
	}
	return at[0]
}

// done fails the test for every README command the suite neither ran nor skipped.
func (q *quickstart) done() {
	q.t.Helper()
	for i, c := range q.cmds {
		if !q.used[i] {
			errorf(q.t, "%s has a command the node suite does not follow: %q", q.doc, c)
		}
	}
}

func TestParseQuickstart(t *testing.T) {
	readme := "# x\n## Quickstart: Kubernetes\ntext\n```sh\nmake image   # builds\n# a comment\nkubectl create secret generic s --from-literal=a=… \\\n" +
		"  --from-literal=b=…   # two\n```\n```yaml\na: 1\n```\n## Next\n```sh\nnot this\n```\n"
	q, err := parseSection(readme, "## Quickstart: Kubernetes")
	if err != nil {
		fatal(t, err)
	}
	want := []string{"make image", "kubectl create secret generic s --from-literal=a=… --from-literal=b=…"}
	if !slices.Equal(q.cmds, want) || q.values != "a: 1\n" {
		fatalf(t, "commands %q values %q", q.cmds, q.values)
	}
	q.t = t
	if got := q.take("kubectl create secret", "x", "y"); !slices.Equal(got, []string{"kubectl", "create", "secret", "generic", "s", "--from-literal=a=x", "--from-literal=b=y"}) {
		errorf(t, "take: %q", got)
	}
	for _, bad := range []string{"", "## Quickstart: Kubernetes\n```sh\nopen\n", "## Quickstart: Kubernetes\n```sh\nx \\\n```\n```yaml\na: 1\n```\n",
		"## Quickstart: Kubernetes\n```yaml\na: 1\n```\n", "## Quickstart: Kubernetes\n## Next\n```sh\nx\n```\n"} {
		if _, err := parseSection(bad, "## Quickstart: Kubernetes"); err == nil {
			errorf(t, "parseSection(%q) accepted", bad)
		}
	}
	// A subsection belongs to its section; the next heading of the same level ends it.
	q, err = parseSection("## A\n```sh\none\n```\n### B\n```sh\ntwo\n```\n## C\n```sh\nthree\n```\n", "## A")
	if err != nil || !slices.Equal(q.cmds, []string{"one", "two"}) {
		errorf(t, "sections: %q %v", q.cmds, err)
	}
	// The repository's documents parse.
	for _, d := range [][2]string{{"README.md", "## Quickstart: Kubernetes"}, {"docs/operations.md", "## Upgrading"}, {"docs/operations.md", "## Uninstalling"}} {
		if _, err := parseSection(mustRead(t, "../../"+d[0]), d[1]); err != nil {
			errorf(t, "%s: %v", d[0], err)
		}
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		fatal(t, err)
	}
	return string(b)
}
