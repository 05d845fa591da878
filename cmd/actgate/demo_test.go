package main

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/actgate/actgate/internal/gateconfig"
)

// TestDemo runs `actgate demo` in-process: every step prints what the agent saw and the
// upstream's own counter, and the demo exits 0 only when each behaved as described.
func TestDemo(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"demo"}, strings.NewReader(""), &out, &errb); code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	got := out.String()
	for _, want := range []string{
		"[1] DISCOVER", "send_payment (emits_binding_moment)", "request_binding_moment (emits_binding_moment)",
		"[2] ALLOW", "upstream's own invocation count for get_balance: 1",
		"[3] DENY", "EF_INSTRUCTION_PROVENANCE_FAILURE", "upstream's own invocation count for email_send: 0",
		"[4] DENY", "EF_POLICY_DENIED", "an agent may not pay more than 10000 at once",
		"[5] ESCALATE", "EF_ESCALATION_REQUIRED", "binding moment bm-",
		"[6] RESOLVE", "│ Synopsis:", "│ Findings:", "│ Recommendations:", "│ Offer:", "(recommended)", "│ Resolve: actgate resolve bm-",
		"authority authz-",
		"[7] ALLOW", "gate  ← ran: {\"paid\":250,\"to\":\"bob\",\"balance\":750}", "upstream's own invocation count for send_payment: 1",
		"[8] REPLAY", "replayed, not invoked",
		"[9] REPLAY", "a new payment needs a new binding moment",
		"[10] HOST LOOP", `tool_result for the model: {"type":"tool_result","tool_use_id":"toolu_01Hx","is_error":true`,
		"destination https://finance-mirror.example/mcp", "gate  ← refused, not run: EF_DESTINATION_MISMATCH",
		"upstream's own invocation count for get_balance in this act: 0",
		"[11] HOST LOOP", "alice's pending moments: 2 before the poll, 2 after", "upstream's own invocation count for send_payment in this act: 0",
		"[12] RESOLVE", "[13] HOST LOOP", "gate  ← allow: authority authz-", "gate ← EXECUTED",
		"upstream's own invocation count for send_payment in this act: 1",
		"[14] HOST LOOP", "gate  ← replayed, not to run again",
		"Upstream invocation counts: get_balance 1, send_payment 2, email_send 0.",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
	if strings.Contains(got, demoUpstreamToken) {
		t.Error("the demo printed the upstream credential")
	}
	if t.Failed() {
		t.Logf("output:\n%s", got)
	}
}

// TestDemoPolicyIsTheSamplePolicy: the README's sample configuration is the policy the demo
// runs.
func TestDemoPolicyIsTheSamplePolicy(t *testing.T) {
	sample, err := gateconfig.Load("../../testdata/gate/actgate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	demo, err := gateconfig.Parse(demoConfig(sample.Policy.Servers[0].URL, dir, dir+"/t"), dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(demo.Policy, sample.Policy) {
		t.Errorf("demo policy differs from testdata/gate/actgate.yaml:\n demo   %+v\n sample %+v", demo.Policy, sample.Policy)
	}
	if demo.Agent != sample.Agent || !reflect.DeepEqual(demo.Principals, sample.Principals) {
		t.Errorf("agent/principals differ: %+v %+v / %+v %+v", demo.Agent, demo.Principals, sample.Agent, sample.Principals)
	}
}
