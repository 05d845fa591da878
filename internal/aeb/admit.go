package aeb

import "time"

// lifecycle is the lifecycle half of a result: what happened (or may happen) to the reservation,
// custody and the effect, and the reasons the lifecycle step adds.
type lifecycle struct {
	reservation    ReservationOutcome
	custody        Custody
	provider       ProviderOutcome
	effect         EffectRelation
	retry          RetryDecision
	reconciliation ReconciliationDecision
	decision       Decision
	reasons        []Reason
}

func compose(a Assessment, l lifecycle) Result {
	return Result{
		Verification:    a.Verification,
		Acceptance:      a.Acceptance,
		ActionMatch:     a.ActionMatch,
		Satisfaction:    a.Satisfaction,
		Authorization:   a.Authorization,
		Reservation:     l.reservation,
		Custody:         l.custody,
		ProviderOutcome: l.provider,
		EffectRelation:  l.effect,
		Retry:           l.retry,
		Reconciliation:  l.reconciliation,
		Decision:        l.decision,
		Reasons:         reasonSet(a.Reasons, l.reasons),
	}
}

// notInvoked is the lifecycle of an operation that was never dispatched and holds nothing.
func notInvoked(res ReservationOutcome, retry RetryDecision, d Decision, reasons ...Reason) lifecycle {
	return lifecycle{
		reservation: res, custody: CustodyUnreserved,
		provider: ProviderNotInvoked, effect: EffectNotObserved,
		retry: retry, reconciliation: ReconciliationNotApplicable,
		decision: d, reasons: reasons,
	}
}

// reconciliationNeed: an operation whose recorded outcome is not terminal stays locked until
// authenticated reconciliation (AEB "Perform Authenticated Reconciliation").
func reconciliationNeed(p PriorOperation) ReconciliationDecision {
	if terminalPair(p.ProviderOutcome, p.EffectRelation) {
		return ReconciliationNotRequired
	}
	return ReconciliationRequired
}

// heldBy reports the lifecycle of an operation identifier the store already holds: the held
// record's custody and outcome are reported as they are, and nothing is re-dispatched.
func heldBy(p PriorOperation, reason Reason) lifecycle {
	return lifecycle{
		reservation: ReservationOperationReplay, custody: p.Custody,
		provider: p.ProviderOutcome, effect: p.EffectRelation,
		retry: RetryRefused, reconciliation: reconciliationNeed(p),
		decision: DecisionRefuse, reasons: []Reason{reason},
	}
}

// sameAction reports whether a held record is for the exact action of op.
func sameAction(op Operation, p PriorOperation) bool {
	return p.CAID == op.CAID && p.NormalizedActionDigest == op.NormalizedActionDigest
}

// admissionInput is what the reservation chain reads.
type admissionInput struct {
	assessment Assessment
	op         Operation
	evidence   []Evidence
	res        Reservation
}

// admissionPolicy is one link of the reservation chain. When it fails, its lifecycle is the
// result and the chain stops: after a refusal the store is not consulted further.
type admissionPolicy func(admissionInput) (lifecycle, bool)

// admissionChain is AEB "Atomically Consume or Reserve Before Invocation" as an ordered chain.
func admissionChain() []admissionPolicy {
	return []admissionPolicy{
		// SATISFIED alone must not trigger reservation: only AUTHORIZED reaches the store.
		requireAuthorized,
		// An operation identifier already held is never dispatched again.
		refuseOperationReplay,
		// Native evidence re-wrapped under a new operation keeps its native replay unit.
		refuseNativeEvidenceReplay,
		// Without a linearizable local store there is no reservation, so no invocation.
		requireLocalAtomic,
	}
}

func requireAuthorized(in admissionInput) (lifecycle, bool) {
	switch in.assessment.Authorization {
	case AuthorizationAuthorized:
		return lifecycle{}, false
	case AuthorizationIndeterminate:
		return notInvoked(ReservationNotAttempted, RetryNotApplicable, DecisionIndeterminate), true
	}
	return notInvoked(ReservationNotAttempted, RetryNotApplicable, DecisionRefuse), true
}

func refuseOperationReplay(in admissionInput) (lifecycle, bool) {
	p, held := priorFor(in.op, in.res)
	if !held {
		return lifecycle{}, false
	}
	if !sameAction(in.op, p) {
		// The identifier is held by a different action: report it, never merge the two.
		return heldBy(p, ReasonOperationBindingMismatch), true
	}
	return heldBy(p, ReasonOperationReplay), true
}

func refuseNativeEvidenceReplay(in admissionInput) (lifecycle, bool) {
	consumed := map[string]bool{}
	for _, u := range in.res.ConsumedNativeReplayUnits {
		consumed[u] = true
	}
	for _, e := range in.evidence {
		if consumed[e.NativeReplayUnit] {
			return notInvoked(ReservationNativeEvidenceReplay, RetryRefused, DecisionRefuse,
				ReasonNativeEvidenceReplay), true
		}
	}
	return lifecycle{}, false
}

func requireLocalAtomic(in admissionInput) (lifecycle, bool) {
	if in.res.Atomicity != AtomicityLocalAtomic {
		return notInvoked(ReservationUnavailable, RetryNotApplicable, DecisionRefuse,
			ReasonLocalAtomicReservationUnavailable), true
	}
	return lifecycle{}, false
}

// admitted is the only lifecycle that permits invocation: reserve, then DISPATCH_PENDING.
func admitted() lifecycle {
	return lifecycle{
		reservation: ReservationReserved, custody: CustodyReserved,
		provider: ProviderNotInvoked, effect: EffectNotObserved,
		retry: RetryNotApplicable, reconciliation: ReconciliationNotApplicable,
		decision: DecisionAdmit,
	}
}

func admit(in admissionInput) Result {
	for _, policy := range admissionChain() {
		if l, failed := policy(in); failed {
			return compose(in.assessment, l)
		}
	}
	return compose(in.assessment, admitted())
}

// Admit decides whether op may be reserved and dispatched: the evidence chain (Assess), then the
// reservation chain against a snapshot of the durable state res. Only a result with Decision
// ADMIT permits invocation.
//
// Admit is pure: its RESERVED means "the snapshot permits reserving now". The caller then makes
// the reservation atomically (consume the authority's Lease or embedded record by
// compare-and-swap, fencing the operation identifier and every native replay unit) before it
// journals DISPATCH_PENDING. If the compare-and-swap loses, the caller evaluates again against
// the state that won (which then reports OPERATION_REPLAY or NATIVE_EVIDENCE_REPLAY); if the
// store errors or times out, it evaluates with Atomicity "unavailable" or simply refuses.
//
// An input error means there is no decision; the zero Result is not ADMIT.
func Admit(op Operation, evidence []Evidence, policy LocalPolicy, res Reservation, at time.Time) (Result, error) {
	a, err := Assess(op, evidence, policy, at)
	if err != nil {
		return Result{}, err
	}
	if err := validateReservation(res, "reservation"); err != nil {
		return Result{}, err
	}
	return admit(admissionInput{assessment: a, op: op, evidence: evidence, res: res}), nil
}
