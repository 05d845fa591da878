package controllers

// What the manager process needs beside its reconcilers (cmd/actgate `manager`):
//
// Leader election holds a Lease in the manager's own namespace only: a namespaced Role, so the
// manager can update no Lease elsewhere and so can never consume an authority Lease (its
// cluster-wide Lease verbs are get, list, watch and delete).
//
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete,namespace=actgate-system
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch,namespace=actgate-system
