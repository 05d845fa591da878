package interop

import (
	"fmt"
	"sort"
	"strings"
	"testing"
)

// knownDifferences are the differences the gate still makes, each named by what differs
// ("conformance/{server}/{scenario}" or "walk/{feature}") with why it is not fixed; the row of
// docs/api.md "MCP through the gate", "Known differences" it belongs to is named in brackets.
// A listed difference that no longer differs fails the test too, so the list stays true.
var knownDifferences = map[string]string{
	// The gate's own protection, not a difference to remove: its loopback listener refuses a
	// request whose Host is not loopback (DNS rebinding); server-everything does not.
	"conformance/everything/dns-rebinding-protection": "the gate refuses non-loopback Host headers (docs/security.md); server-everything accepts them",

	// Conformance 0.2.0, 2026-07-28 requirements, through the gate in front of server2026.mjs
	// serving the 2025 revisions only, with sessions (the direct column is the same server serving
	// 2026-07-28). A 2025 server asks for input with server-to-client requests during the call,
	// which the gate turns into input_required rounds; those requests carry no inputRequests key,
	// so the gate names each round's keys itself.
	"conformance-0.2.0/2026-07-28/legacy/input-required-result-basic-elicitation":   "[input required keys] the scenario expects the tool's own key (user_name); a 2025 server's elicitation/create carries none, so the gate's round names it r1-1",
	"conformance-0.2.0/2026-07-28/legacy/input-required-result-ignore-extra-params": "[input required keys] inputResponses sent without a requestState name the tool's own keys, which a 2025 server's requests do not carry: the gate cannot match them, and the round is asked (WARNING, a SHOULD)",

	// The TypeScript SDK v2 walk (walk2.mjs).
}

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
