package service

import rbacv1 "k8s.io/api/rbac/v1"

// PolicyRules are the RBAC rules the authority service's service account needs, cluster-wide
// (agents live in any namespace): for the chart's ClusterRole and for tests that run the
// service as a user with exactly these rights. Sidecars get none of them: they reach Leases,
// Acts and BindingMoments only through the service.
func PolicyRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		// Authenticate callers.
		{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
		// Resolve the caller's pod and its labels.
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}},
		// Find the governing policy.
		{APIGroups: []string{"actgate.io"}, Resources: []string{"toolpolicies"}, Verbs: []string{"get", "list"}},
		// Record acts; grant and delivery markers are metadata updates by compare-and-swap.
		{APIGroups: []string{"actgate.io"}, Resources: []string{"acts"}, Verbs: []string{"get", "create", "update", "patch"}},
		{APIGroups: []string{"actgate.io"}, Resources: []string{"acts/status"}, Verbs: []string{"get", "patch"}},
		// Escalate, and read resolutions.
		{APIGroups: []string{"actgate.io"}, Resources: []string{"bindingmoments"}, Verbs: []string{"get", "list", "create"}},
		// Issue and consume authorities (the Lease store).
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
	}
}
