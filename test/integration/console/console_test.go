package console_test

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
	"github.com/actgate/actgate/internal/console"
	"github.com/actgate/actgate/internal/console/consoletest"
	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/jcs"
	"github.com/actgate/actgate/test/envtest"
)

const (
	alice = "alice@example.com"
	bob   = "bob@example.com"
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
			"Moment " + tag + " of the console test.",
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
func create(t *testing.T, env *envtest.Env, ns, name, principal string, e *envelope.Envelope) *v1alpha1.Act {
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
			ConsequenceClass: v1alpha1.ConsequenceFinancial,
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

// TestKubectlConsoleInChromium: `kubectl actgate console`, run through the real kubectl with
// alice's own kubeconfig, against an API server with actgate's real admission webhook, driven in
// headless Chromium. The page shows each of alice's pending moments with every envelope-04 §9.1
// invariant and the Act's tool, server, class and action digest; alice resolves one with each of
// the four resolutions of §7.3, and each BindingMoment then holds exactly that resolution,
// written by kubectl-actgate and admitted by the webhook as alice. Bob, a principal of other
// moments who can read alice's (--all), is refused by the webhook, and the page shows the
// webhook's own message; the moment stays unresolved.
func TestKubectlConsoleInChromium(t *testing.T) {
	env := startWebhookEnv(t)
	pluginDir := buildPlugin(t)
	ns := env.Namespace(t)
	grantPrincipals(t, env, ns, alice, bob)
	a, err := env.AddUser(alice)
	must(t, err)
	b, err := env.AddUser(bob)
	must(t, err)

	names := []string{"pay-option", "pay-answer", "pay-question", "pay-declined", "pay-for-alice-only"}
	envs := map[string]*envelope.Envelope{}
	acts := map[string]*v1alpha1.Act{}
	for _, n := range names {
		envs[n] = paymentEnvelope(t, n)
		acts[n] = create(t, env, ns, n, alice, envs[n])
	}
	url := startConsole(t, env, pluginDir, a.Kubeconfig, "-n", ns)

	ctx := consoletest.Browser(t)
	must(t, consoletest.Load(ctx, url))
	for _, n := range names {
		s := acts[n].Spec
		consoletest.CheckInvariants(t, ctx, n, consoletest.Expect{Envelope: envs[n], Act: console.Act{
			Tool: s.Tool, Server: s.Server, Class: string(s.ConsequenceClass), ActionDigest: string(s.ActionDigest)},
			Calls: paymentCalls(t)})
	}
	consoletest.Screenshot(t, ctx, "console-kubectl")

	for _, tc := range []struct {
		name string
		do   func() (consoletest.Outcome, error)
		want v1alpha1.BindingMomentResolution
	}{
		{"pay-option", func() (consoletest.Outcome, error) { return consoletest.Choose(ctx, "pay-option", 1) },
			v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionOption, OptionIdx: ptr(int32(1))}},
		{"pay-answer", func() (consoletest.Outcome, error) {
			return consoletest.Answer(ctx, "pay-answer", "Pay half now.\nThe rest when the goods arrive.")
		}, v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionAnswer, Answer: "Pay half now.\nThe rest when the goods arrive."}},
		{"pay-question", func() (consoletest.Outcome, error) { return consoletest.RejectQuestion(ctx, "pay-question") },
			v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionQuestion}},
		{"pay-declined", func() (consoletest.Outcome, error) { return consoletest.Decline(ctx, "pay-declined") },
			v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionDeclined}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			must(t, consoletest.Load(ctx, url))
			o, err := tc.do()
			must(t, err)
			if o.Status != "resolved" || !strings.Contains(o.Message, "bindingmoment.actgate.io/"+tc.name+" resolved by "+alice) {
				t.Fatalf("outcome %+v", o)
			}
			bm := get(t, env, ns, tc.name)
			got := bm.Spec.Resolution
			tc.want.EnvelopeDigest = v1alpha1.Digest(envs[tc.name].Digest())
			if got == nil || got.Kind != tc.want.Kind || got.EnvelopeDigest != tc.want.EnvelopeDigest || got.Answer != tc.want.Answer ||
				(got.OptionIdx == nil) != (tc.want.OptionIdx == nil) || (got.OptionIdx != nil && *got.OptionIdx != *tc.want.OptionIdx) {
				t.Fatalf("stored resolution %+v, want %+v", got, tc.want)
			}
			// The console names its surface and nothing it cannot know of the authentication.
			if got.Via == nil || *got.Via != (v1alpha1.ResolutionVia{Surface: v1alpha1.SurfaceConsole}) {
				t.Errorf("spec.resolution.via = %+v, want only surface console", got.Via)
			}
			// Written by the plugin's field manager; admitted by the webhook, which admits only
			// the principal (alice) as the writer.
			managers := map[string]bool{}
			for _, mf := range bm.ManagedFields {
				managers[mf.Manager] = true
			}
			if !managers["kubectl-actgate"] {
				t.Errorf("the resolution was not written by kubectl-actgate: managers %v", managers)
			}
			if r, err := consoletest.Read(ctx, tc.name); err != nil || r.Found {
				t.Errorf("%s is still shown as pending after its resolution (%v)", tc.name, err)
			}
		})
	}

	// What is left for alice: one moment, the page the docs show (docs/img/console.png).
	must(t, consoletest.Load(ctx, url))
	if r, err := consoletest.Read(ctx, "pay-for-alice-only"); err != nil || !r.Found {
		t.Fatalf("alice's last pending moment is not shown (%v)", err)
	}
	consoletest.Screenshot(t, ctx, "console-kubectl-pending")

	// Bob reads alice's moment (--all) and tries to decline it: the webhook refuses, as bob,
	// and the page says so in the webhook's words. Nothing is written.
	bobURL := startConsole(t, env, pluginDir, b.Kubeconfig, "-n", ns, "--all")
	before := get(t, env, ns, "pay-for-alice-only")
	must(t, consoletest.Load(ctx, bobURL))
	o, err := consoletest.Decline(ctx, "pay-for-alice-only")
	must(t, err)
	if o.Status != "refused" || !strings.HasPrefix(o.Message, "the API server refused the resolution: admission webhook") ||
		!strings.Contains(o.Message, "only the principal named in spec.principal may resolve this binding moment") ||
		!strings.Contains(o.Message, bob+" is not "+alice) {
		t.Fatalf("bob's refused resolution shows %+v", o)
	}
	consoletest.Screenshot(t, ctx, "console-kubectl-webhook-denial")
	if after := get(t, env, ns, "pay-for-alice-only"); after.Spec.Resolution != nil || after.ResourceVersion != before.ResourceVersion {
		t.Fatalf("bob's refused resolution changed the moment: %+v", after.Spec.Resolution)
	}
}

func ptr[T any](v T) *T { return &v }
