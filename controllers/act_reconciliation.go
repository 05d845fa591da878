package controllers

import (
	"context"
	"crypto/x509"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
	reconclient "github.com/actgate/actgate/internal/reconcile"
)

// reconcileOutcome asks the act's server what became of an INDETERMINATE operation
// (action-evidence-boundary, "Perform Authenticated Reconciliation"). It asks the declared
// reconciliation endpoint, never the tool: nothing here invokes anything. Only an authenticated,
// matching, fresh, terminal answer settles the act; every other finding leaves it INDETERMINATE
// and is asked again after a backoff that doubles with each attempt.
func (r *ActReconciler) reconcileOutcome(ctx context.Context, s *actScope) (ctrl.Result, error) {
	act := s.act
	if act.Status.State != v1alpha1.ActStateIndeterminate {
		return ctrl.Result{}, nil
	}
	attempts := int32(0)
	if rec := act.Status.Reconciliation; rec != nil {
		attempts = rec.Attempts
		if attempts > 0 && rec.LastAttemptTime != nil {
			if due := rec.LastAttemptTime.Add(r.backoff(attempts)); s.now.Before(due) {
				return after(due.Sub(s.now)), nil
			}
		}
	}
	if act.Status.OperationID == "" {
		s.notConfigured = "The act has no status.operationID, so its operation cannot be named to a reconciliation endpoint"
		return after(r.maxBackoff()), nil
	}
	ep, why, err := r.endpoint(ctx, act)
	if err != nil {
		return ctrl.Result{}, err
	}
	if why != "" {
		s.notConfigured = why
		return after(r.maxBackoff()), nil
	}

	q := reconclient.Query{
		OperationID: act.Status.OperationID, ActionDigest: string(act.Spec.ActionDigest),
		Tool: act.Spec.Tool, Server: act.Spec.Server,
	}
	answer, err := r.asker().Ask(ctx, ep, q)
	if err != nil {
		finding, ok := reconclient.Classify(err)
		if !ok {
			s.notConfigured = fmt.Sprintf("Reconciliation endpoint of server %q is not usable: %v", act.Spec.Server, err)
			return after(r.maxBackoff()), nil
		}
		s.attempted, s.verdict, s.detail = true, reconclient.Verdict{Finding: finding}, err.Error()
		return after(r.backoff(attempts + 1)), nil
	}
	exp := reconclient.Expectation{Query: q, Agent: act.Spec.Agent, SinkID: act.Spec.SinkID, NotBefore: act.CreationTimestamp.Time}
	// The answer is judged at the time it arrived, not the time the reconcile began.
	verdict, err := reconclient.Judge(exp, answer, r.freshness(), r.Clock.Now())
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("judge reconciliation answer for Act %s: %w", klog.KObj(act), err)
	}
	s.attempted, s.verdict = true, verdict
	s.detail = fmt.Sprintf("authenticated answer %s (outcome %s, observed %s): %s", verdict.Finding, answer.Outcome,
		answer.ObservedAt.UTC().Format(time.RFC3339), verdict.Reason)
	if verdict.Finding.Settles() {
		return ctrl.Result{}, nil
	}
	return after(r.backoff(attempts + 1)), nil
}

// endpoint resolves the act's server's reconciliation endpoint and its secrets. why is set, and
// err nil, when the configuration does not allow a query; err is set when an API read failed.
func (r *ActReconciler) endpoint(ctx context.Context, act *v1alpha1.Act) (_ reconclient.Endpoint, why string, _ error) {
	tp := &v1alpha1.ToolPolicy{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: act.Namespace, Name: act.Spec.PolicyRef.Name}, tp); err != nil {
		if apierrors.IsNotFound(err) {
			return reconclient.Endpoint{}, fmt.Sprintf("ToolPolicy %q not found", act.Spec.PolicyRef.Name), nil
		}
		return reconclient.Endpoint{}, "", fmt.Errorf("get ToolPolicy %s/%s: %w", act.Namespace, act.Spec.PolicyRef.Name, err)
	}
	var server *v1alpha1.ToolServer
	for i := range tp.Spec.Servers {
		if tp.Spec.Servers[i].Name == act.Spec.Server {
			server = &tp.Spec.Servers[i]
		}
	}
	switch {
	case server == nil:
		return reconclient.Endpoint{}, fmt.Sprintf("ToolPolicy %q lists no server %q", tp.Name, act.Spec.Server), nil
	case server.Reconciliation == nil:
		return reconclient.Endpoint{}, fmt.Sprintf("Server %q of ToolPolicy %q declares no reconciliation endpoint", server.Name, tp.Name), nil
	case server.Reconciliation.CredentialsSecretRef == nil:
		return reconclient.Endpoint{}, fmt.Sprintf("The reconciliation endpoint of server %q has no credentialsSecretRef, so no answer could be authenticated", server.Name), nil
	}
	ref := server.Reconciliation.CredentialsSecretRef
	sec := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: act.Namespace, Name: ref.Name}, sec); err != nil {
		if apierrors.IsNotFound(err) {
			return reconclient.Endpoint{}, fmt.Sprintf("Secret %q of the reconciliation endpoint of server %q not found", ref.Name, server.Name), nil
		}
		return reconclient.Endpoint{}, "", fmt.Errorf("get Secret %s/%s: %w", act.Namespace, ref.Name, err)
	}
	for _, key := range []string{ref.Key, SecretKeyResponseMAC} {
		if len(sec.Data[key]) == 0 {
			return reconclient.Endpoint{}, fmt.Sprintf("Secret %q has no key %q", ref.Name, key), nil
		}
	}
	ep := reconclient.Endpoint{
		URL:     server.Reconciliation.URL,
		Token:   string(sec.Data[ref.Key]),
		MACKey:  sec.Data[SecretKeyResponseMAC],
		RootCAs: r.RootCAs,
	}
	if pem := sec.Data[SecretKeyCA]; len(pem) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return reconclient.Endpoint{}, fmt.Sprintf("Key %q of Secret %q holds no PEM certificate", SecretKeyCA, ref.Name), nil
		}
		ep.RootCAs = pool
	}
	return ep, "", nil
}

func (r *ActReconciler) asker() *reconclient.Client {
	if r.Reconciler != nil {
		return r.Reconciler
	}
	return &reconclient.Client{}
}

// backoff is the wait after attempt n (n ≥ 1): Backoff·2^(n-1), at most MaxBackoff.
func (r *ActReconciler) backoff(n int32) time.Duration {
	return reconclient.BackoffAfter(r.Backoff, r.maxBackoff(), int(n))
}

func (r *ActReconciler) maxBackoff() time.Duration {
	if r.MaxBackoff > 0 {
		return r.MaxBackoff
	}
	return DefaultReconcileMaxBackoff
}

func (r *ActReconciler) freshness() time.Duration {
	if r.Freshness > 0 {
		return r.Freshness
	}
	return DefaultReconcileFreshness
}
