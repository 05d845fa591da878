package controllers

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/authority/leasestore"
)

// Field indexes the reconcilers look objects up by. SetupIndexes registers them, once per
// manager, before the reconcilers are set up.
const (
	// indexActPolicy indexes Acts by spec.policyRef.name.
	indexActPolicy = "actgate.io/act-policy"
	// indexActAuthority indexes Acts by status.authorityRef.name (the authority Lease).
	indexActAuthority = "actgate.io/act-authority"
	// indexActLabel indexes Acts by leasestore.ActLabelValue(spec.actID): the act-id label of
	// their authority Leases.
	indexActLabel = "actgate.io/act-label"
	// indexMomentAct indexes BindingMoments by spec.actRef.name.
	indexMomentAct = "actgate.io/moment-act"
)

// SetupIndexes registers the field indexes every reconciler of this package uses. Call it once
// per manager, before the reconcilers' SetupWithManager.
func SetupIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	for _, ix := range []struct {
		obj     client.Object
		field   string
		extract client.IndexerFunc
	}{
		{&v1alpha1.Act{}, indexActPolicy, func(o client.Object) []string {
			return nonEmpty(o.(*v1alpha1.Act).Spec.PolicyRef.Name)
		}},
		{&v1alpha1.Act{}, indexActAuthority, func(o client.Object) []string {
			if ref := o.(*v1alpha1.Act).Status.AuthorityRef; ref != nil {
				return nonEmpty(ref.Name)
			}
			return nil
		}},
		{&v1alpha1.Act{}, indexActLabel, func(o client.Object) []string {
			if id := o.(*v1alpha1.Act).Spec.ActID; id != "" {
				return []string{leasestore.ActLabelValue(id)}
			}
			return nil
		}},
		{&v1alpha1.Act{}, indexActState, func(o client.Object) []string {
			return nonEmpty(string(o.(*v1alpha1.Act).Status.State))
		}},
		{&v1alpha1.BindingMoment{}, indexMomentAct, func(o client.Object) []string {
			return nonEmpty(o.(*v1alpha1.BindingMoment).Spec.ActRef.Name)
		}},
	} {
		if err := indexer.IndexField(ctx, ix.obj, ix.field, ix.extract); err != nil {
			return fmt.Errorf("controllers: index %s: %w", ix.field, err)
		}
	}
	return nil
}

// secretRef is one credentials reference of a policy, with the field it is in and the keys
// that must exist beside the one it names.
type secretRef struct {
	field string
	ref   v1alpha1.SecretKeyRef
	extra []string
}

// secretRefs lists every credentialsSecretRef of spec in field order.
func secretRefs(spec *v1alpha1.ToolPolicySpec) []secretRef {
	var out []secretRef
	for i, s := range spec.Servers {
		if s.CredentialsSecretRef != nil {
			out = append(out, secretRef{field: fmt.Sprintf("spec.servers[%d].credentialsSecretRef", i), ref: *s.CredentialsSecretRef})
		}
		if s.Reconciliation != nil && s.Reconciliation.CredentialsSecretRef != nil {
			out = append(out, secretRef{
				field: fmt.Sprintf("spec.servers[%d].reconciliation.credentialsSecretRef", i),
				ref:   *s.Reconciliation.CredentialsSecretRef,
				// Without the MAC key no answer can be authenticated (internal/reconcile).
				extra: []string{SecretKeyResponseMAC},
			})
		}
	}
	return out
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}
