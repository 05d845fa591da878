package controllers_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestManagerRBAC applies config/rbac (role.yaml generated from this package's markers) and
// checks the manager's service account can do what the reconcilers do, and cannot update an
// authority Lease anywhere but its own namespace: it may delete authorities, never consume them.
func TestManagerRBAC(t *testing.T) {
	env := apiServer(t)
	ns := env.Namespace(t)
	if err := env.Client.Create(ctxFor(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "actgate-system"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	env.Kubectl(t, "apply", "-k", "config/rbac")
	const manager = "system:serviceaccount:actgate-system:actgate-manager"
	for _, tc := range []struct {
		verb, resource, namespace, want string
	}{
		{"patch", "acts.actgate.io/status", ns, "yes"},
		{"delete", "acts.actgate.io", ns, "yes"},
		{"patch", "toolpolicies.actgate.io/status", ns, "yes"},
		{"patch", "bindingmoments.actgate.io/status", ns, "yes"},
		{"get", "secrets", ns, "yes"},
		{"watch", "secrets", ns, "yes"},
		{"update", "secrets", ns, "no"},
		{"watch", "leases.coordination.k8s.io", ns, "yes"},
		{"delete", "leases.coordination.k8s.io", ns, "yes"},
		{"update", "leases.coordination.k8s.io", ns, "no"},
		{"patch", "leases.coordination.k8s.io", ns, "no"},
		{"create", "leases.coordination.k8s.io", ns, "no"},
		{"update", "leases.coordination.k8s.io", "actgate-system", "yes"},
		{"create", "leases.coordination.k8s.io", "actgate-system", "yes"},
		{"create", "events.events.k8s.io", ns, "yes"},
		{"update", "acts.actgate.io", ns, "no"},
	} {
		t.Run(tc.verb+" "+tc.resource+" in "+tc.namespace, func(t *testing.T) {
			args := []string{"auth", "can-i", tc.verb, tc.resource, "-n", tc.namespace, "--as", manager}
			if res, sub, ok := strings.Cut(tc.resource, "/"); ok {
				args[3] = res
				args = append(args, "--subresource", sub)
			}
			got, _ := env.Command(ctxFor(t), "kubectl", args...).Output() // exits 1 for "no"
			if strings.TrimSpace(string(got)) != tc.want {
				t.Errorf("can-i = %q, want %q", strings.TrimSpace(string(got)), tc.want)
			}
		})
	}
}
