package console_test

import (
	"strings"
	"testing"

	v1alpha1 "github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/console"
	"github.com/actgate/actgate/internal/console/consoletest"
	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/test/testutil/payment"
)

const (
	alice = "alice@example.com"
	bob   = "bob@example.com"
)

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
	payment.GrantPrincipals(t, env, ns, alice, bob)
	a, err := env.AddUser(alice)
	must(t, err)
	b, err := env.AddUser(bob)
	must(t, err)

	names := []string{"pay-option", "pay-answer", "pay-question", "pay-declined", "pay-for-alice-only"}
	envs := map[string]*envelope.Envelope{}
	acts := map[string]*v1alpha1.Act{}
	for _, n := range names {
		envs[n] = payment.Envelope(t, n, "console test")
		acts[n] = payment.Create(t, env, ns, n, alice, v1alpha1.ConsequenceFinancial, envs[n])
	}
	url := startConsole(t, env, pluginDir, a.Kubeconfig, "-n", ns)

	ctx := consoletest.Browser(t)
	must(t, consoletest.Load(ctx, url))
	for _, n := range names {
		s := acts[n].Spec
		consoletest.CheckInvariants(t, ctx, n, consoletest.Expect{Envelope: envs[n], Act: console.Act{
			Tool: s.Tool, Server: s.Server, Class: string(s.ConsequenceClass), ActionDigest: string(s.ActionDigest)},
			Calls: payment.Calls(t)})
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
			bm := payment.Get(t, env, ns, tc.name)
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
	before := payment.Get(t, env, ns, "pay-for-alice-only")
	must(t, consoletest.Load(ctx, bobURL))
	o, err := consoletest.Decline(ctx, "pay-for-alice-only")
	must(t, err)
	if o.Status != "refused" || !strings.HasPrefix(o.Message, "the API server refused the resolution: admission webhook") ||
		!strings.Contains(o.Message, "only the principal named in spec.principal may resolve this binding moment") ||
		!strings.Contains(o.Message, bob+" is not "+alice) {
		t.Fatalf("bob's refused resolution shows %+v", o)
	}
	consoletest.Screenshot(t, ctx, "console-kubectl-webhook-denial")
	if after := payment.Get(t, env, ns, "pay-for-alice-only"); after.Spec.Resolution != nil || after.ResourceVersion != before.ResourceVersion {
		t.Fatalf("bob's refused resolution changed the moment: %+v", after.Spec.Resolution)
	}
}

func ptr[T any](v T) *T { return &v }
