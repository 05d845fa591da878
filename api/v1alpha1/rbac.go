package v1alpha1

// The manager's baseline permissions on this group's own kinds, so config/rbac/role.yaml exists
// before the reconcilers do. Controllers and webhooks add their own markers (in controllers/ and
// webhook/); controller-gen merges them into the same role.
//
// The ToolPolicy controller reads policies and writes their status; the Act controller
// reconciles INDETERMINATE outcomes and deletes acts past retention; the BindingMoment controller
// records resolutions and expiry in status. None of them writes BindingMoment spec: only the
// named principal writes spec.resolution.
//
// +kubebuilder:rbac:groups=actgate.io,resources=toolpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=actgate.io,resources=toolpolicies/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=actgate.io,resources=acts,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=actgate.io,resources=acts/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=actgate.io,resources=bindingmoments,verbs=get;list;watch
// +kubebuilder:rbac:groups=actgate.io,resources=bindingmoments/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
