package aeb

// The decision dimensions below are kept separate, as AEB's "Non-Collapsing Decision and Lifecycle
// Vocabulary" and AEB-1 "The decision boundary" require: a signature is not authority, MATCH is not
// SATISFIED, SATISFIED is not AUTHORIZED, AUTHORIZED is not execution. Spellings are those of the
// AEB-1 vectors (aeb-consequence-conformance.v1.json) so results compare byte for byte.

// Verification is the native-verification result (AEB "Verify Each Native Artifact").
type Verification string

const (
	VerificationVerified      Verification = "VERIFIED"
	VerificationFailed        Verification = "FAILED"
	VerificationIndeterminate Verification = "INDETERMINATE"
)

// Valid reports whether v is one of the defined values.
func (v Verification) Valid() bool {
	return oneOf(v, VerificationVerified, VerificationFailed, VerificationIndeterminate)
}

// Acceptance is the relying party's acceptance of verified artifacts under pinned status
// authorities and freshness (AEB "Relying-Party Inputs and Pins"; AEB-1 decision 2).
type Acceptance string

const (
	AcceptanceAccepted      Acceptance = "ACCEPTED"
	AcceptanceRejected      Acceptance = "REJECTED"
	AcceptanceIndeterminate Acceptance = "INDETERMINATE"
)

// Valid reports whether a is one of the defined values.
func (a Acceptance) Valid() bool {
	return oneOf(a, AcceptanceAccepted, AcceptanceRejected, AcceptanceIndeterminate)
}

// ActionMatch is the CAID material-action correlation (AEB "Establish CAID Material-Action MATCH").
type ActionMatch string

const (
	ActionMatchMatch         ActionMatch = "MATCH"
	ActionMatchMismatch      ActionMatch = "MISMATCH"
	ActionMatchIndeterminate ActionMatch = "INDETERMINATE"
)

// Valid reports whether m is one of the defined values.
func (m ActionMatch) Valid() bool {
	return oneOf(m, ActionMatchMatch, ActionMatchMismatch, ActionMatchIndeterminate)
}

// Satisfaction is the AEC requirement result (AEB "Evaluate AEC Evidence Satisfaction").
type Satisfaction string

const (
	SatisfactionSatisfied     Satisfaction = "SATISFIED"
	SatisfactionUnsatisfied   Satisfaction = "UNSATISFIED"
	SatisfactionIndeterminate Satisfaction = "INDETERMINATE"
)

// Valid reports whether s is one of the defined values.
func (s Satisfaction) Valid() bool {
	return oneOf(s, SatisfactionSatisfied, SatisfactionUnsatisfied, SatisfactionIndeterminate)
}

// Authorization is the separate local authorization decision (AEB "Make the Local
// Authorization Decision").
type Authorization string

const (
	AuthorizationAuthorized    Authorization = "AUTHORIZED"
	AuthorizationNotAuthorized Authorization = "NOT_AUTHORIZED"
	AuthorizationIndeterminate Authorization = "INDETERMINATE"
)

// Valid reports whether a is one of the defined values.
func (a Authorization) Valid() bool {
	return oneOf(a, AuthorizationAuthorized, AuthorizationNotAuthorized, AuthorizationIndeterminate)
}

// ReservationOutcome is the result of the atomic consume-or-reserve step (AEB "Atomically
// Consume or Reserve Before Invocation").
type ReservationOutcome string

const (
	// ReservationNotAttempted: the operation never reached AUTHORIZED, so the store was not touched.
	ReservationNotAttempted ReservationOutcome = "NOT_ATTEMPTED"
	// ReservationReserved: the operation and every native replay unit may be fenced now.
	ReservationReserved ReservationOutcome = "RESERVED"
	// ReservationConsumed: the authority was consumed before provider entry (post-dispatch modes).
	ReservationConsumed ReservationOutcome = "CONSUMED"
	// ReservationUnavailable: no local atomic store; refuse before invocation.
	ReservationUnavailable ReservationOutcome = "UNAVAILABLE"
	// ReservationOperationReplay: the operation identifier is already held.
	ReservationOperationReplay ReservationOutcome = "OPERATION_REPLAY"
	// ReservationNativeEvidenceReplay: a native replay unit was already consumed.
	ReservationNativeEvidenceReplay ReservationOutcome = "NATIVE_EVIDENCE_REPLAY"
)

// Valid reports whether r is one of the defined values.
func (r ReservationOutcome) Valid() bool {
	return oneOf(r, ReservationNotAttempted, ReservationReserved, ReservationConsumed,
		ReservationUnavailable, ReservationOperationReplay, ReservationNativeEvidenceReplay)
}

// Custody is the lifecycle custody of the operation (AEB-1 decisions 6 and 7).
type Custody string

const (
	CustodyUnreserved Custody = "UNRESERVED"
	CustodyReserved   Custody = "RESERVED"
	// CustodyInvoking: custody has passed to dispatch; never eligible for blind retry.
	CustodyInvoking Custody = "INVOKING"
	CustodyTerminal Custody = "TERMINAL"
)

// Valid reports whether c is one of the defined values.
func (c Custody) Valid() bool {
	return oneOf(c, CustodyUnreserved, CustodyReserved, CustodyInvoking, CustodyTerminal)
}

// ProviderOutcome is what the provider (effecting system) is known to have done (AEB-1 decision 8).
type ProviderOutcome string

const (
	ProviderNotInvoked         ProviderOutcome = "NOT_INVOKED"
	ProviderCommitted          ProviderOutcome = "COMMITTED"
	ProviderProvenNotCommitted ProviderOutcome = "PROVEN_NOT_COMMITTED"
	ProviderIndeterminate      ProviderOutcome = "INDETERMINATE"
)

// Valid reports whether p is one of the defined values.
func (p ProviderOutcome) Valid() bool {
	return oneOf(p, ProviderNotInvoked, ProviderCommitted, ProviderProvenNotCommitted, ProviderIndeterminate)
}

// EffectRelation relates the observed effect to the requested one (AEB-1 decision 9).
type EffectRelation string

const (
	EffectNotObserved         EffectRelation = "NOT_OBSERVED"
	EffectObservedAsRequested EffectRelation = "OBSERVED_AS_REQUESTED"
	EffectDiverged            EffectRelation = "DIVERGED"
	EffectIndeterminate       EffectRelation = "INDETERMINATE"
)

// Valid reports whether e is one of the defined values.
func (e EffectRelation) Valid() bool {
	return oneOf(e, EffectNotObserved, EffectObservedAsRequested, EffectDiverged, EffectIndeterminate)
}

// RetryDecision says whether this operation may be dispatched again. There is deliberately no
// "ALLOWED": AEB "Perform Authenticated Reconciliation" requires a later attempt to be a new
// action instance that runs the whole lifecycle, never a re-dispatch of this one.
type RetryDecision string

const (
	RetryNotApplicable RetryDecision = "NOT_APPLICABLE"
	RetryRefused       RetryDecision = "REFUSED"
)

// Valid reports whether r is one of the defined values.
func (r RetryDecision) Valid() bool { return oneOf(r, RetryNotApplicable, RetryRefused) }

// ReconciliationDecision is the state of authenticated reconciliation for the operation.
type ReconciliationDecision string

const (
	ReconciliationNotApplicable ReconciliationDecision = "NOT_APPLICABLE"
	ReconciliationNotRequired   ReconciliationDecision = "NOT_REQUIRED"
	ReconciliationRequired      ReconciliationDecision = "REQUIRED"
	ReconciliationRefused       ReconciliationDecision = "REFUSED"
	ReconciliationAccepted      ReconciliationDecision = "ACCEPTED"
)

// Valid reports whether r is one of the defined values.
func (r ReconciliationDecision) Valid() bool {
	return oneOf(r, ReconciliationNotApplicable, ReconciliationNotRequired, ReconciliationRequired,
		ReconciliationRefused, ReconciliationAccepted)
}

// Decision is the overall outcome of one evaluation.
type Decision string

const (
	// DecisionAdmit: reserve and proceed to DISPATCH_PENDING. The only value that permits invocation.
	DecisionAdmit Decision = "ADMIT"
	// DecisionRefuse: withhold (admission) or reject the input (retry, reconciliation).
	DecisionRefuse Decision = "REFUSE"
	// DecisionIndeterminate: not decidable from the evidence; treated as a refusal by every caller.
	DecisionIndeterminate Decision = "INDETERMINATE"
	// DecisionRecorded: an invocation outcome was recorded as terminal.
	DecisionRecorded Decision = "RECORDED"
	// DecisionReconciled: authenticated reconciliation moved INDETERMINATE to a terminal outcome.
	DecisionReconciled Decision = "RECONCILED"
)

// Valid reports whether d is one of the defined values.
func (d Decision) Valid() bool {
	return oneOf(d, DecisionAdmit, DecisionRefuse, DecisionIndeterminate, DecisionRecorded, DecisionReconciled)
}

// Outcome is the spec's effect-outcome classification (AEB "Classify the Effect Outcome"),
// derived from ProviderOutcome: the dispatch journal records these.
type Outcome string

const (
	// OutcomeNotInvoked: nothing was dispatched (AEB-1 NOT_INVOKED).
	OutcomeNotInvoked    Outcome = "NOT_INVOKED"
	OutcomeExecuted      Outcome = "EXECUTED"
	OutcomeFailed        Outcome = "FAILED"
	OutcomeIndeterminate Outcome = "INDETERMINATE"
)

// Outcome maps the provider outcome onto AEB's EXECUTED | FAILED | INDETERMINATE: COMMITTED is
// EXECUTED (even when the effect DIVERGED, which EffectRelation reports separately),
// PROVEN_NOT_COMMITTED is FAILED, anything else that was dispatched is INDETERMINATE. An unknown
// value maps to INDETERMINATE, never to FAILED: a FAILED record can free a retry decision.
func (p ProviderOutcome) Outcome() Outcome {
	switch p {
	case ProviderNotInvoked:
		return OutcomeNotInvoked
	case ProviderCommitted:
		return OutcomeExecuted
	case ProviderProvenNotCommitted:
		return OutcomeFailed
	default:
		return OutcomeIndeterminate
	}
}

// Mode selects which lifecycle step an AEB-1 case exercises.
type Mode string

const (
	ModeAdmission             Mode = "ADMISSION"
	ModeInvocationObservation Mode = "INVOCATION_OBSERVATION"
	ModeRetry                 Mode = "RETRY"
	ModeReconciliation        Mode = "RECONCILIATION"
)

// Valid reports whether m is one of the defined values.
func (m Mode) Valid() bool {
	return oneOf(m, ModeAdmission, ModeInvocationObservation, ModeRetry, ModeReconciliation)
}

// PrincipalKind is the kind of principal an artifact speaks for. AEB "Evaluate AEC Evidence
// Satisfaction": a machine-policy decision must not fill a named-human slot, so kind is matched
// exactly, never inferred.
type PrincipalKind string

const (
	PrincipalHuman        PrincipalKind = "HUMAN"
	PrincipalMachine      PrincipalKind = "MACHINE"
	PrincipalOrganization PrincipalKind = "ORGANIZATION"
	PrincipalSystem       PrincipalKind = "SYSTEM"
)

// Valid reports whether k is one of the defined values.
func (k PrincipalKind) Valid() bool {
	return oneOf(k, PrincipalHuman, PrincipalMachine, PrincipalOrganization, PrincipalSystem)
}

// Role is a relying-party-defined evidence role (an AEC requirement slot). Roles are opaque and
// compared exactly; the constants are the ones actgate itself issues.
type Role string

const (
	// RoleHumanAuthorization is filled by a resolved binding moment (AEB-1 spelling).
	RoleHumanAuthorization Role = "human-authorization"
	// RolePolicyPermit is filled by a ToolPolicy permit (AEB's "policy-permit slot").
	RolePolicyPermit Role = "policy-permit"
)

// StatusVerdict is the relying party's current status check of an artifact or its credential.
type StatusVerdict string

const (
	StatusCurrent     StatusVerdict = "CURRENT"
	StatusRevoked     StatusVerdict = "REVOKED"
	StatusUnavailable StatusVerdict = "UNAVAILABLE"
)

// Valid reports whether s is one of the defined values.
func (s StatusVerdict) Valid() bool { return oneOf(s, StatusCurrent, StatusRevoked, StatusUnavailable) }

// LocalPolicy is the consequence owner's local policy result for this exact action.
type LocalPolicy string

const (
	PolicyPermit LocalPolicy = "PERMIT"
	PolicyDeny   LocalPolicy = "DENY"
)

// Valid reports whether p is one of the defined values.
func (p LocalPolicy) Valid() bool { return oneOf(p, PolicyPermit, PolicyDeny) }

// Atomicity says whether a linearizable local store is available for the reservation.
type Atomicity string

const (
	AtomicityLocalAtomic Atomicity = "local_atomic"
	AtomicityUnavailable Atomicity = "unavailable"
)

// Valid reports whether a is one of the defined values.
func (a Atomicity) Valid() bool { return oneOf(a, AtomicityLocalAtomic, AtomicityUnavailable) }

// ObservationSource says where an invocation observation came from.
type ObservationSource string

const (
	// SourceTimeoutAfterDispatch: dispatch began and no authoritative answer arrived (timeout,
	// connection loss, crash, or a DISPATCH_PENDING record found on restart).
	SourceTimeoutAfterDispatch ObservationSource = "TIMEOUT_AFTER_DISPATCH"
	// SourceProviderEvidence: an authoritative provider response matched to the operation.
	SourceProviderEvidence ObservationSource = "PROVIDER_EVIDENCE"
)

// Valid reports whether s is one of the defined values.
func (s ObservationSource) Valid() bool {
	return oneOf(s, SourceTimeoutAfterDispatch, SourceProviderEvidence)
}

func oneOf[T ~string](v T, allowed ...T) bool {
	for _, a := range allowed {
		if v == a {
			return true
		}
	}
	return false
}
