package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
)

// Status is a check's verdict.
type Status string

// Verdicts. NA is never counted as passing: it says the target has nothing to check.
const (
	StatusPass Status = "PASS"
	StatusFail Status = "FAIL"
	StatusNA   Status = "N/A"
)

// Check names (the invariants the package documentation lists).
const (
	CheckSingleUse          = "authority-single-use"
	CheckUpstreamExecuted   = "upstream-equals-executed"
	CheckNoDangling         = "no-dangling-dispatch"
	CheckDeniedNeverReached = "denied-never-reached"
	CheckReceiptChain       = "receipt-chain"
	CheckExpectedAnswers    = "expected-answers"
)

// Check is one named invariant's verdict over one run.
type Check struct {
	Name   string   `json:"name"`
	Status Status   `json:"status"`
	Detail string   `json:"detail"`
	Errors []string `json:"errors,omitempty"`
}

// Consumption is a consumed authority as the authority store records it.
type Consumption struct {
	AuthorityID string
	// ConsumedBy is the operation that consumed it (bbolt ConsumedBy, Lease holderIdentity, or
	// the permit record of a pod's Permit on its Act).
	ConsumedBy string
}

// HotAllow is a hot-path allow as the sink recorded it (a receipt with no authority).
type HotAllow struct {
	Tool        string
	OperationID string
}

// ReceiptCheck is the outcome of verifying a receipt log.
type ReceiptCheck struct {
	Receipts int
	Err      error
}

// World is what a run left behind, read after the sink stopped.
type World struct {
	// Upstream is every invocation the protected upstream ran, from its own record.
	Upstream []mcptest.Call
	// Dispatches is every record of the sink's dispatch journal.
	Dispatches []journal.DispatchRecord
	// Consumed lists every consumed authority of the authority store.
	Consumed []Consumption
	// HotAllows are the hot-path allows the sink recorded: the allow receipts without authority
	// of its receipt log (the standalone gate's or the sidecar's).
	HotAllows []HotAllow
	// HotSource names where HotAllows come from, for the report.
	HotSource string
	// Receipts is the receipt log's verification; nil when the target writes none.
	Receipts *ReceiptCheck
	// ReceiptsNA says why Receipts is nil.
	ReceiptsNA string
}

// maxErrors bounds the errors a check lists.
const maxErrors = 10

type problems []string

func (p *problems) add(format string, args ...any) {
	*p = append(*p, fmt.Sprintf(format, args...))
}

func verdict(name, detail string, p problems) Check {
	c := Check{Name: name, Status: StatusPass, Detail: detail}
	if len(p) > 0 {
		c.Status = StatusFail
		c.Errors = p
		if len(p) > maxErrors {
			c.Errors = append(p[:maxErrors:maxErrors], fmt.Sprintf("… and %d more", len(p)-maxErrors))
		}
	}
	return c
}

// RunChecks evaluates every invariant over a run's world and the agents' tally.
func RunChecks(w World, t Tally) []Check {
	return []Check{
		checkSingleUse(w),
		checkUpstreamExecuted(w),
		checkNoDangling(w),
		checkDeniedNeverReached(w, t),
		checkReceipts(w),
		checkExpected(t),
	}
}

// checkSingleUse: each authority consumed at most once (tool-use-binding §16 MUST 4, §22
// T-C): one dispatch record per authority, every record's authority consumed by exactly that
// record's operation, and no consumed authority without its record.
func checkSingleUse(w World) Check {
	var p problems
	byAuth := map[string][]string{}
	for _, d := range w.Dispatches {
		if d.AuthorityID == "" {
			p.add("dispatch %s has no authority", d.OperationID)
			continue
		}
		byAuth[d.AuthorityID] = append(byAuth[d.AuthorityID], d.OperationID)
	}
	consumer := map[string]string{}
	for _, c := range w.Consumed {
		if prev, dup := consumer[c.AuthorityID]; dup {
			p.add("authority %s consumed twice in the store (by %s and %s)", c.AuthorityID, prev, c.ConsumedBy)
		}
		consumer[c.AuthorityID] = c.ConsumedBy
	}
	for _, id := range sortedKeys(byAuth) {
		ops := byAuth[id]
		if len(ops) > 1 {
			p.add("authority %s dispatched %d times (%s)", id, len(ops), strings.Join(ops, ", "))
		}
		by, ok := consumer[id]
		switch {
		case !ok:
			p.add("authority %s was dispatched (%s) but the store does not hold it consumed", id, ops[0])
		case by != ops[0]:
			p.add("authority %s consumed by %q in the store, dispatched by %s", id, by, ops[0])
		}
	}
	for _, id := range sortedKeys(consumer) {
		if _, ok := byAuth[id]; !ok {
			p.add("authority %s consumed by %q with no dispatch record", id, consumer[id])
		}
	}
	return verdict(CheckSingleUse, fmt.Sprintf("%d consumed authorities, %d dispatch records", len(w.Consumed), len(w.Dispatches)), p)
}

// checkUpstreamExecuted: per tool, the upstream's own invocation count equals the journal's
// EXECUTED records plus the hot-path allows, and every invocation carries the operation id of
// one of them (AEB: a dispatch only from a durable DISPATCH_PENDING record).
func checkUpstreamExecuted(w World) Check {
	var p problems
	want := map[string]int{}
	allowedOps := map[string]string{}
	indeterminate := 0
	for _, d := range w.Dispatches {
		switch d.State {
		case journal.StateExecuted:
			want[d.Tool]++
			allowedOps[d.OperationID] = d.Tool
		case journal.StateIndeterminate:
			indeterminate++
		}
	}
	for _, h := range w.HotAllows {
		want[h.Tool]++
		if h.OperationID != "" {
			allowedOps[h.OperationID] = h.Tool
		}
	}
	got := map[string]int{}
	for _, c := range w.Upstream {
		got[c.Tool]++
		tool, ok := allowedOps[c.OperationID]
		switch {
		case c.OperationID == "":
			p.add("upstream ran %s without an operation id", c.Tool)
		case !ok:
			p.add("upstream ran %s as operation %s, which is not an EXECUTED dispatch or a hot-path allow", c.Tool, c.OperationID)
		case tool != c.Tool:
			p.add("operation %s is %s in the sink's records, %s upstream", c.OperationID, tool, c.Tool)
		}
	}
	tools := map[string]bool{}
	for k := range want {
		tools[k] = true
	}
	for k := range got {
		tools[k] = true
	}
	keys := sortedKeys(tools)
	parts := make([]string, 0, len(keys))
	for _, tool := range keys {
		parts = append(parts, fmt.Sprintf("%s %d/%d", tool, got[tool], want[tool]))
		if got[tool] != want[tool] {
			p.add("%s: upstream ran %d, the sink recorded %d (EXECUTED + hot allows)", tool, got[tool], want[tool])
		}
	}
	detail := fmt.Sprintf("upstream/recorded per tool: %s; hot allows from %s; %d INDETERMINATE", strings.Join(parts, ", "), w.HotSource, indeterminate)
	return verdict(CheckUpstreamExecuted, detail, p)
}

// checkNoDangling: nothing is left between consume and outcome (AEB "Classify the Effect
// Outcome"): every record is EXECUTED, FAILED or INDETERMINATE once the sink stopped.
func checkNoDangling(w World) Check {
	var p problems
	states := map[string]int{}
	for _, d := range w.Dispatches {
		states[string(d.State)]++
		if !d.State.Terminal() && d.State != journal.StateIndeterminate {
			p.add("operation %s (%s) left %s", d.OperationID, d.Tool, d.State)
		}
	}
	keys := sortedKeys(states)
	parts := make([]string, 0, len(keys))
	for _, s := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", s, states[s]))
	}
	if len(parts) == 0 {
		parts = []string{"no records"}
	}
	return verdict(CheckNoDangling, strings.Join(parts, ", "), p)
}

// checkDeniedNeverReached: on deny the upstream is never contacted (docs/architecture.md "The flow
// of one call"): no refused call's arguments reached it unless the same call was later allowed
// (an escalation's approved retry), no substitution's arguments ever did, each protected act ran at
// most once (a replay is a recorded result or a refusal, tool-use-binding §9), and the upstream ran
// no more than the agents saw run.
func checkDeniedNeverReached(w World, t Tally) Check {
	var p problems
	seen := map[ToolArgs]int{}
	for _, c := range w.Upstream {
		seen[ToolArgs{Tool: c.Tool, Args: canonArgs(c.Args)}]++
	}
	invoked := map[ToolArgs]bool{}
	for _, a := range t.InvokedArgs {
		invoked[a] = true
	}
	for _, r := range t.Refused {
		if !invoked[r] && seen[r] > 0 {
			p.add("refused call %s %s reached the upstream %d times", r.Tool, r.Args, seen[r])
		}
	}
	for _, s := range t.Substituted {
		if seen[s] > 0 {
			p.add("substituted call %s %s reached the upstream %d times", s.Tool, s.Args, seen[s])
		}
	}
	keys := make([]ToolArgs, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].Tool+keys[i].Args < keys[j].Tool+keys[j].Args })
	for _, k := range keys {
		if !hotTools[k.Tool] && seen[k] > 1 {
			p.add("protected call %s %s ran %d times upstream", k.Tool, k.Args, seen[k])
		}
	}
	total := 0
	for _, n := range t.Invoked {
		total += n
	}
	if len(w.Upstream) > total {
		p.add("the upstream ran %d calls, the agents saw %d run", len(w.Upstream), total)
	}
	detail := fmt.Sprintf("%d refused calls, %d substitutions, %d upstream invocations, %d seen run by the agents",
		len(t.Refused), len(t.Substituted), len(w.Upstream), total)
	return verdict(CheckDeniedNeverReached, detail, p)
}

// checkReceipts: the receipt log verifies (hash chain, signed checkpoints; internal/receipt).
func checkReceipts(w World) Check {
	if w.Receipts == nil {
		return Check{Name: CheckReceiptChain, Status: StatusNA, Detail: w.ReceiptsNA}
	}
	var p problems
	if w.Receipts.Err != nil {
		for _, line := range strings.Split(w.Receipts.Err.Error(), "\n") {
			p.add("%s", line)
		}
	}
	return verdict(CheckReceiptChain, fmt.Sprintf("%d receipts", w.Receipts.Receipts), p)
}

// checkExpected: every call got the answer its kind expects.
func checkExpected(t Tally) Check {
	var p problems
	if t.Unexpected > 0 {
		p = append(p, fmt.Sprintf("%d unexpected answers", t.Unexpected))
		p = append(p, t.Samples...)
	}
	keys := sortedKeys(t.Codes)
	codes := make([]string, 0, len(keys))
	for _, c := range keys {
		codes = append(codes, fmt.Sprintf("%s %d", c, t.Codes[c]))
	}
	if len(codes) == 0 {
		codes = []string{"none"}
	}
	return verdict(CheckExpectedAnswers, fmt.Sprintf("%d calls; refusals: %s", t.Calls, strings.Join(codes, ", ")), p)
}

// Passed reports whether no check failed.
func Passed(cs []Check) bool {
	for _, c := range cs {
		if c.Status == StatusFail {
			return false
		}
	}
	return true
}
