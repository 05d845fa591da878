package v1alpha1_test

// These tests run against a real kube-apiserver (test/envtest) with the generated CRDs: the CEL
// rules, defaults, immutability and printer columns are the API server's behaviour, not ours to
// imitate with a fake client.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/actgate/actgate/api/v1alpha1"
)

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// wantInvalid checks err is the API server's 422 Invalid carrying msg; msg "" wants success.
func wantInvalid(t *testing.T, err error, msg string) {
	t.Helper()
	switch {
	case msg == "" && err != nil:
		t.Fatalf("want success, got %v", err)
	case msg == "":
	case err == nil:
		t.Fatalf("want rejection containing %q, the API server accepted it", msg)
	case !apierrors.IsInvalid(err):
		t.Fatalf("want 422 Invalid containing %q, got %v", msg, err)
	case !strings.Contains(err.Error(), msg):
		t.Fatalf("rejection does not contain %q:\n%v", msg, err)
	}
}

func TestCRDsAreEstablished(t *testing.T) {
	e := apiServer(t)
	for _, name := range []string{"toolpolicies.actgate.io", "acts.actgate.io", "bindingmoments.actgate.io", "receiptanchors.actgate.io"} {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := e.Client.Get(ctxFor(t), client.ObjectKey{Name: name}, crd); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		established := false
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				established = true
			}
		}
		if !established {
			t.Errorf("%s is not Established: %+v", name, crd.Status.Conditions)
		}
	}
}

func TestSamplesApplyWithKubectl(t *testing.T) {
	e := apiServer(t)
	ns := e.Namespace(t)
	out := e.Kubectl(t, "apply", "-n", ns, "-f", "config/samples/")
	for _, want := range []string{
		"toolpolicy.actgate.io/payments created",
		"act.actgate.io/send-payment-inv-2291 created",
		"bindingmoment.actgate.io/send-payment-inv-2291-alice created",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl apply output lacks %q:\n%s", want, out)
		}
	}
	ctx := ctxFor(t)
	p := &v1alpha1.ToolPolicy{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "payments"}, p); err != nil {
		t.Fatal(err)
	}
	// A second apply of the same files changes nothing and trips no immutability rule. (kubectl
	// may still say "configured" for the policy: client-side apply sends rules, an atomic list,
	// whole when the stored one carries server-side defaults; the result is the same object.)
	e.Kubectl(t, "apply", "-n", ns, "-f", "config/samples/")
	again := &v1alpha1.ToolPolicy{}
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(p), again); err != nil {
		t.Fatal(err)
	}
	if again.Generation != p.Generation || !equality.Semantic.DeepEqual(again.Spec, p.Spec) {
		t.Errorf("re-applying the sample changed the policy: generation %d -> %d", p.Generation, again.Generation)
	}
	if p.Spec.Servers[0].Protocol != v1alpha1.ServerProtocolMCP {
		t.Errorf("protocol = %q", p.Spec.Servers[0].Protocol)
	}
	money := p.Spec.Rules[1]
	if money.Evidence.SeparationOfDuties == nil || !*money.Evidence.SeparationOfDuties || money.Evidence.MinPrincipals != 1 {
		t.Errorf("money-movement evidence = %+v", money.Evidence)
	}
	if got := string(money.Alternatives[0].Args.Raw); got != `{"dry_run":true}` {
		t.Errorf("alternative args stored as %s (pruned?)", got)
	}
	bm := &v1alpha1.BindingMoment{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "send-payment-inv-2291-alice"}, bm); err != nil {
		t.Fatal(err)
	}
	if want := sampleBindingMoment(t).Spec.Envelope; bm.Spec.Envelope != want {
		t.Errorf("envelope bytes changed in storage:\n got %q\nwant %q", bm.Spec.Envelope, want)
	}
	if got := digest([]byte(bm.Spec.Envelope)); got != bm.Spec.EnvelopeDigest {
		t.Errorf("stored envelope no longer hashes to its digest: %s vs %s", got, bm.Spec.EnvelopeDigest)
	}
}

func TestToolPolicyDefaults(t *testing.T) {
	e := apiServer(t)
	ns := e.Namespace(t)
	p := &v1alpha1.ToolPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "minimal"},
		Spec: v1alpha1.ToolPolicySpec{
			Servers: []v1alpha1.ToolServer{{Name: "tools", URL: "http://tools.example:8080/mcp"}},
			Rules: []v1alpha1.ToolRule{
				{Name: "reads", Tools: []string{"*"}},
				{Name: "human", Tools: []string{"wire"}, Evidence: &v1alpha1.EvidenceRequirement{
					Role: v1alpha1.EvidenceRoleHumanAuthorization, Principals: []string{"bob"},
				}, Alternatives: []v1alpha1.Alternative{{Label: "Do not wire", Reasoning: "Safer.", Args: runtime.RawExtension{Raw: []byte(`{"dry_run":true}`)}}}},
				{Name: "permit", Tools: []string{"post"}, Evidence: &v1alpha1.EvidenceRequirement{}},
			},
		},
	}
	if err := e.Client.Create(ctxFor(t), p); err != nil {
		t.Fatal(err)
	}
	if p.Spec.Mode != v1alpha1.PolicyModeEnforce {
		t.Errorf("mode defaulted to %q, want Enforce", p.Spec.Mode)
	}
	if p.Spec.AuthorityTTL == nil || p.Spec.AuthorityTTL.Duration != 60*time.Second {
		t.Errorf("authorityTTL defaulted to %v, want 60s", p.Spec.AuthorityTTL)
	}
	if p.Spec.Servers[0].Protocol != v1alpha1.ServerProtocolMCP {
		t.Errorf("protocol defaulted to %q, want MCP", p.Spec.Servers[0].Protocol)
	}
	h := p.Spec.Rules[1].Evidence
	if h.MinPrincipals != 1 || h.SeparationOfDuties == nil || !*h.SeparationOfDuties {
		t.Errorf("evidence defaults minPrincipals=%d separationOfDuties=%v, want 1 and true", h.MinPrincipals, h.SeparationOfDuties)
	}
	if r := p.Spec.Rules[2].Evidence.Role; r != v1alpha1.EvidenceRoleNone {
		t.Errorf("evidence role defaulted to %q, want None", r)
	}
}

func TestToolPolicyValidation(t *testing.T) {
	e := apiServer(t)
	ns := e.Namespace(t)
	alt := v1alpha1.Alternative{Label: "Dry run", Reasoning: "No effect.", Args: runtime.RawExtension{Raw: []byte(`{"dry_run":true}`)}}
	dur := func(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }
	// The sample's rules: 0 reads (None), 1 money-movement (HumanAuthorization), 2
	// receipts-by-email (PolicyPermit, provenance Deny).
	for i, tc := range []struct {
		name   string
		mutate func(*v1alpha1.ToolPolicySpec)
		want   string // "" = accepted
	}{
		{"sample is valid", func(*v1alpha1.ToolPolicySpec) {}, ""},
		{"audit mode is valid", func(s *v1alpha1.ToolPolicySpec) { s.Mode = v1alpha1.PolicyModeAudit }, ""},
		{"TTL bounds are inclusive", func(s *v1alpha1.ToolPolicySpec) {
			s.AuthorityTTL = dur(time.Second)
			s.Rules[1].AuthorityTTL = dur(time.Hour)
		}, ""},
		{"fewer principals than minPrincipals", func(s *v1alpha1.ToolPolicySpec) { s.Rules[1].Evidence.MinPrincipals = 2 },
			"HumanAuthorization evidence must name at least minPrincipals principals"},
		{"HumanAuthorization without principals", func(s *v1alpha1.ToolPolicySpec) { s.Rules[1].Evidence.Principals = nil },
			"HumanAuthorization evidence must name at least minPrincipals principals"},
		{"two principals for minPrincipals 2 is valid", func(s *v1alpha1.ToolPolicySpec) {
			s.Rules[1].Evidence.MinPrincipals = 2
			s.Rules[1].Evidence.Principals = append(s.Rules[1].Evidence.Principals, "bob@example.com")
		}, ""},
		{"HumanAuthorization without an alternative", func(s *v1alpha1.ToolPolicySpec) { s.Rules[1].Alternatives = nil },
			"a rule requiring HumanAuthorization must declare at least one alternative"},
		{"more than three alternatives", func(s *v1alpha1.ToolPolicySpec) { s.Rules[1].Alternatives = []v1alpha1.Alternative{alt, alt, alt, alt} },
			"must have at most 3 items"},
		{"policy TTL below 1s", func(s *v1alpha1.ToolPolicySpec) { s.AuthorityTTL = dur(500 * time.Millisecond) },
			"authorityTTL must be between 1s and 1h"},
		{"policy TTL above 1h", func(s *v1alpha1.ToolPolicySpec) { s.AuthorityTTL = dur(2 * time.Hour) },
			"authorityTTL must be between 1s and 1h"},
		{"policy TTL zero", func(s *v1alpha1.ToolPolicySpec) { s.AuthorityTTL = dur(0) },
			"authorityTTL must be between 1s and 1h"},
		{"rule TTL above 1h", func(s *v1alpha1.ToolPolicySpec) { s.Rules[1].AuthorityTTL = dur(61 * time.Minute) },
			"authorityTTL must be between 1s and 1h"},
		{"duplicate server names", func(s *v1alpha1.ToolPolicySpec) { s.Servers = append(s.Servers, s.Servers[0]) },
			`spec.servers[1]: Duplicate value: {"name":"payments"}`},
		{"duplicate rule names", func(s *v1alpha1.ToolPolicySpec) { s.Rules[2].Name = "reads" },
			"rule names must be unique"},
		{"rule names an unknown server", func(s *v1alpha1.ToolPolicySpec) { s.Rules[0].Servers = []string{"ledger"} },
			"rules[].servers must name servers listed in spec.servers"},
		{"no servers", func(s *v1alpha1.ToolPolicySpec) { s.Servers = nil; s.Rules = nil },
			"spec.servers: Required value"},
		{"server url not http(s)", func(s *v1alpha1.ToolPolicySpec) { s.Servers[0].URL = "ftp://payments.example/mcp" },
			"url must be an absolute http or https URL"},
		{"server url relative", func(s *v1alpha1.ToolPolicySpec) { s.Servers[0].URL = "/mcp" },
			"url must be an absolute http or https URL"},
		{"server name not a DNS label", func(s *v1alpha1.ToolPolicySpec) { s.Servers[0].Name = "Payments_1"; s.Rules = nil },
			"spec.servers[0].name: Invalid value"},
		{"unknown consequence class", func(s *v1alpha1.ToolPolicySpec) { s.Rules[1].ConsequenceClass = "PAYOUT" },
			`Unsupported value: "PAYOUT"`},
		{"unknown evidence role", func(s *v1alpha1.ToolPolicySpec) { s.Rules[1].Evidence.Role = "policy-permit" },
			`Unsupported value: "policy-permit"`},
		{"tool glob with a space", func(s *v1alpha1.ToolPolicySpec) { s.Rules[0].Tools = []string{"send payment"} },
			"spec.rules[0].tools[0]: Invalid value"},
		{"rule without tools", func(s *v1alpha1.ToolPolicySpec) { s.Rules[0].Tools = nil },
			"spec.rules[0].tools: Required value"},
		{"Escalate without an alternative", func(s *v1alpha1.ToolPolicySpec) {
			s.Rules[2].Provenance[0].Action = v1alpha1.ProvenanceActionEscalate
			s.Rules[2].Evidence.Principals = []string{"alice@example.com"}
		}, "a rule with an Escalate provenance action must declare at least one alternative"},
		{"Escalate without principals", func(s *v1alpha1.ToolPolicySpec) {
			s.Rules[2].Provenance[0].Action = v1alpha1.ProvenanceActionEscalate
			s.Rules[2].Alternatives = []v1alpha1.Alternative{alt}
		}, "a rule with an Escalate provenance action must name at least minPrincipals principals in evidence"},
		{"Escalate with principals and an alternative is valid", func(s *v1alpha1.ToolPolicySpec) {
			s.Rules[2].Provenance[0].Action = v1alpha1.ProvenanceActionEscalate
			s.Rules[2].Evidence.Principals = []string{"alice@example.com"}
			s.Rules[2].Alternatives = []v1alpha1.Alternative{alt}
		}, ""},
		{"provenance without sources", func(s *v1alpha1.ToolPolicySpec) { s.Rules[2].Provenance[0].Sources = nil },
			"spec.rules[2].provenance[0].sources: Required value"},
		{"destination neither a server name nor an origin", func(s *v1alpha1.ToolPolicySpec) {
			s.Rules[0].Destinations = []string{"https://payments.example/path"}
		}, "spec.rules[0].destinations[0]: Invalid value"},
		{"destinations by name and origin are valid", func(s *v1alpha1.ToolPolicySpec) {
			s.Rules[0].Destinations = []string{"payments", "https://payments.example:8443"}
		}, ""},
		// envelope-04 §12.4: only INFORMATIONAL moments may be offered as an MCP elicitation.
		{"elicitation of INFORMATIONAL is valid", func(s *v1alpha1.ToolPolicySpec) {
			s.Elicitation = &v1alpha1.ElicitationPolicy{Classes: []v1alpha1.ConsequenceClass{v1alpha1.ConsequenceInformational}}
		}, ""},
		{"elicitation of FINANCIAL", func(s *v1alpha1.ToolPolicySpec) {
			s.Elicitation = &v1alpha1.ElicitationPolicy{Classes: []v1alpha1.ConsequenceClass{v1alpha1.ConsequenceInformational, v1alpha1.ConsequenceFinancial}}
		}, "only INFORMATIONAL moments may be offered as an elicitation"},
		{"elicitation of PERSISTENT_STATE_CHANGE", func(s *v1alpha1.ToolPolicySpec) {
			s.Elicitation = &v1alpha1.ElicitationPolicy{Classes: []v1alpha1.ConsequenceClass{v1alpha1.ConsequencePersistentStateChange}}
		}, "only INFORMATIONAL moments may be offered as an elicitation"},
		{"elicitation without classes", func(s *v1alpha1.ToolPolicySpec) {
			s.Elicitation = &v1alpha1.ElicitationPolicy{}
		}, "spec.elicitation.classes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := samplePolicy(t)
			p.Namespace, p.Name = ns, fmt.Sprintf("case-%d", i)
			tc.mutate(&p.Spec)
			wantInvalid(t, e.Client.Create(ctxFor(t), p), tc.want)
		})
	}
}

func TestActSpecIsImmutable(t *testing.T) {
	e := apiServer(t)
	ns := e.Namespace(t)
	ctx := ctxFor(t)
	a := sampleAct(t)
	a.Namespace = ns
	if err := e.Client.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		mutate func(*v1alpha1.Act)
		want   string
	}{
		{"tool", func(a *v1alpha1.Act) { a.Spec.Tool = "refund" }, "Act spec is immutable"},
		{"actionDigest", func(a *v1alpha1.Act) { a.Spec.ActionDigest = digest([]byte("other")) }, "Act spec is immutable"},
		{"destination", func(a *v1alpha1.Act) { a.Spec.Destination = "https://evil.example" }, "Act spec is immutable"},
		{"policyEpoch", func(a *v1alpha1.Act) { a.Spec.PolicyEpoch++ }, "Act spec is immutable"},
		{"labels may change", func(a *v1alpha1.Act) { a.Labels["actgate.io/retain"] = "true" }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cur := &v1alpha1.Act{}
			if err := e.Client.Get(ctx, client.ObjectKeyFromObject(a), cur); err != nil {
				t.Fatal(err)
			}
			tc.mutate(cur)
			wantInvalid(t, e.Client.Update(ctx, cur), tc.want)
		})
	}
}

func TestActSpecValidation(t *testing.T) {
	e := apiServer(t)
	ns := e.Namespace(t)
	for i, tc := range []struct {
		name   string
		mutate func(*v1alpha1.ActSpec)
		want   string
	}{
		{"sample is valid", func(*v1alpha1.ActSpec) {}, ""},
		{"uppercase digest", func(s *v1alpha1.ActSpec) {
			s.ArgumentsDigest = v1alpha1.Digest(strings.ToUpper(string(s.ArgumentsDigest)))
		},
			"spec.argumentsDigest: Invalid value"},
		{"digest without prefix", func(s *v1alpha1.ActSpec) { s.ActionDigest = s.ActionDigest[len("sha256:"):] + "0000000" },
			"spec.actionDigest: Invalid value"},
		{"missing action digest", func(s *v1alpha1.ActSpec) { s.ActionDigest = "" }, "spec.actionDigest: Required value"},
		{"missing policy epoch", func(s *v1alpha1.ActSpec) { s.PolicyEpoch = 0 }, "spec.policyEpoch: Required value"},
		{"unknown class", func(s *v1alpha1.ActSpec) { s.ConsequenceClass = "MONEY" }, `Unsupported value: "MONEY"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := sampleAct(t)
			a.Namespace, a.Name = ns, fmt.Sprintf("case-%d", i)
			tc.mutate(&a.Spec)
			wantInvalid(t, e.Client.Create(ctxFor(t), a), tc.want)
		})
	}
}

// The lifecycle guards of ActStatus (action-evidence-boundary "Classify the Effect Outcome" and
// "Perform Authenticated Reconciliation"): no way back, terminal states are final, consumed
// authority never "expires", and INDETERMINATE is left only with reconciliation evidence.
func TestActStatusLifecycle(t *testing.T) {
	e := apiServer(t)
	ns := e.Namespace(t)
	ctx := ctxFor(t)
	evidence := digest([]byte("provider answer"))
	type step struct {
		name   string
		mutate func(*v1alpha1.ActStatus)
		want   string
	}
	state := func(s v1alpha1.ActState) func(*v1alpha1.ActStatus) {
		return func(st *v1alpha1.ActStatus) { st.State = s }
	}
	for _, seq := range []struct {
		name  string
		steps []step
	}{
		{"executed through reconciliation", []step{
			{"allowed", func(st *v1alpha1.ActStatus) {
				st.Decision, st.State = v1alpha1.ActDecisionAllowed, v1alpha1.ActStateAuthorized
				st.AuthorityRef = &v1alpha1.LocalObjectReference{Name: "authority-1"}
			}, ""},
			{"consumed", state(v1alpha1.ActStateConsumed), ""},
			{"dispatch pending", state(v1alpha1.ActStateDispatchPending), ""},
			{"back to authorized", state(v1alpha1.ActStateAuthorized), "state cannot move backwards in the lifecycle"},
			{"expire after consume", state(v1alpha1.ActStateExpired), "only unconsumed authority can expire"},
			{"state removed", state(""), "state cannot move backwards in the lifecycle"},
			{"invoked", func(st *v1alpha1.ActStatus) { st.State, st.OperationID = v1alpha1.ActStateInvoked, "op-1" }, ""},
			{"indeterminate", state(v1alpha1.ActStateIndeterminate), ""},
			{"executed without evidence", func(st *v1alpha1.ActStatus) {
				st.State = v1alpha1.ActStateExecuted
				st.Reconciliation = &v1alpha1.ActReconciliation{Attempts: 1, LastResult: v1alpha1.ReconciliationExecuted}
			}, "an INDETERMINATE act leaves that state only through authenticated reconciliation"},
			{"failed without evidence", state(v1alpha1.ActStateFailed), "an INDETERMINATE act leaves that state only through authenticated reconciliation"},
			{"reconciliation attempt stays indeterminate", func(st *v1alpha1.ActStatus) {
				st.Reconciliation = &v1alpha1.ActReconciliation{Attempts: 1, LastResult: v1alpha1.ReconciliationUnauthenticated, LastAttemptTime: ptr.To(metav1.Now())}
			}, ""},
			{"executed with evidence", func(st *v1alpha1.ActStatus) {
				st.State = v1alpha1.ActStateExecuted
				st.Reconciliation.Attempts, st.Reconciliation.LastResult, st.Reconciliation.EvidenceDigest = 2, v1alpha1.ReconciliationExecuted, evidence
			}, ""},
			{"executed is final", state(v1alpha1.ActStateFailed), "a terminal state (EXECUTED, FAILED, EXPIRED) is final"},
		}},
		{"authority expires unconsumed", []step{
			{"authorized", state(v1alpha1.ActStateAuthorized), ""},
			{"expired", state(v1alpha1.ActStateExpired), ""},
			{"expired is final", state(v1alpha1.ActStateConsumed), "a terminal state (EXECUTED, FAILED, EXPIRED) is final"},
		}},
		{"denied with a code", []step{
			{"bad code", func(st *v1alpha1.ActStatus) { st.Decision, st.Code = v1alpha1.ActDecisionDenied, "scope mismatch" }, "status.code: Invalid value"},
			{"denied", func(st *v1alpha1.ActStatus) {
				st.Decision, st.Code, st.State = v1alpha1.ActDecisionDenied, "EF_SCOPE_MISMATCH", v1alpha1.ActStateVerified
			}, ""},
		}},
	} {
		t.Run(seq.name, func(t *testing.T) {
			a := sampleAct(t)
			a.Namespace, a.Name = ns, strings.ReplaceAll(seq.name, " ", "-")
			if err := e.Client.Create(ctx, a); err != nil {
				t.Fatal(err)
			}
			for _, s := range seq.steps {
				cur := &v1alpha1.Act{}
				if err := e.Client.Get(ctx, client.ObjectKeyFromObject(a), cur); err != nil {
					t.Fatal(err)
				}
				s.mutate(&cur.Status)
				t.Run(s.name, func(t *testing.T) { wantInvalid(t, e.Client.Status().Update(ctx, cur), s.want) })
			}
		})
	}
}

func TestBindingMomentSpecIsImmutable(t *testing.T) {
	e := apiServer(t)
	ns := e.Namespace(t)
	ctx := ctxFor(t)
	bm := sampleBindingMoment(t)
	bm.Namespace = ns
	if err := e.Client.Create(ctx, bm); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		mutate func(*v1alpha1.BindingMomentSpec)
		want   string
	}{
		{"envelope", func(s *v1alpha1.BindingMomentSpec) {
			s.Envelope = strings.Replace(s.Envelope, "2500.00", "25000.00", 1)
		}, "envelope is immutable"},
		{"envelope digest", func(s *v1alpha1.BindingMomentSpec) { s.EnvelopeDigest = digest([]byte("x")) }, "envelopeDigest is immutable"},
		{"principal", func(s *v1alpha1.BindingMomentSpec) { s.Principal = "mallory@example.com" }, "principal is immutable"},
		{"act", func(s *v1alpha1.BindingMomentSpec) { s.ActRef.Name = "other-act" }, "actRef is immutable"},
		{"expiry", func(s *v1alpha1.BindingMomentSpec) { s.ExpiresAt = metav1.NewTime(s.ExpiresAt.Add(time.Hour)) }, "expiresAt is immutable"},
		{"synopsis", func(s *v1alpha1.BindingMomentSpec) { s.Synopsis = "Send it." }, "synopsis is immutable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cur := &v1alpha1.BindingMoment{}
			if err := e.Client.Get(ctx, client.ObjectKeyFromObject(bm), cur); err != nil {
				t.Fatal(err)
			}
			tc.mutate(&cur.Spec)
			wantInvalid(t, e.Client.Update(ctx, cur), tc.want)
		})
	}
}

// Resolutions follow binding-moment-envelope-04 §7.3: the member set depends on the kind, the
// resolution names its envelope, and once written it is final.
func TestBindingMomentResolution(t *testing.T) {
	e := apiServer(t)
	ns := e.Namespace(t)
	ctx := ctxFor(t)
	bm := sampleBindingMoment(t)
	bm.Namespace = ns
	if err := e.Client.Create(ctx, bm); err != nil {
		t.Fatal(err)
	}
	d := bm.Spec.EnvelopeDigest
	res := func(r v1alpha1.BindingMomentResolution) *v1alpha1.BindingMomentResolution { return &r }
	for _, tc := range []struct {
		name string
		res  *v1alpha1.BindingMomentResolution
		want string
	}{
		{"another envelope's digest", res(v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionDeclined, EnvelopeDigest: digest([]byte("other"))}),
			"resolution.envelopeDigest must equal spec.envelopeDigest"},
		{"option without optionIdx", res(v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionOption, EnvelopeDigest: d}),
			"optionIdx is required for kind option and must be absent otherwise"},
		{"question with optionIdx", res(v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionQuestion, OptionIdx: ptr.To[int32](0), EnvelopeDigest: d}),
			"optionIdx is required for kind option and must be absent otherwise"},
		{"answer without text", res(v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionAnswer, EnvelopeDigest: d}),
			"answer is required for kind answer and must be absent otherwise"},
		{"declined with text", res(v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionDeclined, Answer: "no", EnvelopeDigest: d}),
			"answer is required for kind answer and must be absent otherwise"},
		{"optionIdx beyond four options", res(v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionOption, OptionIdx: ptr.To[int32](4), EnvelopeDigest: d}),
			"spec.resolution.optionIdx: Invalid value"},
		{"unknown kind", res(v1alpha1.BindingMomentResolution{Kind: "approve", EnvelopeDigest: d}), `Unsupported value: "approve"`},
		{"option 1", res(v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionOption, OptionIdx: ptr.To[int32](1), EnvelopeDigest: d}), ""},
		{"changed after written", res(v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionOption, OptionIdx: ptr.To[int32](0), EnvelopeDigest: d}),
			"resolution cannot be changed or removed once written"},
		{"removed after written", nil, "resolution cannot be changed or removed once written"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cur := &v1alpha1.BindingMoment{}
			if err := e.Client.Get(ctx, client.ObjectKeyFromObject(bm), cur); err != nil {
				t.Fatal(err)
			}
			cur.Spec.Resolution = tc.res
			wantInvalid(t, e.Client.Update(ctx, cur), tc.want)
		})
	}
	final := &v1alpha1.BindingMoment{}
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(bm), final); err != nil {
		t.Fatal(err)
	}
	if r := final.Spec.Resolution; r == nil || r.Kind != v1alpha1.ResolutionOption || r.OptionIdx == nil || *r.OptionIdx != 1 {
		t.Fatalf("stored resolution = %+v, want option 1", r)
	}
}

// A resolution's via is bounded: surface a lower-case DNS label of at most 64 characters,
// issuer at most 512, subject at most 255, neither empty; once written it is as final as the
// rest of the resolution.
func TestBindingMomentResolutionVia(t *testing.T) {
	e := apiServer(t)
	ns := e.Namespace(t)
	ctx := ctxFor(t)
	bm := sampleBindingMoment(t)
	bm.Namespace = ns
	if err := e.Client.Create(ctx, bm); err != nil {
		t.Fatal(err)
	}
	authTime := metav1.NewTime(time.Date(2026, 12, 6, 11, 0, 0, 0, time.UTC))
	for _, tc := range []struct {
		name string
		via  v1alpha1.ResolutionVia
		want string
	}{
		{"surface upper case", v1alpha1.ResolutionVia{Surface: "Console"}, "spec.resolution.via.surface: Invalid value"},
		{"surface with a space", v1alpha1.ResolutionVia{Surface: "my console"}, "spec.resolution.via.surface: Invalid value"},
		{"surface ends in a dash", v1alpha1.ResolutionVia{Surface: "console-"}, "spec.resolution.via.surface: Invalid value"},
		{"surface of 65", v1alpha1.ResolutionVia{Surface: strings.Repeat("a", 65)}, "spec.resolution.via.surface: Too long"},
		{"issuer of 513", v1alpha1.ResolutionVia{Issuer: "https://" + strings.Repeat("i", 505)}, "spec.resolution.via.issuer: Too long"},
		{"subject of 256", v1alpha1.ResolutionVia{Subject: strings.Repeat("s", 256)}, "spec.resolution.via.subject: Too long"},
		{"every field at its bound", v1alpha1.ResolutionVia{Surface: strings.Repeat("a", 64), Issuer: "https://" + strings.Repeat("i", 504),
			Subject: strings.Repeat("s", 255), AuthTime: &authTime}, ""},
		{"changed after written", v1alpha1.ResolutionVia{Surface: "kubectl"}, "resolution cannot be changed or removed once written"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cur := &v1alpha1.BindingMoment{}
			if err := e.Client.Get(ctx, client.ObjectKeyFromObject(bm), cur); err != nil {
				t.Fatal(err)
			}
			via := tc.via
			cur.Spec.Resolution = &v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionDeclined, EnvelopeDigest: bm.Spec.EnvelopeDigest, Via: &via}
			wantInvalid(t, e.Client.Update(ctx, cur), tc.want)
		})
	}
	// An empty issuer or subject, sent explicitly, is refused rather than read as absent.
	for _, field := range []string{"issuer", "subject"} {
		t.Run("empty "+field, func(t *testing.T) {
			other := sampleBindingMoment(t)
			other.Namespace, other.Name = ns, "empty-"+field
			if err := e.Client.Create(ctx, other); err != nil {
				t.Fatal(err)
			}
			patch := fmt.Sprintf(`{"spec":{"resolution":{"kind":"declined","envelopeDigest":%q,"via":{%q:""}}}}`, other.Spec.EnvelopeDigest, field)
			wantInvalid(t, e.Client.Patch(ctx, other, client.RawPatch(types.MergePatchType, []byte(patch))), "spec.resolution.via."+field+": Invalid value")
		})
	}
	final := &v1alpha1.BindingMoment{}
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(bm), final); err != nil {
		t.Fatal(err)
	}
	if v := final.Spec.Resolution.Via; v == nil || len(v.Surface) != 64 || v.AuthTime == nil || !v.AuthTime.Equal(&authTime) {
		t.Fatalf("stored via = %+v, want the one at the bounds", v)
	}
}

func TestBindingMomentStatusIsFinalOnceSettled(t *testing.T) {
	e := apiServer(t)
	ns := e.Namespace(t)
	ctx := ctxFor(t)
	bm := sampleBindingMoment(t)
	bm.Namespace = ns
	if err := e.Client.Create(ctx, bm); err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		name   string
		mutate func(*v1alpha1.BindingMomentStatus)
		want   string
	}{
		{"pending", func(st *v1alpha1.BindingMomentStatus) { st.State = v1alpha1.BindingMomentPending }, ""},
		{"resolved", func(st *v1alpha1.BindingMomentStatus) {
			st.State, st.ResolvedBy, st.ResolvedAt = v1alpha1.BindingMomentResolved, "alice@example.com", ptr.To(metav1.Now())
		}, ""},
		{"back to pending", func(st *v1alpha1.BindingMomentStatus) { st.State = v1alpha1.BindingMomentPending }, "a Resolved or Expired binding moment is final"},
		{"expired after resolved", func(st *v1alpha1.BindingMomentStatus) { st.State = v1alpha1.BindingMomentExpired }, "a Resolved or Expired binding moment is final"},
	} {
		t.Run(s.name, func(t *testing.T) {
			cur := &v1alpha1.BindingMoment{}
			if err := e.Client.Get(ctx, client.ObjectKeyFromObject(bm), cur); err != nil {
				t.Fatal(err)
			}
			s.mutate(&cur.Status)
			wantInvalid(t, e.Client.Status().Update(ctx, cur), s.want)
		})
	}
}

// `kubectl get acts` reads like a ledger: tool, class, decision, outcome (the Settled
// condition's reason) and EF code per act; the lifecycle state the act reached is a wide column.
func TestKubectlGetActsPrintsTheLedger(t *testing.T) {
	e := apiServer(t)
	ns := e.Namespace(t)
	ctx := ctxFor(t)
	rows := []struct {
		name   string
		status v1alpha1.ActStatus
		want   []string // columns after NAME, before AGE
	}{
		{"paid", v1alpha1.ActStatus{Decision: v1alpha1.ActDecisionAllowed, State: v1alpha1.ActStateExecuted,
			Conditions: settled(metav1.ConditionTrue, v1alpha1.ActExecutedReason)},
			[]string{"send_payment", "FINANCIAL", "Allowed", "Executed"}},
		{"swapped-server", v1alpha1.ActStatus{Decision: v1alpha1.ActDecisionDenied, State: v1alpha1.ActStateMatch, Code: "EF_SCOPE_MISMATCH",
			Conditions: settled(metav1.ConditionTrue, v1alpha1.ActDeniedReason)},
			[]string{"send_payment", "FINANCIAL", "Denied", "Denied", "EF_SCOPE_MISMATCH"}},
	}
	for _, r := range rows {
		a := sampleAct(t)
		a.Namespace, a.Name = ns, r.name
		if err := e.Client.Create(ctx, a); err != nil {
			t.Fatal(err)
		}
		a.Status = r.status
		if err := e.Client.Status().Update(ctx, a); err != nil {
			t.Fatal(err)
		}
	}

	out := e.Kubectl(t, "get", "acts", "-n", ns)
	t.Logf("kubectl get acts:\n%s", out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if got, want := strings.Join(strings.Fields(lines[0]), " "), "NAME TOOL CLASS DECISION OUTCOME CODE AGE"; got != want {
		t.Fatalf("header %q, want %q\n%s", got, want, out)
	}
	if len(lines) != 1+len(rows) {
		t.Fatalf("want %d rows:\n%s", len(rows), out)
	}
	for i, r := range rows { // kubectl sorts by name: paid, swapped-server
		f := strings.Fields(lines[1+i])
		got := strings.Join(f[:len(f)-1], " ")
		want := strings.Join(append([]string{r.name}, r.want...), " ")
		if got != want {
			t.Errorf("row %d = %q, want %q (then AGE)", i, got, want)
		}
	}

	// The short name and the wide columns.
	wide := e.Kubectl(t, "get", "act", "-n", ns, "-o", "wide")
	if h := strings.Join(strings.Fields(strings.SplitN(wide, "\n", 2)[0]), " "); h != "NAME TOOL CLASS DECISION OUTCOME CODE AGE REACHED SERVER AGENT ACTION" {
		t.Errorf("wide header %q", h)
	}
	if !strings.Contains(wide, "MATCH") {
		t.Errorf("wide output lacks the state a denied act reached:\n%s", wide)
	}
	if !strings.Contains(wide, "system:serviceaccount:default:billing-agent") {
		t.Errorf("wide output lacks the agent:\n%s", wide)
	}
}

// settled is an act's Settled condition with reason.
func settled(status metav1.ConditionStatus, reason string) []metav1.Condition {
	return []metav1.Condition{{Type: v1alpha1.ActSettledCondition, Status: status, Reason: reason, Message: reason,
		LastTransitionTime: metav1.Now()}}
}

func TestKubectlGetBindingMoments(t *testing.T) {
	e := apiServer(t)
	ns := e.Namespace(t)
	bm := sampleBindingMoment(t)
	bm.Namespace = ns
	if err := e.Client.Create(ctxFor(t), bm); err != nil {
		t.Fatal(err)
	}
	bm.Status.State = v1alpha1.BindingMomentPending
	if err := e.Client.Status().Update(ctxFor(t), bm); err != nil {
		t.Fatal(err)
	}
	out := e.Kubectl(t, "get", "bm", "-n", ns)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if got := strings.Join(strings.Fields(lines[0]), " "); got != "NAME PRINCIPAL SYNOPSIS STATE AGE" {
		t.Fatalf("header %q:\n%s", got, out)
	}
	want := strings.Join([]string{bm.Name, "alice@example.com", bm.Spec.Synopsis, "Pending"}, " ")
	if len(lines) != 2 || !strings.HasPrefix(strings.Join(strings.Fields(lines[1]), " "), want) {
		t.Errorf("row %q, want prefix %q", lines[1], want)
	}
	// The actgate category lists every kind.
	if all := e.Kubectl(t, "get", "actgate", "-n", ns, "-o", "name"); !strings.Contains(all, "bindingmoment.actgate.io/"+bm.Name) {
		t.Errorf("kubectl get actgate lacks the binding moment:\n%s", all)
	}
}

// config/rbac applies with kustomize and grants what its comments say: the manager writes
// status but never BindingMoment spec or new Acts, and a principal bound to the principal role
// may write a BindingMoment (its spec.resolution) but not its status nor any Act.
func TestRBACManifests(t *testing.T) {
	e := apiServer(t)
	ns := e.Namespace(t)
	if err := e.Client.Create(ctxFor(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "actgate-system"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	out := e.Kubectl(t, "apply", "-k", "config/rbac")
	for _, want := range []string{
		"serviceaccount/actgate-manager",
		"clusterrole.rbac.authorization.k8s.io/actgate-manager-role",
		"clusterrolebinding.rbac.authorization.k8s.io/actgate-manager-rolebinding",
		"clusterrole.rbac.authorization.k8s.io/actgate-bindingmoment-principal-role",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl apply -k config/rbac lacks %q:\n%s", want, out)
		}
	}
	e.Kubectl(t, "create", "rolebinding", "alice-principal", "-n", ns,
		"--clusterrole=actgate-bindingmoment-principal-role", "--user=alice@example.com")

	const manager = "system:serviceaccount:actgate-system:actgate-manager"
	for _, tc := range []struct {
		as, verb, resource string
		want               string
	}{
		{manager, "update", "acts.actgate.io/status", "yes"},
		{manager, "delete", "acts.actgate.io", "yes"},
		{manager, "create", "acts.actgate.io", "no"},
		{manager, "update", "bindingmoments.actgate.io", "no"},
		{manager, "patch", "bindingmoments.actgate.io/status", "yes"},
		{manager, "update", "toolpolicies.actgate.io", "no"},
		{"alice@example.com", "patch", "bindingmoments.actgate.io", "yes"},
		{"alice@example.com", "update", "bindingmoments.actgate.io/status", "no"},
		{"alice@example.com", "create", "acts.actgate.io", "no"},
		{"alice@example.com", "get", "toolpolicies.actgate.io", "no"},
	} {
		t.Run(tc.as+" "+tc.verb+" "+tc.resource, func(t *testing.T) {
			args := []string{"auth", "can-i", tc.verb, tc.resource, "-n", ns, "--as", tc.as}
			if res, sub, ok := strings.Cut(tc.resource, "/"); ok {
				args[3] = res
				args = append(args, "--subresource", sub)
			}
			cmd := e.Command(ctxFor(t), "kubectl", args...)
			got, _ := cmd.Output() // can-i exits 1 for "no"
			if strings.TrimSpace(string(got)) != tc.want {
				t.Errorf("can-i = %q, want %q", strings.TrimSpace(string(got)), tc.want)
			}
		})
	}
}
