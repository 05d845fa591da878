package service

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/review"
)

// TestAgentIdentityRefusals: which requests must carry the agent's token and what a request
// that does not fit its policy's spec.agentAuth gets — decided before the provider is asked,
// so none of these names an agent: without spec.agentAuth a token is refused (it would be
// ignored); with it, a Review, Permit, Refusal or Propose without one, or with two, is refused
// AgentUnauthenticated, while Consume and Report need none; a token that is not a JWT is
// refused; a spec.agentAuth whose CA bundle holds no certificate builds no verifier and the
// policy is not served. The caller's name stays the service account's whenever it is refused.
func TestAgentIdentityRefusals(t *testing.T) {
	s := &Service{log: logr.Discard()}
	plain := &v1alpha1.ToolPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
	withAuth := plain.DeepCopy()
	withAuth.Name = "q"
	withAuth.Spec.AgentAuth = &v1alpha1.AgentAuth{Issuer: "https://idp.invalid", Audience: "api://agents"}
	badCA := withAuth.DeepCopy()
	badCA.Name = "r"
	badCA.Spec.AgentAuth.CABundle = "not PEM"
	const sa = "system:serviceaccount:ns:agent"
	for _, tc := range []struct {
		name   string
		policy *v1alpha1.ToolPolicy
		op     review.Operation
		tokens []string
		status int
		reason review.Reason
	}{
		{"no agentAuth, no token", plain, review.OperationReview, nil, 0, ""},
		{"no agentAuth, a token", plain, review.OperationReview, []string{"a.b.c"}, http.StatusUnauthorized, review.ReasonAgentUnauthenticated},
		{"agentAuth, Review without token", withAuth, review.OperationReview, nil, http.StatusUnauthorized, review.ReasonAgentUnauthenticated},
		{"agentAuth, Permit without token", withAuth, review.OperationPermit, nil, http.StatusUnauthorized, review.ReasonAgentUnauthenticated},
		{"agentAuth, Refusal without token", withAuth, review.OperationRefusal, nil, http.StatusUnauthorized, review.ReasonAgentUnauthenticated},
		{"agentAuth, Propose without token", withAuth, review.OperationPropose, nil, http.StatusUnauthorized, review.ReasonAgentUnauthenticated},
		{"agentAuth, Consume without token", withAuth, review.OperationConsume, nil, 0, ""},
		{"agentAuth, Report without token", withAuth, review.OperationReport, nil, 0, ""},
		{"agentAuth, two tokens", withAuth, review.OperationReview, []string{"a.b.c", "d.e.f"}, http.StatusUnauthorized, review.ReasonAgentUnauthenticated},
		{"agentAuth, not a JWT", withAuth, review.OperationReview, []string{"opaque"}, http.StatusUnauthorized, review.ReasonAgentUnauthenticated},
		{"agentAuth, bad CA bundle", badCA, review.OperationReview, []string{"a.b.c"}, http.StatusOK, review.ReasonPolicyNotReady},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, review.Path, nil)
			for _, tok := range tc.tokens {
				r.Header.Add(review.AgentTokenHeader, tok)
			}
			c := &caller{user: sa, policy: tc.policy}
			o := s.agentIdentity(context.Background(), c, r, tc.op)
			switch {
			case tc.reason == "" && o != nil:
				t.Fatalf("refused: %+v", o.resp)
			case tc.reason != "" && (o == nil || o.status != tc.status || o.resp.Reason != tc.reason || o.resp.Allowed):
				t.Fatalf("got %+v, want HTTP %d %s", o, tc.status, tc.reason)
			case tc.reason == review.ReasonAgentUnauthenticated && o.resp.Code != ef.EFAgentUnauthenticated:
				t.Fatalf("code %s", o.resp.Code)
			}
			if c.user != sa {
				t.Fatalf("the caller became %q", c.user)
			}
		})
	}
}

// TestAgentVerifiersBounded: the service holds at most maxAgentVerifiers verifiers, one per
// policy; a policy whose spec.agentAuth is unchanged reuses its verifier, a changed one gets a
// new one.
func TestAgentVerifiersBounded(t *testing.T) {
	var a agentVerifiers
	p := &v1alpha1.ToolPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "ns"},
		Spec: v1alpha1.ToolPolicySpec{AgentAuth: &v1alpha1.AgentAuth{Issuer: "https://idp.invalid", Audience: "api://agents"}}}
	for i := range maxAgentVerifiers + 10 {
		p.Name = "p" + strconv.Itoa(i)
		if _, err := a.get(p); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(a.m); n != maxAgentVerifiers {
		t.Fatalf("%d verifiers held, bound %d", n, maxAgentVerifiers)
	}
	v1, _ := a.get(p)
	v2, _ := a.get(p)
	p.Spec.AgentAuth.Audience = "api://other"
	v3, _ := a.get(p)
	if v1 != v2 || v3 == v1 {
		t.Fatal("an unchanged spec.agentAuth must reuse its verifier and a changed one must not")
	}
}
