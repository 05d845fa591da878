package controllers_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/actgate/actgate/controllers"
)

func TestNewNamespaceAccessReconcilerRefusesBadAccounts(t *testing.T) {
	for _, sa := range []string{"", "actgate-authority", "/actgate-authority", "actgate-system/", "Actgate/x", "a/b/c"} {
		if _, err := controllers.NewNamespaceAccessReconciler(nil, sa, controllers.DefaultManagerServiceAccount); err == nil {
			t.Errorf("authority service account %q accepted", sa)
		}
	}
}

// TestNamespaceAccess: the RoleBindings of the two namespace roles exist exactly in the
// namespaces holding a ToolPolicy or an Act, each owned by the ClusterRole it binds (so the
// garbage collector removes them with the roles: envtest runs no garbage collector, test/node
// sees it happen at `helm uninstall`); one edited to bind someone else, or stripped of its
// owner, is replaced, and they go with the namespace's last policy and Act.
func TestNamespaceAccess(t *testing.T) {
	env := apiServer(t)
	ns, other := env.Namespace(t), env.Namespace(t)
	roleUIDs := map[string]types.UID{}
	for _, name := range []string{controllers.AuthorityNamespaceRole, controllers.ManagerNamespaceRole} {
		cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err := env.Client.Create(ctxFor(t), cr); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		if err := env.Client.Get(ctxFor(t), client.ObjectKey{Name: name}, cr); err != nil {
			t.Fatal(err)
		}
		roleUIDs[name] = cr.UID
	}
	r, err := controllers.NewNamespaceAccessReconciler(nil, "actgate-system/actgate-authority", "actgate-system/actgate-manager")
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme: env.Scheme, Cache: cache.Options{ByObject: controllers.CacheByObject()},
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	r.Client = mgr.GetClient()
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	c := env.Client
	bindings := func(ns string) (map[string]rbacv1.RoleBinding, error) {
		var list rbacv1.RoleBindingList
		if err := c.List(ctxFor(t), &list, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		out := map[string]rbacv1.RoleBinding{}
		for _, rb := range list.Items {
			out[rb.Name] = rb
		}
		return out, nil
	}
	granted := func(ns string) func() error {
		return func() error {
			got, err := bindings(ns)
			if err != nil {
				return err
			}
			for name, role := range map[string]string{"actgate-authority": controllers.AuthorityNamespaceRole, "actgate-manager": controllers.ManagerNamespaceRole} {
				rb, ok := got[name]
				if !ok || rb.RoleRef.Name != role || len(rb.Subjects) != 1 || rb.Subjects[0].Kind != rbacv1.ServiceAccountKind ||
					rb.Subjects[0].Namespace != "actgate-system" || rb.Subjects[0].Name != name || rb.Labels[controllers.LabelNamespaceAccess] != role {
					return fmt.Errorf("RoleBinding %s/%s = %+v", ns, name, rb)
				}
				if len(rb.OwnerReferences) != 1 || rb.OwnerReferences[0].Kind != "ClusterRole" || rb.OwnerReferences[0].Name != role ||
					rb.OwnerReferences[0].UID != roleUIDs[role] {
					return fmt.Errorf("RoleBinding %s/%s is owned by %+v, want the ClusterRole %s (%s)", ns, name, rb.OwnerReferences, role, roleUIDs[role])
				}
			}
			return nil
		}
	}
	none := func(ns string) func() error {
		return func() error {
			got, err := bindings(ns)
			if err != nil || len(got) != 0 {
				return fmt.Errorf("RoleBindings in %s: %v %v", ns, got, err)
			}
			return nil
		}
	}

	p := newPolicy("payments", "https://payments.example/mcp")
	p.Namespace = ns
	if err := c.Create(ctxFor(t), p); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, granted(ns))
	consistently(t, time.Second, none(other))

	// Someone rebinds the role to another subject: the binding is put back.
	got, _ := bindings(ns)
	rb := got["actgate-authority"]
	rb.Subjects[0].Name = "mallory"
	if err := c.Update(ctxFor(t), &rb); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, granted(ns))

	// A binding that would outlive its ClusterRole (no owner reference) is put back with it.
	got, _ = bindings(ns)
	rb = got["actgate-manager"]
	rb.OwnerReferences = nil
	if err := c.Update(ctxFor(t), &rb); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, granted(ns))

	// An Act keeps a namespace governed after its policy is gone.
	a := newAct("act-1", "payments")
	a.Namespace = other
	if err := c.Create(ctxFor(t), a); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, granted(other))
	if err := c.Delete(ctxFor(t), p); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, none(ns))
	if err := c.Delete(ctxFor(t), a); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, none(other))
}
