package aeb

import (
	"fmt"
	"regexp"
	"time"
)

// Bounds of the AEB-1 case format. They bound the work of one evaluation; anything larger is
// malformed input, not a decision.
const (
	MaxEvidence         = 16
	MaxRequirements     = 16
	MaxPriorOperations  = 64
	MaxReplayUnits      = 128
	maxDocumentBytes    = 1 << 20
	maxDepth            = 32
	maxIdentifierLength = 256
)

// Syntax of the AEB-1 case fields. Identifiers are ASCII-only, so confusable or normalisable
// spellings of one principal cannot count as two.
var (
	identifierRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9:_.@/-]{0,255}$`)
	roleRE       = regexp.MustCompile(`^[a-z][a-z0-9-]{0,127}$`)
	digestRE     = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	caidRE       = regexp.MustCompile(`^caid:1:[a-z][a-z0-9-]*(?:\.[a-z][a-z0-9-]*)*\.[1-9][0-9]*:jcs-sha256:[A-Za-z0-9_-]{43}$`)
)

func idx(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

func checkIdentifier(v, path string) error {
	if !identifierRE.MatchString(v) {
		return inputErr(CodeInvalidString, path)
	}
	return nil
}

func checkDigest(v, path string) error {
	if !digestRE.MatchString(v) {
		return inputErr(CodeInvalidDigest, path)
	}
	return nil
}

func checkCAID(v, path string) error {
	if !caidRE.MatchString(v) {
		return inputErr(CodeInvalidCAID, path)
	}
	return nil
}

func checkEnum(valid bool, path string) error {
	if !valid {
		return inputErr(CodeInvalidEnum, path)
	}
	return nil
}

func checkTime(t time.Time, path string) error {
	if t.IsZero() {
		return inputErr(CodeInvalidInstant, path)
	}
	return nil
}

// firstErr returns the first non-nil error, so validation reports one stable code per input.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// truthPairValid: the provider outcome constrains the effect relation. Nothing can be observed
// of an effect that was not invoked or proven not committed, and an unknown provider outcome
// leaves the effect unknown.
func truthPairValid(p ProviderOutcome, e EffectRelation) bool {
	switch p {
	case ProviderNotInvoked, ProviderProvenNotCommitted:
		return e == EffectNotObserved
	case ProviderIndeterminate:
		return e == EffectIndeterminate
	case ProviderCommitted:
		return e.Valid()
	}
	return false
}

// terminalPair reports whether an outcome pair ends the lifecycle: proven not committed, or
// committed with the effect observed (as requested or diverged). Everything else that was
// dispatched needs reconciliation (AEB "Classify the Effect Outcome").
func terminalPair(p ProviderOutcome, e EffectRelation) bool {
	return (p == ProviderProvenNotCommitted && e == EffectNotObserved) ||
		(p == ProviderCommitted && (e == EffectObservedAsRequested || e == EffectDiverged))
}

func validateRequirement(r Requirement, path string) error {
	if !roleRE.MatchString(string(r.Role)) {
		return inputErr(CodeInvalidString, path+".role")
	}
	if r.Minimum < 1 || r.Minimum > MaxEvidence {
		return inputErr(CodeInvalidInteger, path+".minimum")
	}
	return checkEnum(r.PrincipalKind.Valid(), path+".principal_kind")
}

// validateOperation checks the observed action. AEB "Relying-Party Inputs and Pins": a missing
// or ambiguous requirement fails closed, so an empty requirement is malformed, never "nothing
// required".
func validateOperation(op Operation, path string) error {
	if err := firstErr(
		checkIdentifier(op.OperationID, path+".operation_id"),
		checkIdentifier(op.ProviderID, path+".provider_id"),
		checkIdentifier(op.InitiatorID, path+".initiator_id"),
		checkIdentifier(op.ExecutorID, path+".executor_id"),
		checkCAID(op.CAID, path+".caid"),
		checkDigest(op.NormalizedActionDigest, path+".normalized_action_digest"),
	); err != nil {
		return err
	}
	rp := path + ".requirements"
	if len(op.Requirements) == 0 || len(op.Requirements) > MaxRequirements {
		return inputErr(CodeInvalidArray, rp)
	}
	type slot struct {
		role Role
		kind PrincipalKind
	}
	seen := map[slot]bool{}
	for i, r := range op.Requirements {
		if err := validateRequirement(r, idx(rp, i)); err != nil {
			return err
		}
		// Two slots for one (role, kind) would make the requirement ambiguous.
		k := slot{r.Role, r.PrincipalKind}
		if seen[k] {
			return inputErr(CodeDuplicateValue, rp)
		}
		seen[k] = true
	}
	return nil
}

func validateStatus(s Status, path string) error {
	if err := firstErr(
		checkEnum(s.Verdict.Valid(), path+".verdict"),
		checkTime(s.CheckedAt, path+".checked_at"),
		checkTime(s.ValidUntil, path+".valid_until"),
	); err != nil {
		return err
	}
	if s.CheckedAt.After(s.ValidUntil) {
		return inputErr(CodeInvalidCombination, path)
	}
	return nil
}

func validateEvidence(e Evidence, path string) error {
	if !roleRE.MatchString(string(e.Role)) {
		return inputErr(CodeInvalidString, path+".role")
	}
	return firstErr(
		checkDigest(e.WrapperDigest, path+".wrapper_digest"),
		checkDigest(e.NativeReplayUnit, path+".native_replay_unit"),
		checkEnum(e.NativeVerification.Valid(), path+".native_verification"),
		checkCAID(e.MappedCAID, path+".mapped_caid"),
		checkDigest(e.MappedActionDigest, path+".mapped_action_digest"),
		checkEnum(e.PrincipalKind.Valid(), path+".principal_kind"),
		checkIdentifier(e.PrincipalID, path+".principal_id"),
		validateStatus(e.Status, path+".status"),
	)
}

// validateEvidenceList also rejects a repeated wrapper or replay unit: one artifact presented
// twice must not count twice toward a quorum.
func validateEvidenceList(ev []Evidence, path string) error {
	if len(ev) > MaxEvidence {
		return inputErr(CodeInvalidArray, path)
	}
	wrappers, units := map[string]bool{}, map[string]bool{}
	for i, e := range ev {
		if err := validateEvidence(e, idx(path, i)); err != nil {
			return err
		}
		if wrappers[e.WrapperDigest] || units[e.NativeReplayUnit] {
			return inputErr(CodeDuplicateValue, idx(path, i))
		}
		wrappers[e.WrapperDigest], units[e.NativeReplayUnit] = true, true
	}
	return nil
}

func validatePrior(p PriorOperation, path string) error {
	if err := firstErr(
		checkIdentifier(p.OperationID, path+".operation_id"),
		checkCAID(p.CAID, path+".caid"),
		checkDigest(p.NormalizedActionDigest, path+".normalized_action_digest"),
		checkEnum(p.Custody == CustodyInvoking || p.Custody == CustodyTerminal, path+".custody"),
		checkEnum(p.ProviderOutcome.Valid(), path+".provider_outcome"),
		checkEnum(p.EffectRelation.Valid(), path+".effect_relation"),
	); err != nil {
		return err
	}
	// A held operation is TERMINAL exactly when its outcome is terminal; any other pairing is a
	// conflicting record, which AEB says must fail closed.
	if !truthPairValid(p.ProviderOutcome, p.EffectRelation) ||
		(p.Custody == CustodyTerminal) != terminalPair(p.ProviderOutcome, p.EffectRelation) {
		return inputErr(CodeInvalidCombination, path)
	}
	return nil
}

func validateReservation(r Reservation, path string) error {
	if err := checkEnum(r.Atomicity.Valid(), path+".atomicity"); err != nil {
		return err
	}
	pp := path + ".prior_operations"
	if len(r.PriorOperations) > MaxPriorOperations {
		return inputErr(CodeInvalidArray, pp)
	}
	ids := map[string]bool{}
	for i, p := range r.PriorOperations {
		if err := validatePrior(p, idx(pp, i)); err != nil {
			return err
		}
		if ids[p.OperationID] {
			return inputErr(CodeDuplicateValue, idx(pp, i))
		}
		ids[p.OperationID] = true
	}
	up := path + ".consumed_native_replay_units"
	if len(r.ConsumedNativeReplayUnits) > MaxReplayUnits {
		return inputErr(CodeInvalidArray, up)
	}
	units := map[string]bool{}
	for i, u := range r.ConsumedNativeReplayUnits {
		if err := checkDigest(u, idx(up, i)); err != nil {
			return err
		}
		if units[u] {
			return inputErr(CodeDuplicateValue, idx(up, i))
		}
		units[u] = true
	}
	return nil
}

// postDispatchOutcome checks an outcome reported after dispatch began: NOT_INVOKED is not an
// outcome of something already dispatched.
func postDispatchOutcome(p ProviderOutcome, e EffectRelation, path string) error {
	if err := firstErr(
		checkEnum(p == ProviderCommitted || p == ProviderProvenNotCommitted || p == ProviderIndeterminate,
			path+".provider_outcome"),
		checkEnum(e.Valid(), path+".effect_relation"),
	); err != nil {
		return err
	}
	if !truthPairValid(p, e) {
		return inputErr(CodeInvalidCombination, path)
	}
	return nil
}

func validateObservation(o Observation, path string) error {
	if err := firstErr(
		checkEnum(o.Source.Valid(), path+".source"),
		postDispatchOutcome(o.ProviderOutcome, o.EffectRelation, path),
	); err != nil {
		return err
	}
	// A timeout is by definition not evidence of either outcome (AEB "Classify the Effect
	// Outcome": a timeout alone is not sufficient for FAILED).
	if o.Source == SourceTimeoutAfterDispatch &&
		(o.ProviderOutcome != ProviderIndeterminate || o.EffectRelation != EffectIndeterminate) {
		return inputErr(CodeInvalidCombination, path)
	}
	return nil
}

func validateReconciliation(r ReconciliationEvidence, path string) error {
	return firstErr(
		checkIdentifier(r.ProviderID, path+".provider_id"),
		checkIdentifier(r.OperationID, path+".operation_id"),
		checkCAID(r.CAID, path+".caid"),
		checkDigest(r.NormalizedActionDigest, path+".normalized_action_digest"),
		postDispatchOutcome(r.ProviderOutcome, r.EffectRelation, path),
	)
}

func validateAssessment(a Assessment, path string) error {
	if err := firstErr(
		checkEnum(a.Verification.Valid(), path+".verification"),
		checkEnum(a.Acceptance.Valid(), path+".acceptance"),
		checkEnum(a.ActionMatch.Valid(), path+".action_match"),
		checkEnum(a.Satisfaction.Valid(), path+".satisfaction"),
		checkEnum(a.Authorization.Valid(), path+".authorization"),
	); err != nil {
		return err
	}
	for i, r := range a.Reasons {
		if !r.fromEvidenceChain() {
			return inputErr(CodeInvalidEnum, idx(path+".reasons", i))
		}
	}
	return nil
}

// priorFor finds the held record for op's operation identifier.
func priorFor(op Operation, r Reservation) (PriorOperation, bool) {
	for _, p := range r.PriorOperations {
		if p.OperationID == op.OperationID {
			return p, true
		}
	}
	return PriorOperation{}, false
}

// ValidateCase checks c against the AEB-1 case format: syntax, bounds, uniqueness, and the
// combinations each mode requires. DecodeCase applies it; Evaluate applies it again so a Case
// built in Go gets the same checks.
func ValidateCase(c Case) error {
	if c.Version != CaseVersion {
		return inputErr(CodeInvalidVersion, "$.@version")
	}
	if err := firstErr(
		checkIdentifier(c.ID, "$.id"),
		checkEnum(c.Mode.Valid(), "$.mode"),
		checkTime(c.EvaluatedAt, "$.evaluated_at"),
		validateOperation(c.Operation, "$.operation"),
		validateEvidenceList(c.Evidence, "$.evidence"),
		checkEnum(c.LocalPolicy.Valid(), "$.local_policy"),
		validateReservation(c.Reservation, "$.reservation"),
	); err != nil {
		return err
	}
	if c.Observation != nil {
		if err := validateObservation(*c.Observation, "$.observation"); err != nil {
			return err
		}
	}
	if c.Reconciliation != nil {
		if err := validateReconciliation(*c.Reconciliation, "$.reconciliation"); err != nil {
			return err
		}
	}
	return validateModeCombination(c)
}

// validateModeCombination: each mode carries exactly the inputs it needs. Every post-dispatch
// mode refers to an operation the local atomic store already holds.
func validateModeCombination(c Case) error {
	hasObs, hasRec := c.Observation != nil, c.Reconciliation != nil
	if c.Mode == ModeAdmission {
		if hasObs || hasRec {
			return inputErr(CodeInvalidCombination, "$.mode")
		}
		return nil
	}
	prior, ok := priorFor(c.Operation, c.Reservation)
	if c.Reservation.Atomicity != AtomicityLocalAtomic || !ok {
		return inputErr(CodeInvalidCombination, "$.reservation")
	}
	var valid bool
	switch c.Mode {
	case ModeInvocationObservation:
		valid = hasObs && !hasRec && prior.Custody == CustodyInvoking
	case ModeRetry:
		valid = !hasObs && !hasRec
	case ModeReconciliation:
		valid = !hasObs && hasRec && prior.Custody == CustodyInvoking
	}
	if !valid {
		return inputErr(CodeInvalidCombination, "$.mode")
	}
	return nil
}
