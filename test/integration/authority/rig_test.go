package authority

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/authority/leasestore"
	"github.com/actgate/actgate/internal/review"
	"github.com/actgate/actgate/internal/review/service"
	"github.com/actgate/actgate/test/envtest"
	"github.com/actgate/actgate/test/testutil"
)

const (
	paymentsURL = "https://payments.example/mcp"
	sinkID      = "billing-agent-sink"
	alice       = "alice@example.com"
	bob         = "bob@example.com"
	audience    = service.DefaultAudience
	agentLabel  = "billing-agent"
)

// paymentsPolicy is config/samples' payments policy, trimmed: reads on the hot path,
// send_payment under a human (with a dry-run alternative), email_send under a policy permit.
func paymentsPolicy(ns string, principals []string, minPrincipals int32) *v1alpha1.ToolPolicy {
	return &v1alpha1.ToolPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "payments", Namespace: ns},
		Spec: v1alpha1.ToolPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": agentLabel}},
			Mode:        v1alpha1.PolicyModeEnforce,
			Sink:        &v1alpha1.SinkIdentity{ID: sinkID},
			Servers:     []v1alpha1.ToolServer{{Name: "payments", URL: paymentsURL, Protocol: v1alpha1.ServerProtocolMCP}},
			Rules: []v1alpha1.ToolRule{
				{Name: "reads", Tools: []string{"get_*"}, ConsequenceClass: v1alpha1.ConsequenceInformational,
					Evidence: &v1alpha1.EvidenceRequirement{Role: v1alpha1.EvidenceRoleNone}},
				{Name: "money-movement", Tools: []string{"send_payment"}, ConsequenceClass: v1alpha1.ConsequenceFinancial,
					Evidence: &v1alpha1.EvidenceRequirement{Role: v1alpha1.EvidenceRoleHumanAuthorization, Principals: principals,
						MinPrincipals: minPrincipals, SeparationOfDuties: ptr.To(true)},
					Arguments: []v1alpha1.ArgumentConstraint{{Name: "amount-cap", Expression: "double(args.amount) <= 10000.0"}},
					Alternatives: []v1alpha1.Alternative{{Label: "Dry-run the payment", Reasoning: "Shows the effect without moving money.",
						Args: runtime.RawExtension{Raw: []byte(`{"dry_run":true}`)}}},
					AuthorityTTL: &metav1.Duration{Duration: 5 * time.Minute}},
				{Name: "receipts-by-email", Tools: []string{"email_send"}, ConsequenceClass: v1alpha1.ConsequenceCommunication,
					Evidence:   &v1alpha1.EvidenceRequirement{Role: v1alpha1.EvidenceRolePolicyPermit},
					Provenance: []v1alpha1.ProvenanceRule{{Sources: []v1alpha1.ProvenanceSource{v1alpha1.ProvenanceRetrieval}, Action: v1alpha1.ProvenanceActionDeny}}},
			},
		},
	}
}

// waitMoment waits until the watch cache shows BindingMoment name as it is now in etcd.
func (r *rig) waitMoment(t testing.TB, name string) {
	t.Helper()
	m := &v1alpha1.BindingMoment{}
	if err := r.env.Client.Get(context.Background(), client.ObjectKey{Namespace: r.ns, Name: name}, m); err != nil {
		t.Fatal(err)
	}
	envtest.WaitListed(t, r.env.Client, func() client.ObjectList { return &v1alpha1.BindingMomentList{} }, r.ns, name, m.ResourceVersion)
}

// rig is the authority service served over real HTTPS, talking to a real API server as a user
// holding exactly service.PolicyRules, with an agent pod, its service account and a policy.
type rig struct {
	env     *envtest.Env
	ns      string
	clock   *clock
	signer  *authority.Signer
	store   *leasestore.Store // the service's
	svc     *service.Service
	reg     *prometheus.Registry
	url     string
	ca      *x509.CertPool
	cs      kubernetes.Interface
	ids     *act.IDIssuer
	policy  *v1alpha1.ToolPolicy
	agent   string // the agent's service-account user
	agentTk string // a pod-bound token for the agent, audience actgate-authority
	tracer  trace.TracerProvider
}

type rigOptions struct {
	principals    []string
	minPrincipals int32
	apiConfig     func(*rest.Config) *rest.Config // the service's API server connection
	reviewTimeout time.Duration
	tracer        trace.TracerProvider // the service's and the rig's review clients'
}

var serviceRole sync.Once

// serviceUser returns a rest.Config of a user bound cluster-wide to a ClusterRole of
// service.PolicyRules and, in namespace ns only, to one of service.NamespacePolicyRules (as
// the manager binds it in a governed namespace).
func serviceUser(t testing.TB, env *envtest.Env, ns string) *rest.Config {
	t.Helper()
	ctx := context.Background()
	const name = "actgate-authority-test"
	serviceRole.Do(func() {
		role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: service.PolicyRules()}
		if err := env.Client.Create(ctx, role); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		nsRole := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name + "-namespace"}, Rules: service.NamespacePolicyRules()}
		if err := env.Client.Create(ctx, nsRole); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}},
		}
		if err := env.Client.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	})
	nsBinding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name + "-namespace"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}},
	}
	if err := env.Client.Create(ctx, nsBinding); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	u, err := env.AddUser(name)
	if err != nil {
		t.Fatal(err)
	}
	return u.Config
}

func newRig(t testing.TB, o rigOptions) *rig {
	t.Helper()
	env := apiServer(t)
	ctx := context.Background()
	if o.principals == nil {
		o.principals = []string{alice}
	}
	r := &rig{env: env, ns: env.Namespace(t), clock: newClock(time.Now().UTC().Truncate(time.Millisecond)), signer: newSigner(t), reg: prometheus.NewRegistry(), tracer: o.tracer}
	var err error
	if r.cs, err = kubernetes.NewForConfig(env.Config); err != nil {
		t.Fatal(err)
	}
	if r.ids, err = act.NewIDIssuer(make([]byte, 32), nil); err != nil {
		t.Fatal(err)
	}

	// The agent: a service account, a pod running as it, and the policy governing the pod.
	r.agent = "system:serviceaccount:" + r.ns + ":agent"
	pod := r.pod(t, "agent", "agent-0", map[string]string{"app.kubernetes.io/name": agentLabel})
	r.policy = paymentsPolicy(r.ns, o.principals, o.minPrincipals)
	if err := env.Client.Create(ctx, r.policy); err != nil {
		t.Fatal(err)
	}
	envtest.AcceptPolicy(t, env.Client, r.policy, 1)
	r.agentTk = r.token(t, "agent", pod, audience)

	// The service, as a user with exactly the rights it documents.
	cfg := fastConfig(serviceUser(t, env, r.ns))
	if o.apiConfig != nil {
		cfg = o.apiConfig(cfg)
	}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	if r.store, err = leasestore.NewForConfig(cfg, leasestore.Options{Verifier: r.signer.Verifier(), Now: r.clock.Now}); err != nil {
		t.Fatal(err)
	}
	metrics, err := service.NewMetrics(r.reg)
	if err != nil {
		t.Fatal(err)
	}
	if r.svc, err = service.New(service.Options{Client: c, Store: r.store, Signer: r.signer, Now: r.clock.Now,
		Metrics: metrics, ReviewTimeout: o.reviewTimeout, MomentTTL: 10 * time.Minute, TracerProvider: o.tracer}); err != nil {
		t.Fatal(err)
	}
	r.serveTLS(t)
	return r
}

// pod creates a service account and a pod running as it (an API object only: nothing runs).
func (r *rig) pod(t testing.TB, sa, name string, labels map[string]string) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	if err := r.env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: r.ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.ns, Labels: labels},
		Spec:       corev1.PodSpec{ServiceAccountName: sa, Containers: []corev1.Container{{Name: "agent", Image: "example.invalid/agent:1"}}},
	}
	if err := r.env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// token requests a service-account token bound to pod through the TokenRequest API.
func (r *rig) token(t testing.TB, sa string, pod *corev1.Pod, audiences ...string) string {
	t.Helper()
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences:         audiences,
		ExpirationSeconds: ptr.To[int64](3600),
	}}
	if pod != nil {
		req.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}
	}
	tr, err := r.cs.CoreV1().ServiceAccounts(r.ns).CreateToken(context.Background(), sa, req, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// serveTLS serves the service over HTTPS with a certificate from a CA made here with
// crypto/x509 (in a cluster the operator's cert-controller provides them).
func (r *rig) serveTLS(t testing.TB) {
	t.Helper()
	p := testutil.NewPKI(t, t.TempDir())
	srv := httptest.NewUnstartedServer(r.svc)
	srv.TLS = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{p.Cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	r.url = srv.URL
	r.ca = p.Pool
}

// client is a sidecar's review client presenting token, trusting only the rig's CA.
func (r *rig) client(token string) *review.Client {
	return &review.Client{
		URL:            r.url,
		HTTP:           &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: r.ca, MinVersion: tls.VersionTLS12}}},
		Token:          func() (string, error) { return token, nil },
		TracerProvider: r.tracer,
	}
}

// call is what a sidecar knows about one tool call.
type sidecarCall struct {
	cand *act.Candidate
	req  review.Request
}

// call builds the act a sidecar would build for a call in session and its Review.
func (r *rig) call(t testing.TB, session, tool, args string) sidecarCall {
	t.Helper()
	return r.callAt(t, session, tool, args, paymentsURL)
}

// callAt is call for a host loop that names the live destination it is about to contact (as
// internal/hostloop maps it: the server's identity at that URL).
func (r *rig) callAt(t testing.TB, session, tool, args, destination string) sidecarCall {
	t.Helper()
	cand, err := act.NewCandidate(act.Input{Vendor: act.VendorMCP, VendorID: "1", ToolName: tool, Arguments: json.RawMessage(args)}, act.MappingContext{
		SessionID:   session,
		Principal:   act.Principal{PrincipalID: "customer-42"},
		Agent:       act.Agent{AgentID: r.agent},
		Server:      act.ServerIdentity{Name: "payments", URL: destination},
		Destination: destination,
		SinkID:      sinkID,
		Provenance:  act.SourceUser,
		Now:         r.clock.Now,
		TTL:         5 * time.Minute,
		IDs:         r.ids,
	})
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(cand.Act)
	if err != nil {
		t.Fatal(err)
	}
	return sidecarCall{cand: cand, req: review.Request{Operation: review.OperationReview, Server: "payments", Act: body, Arguments: cand.Arguments}}
}

// binding is what the sidecar expects an authority for c to be bound to, from its own view of
// the call (never from the authority it was given), under epoch.
func (c sidecarCall) binding(ns string, epoch int64) authority.Binding {
	return authority.Binding{
		ActID: c.cand.Act.CandidateActID, ArgumentsDigest: c.cand.ArgumentsDigest(), ActionDigest: c.cand.ActionDigest(),
		Tool: c.cand.Act.Tool.ToolID, Destination: paymentsURL, SinkID: sinkID, PolicyEpoch: fmt.Sprint(epoch), Namespace: ns,
	}
}

func consumeReq(id, op string, b authority.Binding) review.Request {
	return review.Request{Operation: review.OperationConsume, Consume: &review.ConsumeRequest{AuthorityID: id, OperationID: op, Binding: review.BindingOf(b)}}
}

// do sends a review as the agent and fails the test on a transport error.
func (r *rig) do(t testing.TB, req review.Request) *review.Response {
	t.Helper()
	return r.doAs(t, r.agentTk, req)
}

func (r *rig) doAs(t testing.TB, token string, req review.Request) *review.Response {
	t.Helper()
	resp, err := r.client(token).Do(context.Background(), req)
	if err != nil {
		t.Fatalf("review: %v", err)
	}
	return resp
}

// actObject reads the Act of an act id as the admin.
func (r *rig) actObject(t testing.TB, id string) *v1alpha1.Act {
	t.Helper()
	a := &v1alpha1.Act{}
	if err := r.env.Client.Get(context.Background(), client.ObjectKey{Namespace: r.ns, Name: id}, a); err != nil {
		t.Fatalf("act %s: %v", id, err)
	}
	return a
}
