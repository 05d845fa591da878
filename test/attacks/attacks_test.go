package attacks

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/action"
	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/authority/leasestore"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/jcs"
	"github.com/actgate/actgate/internal/sink"
	"github.com/actgate/actgate/webhook/inject"
)

func TestMain(m *testing.M) {
	// controller-runtime's envtest and manager log through its package logger.
	ctrllog.SetLogger(logr.Discard())
	code := m.Run()
	if cluster.stop != nil {
		cluster.stop()
	}
	os.Exit(code)
}

// attack is one row of the table: what is attacked, where the threat is named, and the attack
// mounted against real components, asserting the state of the world afterwards.
type attack struct {
	name   string
	threat string // the spec section naming it
	mount  func(t *testing.T)
}

// attacks is the attack table; docs/security.md "(c) The attack table" lists it row by row.
// Standalone rows run on the gate of testdata/actgate.yaml; Kubernetes rows on envtest.
var attacks = []attack{
	{"T-A prompt-injected recipient", "tool-use-binding §22 T-A, §12 INJECTED_EMAIL_SEND", injectedRecipient},
	{"T-B parallel call smuggling", "tool-use-binding §22 T-B, §9", parallelSmuggling},
	{"T-C authority replay", "tool-use-binding §22 T-C, §16", authorityReplay},
	{"T-D MCP server swap", "tool-use-binding §22 T-D, §12 MCP_SERVER_SWAP", serverSwap},
	{"T-E origin change", "tool-use-binding §22 T-E, §12 COMPUTER_USE_ORIGIN_CHANGE", originChange},
	{"resolution replay and cross-session misbinding", "envelope-04 §12.5", resolutionReplay},
	{"option-map substitution", "envelope-04 §12.6", optionMapSubstitution},
	{"canonicalization divergence", "envelope-04 §12.7, §6.3", canonicalizationDivergence},
	{"agent resolving its own moment", "envelope-04 §12.4; AEB separation of duty", selfResolution},
	{"opt-out annotation by an agent", "tool-use-binding §28 (alternate-path closure)", agentOptOut},
	{"Lease tampering by a principal without rights", "AEB \"Security Considerations\" (replay and distributed state)", leaseTampering},
}

func TestAttacks(t *testing.T) {
	for _, a := range attacks {
		t.Run(a.name, a.mount)
	}
}

// injectedRecipient: the model, steered by retrieved content, emits email_send to an address
// the user never gave; the instruction's provenance is retrieval, tool output or unknown.
func injectedRecipient(t *testing.T) {
	g := newGate(t)
	cs := agent(t, g.Endpoint("tools"))
	for _, prov := range []string{"retrieval", "tool_output", ""} {
		r := call(t, cs, "email_send", `{"to":"attacker@ex.com","body":"the statement"}`, prov)
		refused(t, r, string(ef.EFInstructionProvenanceFailure))
	}
	if n := g.Up.Tools.Count("email_send"); n != 0 {
		t.Fatalf("email_send reached the upstream %d times", n)
	}
	if n := g.journaled(); n != 0 {
		t.Fatalf("%d journal records: an authority was consumed for an injected call", n)
	}
	// Control: the rule refuses the provenance, not the tool.
	if r := call(t, cs, "email_send", `{"to":"bob@example.com","body":"the statement"}`, "user"); r.IsError || g.Up.Tools.Count("email_send") != 1 {
		t.Fatalf("the user's own email did not run once: %+v", r.Meta)
	}
}

// parallelSmuggling: a payout rides in the same turn as a harmless search, hoping one allow
// covers both; a second payout above the policy's cap rides along too.
func parallelSmuggling(t *testing.T) {
	g := newGate(t)
	tools, pay := agent(t, g.Endpoint("tools")), agent(t, g.Endpoint("pay"))
	var search, payout, over *mcp.CallToolResult
	parallel(
		func() { search = call(t, tools, "search", `{"q":"invoice 42"}`, "user") },
		func() { payout = call(t, pay, "payout_create", `{"to":"acme","amount":2500}`, "user") },
		func() { over = call(t, pay, "payout_create", `{"to":"acme","amount":250000}`, "user") },
	)
	if search.IsError || g.Up.Tools.Count("search") != 1 {
		t.Fatalf("the search did not run once: %+v", search.Meta)
	}
	refused(t, payout, string(ef.EFEscalationRequired))
	refused(t, over, string(ef.EFPolicyDenied))
	if n := g.Up.Pay.Count("payout_create"); n != 0 {
		t.Fatalf("a smuggled payout ran %d times", n)
	}
	if n := g.journaled(); n != 0 {
		t.Fatalf("%d journal records: the search's allow was spent on a sibling", n)
	}
}

// authorityReplay: the authority a human issued for one payout is presented again — five
// times at once, again in its session, from another session, and straight to the store.
func authorityReplay(t *testing.T) {
	g := newGate(t)
	pay := agent(t, g.Endpoint("pay"))
	args := `{"to":"acme","amount":2500}`
	id, digest := escalation(t, call(t, pay, "payout_create", args, "user"))
	rr, err := g.resolve(id, principal, resolution(digest, 0))
	if err != nil || rr.AuthorityID == "" {
		t.Fatalf("resolve: %+v %v", rr, err)
	}
	results := make([]*mcp.CallToolResult, 5)
	var fns []func()
	for i := range results {
		fns = append(fns, func() { results[i] = call(t, pay, "payout_create", args, "user") })
	}
	parallel(fns...)
	for _, r := range results {
		if r.IsError && code(r) != string(ef.EFIndeterminate) {
			t.Fatalf("unexpected result %+v", r.Meta)
		}
	}
	if n := g.Up.Pay.Count("payout_create"); n != 1 {
		t.Fatalf("the authorised payout ran %d times, want exactly 1", n)
	}
	if s := g.authorityState(rr.AuthorityID); s != authority.StateConsumed {
		t.Fatalf("authority %s, want consumed", s)
	}
	refused(t, call(t, agent(t, g.Endpoint("pay")), "payout_create", args, "user"), string(ef.EFEscalationRequired))
	rec, err := g.Store.Get(context.Background(), "", rr.AuthorityID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Store.Consume(context.Background(), rr.AuthorityID, rec.Authority.Binding, authority.Consumption{OperationID: "replayed-op"}); !errors.Is(err, authority.ErrConsumed) {
		t.Fatalf("a second consume at the store: %v, want ErrConsumed", err)
	}
	if n := g.Up.Pay.Count("payout_create"); n != 1 {
		t.Fatalf("payout ran %d times after the replays, want 1", n)
	}
}

// serverSwap: the agent's MCP endpoint now leads to another server (same tool names) — before
// and after a human authorised the call at the real one.
func serverSwap(t *testing.T) {
	g := newGate(t)
	attacker := startUpstream(t, "attacker", "payout_create", "search")
	swappedPay := agent(t, g.Swapped("pay", attacker.URL))
	args := `{"to":"acme","amount":2500}`
	refused(t, call(t, swappedPay, "payout_create", args, "user"), string(ef.EFDestinationMismatch))
	refused(t, call(t, agent(t, g.Swapped("tools", attacker.URL)), "search", `{"q":"x"}`, "user"), string(ef.EFDestinationMismatch))

	pay := agent(t, g.Endpoint("pay"))
	id, digest := escalation(t, call(t, pay, "payout_create", args, "user"))
	rr, err := g.resolve(id, principal, resolution(digest, 0))
	if err != nil {
		t.Fatal(err)
	}
	refused(t, call(t, swappedPay, "payout_create", args, "user"), string(ef.EFDestinationMismatch))
	if n := attacker.Count(""); n != 0 {
		t.Fatalf("the swapped server was called %d times", n)
	}
	if s := g.authorityState(rr.AuthorityID); s != authority.StateIssued {
		t.Fatalf("the refused attempt left the authority %s, want issued", s)
	}
	for _, a := range attacker.Authorizations() {
		if strings.Contains(a, payToken) {
			t.Fatal("the upstream credential was presented to the swapped server")
		}
	}
}

// originChange: a computer-use submit authorised on one origin is replayed after the page
// navigated elsewhere, or to the same host under another spelling.
func originChange(t *testing.T) {
	g := newGate(t)
	evil := startUpstream(t, "evil-checkout", "computer_submit")
	browser := agent(t, g.Endpoint("browser"))
	args := `{"form":"checkout","fields":{"card":"tok_visa"},"submit":true}`
	id, digest := escalation(t, call(t, browser, "computer_submit", args, "user"))
	rr, err := g.resolve(id, principal, resolution(digest, 0))
	if err != nil {
		t.Fatal(err)
	}
	for _, endpoint := range []string{
		g.Swapped("browser", evil.URL),
		g.Swapped("browser", strings.Replace(g.Up.Browser.URL, "127.0.0.1", "localhost", 1)),
	} {
		refused(t, call(t, agent(t, endpoint), "computer_submit", args, "user"), string(ef.EFDestinationMismatch))
	}
	if evil.Count("") != 0 || g.Up.Browser.Count("") != 0 {
		t.Fatalf("submits ran: evil %d, original %d", evil.Count(""), g.Up.Browser.Count(""))
	}
	if s := g.authorityState(rr.AuthorityID); s != authority.StateIssued {
		t.Fatalf("authority %s after refused submits, want issued", s)
	}
}

// resolutionReplay (envelope-04 §12.5): a principal's assent to a small payout in one session
// is replayed against a large payout's moment in another session, and again against its own;
// the other session also tries to ride on the first session's authority.
func resolutionReplay(t *testing.T) {
	g := newGate(t)
	s1, s2 := agent(t, g.Endpoint("pay")), agent(t, g.Endpoint("pay"))
	small, large := `{"to":"acme","amount":150}`, `{"to":"mallory","amount":9000}`
	idA, digestA := escalation(t, call(t, s1, "payout_create", small, "user"))
	idB, digestB := escalation(t, call(t, s2, "payout_create", large, "user"))
	if digestA == digestB {
		t.Fatal("two different moments share a digest")
	}
	assent := resolution(digestA, 0)
	if _, err := g.resolve(idA, principal, assent); err != nil {
		t.Fatalf("the genuine resolution: %v", err)
	}
	// Replayed against the large payout's moment (another session): not a decision.
	rr, err := g.resolve(idB, principal, assent)
	if !errors.Is(err, sink.ErrResolutionInvalid) || rr.AuthorityID != "" {
		t.Fatalf("resolution of A applied to B: %+v %v, want ErrResolutionInvalid", rr, err)
	}
	parsed, err := envelope.ParseResolution(assent)
	if err != nil {
		t.Fatal(err)
	}
	if err := envelope.Verify(g.moment(idB).Envelope, parsed); !envelope.HasCode(err, envelope.CodeResEnvelopeMismatch) {
		t.Fatalf("envelope.Verify(B, resolution of A) = %v, want %s", err, envelope.CodeResEnvelopeMismatch)
	}
	if g.moment(idB).Resolved {
		t.Fatal("moment B was resolved by A's resolution")
	}
	// Replayed against its own moment: already resolved, nothing new issued.
	if rr, err := g.resolve(idA, principal, assent); !errors.Is(err, sink.ErrMomentResolved) || rr.AuthorityID != "" {
		t.Fatalf("replay against A: %+v %v, want ErrMomentResolved", rr, err)
	}
	// Session 2 calls the small payout session 1 was authorised for: its act is its own.
	refused(t, call(t, s2, "payout_create", small, "user"), string(ef.EFEscalationRequired))
	refused(t, call(t, s2, "payout_create", large, "user"), string(ef.EFEscalationRequired))
	if n := g.Up.Pay.Count("payout_create"); n != 0 {
		t.Fatalf("payout ran %d times", n)
	}
	// Control: session 1's authorised call runs, once.
	if r := call(t, s1, "payout_create", small, "user"); r.IsError || g.Up.Pay.Count("payout_create") != 1 {
		t.Fatalf("the authorised payout: %+v (ran %d)", r.Meta, g.Up.Pay.Count("payout_create"))
	}
}

// optionMapSubstitution (envelope-04 §12.6): the agent proposes a moment whose option 0 reads
// "Pay 100" and tries to make index 0 mean a larger payout — by supplying its own
// action_digest, or by calling the larger payout once index 0 is chosen.
func optionMapSubstitution(t *testing.T) {
	g := newGate(t)
	pay := agent(t, g.Endpoint("pay"))
	small, large := `{"amount":100,"to":"acme"}`, `{"amount":9000,"to":"acme"}`
	largeDigest, err := action.Digest("payout_create", []byte(large), jcs.Strict)
	if err != nil {
		t.Fatal(err)
	}
	proposal := func(extra string) string {
		return `{"synopsis":"Pay ACME for invoice 42.","findings":["Invoice 42 is due."],"recommendations":["Pay it."],
			"stem":"Pay ACME?","recommended":0,"hatches":["free_text","dialogue"],"options":[
			{"label":"Pay 100","reasoning":"Settles the invoice.","tool":"payout_create","server":"pay","args":` + small + extra + `},
			{"label":"Pay nothing yet","reasoning":"Waits for the statement.","tool":"search","server":"tools","args":{"q":"statement"}}]}`
	}
	forged := call(t, pay, sink.RequestBindingMomentTool, proposal(`,"action_digest":"`+largeDigest+`"`), "user")
	refused(t, forged, string(ef.EFMomentInvalid))
	if n := g.momentCount(); n != 0 {
		t.Fatalf("a proposal carrying its own action_digest registered %d moments", n)
	}

	id, digest := escalation(t, call(t, pay, sink.RequestBindingMomentTool, proposal(""), "user"))
	m := g.moment(id)
	smallDigest, err := action.Digest("payout_create", []byte(small), jcs.Strict)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := m.Envelope.Option(0); !ok || o.ActionDigest != smallDigest {
		t.Fatalf("option 0 carries %q, want the gate's own digest of the small payout %s", o.ActionDigest, smallDigest)
	}
	rr, err := g.resolve(id, principal, resolution(digest, 0))
	if err != nil || rr.AuthorityID == "" {
		t.Fatalf("resolve option 0: %+v %v", rr, err)
	}
	refused(t, call(t, pay, "payout_create", large, "user"), string(ef.EFEscalationRequired))
	if n := g.Up.Pay.Count("payout_create"); n != 0 {
		t.Fatalf("the substituted payout ran %d times", n)
	}
	if s := g.authorityState(rr.AuthorityID); s != authority.StateIssued {
		t.Fatalf("authority %s after the substituted call, want issued", s)
	}
	// Control: index 0's own action runs, once.
	if r := call(t, pay, "payout_create", small, "user"); r.IsError || g.Up.Pay.Count("payout_create") != 1 {
		t.Fatalf("option 0's payout: %+v", r.Meta)
	}
}

// canonicalizationDivergence (envelope-04 §12.7): arguments, proposals and resolutions that two
// parsers could read differently — a duplicate member name, an unpaired surrogate, an integer
// beyond 2^53-1 — are refused with a code, never repaired into something a human is asked to
// approve or a tool is asked to run.
func canonicalizationDivergence(t *testing.T) {
	g := newGate(t)
	pay := agent(t, g.Endpoint("pay"))
	for _, tc := range []struct{ name, args, code string }{
		// A human-gated call: nothing outside the strict profile can be bound to a decision.
		{"duplicate member", `{"to":"acme","amount":150,"amount":250000}`, string(ef.EFActInvalid)},
		{"unpaired surrogate", `{"to":"acme\ud800","amount":150}`, string(ef.EFActInvalid)},
		{"integer beyond 2^53-1", `{"to":"acme","amount":150,"ref":9007199254740993}`, string(ef.EFArgumentsOutOfProfile)},
		{"non-integer number", `{"to":"acme","amount":150,"ref":1.5}`, string(ef.EFArgumentsOutOfProfile)},
	} {
		refused(t, call(t, pay, "payout_create", tc.args, "user"), tc.code)
	}
	// A proposal, otherwise valid, carrying a duplicate member: refused for exactly that.
	dup := `{"synopsis":"Pay ACME 100.","synopsis":"Pay ACME 100000.","findings":["Invoice 42 is due."],"recommendations":["Pay it."],
		"stem":"Pay ACME?","recommended":0,"hatches":["free_text","dialogue"],"options":[
		{"label":"Pay","reasoning":"Settles it.","tool":"payout_create","server":"pay","args":{"to":"acme","amount":150}},
		{"label":"Wait","reasoning":"Waits.","tool":"search","server":"tools","args":{}}]}`
	r := call(t, pay, sink.RequestBindingMomentTool, dup, "user")
	refused(t, r, string(ef.EFMomentInvalid))
	if !strings.Contains(text(r), string(jcs.CodeDuplicateMember)) {
		t.Fatalf("the proposal was refused, but not for its duplicate member: %s", text(r))
	}
	if r := call(t, pay, sink.RequestBindingMomentTool, strings.Replace(dup, `"synopsis":"Pay ACME 100.",`, "", 1), "user"); r.IsError {
		t.Fatalf("control: the same proposal without the duplicate was refused: %s", text(r))
	}
	if n := g.momentCount(); n != 1 {
		t.Fatalf("%d moments registered, want only the control's", n)
	}
	if n := g.Up.Pay.Count(""); n != 0 || g.journaled() != 0 {
		t.Fatalf("upstream ran %d times, %d journal records", n, g.journaled())
	}
	// Resolutions: a moment to resolve, and resolutions that read two ways.
	id, digest := escalation(t, call(t, pay, "payout_create", `{"to":"acme","amount":150}`, "user"))
	for _, tc := range []struct {
		name string
		raw  string
		code jcs.Code
	}{
		{"duplicate option_idx", `{"binding_moment_resolution":{"envelope_digest":"` + digest + `","resolution":"option","option_idx":0,"option_idx":1}}`, jcs.CodeDuplicateMember},
		{"escaped duplicate", `{"binding_moment_resolution":{"envelope_digest":"` + digest + `","resolution":"option","option_idx":0,"option_\u0069dx":1}}`, jcs.CodeDuplicateMember},
		{"unpaired surrogate", `{"binding_moment_resolution":{"envelope_digest":"` + digest + `","resolution":"answer","answer":"ok\udc00"}}`, jcs.CodeUnpairedSurrogate},
		{"option_idx beyond 2^53-1", `{"binding_moment_resolution":{"envelope_digest":"` + digest + `","resolution":"option","option_idx":9007199254740993}}`, jcs.CodeNumberOutOfProfile},
		// 0.0 is integer-valued and canonicalizes to 0 everywhere (conformance/README.md); 0.5 is not.
		{"option_idx 0.5", `{"binding_moment_resolution":{"envelope_digest":"` + digest + `","resolution":"option","option_idx":0.5}}`, jcs.CodeNumberOutOfProfile},
	} {
		rr, err := g.resolve(id, principal, []byte(tc.raw))
		got, _ := jcs.CodeOf(err)
		if !errors.Is(err, sink.ErrResolutionInvalid) || got != tc.code || rr.AuthorityID != "" {
			t.Fatalf("%s: %+v %v (code %q), want ErrResolutionInvalid with %s", tc.name, rr, err, got, tc.code)
		}
	}
	if g.moment(id).Resolved || g.Up.Pay.Count("") != 0 {
		t.Fatal("an out-of-profile resolution resolved the moment or ran the payout")
	}
}

// selfResolution (envelope-04 §12.4): the agent that initiated an act resolves the binding
// moment addressed to its principal — in the standalone gate by naming itself, in Kubernetes
// by patching the BindingMoment with its service account, with and without (mistakenly
// granted) RBAC.
func selfResolution(t *testing.T) {
	t.Run("standalone gate", func(t *testing.T) {
		g := newGate(t)
		pay := agent(t, g.Endpoint("pay"))
		id, digest := escalation(t, call(t, pay, "payout_create", `{"to":"acme","amount":150}`, "user"))
		rr, err := g.resolve(id, agentName, resolution(digest, 0))
		if !errors.Is(err, sink.ErrSelfResolution) || rr.AuthorityID != "" {
			t.Fatalf("resolve as the agent: %+v %v, want ErrSelfResolution", rr, err)
		}
		if g.moment(id).Resolved {
			t.Fatal("the agent resolved its own moment")
		}
		refused(t, call(t, pay, "payout_create", `{"to":"acme","amount":150}`, "user"), string(ef.EFEscalationRequired))
		if n := g.Up.Pay.Count(""); n != 0 {
			t.Fatalf("payout ran %d times", n)
		}
	})
	t.Run("kubernetes admission", func(t *testing.T) {
		e := kube(t)
		ns := namespace(t, e, nil)
		agentSA := serviceAccountUser(t, e, ns, "billing-agent")
		alice, err := e.AddUser("alice-" + ns + "@example.com")
		if err != nil {
			t.Fatal(err)
		}
		bindPrincipal(t, e, ns, alice.Name)
		bm := momentFor(t, e, ns, agentSA.Name, alice.Name)
		patch := resolutionPatch(0, string(bm.Spec.EnvelopeDigest))
		target := func() *v1alpha1.BindingMoment {
			return &v1alpha1.BindingMoment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: bm.Name}}
		}
		err = agentSA.Client.Patch(kctx(t), target(), patch)
		forbidden(t, "patch by the agent without RBAC", err, "bindingmoments")
		if strings.Contains(err.Error(), "admission webhook") {
			t.Fatalf("RBAC should refuse before admission: %v", err)
		}
		bindPrincipal(t, e, ns, agentSA.Name) // the misconfiguration admission must survive
		forbidden(t, "patch by the agent with RBAC", agentSA.Client.Patch(kctx(t), target(), patch), "only the principal", agentSA.Name)
		got := &v1alpha1.BindingMoment{}
		if err := e.Client.Get(kctx(t), client.ObjectKeyFromObject(bm), got); err != nil {
			t.Fatal(err)
		}
		if got.Spec.Resolution != nil {
			t.Fatalf("the agent's resolution was stored: %+v", got.Spec.Resolution)
		}
		// Control: the principal's own resolution is admitted.
		if err := alice.Client.Patch(kctx(t), target(), patch); err != nil {
			t.Fatalf("the principal's resolution: %v", err)
		}
	})
}

// agentOptOut: an agent that can create pods or edit its namespace tries to get a pod without
// the sidecar (so it would hold the tool credential itself) by opting out — the inject label or
// annotation on a pod it creates, or the label on its namespace.
func agentOptOut(t *testing.T) {
	e := kube(t)
	ns := namespace(t, e, map[string]string{inject.LabelInject: "true"})
	if err := e.Client.Create(kctx(t), governedPolicy(ns)); err != nil {
		t.Fatal(err)
	}
	agentSA := serviceAccountUser(t, e, ns, "billing-agent")
	grant(t, e, ns, agentSA.Name, []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create", "get", "patch"}}})
	grant(t, e, "", agentSA.Name, []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"patch", "get", "update"}}})

	for i, tc := range []struct {
		name                string
		labels, annotations map[string]string
	}{
		{"label", map[string]string{inject.LabelInject: "false"}, nil},
		{"annotation", nil, map[string]string{inject.LabelInject: "false"}},
	} {
		name := fmt.Sprintf("optout-%d", i)
		if err := agentSA.Client.Create(kctx(t), agentPod(ns, name, tc.labels, tc.annotations)); err != nil {
			t.Fatalf("%s: create: %v", tc.name, err)
		}
		p := &corev1.Pod{}
		if err := e.Client.Get(kctx(t), client.ObjectKey{Namespace: ns, Name: name}, p); err != nil {
			t.Fatal(err)
		}
		if !sidecarInjected(p) {
			t.Fatalf("opt-out by %s was honoured: the pod runs without the sidecar or keeps the credential", tc.name)
		}
	}
	// Its own running pod, opted out after the fact: the pod guard refuses a change of actgate's
	// labels and annotations on an injected pod (and of its sidecar: a pod patch can change
	// container images, see TestPodUpdateSidecarSwap), and the pod keeps its sidecar.
	if err := e.Client.Create(kctx(t), agentPod(ns, "running", nil, nil)); err != nil {
		t.Fatal(err)
	}
	optOut := `{"metadata":{"labels":{"` + inject.LabelInject + `":"false"},"annotations":{"` + inject.LabelInject + `":"false"}}}`
	forbidden(t, "opt-out patch of its own running pod", agentSA.Client.Patch(kctx(t), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "running"}},
		client.RawPatch(types.MergePatchType, []byte(optOut))), "only actgate may change", "label "+inject.LabelInject)
	running := &corev1.Pod{}
	if err := e.Client.Get(kctx(t), client.ObjectKey{Namespace: ns, Name: "running"}, running); err != nil {
		t.Fatal(err)
	}
	if _, labelled := running.Labels[inject.LabelInject]; labelled || !sidecarInjected(running) {
		t.Fatalf("after the opt-out patch: label %q, injected %v", running.Labels[inject.LabelInject], sidecarInjected(running))
	}
	err := agentSA.Client.Patch(kctx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"`+inject.LabelInject+`":"false"}}}`)))
	forbidden(t, "namespace opt-out by the agent", err, "only namespace admins", agentSA.Name)
	got := &corev1.Namespace{}
	if err := e.Client.Get(kctx(t), client.ObjectKey{Name: ns}, got); err != nil {
		t.Fatal(err)
	}
	if got.Labels[inject.LabelInject] != "true" {
		t.Fatalf("namespace label is %q", got.Labels[inject.LabelInject])
	}
}

// leaseTampering: a principal (holding config/rbac's BindingMoment principal role) and the
// agent's service account try to consume, extend, delete or forge an authority's Lease
// directly; RBAC refuses each, and the authority stays issued and consumable once by the store.
func leaseTampering(t *testing.T) {
	e := kube(t)
	ns := namespace(t, e, nil)
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := authority.NewSigner(priv)
	if err != nil {
		t.Fatal(err)
	}
	store, err := leasestore.NewForConfig(e.Config, leasestore.Options{Verifier: signer.Verifier(), Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	b := authority.Binding{ActID: "act-lease-1", ArgumentsDigest: "sha256:" + strings.Repeat("a", 64),
		ActionDigest: "sha256:" + strings.Repeat("b", 64), Tool: "payout_create", Destination: "https://pay.example/mcp",
		SinkID: "billing-agent-sink", PolicyEpoch: "1", Namespace: ns}
	a, err := signer.Sign(b, time.Now(), 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Issue(kctx(t), a); err != nil {
		t.Fatal(err)
	}
	before := &coordinationv1.Lease{}
	if err := e.Client.Get(kctx(t), client.ObjectKey{Namespace: ns, Name: a.ID}, before); err != nil {
		t.Fatal(err)
	}
	alice, err := e.AddUser("alice-lease-" + ns + "@example.com")
	if err != nil {
		t.Fatal(err)
	}
	bindPrincipal(t, e, ns, alice.Name)
	agentSA := serviceAccountUser(t, e, ns, "billing-agent")
	lease := func() *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: a.ID}}
	}
	for _, u := range []struct {
		who    string
		client client.Client
	}{{"principal", alice.Client}, {"agent", agentSA.Client}} {
		for _, op := range []struct {
			name string
			do   func(c client.Client) error
		}{
			{"read", func(c client.Client) error {
				return c.Get(kctx(t), client.ObjectKey{Namespace: ns, Name: a.ID}, lease())
			}},
			{"consume by hand", func(c client.Client) error {
				return c.Patch(kctx(t), lease(), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"holderIdentity":"stolen-op"}}`)))
			}},
			{"extend expiry", func(c client.Client) error {
				return c.Patch(kctx(t), lease(), client.RawPatch(types.MergePatchType,
					[]byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:"2099-01-01T00:00:00.000Z"}}}`, leasestore.AnnotationExpiresAt))))
			}},
			{"delete", func(c client.Client) error { return c.Delete(kctx(t), lease()) }},
			{"forge another", func(c client.Client) error {
				f := before.DeepCopy()
				f.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: authority.IDPrefix + strings.Repeat("f", 64), Labels: before.Labels, Annotations: before.Annotations}
				return c.Create(kctx(t), f)
			}},
		} {
			forbidden(t, u.who+" "+op.name, op.do(u.client), "leases")
		}
	}
	after := &coordinationv1.Lease{}
	if err := e.Client.Get(kctx(t), client.ObjectKey{Namespace: ns, Name: a.ID}, after); err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != before.ResourceVersion || after.Spec.HolderIdentity != nil {
		t.Fatalf("the Lease changed: rv %s → %s, holder %v", before.ResourceVersion, after.ResourceVersion, after.Spec.HolderIdentity)
	}
	// The authority is still exactly once consumable by the authority's own store.
	if rec, err := store.Consume(kctx(t), a.ID, b, authority.Consumption{OperationID: "op-1"}); err != nil || rec.State != authority.StateConsumed {
		t.Fatalf("consume by the store: %+v %v", rec, err)
	}
	if _, err := store.Consume(kctx(t), a.ID, b, authority.Consumption{OperationID: "op-2"}); !errors.Is(err, authority.ErrConsumed) {
		t.Fatalf("second consume: %v, want ErrConsumed", err)
	}
}
