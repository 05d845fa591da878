package controllers

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/actgate/actgate/api/v1alpha1"
)

// The manager binds these ClusterRoles, namespace by namespace, to actgate's service accounts
// (NamespaceAccessReconciler). Nothing binds them cluster-wide: config/rbac and the chart
// define them, and the manager may bind exactly these two.
const (
	// AuthorityNamespaceRole holds the authority service's rights inside a governed namespace
	// (internal/review/service.NamespacePolicyRules: the caller's pod, Acts, BindingMoments and
	// authority Leases).
	AuthorityNamespaceRole = "actgate-authority-namespace-role"
	// ManagerNamespaceRole holds the manager's rights inside a governed namespace
	// (ManagerNamespaceRules: the policies' Secrets, deleting authority Leases).
	ManagerNamespaceRole = "actgate-manager-namespace-role"

	// LabelNamespaceAccess marks the RoleBindings the manager maintains; its value is the bound
	// ClusterRole. The manager caches only RoleBindings carrying it.
	LabelNamespaceAccess = "actgate.io/namespace-access"

	// DefaultAuthorityServiceAccount and DefaultManagerServiceAccount are the service accounts of
	// config/rbac (namespace/name); the chart passes its release namespace's.
	DefaultAuthorityServiceAccount = "actgate-system/actgate-authority"
	DefaultManagerServiceAccount   = "actgate-system/actgate-manager"
)

// The manager lists and watches RoleBindings (its cache selects its own by label), creates them
// (RBAC's escalation check lets it bind only the two roles it may bind, or rights it holds), and
// deletes only RoleBindings of its two names: never anyone else's.
//
// Each RoleBinding is owned by the ClusterRole it binds (a cluster-scoped owner of a namespaced
// dependent), so the garbage collector deletes the bindings in every namespace when the
// ClusterRoles go (`helm uninstall`): the manager reads the two ClusterRoles by name for their
// uids, and never lists them.
//
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=rolebindings,verbs=list;watch;create
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=rolebindings,verbs=delete,resourceNames=actgate-authority;actgate-manager
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=bind;get,resourceNames=actgate-authority-namespace-role;actgate-manager-namespace-role

// ManagerNamespaceRules are the rules of ManagerNamespaceRole: what the manager needs in a
// governed namespace only. Secrets are read uncached, one by name (ToolPolicy and Act
// controllers); so is the pod of an in-flight Act, to see whether it is gone (Act controller,
// holdCutOffDispatch: no list, no watch); authority Leases are deleted past retention (Act and
// authority Lease controllers). The manager lists and watches Leases cluster-wide through a cache that selects
// authority Leases by label (CacheByObject), and never updates one.
func ManagerNamespaceRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"delete"}},
	}
}

// NamespaceAccessReconciler grants actgate's service accounts their namespaced rights exactly
// in the namespaces actgate governs: those holding a ToolPolicy (where sidecars call the
// authority service and the manager reads the policies' Secrets) or an Act (kept until
// retention deletes it and its authority Leases). In each such namespace it keeps one
// RoleBinding per entry of Bindings, labelled LabelNamespaceAccess; in every other namespace
// it deletes them. So the authority service cannot read, create or update a Lease, nor read a
// pod, in a namespace without a policy (kube-system's leader-election and node Leases among
// them), and the manager cannot read a Secret there.
type NamespaceAccessReconciler struct {
	// Client reads ToolPolicies, Acts and the labelled RoleBindings from the cache and writes
	// RoleBindings.
	Client client.Client
	// Reader reads the bound ClusterRoles, uncached, by name (the manager may get only those
	// two, and may not list or watch them). SetupWithManager sets the manager's API reader when
	// it is nil.
	Reader client.Reader
	// Bindings are the RoleBindings kept in every governed namespace.
	Bindings []NamespaceBinding

	mu    sync.Mutex
	roles map[string]roleRead // ClusterRole name → its last read
}

// roleRead is a ClusterRole's uid as read at a time. A read is reused for roleTTL: every Act
// event reconciles its namespace, and a ClusterRole's uid changes only when it is recreated.
type roleRead struct {
	uid types.UID
	at  time.Time
}

// NamespaceBinding is one RoleBinding the reconciler keeps: Name binds ClusterRole to the
// service account Subject.
type NamespaceBinding struct {
	Name        string
	ClusterRole string
	Subject     rbacv1.Subject
}

// NewNamespaceAccessReconciler binds AuthorityNamespaceRole to the authority service account
// and ManagerNamespaceRole to the manager's, each given as namespace/name.
func NewNamespaceAccessReconciler(c client.Client, authoritySA, managerSA string) (*NamespaceAccessReconciler, error) {
	r := &NamespaceAccessReconciler{Client: c}
	// The names are the RBAC markers' resourceNames: the only RoleBindings the manager may delete.
	for _, b := range []struct{ name, role, sa string }{
		{"actgate-authority", AuthorityNamespaceRole, authoritySA},
		{"actgate-manager", ManagerNamespaceRole, managerSA},
	} {
		ns, name, ok := strings.Cut(b.sa, "/")
		if !ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
			return nil, fmt.Errorf("service account %q: want namespace/name", b.sa)
		}
		r.Bindings = append(r.Bindings, NamespaceBinding{Name: b.name, ClusterRole: b.role,
			Subject: rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}})
	}
	return r, nil
}

// Reconcile keeps or removes the bindings of namespace req.Name.
func (r *NamespaceAccessReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ns := req.Name
	governed, err := r.governed(ctx, ns)
	if err != nil {
		return reconcile.Result{}, err
	}
	var have rbacv1.RoleBindingList
	if err := r.Client.List(ctx, &have, client.InNamespace(ns), client.HasLabels{LabelNamespaceAccess}); err != nil {
		return reconcile.Result{}, fmt.Errorf("list RoleBindings in %s: %w", ns, err)
	}
	want := map[string]*rbacv1.RoleBinding{}
	if governed {
		for _, b := range r.Bindings {
			owner, err := r.clusterRole(ctx, b.ClusterRole)
			if err != nil {
				return reconcile.Result{}, err
			}
			want[b.Name] = r.binding(ns, b, owner)
		}
	}
	ours := map[string]bool{}
	for _, b := range r.Bindings {
		ours[b.Name] = true
	}
	for i := range have.Items {
		rb := &have.Items[i]
		if !ours[rb.Name] {
			continue // labelled by someone else: not the manager's to delete
		}
		w, keep := want[rb.Name]
		if keep && rb.RoleRef == w.RoleRef && len(rb.Subjects) == 1 && rb.Subjects[0] == w.Subjects[0] &&
			rb.Labels[LabelNamespaceAccess] == w.Labels[LabelNamespaceAccess] && ownedBy(rb, w.OwnerReferences[0].UID) {
			delete(want, rb.Name)
			continue
		}
		// Not wanted, or not as wanted (a roleRef cannot change; a binding without the
		// ClusterRole's owner reference would outlive it): delete, and recreate below.
		if err := r.Client.Delete(ctx, rb); client.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, fmt.Errorf("delete RoleBinding %s: %w", klog.KObj(rb), err)
		}
		ctrl.LoggerFrom(ctx).Info("Removed namespace access", "roleBinding", klog.KObj(rb), "governed", governed)
	}
	for _, rb := range want {
		if err := r.Client.Create(ctx, rb); err != nil {
			if apierrors.IsAlreadyExists(err) {
				// An unlabelled RoleBinding of that name is not ours: the cache never shows it.
				return reconcile.Result{}, fmt.Errorf("RoleBinding %s exists without label %s", klog.KObj(rb), LabelNamespaceAccess)
			}
			return reconcile.Result{}, fmt.Errorf("create RoleBinding %s: %w", klog.KObj(rb), err)
		}
		ctrl.LoggerFrom(ctx).Info("Granted namespace access", "roleBinding", klog.KObj(rb), "clusterRole", rb.RoleRef.Name)
	}
	return reconcile.Result{}, nil
}

// governed reports whether ns holds a ToolPolicy or an Act.
func (r *NamespaceAccessReconciler) governed(ctx context.Context, ns string) (bool, error) {
	var policies v1alpha1.ToolPolicyList
	if err := r.Client.List(ctx, &policies, client.InNamespace(ns)); err != nil {
		return false, fmt.Errorf("list ToolPolicies in %s: %w", ns, err)
	}
	if len(policies.Items) > 0 {
		return true, nil
	}
	var acts v1alpha1.ActList
	if err := r.Client.List(ctx, &acts, client.InNamespace(ns)); err != nil {
		return false, fmt.Errorf("list Acts in %s: %w", ns, err)
	}
	return len(acts.Items) > 0, nil
}

// clusterRole reads the ClusterRole a binding binds. A missing one is an error: a binding to
// it would grant nothing, and one created without its owner would outlive the uninstall that
// removed the role.
func (r *NamespaceAccessReconciler) clusterRole(ctx context.Context, name string) (types.UID, error) {
	r.mu.Lock()
	read, ok := r.roles[name]
	r.mu.Unlock()
	if ok && time.Since(read.at) < roleTTL {
		return read.uid, nil
	}
	cr := &rbacv1.ClusterRole{}
	if err := r.Reader.Get(ctx, client.ObjectKey{Name: name}, cr); err != nil {
		return "", fmt.Errorf("read ClusterRole %s: %w", name, err)
	}
	r.mu.Lock()
	if r.roles == nil {
		r.roles = map[string]roleRead{}
	}
	r.roles[name] = roleRead{uid: cr.UID, at: time.Now()}
	r.mu.Unlock()
	return cr.UID, nil
}

// roleTTL is how long a ClusterRole's uid is reused before it is read again.
const roleTTL = time.Minute

// ownedBy reports whether rb names the ClusterRole of uid as its owner.
func ownedBy(rb *rbacv1.RoleBinding, uid types.UID) bool {
	for _, o := range rb.OwnerReferences {
		if o.Kind == "ClusterRole" && o.APIVersion == rbacv1.SchemeGroupVersion.String() && o.UID == uid {
			return true
		}
	}
	return false
}

func (r *NamespaceAccessReconciler) binding(ns string, b NamespaceBinding, owner types.UID) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: b.Name, Namespace: ns, Labels: map[string]string{
			LabelNamespaceAccess:           b.ClusterRole,
			"app.kubernetes.io/managed-by": "actgate-manager",
		}, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRole", Name: b.ClusterRole, UID: owner,
		}}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: b.ClusterRole},
		Subjects: []rbacv1.Subject{b.Subject},
	}
}

// namespaceAccessSelector selects the RoleBindings the reconciler maintains (for the cache).
func namespaceAccessSelector() labels.Selector {
	sel, err := labels.Parse(LabelNamespaceAccess)
	if err != nil {
		panic(err) // a constant
	}
	return sel
}

// SetupWithManager registers the reconciler: a namespace is reconciled when a ToolPolicy, an
// Act or one of its labelled RoleBindings changes. Its RoleBinding cache must be restricted
// by CacheByObject.
func (r *NamespaceAccessReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Reader == nil {
		r.Reader = mgr.GetAPIReader()
	}
	toNamespace := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: o.GetNamespace()}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("namespaceaccess").
		Watches(&v1alpha1.ToolPolicy{}, toNamespace).
		Watches(&v1alpha1.Act{}, toNamespace).
		Watches(&rbacv1.RoleBinding{}, toNamespace).
		Complete(r)
}
