package kubectl_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/action"
	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/jcs"
	"github.com/actgate/actgate/test/envtest"
)

const (
	alice = "alice@example.com"
	bob   = "bob@example.com"
)

// The call the agent made and the policy's dry-run alternative (docs/architecture.md "The action an
// option authorises": the action is {"tool", "args"}).
var (
	paymentArgs = json.RawMessage(`{"amount":"2500.00","currency":"EUR","invoice":"INV-2291","to":"acct-7781"}`)
	dryRunArgs  = json.RawMessage(`{"amount":"2500.00","currency":"EUR","dry_run":true,"invoice":"INV-2291","to":"acct-7781"}`)
)

// paymentEnvelope is a gate-authored envelope for the payment; findings differ per moment so
// each has its own digest (envelope-04 §12.5: byte-identical envelopes share a digest).
func paymentEnvelope(t *testing.T, tag string) *envelope.Envelope {
	t.Helper()
	env, err := envelope.Build(envelope.Draft{
		Synopsis: "Dry-run the EUR 2500.00 payment of invoice INV-2291 to acct-7781 before sending it.",
		Findings: []string{
			"send_payment is FINANCIAL and rule money-movement requires HumanAuthorization.",
			"The amount is within the policy cap of 10000.00.",
			"Moment " + tag + " of the test.",
		},
		Recommendations: []string{"Run the payment as a dry run first.", "Send the payment as requested."},
		Offer:           "Ask for detail on any item.",
		Stem:            "How should the payment of invoice INV-2291 proceed?",
		Options: []envelope.DraftOption{
			{Label: "Send the payment as requested", Reasoning: "Pays the invoice now, exactly as the agent asked.", Tool: "send_payment", Args: paymentArgs},
			{Label: "Dry-run the payment", Reasoning: "Shows the exact effect without moving money.", Tool: "send_payment", Args: dryRunArgs},
		},
		RecommendedIdx: 1,
		Meta:           &envelope.Meta{DecisionClass: "payment-authorization"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// paymentAct is the ledger entry of the escalated send_payment call.
func paymentAct(t *testing.T, ns, name string) *v1alpha1.Act {
	t.Helper()
	_, argsDigest, err := jcs.CanonicalDigest(paymentArgs, jcs.Strict)
	if err != nil {
		t.Fatal(err)
	}
	actionDigest, err := action.Digest("send_payment", paymentArgs, jcs.Strict)
	if err != nil {
		t.Fatal(err)
	}
	return &v1alpha1.Act{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.ActSpec{
			ActID: "act-" + name, Agent: "system:serviceaccount:" + ns + ":billing-agent",
			Tool: "send_payment", Server: "payments", Destination: "https://payments-mcp.payments.svc.cluster.local",
			ConsequenceClass: v1alpha1.ConsequenceFinancial,
			ArgumentsDigest:  v1alpha1.Digest(argsDigest), ActionDigest: v1alpha1.Digest(actionDigest),
			PolicyRef: v1alpha1.LocalObjectReference{Name: "payments"}, Rule: "money-movement",
			SinkID: "billing-agent-sink", PolicyEpoch: 1,
		},
	}
}

// moment is a BindingMoment carrying env for principal, deciding act, with the calls of its
// options (spec.calls) as the authority service writes them when env is a paymentEnvelope.
func moment(ns, name, principal, act string, env *envelope.Envelope, expires time.Time) *v1alpha1.BindingMoment {
	bm := &v1alpha1.BindingMoment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.BindingMomentSpec{
			Envelope: string(env.Canonical()), EnvelopeDigest: v1alpha1.Digest(env.Digest()),
			Synopsis: env.Content().Synopsis, Principal: principal,
			ActRef: v1alpha1.LocalObjectReference{Name: act}, ExpiresAt: metav1.NewTime(expires),
		},
	}
	var calls []envelope.Call
	for _, a := range []json.RawMessage{paymentArgs, dryRunArgs} {
		canon, _ := jcs.Canonicalize(a, jcs.Strict)
		calls = append(calls, envelope.Call{Server: "payments", Destination: "https://payments-mcp.payments.svc.cluster.local", Tool: "send_payment", Args: canon})
	}
	if envelope.CheckCalls(env, calls) == nil {
		for _, c := range calls {
			bm.Spec.Calls = append(bm.Spec.Calls, v1alpha1.BindingMomentCall{Server: c.Server, Destination: c.Destination, Tool: c.Tool, Args: string(c.Args)})
		}
	}
	return bm
}

// user provisions name with its own kubeconfig.
func user(t *testing.T, env *envtest.Env, name string) *envtest.User {
	t.Helper()
	u, err := env.AddUser(name)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func mustCreate(t *testing.T, env *envtest.Env, objs ...interface {
	GetName() string
}) {
	t.Helper()
	for _, o := range objs {
		var err error
		switch v := o.(type) {
		case *v1alpha1.Act:
			err = env.Client.Create(t.Context(), v)
		case *v1alpha1.BindingMoment:
			err = env.Client.Create(t.Context(), v)
		default:
			err = fmt.Errorf("unexpected %T", o)
		}
		if err != nil {
			t.Fatalf("create %s: %v", o.GetName(), err)
		}
	}
}
