// Package payment is the payment a principal decides in the tests of the pages that show binding
// moments (the console through kubectl, the approval service): a gate-authored envelope of three
// options for one send_payment call, the exact call each option authorises, and the Act and
// BindingMoment the authority service would write for it, created through a real API server.
package payment

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

// Agent is the user name of the agent that made the call, in namespace %s.
const Agent = "system:serviceaccount:%s:billing-agent"

// Tool is the tool the agent called.
const Tool = "send_payment"

// Destination is the upstream the payment goes to.
const Destination = "https://payments-mcp.payments.svc.cluster.local"

// Args are the arguments of the call the agent made.
var Args = json.RawMessage(`{"amount":"2500.00","currency":"EUR","invoice":"INV-2291","to":"acct-7781"}`)

// OptionArgs are the arguments of Envelope's three options, in order: the call as made, its dry
// run, and a capped amount.
var OptionArgs = []json.RawMessage{
	Args,
	json.RawMessage(`{"amount":"2500.00","currency":"EUR","dry_run":true,"invoice":"INV-2291","to":"acct-7781"}`),
	json.RawMessage(`{"amount":"100.00","currency":"EUR","invoice":"INV-2291","to":"acct-7781"}`),
}

// Envelope is a gate-authored envelope for the payment; tag makes each moment's digest its own
// (envelope-04 §12.5) and suite names the test in a finding.
func Envelope(t testing.TB, tag, suite string) *envelope.Envelope {
	t.Helper()
	env, err := envelope.Build(envelope.Draft{
		Synopsis: "Dry-run the EUR 2500.00 payment of invoice INV-2291 to acct-7781 before sending it.",
		Findings: []string{
			"send_payment is FINANCIAL and rule money-movement requires HumanAuthorization.",
			"The amount is within the policy cap of 10000.00.",
			"Moment " + tag + " of the " + suite + ".",
		},
		Recommendations: []string{"Run the payment as a dry run first.", "Send the payment once the dry run matches the invoice."},
		Offer:           "Ask for detail on any item.",
		Stem:            "How should the payment of invoice INV-2291 proceed?",
		Options: []envelope.DraftOption{
			{Label: "Send the payment as requested", Reasoning: "Pays the invoice now, exactly as the agent asked.", Tool: Tool, Args: Args},
			{Label: "Dry-run the payment", Reasoning: "Shows the exact effect without moving money.", Tool: Tool, Args: OptionArgs[1]},
			{Label: "Pay 100.00 now", Reasoning: "Caps the amount while the invoice is checked.", Tool: Tool, Args: OptionArgs[2]},
		},
		RecommendedIdx: 1,
		Meta:           &envelope.Meta{DecisionClass: "payment-authorization"},
	})
	must(t, err)
	return env
}

// Calls are the calls of Envelope's options, as the authority service writes them into
// spec.calls and the pages show them.
func Calls(t testing.TB) []envelope.Call {
	t.Helper()
	out := make([]envelope.Call, len(OptionArgs))
	for i, a := range OptionArgs {
		canon, err := jcs.Canonicalize(a, jcs.Strict)
		must(t, err)
		out[i] = envelope.Call{Server: "payments", Destination: Destination, Tool: Tool, Args: canon}
	}
	return out
}

// Create makes an Act of class for the payment and a BindingMoment named name for principal
// deciding it with e, as the authority service would (the webhook admits the creation).
func Create(t testing.TB, env *envtest.Env, ns, name, principal string, class v1alpha1.ConsequenceClass, e *envelope.Envelope) *v1alpha1.Act {
	t.Helper()
	_, argsDigest, err := jcs.CanonicalDigest(Args, jcs.Strict)
	must(t, err)
	actionDigest, err := action.Digest(Tool, Args, jcs.Strict)
	must(t, err)
	a := &v1alpha1.Act{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "act-" + name},
		Spec: v1alpha1.ActSpec{
			ActID: "act-" + name, Agent: strings.Replace(Agent, "%s", ns, 1),
			Tool: Tool, Server: "payments", Destination: Destination,
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
	for _, c := range Calls(t) {
		bm.Spec.Calls = append(bm.Spec.Calls, v1alpha1.BindingMomentCall{Server: c.Server, Destination: c.Destination, Tool: c.Tool, Args: string(c.Args)})
	}
	must(t, env.Client.Create(t.Context(), bm))
	return a
}

// Get reads BindingMoment ns/name.
func Get(t testing.TB, env *envtest.Env, ns, name string) *v1alpha1.BindingMoment {
	t.Helper()
	bm := &v1alpha1.BindingMoment{}
	must(t, env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, bm))
	return bm
}

// GrantPrincipals applies the project's own principal and act-viewer ClusterRoles (config/rbac)
// and binds them to users in ns: the surfaces must work with exactly what those roles grant.
func GrantPrincipals(t testing.TB, env *envtest.Env, ns string, users ...string) {
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
		if err := env.Client.Create(t.Context(), rb); err != nil {
			t.Fatalf("role binding %s: %v", role, err)
		}
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
