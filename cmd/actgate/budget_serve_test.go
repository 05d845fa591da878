package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/mcpproxy"
	"github.com/actgate/actgate/internal/standalone"
)

// TestServeBudgetRace: 64 concurrent calls of one agent against one budget (20 calls and 30 EUR
// per day, 2 EUR each) through a real `actgate serve` and a real upstream MCP server, over the
// go-sdk client: the budget is never overspent — exactly 15 calls reach the upstream (its own
// count), every other is refused with EF_BUDGET_EXCEEDED — and `actgate budgets` shows 15/20
// calls and 30/30 EUR spent.
func TestServeBudgetRace(t *testing.T) {
	g := startTestGate(t)
	g.stop()
	b, err := os.ReadFile(g.cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.Replace(string(b), "    tools: [get_balance]\n    consequenceClass: INFORMATIONAL\n",
		"    tools: [get_balance]\n    consequenceClass: INFORMATIONAL\n    budgets:\n    - name: daily\n      window: {calendar: Day, timeZone: Europe/Berlin}\n"+
			"      maxCalls: 20\n      sum: {pointer: /amount, max: \"30.00\", unit: EUR}\n", 1)
	if doc == string(b) {
		t.Fatal("the demo policy has no balances rule")
	}
	if err := os.WriteFile(g.cfgFile, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	g.start()
	cs := g.agent()
	var wg sync.WaitGroup
	results := make([]*mcp.CallToolResult, 64)
	errs := make([]error, 64)
	for i := range results {
		wg.Go(func() {
			args := json.RawMessage(fmt.Sprintf(`{"account":"acct-%d","amount":"2.00"}`, i))
			results[i], errs[i] = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_balance", Arguments: args})
		})
	}
	wg.Wait()
	var ran, exceeded int
	for i, res := range results {
		switch {
		case errs[i] != nil:
			t.Errorf("call %d: %v", i, errs[i])
		case !res.IsError:
			ran++
		case res.Meta[mcpproxy.MetaEFCode] == string(ef.EFBudgetExceeded):
			exceeded++
		default:
			t.Errorf("call %d: %+v", i, res)
		}
	}
	if n := g.up.Count("get_balance"); ran != 15 || exceeded != 49 || n != 15 {
		t.Fatalf("%d ran, %d refused EF_BUDGET_EXCEEDED, the upstream counted %d; want 15, 49, 15", ran, exceeded, n)
	}
	code, out, errOut := g.cli("budgets", "--as", "alice", "--json")
	if code != 0 {
		t.Fatalf("actgate budgets: exit %d: %s", code, errOut)
	}
	var list []standalone.BudgetJSON
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(list) != 1 || list[0].Budget != "daily" || list[0].Rule != "balances" || list[0].Key != g.cfg.Agent.Name ||
		list[0].Calls != 15 || list[0].RemainingCalls != 5 || list[0].Amount != "30" || list[0].RemainingAmount != "0" || list[0].Unit != "EUR" {
		t.Fatalf("actgate budgets: %+v", list)
	}
	if code, out, _ := g.cli("budgets", "--as", "alice"); code != 0 || !strings.Contains(out, "15/20") || !strings.Contains(out, "30/30 EUR") {
		t.Fatalf("actgate budgets table: exit %d\n%s", code, out)
	}
}
