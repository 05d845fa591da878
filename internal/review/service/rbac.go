package service

import rbacv1 "k8s.io/api/rbac/v1"

// The API group of actgate's own kinds, and the verb every rule that writes an object uses.
const (
	groupActgate = "actgate.io"
	verbCreate   = "create"
	verbUpdate   = "update"
)

// PolicyRules are the RBAC rules the authority service's service account needs cluster-wide
// (the chart's actgate-authority-role): authenticating callers, and finding the governing
// policy of a caller in any namespace (a namespace without one is answered NotGoverned).
// Sidecars get none of these rules: they reach Leases, Acts and BindingMoments only through the
// service.
func PolicyRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		// Authenticate callers.
		{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{verbCreate}},
		// Find the governing policy: the service's informer (Cache) lists and watches them.
		{APIGroups: []string{groupActgate}, Resources: []string{"toolpolicies"}, Verbs: []string{"get", "list", "watch"}},
	}
}

// NamespacePolicyRules are the rules the service needs in a namespace actgate governs (one
// holding a ToolPolicy), and only there: the chart's actgate-authority-namespace-role, which the
// manager binds in each such namespace (controllers.NamespaceAccessReconciler) and nothing
// binds cluster-wide. So the service reads no pod and touches no Lease in kube-system or any
// other namespace without a policy.
func NamespacePolicyRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		// Resolve the caller's pod (by the bound token's name and UID) and its labels: read from
		// the namespace's pod informer (Cache), by name when it misses.
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}},
		// Record acts; grant and delivery markers are metadata updates by compare-and-swap.
		{APIGroups: []string{groupActgate}, Resources: []string{"acts"}, Verbs: []string{"get", verbCreate, verbUpdate, "patch"}},
		{APIGroups: []string{groupActgate}, Resources: []string{"acts/status"}, Verbs: []string{"get", "patch"}},
		// Escalate, and read resolutions: from the namespace's BindingMoment informer (Cache),
		// from the API server's watch cache while it has not synced.
		{APIGroups: []string{groupActgate}, Resources: []string{"bindingmoments"}, Verbs: []string{"get", "list", "watch", verbCreate}},
		// Issue and consume authorities (the Lease store).
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", verbCreate, verbUpdate}},
		// Anchor each calling pod's receipt log: create its ReceiptAnchor once, then move its
		// checkpoint forward by compare-and-swap (anchor.go).
		{APIGroups: []string{groupActgate}, Resources: []string{"receiptanchors"}, Verbs: []string{"get", verbCreate}},
		{APIGroups: []string{groupActgate}, Resources: []string{"receiptanchors/status"}, Verbs: []string{"get", verbUpdate}},
		// Record what sidecars saw of pinned tool definitions in their policy's status
		// (toolpins.go), by compare-and-swap.
		{APIGroups: []string{groupActgate}, Resources: []string{"toolpolicies/status"}, Verbs: []string{"get", verbUpdate}},
		// Count budgets (internal/budget/kubeledger): create a window's BudgetLedger, charge and
		// refund it by compare-and-swap on its status, and delete it after its window ends.
		{APIGroups: []string{groupActgate}, Resources: []string{"budgetledgers"}, Verbs: []string{"get", "list", verbCreate, "delete"}},
		{APIGroups: []string{groupActgate}, Resources: []string{"budgetledgers/status"}, Verbs: []string{"get", verbUpdate}},
		// Announce a changed pinned tool definition (toolpins.go) with an Event.
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{verbCreate}},
	}
}
