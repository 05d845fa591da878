package sink

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/authority/boltstore"
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

// budgetBenchFixture is compiledFixture with, when withBudget, a daily budget on the tickets
// rule (a machine permit): 1e9 calls by agent, so every call reads and charges one hot ledger.
func budgetBenchFixture(b *testing.B, withBudget bool) *fixture {
	b.Helper()
	spec, err := policy.LoadFile("testdata/policy.yaml")
	if err != nil {
		b.Fatal(err)
	}
	if withBudget {
		n := int64(1_000_000_000)
		for i := range spec.Rules {
			if spec.Rules[i].Name == "tickets" {
				spec.Rules[i].Budgets = []v1alpha1.Budget{{Name: "daily", MaxCalls: &n,
					Window: v1alpha1.BudgetWindow{Calendar: v1alpha1.BudgetCalendarDay, TimeZone: "Europe/Berlin"}}}
			}
		}
	}
	c, err := policy.Compile("default/sink-e2e", spec, 7)
	if err != nil {
		b.Fatal(err)
	}
	return newFixture(b, func(o *Options) { o.Policy = CompiledPolicy(c) })
}

// BenchmarkBudgetCost: what a budget adds to a protected call — the same machine-permit call
// (sign, issue+consume+DISPATCH_PENDING in one fsync'ed group commit, durable receipt, invoke,
// EXECUTED) on two gates, one whose rule has a budget (usage read before deciding, charged in
// the consume commit, settled with EXECUTED) and one without, in interleaved rounds of 200
// calls so both see the same machine state. Reports each one's p50/p99 and the ratios.
// Figures: docs/performance.md "Budgets in the embedded store".
func BenchmarkBudgetCost(b *testing.B) {
	for _, callers := range []int{1, 16} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			plain, budgeted := budgetBenchFixture(b, false), budgetBenchFixture(b, true)
			inv := func(context.Context, string) (InvokeResult, error) {
				return InvokeResult{Result: []byte(`{"content":[{"type":"text","text":"created"}]}`), Outcome: OutcomeExecuted}, nil
			}
			var seq atomic.Int64
			round := func(f *fixture, n int) []time.Duration {
				var mu sync.Mutex
				var wg sync.WaitGroup
				out := make([]time.Duration, 0, n)
				var left atomic.Int64
				left.Store(int64(n))
				for range callers {
					wg.Go(func() {
						for left.Add(-1) >= 0 {
							i := seq.Add(1)
							c := call(fmt.Sprintf("s%d", i%64), "tools", "ticket_create", fmt.Sprintf(`{"title":"ticket %d","priority":2}`, i))
							start := time.Now()
							res, err := f.gate.Handle(context.Background(), c, inv)
							d := time.Since(start)
							if err != nil || !res.Invoked {
								b.Errorf("%+v %v", res, err)
								return
							}
							mu.Lock()
							out = append(out, d)
							mu.Unlock()
						}
					})
				}
				wg.Wait()
				return out
			}
			const per = 200
			var a, bud []time.Duration
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				if i%2 == 0 {
					a = append(a, round(plain, per)...)
					bud = append(bud, round(budgeted, per)...)
				} else {
					bud = append(bud, round(budgeted, per)...)
					a = append(a, round(plain, per)...)
				}
			}
			b.StopTimer()
			q := func(lat []time.Duration, p float64) float64 {
				slices.Sort(lat)
				return float64(lat[int(p*float64(len(lat)-1))].Nanoseconds()) / 1e3
			}
			if len(a) == 0 || len(bud) == 0 {
				return
			}
			b.ReportMetric(q(a, 0.5), "plain-p50-µs")
			b.ReportMetric(q(a, 0.99), "plain-p99-µs")
			b.ReportMetric(q(bud, 0.5), "budget-p50-µs")
			b.ReportMetric(q(bud, 0.99), "budget-p99-µs")
			b.ReportMetric(q(bud, 0.5)/q(a, 0.5), "ratio-p50")
			b.ReportMetric(q(bud, 0.99)/q(a, 0.99), "ratio-p99")
			w, _ := budget.NewWindow(0, budget.CalendarDay, "Europe/Berlin")
			now := budgeted.clock.Now()
			id, _ := budget.LedgerID(budget.Ref{Namespace: "default", Policy: "sink-e2e", Rule: "tickets"}, "daily", agentID, w, w.Span(now))
			u, err := budgeted.store.Usage(context.Background(), id)
			if n, _ := u.Spent(now); err != nil || n != int64(len(bud)) {
				b.Fatalf("the budget counted %d of %d calls (%v)", n, len(bud), err)
			}
		})
	}
}

// TestBudgetWithoutLedgerRefuses: a gate that cannot count (no ledger, a store that cannot
// charge in its consume) refuses a budgeted call with EF_BUDGET_LIMIT and never invokes it.
func TestBudgetWithoutLedgerRefuses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(budgetPolicy("Deny")), 0o600); err != nil {
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
	f := newFixture(t, func(o *Options) { o.Policy = CompiledPolicy(c); o.Store = storeOnly{o.Store.(*boltstore.Store)} })
	wantDeny(t, f.handle(transfer("s1", `1`)), ef.EFBudgetLimit)
	if f.up.count("transfer") != 0 {
		t.Fatal("a budgeted call ran on a gate that cannot count it")
	}
}
