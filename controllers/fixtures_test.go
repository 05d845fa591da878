package controllers_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/authority/leasestore"
)

const (
	digestArgs   = v1alpha1.Digest("sha256:1111111111111111111111111111111111111111111111111111111111111111")
	digestAction = v1alpha1.Digest("sha256:2222222222222222222222222222222222222222222222222222222222222222")
	digestEnv    = v1alpha1.Digest("sha256:3333333333333333333333333333333333333333333333333333333333333333")
	agentUser    = "system:serviceaccount:shop:billing-agent"
)

// newPolicy returns a valid policy with one server at serverURL and one rule.
func newPolicy(name, serverURL string) *v1alpha1.ToolPolicy {
	return &v1alpha1.ToolPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.ToolPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "billing-agent"}},
			Servers:     []v1alpha1.ToolServer{{Name: "payments", URL: serverURL}},
			Rules: []v1alpha1.ToolRule{{
				Name:             "payouts",
				Tools:            []string{"send_payment"},
				ConsequenceClass: v1alpha1.ConsequenceFinancial,
				Evidence:         &v1alpha1.EvidenceRequirement{Role: v1alpha1.EvidenceRolePolicyPermit},
				Arguments: []v1alpha1.ArgumentConstraint{{
					Name: "amount-cap", Expression: "double(args.amount) <= 1000.0",
				}},
			}},
		},
	}
}

// newAct returns an act of policy on server "payments", tool send_payment.
func newAct(name, policy string) *v1alpha1.Act {
	return &v1alpha1.Act{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.ActSpec{
			ActID: name, Agent: agentUser, Tool: "send_payment", Server: "payments",
			Destination: "https://payments.example", ConsequenceClass: v1alpha1.ConsequenceFinancial,
			ArgumentsDigest: digestArgs, ActionDigest: digestAction,
			PolicyRef: v1alpha1.LocalObjectReference{Name: policy}, Rule: "payouts",
			SinkID: "billing-sink", PolicyEpoch: 1,
		},
	}
}

// createAct creates act and then writes status as the authority service and sink would.
func (h *harness) createAct(t *testing.T, act *v1alpha1.Act, status v1alpha1.ActStatus) *v1alpha1.Act {
	t.Helper()
	act.Namespace = h.ns
	if err := h.c.Create(ctxFor(t), act); err != nil {
		t.Fatalf("create Act %s: %v", act.Name, err)
	}
	act.Status = status
	if err := h.c.Status().Update(ctxFor(t), act); err != nil {
		t.Fatalf("write Act %s status: %v", act.Name, err)
	}
	return act
}

func (h *harness) getAct(t *testing.T, name string) (*v1alpha1.Act, error) {
	act := &v1alpha1.Act{}
	err := h.c.Get(ctxFor(t), h.key(name), act)
	return act, err
}

// authorities issues and consumes authorities the way the authority service does: through the
// real Lease store (internal/authority/leasestore), signed, on the harness's fake clock.
type authorities struct {
	h      *harness
	store  *leasestore.Store
	signer *authority.Signer
}

func (h *harness) authorities(t *testing.T) *authorities {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := authority.NewSigner(priv)
	if err != nil {
		t.Fatal(err)
	}
	store, err := leasestore.NewForConfig(h.env.Config, leasestore.Options{Verifier: signer.Verifier(), Now: h.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return &authorities{h: h, store: store, signer: signer}
}

// issue stores an authority for act (bound to its spec, in the harness namespace), issued now
// on the fake clock and valid for ttl, and returns it; its ID names its Lease.
func (a *authorities) issue(t *testing.T, act *v1alpha1.Act, ttl time.Duration) authority.Authority {
	t.Helper()
	b := authority.Binding{
		ActID: act.Spec.ActID, ArgumentsDigest: string(act.Spec.ArgumentsDigest), ActionDigest: string(act.Spec.ActionDigest),
		Tool: act.Spec.Tool, Destination: act.Spec.Destination, SinkID: act.Spec.SinkID,
		PolicyEpoch: fmt.Sprint(act.Spec.PolicyEpoch), Namespace: a.h.ns,
	}
	auth, err := a.signer.Sign(b, a.h.clock.Now(), ttl)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.store.Issue(ctxFor(t), auth); err != nil {
		t.Fatalf("issue authority for %s: %v", act.Spec.ActID, err)
	}
	return auth
}

// consume spends auth for operation op (the sink's consume review).
func (a *authorities) consume(t *testing.T, auth authority.Authority, op string) {
	t.Helper()
	if _, err := a.store.Consume(ctxFor(t), auth.ID, auth.Binding, authority.Consumption{OperationID: op}); err != nil {
		t.Fatalf("consume %s: %v", auth.ID, err)
	}
}

func (h *harness) create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if o.GetNamespace() == "" {
			o.SetNamespace(h.ns)
		}
		if err := h.c.Create(ctxFor(t), o); err != nil {
			t.Fatalf("create %s: %v", o.GetName(), err)
		}
	}
}

func secret(name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

// condition returns "Status/Reason" of condition t, or "absent".
func condition(conds []metav1.Condition, t string) string {
	c := meta.FindStatusCondition(conds, t)
	if c == nil {
		return "absent"
	}
	return string(c.Status) + "/" + c.Reason
}

func expect(what string, got, want any) error {
	if fmt.Sprint(got) != fmt.Sprint(want) {
		return fmt.Errorf("%s = %v, want %v", what, got, want)
	}
	return nil
}
