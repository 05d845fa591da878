package sidecar

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/hostloop"
	"github.com/actgate/actgate/internal/metrics"
	"github.com/actgate/actgate/internal/sink"
)

// counterValue is the value of the counter (or a histogram's sample count) of name with
// exactly labels, or 0.
func counterValue(t *testing.T, reg prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, lp := range m.GetLabel() {
				if labels[lp.GetName()] != lp.GetValue() {
					continue next
				}
			}
			if mf.GetType() == dto.MetricType_HISTOGRAM {
				return float64(m.GetHistogram().GetSampleCount())
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// TestObserverMetrics: the sidecar tells its Observer every call Handle answered, with the
// service's decision and the act's class, so internal/metrics counts a pod's sink as it counts
// the standalone gate's.
func TestObserverMetrics(t *testing.T) {
	f := newFixture(t)
	reg := prometheus.NewPedanticRegistry()
	m, err := metrics.NewGate(reg)
	if err != nil {
		t.Fatal(err)
	}
	o := f.options()
	o.Observer = m
	g, err := NewGate(o)
	if err != nil {
		t.Fatal(err)
	}
	invoked := 0
	inv := func(context.Context, string) (sink.InvokeResult, error) {
		invoked++
		return sink.InvokeResult{Result: json.RawMessage(`{"content":[]}`), Outcome: sink.OutcomeExecuted}, nil
	}
	defer g.Close()
	for _, tool := range []string{"get_balance", "send_payment", "email_send", "wire"} {
		if _, err := g.Handle(context.Background(), sink.Call{Session: "s", Agent: testAgent, Server: "payments",
			Destination: f.up.URL, Tool: tool, Args: json.RawMessage(`{"secret":"S-991"}`)}, inv); err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
	}
	if invoked != 2 {
		t.Fatalf("invoked %d times, want 2 (hot, permit)", invoked)
	}
	cls := policyClass
	for _, c := range []struct {
		decision, code, tool string
	}{
		{"Allowed", "", "get_balance"},
		{"Allowed", "", "send_payment"},
		{"Denied", string(ef.EFPolicyDenied), "email_send"},
		{"Escalated", string(ef.EFEscalationRequired), "wire"},
	} {
		if n := counterValue(t, reg, metrics.NameDecisions, map[string]string{"decision": c.decision, "code": c.code, "class": cls(c.tool)}); n != 1 {
			t.Errorf("decisions{%s,%s,%s} = %v, want 1", c.decision, c.code, cls(c.tool), n)
		}
	}
	for _, p := range []metrics.Path{metrics.PathHot, metrics.PathPermit, metrics.PathDeny, metrics.PathEscalate} {
		if n := counterValue(t, reg, metrics.NameEnforceDuration, map[string]string{"path": string(p)}); n != 1 {
			t.Errorf("enforce duration{path=%s} has %v samples, want 1", p, n)
		}
	}
	for _, tool := range []string{"email_send", "wire"} {
		want := 1.0 // COMMUNICATION and FINANCIAL are side effects
		code := map[string]ef.EFCode{"email_send": ef.EFPolicyDenied, "wire": ef.EFEscalationRequired}[tool]
		if n := counterValue(t, reg, metrics.NameSideEffectDenies, map[string]string{"code": string(code), "class": cls(tool)}); n != want {
			t.Errorf("side-effect denies{%s,%s} = %v, want %v", code, cls(tool), n, want)
		}
	}
}

// TestObserverSeesHostLoopEnforce: a host loop's call is observed as an MCP call is: a refusal
// when it is refused, a dispatch once the host reported its outcome with Complete.
func TestObserverSeesHostLoopEnforce(t *testing.T) {
	f := newFixture(t)
	reg := prometheus.NewPedanticRegistry()
	m, err := metrics.NewGate(reg)
	if err != nil {
		t.Fatal(err)
	}
	o := f.options()
	o.Observer = m
	g, err := NewGate(o)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	for i, tool := range []string{"send_payment", "email_send"} {
		block := json.RawMessage(`{"type":"tool_use","id":"toolu_0` + string(rune('1'+i)) + `","name":"` + tool + `","input":{"amount":5}}`)
		d, _ := g.HostLoop().Enforce(context.Background(), testAgent, hostloop.EnforceRequest{Vendor: hostloop.HostAnthropic, Block: block, Session: "host-1"})
		if want := tool == "send_payment"; d.Allow != want {
			t.Fatalf("%s: allow %v (%s %s)", tool, d.Allow, d.Code, d.Message)
		}
		if d.Allow {
			if _, err := g.HostLoop().Complete(context.Background(), testAgent, d.OperationID, hostloop.HostExecuted, []byte(`{"ok":true}`)); err != nil {
				t.Fatal(err)
			}
		}
	}
	cls := policyClass
	if n := counterValue(t, reg, metrics.NameDecisions, map[string]string{"decision": "Allowed", "code": "", "class": cls("send_payment")}); n != 1 {
		t.Errorf("allowed enforce counted %v times", n)
	}
	if n := counterValue(t, reg, metrics.NameDecisions, map[string]string{"decision": "Denied", "code": string(ef.EFPolicyDenied), "class": cls("email_send")}); n != 1 {
		t.Errorf("denied enforce counted %v times", n)
	}
	if n := counterValue(t, reg, metrics.NameEnforceDuration, map[string]string{"path": string(metrics.PathPermit)}); n != 1 {
		t.Errorf("permit path has %v samples", n)
	}
}

// policyClass is the consequence class the test policy assigns a tool.
func policyClass(tool string) string {
	return map[string]string{"get_balance": "INFORMATIONAL", "send_payment": "FINANCIAL", "email_send": "COMMUNICATION", "wire": "FINANCIAL"}[tool]
}
