package controllers_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/actgate/actgate/controllers"
)

// TestManagerRBAC applies config/rbac (role.yaml generated from this package's markers) and
// checks the manager's service account can do what the reconcilers do, and cannot update an
// authority Lease anywhere but its own namespace: it may delete authorities, never consume them.
// Secrets and deleting Leases it holds only where a RoleBinding of ManagerNamespaceRole grants
// them (NamespaceAccessReconciler keeps one in each governed namespace), and it may bind that
// role and AuthorityNamespaceRole, no other.
func TestManagerRBAC(t *testing.T) {
	env := apiServer(t)
	ns := env.Namespace(t)
	if err := env.Client.Create(ctxFor(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "actgate-system"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	env.Kubectl(t, "apply", "-k", "config/rbac")
	const manager = "system:serviceaccount:actgate-system:actgate-manager"
	type row struct{ verb, resource, namespace, want string }
	check := func(t *testing.T, rows []row) {
		t.Helper()
		for _, tc := range rows {
			t.Run(tc.verb+" "+tc.resource+" in "+tc.namespace, func(t *testing.T) {
				args := []string{"auth", "can-i", tc.verb, tc.resource, "--as", manager}
				if tc.namespace == "" {
					args = append(args, "--all-namespaces")
				} else {
					args = append(args, "-n", tc.namespace)
				}
				if res, sub, ok := strings.Cut(tc.resource, "/"); ok {
					args[3] = res
					args = append(args, "--subresource", sub)
				}
				var got string
				for range 50 { // RBAC's informers apply a new RoleBinding within moments
					out, _ := env.Command(ctxFor(t), "kubectl", args...).Output() // exits 1 for "no"
					if got = strings.TrimSpace(string(out)); got == tc.want {
						return
					}
					time.Sleep(100 * time.Millisecond)
				}
				t.Errorf("can-i = %q, want %q", got, tc.want)
			})
		}
	}
	t.Run("cluster-wide", func(t *testing.T) {
		check(t, []row{
			{"patch", "acts.actgate.io/status", ns, "yes"},
			{"delete", "acts.actgate.io", ns, "yes"},
			{"patch", "toolpolicies.actgate.io/status", ns, "yes"},
			{"patch", "bindingmoments.actgate.io/status", ns, "yes"},
			{"get", "secrets", ns, "no"},
			{"list", "secrets", "", "no"},
			{"watch", "secrets", ns, "no"},
			{"get", "pods", ns, "no"},
			{"list", "pods", "", "no"},
			{"watch", "leases.coordination.k8s.io", ns, "yes"},
			{"get", "leases.coordination.k8s.io", "kube-system", "no"},
			{"delete", "leases.coordination.k8s.io", ns, "no"},
			{"delete", "leases.coordination.k8s.io", "kube-system", "no"},
			{"update", "leases.coordination.k8s.io", ns, "no"},
			{"patch", "leases.coordination.k8s.io", ns, "no"},
			{"create", "leases.coordination.k8s.io", ns, "no"},
			{"update", "leases.coordination.k8s.io", "actgate-system", "yes"},
			{"create", "leases.coordination.k8s.io", "actgate-system", "yes"},
			{"create", "rolebindings.rbac.authorization.k8s.io", ns, "yes"},
			{"create", "events.events.k8s.io", ns, "yes"},
			{"update", "acts.actgate.io", ns, "no"},
		})
	})
	// What NamespaceAccessReconciler does, as the manager: bind its namespace role in ns. A
	// RoleBinding of any other role is refused (RBAC's escalation check: no bind on it).
	as := []string{"--as", manager, "-n", ns}
	env.Kubectl(t, append([]string{"create", "rolebinding", "actgate-manager", "--clusterrole", controllers.ManagerNamespaceRole,
		"--serviceaccount", "actgate-system:actgate-manager"}, as...)...)
	if out, err := env.Command(ctxFor(t), "kubectl", append([]string{"create", "rolebinding", "escalate", "--clusterrole", "cluster-admin",
		"--serviceaccount", "actgate-system:actgate-manager"}, as...)...).CombinedOutput(); err == nil || !strings.Contains(string(out), "forbidden") {
		t.Fatalf("the manager bound cluster-admin: %v\n%s", err, out)
	}
	t.Run("governed namespace", func(t *testing.T) {
		check(t, []row{
			{"get", "secrets", ns, "yes"},
			{"list", "secrets", ns, "no"},
			{"watch", "secrets", ns, "no"},
			{"update", "secrets", ns, "no"},
			{"get", "pods", ns, "yes"},
			{"list", "pods", ns, "no"},
			{"watch", "pods", ns, "no"},
			{"get", "pods", "kube-system", "no"},
			{"delete", "leases.coordination.k8s.io", ns, "yes"},
			{"update", "leases.coordination.k8s.io", ns, "no"},
			{"delete", "leases.coordination.k8s.io", "kube-system", "no"},
		})
	})
}
