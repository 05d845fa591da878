package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/mcpproxy"
	"github.com/actgate/actgate/internal/policytest"
	"github.com/actgate/actgate/internal/sink"
)

// The decision `actgate policy test` reports for each shipped gate case is what a running gate
// does with that call: every case of testdata/gate/tests is sent by the agent through the
// standalone gate serving the same policy (the demo's, which is testdata/gate's), and the
// upstream is called exactly for allow and permit, a binding moment is registered for
// escalate, and a deny carries the reported EF code with the upstream untouched.
func TestPolicyTestAgreesWithTheGate(t *testing.T) {
	g := startTestGate(t)
	data, err := os.ReadFile("../../testdata/gate/tests/actgate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tf, err := policytest.Parse(data, "actgate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tp, err := policytest.Load(policytest.PolicyRef{GateConfig: g.cfgFile}, "")
	if err != nil {
		t.Fatal(err)
	}
	cs := g.agent()
	for _, c := range tf.Cases {
		t.Run(c.Name, func(t *testing.T) {
			res, err := tp.Decide(context.Background(), c.Call)
			if err != nil {
				t.Fatal(err)
			}
			if why := policytest.Mismatch(c.Expect, res.Decision); why != "" {
				t.Fatalf("policy test: %s", why)
			}
			before := g.up.Count(c.Call.Tool)
			params := &mcp.CallToolParams{Name: c.Call.Tool, Arguments: c.Call.Arguments}
			if p := c.Call.Provenance; p != "" {
				params.Meta = mcp.Meta{mcpproxy.MetaProvenance: p}
			}
			r, err := cs.CallTool(context.Background(), params)
			if err != nil {
				t.Fatal(err)
			}
			called := g.up.Count(c.Call.Tool) - before
			code, _ := r.Meta[mcpproxy.MetaEFCode].(string)
			moment, _ := r.Meta[mcpproxy.MetaMomentID].(string)
			switch res.Decision.Outcome {
			case sink.PolicyAllow, sink.PolicyPermit:
				if called != 1 || r.IsError {
					t.Fatalf("policy test says %s; the gate called the upstream %d time(s), result %+v", res.Decision.Outcome, called, r)
				}
			case sink.PolicyEscalate:
				if called != 0 || moment == "" || code != string(ef.EFEscalationRequired) {
					t.Fatalf("policy test says escalate; the gate: upstream %d call(s), moment %q, code %q", called, moment, code)
				}
			case sink.PolicyDeny:
				if called != 0 || moment != "" || code != string(res.Decision.Code) {
					t.Fatalf("policy test says deny %s; the gate: upstream %d call(s), moment %q, code %q", res.Decision.Code, called, moment, code)
				}
			}
		})
	}
	// The gate under test serves the shipped file's policy (TestDemoPolicyIsTheSamplePolicy):
	// the shipped file decides every case the same under both.
	shipped, err := policytest.Load(policytest.PolicyRef{GateConfig: filepath.Join("..", "..", "testdata", "gate", "actgate.yaml")}, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range tf.Cases {
		a, errA := shipped.Decide(context.Background(), c.Call)
		b, errB := tp.Decide(context.Background(), c.Call)
		if errA != nil || errB != nil || a.Decision.Outcome != b.Decision.Outcome || a.Decision.Code != b.Decision.Code || a.Decision.Rule != b.Decision.Rule {
			t.Errorf("%s: shipped %s %s %s, served %s %s %s (%v %v)", c.Name, a.Decision.Outcome, a.Decision.Code, a.Decision.Rule, b.Decision.Outcome, b.Decision.Code, b.Decision.Rule, errA, errB)
		}
	}
}
