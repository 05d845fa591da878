package review

import (
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/ef"
)

// The group, version and kind of the review object.
const (
	GroupName  = "review.actgate.io"
	Version    = "v1alpha1"
	APIVersion = GroupName + "/" + Version
	Kind       = "ActReview"
)

// Path is where the authority service serves reviews.
const Path = "/v1alpha1/actreviews"

// ActReview is the review object: a request from a sidecar, or the service's response to it.
type ActReview struct {
	metav1.TypeMeta `json:",inline"`
	// request is set by the sidecar.
	Request *Request `json:"request,omitempty"`
	// response is set by the service.
	Response *Response `json:"response,omitempty"`
}

// Operation is what a review asks for.
type Operation string

// Operations.
const (
	// OperationReview asks for a decision on a candidate act: policy, evidence requirement and,
	// when allowed under authority, issuance of a signed single-use authority.
	OperationReview Operation = "Review"
	// OperationConsume consumes an issued authority, right before the sidecar invokes.
	OperationConsume Operation = "Consume"
	// OperationReport records the outcome of a consumed dispatch on its Act (EXECUTED, FAILED or
	// INDETERMINATE), after the sidecar journaled it. Sidecars have no RBAC on Acts; this is
	// how the ledger learns what happened.
	OperationReport Operation = "Report"
	// OperationPermit is the protected path of a pod in one request: the service re-evaluates
	// policy for the act (it never issues what the ToolPolicy would not), creates the Act
	// carrying the authority consumed by the operation the sidecar names (the Act's create is
	// the compare-and-swap; no Lease is stored), and returns the signed authority for the
	// sidecar to verify and journal before it invokes.
	OperationPermit Operation = "Permit"
	// OperationRefusal records a call the sidecar refused by its own policy (a Deny), so that
	// the ledger shows refusals: the service records the Act, Denied with the sidecar's code.
	// It authorises nothing; the sidecar sends it off the call path and never waits for it.
	OperationRefusal Operation = "Refusal"
	// OperationPropose registers an agent-authored binding moment (the virtual
	// request_binding_moment tool in a pod): the service checks every option's action digest
	// against its call and every call against its policy, and creates one BindingMoment per
	// eligible principal, as for a gate-authored escalation.
	OperationPropose Operation = "Propose"
)

// Request is what the sidecar asks.
type Request struct {
	// uid identifies the review; the response echoes it. 1–128 characters.
	UID types.UID `json:"uid"`
	// operation is Review, Consume or Report.
	Operation Operation `json:"operation"`
	// server is the ToolPolicy spec.servers[].name the call is addressed to. Review only.
	Server string `json:"server,omitempty"`
	// act is the AgentCandidateAct (tool-use-binding §10, §17) the sidecar built for the call.
	// Review only.
	Act json.RawMessage `json:"act,omitempty"`
	// arguments is the arguments object the sidecar will send upstream if allowed. The service
	// recomputes the act's digest from it and evaluates the policy's argument constraints over
	// it; it is never stored or logged. Review only.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// consume says which authority to consume and for what. Consume only.
	Consume *ConsumeRequest `json:"consume,omitempty"`
	// report says which dispatch ended how. Report only.
	Report *ReportRequest `json:"report,omitempty"`
	// permit names the dispatch a Permit's authority is spent on: required for Permit (with
	// server, act and arguments, as for a Review). A Review may carry it too: when principals
	// granted exactly the call, the grant is consumed by that operation in the same request
	// (the response carries consumed, and no Consume follows); any other answer is the
	// Review's.
	Permit *PermitRequest `json:"permit,omitempty"`
	// refusal says how the sidecar refused the call. Refusal only (with server, act and
	// arguments, as for a Review).
	Refusal *RefusalRequest `json:"refusal,omitempty"`
	// proposal is the agent-authored moment. Propose only.
	Proposal *ProposalRequest `json:"proposal,omitempty"`
}

// ProposalRequest is the body of a Propose review: the envelope the sidecar built from the
// agent's proposal and the call behind each option, in order.
type ProposalRequest struct {
	// session is the agent's session the moment belongs to (1–256 characters).
	Session string `json:"session"`
	// sinkID is the sidecar's sink id (the policy's spec.sink.id when it names one).
	SinkID string `json:"sinkID"`
	// envelope is the binding_moment envelope, its RFC 8785 canonical bytes as a string.
	Envelope string `json:"envelope"`
	// calls are the options' calls: server, tool and the arguments object.
	Calls []ProposalCall `json:"calls"`
}

// ProposalCall is the call one option of a proposed moment authorises.
type ProposalCall struct {
	Server    string          `json:"server"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
}

// RefusalRequest is the body of a Refusal review beside its act and arguments.
type RefusalRequest struct {
	// code is the EF code the agent was given.
	Code ef.EFCode `json:"code"`
	// message is what the agent was told (no argument values), at most 1024 characters.
	Message string `json:"message,omitempty"`
}

// PermitRequest is the body of a Permit review beside its act and arguments.
type PermitRequest struct {
	// operationID is the dispatch the authority is consumed by: the idempotency key the sidecar
	// forwards, recorded on the Act (v1alpha1.AnnotationActPermitOperation). A retried Permit
	// of the same operation gets the same authority again; another operation is refused.
	OperationID string `json:"operationID"`
}

// ReportRequest is the body of a Report review: the outcome the sidecar journaled for the
// dispatch that consumed an authority. It carries digests only, never a result.
type ReportRequest struct {
	// actID is the act's candidate_act_id. Optional: with it the service finds the Act by name
	// and authenticates the report by the Act's permit record; without it, or for an act that
	// has none (an escalated act), by the authority's Lease.
	ActID string `json:"actID,omitempty"`
	// authorityID is the consumed authority's ID.
	AuthorityID string `json:"authorityID"`
	// operationID is the dispatch the authority was consumed for.
	OperationID string `json:"operationID"`
	// state is EXECUTED, FAILED or INDETERMINATE (ReportStates).
	State v1alpha1.ActState `json:"state"`
	// evidenceDigest is sha256:<64 lowercase hex> over the outcome evidence the sidecar
	// journaled. Required for EXECUTED and FAILED, optional for INDETERMINATE.
	EvidenceDigest string `json:"evidenceDigest,omitempty"`
}

// ReportStates are the states a Report may record: the outcome states of
// action-evidence-boundary "Classify the Effect Outcome".
var ReportStates = []v1alpha1.ActState{v1alpha1.ActStateExecuted, v1alpha1.ActStateFailed, v1alpha1.ActStateIndeterminate}

// ConsumeRequest is the body of a Consume review.
type ConsumeRequest struct {
	// authorityID is the authority's ID (its Lease name).
	AuthorityID string `json:"authorityID"`
	// operationID is the dispatch the authority is spent on: the idempotency key the sidecar
	// forwards, recorded as the Lease's holderIdentity.
	OperationID string `json:"operationID"`
	// binding is what the sidecar expects the authority to be bound to, built from the live call
	// and its own configuration (tool-use-binding §16). The namespace is the caller's.
	Binding Binding `json:"binding"`
}

// Binding is authority.Binding without the namespace, in the review's spelling.
type Binding struct {
	ActID           string `json:"actID"`
	ArgumentsDigest string `json:"argumentsDigest"`
	ActionDigest    string `json:"actionDigest"`
	Tool            string `json:"tool"`
	Destination     string `json:"destination"`
	SinkID          string `json:"sinkID"`
	PolicyEpoch     string `json:"policyEpoch"`
}

// BindingOf returns the review spelling of b (without its namespace).
func BindingOf(b authority.Binding) Binding {
	return Binding{
		ActID: b.ActID, ArgumentsDigest: b.ArgumentsDigest, ActionDigest: b.ActionDigest, Tool: b.Tool,
		Destination: b.Destination, SinkID: b.SinkID, PolicyEpoch: b.PolicyEpoch,
	}
}

// In returns the authority binding of b in namespace.
func (b Binding) In(namespace string) authority.Binding {
	return authority.Binding{
		ActID: b.ActID, ArgumentsDigest: b.ArgumentsDigest, ActionDigest: b.ActionDigest, Tool: b.Tool,
		Destination: b.Destination, SinkID: b.SinkID, PolicyEpoch: b.PolicyEpoch, Namespace: namespace,
	}
}

// Reason says, in one stable word, what decided a response. Code says what the agent is told.
type Reason string

// Reasons.
const (
	// ReasonPolicy: the governing ToolPolicy decided (allow, permit, deny or escalate).
	ReasonPolicy Reason = "Policy"
	// ReasonBindingMoment: a binding moment decided: pending, resolved with an option (the
	// authority is issued), declined, questioned, answered or expired.
	ReasonBindingMoment Reason = "BindingMoment"
	// ReasonAuthority: the authority store decided (issue or consume).
	ReasonAuthority Reason = "Authority"
	// ReasonUnauthenticated: no bearer token, or the TokenReview did not authenticate it for the
	// service's audience. HTTP 401.
	ReasonUnauthenticated Reason = "Unauthenticated"
	// ReasonUnboundToken: the token authenticated but is not bound to a pod (its user info
	// lacks the pod name and UID a TokenRequest with a Pod boundObjectRef carries). HTTP 401.
	ReasonUnboundToken Reason = "UnboundToken"
	// ReasonPodNotFound: the token authenticated but names no pod the service can find (or the
	// pod is not the token's). HTTP 403.
	ReasonPodNotFound Reason = "PodNotFound"
	// ReasonNotGoverned: no ToolPolicy selects the caller's pod. HTTP 403.
	ReasonNotGoverned Reason = "NotGoverned"
	// ReasonAmbiguousPolicy: more than one ToolPolicy selects the caller's pod; none is applied.
	// HTTP 403.
	ReasonAmbiguousPolicy Reason = "AmbiguousPolicy"
	// ReasonPolicyNotReady: the governing ToolPolicy is not accepted at its current generation
	// (or has no policy epoch yet), or does not compile. HTTP 200 with a deny.
	ReasonPolicyNotReady Reason = "PolicyNotReady"
	// ReasonBadRequest: the review is malformed. HTTP 400.
	ReasonBadRequest Reason = "BadRequest"
	// ReasonTimeout: the review did not finish in time (the API server is slow or unreachable).
	// Code is EF_060.
	ReasonTimeout Reason = "Timeout"
	// ReasonUnavailable: the API server or the authority store failed. Code is
	// EF_STORE_UNAVAILABLE.
	ReasonUnavailable Reason = "Unavailable"
)

// EscalationState is where a human decision stands.
type EscalationState string

// Escalation states.
const (
	// EscalationPending: the binding moments await their principals.
	EscalationPending EscalationState = "Pending"
	// EscalationGranted: principals selected the option for exactly this call; the response
	// carries the authority.
	EscalationGranted EscalationState = "Granted"
	// EscalationDeclined: a principal declined; the action is refused in this session
	// (EF_MOMENT_DECLINED).
	EscalationDeclined EscalationState = "Declined"
	// EscalationReopened: a principal answered with a question; deliberation is reopened for the
	// agent (envelope-04 §7.3), and the same action is not escalated again in this session.
	EscalationReopened EscalationState = "Reopened"
	// EscalationAnswered: a principal answered in free text; the answer is returned to the agent
	// and the action is not authorised.
	EscalationAnswered EscalationState = "Answered"
	// EscalationExpired: the binding moment expired unresolved; the act is denied.
	EscalationExpired EscalationState = "Expired"
)

// Response is the service's answer.
type Response struct {
	// uid is the request's uid.
	UID types.UID `json:"uid"`
	// allowed is true when the sidecar may invoke: directly (no authority), or after consuming
	// authority. For a Report it is true when the outcome is recorded on the Act. It is false on
	// every deny, escalation and error.
	Allowed bool `json:"allowed"`
	// decision is the Act's decision: Allowed, Denied, Escalated or AuditDenied.
	Decision v1alpha1.ActDecision `json:"decision,omitempty"`
	// code is the EF code the agent is given on a deny or escalation (and, for AuditDenied,
	// what enforcement would have returned).
	Code ef.EFCode `json:"code,omitempty"`
	// reason says what decided.
	Reason Reason `json:"reason,omitempty"`
	// message is safe to show the agent: no argument values, no other users' data.
	Message string `json:"message,omitempty"`
	// retryable is true only for EF_060 (a bounded retry of the review).
	Retryable bool `json:"retryable,omitempty"`
	// act is the name of the Act object the service recorded for the call.
	Act string `json:"act,omitempty"`
	// consequenceClass is the class the policy assigned.
	ConsequenceClass v1alpha1.ConsequenceClass `json:"consequenceClass,omitempty"`
	// authority is the signed single-use authority to verify at the sink and then consume.
	// Set when allowed under authority.
	Authority *SignedAuthority `json:"authority,omitempty"`
	// escalation describes the human decision the call waits for or got.
	Escalation *Escalation `json:"escalation,omitempty"`
	// consumed confirms a Consume.
	Consumed *Consumed `json:"consumed,omitempty"`
	// reported confirms a Report.
	Reported *Reported `json:"reported,omitempty"`
}

// SignedAuthority is an authority as the sink receives it: the exact signed payload and the
// signature, which the sink verifies with the authority service's public key before consuming
// (docs/architecture.md "In a pod").
type SignedAuthority struct {
	// id is the authority ID, the name of its Lease.
	ID string `json:"id"`
	// payload is the canonical payload (authority.Authority.Payload) the signature covers.
	Payload []byte `json:"payload"`
	// signature is over payload.
	Signature []byte `json:"signature"`
	// expiresAt repeats the signed expiry for readers.
	ExpiresAt time.Time `json:"expiresAt"`
}

// Signed wraps a signed authority for the wire.
func Signed(a authority.Authority) (*SignedAuthority, error) {
	p, err := a.Payload()
	if err != nil {
		return nil, err
	}
	return &SignedAuthority{ID: a.ID, Payload: p, Signature: append([]byte(nil), a.Signature...), ExpiresAt: a.ExpiresAt.UTC()}, nil
}

// Authority parses the payload (authority.ParsePayload accepts only the exact canonical bytes)
// and attaches the signature. It does not verify: that is the sink's authority.Verifier.Verify.
func (s *SignedAuthority) Authority() (authority.Authority, error) {
	if s == nil {
		return authority.Authority{}, fmt.Errorf("%w: no authority in the response", authority.ErrInvalid)
	}
	a, err := authority.ParsePayload(s.Payload)
	if err != nil {
		return authority.Authority{}, err
	}
	if a.ID != s.ID {
		return authority.Authority{}, fmt.Errorf("%w: response names authority %q, payload %q", authority.ErrInvalid, s.ID, a.ID)
	}
	a.Signature = append([]byte(nil), s.Signature...)
	return a, nil
}

// Escalation is the human decision a call needs or got.
type Escalation struct {
	// state is Pending, Granted, Declined, Reopened, Answered or Expired.
	State EscalationState `json:"state"`
	// bindingMoments are the BindingMoment objects (one per principal asked) in the caller's
	// namespace.
	BindingMoments []string `json:"bindingMoments,omitempty"`
	// envelope is the binding_moment envelope exactly as emitted: its RFC 8785 canonical bytes
	// as a string (as in BindingMoment spec.envelope).
	Envelope string `json:"envelope,omitempty"`
	// envelopeDigest is sha256 over envelope (envelope-04 §6.2).
	EnvelopeDigest string `json:"envelopeDigest,omitempty"`
	// expiresAt is when the binding moments expire unresolved.
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`
	// resolution is the principal's resolution, when there is one, for the agent's next tool
	// result (envelope-04 §7.3).
	Resolution *Resolution `json:"resolution,omitempty"`
}

// Resolution is a binding-moment resolution as delivered to the agent.
type Resolution struct {
	// kind is option, answer, question or declined.
	Kind string `json:"kind"`
	// optionIdx is the selected option (kind option).
	OptionIdx *int32 `json:"optionIdx,omitempty"`
	// answer is the principal's answer (kind answer).
	Answer string `json:"answer,omitempty"`
	// resolvedBy are the principals whose resolutions these are.
	ResolvedBy []string `json:"resolvedBy,omitempty"`
}

// Consumed confirms a consume.
type Consumed struct {
	AuthorityID string    `json:"authorityID"`
	OperationID string    `json:"operationID"`
	ConsumedAt  time.Time `json:"consumedAt"`
}

// Reported confirms a Report: the Act's state is now State.
type Reported struct {
	AuthorityID string            `json:"authorityID"`
	OperationID string            `json:"operationID"`
	State       v1alpha1.ActState `json:"state"`
}
