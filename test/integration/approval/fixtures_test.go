package approval_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/action"
	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/jcs"
	"github.com/actgate/actgate/test/envtest"
)

// The users the API server maps the provider's alice and bob to ('oidc:' + email), and the
// agent's service account.
const (
	alice = "oidc:alice@example.com"
	bob   = "oidc:bob@example.com"
	agent = "system:serviceaccount:%s:billing-agent"
)

var paymentArgs = json.RawMessage(`{"amount":"2500.00","currency":"EUR","invoice":"INV-2291","to":"acct-7781"}`)

// paymentEnvelope is a gate-authored envelope for the payment; tag makes each moment's digest
// its own (envelope-04 §12.5).
func paymentEnvelope(t *testing.T, tag string) *envelope.Envelope {
	t.Helper()
	env, err := envelope.Build(envelope.Draft{
		Synopsis: "Dry-run the EUR 2500.00 payment of invoice INV-2291 to acct-7781 before sending it.",
		Findings: []string{
			"send_payment is FINANCIAL and rule money-movement requires HumanAuthorization.",
			"The amount is within the policy cap of 10000.00.",
			"Moment " + tag + " of the approval service test.",
		},
		Recommendations: []string{"Run the payment as a dry run first.", "Send the payment once the dry run matches the invoice."},
		Offer:           "Ask for detail on any item.",
		Stem:            "How should the payment of invoice INV-2291 proceed?",
		Options: []envelope.DraftOption{
			{Label: "Send the payment as requested", Reasoning: "Pays the invoice now, exactly as the agent asked.", Tool: "send_payment", Args: paymentArgs},
			{Label: "Dry-run the payment", Reasoning: "Shows the exact effect without moving money.", Tool: "send_payment", Args: optionArgs[1]},
			{Label: "Pay 100.00 now", Reasoning: "Caps the amount while the invoice is checked.", Tool: "send_payment", Args: optionArgs[2]},
		},
		RecommendedIdx: 1,
		Meta:           &envelope.Meta{DecisionClass: "payment-authorization"},
	})
	must(t, err)
	return env
}

// optionArgs are the arguments of paymentEnvelope's three options, in order.
var optionArgs = []json.RawMessage{
	paymentArgs,
	json.RawMessage(`{"amount":"2500.00","currency":"EUR","dry_run":true,"invoice":"INV-2291","to":"acct-7781"}`),
	json.RawMessage(`{"amount":"100.00","currency":"EUR","invoice":"INV-2291","to":"acct-7781"}`),
}

// paymentCalls are the calls of paymentEnvelope's options, as the authority service writes them
// into spec.calls and the console shows them.
func paymentCalls(t *testing.T) []envelope.Call {
	t.Helper()
	out := make([]envelope.Call, len(optionArgs))
	for i, a := range optionArgs {
		canon, err := jcs.Canonicalize(a, jcs.Strict)
		must(t, err)
		out[i] = envelope.Call{Server: "payments", Destination: "https://payments-mcp.payments.svc.cluster.local", Tool: "send_payment", Args: canon}
	}
	return out
}

// create makes an Act for the payment and a BindingMoment for principal deciding it, as the
// authority service would (the webhook admits the creation).
func create(t *testing.T, env *envtest.Env, ns, name, principal string, class v1alpha1.ConsequenceClass, e *envelope.Envelope) *v1alpha1.Act {
	t.Helper()
	_, argsDigest, err := jcs.CanonicalDigest(paymentArgs, jcs.Strict)
	must(t, err)
	actionDigest, err := action.Digest("send_payment", paymentArgs, jcs.Strict)
	must(t, err)
	a := &v1alpha1.Act{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "act-" + name},
		Spec: v1alpha1.ActSpec{
			ActID: "act-" + name, Agent: strings.Replace(agent, "%s", ns, 1),
			Tool: "send_payment", Server: "payments", Destination: "https://payments-mcp.payments.svc.cluster.local",
			ConsequenceClass: class,
			ArgumentsDigest:  v1alpha1.Digest(argsDigest), ActionDigest: v1alpha1.Digest(actionDigest),
			PolicyRef: v1alpha1.LocalObjectReference{Name: "payments"}, Rule: "money-movement",
			SinkID: "billing-agent-sink", PolicyEpoch: 1,
		},
	}
	must(t, env.Client.Create(t.Context(), a))
	bm := &v1alpha1.BindingMoment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.BindingMomentSpec{
			Envelope: string(e.Canonical()), EnvelopeDigest: v1alpha1.Digest(e.Digest()),
			Synopsis: e.Content().Synopsis, Principal: principal,
			ActRef: v1alpha1.LocalObjectReference{Name: a.Name}, ExpiresAt: metav1.NewTime(time.Now().Add(time.Hour)),
		},
	}
	for _, c := range paymentCalls(t) {
		bm.Spec.Calls = append(bm.Spec.Calls, v1alpha1.BindingMomentCall{Server: c.Server, Destination: c.Destination, Tool: c.Tool, Args: string(c.Args)})
	}
	must(t, env.Client.Create(t.Context(), bm))
	return a
}

// grantPrincipals binds the project's own principal and act-viewer ClusterRoles (config/rbac)
// to users in ns: the console must work with exactly what those roles grant.
func grantPrincipals(t *testing.T, env *envtest.Env, ns string, users ...string) {
	t.Helper()
	env.Kubectl(t, "apply",
		"-f", filepath.Join(env.Root, "config", "rbac", "bindingmoment_principal_role.yaml"),
		"-f", filepath.Join(env.Root, "config", "rbac", "act_viewer_role.yaml"))
	for _, role := range []string{"actgate-bindingmoment-principal-role", "actgate-act-viewer-role"} {
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: role},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		}
		for _, u := range users {
			rb.Subjects = append(rb.Subjects, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: u})
		}
		must(t, env.Client.Create(t.Context(), rb))
	}
}

func get(t *testing.T, env *envtest.Env, ns, name string) *v1alpha1.BindingMoment {
	t.Helper()
	bm := &v1alpha1.BindingMoment{}
	must(t, env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, bm))
	return bm
}

// must fails t on err.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
