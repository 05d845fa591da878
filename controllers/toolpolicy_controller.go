package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/policy"
)

// +kubebuilder:rbac:groups=actgate.io,resources=toolpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=actgate.io,resources=toolpolicies/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// ToolPolicyReconciler compiles ToolPolicies and reports whether they are served.
type ToolPolicyReconciler struct {
	// Client reads policies from the cache and writes their status.
	Client client.Client
	// APIReader reads Secrets uncached, one by name: the manager caches no Secret, and may read
	// one only in a governed namespace (ManagerNamespaceRules).
	APIReader client.Reader
	// SecretRecheck is how often a policy that references Secrets has them checked again (a
	// Secret created, changed or deleted is noticed within it; nothing watches Secrets). Zero
	// means DefaultSecretRecheck.
	SecretRecheck time.Duration
	// Recorder emits Events.
	Recorder events.EventRecorder
	// Clock stamps condition transitions.
	Clock clock.PassiveClock
}

// DefaultSecretRecheck is ToolPolicyReconciler.SecretRecheck's default.
const DefaultSecretRecheck = 30 * time.Second

// policyScope is what one reconcile of a ToolPolicy observed.
type policyScope struct {
	policy *v1alpha1.ToolPolicy
	// epoch is the policy epoch this generation is (or would be) served at.
	epoch int64
	// newGeneration: metadata.generation differs from status.observedGeneration.
	newGeneration bool
	// compileErr is what policy.Compile returned.
	compileErr error
	// missingSecrets lists "field: Secret ns/name (key k)" for every reference that does not
	// resolve; secretsErr is set when a Secret could not be read at all.
	missingSecrets []string
	secretsErr     error
}

// Reconcile compiles the policy, checks its Secrets, and writes status once.
func (r *ToolPolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	tp := &v1alpha1.ToolPolicy{}
	if err := r.Client.Get(ctx, req.NamespacedName, tp); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	s := &policyScope{
		policy:        tp,
		newGeneration: tp.Generation != tp.Status.ObservedGeneration,
		epoch:         tp.Status.PolicyEpoch,
	}
	defer func() {
		if err := r.patchStatus(ctx, s); err != nil {
			reterr = kerrors.NewAggregate([]error{reterr, err})
		}
	}()

	var res ctrl.Result
	var errs []error
	for _, step := range []func(context.Context, *policyScope) (ctrl.Result, error){
		r.compile,
		r.checkSecrets,
	} {
		stepRes, err := step(ctx, s)
		if err != nil {
			errs = append(errs, err)
		}
		res = lowestNonZero(res, stepRes)
	}
	if len(errs) > 0 {
		return ctrl.Result{}, kerrors.NewAggregate(errs) // a result beside an error is ignored
	}
	return res, nil
}

// compile runs policy.Compile at the epoch this generation would be served at.
func (r *ToolPolicyReconciler) compile(_ context.Context, s *policyScope) (ctrl.Result, error) {
	epoch := s.epoch
	if s.newGeneration || epoch == 0 {
		epoch++
	}
	_, s.compileErr = policy.Compile(s.policy.Namespace+"/"+s.policy.Name, &s.policy.Spec, epoch)
	if s.compileErr != nil {
		// An invalid spec does not become valid by retrying; a spec change brings the policy
		// back.
		return ctrl.Result{}, reconcile.TerminalError(s.compileErr)
	}
	// The epoch increases by one exactly when a changed spec is accepted.
	s.epoch = epoch
	return ctrl.Result{}, nil
}

// checkSecrets reads every referenced Secret (uncached) and records missing Secrets or keys.
func (r *ToolPolicyReconciler) checkSecrets(ctx context.Context, s *policyScope) (ctrl.Result, error) {
	secrets := map[string]*corev1.Secret{}
	var errs []error
	for _, ref := range secretRefs(&s.policy.Spec) {
		sec, seen := secrets[ref.ref.Name]
		if !seen {
			sec = &corev1.Secret{}
			err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: s.policy.Namespace, Name: ref.ref.Name}, sec)
			switch {
			case apierrors.IsNotFound(err):
				sec = nil
			case err != nil:
				errs = append(errs, fmt.Errorf("get Secret %s/%s: %w", s.policy.Namespace, ref.ref.Name, err))
				continue
			}
			secrets[ref.ref.Name] = sec
		}
		if sec == nil {
			s.missingSecrets = append(s.missingSecrets, fmt.Sprintf("%s: Secret %q not found", ref.field, ref.ref.Name))
			continue
		}
		for _, key := range append([]string{ref.ref.Key}, ref.extra...) {
			if len(sec.Data[key]) == 0 {
				s.missingSecrets = append(s.missingSecrets, fmt.Sprintf("%s: Secret %q has no key %q", ref.field, ref.ref.Name, key))
			}
		}
	}
	s.secretsErr = kerrors.NewAggregate(errs)
	var res ctrl.Result
	if len(secretRefs(&s.policy.Spec)) > 0 {
		res.RequeueAfter = r.SecretRecheck
		if res.RequeueAfter <= 0 {
			res.RequeueAfter = DefaultSecretRecheck
		}
	}
	return res, s.secretsErr
}

// patchStatus derives status from the scope and patches it when it changed, then emits the
// Events of conditions that changed to False.
func (r *ToolPolicyReconciler) patchStatus(ctx context.Context, s *policyScope) error {
	tp := s.policy
	status := toolPolicyStatus(tp, s, r.Clock.Now())
	if apiequality.Semantic.DeepEqual(tp.Status, status) {
		return nil
	}
	old := tp.Status
	patch := client.MergeFromWithOptions(tp.DeepCopy(), client.MergeFromWithOptimisticLock{})
	tp.Status = status
	if err := r.Client.Status().Patch(ctx, tp, patch); err != nil {
		return fmt.Errorf("patch ToolPolicy %s status: %w", klog.KObj(tp), err)
	}
	for _, t := range []string{v1alpha1.ToolPolicyAcceptedCondition, v1alpha1.ToolPolicyReadyCondition} {
		c := meta.FindStatusCondition(status.Conditions, t)
		if c == nil || c.Status != "False" || !conditionChanged(old.Conditions, c) {
			continue
		}
		if t == v1alpha1.ToolPolicyReadyCondition && c.Reason == v1alpha1.ToolPolicyNotAcceptedReason {
			continue // the Accepted Event already says why
		}
		action := actionCompile
		if t == v1alpha1.ToolPolicyReadyCondition {
			action = actionCheck
		}
		r.Recorder.Eventf(tp, nil, corev1.EventTypeWarning, c.Reason, action, "%s", note(c.Message))
	}
	return nil
}

// SetupWithManager registers the reconciler; SetupIndexes must have run. Secrets are not
// watched (a watch needs list and watch on Secrets cluster-wide): checkSecrets requeues.
func (r *ToolPolicyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.ToolPolicy{}).
		Named("toolpolicy").
		Complete(r)
}

// compileReason returns the Accepted reason and message of a compile error.
func compileReason(err error) (string, string) {
	var ce *policy.CompileError
	if errors.As(err, &ce) {
		return string(ce.Reason()), err.Error()
	}
	return v1alpha1.ToolPolicyInvalidSpecReason, err.Error()
}
