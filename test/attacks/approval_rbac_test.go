package attacks

import (
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
)

// TestApprovalServiceAccountHasNoActgateAccess: with the chart's RBAC applied as installed with
// the approval service on, the approval service's own service account can neither read nor
// write any actgate.io resource in any namespace (it acts only with the signed-in person's
// token, docs/security.md), nor impersonate a principal. Each request is made as that service
// account against the real API server and refused there (403); SelfSubjectAccessReviews
// confirm it for every verb.
func TestApprovalServiceAccountHasNoActgateAccess(t *testing.T) {
	e := kube(t)
	ctx := kctx(t)
	ns := namespace(t, e, nil)
	chartRBAC(t, e,
		"--set", "approval.enabled=true",
		"--set", "approval.externalURL=https://approve.example.com",
		"--set", "approval.oidc.issuer=https://idp.example.com",
		"--set", "approval.oidc.clientID=actgate-approval",
		"--set", "rbac.principals[0].user=oidc:alice@example.com",
		"--set", "rbac.principals[0].namespaces={"+ns+"}",
	)
	sa := serviceAccountUser(t, e, "actgate-system", "actgate-approval")
	// The same RBAC lets the principal herself read her namespace's moments (so the refusals
	// below are the service account's, not an RBAC that is not applied yet).
	alice, err := e.AddUser("oidc:alice@example.com", "oidc:finance")
	if err != nil {
		t.Fatal(err)
	}
	eventuallyAllowed(t, "alice lists moments in her namespace", func() error {
		return alice.Client.List(ctx, &v1alpha1.BindingMomentList{}, client.InNamespace(ns))
	})

	requests := map[string]func() error{
		"list bindingmoments cluster-wide": func() error { return sa.Client.List(ctx, &v1alpha1.BindingMomentList{}) },
		"list bindingmoments in a namespace": func() error {
			return sa.Client.List(ctx, &v1alpha1.BindingMomentList{}, client.InNamespace(ns))
		},
		"get a bindingmoment": func() error {
			return sa.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "moment"}, &v1alpha1.BindingMoment{})
		},
		"create a bindingmoment": func() error {
			return sa.Client.Create(ctx, &v1alpha1.BindingMoment{ObjectMeta: metav1.ObjectMeta{Name: "forged", Namespace: ns}})
		},
		"list acts":         func() error { return sa.Client.List(ctx, &v1alpha1.ActList{}) },
		"list toolpolicies": func() error { return sa.Client.List(ctx, &v1alpha1.ToolPolicyList{}) },
	}
	for what, do := range requests {
		if err := do(); !apierrors.IsForbidden(err) {
			t.Errorf("approval service account: %s: %v, want 403", what, err)
		}
	}

	// Impersonating a principal (the alternative mechanism, not granted).
	imp := rest.CopyConfig(sa.Config)
	imp.Impersonate = rest.ImpersonationConfig{UserName: "oidc:alice@example.com"}
	cs, err := kubernetes.NewForConfig(imp)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("approval service account impersonating alice: %v, want 403", err)
	}

	// Every verb on every actgate.io resource (and the status subresource), cluster-wide and in
	// the namespace where alice is a principal.
	own, err := kubernetes.NewForConfig(sa.Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, resource := range []string{"bindingmoments", "acts", "toolpolicies", "*"} {
		for _, sub := range []string{"", "status"} {
			for _, verb := range []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"} {
				for _, namespace := range []string{"", ns} {
					r, err := own.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
						Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
							Group: v1alpha1.GroupVersion.Group, Resource: resource, Subresource: sub, Verb: verb, Namespace: namespace,
						}},
					}, metav1.CreateOptions{})
					if err != nil {
						t.Fatal(err)
					}
					if r.Status.Allowed {
						t.Errorf("approval service account may %s %s/%s in %q", verb, resource, sub, namespace)
					}
				}
			}
		}
	}
	for _, resource := range []string{"users", "groups", "serviceaccounts"} {
		r, err := own.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{Resource: resource, Verb: "impersonate"}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status.Allowed {
			t.Errorf("approval service account may impersonate %s", resource)
		}
	}
}
