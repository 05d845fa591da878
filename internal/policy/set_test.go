package policy

import (
	"context"
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/ef"
)

func mustCompile(t *testing.T, name string, spec *v1alpha1.ToolPolicySpec) *Compiled {
	t.Helper()
	c, err := Compile(name, spec, 1)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// crmSpec protects a crm server for pods labelled app=shop-agent (like the sample) and,
// with overlap, the sample's payments server too.
func crmSpec(withPayments bool) *v1alpha1.ToolPolicySpec {
	s := &v1alpha1.ToolPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "shop-agent"}},
		Servers:     []v1alpha1.ToolServer{{Name: "crm", URL: "https://crm.example"}},
		Rules:       []v1alpha1.ToolRule{{Name: "all", Tools: []string{"*"}}},
	}
	if withPayments {
		s.Servers = append(s.Servers, v1alpha1.ToolServer{Name: "payments", URL: paymentsURL})
	}
	return s
}

func TestSet(t *testing.T) {
	payments := compileSample(t, nil) // shop/payments, selects app=shop-agent
	crm := mustCompile(t, "shop/crm", crmSpec(false))
	overlap := mustCompile(t, "shop/overlap", crmSpec(true))
	other := mustCompile(t, "other/overlap", crmSpec(true))
	agentLabels := map[string]string{"app": "shop-agent", "tier": "x"}
	ctx := context.Background()

	s, err := NewSet([]SetEntry{{"shop", crm}, {"shop", payments}, {"other", other}})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.ForPod("shop", agentLabels); len(got) != 2 || got[0] != crm || got[1] != payments {
		t.Fatalf("ForPod: %v", got)
	}
	if d := s.Evaluate(ctx, "shop", agentLabels, req("get_balance", `{}`)); d.Outcome != OutcomeAllow || d.Policy != "shop/payments" {
		t.Fatalf("payments via the set: %s %s", d.Outcome, d.Policy)
	}
	if d := s.Evaluate(ctx, "shop", agentLabels, req("lookup", `{}`, on("crm", "https://crm.example"))); d.Outcome != OutcomeAllow || d.Policy != "shop/crm" {
		t.Fatalf("crm via the set: %s %s %s", d.Outcome, d.Code, d.Policy)
	}
	// A pod the selector does not select, or in another namespace, has no policy: deny.
	for _, tc := range []struct {
		ns     string
		labels map[string]string
	}{{"shop", map[string]string{"app": "other"}}, {"shop", nil}, {"elsewhere", agentLabels}} {
		d := s.Evaluate(ctx, tc.ns, tc.labels, req("get_balance", `{}`))
		if d.Outcome != OutcomeDeny || d.Code != ef.EFUnknownTool {
			t.Fatalf("%s %v: %s %s", tc.ns, tc.labels, d.Outcome, d.Code)
		}
	}
	servers, err := s.ServersForPod("shop", agentLabels)
	if err != nil || len(servers) != 4 || servers[0].Name != "crm" {
		t.Fatalf("ServersForPod: %v %v", servers, err)
	}
	// In the other namespace, the same server names belong to one policy: not ambiguous.
	if _, err := s.Lookup("other", agentLabels, "payments"); err != nil {
		t.Fatalf("other namespace: %v", err)
	}

	// Two policies in one namespace govern payments for the same pod: fail closed.
	amb, err := NewSet([]SetEntry{{"shop", payments}, {"shop", overlap}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := amb.Lookup("shop", agentLabels, "payments"); !errors.Is(err, ErrAmbiguous) {
		t.Fatalf("Lookup: %v", err)
	}
	d := amb.Evaluate(ctx, "shop", agentLabels, req("get_balance", `{}`))
	if d.Outcome != OutcomeDeny || d.Code != ef.EFPolicyDenied || !strings.Contains(d.Message, "shop/overlap") || !strings.Contains(d.Message, "shop/payments") {
		t.Fatalf("ambiguous: %s %s %q", d.Outcome, d.Code, d.Message)
	}
	// An Audit policy in the pair does not make the ambiguity pass through.
	auditOverlap := compileSample(t, func(s *v1alpha1.ToolPolicySpec) { s.Mode = v1alpha1.PolicyModeAudit })
	amb2, _ := NewSet([]SetEntry{{"shop", overlap}, {"shop", mustRename(t, auditOverlap)}})
	if d := amb2.Evaluate(ctx, "shop", agentLabels, req("get_balance", `{}`)); d.Outcome != OutcomeDeny || d.Audit {
		t.Fatalf("ambiguous with audit: %+v", d)
	}
	// The server only overlap lists is not ambiguous.
	if d := amb.Evaluate(ctx, "shop", agentLabels, req("x", `{}`, on("crm", "https://crm.example"))); d.Outcome != OutcomeAllow {
		t.Fatalf("crm in the ambiguous set: %s %s", d.Outcome, d.Code)
	}
	if _, err := amb.ServersForPod("shop", agentLabels); !errors.Is(err, ErrAmbiguous) {
		t.Fatalf("ServersForPod: %v", err)
	}

	// Construction errors.
	if _, err := NewSet([]SetEntry{{"shop", nil}}); err == nil {
		t.Fatal("nil policy accepted")
	}
	if _, err := NewSet([]SetEntry{{"shop", crm}, {"shop", crm}}); err == nil {
		t.Fatal("duplicate accepted")
	}
	var nilSet *Set
	if d := nilSet.Evaluate(ctx, "shop", agentLabels, req("get_balance", `{}`)); d.Outcome != OutcomeDeny {
		t.Fatalf("nil set: %s", d.Outcome)
	}
}

// mustRename compiles the sample's spec again under another name (Set keys on names).
func mustRename(t *testing.T, c *Compiled) *Compiled {
	t.Helper()
	spec := sampleSpec(t)
	if c.Audit() {
		spec.Mode = v1alpha1.PolicyModeAudit
	}
	return mustCompile(t, "shop/payments-audit", spec)
}
