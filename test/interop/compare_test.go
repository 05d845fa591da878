package interop

import (
	"fmt"
	"sort"
	"strings"
	"testing"
)

// knownDifferences are the differences the gate still makes, each named by what differs
// ("conformance/{server}/{scenario}" or "walk/{feature}") with the item of the MCP-fidelity
// issue it belongs to and why it is not fixed. docs/api.md "MCP through the gate" lists the same
// entries. A listed difference that no longer differs fails the test too, so the list stays
// true.
var knownDifferences = map[string]string{}

// row is one line of a comparison table.
type row struct {
	name, direct, gated string
	same                bool
}

// report logs the table and fails on every difference not in knownDifferences, and on every
// entry of knownDifferences under prefix that no longer differs.
func report(t *testing.T, title, prefix string, rows []row) {
	t.Helper()
	sort.Slice(rows, func(i, j int) bool { return rows[i].name < rows[j].name })
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n%-44s | %-28s | %-28s | %s\n", title, "", "direct", "gated", "")
	seen := map[string]bool{}
	for _, r := range rows {
		key := prefix + r.name
		seen[key] = true
		verdict := "same"
		reason, known := knownDifferences[key]
		switch {
		case !r.same && known:
			verdict = "differs (known: " + reason + ")"
		case !r.same:
			verdict = "DIFFERS"
			t.Errorf("%s: differs through the gate\n  direct: %s\n  gated:  %s", key, r.direct, r.gated)
		case known:
			t.Errorf("%s: listed in knownDifferences (%s) but no longer differs: remove the entry (and its docs/api.md line)", key, reason)
		}
		fmt.Fprintf(&b, "%-44s | %-28s | %-28s | %s\n", r.name, clip(r.direct, 28), clip(r.gated, 28), verdict)
	}
	for key, reason := range knownDifferences {
		if strings.HasPrefix(key, prefix) && !seen[key] {
			t.Errorf("%s: listed in knownDifferences (%s) but not run", key, reason)
		}
	}
	t.Log(b.String())
}

func clip(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > n {
		return s[:n-1] + "…"
	}
	return s
}
