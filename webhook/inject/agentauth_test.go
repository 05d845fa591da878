package inject_test

import (
	"encoding/json"
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/webhook/inject"
)

// TestInjectAgentAuth: a policy's spec.agentAuth reaches the sidecar — only the sidecar — as
// ACTGATE_AGENT_OAUTH (its JSON); a pod without it gets no such variable; two selecting
// policies that disagree on spec.agentAuth are not injected (ErrPolicy).
func TestInjectAgentAuth(t *testing.T) {
	auth := &v1alpha1.AgentAuth{Issuer: "https://idp.example", Audience: "api://agents", AgentClaim: "azp", AgentPrefix: "idp:"}
	p := policy("p", metav1.LabelSelector{}, server("payments", ""))
	p.Spec.AgentAuth = auth
	out, _, err := inject.Inject(agentPod(), []v1alpha1.ToolPolicy{p}, goldenConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	var got string
	for _, e := range out.Spec.InitContainers[0].Env {
		if e.Name == "ACTGATE_AGENT_OAUTH" {
			got = e.Value
		}
	}
	var back v1alpha1.AgentAuth
	if err := json.Unmarshal([]byte(got), &back); err != nil || back.Issuer != auth.Issuer || back.Audience != auth.Audience || back.AgentClaim != "azp" || back.AgentPrefix != "idp:" {
		t.Fatalf("ACTGATE_AGENT_OAUTH %q: %+v %v", got, back, err)
	}
	for _, c := range out.Spec.Containers {
		for _, e := range c.Env {
			if e.Name == "ACTGATE_AGENT_OAUTH" {
				t.Errorf("container %s has ACTGATE_AGENT_OAUTH", c.Name)
			}
		}
	}
	plain, _, err := inject.Inject(agentPod(), []v1alpha1.ToolPolicy{policy("p", metav1.LabelSelector{}, server("payments", ""))}, goldenConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range plain.Spec.InitContainers[0].Env {
		if e.Name == "ACTGATE_AGENT_OAUTH" {
			t.Fatalf("a policy without agentAuth: ACTGATE_AGENT_OAUTH %q", e.Value)
		}
	}
	other := policy("q", metav1.LabelSelector{}, server("mail", ""))
	if _, _, err := inject.Inject(agentPod(), []v1alpha1.ToolPolicy{p, other}, goldenConfig(t)); !errors.Is(err, inject.ErrPolicy) {
		t.Fatalf("policies disagreeing on agentAuth: %v", err)
	}
	other.Spec.AgentAuth = auth.DeepCopy()
	if _, _, err := inject.Inject(agentPod(), []v1alpha1.ToolPolicy{p, other}, goldenConfig(t)); err != nil {
		t.Fatalf("policies agreeing on agentAuth: %v", err)
	}
}
