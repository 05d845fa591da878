package controllers

// What the manager process needs beside its reconcilers (cmd/actgate `manager`):
//
// Leader election holds a Lease in the manager's own namespace only: a namespaced Role, so the
// manager can update no Lease elsewhere and so can never consume an authority Lease. Its
// cluster-wide Lease verbs are list and watch (the label-selected cache of authority Leases);
// deleting one, and reading a Secret, it may only in governed namespaces, through the
// RoleBinding of ManagerNamespaceRole that NamespaceAccessReconciler keeps there.
//
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete,namespace=actgate-system
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch,namespace=actgate-system
