package aeb

import "time"

// postDispatchInput is what the post-dispatch steps read: the admission's assessment, the
// frozen operation and the store's record of it.
type postDispatchInput struct {
	assessment Assessment
	op         Operation
	prior      PriorOperation
}

// postDispatchPolicy is one link of a post-dispatch chain; the first that decides ends it.
type postDispatchPolicy func(postDispatchInput) (lifecycle, bool)

func runChain(in postDispatchInput, chain ...postDispatchPolicy) Result {
	for _, policy := range chain {
		if l, decided := policy(in); decided {
			return compose(in.assessment, l)
		}
	}
	// Unreachable for well-formed chains, whose last link always decides; fail closed anyway.
	return compose(in.assessment, lifecycle{
		reservation: ReservationConsumed, custody: in.prior.Custody,
		provider: in.prior.ProviderOutcome, effect: in.prior.EffectRelation,
		retry: RetryRefused, reconciliation: reconciliationNeed(in.prior), decision: DecisionRefuse,
	})
}

// refuseRebinding: the held record must be for this exact action. A different action under the
// same operation identifier is refused and nothing about the record changes (AEB "Security
// Considerations", cross-binding).
func refuseRebinding(in postDispatchInput) (lifecycle, bool) {
	if sameAction(in.op, in.prior) {
		return lifecycle{}, false
	}
	return heldBy(in.prior, ReasonOperationBindingMismatch), true
}

func validatePostDispatch(a Assessment, op Operation, prior PriorOperation) error {
	if err := firstErr(
		validateAssessment(a, "assessment"),
		validateOperation(op, "operation"),
		validatePrior(prior, "prior"),
	); err != nil {
		return err
	}
	if prior.OperationID != op.OperationID {
		return inputErr(CodeInvalidCombination, "prior.operation_id")
	}
	return nil
}

// Observe classifies what is known after dispatch began (AEB "Classify the Effect Outcome"):
// EXECUTED (COMMITTED), FAILED (PROVEN_NOT_COMMITTED) or INDETERMINATE, with the observed-effect
// relation reported separately. prior is the store's record of the operation, in custody
// INVOKING. The reservation is CONSUMED in every case and retry is always REFUSED: whatever the
// outcome, this operation is never dispatched again. Anything short of a terminal pair keeps
// custody INVOKING and requires reconciliation.
func Observe(a Assessment, op Operation, prior PriorOperation, obs Observation) (Result, error) {
	if err := firstErr(
		validatePostDispatch(a, op, prior),
		validateObservation(obs, "observation"),
	); err != nil {
		return Result{}, err
	}
	if prior.Custody != CustodyInvoking {
		return Result{}, inputErr(CodeInvalidCombination, "prior.custody")
	}
	return observe(postDispatchInput{assessment: a, op: op, prior: prior}, obs), nil
}

func observe(in postDispatchInput, obs Observation) Result {
	return runChain(in, refuseRebinding, func(postDispatchInput) (lifecycle, bool) {
		return classify(obs), true
	})
}

// classify maps an observation onto the lifecycle.
func classify(obs Observation) lifecycle {
	terminal := terminalPair(obs.ProviderOutcome, obs.EffectRelation)
	l := lifecycle{
		reservation: ReservationConsumed, custody: CustodyInvoking,
		provider: obs.ProviderOutcome, effect: obs.EffectRelation,
		retry: RetryRefused, reconciliation: ReconciliationRequired, decision: DecisionIndeterminate,
		reasons: []Reason{observationReason(obs)},
	}
	if terminal {
		l.custody, l.reconciliation, l.decision = CustodyTerminal, ReconciliationNotRequired, DecisionRecorded
	}
	return l
}

func observationReason(obs Observation) Reason {
	switch {
	case obs.Source == SourceTimeoutAfterDispatch:
		return ReasonTimeoutAfterDispatch
	case obs.ProviderOutcome == ProviderIndeterminate:
		return ReasonProviderAndEffectIndeterminate
	case obs.ProviderOutcome == ProviderProvenNotCommitted:
		return ReasonProviderProvenNotCommitted
	case obs.EffectRelation == EffectDiverged:
		return ReasonProviderCommittedEffectDiverged
	case obs.EffectRelation == EffectObservedAsRequested:
		return ReasonProviderCommittedEffectObserved
	}
	return ReasonProviderCommittedEffectUnobserved
}

// Retry answers a caller that presents an operation the store already holds (prior, INVOKING or
// TERMINAL): it is never re-invoked (AEB "Perform Authenticated Reconciliation": no invocation
// merely because a timeout elapsed or the caller retried). The held custody and outcome are
// reported unchanged, with whether reconciliation is still required. A later attempt after an
// authoritative FAILED needs a new operation that runs the whole lifecycle.
func Retry(a Assessment, op Operation, prior PriorOperation) (Result, error) {
	if err := validatePostDispatch(a, op, prior); err != nil {
		return Result{}, err
	}
	return retry(postDispatchInput{assessment: a, op: op, prior: prior}), nil
}

func retry(in postDispatchInput) Result {
	return runChain(in, refuseRebinding, func(in postDispatchInput) (lifecycle, bool) {
		return heldBy(in.prior, ReasonBlindRetryRefused), true
	})
}

// reconciliationInput adds the offered evidence to the post-dispatch input.
type reconciliationInput struct {
	postDispatchInput
	rec ReconciliationEvidence
}

// unreconciled: the offered evidence does not move the operation. Custody stays INVOKING, the
// recorded outcome stays as it was, and the one-time authority stays consumed.
func unreconciled(in reconciliationInput, reason Reason) lifecycle {
	return lifecycle{
		reservation: ReservationConsumed, custody: CustodyInvoking,
		provider: in.prior.ProviderOutcome, effect: in.prior.EffectRelation,
		retry: RetryRefused, reconciliation: ReconciliationRefused, decision: DecisionRefuse,
		reasons: []Reason{reason},
	}
}

// reconciliationPolicy is one link of the reconciliation chain.
type reconciliationPolicy func(reconciliationInput) (lifecycle, bool)

// reconciliationChain is AEB "Perform Authenticated Reconciliation" in order: the provider or
// system of record is authenticated; the observation is matched to the original provider,
// operation identifier and exact action; (when the caller can say) it is fresh; and only a
// terminal observation moves the operation. fresh is nil for AEB-1 cases, which carry no time.
func reconciliationChain(fresh reconciliationPolicy) []reconciliationPolicy {
	chain := []reconciliationPolicy{requireAuthenticated, requireRecordBinding}
	if fresh != nil {
		chain = append(chain, fresh)
	}
	return append(chain, requireTerminal)
}

func requireAuthenticated(in reconciliationInput) (lifecycle, bool) {
	if in.rec.Authenticated {
		return lifecycle{}, false
	}
	// Caller assurances and unauthenticated webhooks do not resolve an unknown outcome.
	return unreconciled(in, ReasonUnauthenticatedReconciliation), true
}

func requireRecordBinding(in reconciliationInput) (lifecycle, bool) {
	r, op := in.rec, in.op
	if r.ProviderID == op.ProviderID && r.OperationID == op.OperationID &&
		r.CAID == op.CAID && r.NormalizedActionDigest == op.NormalizedActionDigest {
		return lifecycle{}, false
	}
	return unreconciled(in, ReasonReconciliationBindingMismatch), true
}

// freshWithin returns the freshness link for an observation window f at the trusted time now.
// A missing time, an observation from before the dispatch it claims to describe, one dated after
// now, or one at or past its validity all leave the operation as it was.
func freshWithin(f Freshness, now time.Time) reconciliationPolicy {
	return func(in reconciliationInput) (lifecycle, bool) {
		if f.DispatchedAt.IsZero() || f.ObservedAt.IsZero() || f.ValidUntil.IsZero() ||
			f.ObservedAt.Before(f.DispatchedAt) || f.ObservedAt.After(now) || !now.Before(f.ValidUntil) {
			return unreconciled(in, ReasonReconciliationStale), true
		}
		return lifecycle{}, false
	}
}

func requireTerminal(in reconciliationInput) (lifecycle, bool) {
	r := in.rec
	if !terminalPair(r.ProviderOutcome, r.EffectRelation) {
		// Authenticated and matched but still not conclusive: record it, stay INDETERMINATE.
		return lifecycle{
			reservation: ReservationConsumed, custody: CustodyInvoking,
			provider: r.ProviderOutcome, effect: r.EffectRelation,
			retry: RetryRefused, reconciliation: ReconciliationRequired, decision: DecisionIndeterminate,
			reasons: []Reason{ReasonReconciliationIndeterminate},
		}, true
	}
	// Reconciliation never resurrects the authorization: the reservation stays CONSUMED and
	// retry stays REFUSED even when the provider proves it did not commit.
	return lifecycle{
		reservation: ReservationConsumed, custody: CustodyTerminal,
		provider: r.ProviderOutcome, effect: r.EffectRelation,
		retry: RetryRefused, reconciliation: ReconciliationAccepted, decision: DecisionReconciled,
		reasons: []Reason{ReasonAuthenticatedReconciliation},
	}, true
}

// Reconcile offers provider or system-of-record evidence rec for an operation in custody
// INVOKING (prior). It moves the operation to TERMINAL only on authenticated evidence that
// matches the original provider, operation identifier and exact action, is fresh under f at the
// trusted time now, and is terminal; anything else leaves it INDETERMINATE and locked.
func Reconcile(a Assessment, op Operation, prior PriorOperation, rec ReconciliationEvidence,
	f Freshness, now time.Time) (Result, error) {
	if err := firstErr(
		validatePostDispatch(a, op, prior),
		validateReconciliation(rec, "reconciliation"),
		checkTime(now, "now"),
	); err != nil {
		return Result{}, err
	}
	if prior.Custody != CustodyInvoking {
		return Result{}, inputErr(CodeInvalidCombination, "prior.custody")
	}
	in := reconciliationInput{postDispatchInput{assessment: a, op: op, prior: prior}, rec}
	return reconcile(in, freshWithin(f, now)), nil
}

func reconcile(in reconciliationInput, fresh reconciliationPolicy) Result {
	if l, refused := refuseRebinding(in.postDispatchInput); refused {
		return compose(in.assessment, l)
	}
	for _, policy := range reconciliationChain(fresh) {
		if l, decided := policy(in); decided {
			return compose(in.assessment, l)
		}
	}
	return runChain(in.postDispatchInput) // unreachable: requireTerminal always decides
}
