package aeb

import "time"

// CaseVersion is the only AEB-1 case format DecodeCase accepts.
const CaseVersion = "AEB-CONSEQUENCE-CASE-v1"

// Requirement is one slot of the relying party's AEC requirement (AEB "Evaluate AEC Evidence
// Satisfaction"). It comes from relying-party configuration (for actgate: the ToolPolicy),
// never from presenter-controlled data.
type Requirement struct {
	// role is the evidence role that fills this slot, compared exactly.
	Role Role `json:"role"`
	// principal_kind is the kind of principal the artifact must speak for, compared exactly.
	PrincipalKind PrincipalKind `json:"principal_kind"`
	// minimum is the number of artifacts (or, with distinct_principals, of distinct principals)
	// required; 1..16.
	Minimum int `json:"minimum"`
	// distinct_principals counts principals, not artifacts, toward minimum.
	DistinctPrincipals bool `json:"distinct_principals"`
	// exclude_initiator: the principal that proposed the operation cannot fill the slot.
	ExcludeInitiator bool `json:"exclude_initiator"`
	// exclude_executor: the principal that executes the operation cannot fill the slot.
	ExcludeExecutor bool `json:"exclude_executor"`
}

// Operation is the executor-owned, frozen observed action (AEB "Construct the Observed Material
// Action") together with the requirement pinned for it.
type Operation struct {
	// operation_id is the stable, action-bound operation identifier (idempotency key).
	OperationID string `json:"operation_id"`
	// provider_id identifies the provider environment the action is dispatched to.
	ProviderID string `json:"provider_id"`
	// initiator_id is the principal that proposed the action (for actgate: the agent).
	InitiatorID string `json:"initiator_id"`
	// executor_id is the principal that executes it (for actgate: the sink's workload identity).
	ExecutorID string `json:"executor_id"`
	// caid is the Canonical Action Identifier recomputed by the boundary.
	CAID string `json:"caid"`
	// normalized_action_digest is the digest of the normalized-action projection.
	NormalizedActionDigest string `json:"normalized_action_digest"`
	// requirements is the AEC requirement: 1..16 slots, unique by (role, principal_kind).
	Requirements []Requirement `json:"requirements"`
}

// Status is the relying party's current status and freshness check of one artifact.
type Status struct {
	// verdict is the status result from the pinned status source.
	Verdict StatusVerdict `json:"verdict"`
	// authority_pinned is true only when the status source is one the relying party pinned.
	AuthorityPinned bool `json:"authority_pinned"`
	// checked_at is when the status was checked; after the evaluation time it is unusable.
	CheckedAt time.Time `json:"checked_at"`
	// valid_until is exclusive: at valid_until the artifact is already stale.
	ValidUntil time.Time `json:"valid_until"`
}

// Evidence is one native artifact as reported by its native verifier and adapter. AEB does not
// verify native formats; it consumes the verifier's bounded result (AEB "Verify Each Native
// Artifact").
type Evidence struct {
	// wrapper_digest identifies this presentation of the artifact.
	WrapperDigest string `json:"wrapper_digest"`
	// native_replay_unit is the artifact's one-time replay identity, stable across re-wrapping.
	NativeReplayUnit string `json:"native_replay_unit"`
	// native_verification is the native verifier's result.
	NativeVerification Verification `json:"native_verification"`
	// mapped_caid is the CAID the artifact's protected action maps to under the pinned profile.
	MappedCAID string `json:"mapped_caid"`
	// mapped_action_digest is the artifact's normalized-action digest under the pinned profile.
	MappedActionDigest string `json:"mapped_action_digest"`
	// role is the evidence role the adapter assigns the artifact.
	Role Role `json:"role"`
	// principal_kind is the kind of principal the artifact speaks for.
	PrincipalKind PrincipalKind `json:"principal_kind"`
	// principal_id is the verified principal identity.
	PrincipalID string `json:"principal_id"`
	// status is the current status and freshness check.
	Status Status `json:"status"`
}

// PriorOperation is the durable record of an operation identifier already held by the store.
type PriorOperation struct {
	OperationID            string `json:"operation_id"`
	CAID                   string `json:"caid"`
	NormalizedActionDigest string `json:"normalized_action_digest"`
	// custody is INVOKING or TERMINAL; TERMINAL exactly when the outcome pair is terminal.
	Custody         Custody         `json:"custody"`
	ProviderOutcome ProviderOutcome `json:"provider_outcome"`
	EffectRelation  EffectRelation  `json:"effect_relation"`
}

// Reservation is a snapshot of the durable replay/reservation state the admission is decided
// against. The decision to reserve is pure; the sink then performs the compare-and-swap itself.
type Reservation struct {
	// atomicity is local_atomic only when a linearizable local store answered.
	Atomicity Atomicity `json:"atomicity"`
	// prior_operations are held operation identifiers (at most 64, unique).
	PriorOperations []PriorOperation `json:"prior_operations"`
	// consumed_native_replay_units are native replay units already consumed (at most 128, unique).
	ConsumedNativeReplayUnits []string `json:"consumed_native_replay_units"`
}

// Observation is the classification input after dispatch began.
type Observation struct {
	Source ObservationSource `json:"source"`
	// provider_outcome is COMMITTED, PROVEN_NOT_COMMITTED or INDETERMINATE.
	ProviderOutcome ProviderOutcome `json:"provider_outcome"`
	EffectRelation  EffectRelation  `json:"effect_relation"`
}

// ReconciliationEvidence is a provider or system-of-record observation offered to move an
// INDETERMINATE operation (AEB "Perform Authenticated Reconciliation").
type ReconciliationEvidence struct {
	// authenticated is true only when the provider or system of record was authenticated.
	Authenticated          bool            `json:"authenticated"`
	ProviderID             string          `json:"provider_id"`
	OperationID            string          `json:"operation_id"`
	CAID                   string          `json:"caid"`
	NormalizedActionDigest string          `json:"normalized_action_digest"`
	ProviderOutcome        ProviderOutcome `json:"provider_outcome"`
	EffectRelation         EffectRelation  `json:"effect_relation"`
}

// Freshness bounds when a reconciliation observation may be relied on. The AEB-1 case format
// carries no time for reconciliation evidence, so Evaluate cannot apply it; Reconcile always does.
type Freshness struct {
	// DispatchedAt is when dispatch began (from the DISPATCH_PENDING journal record).
	DispatchedAt time.Time
	// ObservedAt is when the provider made the observation, from its authenticated payload.
	ObservedAt time.Time
	// ValidUntil (exclusive) ends the relying party's acceptance window for the observation.
	ValidUntil time.Time
}

// Case is one AEB-1 input case (AEB-CONSEQUENCE-CASE-v1). Decode it with DecodeCase (or
// json.Unmarshal, which calls the same strict decoder).
type Case struct {
	Version        string                  `json:"@version"`
	ID             string                  `json:"id"`
	Mode           Mode                    `json:"mode"`
	EvaluatedAt    time.Time               `json:"evaluated_at"`
	Operation      Operation               `json:"operation"`
	Evidence       []Evidence              `json:"evidence"`
	LocalPolicy    LocalPolicy             `json:"local_policy"`
	Reservation    Reservation             `json:"reservation"`
	Observation    *Observation            `json:"observation"`
	Reconciliation *ReconciliationEvidence `json:"reconciliation"`
}

// Assessment is the evidence half of a result: the decisions that depend only on the operation,
// the presented evidence, local policy and the evaluation time.
type Assessment struct {
	Verification  Verification
	Acceptance    Acceptance
	ActionMatch   ActionMatch
	Satisfaction  Satisfaction
	Authorization Authorization
	// Reasons found by the evidence chain, as a sorted set.
	Reasons []Reason
}

// Result carries every separate decision of one evaluation, in the AEB-1 result shape.
type Result struct {
	Verification    Verification           `json:"verification"`
	Acceptance      Acceptance             `json:"acceptance"`
	ActionMatch     ActionMatch            `json:"action_match"`
	Satisfaction    Satisfaction           `json:"satisfaction"`
	Authorization   Authorization          `json:"authorization"`
	Reservation     ReservationOutcome     `json:"reservation"`
	Custody         Custody                `json:"custody"`
	ProviderOutcome ProviderOutcome        `json:"provider_outcome"`
	EffectRelation  EffectRelation         `json:"effect_relation"`
	Retry           RetryDecision          `json:"retry"`
	Reconciliation  ReconciliationDecision `json:"reconciliation"`
	Decision        Decision               `json:"decision"`
	// reasons is a set in ascending byte order; empty (never null) on ADMIT.
	Reasons []Reason `json:"reasons"`
}

// Assessment returns the evidence half of r, for the post-dispatch steps.
func (r Result) Assessment() Assessment {
	return Assessment{
		Verification:  r.Verification,
		Acceptance:    r.Acceptance,
		ActionMatch:   r.ActionMatch,
		Satisfaction:  r.Satisfaction,
		Authorization: r.Authorization,
		Reasons:       assessmentReasons(r.Reasons),
	}
}

// Outcome is the AEB effect-outcome classification of r (see ProviderOutcome.Outcome).
func (r Result) Outcome() Outcome { return r.ProviderOutcome.Outcome() }

// Admitted reports whether r permits invocation. It is the only question a caller may ask
// before dispatch; every other decision is a refusal.
func (r Result) Admitted() bool { return r.Decision == DecisionAdmit }
