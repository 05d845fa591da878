package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ActDecision is the authority service's decision on an act.
// +kubebuilder:validation:Enum=Allowed;Denied;Escalated;AuditDenied
type ActDecision string

const (
	// ActDecisionAllowed: authority was issued for the exact call.
	ActDecisionAllowed ActDecision = "Allowed"
	// ActDecisionDenied: no authority; the upstream is never contacted (status.code says why).
	ActDecisionDenied ActDecision = "Denied"
	// ActDecisionEscalated: the call needs human authorization; status.bindingMomentRefs name the
	// binding moments sent to principals. Nothing is invoked until they are resolved.
	ActDecisionEscalated ActDecision = "Escalated"
	// ActDecisionAuditDenied: the policy is in mode Audit and would have denied the call (code says
	// why); the call went through unenforced. This is an observation, not enforcement.
	ActDecisionAuditDenied ActDecision = "AuditDenied"
)

// ActState is the act's place in the Action Evidence Boundary lifecycle
// (action-evidence-boundary, "Non-Collapsing Decision and Lifecycle Vocabulary"), in its wire
// spelling:
//
//	VERIFIED → MATCH → SATISFIED → AUTHORIZED → CONSUMED | RESERVED → DISPATCH_PENDING → INVOKED
//	  → EXECUTED | FAILED | INDETERMINATE → (authenticated reconciliation) EXECUTED | FAILED
//
// plus EXPIRED, a local label for authority issued (AUTHORIZED) but never consumed before its
// expiry: nothing was invoked and the authority is dead. A denied act keeps the last state it
// reached. The CRD forbids moving backwards, leaving a terminal state, and leaving INDETERMINATE
// except to EXECUTED or FAILED with reconciliation evidence.
// +kubebuilder:validation:Enum=VERIFIED;MATCH;SATISFIED;AUTHORIZED;CONSUMED;RESERVED;DISPATCH_PENDING;INVOKED;EXECUTED;FAILED;INDETERMINATE;EXPIRED
type ActState string

const (
	// ActStateVerified: the presented artifacts passed their native verifiers.
	ActStateVerified ActState = "VERIFIED"
	// ActStateMatch: the verified artifacts denote this exact material action.
	ActStateMatch ActState = "MATCH"
	// ActStateSatisfied: verified, matched evidence fills every slot of the rule's requirement.
	ActStateSatisfied ActState = "SATISFIED"
	// ActStateAuthorized: local policy permits this exact action now; authority was issued.
	ActStateAuthorized ActState = "AUTHORIZED"
	// ActStateConsumed: the single-use authority was durably made unavailable (the Lease CAS).
	ActStateConsumed ActState = "CONSUMED"
	// ActStateReserved: bounded state (a budget) was durably fenced for this operation.
	ActStateReserved ActState = "RESERVED"
	// ActStateDispatchPending: the durable intent record exists; dispatch may have begun. A
	// stranded DISPATCH_PENDING is promoted to INDETERMINATE on recovery, never released.
	ActStateDispatchPending ActState = "DISPATCH_PENDING"
	// ActStateInvoked: the frozen action was dispatched with status.operationID.
	ActStateInvoked ActState = "INVOKED"
	// ActStateExecuted: authoritative evidence says the exact effect occurred.
	ActStateExecuted ActState = "EXECUTED"
	// ActStateFailed: authoritative evidence says the effect did not occur. A timeout or a local
	// error alone is not such evidence.
	ActStateFailed ActState = "FAILED"
	// ActStateIndeterminate: invocation began and nothing authoritative says what happened. The
	// act stays here until authenticated reconciliation; it is never retried blindly.
	ActStateIndeterminate ActState = "INDETERMINATE"
	// ActStateExpired: authority was issued but expired unconsumed; nothing was invoked.
	ActStateExpired ActState = "EXPIRED"
)

// ReconciliationResult is what one authenticated reconciliation attempt observed.
// +kubebuilder:validation:Enum=Executed;Failed;NoEvidence;Unauthenticated;Mismatch;Conflicting;Unreachable
type ReconciliationResult string

const (
	// ReconciliationExecuted: the provider authenticated and reported the exact effect occurred.
	ReconciliationExecuted ReconciliationResult = "Executed"
	// ReconciliationFailed: the provider authenticated and reported the effect did not occur.
	ReconciliationFailed ReconciliationResult = "Failed"
	// ReconciliationNoEvidence: the provider has no (or only stale) record of the operation.
	ReconciliationNoEvidence ReconciliationResult = "NoEvidence"
	// ReconciliationUnauthenticated: the answer could not be authenticated.
	ReconciliationUnauthenticated ReconciliationResult = "Unauthenticated"
	// ReconciliationMismatch: the answer names another action, operation or environment.
	ReconciliationMismatch ReconciliationResult = "Mismatch"
	// ReconciliationConflicting: authoritative sources disagree.
	ReconciliationConflicting ReconciliationResult = "Conflicting"
	// ReconciliationUnreachable: the endpoint could not be reached.
	ReconciliationUnreachable ReconciliationResult = "Unreachable"
)

// Act condition types and reasons.
const (
	// ActSettledCondition is True once the act can change no more: denied, expired, executed or
	// failed. It is False while the act is in flight or INDETERMINATE.
	ActSettledCondition = "Settled"

	// ActDeniedReason (Settled=True): no authority was issued.
	ActDeniedReason = "Denied"
	// ActExecutedReason (Settled=True): the effect occurred.
	ActExecutedReason = "Executed"
	// ActFailedReason (Settled=True): the effect did not occur.
	ActFailedReason = "Failed"
	// ActExpiredReason (Settled=True): authority expired unconsumed.
	ActExpiredReason = "Expired"
	// ActInProgressReason (Settled=False): between decision and outcome.
	ActInProgressReason = "InProgress"
	// ActAwaitingPrincipalReason (Settled=False): escalated; waiting for the binding moment.
	ActAwaitingPrincipalReason = "AwaitingPrincipal"
	// ActIndeterminateReason (Settled=False): the outcome is unknown until reconciliation.
	ActIndeterminateReason = "Indeterminate"

	// ActDispatcherGoneCondition is True once the Act controller moved a consumed act to
	// INDETERMINATE because the pod whose sidecar dispatched it is gone without reporting an
	// outcome (action-evidence-boundary, "Classify the Effect Outcome": the outcome cannot be
	// known, so the act is held until authenticated reconciliation). Its message names the pod.
	ActDispatcherGoneCondition = "DispatcherGone"
	// ActPodDeletedReason (DispatcherGone=True): the pod no longer exists (or a pod of its name
	// has another UID).
	ActPodDeletedReason = "PodDeleted"
	// ActPodTerminatedReason (DispatcherGone=True): the pod is Succeeded or Failed: no container
	// of it runs to report the outcome.
	ActPodTerminatedReason = "PodTerminated"
)

// Metadata the authority service writes on an Act it records for an injected pod's sidecar:
// the pod that made the call, which is the pod whose sidecar consumes the act's authority and
// dispatches it. The Act controller reads them to find a dispatch cut off by the pod's end.
const (
	// LabelActPodUID holds the calling pod's UID.
	LabelActPodUID = "actgate.io/pod-uid"
	// AnnotationActPod holds the calling pod's name (in the Act's namespace).
	AnnotationActPod = "actgate.io/pod"
)

// Metadata the authority service writes on the Act of a pod's machine Permit when it creates
// it: the authority it issued and the operation that consumed it. The Act's create is the
// compare-and-swap of that consumption (one Act per act id in a namespace, and only the
// authority service may write Acts' metadata), so no Lease is stored for it. The Act controller
// reads them to hold a cut-off dispatch INDETERMINATE; the service reads them to authenticate
// the outcome Report and to answer a retried Permit of the same operation.
const (
	// AnnotationActPermitAuthority holds the authority ID.
	AnnotationActPermitAuthority = "actgate.io/permit-authority"
	// AnnotationActPermitOperation holds the operation ID the authority was consumed by.
	AnnotationActPermitOperation = "actgate.io/permit-operation"
	// AnnotationActPermitConsumedAt holds when, RFC 3339 in UTC.
	AnnotationActPermitConsumedAt = "actgate.io/permit-consumed-at"
	// AnnotationActPermitPayload holds the authority's canonical signed payload
	// (authority.Authority.Payload) and AnnotationActPermitSignature its signature, standard
	// base64: the signed authority itself, which the service's key verifies.
	AnnotationActPermitPayload   = "actgate.io/permit-payload"
	AnnotationActPermitSignature = "actgate.io/permit-signature"
)

// ActSpec is the frozen observed action (action-evidence-boundary, "Construct the Observed
// Material Action"): identities and digests only, never the raw arguments (docs/architecture.md
// "Privacy"). It is immutable once created.
type ActSpec struct {
	// actID is the AgentCandidateAct `candidate_act_id` (tool-use-binding §10).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	ActID string `json:"actID,omitempty"`

	// sessionID is the agent session the call belongs to, when the runtime reports one.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	SessionID string `json:"sessionID,omitempty"`

	// agent is the identity that initiated the call, as a Kubernetes user name (for an injected
	// pod its service account, system:serviceaccount:<namespace>:<name>).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Agent string `json:"agent,omitempty"`

	// tool is the tool name as called (MCP `tools/call` name, Anthropic `tool_use.name`, OpenAI
	// function name).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Tool string `json:"tool,omitempty"`

	// server is the name of the ToolPolicy server (spec.servers[].name) the call was addressed to.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Server string `json:"server,omitempty"`

	// destination is the destination identity bound into the authority: the origin of the
	// server's url (scheme://host[:port]) or another destination the rule allows.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Destination string `json:"destination,omitempty"`

	// consequenceClass is the class the policy assigned before enforcement (tool-use-binding §20).
	// +required
	ConsequenceClass ConsequenceClass `json:"consequenceClass,omitempty"`

	// argumentsDigest is the digest of the JCS-canonical arguments (AgentCandidateAct
	// `arguments_digest`).
	// +required
	ArgumentsDigest Digest `json:"argumentsDigest,omitempty"`

	// actionDigest is the digest of the action material {"tool": <name>, "args": <arguments>}
	// (docs/architecture.md "The action an option authorises"), the value a binding-moment option
	// carries.
	// +required
	ActionDigest Digest `json:"actionDigest,omitempty"`

	// policyRef names the ToolPolicy whose rule governed the call.
	// +required
	PolicyRef LocalObjectReference `json:"policyRef,omitzero"`

	// rule is the name of the governing rule; empty when no rule matched (the call was denied).
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Rule string `json:"rule,omitempty"`

	// sinkID is the finality sink the authority is bound to.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	SinkID string `json:"sinkID,omitempty"`

	// policyEpoch is the ToolPolicy status.policyEpoch the decision was made under.
	// +required
	// +kubebuilder:validation:Minimum=1
	PolicyEpoch int64 `json:"policyEpoch,omitempty"`
}

// ActReconciliation records authenticated reconciliation of an INDETERMINATE act.
type ActReconciliation struct {
	// attempts is how many reconciliation queries were made.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Attempts int32 `json:"attempts,omitempty"`

	// lastAttemptTime is when the last query was made.
	// +optional
	LastAttemptTime *metav1.Time `json:"lastAttemptTime,omitempty"`

	// lastResult is what the last query observed.
	// +optional
	LastResult ReconciliationResult `json:"lastResult,omitempty"`

	// evidenceDigest is the digest of the authenticated provider answer that settled the act.
	// It is required to move the act out of INDETERMINATE.
	// +optional
	EvidenceDigest Digest `json:"evidenceDigest,omitempty"`
}

// ActMomentResolution is one resolved BindingMoment of an act, as the moment's status records it.
type ActMomentResolution struct {
	// name is the BindingMoment's name (one of status.bindingMomentRefs).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// kind is the resolution's kind (envelope-04 §7.3).
	// +optional
	Kind ResolutionKind `json:"kind,omitempty"`

	// resolvedBy is the moment's status.resolvedBy: its principal.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ResolvedBy string `json:"resolvedBy,omitempty"`

	// resolvedAt is the moment's status.resolvedAt.
	// +optional
	ResolvedAt *metav1.Time `json:"resolvedAt,omitempty"`

	// resolvedVia is the moment's status.resolvedVia.
	// +optional
	ResolvedVia *ResolutionVia `json:"resolvedVia,omitempty"`
}

// ActStatus is the act's decision and lifecycle, written by the authority service, the sink's
// reporter and the Act controller.
//
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.state) || (has(self.state) && {'VERIFIED': 1, 'MATCH': 2, 'SATISFIED': 3, 'AUTHORIZED': 4, 'CONSUMED': 5, 'RESERVED': 5, 'DISPATCH_PENDING': 6, 'INVOKED': 7, 'INDETERMINATE': 8, 'EXECUTED': 9, 'FAILED': 9, 'EXPIRED': 9}[self.state] >= {'VERIFIED': 1, 'MATCH': 2, 'SATISFIED': 3, 'AUTHORIZED': 4, 'CONSUMED': 5, 'RESERVED': 5, 'DISPATCH_PENDING': 6, 'INVOKED': 7, 'INDETERMINATE': 8, 'EXECUTED': 9, 'FAILED': 9, 'EXPIRED': 9}[oldSelf.state])",message="state cannot move backwards in the lifecycle"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.state) || !(oldSelf.state in ['EXECUTED', 'FAILED', 'EXPIRED']) || (has(self.state) && self.state == oldSelf.state)",message="a terminal state (EXECUTED, FAILED, EXPIRED) is final"
// +kubebuilder:validation:XValidation:rule="!has(self.state) || self.state != 'EXPIRED' || !has(oldSelf.state) || oldSelf.state in ['VERIFIED', 'MATCH', 'SATISFIED', 'AUTHORIZED', 'EXPIRED']",message="only unconsumed authority can expire; after CONSUMED an act ends EXECUTED, FAILED or INDETERMINATE"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.state) || oldSelf.state != 'INDETERMINATE' || (has(self.state) && self.state == 'INDETERMINATE') || (has(self.reconciliation) && has(self.reconciliation.evidenceDigest))",message="an INDETERMINATE act leaves that state only through authenticated reconciliation (status.reconciliation.evidenceDigest)"
type ActStatus struct {
	// decision is the authority service's decision.
	// +optional
	Decision ActDecision `json:"decision,omitempty"`

	// code is the EF code of a denial, escalation or audit denial (tool-use-binding §23), e.g.
	// EF_SCOPE_MISMATCH.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^EF[_-][A-Z0-9_-]+$`
	Code string `json:"code,omitempty"`

	// message explains the decision for a human reader; it never carries raw arguments.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`

	// authorityRef names the Lease holding the single-use authority issued for the act.
	// +optional
	AuthorityRef *LocalObjectReference `json:"authorityRef,omitempty"`

	// bindingMomentRefs name the BindingMoments sent to principals when the act was escalated,
	// one per principal asked (a rule may need minPrincipals > 1 distinct resolutions).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	BindingMomentRefs []LocalObjectReference `json:"bindingMomentRefs,omitempty"`

	// momentResolutions record each resolved BindingMoment of bindingMomentRefs: who resolved
	// it, when, how and through which surface. The BindingMoment controller copies them from
	// the moments' status (docs/security.md "Resolution audit").
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	MomentResolutions []ActMomentResolution `json:"momentResolutions,omitempty"`

	// state is the act's lifecycle state (see ActState).
	// +optional
	State ActState `json:"state,omitempty"`

	// operationID is the stable, action-bound operation identifier (idempotency key) used at
	// dispatch and in reconciliation.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	OperationID string `json:"operationID,omitempty"`

	// receiptDigest is the digest of the signed outcome receipt.
	// +optional
	ReceiptDigest Digest `json:"receiptDigest,omitempty"`

	// reconciliation records authenticated reconciliation of an INDETERMINATE outcome.
	// +optional
	Reconciliation *ActReconciliation `json:"reconciliation,omitempty"`

	// conditions hold Settled (see the Act*Condition and *Reason constants).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Act is the ledger entry of one candidate act that reached the authority service. `kubectl get
// acts` reads as the ledger: tool, class, decision, outcome (the Settled condition's reason:
// Denied, AwaitingPrincipal, InProgress, Executed, Failed, Expired, Indeterminate) and EF code;
// `-o wide` adds the lifecycle state the act reached. A Denied or Escalated act keeps the last
// state it reached, usually MATCH: its call matched a rule and no authority was issued
// (docs/api.md "Reading kubectl get acts").
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=act,categories=actgate
// +kubebuilder:printcolumn:name="Tool",type=string,JSONPath=`.spec.tool`
// +kubebuilder:printcolumn:name="Class",type=string,JSONPath=`.spec.consequenceClass`
// +kubebuilder:printcolumn:name="Decision",type=string,JSONPath=`.status.decision`
// +kubebuilder:printcolumn:name="Outcome",type=string,JSONPath=`.status.conditions[?(@.type=="Settled")].reason`,description="Denied, AwaitingPrincipal, InProgress, Executed, Failed, Expired or Indeterminate (the Settled condition's reason)"
// +kubebuilder:printcolumn:name="Code",type=string,JSONPath=`.status.code`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Reached",type=string,JSONPath=`.status.state`,priority=1,description="The last lifecycle state the act reached; a Denied or Escalated act stops at MATCH (matched a rule, no authority issued)"
// +kubebuilder:printcolumn:name="Server",type=string,JSONPath=`.spec.server`,priority=1
// +kubebuilder:printcolumn:name="Agent",type=string,JSONPath=`.spec.agent`,priority=1
// +kubebuilder:printcolumn:name="Action",type=string,JSONPath=`.spec.actionDigest`,priority=1
type Act struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the frozen observed action; it cannot change after creation.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="Act spec is immutable"
	Spec ActSpec `json:"spec"`

	// status is the decision and lifecycle.
	// +optional
	Status ActStatus `json:"status,omitempty,omitzero"`
}

// ActList is a list of Act.
//
// +kubebuilder:object:root=true
type ActList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Act `json:"items"`
}
