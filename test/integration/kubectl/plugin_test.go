package kubectl_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/kubectlplugin"
	"github.com/actgate/actgate/test/envtest"
	"github.com/actgate/actgate/test/testutil/payment"
)

// TestPluginThroughKubectl drives kubectl-actgate through the real kubectl as the principals
// alice and bob, each with their own kubeconfig and only the project's principal and act-viewer
// roles: the ledger, pending moments per principal, show, the four resolutions written with the
// envelope digest, and every refusal leaving the object untouched.
func TestPluginThroughKubectl(t *testing.T) {
	env, pluginDir := setup(t)
	ns := env.Namespace(t)
	payment.GrantPrincipals(t, env, ns, alice, bob)
	a, b := user(t, env, alice), user(t, env, bob)
	run := func(t *testing.T, u *envtest.User, args ...string) result {
		t.Helper()
		return kubectl(t, env, pluginDir, u.Kubeconfig, args...)
	}

	act := paymentAct(t, ns, "send-payment-inv-2291")
	now := time.Now()
	envs := map[string]*envelope.Envelope{}
	newMoment := func(name, principal string, expires time.Time) *v1alpha1.BindingMoment {
		envs[name] = paymentEnvelope(t, name)
		return moment(ns, name, principal, act.Name, envs[name], expires)
	}
	mustCreate(t, env, act,
		newMoment("pay-alice-option", alice, now.Add(time.Hour)),
		newMoment("pay-alice-answer", alice, now.Add(time.Hour)),
		newMoment("pay-alice-question", alice, now.Add(time.Hour)),
		newMoment("pay-alice-decline", alice, now.Add(time.Hour)),
		newMoment("pay-alice-expired", alice, now.Add(-time.Minute)),
		newMoment("pay-bob", bob, now.Add(time.Hour)),
	)
	// A moment whose digest does not name its envelope (no admission webhook runs here to stop
	// it): the plugin must discard it.
	forged := newMoment("pay-alice-forged", alice, now.Add(time.Hour))
	forged.Spec.EnvelopeDigest = v1alpha1.Digest("sha256:" + strings.Repeat("0", 64))
	mustCreate(t, env, forged)

	t.Run("kubectl finds the plugin on PATH", func(t *testing.T) {
		r := run(t, a, "plugin", "list")
		if !strings.Contains(r.stdout, pluginDir+"/kubectl-actgate") {
			t.Fatalf("kubectl plugin list does not show the plugin:\n%s", r)
		}
	})

	t.Run("acts is the ledger", func(t *testing.T) {
		r := run(t, a, "actgate", "acts", "-n", ns)
		if r.status != 0 {
			t.Fatal(r)
		}
		short := string(act.Spec.ActionDigest)[:len("sha256:")+12]
		for _, col := range []string{"NAME", "TOOL", "SERVER", "CLASS", "DECISION", "STATE", "CODE", "ACTION", "AGE",
			act.Name, "send_payment", "payments", "FINANCIAL", short} {
			if !strings.Contains(r.stdout, col) {
				t.Errorf("acts lacks %q:\n%s", col, r.stdout)
			}
		}
		r = run(t, a, "actgate", "acts", "-n", ns, "-o", "wide")
		if !strings.Contains(r.stdout, string(act.Spec.ActionDigest)) || !strings.Contains(r.stdout, act.Spec.Agent) {
			t.Errorf("acts -o wide lacks the full digest or the agent:\n%s", r)
		}
		r = run(t, a, "actgate", "acts", "-n", ns, "-o", "json")
		var list v1alpha1.ActList
		if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list.Items) != 1 || list.Items[0].Spec.ActionDigest != act.Spec.ActionDigest {
			t.Errorf("acts -o json: %v\n%s", err, r)
		}
	})

	t.Run("moments lists the pending moments of the caller only", func(t *testing.T) {
		r := run(t, a, "actgate", "moments", "-n", ns)
		if r.status != 0 {
			t.Fatal(r)
		}
		for _, want := range []string{"pay-alice-option", "pay-alice-answer", "pay-alice-question", "pay-alice-decline", "send_payment", "FINANCIAL",
			"Dry-run the EUR 2500.00 payment", "<envelope discarded: BM_ENVELOPE_DIGEST_MISMATCH>"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("alice's moments lack %q:\n%s", want, r.stdout)
			}
		}
		for _, gone := range []string{"pay-bob", "pay-alice-expired", "PRINCIPAL"} {
			if strings.Contains(r.stdout, gone) {
				t.Errorf("alice's moments show %q:\n%s", gone, r.stdout)
			}
		}
		// kubectl passes --kubeconfig after the plugin name through to the plugin.
		r = kubectl(t, env, pluginDir, a.Kubeconfig, "actgate", "moments", "-n", ns, "--kubeconfig", b.Kubeconfig, "-o", "name")
		if r.status != 0 || strings.TrimSpace(r.stdout) != "bindingmoment.actgate.io/pay-bob" {
			t.Errorf("bob's moments: want only pay-bob\n%s", r)
		}
		r = run(t, a, "actgate", "moments", "-n", ns, "--all")
		for _, want := range []string{"PRINCIPAL", "pay-bob", bob, "pay-alice-option"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("moments --all lacks %q:\n%s", want, r)
			}
		}
	})

	t.Run("show renders the envelope and the act", func(t *testing.T) {
		r := run(t, a, "actgate", "show", "pay-alice-option", "-n", ns)
		if r.status != 0 {
			t.Fatal(r)
		}
		e := envs["pay-alice-option"]
		c := e.Content()
		want := []string{"Principal:   " + alice, "Envelope:    " + e.Digest(),
			"Tool:      send_payment", "Server:    payments", "Class:     FINANCIAL",
			"Action:    " + string(act.Spec.ActionDigest) + "  (the action of option [1])",
			"Synopsis: " + c.Synopsis}
		want = append(want, c.Findings...)
		want = append(want, c.Recommendations...)
		want = append(want, "Offer: "+c.Offer, "Question: "+c.Question.Stem,
			"[1] Send the payment as requested", "Why: Pays the invoice now", "* [2] Dry-run the payment  (recommended)",
			"[a] Answer in your own words", "[q] Reject the question", "[d] Decline",
			"kubectl actgate resolve pay-alice-option -n "+ns+" --option N")
		for _, w := range want {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("show lacks %q:\n%s", w, r.stdout)
			}
		}
		r = run(t, a, "actgate", "show", "pay-alice-forged", "-n", ns)
		if r.status != 0 || !strings.Contains(r.stdout, "BINDING MOMENT DISCARDED") || strings.Contains(r.stdout, "(recommended)") {
			t.Errorf("a forged digest was not discarded:\n%s", r)
		}
	})

	// The four resolutions of envelope-04 §7.3, each on its own moment, as alice.
	for _, tc := range []struct {
		moment string
		args   []string
		want   v1alpha1.BindingMomentResolution
	}{
		{"pay-alice-option", []string{"--option", "1"}, v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionOption, OptionIdx: ptr.To[int32](0)}},
		{"pay-alice-answer", []string{"--answer", "Pay after Monday's audit."}, v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionAnswer, Answer: "Pay after Monday's audit."}},
		{"pay-alice-question", []string{"--question"}, v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionQuestion}},
		{"pay-alice-decline", []string{"--decline"}, v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionDeclined}},
	} {
		t.Run("resolve "+string(tc.want.Kind), func(t *testing.T) {
			r := run(t, a, append([]string{"actgate", "resolve", tc.moment, "-n", ns}, tc.args...)...)
			if r.status != 0 || !strings.Contains(r.stdout, "bindingmoment.actgate.io/"+tc.moment+" resolved: ") {
				t.Fatalf("resolve: %s", r)
			}
			bm := get(t, env, ns, tc.moment)
			e := envs[tc.moment]
			want := tc.want
			want.EnvelopeDigest = v1alpha1.Digest(e.Digest())
			got := bm.Spec.Resolution
			if got == nil || got.Kind != want.Kind || got.Answer != want.Answer || got.EnvelopeDigest != want.EnvelopeDigest ||
				(got.OptionIdx == nil) != (want.OptionIdx == nil) || got.OptionIdx != nil && *got.OptionIdx != *want.OptionIdx {
				t.Fatalf("spec.resolution = %+v, want %+v", got, want)
			}
			// The plugin names its surface and nothing it cannot know of the authentication.
			if got.Via == nil || *got.Via != (v1alpha1.ResolutionVia{Surface: v1alpha1.SurfaceKubectl}) {
				t.Errorf("spec.resolution.via = %+v, want only surface kubectl", got.Via)
			}
			// What was written is a valid resolution of the envelope it names, in the wire form an
			// agent receives (§7.3), and an option is authority for exactly the act's action.
			wire := map[string]any{"envelope_digest": string(got.EnvelopeDigest), "resolution": string(got.Kind)}
			if got.OptionIdx != nil {
				wire["option_idx"] = *got.OptionIdx
			}
			if got.Answer != "" {
				wire["answer"] = got.Answer
			}
			raw, _ := json.Marshal(map[string]any{envelope.MemberResolution: wire})
			res, err := envelope.ParseResolution(raw)
			if err != nil {
				t.Fatal(err)
			}
			if err := envelope.Verify(e, res); err != nil {
				t.Fatalf("the written resolution does not verify against its envelope: %v", err)
			}
			if res.Kind == envelope.KindOption {
				if o, _ := e.Option(res.OptionIdx); o.ActionDigest != string(act.Spec.ActionDigest) {
					t.Errorf("option %d authorises %s, not the act's action %s", res.OptionIdx, o.ActionDigest, act.Spec.ActionDigest)
				}
			}
			// The API server does not order managedFields, so the assertion is about ownership:
			// the plugin's field manager owns spec.resolution, and no other manager does.
			if owners := fieldOwners(t, bm.ManagedFields, "f:spec", "f:resolution"); len(owners) != 1 || owners[0] != kubectlplugin.FieldManager {
				t.Errorf("spec.resolution owned by %q, want only %q", owners, kubectlplugin.FieldManager)
			}
		})
	}

	t.Run("a resolved moment is no longer pending", func(t *testing.T) {
		r := run(t, a, "actgate", "moments", "-n", ns, "-o", "name")
		if strings.Contains(r.stdout, "pay-alice-option") || !strings.Contains(r.stdout, "pay-alice-forged") {
			t.Errorf("moments after resolving:\n%s", r)
		}
	})

	// Refusals: nothing is written, and the object keeps its resourceVersion.
	for _, tc := range []struct {
		name   string
		u      *envtest.User
		moment string
		args   []string
		status int
		says   string
	}{
		{"already resolved", a, "pay-alice-option", []string{"--decline"}, kubectlplugin.ExitRefused, "already resolved (option)"},
		{"expired", a, "pay-alice-expired", []string{"--option", "2"}, kubectlplugin.ExitRefused, "has expired"},
		{"forged digest", a, "pay-alice-forged", []string{"--decline"}, kubectlplugin.ExitRefused, "BM_ENVELOPE_DIGEST_MISMATCH"},
		{"option out of range", a, "pay-bob", []string{"--option", "3"}, kubectlplugin.ExitRefused, "RES_OPTION_IDX"},
		{"pinned to another envelope", b, "pay-bob", []string{"--decline", "--envelope-digest", envs["pay-alice-answer"].Digest()}, kubectlplugin.ExitRefused, "names another envelope"},
		{"an answer with a terminal escape", b, "pay-bob", []string{"--answer", "ok\x1b[2J"}, kubectlplugin.ExitRefused, "RES_ANSWER"},
		{"no such moment", a, "pay-nobody", []string{"--decline"}, kubectlplugin.ExitError, "not found"},
	} {
		t.Run("refused: "+tc.name, func(t *testing.T) {
			before := get(t, env, ns, tc.moment)
			r := run(t, tc.u, append([]string{"actgate", "resolve", tc.moment, "-n", ns}, tc.args...)...)
			if r.status != tc.status || !strings.Contains(r.stderr, tc.says) {
				t.Fatalf("want exit %d saying %q\n%s", tc.status, tc.says, r)
			}
			if after := get(t, env, ns, tc.moment); after.ResourceVersion != before.ResourceVersion {
				t.Errorf("the object changed: resourceVersion %s → %s", before.ResourceVersion, after.ResourceVersion)
			}
		})
	}

	t.Run("a user without RBAC is told so", func(t *testing.T) {
		carol := user(t, env, "carol@example.com")
		r := run(t, carol, "actgate", "moments", "-n", ns)
		if r.status != kubectlplugin.ExitError || !strings.Contains(r.stderr, "forbidden") {
			t.Errorf("carol's moments: %s", r)
		}
	})
}

// get reads a binding moment as admin; a missing one is returned empty.
func get(t *testing.T, env *envtest.Env, ns, name string) *v1alpha1.BindingMoment {
	t.Helper()
	bm := &v1alpha1.BindingMoment{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, bm); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return bm
}

// TestConcurrentResolutionsConflict: resolutions written from the same read race; the write
// carries the resourceVersion read, so exactly one lands and every other gets ErrConflict
// instead of overwriting it (compare-and-swap on resourceVersion: 409 means someone else won).
func TestConcurrentResolutionsConflict(t *testing.T) {
	env, _ := setup(t)
	ns := env.Namespace(t)
	payment.GrantPrincipals(t, env, ns, alice)
	a := user(t, env, alice)
	e := paymentEnvelope(t, "race")
	mustCreate(t, env, paymentAct(t, ns, "send-payment"), moment(ns, "pay-race", alice, "send-payment", e, time.Now().Add(time.Hour)))

	c, err := kubectlplugin.NewClient(a.Config)
	if err != nil {
		t.Fatal(err)
	}
	read, err := c.GetMoment(t.Context(), ns, "pay-race")
	if err != nil {
		t.Fatal(err)
	}
	const writers = 8
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for i := range writers {
		wg.Go(func() {
			kind := []envelope.Kind{envelope.KindOption, envelope.KindDeclined, envelope.KindQuestion, envelope.KindAnswer}[i%4]
			res, err := kubectlplugin.SpecResolution(e, envelope.Resolution{EnvelopeDigest: e.Digest(), Kind: kind, OptionIdx: i % 2, Answer: "writer answer"})
			if err != nil {
				errs[i] = err
				return
			}
			_, errs[i] = c.Resolve(t.Context(), read.DeepCopy(), res)
		})
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil && won >= 0:
			t.Fatalf("writers %d and %d both resolved the moment", won, i)
		case err == nil:
			won = i
		case !errors.Is(err, kubectlplugin.ErrConflict):
			t.Errorf("writer %d: %v, want ErrConflict", i, err)
		}
	}
	if won < 0 {
		t.Fatal("no writer resolved the moment")
	}
	stored := get(t, env, ns, "pay-race").Spec.Resolution
	wantKind := []v1alpha1.ResolutionKind{"option", "declined", "question", "answer"}[won%4]
	if stored == nil || stored.Kind != wantKind {
		t.Fatalf("stored resolution %+v, want the winner's (%s)", stored, wantKind)
	}

	// A stale read after the winner: conflict, and the stored resolution stays.
	res, _ := kubectlplugin.SpecResolution(e, envelope.Resolution{EnvelopeDigest: e.Digest(), Kind: envelope.KindDeclined})
	if _, err := c.Resolve(t.Context(), read.DeepCopy(), res); !errors.Is(err, kubectlplugin.ErrConflict) {
		t.Fatalf("a stale write: %v, want ErrConflict", err)
	}
	if again := get(t, env, ns, "pay-race").Spec.Resolution; again.Kind != wantKind {
		t.Fatalf("the stored resolution changed to %+v", again)
	}
}

// TestAdmissionDenialIsSurfaced: admission refuses a resolution from anyone but the principal
// (docs/architecture.md "Principals"). The real check is the BindingMoment webhook in webhook/;
// here a ValidatingAdmissionPolicy with the same rule stands in for it, so the API server really
// denies the write, and the plugin must show the server's message, who the moment is for and who
// the caller is, exit ExitRefused and leave the object alone. The principal still resolves.
func TestAdmissionDenialIsSurfaced(t *testing.T) {
	env, pluginDir := setup(t)
	ns := env.Namespace(t)
	payment.GrantPrincipals(t, env, ns, alice, bob)
	a, b := user(t, env, alice), user(t, env, bob)
	e := paymentEnvelope(t, "admission")
	mustCreate(t, env, paymentAct(t, ns, "send-payment"), moment(ns, "pay-alice", alice, "send-payment", e, time.Now().Add(time.Hour)))

	const message = "only the principal named in spec.principal may resolve this binding moment (test stand-in for the actgate webhook)"
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "kubectl-plugin-test-principal-" + ns},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{v1alpha1.GroupName}, APIVersions: []string{"v1alpha1"},
						Resources: []string{"bindingmoments"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: "!has(object.spec.resolution) || has(oldObject.spec.resolution) || request.userInfo.username == object.spec.principal",
				Message:    message,
				Reason:     ptr.To(metav1.StatusReasonForbidden), // a webhook's denial is 403 Forbidden
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policy.Name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}},
		},
	}
	for _, o := range []client.Object{policy, binding} {
		if err := env.Client.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(t.Context(), o) })
	}
	// The policy takes effect once the API server has loaded it: wait until a server-side dry
	// run of bob's resolution is denied.
	dryRun := []byte(`{"spec":{"resolution":{"kind":"declined","envelopeDigest":"` + e.Digest() + `"}}}`)
	var last error
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		bm := &v1alpha1.BindingMoment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pay-alice"}}
		last = b.Client.Patch(ctx, bm, client.RawPatch(types.MergePatchType, dryRun), client.DryRunAll)
		return apierrors.IsForbidden(last) && strings.Contains(last.Error(), message), nil
	})
	if err != nil {
		t.Fatalf("the stand-in admission policy never took effect: %v (last dry run: %v)", err, last)
	}

	before := get(t, env, ns, "pay-alice")
	r := kubectl(t, env, pluginDir, b.Kubeconfig, "actgate", "resolve", "pay-alice", "-n", ns, "--option", "1")
	if r.status != kubectlplugin.ExitRefused {
		t.Fatalf("bob resolving alice's moment: want exit %d\n%s", kubectlplugin.ExitRefused, r)
	}
	for _, want := range []string{"the API server refused the resolution", message,
		"addressed to " + alice, "authenticates you as " + bob} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if after := get(t, env, ns, "pay-alice"); after.ResourceVersion != before.ResourceVersion || after.Spec.Resolution != nil {
		t.Fatalf("bob's refused write changed the moment: %+v", after.Spec.Resolution)
	}

	r = kubectl(t, env, pluginDir, a.Kubeconfig, "actgate", "resolve", "pay-alice", "-n", ns, "--option", "2")
	if r.status != 0 {
		t.Fatalf("alice, the principal, could not resolve under the policy:\n%s", r)
	}
	if got := get(t, env, ns, "pay-alice").Spec.Resolution; got == nil || got.Kind != v1alpha1.ResolutionOption || *got.OptionIdx != 1 {
		t.Fatalf("stored %+v", got)
	}
}

// fieldOwners returns the managers whose managedFields entry holds the field at path (FieldsV1
// keys such as "f:spec", "f:resolution").
func fieldOwners(t *testing.T, entries []metav1.ManagedFieldsEntry, path ...string) []string {
	t.Helper()
	var owners []string
	for _, e := range entries {
		if e.FieldsV1 == nil {
			continue
		}
		var node map[string]any
		if err := json.Unmarshal(e.FieldsV1.GetRawBytes(), &node); err != nil {
			t.Fatalf("managedFields of %q: %v", e.Manager, err)
		}
		held := true
		for _, k := range path {
			next, ok := node[k].(map[string]any)
			if !ok {
				held = false
				break
			}
			node = next
		}
		if held {
			owners = append(owners, e.Manager)
		}
	}
	return owners
}
