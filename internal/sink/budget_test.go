package sink

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/actgate/actgate/internal/budget"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/policy"
)

// budgetPolicy is a ToolPolicy whose transfer tool (evidence None) has a daily budget of 3
// calls and 1000 EUR in Europe/Berlin; onExceed is Deny or Escalate.
func budgetPolicy(onExceed string) string {
	return `apiVersion: actgate.io/v1alpha1
kind: ToolPolicy
metadata: {name: payments, namespace: default}
spec:
  podSelector: {}
  sink: {id: sink-test}
  servers:
  - {name: pay, url: ` + payURL + `}
  rules:
  - name: transfers
    servers: [pay]
    tools: [transfer]
    consequenceClass: FINANCIAL
    evidence: {principals: [alice]}
    alternatives:
    - {label: Dry run, reasoning: Pays nothing., args: {dry_run: true}}
    budgets:
    - name: daily
      window: {calendar: Day, timeZone: Europe/Berlin}
      maxCalls: 3
      sum: {pointer: /amount, max: "1000.00", unit: EUR}
      onExceed: ` + onExceed + `
`
}

func budgetFixture(t testing.TB, onExceed string) *fixture {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(budgetPolicy(onExceed)), 0o600); err != nil {
		t.Fatal(err)
	}
	spec, err := policy.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := policy.Compile("default/payments", spec, 7)
	if err != nil {
		t.Fatal(err)
	}
	return newFixture(t, func(o *Options) { o.Policy = CompiledPolicy(c) })
}

func transfer(session, amount string) Call {
	return call(session, "pay", "transfer", `{"amount":`+amount+`,"to":"DE89370400440532013000"}`)
}

// usage reads what the store's ledger holds for the transfers budget of agent-1 now.
func (f *fixture) usage() (int64, string) {
	f.t.Helper()
	w, _ := budget.NewWindow(0, budget.CalendarDay, "Europe/Berlin")
	id, _ := budget.LedgerID(budget.Ref{Namespace: "default", Policy: "payments", Rule: "transfers"}, "daily", agentID, w, w.Span(f.clock.Now()))
	u, err := f.store.Usage(context.Background(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	n, sum := u.Spent(f.clock.Now())
	return n, sum.String()
}

// TestBudgetDeny: a budgeted rule of evidence None runs through a consumed authority; calls are
// charged exactly (never through a float), a call over the sum or count is refused with
// EF_BUDGET_EXCEEDED and the numbers, nothing dispatched; an upstream FAILED gives the share
// back; the next day starts empty.
func TestBudgetDeny(t *testing.T) {
	f := budgetFixture(t, "Deny")
	if r := f.handle(transfer("s1", `600.10`)); !r.Invoked || r.State != journal.StateExecuted || r.OperationID == "" {
		t.Fatalf("first transfer: %+v", r)
	}
	if n, sum := f.usage(); n != 1 || sum != "600.1" {
		t.Fatalf("after 600.10: %d calls, %s", n, sum)
	}
	r := f.handle(transfer("s1", `"399.91"`))
	wantDeny(t, r, ef.EFBudgetExceeded)
	if !strings.Contains(r.Message, "600.1 of 1000 EUR") || !strings.Contains(r.Message, "399.91") {
		t.Fatalf("the refusal does not state the numbers: %q", r.Message)
	}
	if r := f.handle(transfer("s1", `"399.90"`)); !r.Invoked {
		t.Fatalf("exactly to the limit: %+v", r)
	}
	// An upstream FAILED gives the share back.
	f.up.outcome = OutcomeFailed
	f.clock.Advance(1)
	if r := f.handle(transfer("s2", `0`)); !r.Invoked || r.State != journal.StateFailed {
		t.Fatalf("a failing transfer: %+v", r)
	}
	f.up.outcome = OutcomeExecuted
	if n, sum := f.usage(); n != 2 || sum != "1000" {
		t.Fatalf("after a FAILED call: %d calls, %s; want 2, 1000", n, sum)
	}
	if r := f.handle(transfer("s3", `0`)); !r.Invoked {
		t.Fatalf("the third call of 3: %+v", r)
	}
	wantDeny(t, f.handle(transfer("s4", `0`)), ef.EFBudgetExceeded)
	// Unreadable amounts are refused, not counted as zero.
	for _, bad := range []string{`-5`, `1e3`, `"ten"`, `null`, `0.30000000000000000001`} {
		wantDeny(t, f.handle(transfer("s5", bad)), ef.EFBudgetLimit)
	}
	if got := f.up.count("transfer"); got != 4 {
		t.Fatalf("upstream ran %d transfers, want 4", got)
	}
	// Midnight in Berlin (23:00 UTC in winter) starts a new window.
	f.clock.Advance(24 * 3600 * 1e9)
	if r := f.handle(transfer("s6", `1000`)); !r.Invoked {
		t.Fatalf("the next day: %+v", r)
	}
	var refused int
	for _, rc := range f.receipts() {
		if rc.Code == string(ef.EFBudgetExceeded) {
			refused++
		}
	}
	if refused != 2 {
		t.Fatalf("%d receipts record EF_BUDGET_EXCEEDED, want 2", refused)
	}
}

// TestBudgetEscalate: over an Escalate budget the call is refused with a binding moment whose
// findings state the budget, what was spent, the limit, the window end and what the call adds;
// the principal's choice of the requested call lets exactly that call run once, charged over the
// limit (Enforce false).
func TestBudgetEscalate(t *testing.T) {
	f := budgetFixture(t, "Escalate")
	if r := f.handle(transfer("s1", `900`)); !r.Invoked {
		t.Fatalf("first transfer: %+v", r)
	}
	r := f.handle(transfer("s1", `250`))
	wantDeny(t, r, ef.EFEscalationRequired)
	if r.Moment == nil || r.Moment.Envelope == nil {
		t.Fatalf("no binding moment: %+v", r)
	}
	var finding string
	for _, x := range r.Moment.Envelope.Content().Findings {
		if strings.HasPrefix(x, "Budget daily") {
			finding = x
		}
	}
	for _, want := range []string{"rule transfers", "1 of 3 calls", "900 of 1000 EUR", "this call adds 1 call and 250 EUR", "2026-07-28T00:00:00+02:00"} {
		if !strings.Contains(finding, want) {
			t.Fatalf("budget finding %q lacks %q", finding, want)
		}
	}
	if f.up.count("transfer") != 1 {
		t.Fatal("the escalated call ran")
	}
	if _, err := f.resolve(r.Moment, "alice", "option", 0, ""); err != nil {
		t.Fatal(err)
	}
	if r := f.handle(transfer("s1", `250`)); !r.Invoked || r.State != journal.StateExecuted {
		t.Fatalf("the approved call: %+v", r)
	}
	if n, sum := f.usage(); n != 2 || sum != "1150" {
		t.Fatalf("after the approved call: %d calls, %s; want 2, 1150", n, sum)
	}
	// The grant was for that call once: the same call in another session escalates again.
	wantDeny(t, f.handle(transfer("s2", `250`)), ef.EFEscalationRequired)
	if f.up.count("transfer") != 2 {
		t.Fatalf("upstream ran %d transfers, want 2", f.up.count("transfer"))
	}
}

// TestBudgetRaceThroughGate: 64 concurrent callers of one 3-call budget through the gate and the
// real embedded store: every check before deciding may pass, the consume commit decides — exactly
// 3 run (the upstream's count), every other is refused EF_BUDGET_EXCEEDED.
func TestBudgetRaceThroughGate(t *testing.T) {
	f := budgetFixture(t, "Deny")
	var wg sync.WaitGroup
	results := make([]Result, 64)
	for i := range results {
		wg.Go(func() {
			res, err := f.gate.Handle(context.Background(), transfer(fmt.Sprint("s", i), fmt.Sprint(i+1)), f.up.invoker("transfer"))
			if err != nil && !errors.Is(err, ErrUpstream) {
				t.Error(err)
			}
			results[i] = res
		})
	}
	wg.Wait()
	var ran, exceeded int
	for _, r := range results {
		switch {
		case r.Invoked:
			ran++
		case r.Code == ef.EFBudgetExceeded:
			exceeded++
		default:
			t.Errorf("unexpected result %+v", r)
		}
	}
	if ran != 3 || exceeded != 61 || f.up.count("transfer") != 3 {
		t.Fatalf("%d ran, %d exceeded, upstream %d; want 3, 61, 3", ran, exceeded, f.up.count("transfer"))
	}
	if n, _ := f.usage(); n != 3 {
		t.Fatalf("ledger holds %d calls", n)
	}
}
