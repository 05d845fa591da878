package sidecar

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/review"
	"github.com/actgate/actgate/internal/sink"
)

// TestRateLimitInPod: the sidecar decides a rule's rate limit in the pod, without the
// control plane: a permitted call over its bucket (per pod: shared by every agent of the
// sidecar) is refused with EF_RATE_LIMITED and the wait, and the authority service receives
// no Permit for it; a read over its per-agent bucket is refused without any request to the
// service, while another agent's bucket is its own.
func TestRateLimitInPod(t *testing.T) {
	f := newFixture(t)
	spec := testPolicy(t, f.up.URL)
	for i := range spec.Rules {
		switch spec.Rules[i].Name {
		case "reads":
			spec.Rules[i].RateLimit = &v1alpha1.RateLimit{Calls: 2, Period: metav1.Duration{Duration: time.Minute}}
		case "payments":
			spec.Rules[i].RateLimit = &v1alpha1.RateLimit{Calls: 1, Period: metav1.Duration{Duration: time.Hour}, Per: v1alpha1.RateLimitPerPod}
		}
	}
	o := f.options()
	o.Policy = compiled(t, spec, 1)
	g, err := NewGate(o)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	invoked := map[string]int{}
	handle := func(agent, tool, args string) sink.Result {
		t.Helper()
		res, err := g.Handle(context.Background(), sink.Call{Session: "s-" + agent, Agent: agent, Server: "payments",
			Destination: f.up.URL, Tool: tool, Args: json.RawMessage(args)}, func(context.Context, string) (sink.InvokeResult, error) {
			invoked[tool]++
			return sink.InvokeResult{Result: json.RawMessage(`{"content":[]}`), Outcome: sink.OutcomeExecuted}, nil
		})
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		return res
	}
	for i := range 2 {
		if res := handle(testAgent, "get_balance", `{"account":"A-1"}`); !res.Allowed {
			t.Fatalf("read %d: %+v", i+1, res)
		}
	}
	res := handle(testAgent, "get_balance", `{"account":"A-1"}`)
	if res.Allowed || res.Code != ef.EFRateLimited || res.RetryAfter != 30*time.Second || invoked["get_balance"] != 2 {
		t.Fatalf("the third read: %+v, upstream %d", res, invoked["get_balance"])
	}
	if f.stub.requests() != 0 {
		t.Fatalf("reads and their rate limit asked the authority service %d times", f.stub.requests())
	}
	if res := handle("system:serviceaccount:billing:other", "get_balance", `{"account":"A-1"}`); !res.Allowed {
		t.Fatalf("another agent's read: %+v", res)
	}

	if res := handle(testAgent, "send_payment", `{"amount":1,"to":"ACME"}`); !res.Allowed || invoked["send_payment"] != 1 {
		t.Fatalf("the first payment: %+v", res)
	}
	permits := f.stub.count(review.OperationPermit)
	res = handle("system:serviceaccount:billing:other", "send_payment", `{"amount":2,"to":"ACME"}`)
	if res.Allowed || res.Code != ef.EFRateLimited || res.RetryAfter != time.Hour || invoked["send_payment"] != 1 {
		t.Fatalf("a payment over the pod's limit, by another agent: %+v, upstream %d", res, invoked["send_payment"])
	}
	if n := f.stub.count(review.OperationPermit); n != permits || permits != 1 {
		t.Fatalf("Permits at the service: %d after the refusal (%d before); want 1", n, permits)
	}
}
