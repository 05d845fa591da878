package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ResolutionKind is which of the four resolutions of binding-moment-envelope-04 §7.3 occurred, in
// its wire spelling (`binding_moment_resolution.resolution`).
// +kubebuilder:validation:Enum=option;answer;question;declined
type ResolutionKind string

const (
	// ResolutionOption selects the option at optionIdx. It is the only kind that can become
	// authority, and only for the action whose digest that option carries.
	ResolutionOption ResolutionKind = "option"
	// ResolutionAnswer is the answer-space hatch: a free-form answer returned to the agent.
	ResolutionAnswer ResolutionKind = "answer"
	// ResolutionQuestion is the question-space hatch: the principal rejects the framing and
	// deliberation reopens.
	ResolutionQuestion ResolutionKind = "question"
	// ResolutionDeclined answers the question as put in the negative; the matter ends.
	ResolutionDeclined ResolutionKind = "declined"
)

// BindingMomentState is where a binding moment stands.
// +kubebuilder:validation:Enum=Pending;Resolved;Expired
type BindingMomentState string

const (
	// BindingMomentPending: delivered, waiting for the principal.
	BindingMomentPending BindingMomentState = "Pending"
	// BindingMomentResolved: the principal wrote a resolution and admission verified its author.
	BindingMomentResolved BindingMomentState = "Resolved"
	// BindingMomentExpired: spec.expiresAt passed without a resolution; it can authorize nothing.
	BindingMomentExpired BindingMomentState = "Expired"
)

// BindingMoment condition types and reasons.
const (
	// BindingMomentResolvedCondition is True once the binding moment is resolved.
	BindingMomentResolvedCondition = "Resolved"

	// BindingMomentAwaitingPrincipalReason (Resolved=False): no resolution yet.
	BindingMomentAwaitingPrincipalReason = "AwaitingPrincipal"
	// BindingMomentExpiredReason (Resolved=False): expired unresolved.
	BindingMomentExpiredReason = "Expired"
	// BindingMomentOptionSelectedReason (Resolved=True): resolution kind option.
	BindingMomentOptionSelectedReason = "OptionSelected"
	// BindingMomentAnsweredReason (Resolved=True): resolution kind answer.
	BindingMomentAnsweredReason = "Answered"
	// BindingMomentQuestionedReason (Resolved=True): resolution kind question.
	BindingMomentQuestionedReason = "Questioned"
	// BindingMomentDeclinedReason (Resolved=True): resolution kind declined.
	BindingMomentDeclinedReason = "Declined"

	// BindingMomentAnnouncedCondition records the announcement of the pending moment to the
	// manager's notification webhooks (internal/notify). It is set once and never repeated:
	// restarts and resyncs do not announce a moment again.
	BindingMomentAnnouncedCondition = "Announced"
	// BindingMomentAnnouncingReason (Announced=Unknown): the announcement is being delivered.
	BindingMomentAnnouncingReason = "Announcing"
	// BindingMomentDeliveredReason (Announced=True): every webhook took the announcement.
	BindingMomentDeliveredReason = "Delivered"
	// BindingMomentDeliveryFailedReason (Announced=False): a webhook refused it or every
	// attempt failed; it is not retried after the notifier's own attempts.
	BindingMomentDeliveryFailedReason = "DeliveryFailed"
	// BindingMomentInterruptedReason (Announced=False): the manager stopped while delivering;
	// whether the announcement arrived is unknown, and it is not repeated (at most once).
	BindingMomentInterruptedReason = "Interrupted"
)

// BindingMomentSpec is one envelope addressed to one principal, and that principal's resolution.
//
// Everything but resolution is written once by the authority service when the act escalates and
// is immutable. resolution is written once by the principal: users must not write status, so the
// resolution is a spec field, and the BindingMoment admission webhook (webhook/) admits a write
// that adds it only when the request's userInfo.username is spec.principal and nothing else in
// the spec changes. The agent's service account therefore can never resolve its own escalation
// (docs/architecture.md "Principals"). The controller then records who resolved it and when in
// status, which only the controller writes.
//
// +kubebuilder:validation:XValidation:rule="!has(self.resolution) || self.resolution.envelopeDigest == self.envelopeDigest",message="resolution.envelopeDigest must equal spec.envelopeDigest: a resolution names the envelope it resolves (envelope-04 §7.3)"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.resolution) || (has(self.resolution) && self.resolution == oldSelf.resolution)",message="resolution cannot be changed or removed once written"
// +kubebuilder:validation:XValidation:rule="has(self.calls) == has(oldSelf.calls)",message="calls are immutable"
type BindingMomentSpec struct {
	// envelope is the binding_moment value (envelope-04 §4) exactly as emitted: its RFC 8785 JCS
	// canonical bytes as a string, so sha256 over these bytes reproduces envelopeDigest
	// (envelope-04 §6). It is a string, not an object, because the API server re-encodes objects
	// and the digest must stay reproducible. Immutable.
	// +required
	// +kubebuilder:validation:MinLength=2
	// +kubebuilder:validation:MaxLength=65536
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="envelope is immutable"
	Envelope string `json:"envelope,omitempty"`

	// envelopeDigest is sha256 over envelope in the form of envelope-04 §6.2. Immutable.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="envelopeDigest is immutable"
	EnvelopeDigest Digest `json:"envelopeDigest,omitempty"`

	// synopsis is a copy of the envelope's synopsis slot (envelope-04 §5.1) for `kubectl get`.
	// Admission checks it equals the envelope's. Immutable.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="synopsis is immutable"
	Synopsis string `json:"synopsis,omitempty"`

	// principal is the Kubernetes user name of the one person who may resolve this binding
	// moment. Immutable.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="principal is immutable"
	Principal string `json:"principal,omitempty"`

	// actRef names the Act this binding moment decides. Immutable.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="actRef is immutable"
	ActRef LocalObjectReference `json:"actRef,omitzero"`

	// expiresAt is when the binding moment expires unresolved. Immutable.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="expiresAt is immutable"
	ExpiresAt metav1.Time `json:"expiresAt,omitzero"`

	// calls are the tool calls the envelope's options authorise, one per option in order: the
	// calls the authority service computed each option's action_digest from. The principal's
	// surfaces (kubectl actgate show, the console) show each beside the option's label, marked
	// as actgate's, and refuse to show a decision when an unmasked call does not hash to its
	// option's digest. Argument values at the rule's maskArguments pointers are masked. They
	// carry raw tool arguments: anyone who can read this BindingMoment reads them (see
	// docs/security.md, "What the principal sees"). Immutable.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=4
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="calls are immutable"
	Calls []BindingMomentCall `json:"calls,omitempty"`

	// resolution is the principal's answer, written once by the principal (see the type comment).
	// +optional
	Resolution *BindingMomentResolution `json:"resolution,omitempty"`
}

// BindingMomentCall is the exact call one option of a BindingMoment's envelope authorises.
type BindingMomentCall struct {
	// server is the ToolPolicy spec.servers name the call goes to.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Server string `json:"server,omitempty"`

	// destination is the upstream the sink contacts for the call (the server's URL).
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	Destination string `json:"destination,omitempty"`

	// tool is the tool name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Tool string `json:"tool,omitempty"`

	// args is the argument object as RFC 8785 canonical JSON text, with masked values replaced
	// by a placeholder. It is a string, not an object, so the API server does not re-encode it
	// and the action digest stays reproducible from it.
	// +required
	// +kubebuilder:validation:MinLength=2
	// +kubebuilder:validation:MaxLength=65536
	Args string `json:"args,omitempty"`

	// masked lists the RFC 6901 pointers whose values args shows masked, sorted. The option's
	// action digest binds their real values.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=256
	Masked []string `json:"masked,omitempty"`
}

// BindingMomentResolution is a binding_moment_resolution (envelope-04 §7.3).
//
// +kubebuilder:validation:XValidation:rule="self.kind == 'option' ? has(self.optionIdx) : !has(self.optionIdx)",message="optionIdx is required for kind option and must be absent otherwise (envelope-04 §7.3)"
// +kubebuilder:validation:XValidation:rule="self.kind == 'answer' ? (has(self.answer) && size(self.answer) > 0) : !has(self.answer)",message="answer is required for kind answer and must be absent otherwise (envelope-04 §7.3)"
type BindingMomentResolution struct {
	// kind is option, answer, question or declined (envelope-04 §7.3 `resolution`).
	// +required
	Kind ResolutionKind `json:"kind,omitempty"`

	// optionIdx is the zero-based index of the selected option in the envelope's options; only
	// for kind option. Admission checks it is within the envelope's option list.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3
	OptionIdx *int32 `json:"optionIdx,omitempty"`

	// answer is the principal's free-form answer; only for kind answer.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Answer string `json:"answer,omitempty"`

	// envelopeDigest names the envelope being resolved and must equal spec.envelopeDigest, so a
	// resolution can never be applied to another envelope (envelope-04 §12.5).
	// +required
	EnvelopeDigest Digest `json:"envelopeDigest,omitempty"`

	// via says through which surface the principal resolved the moment and, when the request
	// was authenticated by OpenID Connect, with which authentication (docs/security.md
	// "Resolution audit"). Admission admits issuer, subject and authTime only when each equals
	// what the API server's authenticator recorded for the request (userInfo.extra); surface
	// is the writing client's own word.
	// +optional
	Via *ResolutionVia `json:"via,omitempty"`
}

// ResolutionVia is how a resolution reached the API server: the surface that wrote it and the
// OpenID Connect authentication of the person who wrote it.
type ResolutionVia struct {
	// surface names the client that wrote the resolution: approval-service, console, kubectl,
	// or another lower-case DNS label. It is the client's own word, not verified.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Surface string `json:"surface,omitempty"`

	// issuer is the OpenID Connect issuer (iss) of the ID token the request was authenticated
	// with. Admission requires it to equal the request's userInfo.extra actgate.io/oidc-issuer.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Issuer string `json:"issuer,omitempty"`

	// subject is the OpenID Connect subject (sub) of that ID token. Admission requires it to
	// equal the request's userInfo.extra actgate.io/oidc-subject.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	Subject string `json:"subject,omitempty"`

	// authTime is when the person last authenticated to the issuer (the ID token's auth_time).
	// Admission requires it to equal the request's userInfo.extra actgate.io/auth-time
	// (decimal Unix seconds).
	// +optional
	AuthTime *metav1.Time `json:"authTime,omitempty"`
}

// BindingMomentStatus is the observed state, written only by the controller.
//
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.state) || oldSelf.state == 'Pending' || (has(self.state) && self.state == oldSelf.state)",message="a Resolved or Expired binding moment is final"
type BindingMomentStatus struct {
	// state is Pending, Resolved or Expired.
	// +optional
	State BindingMomentState `json:"state,omitempty"`

	// resolvedBy is the user admission accepted the resolution from (always spec.principal: the
	// webhook admits no one else).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ResolvedBy string `json:"resolvedBy,omitempty"`

	// resolvedAt is when the resolution was recorded.
	// +optional
	ResolvedAt *metav1.Time `json:"resolvedAt,omitempty"`

	// resolvedVia is spec.resolution.via as the controller recorded it with resolvedBy: the
	// surface and the authentication admission accepted the resolution with.
	// +optional
	ResolvedVia *ResolutionVia `json:"resolvedVia,omitempty"`

	// conditions hold Resolved (see the BindingMoment*Condition and *Reason constants).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the metadata.generation the status describes.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// BindingMoment carries one binding-moment envelope to its principal and the principal's
// resolution back.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=bm,categories=actgate
// +kubebuilder:printcolumn:name="Principal",type=string,JSONPath=`.spec.principal`
// +kubebuilder:printcolumn:name="Synopsis",type=string,JSONPath=`.spec.synopsis`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Resolution",type=string,JSONPath=`.spec.resolution.kind`,priority=1
// +kubebuilder:printcolumn:name="Act",type=string,JSONPath=`.spec.actRef.name`,priority=1
// +kubebuilder:printcolumn:name="Expires",type=date,JSONPath=`.spec.expiresAt`,priority=1
type BindingMoment struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the envelope, its principal and the resolution.
	// +required
	Spec BindingMomentSpec `json:"spec"`

	// status is written by the controller.
	// +optional
	Status BindingMomentStatus `json:"status,omitempty,omitzero"`
}

// BindingMomentList is a list of BindingMoment.
//
// +kubebuilder:object:root=true
type BindingMomentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BindingMoment `json:"items"`
}
