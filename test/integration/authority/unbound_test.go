package authority

import (
	"context"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/review"
)

// TestServiceRefusesUnboundToken: anyone who may create tokens for the agent's service account
// (serviceaccounts/token create, here the agent itself) mints one for the authority's audience
// without a Pod boundObjectRef. The TokenReview authenticates it as the agent's service account,
// but it names no pod, so the service refuses it (UnboundToken): no Act is recorded and no
// authority Lease issued for a call the policy permits. The same call with the pod's bound token
// is permitted, so the refusal is the token's, not the call's.
func TestServiceRefusesUnboundToken(t *testing.T) {
	r := newRig(t, rigOptions{})
	ctx := context.Background()

	// The agent's own credentials, with the right to mint tokens for its service account.
	u, err := r.env.AddUser(r.agent, "system:serviceaccounts", "system:serviceaccounts:"+r.ns)
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "mint-tokens", Namespace: r.ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, Verbs: []string{"create"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "mint-tokens", Namespace: r.ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: r.agent}}}
	for _, o := range []client.Object{role, binding} {
		if err := r.env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	cs, err := kubernetes.NewForConfig(u.Config)
	if err != nil {
		t.Fatal(err)
	}
	var unbound string
	var mintErr error
	for range 100 { // until RBAC applies the binding
		tr, err := cs.CoreV1().ServiceAccounts(r.ns).CreateToken(ctx, "agent", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
			Audiences: []string{audience}, ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
		if err == nil {
			unbound = tr.Status.Token
			break
		}
		mintErr = err
		time.Sleep(100 * time.Millisecond)
	}
	if unbound == "" {
		t.Fatalf("the agent never got a token: %v", mintErr)
	}

	// The API server authenticates it as the agent's service account, for the audience.
	tr := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: unbound, Audiences: []string{audience}}}
	if err := r.env.Client.Create(ctx, tr); err != nil {
		t.Fatal(err)
	}
	if !tr.Status.Authenticated || tr.Status.User.Username != r.agent {
		t.Fatalf("TokenReview of the minted token: %+v", tr.Status)
	}
	if _, bound := tr.Status.User.Extra["authentication.kubernetes.io/pod-name"]; bound {
		t.Fatalf("the minted token carries a pod claim: %+v", tr.Status.User.Extra)
	}

	c := r.call(t, "s-unbound", "email_send", `{"to":"a@example.com"}`) // policy permit: issues a Lease
	expectDeny(t, r.doAs(t, unbound, c.req), ef.EFPolicyDenied, review.ReasonUnboundToken)
	if err := r.env.Client.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: c.cand.Act.CandidateActID}, &v1alpha1.Act{}); err == nil {
		t.Fatal("an Act was recorded for the unbound token's call")
	}
	var leases coordinationv1.LeaseList
	if err := r.env.Client.List(ctx, &leases, client.InNamespace(r.ns)); err != nil {
		t.Fatal(err)
	}
	if len(leases.Items) != 0 {
		t.Fatalf("%d Leases issued for the unbound token's call", len(leases.Items))
	}

	// The pod's bound token gets the same call permitted, with an authority.
	if got := r.do(t, c.req); !got.Allowed || got.Authority == nil {
		t.Fatalf("bound token: %+v", got)
	}
}
