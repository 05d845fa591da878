package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/mcpproxy"
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
	tf, err := parseTestFile(data, "actgate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tp, err := loadTestPolicy(testPolicyRef{GateConfig: g.cfgFile}, "")
	if err != nil {
		t.Fatal(err)
	}
	cs := g.agent()
	for _, c := range tf.Cases {
		t.Run(c.Name, func(t *testing.T) {
			res, err := tp.decide(context.Background(), c.Call)
			if err != nil {
				t.Fatal(err)
			}
			if why := mismatch(c.Expect, res.dec); why != "" {
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
			switch res.dec.Outcome {
			case sink.PolicyAllow, sink.PolicyPermit:
				if called != 1 || r.IsError {
					t.Fatalf("policy test says %s; the gate called the upstream %d time(s), result %+v", res.dec.Outcome, called, r)
				}
			case sink.PolicyEscalate:
				if called != 0 || moment == "" || code != string(ef.EFEscalationRequired) {
					t.Fatalf("policy test says escalate; the gate: upstream %d call(s), moment %q, code %q", called, moment, code)
				}
			case sink.PolicyDeny:
				if called != 0 || moment != "" || code != string(res.dec.Code) {
					t.Fatalf("policy test says deny %s; the gate: upstream %d call(s), moment %q, code %q", res.dec.Code, called, moment, code)
				}
			}
		})
	}
	// The gate under test serves the shipped file's policy (TestDemoPolicyIsTheSamplePolicy):
	// the shipped file decides every case the same under both.
	shipped, err := loadTestPolicy(testPolicyRef{GateConfig: filepath.Join("..", "..", "testdata", "gate", "actgate.yaml")}, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range tf.Cases {
		a, errA := shipped.decide(context.Background(), c.Call)
		b, errB := tp.decide(context.Background(), c.Call)
		if errA != nil || errB != nil || a.dec.Outcome != b.dec.Outcome || a.dec.Code != b.dec.Code || a.dec.Rule != b.dec.Rule {
			t.Errorf("%s: shipped %s %s %s, served %s %s %s (%v %v)", c.Name, a.dec.Outcome, a.dec.Code, a.dec.Rule, b.dec.Outcome, b.dec.Code, b.dec.Rule, errA, errB)
		}
	}
}
