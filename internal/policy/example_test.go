package policy_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/policy"
)

func ExampleCompiled_Evaluate() {
	spec, err := policy.LoadFile("testdata/payments.yaml")
	if err != nil {
		panic(err)
	}
	p, err := policy.Compile("shop/payments", spec, 3)
	if err != nil {
		panic(err)
	}
	call := func(tool, args, provenance string) policy.Request {
		return policy.Request{
			Server:      "payments",
			Destination: "https://payments.example/mcp",
			Tool:        tool,
			Args:        json.RawMessage(args),
			Class:       act.DefaultClass(tool),
			Provenance:  provenance,
			Agent:       "system:serviceaccount:shop:agent",
			StrictArgs:  true,
		}
	}
	ctx := context.Background()
	for _, r := range []policy.Request{
		call("search_invoices", `{"q":"overdue"}`, "user"),
		call("refund", `{"charge":"ch_1"}`, "user"),
		call("send_payment", `{"amount":500,"currency":"EUR"}`, "user"),
		call("send_payment", `{"amount":50000,"currency":"EUR"}`, "user"),
		call("delete_account", `{}`, "user"),
	} {
		d := p.Evaluate(ctx, r)
		fmt.Printf("%-15s %-8s %-22s rule=%s\n", r.Tool, d.Outcome, d.Code, d.Rule)
		if d.Outcome == policy.OutcomeEscalate {
			fmt.Printf("  principals=%v min=%d alternatives=%d\n",
				policy.EligiblePrincipals(d, r.Agent, p.SinkID()), policy.MinPrincipals(d), len(d.Alternatives))
		}
	}
	// Output:
	// search_invoices Allow                           rule=reads
	// refund          Permit                          rule=refund
	// send_payment    Escalate EF_ESCALATION_REQUIRED rule=send-payment
	//   principals=[alice] min=1 alternatives=1
	// send_payment    Deny     EF_POLICY_DENIED       rule=send-payment
	// delete_account  Deny     EF_UNKNOWN_TOOL        rule=
}
