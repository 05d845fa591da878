package webhook

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/actgate/actgate/webhook/inject"
)

// ErrNamespaceGuarded: the user may not take a namespace out of governance.
var ErrNamespaceGuarded = errors.New("only namespace admins may take a namespace out of actgate governance")

// NamespaceGuard guards the namespace label actgate.io/inject the way Gatekeeper guards its
// exemption label: opting a namespace in ("true") is open to anyone who may edit the
// namespace, but setting any other value (the "false" opt-out, or an invalid one) or removing
// or changing "true" is admitted only from Config.NamespaceAdminGroups or
// Config.NamespaceAdminUsers. Otherwise whoever may label a namespace (often its own team)
// could stop its agents' tool calls from being governed.
//
// The webhook configuration's objectSelector (actgate.io/inject exists) sends it only
// namespaces that carry the label before or after the change.
type NamespaceGuard struct {
	// AdminGroups and AdminUsers may take a namespace out of governance.
	AdminGroups []string
	AdminUsers  []string
}

var _ admission.Validator[*corev1.Namespace] = (*NamespaceGuard)(nil)

// ValidateCreate implements admission.Validator.
func (g *NamespaceGuard) ValidateCreate(ctx context.Context, ns *corev1.Namespace) (admission.Warnings, error) {
	v, ok := ns.Labels[inject.LabelInject]
	if !ok || v == "true" {
		return nil, nil
	}
	return nil, g.admin(ctx, fmt.Sprintf("create namespace %s with %s=%q", ns.Name, inject.LabelInject, v))
}

// ValidateUpdate implements admission.Validator.
func (g *NamespaceGuard) ValidateUpdate(ctx context.Context, old, ns *corev1.Namespace) (admission.Warnings, error) {
	ov, oldOK := old.Labels[inject.LabelInject]
	nv, newOK := ns.Labels[inject.LabelInject]
	switch {
	case oldOK == newOK && ov == nv: // unchanged
		return nil, nil
	case newOK && nv == "true": // opting in
		return nil, nil
	case !newOK:
		return nil, g.admin(ctx, fmt.Sprintf("remove %s=%q from namespace %s", inject.LabelInject, ov, ns.Name))
	}
	return nil, g.admin(ctx, fmt.Sprintf("set %s=%q on namespace %s", inject.LabelInject, nv, ns.Name))
}

// ValidateDelete implements admission.Validator.
func (g *NamespaceGuard) ValidateDelete(context.Context, *corev1.Namespace) (admission.Warnings, error) {
	return nil, nil
}

func (g *NamespaceGuard) admin(ctx context.Context, what string) error {
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return fmt.Errorf("actgate: %w", err)
	}
	u := req.UserInfo
	if slices.Contains(g.AdminUsers, u.Username) || slices.ContainsFunc(u.Groups, func(grp string) bool { return slices.Contains(g.AdminGroups, grp) }) {
		return nil
	}
	return fmt.Errorf("%w: %s may not %s", ErrNamespaceGuarded, u.Username, what)
}
