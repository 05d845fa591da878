package controllers_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/controllers"
)

// waitPolicy waits until the policy's status is observed at its generation with the given
// Accepted and Ready conditions ("Status/Reason") and epoch.
func (h *harness) waitPolicy(t *testing.T, name, accepted, ready string, epoch int64) *v1alpha1.ToolPolicy {
	t.Helper()
	tp := &v1alpha1.ToolPolicy{}
	eventually(t, 20*time.Second, func() error {
		if err := h.c.Get(ctxFor(t), h.key(name), tp); err != nil {
			return err
		}
		if tp.Status.ObservedGeneration != tp.Generation {
			return fmt.Errorf("observedGeneration %d, generation %d", tp.Status.ObservedGeneration, tp.Generation)
		}
		if err := expect("Accepted", condition(tp.Status.Conditions, v1alpha1.ToolPolicyAcceptedCondition), accepted); err != nil {
			return err
		}
		if err := expect("Ready", condition(tp.Status.Conditions, v1alpha1.ToolPolicyReadyCondition), ready); err != nil {
			return err
		}
		return expect("policyEpoch", tp.Status.PolicyEpoch, epoch)
	})
	return tp
}

func (h *harness) updatePolicy(t *testing.T, name string, mutate func(*v1alpha1.ToolPolicy)) {
	t.Helper()
	tp := &v1alpha1.ToolPolicy{}
	if err := h.c.Get(ctxFor(t), h.key(name), tp); err != nil {
		t.Fatal(err)
	}
	mutate(tp)
	if err := h.c.Update(ctxFor(t), tp); err != nil {
		t.Fatalf("update ToolPolicy %s: %v", name, err)
	}
}

func TestToolPolicyEpoch(t *testing.T) {
	h := start(t, settings{})
	tp := newPolicy("payments", "https://payments.example/mcp")
	h.create(t, tp)
	got := h.waitPolicy(t, "payments", "True/Compiled", "True/Enforcing", 1)
	if got.Status.ObservedGeneration != 1 {
		t.Fatalf("observedGeneration = %d", got.Status.ObservedGeneration)
	}

	// A spec change is a new generation: epoch 2.
	h.updatePolicy(t, "payments", func(tp *v1alpha1.ToolPolicy) {
		tp.Spec.AuthorityTTL = &metav1.Duration{Duration: 2 * time.Minute}
	})
	h.waitPolicy(t, "payments", "True/Compiled", "True/Enforcing", 2)

	// A metadata change is not: the epoch stays 2 however often the policy is reconciled.
	h.updatePolicy(t, "payments", func(tp *v1alpha1.ToolPolicy) { tp.Labels = map[string]string{"team": "billing"} })
	h.poke(t, tp)
	consistently(t, 2*time.Second, func() error {
		got := &v1alpha1.ToolPolicy{}
		if err := h.c.Get(ctxFor(t), h.key("payments"), got); err != nil {
			return err
		}
		return expect("policyEpoch", got.Status.PolicyEpoch, 2)
	})

	// Mode Audit is served, and said to be only audited.
	h.updatePolicy(t, "payments", func(tp *v1alpha1.ToolPolicy) { tp.Spec.Mode = v1alpha1.PolicyModeAudit })
	h.waitPolicy(t, "payments", "True/Compiled", "True/Auditing", 3)
}

func TestToolPolicyInvalidCEL(t *testing.T) {
	h := start(t, settings{})
	tp := newPolicy("bad-cel", "https://payments.example/mcp")
	tp.Spec.Rules[0].Arguments = append(tp.Spec.Rules[0].Arguments,
		v1alpha1.ArgumentConstraint{Name: "broken", Expression: "args.amount <"},
		v1alpha1.ArgumentConstraint{Name: "not-bool", Expression: "args.amount + 1"})
	h.create(t, tp)
	got := h.waitPolicy(t, "bad-cel", "False/InvalidCEL", "False/NotAccepted", 0)
	msg := ""
	for _, c := range got.Status.Conditions {
		if c.Type == v1alpha1.ToolPolicyAcceptedCondition {
			msg = c.Message
		}
	}
	for _, want := range []string{"spec.rules[0].arguments[1].expression", "spec.rules[0].arguments[2].expression"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Accepted message lacks %q: %s", want, msg)
		}
	}
	h.waitEvent(t, "bad-cel", v1alpha1.ToolPolicyInvalidCELReason, corev1.EventTypeWarning, "spec.rules[0].arguments[1].expression")

	// Fixing the spec accepts it at epoch 1: a rejected generation never had an epoch.
	h.updatePolicy(t, "bad-cel", func(tp *v1alpha1.ToolPolicy) { tp.Spec.Rules[0].Arguments = tp.Spec.Rules[0].Arguments[:1] })
	h.waitPolicy(t, "bad-cel", "True/Compiled", "True/Enforcing", 1)

	// Breaking an accepted policy keeps its last epoch and stops serving it.
	// (A destination naming an unlisted server passes the CRD's schema; only compiling finds it.)
	h.updatePolicy(t, "bad-cel", func(tp *v1alpha1.ToolPolicy) { tp.Spec.Rules[0].Destinations = []string{"ledger"} })
	h.waitPolicy(t, "bad-cel", "False/UnknownServer", "False/NotAccepted", 1)
	h.waitEvent(t, "bad-cel", v1alpha1.ToolPolicyUnknownServerReason, corev1.EventTypeWarning, "spec.rules[0].destinations[0]")
}

func TestToolPolicySecretNotFound(t *testing.T) {
	h := start(t, settings{})
	tp := newPolicy("creds", "https://payments.example/mcp")
	tp.Spec.Servers[0].CredentialsSecretRef = &v1alpha1.SecretKeyRef{Name: "payments-mcp", Key: "token"}
	tp.Spec.Servers[0].Reconciliation = &v1alpha1.ReconciliationEndpoint{
		URL:                  "https://payments.example/operations",
		CredentialsSecretRef: &v1alpha1.SecretKeyRef{Name: "payments-reconcile", Key: "token"},
	}
	h.create(t, tp)
	got := h.waitPolicy(t, "creds", "True/Compiled", "False/SecretNotFound", 1)
	h.waitEvent(t, "creds", v1alpha1.ToolPolicySecretNotFoundReason, corev1.EventTypeWarning, `"payments-mcp" not found`, `"payments-reconcile" not found`)
	_ = got

	// The upstream Secret appears: the periodic re-check (SecretRecheck) sees it. The
	// reconciliation Secret is still missing.
	h.create(t, secret("payments-mcp", map[string]string{"token": "t"}))
	eventually(t, 20*time.Second, func() error {
		tp := &v1alpha1.ToolPolicy{}
		if err := h.c.Get(ctxFor(t), h.key("creds"), tp); err != nil {
			return err
		}
		for _, c := range tp.Status.Conditions {
			if c.Type == v1alpha1.ToolPolicyReadyCondition {
				if strings.Contains(c.Message, `"payments-mcp"`) || !strings.Contains(c.Message, `"payments-reconcile" not found`) {
					return fmt.Errorf("Ready message %q", c.Message)
				}
				return nil
			}
		}
		return fmt.Errorf("no Ready condition")
	})

	// A reconciliation Secret without the response MAC key is still not enough.
	rs := secret("payments-reconcile", map[string]string{"token": "t"})
	h.create(t, rs)
	h.waitEvent(t, "creds", v1alpha1.ToolPolicySecretNotFoundReason, corev1.EventTypeWarning, fmt.Sprintf("has no key %q", controllers.SecretKeyResponseMAC))
	h.waitPolicy(t, "creds", "True/Compiled", "False/SecretNotFound", 1)

	rs.Data[controllers.SecretKeyResponseMAC] = []byte("0123456789abcdef0123456789abcdef")
	if err := h.c.Update(ctxFor(t), rs); err != nil {
		t.Fatal(err)
	}
	// Secrets do not change the spec: Ready without a new epoch.
	h.waitPolicy(t, "creds", "True/Compiled", "True/Enforcing", 1)
}
