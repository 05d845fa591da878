package webhook

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/policy"
	"github.com/actgate/actgate/webhook/inject"
)

// ToolPolicyValidator admits a ToolPolicy only if it compiles (internal/policy.Compile: CEL
// argument expressions parse and return bool, tool globs, cross references inside the spec),
// so a broken policy is refused with its reasons instead of stored and then failing closed.
// Single-object bounds are the CRD's CEL rules (Gateway API style); this handler does what
// needs a compiler or other objects.
//
// Cross-object findings are warnings, not denials, so that GitOps can apply a policy before
// what it refers to:
//   - a credentialsSecretRef (server or reconciliation) names a Secret that does not exist
//     (the controller reports Ready=False SecretNotFound until it does);
//   - the namespace is not governed (actgate.io/inject: "true"), so only pods that opt in are
//     injected and unselected pods there are not kept from the credential;
//   - another ToolPolicy of the namespace lists a server of the same name: a pod selected by
//     both would be refused injection.
type ToolPolicyValidator struct {
	// Reader reads Namespaces and ToolPolicies.
	Reader client.Reader
	// APIReader checks that Secrets exist (metadata only, uncached).
	APIReader client.Reader
}

var _ admission.Validator[*v1alpha1.ToolPolicy] = (*ToolPolicyValidator)(nil)

// ValidateCreate implements admission.Validator.
func (v *ToolPolicyValidator) ValidateCreate(ctx context.Context, p *v1alpha1.ToolPolicy) (admission.Warnings, error) {
	return v.validate(ctx, p)
}

// ValidateUpdate implements admission.Validator.
func (v *ToolPolicyValidator) ValidateUpdate(ctx context.Context, _, p *v1alpha1.ToolPolicy) (admission.Warnings, error) {
	return v.validate(ctx, p)
}

// ValidateDelete implements admission.Validator.
func (v *ToolPolicyValidator) ValidateDelete(context.Context, *v1alpha1.ToolPolicy) (admission.Warnings, error) {
	return nil, nil
}

func (v *ToolPolicyValidator) validate(ctx context.Context, p *v1alpha1.ToolPolicy) (admission.Warnings, error) {
	if _, err := policy.Compile(p.Namespace+"/"+p.Name, &p.Spec, 1); err != nil {
		return nil, compileInvalid(p, err)
	}
	return v.warnings(ctx, p), nil
}

// compileInvalid turns a CompileError into a 422 Invalid with one cause per problem, the way
// the API server reports CRD validation: `spec.rules[1].arguments[0].expression: Invalid
// value: ...: InvalidCEL: ...`.
func compileInvalid(p *v1alpha1.ToolPolicy, err error) error {
	ce, ok := err.(*policy.CompileError)
	if !ok {
		return apierrors.NewInvalid(v1alpha1.GroupVersion.WithKind("ToolPolicy").GroupKind(), p.Name,
			field.ErrorList{field.InternalError(field.NewPath("spec"), err)})
	}
	var errs field.ErrorList
	for _, pr := range ce.Problems {
		errs = append(errs, field.Invalid(field.NewPath(pr.Field), valueAt(p, pr.Field), string(pr.Reason)+": "+pr.Detail))
	}
	return apierrors.NewInvalid(v1alpha1.GroupVersion.WithKind("ToolPolicy").GroupKind(), p.Name, errs)
}

// valueAt returns the expression text for an argument-expression problem (what an operator
// needs to see) and "" otherwise.
func valueAt(p *v1alpha1.ToolPolicy, path string) string {
	var r, a int
	if n, _ := fmt.Sscanf(path, "spec.rules[%d].arguments[%d].expression", &r, &a); n == 2 &&
		r >= 0 && r < len(p.Spec.Rules) && a >= 0 && a < len(p.Spec.Rules[r].Arguments) {
		return p.Spec.Rules[r].Arguments[a].Expression
	}
	return ""
}

func (v *ToolPolicyValidator) warnings(ctx context.Context, p *v1alpha1.ToolPolicy) admission.Warnings {
	var w admission.Warnings
	seen := map[string]bool{}
	checkSecret := func(path string, ref *v1alpha1.SecretKeyRef) {
		if ref == nil || seen[ref.Name] || v.APIReader == nil {
			return
		}
		seen[ref.Name] = true
		s := &metav1.PartialObjectMetadata{}
		s.APIVersion, s.Kind = "v1", "Secret"
		err := v.APIReader.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: ref.Name}, s)
		switch {
		case apierrors.IsNotFound(err):
			w = append(w, fmt.Sprintf("%s: Secret %s not found in namespace %s; the policy is not Ready until it exists", path, ref.Name, p.Namespace))
		case err != nil:
			w = append(w, fmt.Sprintf("%s: could not check Secret %s: %v", path, ref.Name, err))
		}
	}
	for i, s := range p.Spec.Servers {
		checkSecret(fmt.Sprintf("spec.servers[%d].credentialsSecretRef", i), s.CredentialsSecretRef)
		if s.Reconciliation != nil {
			checkSecret(fmt.Sprintf("spec.servers[%d].reconciliation.credentialsSecretRef", i), s.Reconciliation.CredentialsSecretRef)
		}
	}

	ns := &corev1.Namespace{}
	if err := v.Reader.Get(ctx, client.ObjectKey{Name: p.Namespace}, ns); err == nil && ns.Labels[inject.LabelInject] != "true" {
		w = append(w, fmt.Sprintf("namespace %s is not labelled %s=true: only pods that opt in are injected, "+
			"and other pods there are not kept from the credential Secrets", p.Namespace, inject.LabelInject))
	}

	others := &v1alpha1.ToolPolicyList{}
	if err := v.Reader.List(ctx, others, client.InNamespace(p.Namespace)); err == nil {
		mine := map[string]bool{}
		for _, s := range p.Spec.Servers {
			mine[s.Name] = true
		}
		for _, o := range others.Items {
			if o.Name == p.Name {
				continue
			}
			var shared []string
			for _, s := range o.Spec.Servers {
				if mine[s.Name] {
					shared = append(shared, s.Name)
				}
			}
			if len(shared) > 0 {
				w = append(w, fmt.Sprintf("ToolPolicy %s also lists server(s) %s: a pod selected by both is refused injection", o.Name, strings.Join(shared, ", ")))
			}
		}
	}
	return w
}
