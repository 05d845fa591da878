package act_test

import (
	"bytes"
	"fmt"
	"time"

	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/ef"
)

// A Chat Completions message with two parallel calls becomes two acts (tool-use-binding §12
// PARALLEL_PAY_AND_SEARCH); a refused call is answered in the vendor's shape.
func ExampleMapOpenAIToolCalls() {
	ids, _ := act.NewIDIssuer(bytes.Repeat([]byte{1}, 32), nil) // a real key comes from a Secret
	mc := act.MappingContext{
		SessionID: "sess-55",
		Principal: act.Principal{PrincipalID: "alice@example.com"},
		Agent:     act.Agent{AgentID: "agent-1"},
		SinkID:    "host-dispatch-1",
		Now:       time.Now,
		TTL:       5 * time.Minute,
		IDs:       ids,
	}
	items, err := act.MapOpenAIToolCalls([]byte(`{"role":"assistant","tool_calls":[
		{"id":"call_1","type":"function","function":{"name":"search","arguments":"{\"q\":\"weather\"}"}},
		{"id":"call_2","type":"function","function":{"name":"payout_create","arguments":"{\"amount\":\"150.00\",\"currency\":\"EUR\",\"beneficiary\":\"vendor-441\"}"}}]}`), mc)
	if err != nil {
		panic(err)
	}
	for _, it := range items {
		a := it.Candidate.Act
		fmt.Println(it.VendorID, a.Tool.ToolID, a.ActType, a.ConsequenceClass, a.ArgumentsDigest.Value[:19])
	}
	out, _ := act.OpenAIChatToolMessage(items[1].VendorID, act.Denial{Code: ef.EFEscalationRequired})
	fmt.Println(string(out))
	// Output:
	// call_1 search TOOL_CALL INFORMATIONAL sha256:4c3e32ba8040
	// call_2 payout_create TOOL_CALL FINANCIAL sha256:474b15e6df36
	// {"role":"tool","tool_call_id":"call_2","content":"{\"error\":{\"code\":\"EF_ESCALATION_REQUIRED\",\"message\":\"This tool requires a human decision before it can run.\",\"retryable\":false,\"invoked\":false}}"}
}
