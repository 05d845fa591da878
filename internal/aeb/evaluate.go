package aeb

// Evaluate runs one AEB-1 case through the same steps the sink uses in production: Assess, then
// the step the case's mode names (admission, invocation observation, retry or reconciliation).
// It is pure and deterministic; the only clock is the case's evaluated_at.
//
// An invalid case has no AEB decision: Evaluate returns an *InputError and the zero Result,
// whose Decision is not ADMIT.
//
// The AEB-1 case gives no time for reconciliation evidence, so RECONCILIATION cases are
// evaluated without the freshness link that Reconcile applies in production.
func Evaluate(c Case) (Result, error) {
	if err := ValidateCase(c); err != nil {
		return Result{}, err
	}
	a := assess(evidenceInput{op: c.Operation, evidence: c.Evidence, policy: c.LocalPolicy, at: c.EvaluatedAt})
	if c.Mode == ModeAdmission {
		return admit(admissionInput{assessment: a, op: c.Operation, evidence: c.Evidence, res: c.Reservation}), nil
	}
	// ValidateCase guarantees the held record for every post-dispatch mode.
	prior, _ := priorFor(c.Operation, c.Reservation)
	in := postDispatchInput{assessment: a, op: c.Operation, prior: prior}
	switch c.Mode {
	case ModeInvocationObservation:
		return observe(in, *c.Observation), nil
	case ModeRetry:
		return retry(in), nil
	}
	return reconcile(reconciliationInput{in, *c.Reconciliation}, nil), nil
}
