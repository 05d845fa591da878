package attacks

import (
	"bufio"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	"github.com/actgate/actgate/controllers"
	"github.com/actgate/actgate/test/envtest"
)

// chartRBAC renders charts/actgate (release namespace actgate-system, with helm args such as
// --set) and creates its RBAC objects as the chart installs them: ClusterRoles,
// ClusterRoleBindings, Roles, RoleBindings.
func chartRBAC(t *testing.T, e *envtest.Env, args ...string) {
	t.Helper()
	ctx := kctx(t)
	if err := e.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "actgate-system"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	out := e.Helm(t, append([]string{"template", "actgate", "charts/actgate", "--namespace", "actgate-system", "--kube-version", "1.37.2"}, args...)...)
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(out)))
	n := 0
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var head struct{ Kind string }
		if err := yaml.Unmarshal(doc, &head); err != nil {
			t.Fatal(err)
		}
		var obj client.Object
		switch head.Kind {
		case "ClusterRole":
			obj = &rbacv1.ClusterRole{}
		case "ClusterRoleBinding":
			obj = &rbacv1.ClusterRoleBinding{}
		case "Role":
			obj = &rbacv1.Role{}
		case "RoleBinding":
			obj = &rbacv1.RoleBinding{}
		default:
			continue
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			t.Fatalf("%s: %v", head.Kind, err)
		}
		if err := e.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create %s %s: %v", head.Kind, obj.GetName(), err)
		}
		n++
	}
	if n < 6 {
		t.Fatalf("the chart rendered %d RBAC objects", n)
	}
}

// TestChartRBACIsNamespaceScoped: the chart's service accounts, impersonated with exactly the
// chart's RBAC (rendered with helm and applied) and the RoleBindings the manager itself keeps
// (controllers.NamespaceAccessReconciler running as the manager's service account), reach
// Leases, pods and Secrets only in a namespace holding a ToolPolicy. The authority service
// cannot get, create or update a kube-system Lease (leader election, node heartbeats) nor read
// a pod elsewhere; the manager cannot read a Secret in an ungoverned namespace, list Secrets
// anywhere, nor get, update or delete a kube-system Lease. In the governed namespace both can
// do their work, and once its policy is deleted the access goes with it.
func TestChartRBACIsNamespaceScoped(t *testing.T) {
	e := kube(t)
	ctx := kctx(t)
	chartRBAC(t, e)
	authority := serviceAccountUser(t, e, "actgate-system", "actgate-authority")
	manager := serviceAccountUser(t, e, "actgate-system", "actgate-manager")

	// The manager's namespace-access controller, as the manager's service account.
	access, err := controllers.NewNamespaceAccessReconciler(nil, controllers.DefaultAuthorityServiceAccount, controllers.DefaultManagerServiceAccount)
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(manager.Config, ctrl.Options{
		Scheme: e.Scheme, Cache: cache.Options{ByObject: controllers.CacheByObject()},
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	access.Client = mgr.GetClient()
	if err := access.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})

	governed := namespace(t, e, nil)
	ungoverned := namespace(t, e, nil)
	for _, ns := range []string{governed, ungoverned} {
		if err := e.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "payments-mcp", Namespace: ns},
			StringData: map[string]string{"token": "secret-" + ns}}); err != nil {
			t.Fatal(err)
		}
		if err := e.Client.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "agent-0", Namespace: ns},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "registry.example/agent:1"}}}}); err != nil {
			t.Fatal(err)
		}
	}
	sysLease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{GenerateName: "kube-controller-manager-", Namespace: "kube-system"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("node-1")}}
	if err := e.Client.Create(ctx, sysLease); err != nil {
		t.Fatal(err)
	}
	if err := e.Client.Create(ctx, governedPolicy(governed)); err != nil {
		t.Fatal(err)
	}

	// The manager binds both namespace roles in the governed namespace, and only there.
	eventuallyAllowed(t, "authority get pod in the governed namespace", func() error {
		return authority.Client.Get(ctx, client.ObjectKey{Namespace: governed, Name: "agent-0"}, &corev1.Pod{})
	})
	eventuallyAllowed(t, "manager get Secret in the governed namespace", func() error {
		return manager.Client.Get(ctx, client.ObjectKey{Namespace: governed, Name: "payments-mcp"}, &corev1.Secret{})
	})
	var rbs rbacv1.RoleBindingList
	if err := e.Client.List(ctx, &rbs, client.InNamespace(ungoverned)); err != nil {
		t.Fatal(err)
	}
	if len(rbs.Items) != 0 {
		t.Fatalf("RoleBindings in the ungoverned namespace: %+v", rbs.Items)
	}

	sysKey := client.ObjectKeyFromObject(sysLease)
	refused := func(who, what string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s %s = %v, want 403 Forbidden", who, what, err)
		}
	}
	for _, u := range []struct {
		name string
		c    client.Client
	}{{"authority", authority.Client}, {"manager", manager.Client}} {
		refused(u.name, "get kube-system Lease", u.c.Get(ctx, sysKey, &coordinationv1.Lease{}))
		stolen := sysLease.DeepCopy()
		stolen.Spec.HolderIdentity = ptr.To(u.name)
		refused(u.name, "update kube-system Lease", u.c.Update(ctx, stolen))
		refused(u.name, "create kube-system Lease", u.c.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "actgate-" + u.name, Namespace: "kube-system"}}))
		refused(u.name, "delete kube-system Lease", u.c.Delete(ctx, sysLease.DeepCopy()))
		refused(u.name, "get Secret in the ungoverned namespace", u.c.Get(ctx, client.ObjectKey{Namespace: ungoverned, Name: "payments-mcp"}, &corev1.Secret{}))
		refused(u.name, "list Secrets cluster-wide", u.c.List(ctx, &corev1.SecretList{}))
		refused(u.name, "list Secrets in the governed namespace", u.c.List(ctx, &corev1.SecretList{}, client.InNamespace(governed)))
		refused(u.name, "create Lease in the ungoverned namespace", u.c.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "authority-x", Namespace: ungoverned}}))
	}
	// The manager deletes only its own two RoleBindings.
	other := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "someone-elses", Namespace: "kube-system"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "carol"}}}
	if err := e.Client.Create(ctx, other); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	refused("manager", "delete another RoleBinding", manager.Client.Delete(ctx, other.DeepCopy()))
	refused("manager", "bind cluster-admin", manager.Client.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "actgate-manager", Namespace: ungoverned},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "actgate-system", Name: "actgate-manager"}}}))
	refused("authority", "get pod in the ungoverned namespace", authority.Client.Get(ctx, client.ObjectKey{Namespace: ungoverned, Name: "agent-0"}, &corev1.Pod{}))
	refused("authority", "get Secret in the governed namespace", authority.Client.Get(ctx, client.ObjectKey{Namespace: governed, Name: "payments-mcp"}, &corev1.Secret{}))
	got := &coordinationv1.Lease{}
	if err := e.Client.Get(ctx, sysKey, got); err != nil || ptr.Deref(got.Spec.HolderIdentity, "") != "node-1" {
		t.Fatalf("kube-system Lease after the attempts: %v %+v", err, got.Spec)
	}

	// In the governed namespace each does its work: the authority issues, reads and consumes a
	// Lease; the manager deletes it.
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "authority-1", Namespace: governed}}
	if err := authority.Client.Create(ctx, l); err != nil {
		t.Fatalf("authority create Lease in the governed namespace: %v", err)
	}
	if err := authority.Client.Get(ctx, client.ObjectKeyFromObject(l), l); err != nil {
		t.Fatalf("authority get Lease: %v", err)
	}
	l.Spec.HolderIdentity = ptr.To("consumed")
	if err := authority.Client.Update(ctx, l); err != nil {
		t.Fatalf("authority update Lease: %v", err)
	}
	refused("authority", "delete Lease in the governed namespace", authority.Client.Delete(ctx, l.DeepCopy()))
	refused("manager", "update Lease in the governed namespace", manager.Client.Update(ctx, l.DeepCopy()))
	if err := manager.Client.Delete(ctx, l); err != nil {
		t.Fatalf("manager delete Lease in the governed namespace: %v", err)
	}

	// The policy goes: so do the RoleBindings, and with them the access.
	if err := e.Client.Delete(ctx, governedPolicy(governed)); err != nil {
		t.Fatal(err)
	}
	eventuallyRefused(t, "authority get pod after the policy is deleted", func() error {
		return authority.Client.Get(ctx, client.ObjectKey{Namespace: governed, Name: "agent-0"}, &corev1.Pod{})
	})
	eventuallyRefused(t, "manager get Secret after the policy is deleted", func() error {
		return manager.Client.Get(ctx, client.ObjectKey{Namespace: governed, Name: "payments-mcp"}, &corev1.Secret{})
	})
}

// eventuallyAllowed waits until do succeeds (RBAC and the manager's RoleBindings apply within
// seconds).
func eventuallyAllowed(t *testing.T, what string, do func() error) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err = do(); err == nil {
			return
		}
	}
	t.Fatalf("%s: %v", what, err)
}

// eventuallyRefused waits until do is refused with 403.
func eventuallyRefused(t *testing.T, what string, do func() error) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err = do(); apierrors.IsForbidden(err) {
			return
		}
	}
	t.Fatalf("%s = %v, want 403 Forbidden", what, err)
}
