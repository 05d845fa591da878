package policy

import (
	"errors"
	"reflect"
	"testing"

	"github.com/actgate/actgate/api/v1alpha1"
)

func humanDecision(min int32, sod *bool, principals ...string) Decision {
	return Decision{Outcome: OutcomeEscalate, Evidence: v1alpha1.EvidenceRequirement{
		Role: v1alpha1.EvidenceRoleHumanAuthorization, Principals: principals, MinPrincipals: min, SeparationOfDuties: sod,
	}}
}

func TestValidResolver(t *testing.T) {
	off := false
	const agentSA, sink = "system:serviceaccount:shop:agent", "shop-sink"
	for _, tc := range []struct {
		name      string
		d         Decision
		principal string
		want      error
	}{
		{"listed principal", humanDecision(1, nil, "alice"), "alice", nil},
		{"not listed", humanDecision(1, nil, "alice"), "bob", ErrNotPrincipal},
		{"case matters", humanDecision(1, nil, "alice"), "Alice", ErrNotPrincipal},
		{"empty", humanDecision(1, nil, "alice"), "", ErrNotPrincipal},
		{"initiator listed, SoD default", humanDecision(1, nil, "alice", agentSA), agentSA, ErrInitiator},
		{"initiator listed, SoD off: still never", humanDecision(1, &off, "alice", agentSA), agentSA, ErrInitiator},
		{"executor listed, SoD default", humanDecision(1, nil, "alice", sink), sink, ErrExecutor},
		{"executor listed, SoD off", humanDecision(1, &off, "alice", sink), sink, nil},
		{"permit decision", Decision{Outcome: OutcomePermit, Evidence: v1alpha1.EvidenceRequirement{Role: v1alpha1.EvidenceRolePolicyPermit, Principals: []string{"alice"}}}, "alice", ErrNotHumanAuthorization},
		{"allow decision", Decision{Outcome: OutcomeAllow}, "alice", ErrNotHumanAuthorization},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := ValidResolver(tc.d, tc.principal, agentSA, sink); !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Fatalf("ValidResolver = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestEligibleAndSatisfied(t *testing.T) {
	const agentSA, sink = "sa", "sink"
	d := humanDecision(2, nil, "alice", "sa", "bob", "sink", "carol")
	if got := EligiblePrincipals(d, agentSA, sink); !reflect.DeepEqual(got, []string{"alice", "bob", "carol"}) {
		t.Fatalf("eligible %v", got)
	}
	if MinPrincipals(d) != 2 || MinPrincipals(humanDecision(0, nil, "a")) != 1 || MinPrincipals(Decision{}) != 0 {
		t.Fatal("MinPrincipals")
	}
	for _, tc := range []struct {
		name      string
		resolvers []string
		want      bool
	}{
		{"two distinct", []string{"alice", "bob"}, true},
		{"one", []string{"alice"}, false},
		{"same principal twice", []string{"alice", "alice"}, false},
		{"agent does not count", []string{"alice", "sa"}, false},
		{"sink does not count", []string{"alice", "sink"}, false},
		{"stranger does not count", []string{"alice", "mallory"}, false},
		{"three", []string{"carol", "mallory", "bob", "alice"}, true},
		{"none", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Satisfied(d, tc.resolvers, agentSA, sink); got != tc.want {
				t.Fatalf("Satisfied = %v, want %v", got, tc.want)
			}
		})
	}
	if Satisfied(Decision{Outcome: OutcomePermit}, []string{"alice", "bob"}, agentSA, sink) {
		t.Fatal("a permit decision is never satisfied by resolutions")
	}
	if EligiblePrincipals(Decision{Outcome: OutcomeAllow}, agentSA, sink) != nil {
		t.Fatal("eligible principals for an allow")
	}
}

// TestEscalationFromEvaluateIsResolvable ties Evaluate to the helpers: the principals of an
// escalation decision resolve it, the agent cannot.
func TestEscalationFromEvaluateIsResolvable(t *testing.T) {
	c := compileSample(t, nil)
	r := req("send_payment", `{"amount":1,"currency":"EUR"}`)
	d := eval(c, r)
	if !Satisfied(d, []string{"alice"}, r.Agent, c.SinkID()) {
		t.Fatal("alice does not satisfy her own rule")
	}
	if Satisfied(d, []string{r.Agent}, r.Agent, c.SinkID()) {
		t.Fatal("the agent satisfied its own escalation")
	}
}
