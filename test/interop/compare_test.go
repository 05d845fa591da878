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

	// Event ids: the gate's answer streams are resumable when the upstream's are (ids of the
	// gate's own, priming, retry, close and Last-Event-ID resumption). The standalone GET
	// stream is the gate's SDK session's: it has ids (an event store) but no priming event,
	// so a GET stream that carries no message has none.
	"walk/http: GET": "[event ids] a GET stream without messages has no priming event, so no ids",
	// server-everything sends messages the TS client rejects (direct only); the gate reads
	// the upstream's events and passes on JSON-RPC messages only.
	"walk/client errors": "[event bytes] the TS client rejects an event server-everything sends (direct only); the gate does not relay the upstream's events byte for byte",

	// Conformance 0.2.0, 2026-07-28 requirements, through the gate in front of server2026.mjs
	// serving the 2025 revisions only, with sessions (the direct column is the same server serving
	// 2026-07-28). A 2025 server asks for input with server-to-client requests during the call,
	// which the gate turns into input_required rounds; those requests carry no inputRequests key,
	// so the gate names each round's keys itself, and the server's tools read the per-request
	// capability envelope, which a 2025 session does not have.
	"conformance-0.2.0/2026-07-28/legacy/input-required-result-basic-elicitation":   "[input required keys] the scenario expects the tool's own key (user_name); a 2025 server's elicitation/create carries none, so the gate's round names it r1-1",
	"conformance-0.2.0/2026-07-28/legacy/input-required-result-ignore-extra-params": "[input required keys] inputResponses sent without a requestState name the tool's own keys, which a 2025 server's requests do not carry: the gate cannot match them, and the round is asked (WARNING, a SHOULD)",
	"conformance-0.2.0/2026-07-28/legacy/input-required-result-capability-check":    "[capability envelope] the legacy server's tool reads the request's clientCapabilities envelope, absent on a 2025 session, so it asks for nothing (the gate does declare the agent's capabilities at the session's initialize)",
	"conformance-0.2.0/2026-07-28/legacy/server-stateless":                          "[subscriptions/listen] not offered toward a 2025 upstream (-32601: 5 stream checks); [capability envelope] the legacy server's test_streaming_elicitation reads the request's clientCapabilities envelope, absent on a 2025 session, and refuses (-32021)",

	// The TypeScript SDK v2 walk (walk2.mjs).
	"walk2/reference/2025-11-25/elicitation": "[elicitation order] the agent's answer reaches the upstream with its content's members in sorted order (the same members and values): it crosses the SDK's types",
	"walk2/modern/2025-11-25/progress":       "[progress, sessionless 2025 upstream] an upstream serving 2025-11-25 without sessions (the SDK's stateless fallback) is called through the SDK client session, whose notifications go to the agent's GET stream, not the call's answer stream",

	// Conformance 0.2.0, 2025-11-25 requirements, against the reference server (0.1.16's copy).
	"conformance-0.2.0/2025-11-25/reference/server-session-lifecycle": "[session] after DELETE the gate answers the ended session 404 (the gate's own session, as the spec says); the reference server answers 400",
	"conformance-0.2.0/2025-11-25/reference/server-sse-polling":       "[event ids] a tools/call whose upstream closes its stream mid-call keeps the agent's stream open (the gate resumes upstream itself), so the disconnect-resume check sees no close (INFO, not SUCCESS)",
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
