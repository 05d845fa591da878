package faults

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/gateconfig"
	"github.com/actgate/actgate/test/envtest"
)

// raceBudget makes callers concurrent calls of the protected tool at endpoint, each from its own
// agent session with its own arguments, and returns how many ran; every other call must be
// refused EF_BUDGET_EXCEEDED.
func raceBudget(t *testing.T, endpoint string, callers int) int {
	t.Helper()
	sessions := make([]*mcp.ClientSession, callers)
	for i := range sessions {
		sessions[i] = agent(t, endpoint)
	}
	results := make([]*mcp.CallToolResult, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i], errs[i] = callTool(sessions[i], protectedTool, fmt.Sprintf(`{"title":"ticket %d"}`, i), time.Minute)
		}()
	}
	close(start)
	wg.Wait()
	ran := 0
	for i, res := range results {
		switch {
		case errs[i] != nil:
			t.Fatalf("call %d: %v", i, errs[i])
		case !res.IsError:
			ran++
		case efCode(res) != string(ef.EFBudgetExceeded):
			t.Fatalf("call %d: %s, want EF_BUDGET_EXCEEDED", i, js(res))
		}
	}
	return ran
}

// TestBudgetRaceServeProcess: 64 concurrent agents call a machine-permit tool through a real
// `actgate serve` process under a budget of 20 calls a day (docs/api.md "Budgets"): the
// upstream receives exactly 20 calls, its own count, every other call is refused
// EF_BUDGET_EXCEEDED; after a restart of the process the budget is still spent.
func TestBudgetRaceServeProcess(t *testing.T) {
	const limit, callers = 20, 64
	up := startUpstream(t, false, nil)
	s := newStandalone(t, up.URL, 5*time.Second)
	raw, err := os.ReadFile(s.cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	budgeted := strings.Replace(string(raw), "    tools: [ticket_create]\n", fmt.Sprintf("    tools: [ticket_create]\n    budgets:\n    - name: daily\n"+
		"      window: {calendar: Day, timeZone: Europe/Berlin}\n      maxCalls: %d\n", limit), 1)
	if budgeted == string(raw) {
		t.Fatal("testdata/actgate.yaml has no ticket_create rule to budget")
	}
	if err := os.WriteFile(s.cfgFile, []byte(budgeted), 0o600); err != nil {
		t.Fatal(err)
	}
	if s.cfg, err = gateconfig.Load(s.cfgFile); err != nil {
		t.Fatal(err)
	}
	p := s.start(t)
	ran := raceBudget(t, p.endpoint(), callers)
	if got := up.Count(protectedTool); got != limit || ran != limit {
		t.Fatalf("the upstream received %d calls (%d answered as run); the budget is %d", got, ran, limit)
	}
	p.stop(t)
	p = s.start(t)
	defer p.stop(t)
	if res := mustCall(t, agent(t, p.endpoint()), protectedTool, `{"title":"after the restart"}`); !res.IsError ||
		efCode(res) != string(ef.EFBudgetExceeded) || up.Count(protectedTool) != limit {
		t.Fatalf("a call after the restart: %s (upstream %d), want EF_BUDGET_EXCEEDED", js(res), up.Count(protectedTool))
	}
}

// TestBudgetRaceProcesses: 64 concurrent agents call a machine-permit tool through the real
// `actgate sidecar` process, against the real authority service process and API server, under a
// daily budget of 20 calls (docs/api.md "Budgets"). The upstream receives exactly 20 calls, its
// own count; every other call is refused EF_BUDGET_EXCEEDED and never sent; the BudgetLedger
// says 20 calls; the journal holds exactly the 20 that ran.
func TestBudgetRaceProcesses(t *testing.T) {
	const limit, callers = 20, 64
	r := newK8sRig(t, rigOptions{})
	ctx := context.Background()
	p := &v1alpha1.ToolPolicy{}
	if err := r.env.Client.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: "tools"}, p); err != nil {
		t.Fatal(err)
	}
	for i := range p.Spec.Rules {
		if p.Spec.Rules[i].Name == "tickets" {
			p.Spec.Rules[i].Budgets = []v1alpha1.Budget{{Name: "daily", MaxCalls: ptr.To[int64](limit),
				Window: v1alpha1.BudgetWindow{Calendar: v1alpha1.BudgetCalendarDay, TimeZone: "Europe/Berlin"}}}
		}
	}
	if err := r.env.Client.Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	envtest.AcceptPolicy(t, r.env.Client, p, 2)
	endpoint, proc := r.startSidecar(t, "")
	defer proc.stop(t)

	ran := raceBudget(t, endpoint, callers)
	if got := r.up.Count(protectedTool); got != limit || ran != limit {
		t.Fatalf("the upstream received %d calls (%d answered as run); the budget is %d", got, ran, limit)
	}
	ledgers := &v1alpha1.BudgetLedgerList{}
	if err := r.env.Client.List(ctx, ledgers, client.InNamespace(r.ns)); err != nil {
		t.Fatal(err)
	}
	if len(ledgers.Items) != 1 || ledgers.Items[0].Status.Spent != fmt.Sprintf("%d calls", limit) {
		t.Fatalf("ledgers: %s", js(ledgers.Items))
	}
	proc.stop(t)
	if recs := r.readJournal(t); len(recs) != limit {
		t.Fatalf("journal holds %d records, want the %d calls that ran: %s", len(recs), limit, js(recs))
	}
}
