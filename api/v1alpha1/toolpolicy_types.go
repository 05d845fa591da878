package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// PolicyMode says whether a ToolPolicy's decisions are enforced.
// +kubebuilder:validation:Enum=Enforce;Audit
type PolicyMode string

const (
	// PolicyModeEnforce denies every call the policy does not allow: the upstream is never
	// contacted and the agent receives the EF code.
	PolicyModeEnforce PolicyMode = "Enforce"
	// PolicyModeAudit lets calls through and records what would have been denied (Act decision
	// AuditDenied). It exists for rollout only and is observation, never enforcement
	// (action-evidence-boundary, "Conformance and Deployment Claims": observe-only operation MUST
	// NOT be described as enforcement); status, logs and docs never call it enforcement.
	PolicyModeAudit PolicyMode = "Audit"
)

// ServerProtocol is how the sink talks to an upstream tool server. MCP is the only protocol:
// a sink enforces only what it can bind and digest, and it has no proxy for plain HTTP tool
// backends (docs/api.md "ToolPolicy").
// +kubebuilder:validation:Enum=MCP
type ServerProtocol string

const (
	// ServerProtocolMCP is an MCP server over streamable HTTP; tools are MCP `tools/call` names.
	ServerProtocolMCP ServerProtocol = "MCP"
)

// EvidenceRole is the evidence a rule requires before authority is issued: the slot of the
// relying party's Authorization Evidence Chain requirement (action-evidence-boundary, "Evaluate
// AEC Evidence Satisfaction"). The specification names the two non-trivial roles
// `policy-permit` and `human-authorization`; the API spells every enum value in Kubernetes
// CamelCase, so they are PolicyPermit and HumanAuthorization here, in the YAML policy file and in
// Act records.
// +kubebuilder:validation:Enum=None;PolicyPermit;HumanAuthorization
type EvidenceRole string

const (
	// EvidenceRoleNone requires no evidence slot: the matching rule and its argument,
	// destination and provenance checks are the whole decision (the hot path for reads).
	EvidenceRoleNone EvidenceRole = "None"
	// EvidenceRolePolicyPermit requires a policy permit: the authority service's machine-policy
	// decision, signed and recorded on the Act, fills the slot. It never stands in for a human
	// (a machine-policy decision MUST NOT silently fill a named-human slot).
	EvidenceRolePolicyPermit EvidenceRole = "PolicyPermit"
	// EvidenceRoleHumanAuthorization requires named humans: minPrincipals distinct users from
	// principals must each resolve a BindingMoment by selecting the option whose action digest is
	// this exact call (binding-moment-envelope-04 §7.3).
	EvidenceRoleHumanAuthorization EvidenceRole = "HumanAuthorization"
)

// ProvenanceSource is where the instruction behind a call came from, in the wire spelling of the
// AgentCandidateAct `instruction_provenance.source_type` (tool-use-binding §17).
// +kubebuilder:validation:Enum=user;system;retrieval;tool_output
type ProvenanceSource string

const (
	// ProvenanceUser is an instruction from the user's own turn.
	ProvenanceUser ProvenanceSource = "user"
	// ProvenanceSystem is an instruction from the system prompt or the operator.
	ProvenanceSystem ProvenanceSource = "system"
	// ProvenanceRetrieval is text the agent retrieved (documents, web pages, search results).
	ProvenanceRetrieval ProvenanceSource = "retrieval"
	// ProvenanceToolOutput is the output of an earlier tool call.
	ProvenanceToolOutput ProvenanceSource = "tool_output"
)

// ProvenanceAction is what a matching provenance rule does to a call.
// +kubebuilder:validation:Enum=Deny;Escalate
type ProvenanceAction string

const (
	// ProvenanceActionDeny denies the call outright.
	ProvenanceActionDeny ProvenanceAction = "Deny"
	// ProvenanceActionEscalate requires human authorization from the rule's evidence principals,
	// whatever the rule's evidence role, through a gate-authored binding moment.
	ProvenanceActionEscalate ProvenanceAction = "Escalate"
)

// ToolPolicy condition types and reasons.
const (
	// ToolPolicyAcceptedCondition is True when the spec compiled: every argument expression is
	// valid CEL over `args` returning bool, every referenced server and Secret exists.
	ToolPolicyAcceptedCondition = "Accepted"
	// ToolPolicyReadyCondition is True when the authority service serves the policy at
	// status.policyEpoch. Its reason says whether it is enforced or only audited.
	ToolPolicyReadyCondition = "Ready"

	// ToolPolicyCompiledReason (Accepted=True): the spec compiled.
	ToolPolicyCompiledReason = "Compiled"
	// ToolPolicyInvalidCELReason (Accepted=False): an arguments[].expression does not compile
	// or does not return bool.
	ToolPolicyInvalidCELReason = "InvalidCEL"
	// ToolPolicyUnknownServerReason (Accepted=False): a rule names a server not in
	// spec.servers. The CRD rejects such a spec at admission; objects stored before that rule
	// existed are still caught here.
	ToolPolicyUnknownServerReason = "UnknownServer"
	// ToolPolicyInvalidSpecReason (Accepted=False): another single-object defect the API server
	// could not check (an unparseable tool glob, an alternative whose args is not an object).
	ToolPolicyInvalidSpecReason = "InvalidSpec"
	// ToolPolicySecretNotFoundReason (Ready=False): a credentialsSecretRef names a missing
	// Secret or key.
	ToolPolicySecretNotFoundReason = "SecretNotFound"
	// ToolPolicyNotAcceptedReason (Ready=False): Accepted is not True, so the policy is not
	// served; calls to its servers are denied (fail closed), not let through.
	ToolPolicyNotAcceptedReason = "NotAccepted"
	// ToolPolicyEnforcingReason (Ready=True): served in mode Enforce.
	ToolPolicyEnforcingReason = "Enforcing"
	// ToolPolicyAuditingReason (Ready=True): served in mode Audit; nothing is enforced.
	ToolPolicyAuditingReason = "Auditing"
)

// DefaultAuthorityTTL is the authority lifetime when neither the policy nor the rule sets one.
const DefaultAuthorityTTL = "60s"

// ToolPolicySpec is the policy of the finality sink for the agent pods it selects. It is also the
// schema of the standalone gate's policy file, which is YAML of a whole ToolPolicy object.
//
// A call reaches the policy as a tool name on a server. If the server is not in spec.servers the
// policy does not govern it. If it is, the first rule in spec.rules (in list order) whose servers
// and tools both match the call governs it; a call on a listed server that no rule matches is
// denied: every tool on a listed server is protected, an unknown tool is never let through.
//
// +kubebuilder:validation:XValidation:rule="!has(self.rules) || self.rules.all(r, !has(r.servers) || r.servers.all(s, self.servers.exists(v, v.name == s)))",message="rules[].servers must name servers listed in spec.servers"
// +kubebuilder:validation:XValidation:rule="!has(self.servers) || !self.servers.exists(s, has(s.auth) && has(s.auth.subject) && s.auth.subject == 'Agent') || has(self.agentAuth)",message="a server whose auth.subject is Agent needs spec.agentAuth: only a verified agent token can be exchanged"
type ToolPolicySpec struct {
	// podSelector selects, in the policy's namespace, the agent pods whose tool calls this policy
	// governs; the webhook injects the enforcing sidecar into them. An empty selector ({})
	// selects every pod in the namespace. The standalone gate has no pods and ignores it.
	// +required
	PodSelector metav1.LabelSelector `json:"podSelector"`

	// mode is Enforce (the default) or Audit. Audit records what would have been denied (Act
	// decision AuditDenied) and lets the call through; it is observation for rollout and is never
	// called enforcement.
	// +optional
	// +kubebuilder:default=Enforce
	Mode PolicyMode `json:"mode,omitempty"`

	// sink names the finality sink that enforces this policy. Every authority issued under the
	// policy is bound to sink.id, and a sink with another id refuses it (tool-use-binding §16,
	// "sink-mismatched"). When omitted each enforcing sink binds authority to its own identity
	// (the injected sidecar's, or the standalone gate's configured id).
	// +optional
	Sink *SinkIdentity `json:"sink,omitempty"`

	// authorityTTL is how long an issued authority stays usable before it must be consumed, from
	// 1s to 1h; default 60s. A rule may override it.
	// +optional
	// +kubebuilder:default="60s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('1h')",message="authorityTTL must be between 1s and 1h"
	AuthorityTTL *metav1.Duration `json:"authorityTTL,omitempty"`

	// servers lists the upstream tool servers this policy protects, with unique names. Every tool
	// on a listed server is protected: a call that no rule matches is denied.
	// +required
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	Servers []ToolServer `json:"servers,omitempty"`

	// rules decide what a call on a listed server needs. The first rule in list order whose
	// servers and tools match a call governs it, so put narrow rules before broad ones. Rule
	// names are unique. No rules means every call to every listed server is denied.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self.all(r, self.exists_one(o, o.name == r.name))",message="rule names must be unique"
	Rules []ToolRule `json:"rules,omitempty"`

	// elicitation lets the sink ALSO offer a binding moment of the listed consequence classes
	// as an MCP elicitation to an agent whose MCP client declared elicitation support
	// (envelope-04 §8; additional: the tool result still carries binding_moment). Only
	// INFORMATIONAL may be listed: an elicitation is answered in the very client the agent
	// runs in, so an agent session holding the principal's session credential could resolve
	// it, which envelope-04 §12.4 rules out for a consequential action — every other class of
	// tool-use-binding §20 (money, permissions, deploys, deletes and other durable writes,
	// messages and disclosures to other parties, computer use, the physical world, OTHER)
	// stays on the principal's own surface. Omitted: never.
	// +optional
	Elicitation *ElicitationPolicy `json:"elicitation,omitempty"`

	// agentAuth has the agents of the selected pods sign in to their sidecar with the
	// organisation's identity provider (agentauth_types.go). Omitted: the pod's service
	// account is the agent.
	// +optional
	AgentAuth *AgentAuth `json:"agentAuth,omitempty"`
}

// ElicitationPolicy names the consequence classes whose binding moments may also be offered
// as an MCP elicitation.
type ElicitationPolicy struct {
	// classes are the consequence classes whose moments may be offered as an elicitation,
	// without duplicates. Only INFORMATIONAL is accepted (envelope-04 §12.4; see
	// spec.elicitation).
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="self.all(c, c == 'INFORMATIONAL')",message="only INFORMATIONAL moments may be offered as an elicitation: every other class must be resolved on the principal's own surface (envelope-04 §12.4)"
	Classes []ConsequenceClass `json:"classes,omitempty"`
}

// SinkIdentity names a finality sink.
type SinkIdentity struct {
	// id is the sink identifier bound into every authority (AgentCandidateAct
	// `finality_sink.sink_id`, tool-use-binding §17).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([-A-Za-z0-9_.:/]*[A-Za-z0-9])?$`
	ID string `json:"id,omitempty"`
}

// ToolServer is one protected upstream tool server.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.auth) && has(self.credentialsSecretRef))",message="set either credentialsSecretRef or auth, not both"
type ToolServer struct {
	// name identifies the server within the policy (a DNS label). Rules refer to it in
	// rules[].servers, Acts record it in spec.server and destination allowlists may name it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name,omitempty"`

	// url is the upstream endpoint, an absolute http or https URL. The sidecar forwards allowed
	// calls here and nowhere else; its origin is the destination every authority for this server
	// is bound to, so a call sent to a swapped server fails on destination (tool-use-binding §22
	// T-D).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHost() != ''",message="url must be an absolute http or https URL"
	URL string `json:"url,omitempty"`

	// protocol is how the sink speaks to the server: MCP (streamable HTTP), the default and the
	// only value.
	// +optional
	// +kubebuilder:default=MCP
	Protocol ServerProtocol `json:"protocol,omitempty"`

	// credentialsSecretRef names the Secret key holding the credential the sink presents to the
	// server. The webhook mounts it into the sidecar container only, never into the agent, so the
	// agent cannot reach the server around the sink (docs/architecture.md "Anti-bypass").
	// +optional
	CredentialsSecretRef *SecretKeyRef `json:"credentialsSecretRef,omitempty"`

	// auth, instead of credentialsSecretRef, has the sidecar obtain short-lived tokens for the
	// server from the organisation's identity provider (upstreamauth_types.go).
	// +optional
	Auth *UpstreamAuth `json:"auth,omitempty"`

	// reconciliation is the authenticated endpoint the controller asks about operations on this
	// server whose outcome is INDETERMINATE. Without it such operations stay INDETERMINATE until
	// an operator settles them; they are never retried blindly.
	// +optional
	Reconciliation *ReconciliationEndpoint `json:"reconciliation,omitempty"`
}

// ReconciliationEndpoint is where the outcome of an operation can be authoritatively observed
// (action-evidence-boundary, "Perform Authenticated Reconciliation").
type ReconciliationEndpoint struct {
	// url is the reconciliation endpoint, an absolute https URL (or http for in-cluster test
	// backends). The controller queries it by operation ID and matches the answer to the Act's
	// action digest before moving INDETERMINATE to EXECUTED or FAILED.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHost() != ''",message="url must be an absolute http or https URL"
	URL string `json:"url,omitempty"`

	// credentialsSecretRef names the Secret key holding the credential the controller uses to
	// authenticate to the endpoint.
	// +optional
	CredentialsSecretRef *SecretKeyRef `json:"credentialsSecretRef,omitempty"`
}

// ToolRule says what calls of some tools on some servers need before they may take effect.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.evidence) && self.evidence.role == 'HumanAuthorization') || (has(self.alternatives) && size(self.alternatives) >= 1)",message="a rule requiring HumanAuthorization must declare at least one alternative"
// +kubebuilder:validation:XValidation:rule="!(has(self.provenance) && self.provenance.exists(p, p.action == 'Escalate')) || (has(self.alternatives) && size(self.alternatives) >= 1)",message="a rule with an Escalate provenance action must declare at least one alternative"
// +kubebuilder:validation:XValidation:rule="!(has(self.provenance) && self.provenance.exists(p, p.action == 'Escalate')) || (has(self.evidence) && has(self.evidence.principals) && size(self.evidence.principals) >= (has(self.evidence.minPrincipals) ? self.evidence.minPrincipals : 1))",message="a rule with an Escalate provenance action must name at least minPrincipals principals in evidence"
// +kubebuilder:validation:XValidation:rule="!(has(self.budgets) && self.budgets.exists(b, has(b.onExceed) && b.onExceed == 'Escalate')) || (has(self.alternatives) && size(self.alternatives) >= 1 && has(self.evidence) && has(self.evidence.principals) && size(self.evidence.principals) >= 1)",message="a rule with an Escalate budget must declare at least one alternative and name evidence principals"
type ToolRule struct {
	// name identifies the rule within the policy (a DNS label); Acts and deny messages cite it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name,omitempty"`

	// tools are glob patterns over tool names; the rule matches a call whose tool name matches
	// any of them. `*` matches any run of characters (including none), `?` exactly one, every
	// other character itself; the whole name must match and case matters. `*` alone matches
	// every tool.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=128
	// +kubebuilder:validation:items:Pattern=`^[A-Za-z0-9_.:/*?-]+$`
	Tools []string `json:"tools,omitempty"`

	// servers names the spec.servers entries the rule applies to. Empty means every listed
	// server.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	Servers []string `json:"servers,omitempty"`

	// consequenceClass is the AgentCandidateAct consequence class (tool-use-binding §10) of calls
	// this rule governs. When omitted the default of tool-use-binding §20 for the tool name
	// applies, and OTHER when the name has no default. Name the class of every high-consequence
	// tool: misclassifying a payout as INFORMATIONAL is a profile failure (§20).
	// +optional
	ConsequenceClass ConsequenceClass `json:"consequenceClass,omitempty"`

	// evidence is what must exist before authority is issued. When omitted the role is None.
	// +optional
	Evidence *EvidenceRequirement `json:"evidence,omitempty"`

	// arguments are CEL constraints over the call's arguments; every expression must evaluate to
	// true for the call to be allowed. Names are unique within the rule.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Arguments []ArgumentConstraint `json:"arguments,omitempty"`

	// destinations, when not empty, is an allowlist: the call's destination must be one of these,
	// each either a server name or an origin `scheme://host[:port]`. A call whose destination is
	// not listed is denied. Empty means the server's own destination is the only one.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=512
	// +kubebuilder:validation:items:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?|https?://[^/?#\s]+)$`
	Destinations []string `json:"destinations,omitempty"`

	// provenance rules deny or escalate calls by where their instruction came from. They are
	// checked in list order and the first whose sources and classes match applies.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	Provenance []ProvenanceRule `json:"provenance,omitempty"`

	// alternatives are the options a gate-authored binding moment offers beside the requested
	// call when this rule escalates to a human (docs/architecture.md "Human decisions"): the
	// envelope holds the requested call plus these, 2 to 4 options in all (envelope-04 §5.6), so
	// at most 3 and, for a rule that can escalate, at least 1.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=3
	Alternatives []Alternative `json:"alternatives,omitempty"`

	// authorityTTL overrides spec.authorityTTL for calls this rule governs, from 1s to 1h.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('1h')",message="authorityTTL must be between 1s and 1h"
	AuthorityTTL *metav1.Duration `json:"authorityTTL,omitempty"`

	// maskArguments lists RFC 6901 JSON Pointers into a call's arguments (for example
	// /card/number, or /items/0/iban) whose values the principal's surfaces show masked when a
	// binding moment offers a call this rule governs. Every other argument is shown to the
	// principal as the gate holds it, beside the agent's label ("what you see is what you
	// authorise"). Masking changes only what is shown: the option's action digest is computed
	// over the real values, so the authority a resolution issues still binds them. A pointer
	// naming nothing in a call is ignored; the empty pointer (the whole object) and "-" are
	// refused. At most 16 pointers of at most 16 tokens each.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MinLength=2
	// +kubebuilder:validation:items:MaxLength=256
	// +kubebuilder:validation:items:Pattern=`^(/([^~/]|~[01])+)+$`
	MaskArguments []string `json:"maskArguments,omitempty"`

	// rateLimit bounds how often calls this rule governs run: a token bucket decided in the
	// process that serves the agent (the pod's sidecar, or actgate serve), without the control
	// plane. A call over it is refused with EF_RATE_LIMITED before anything is registered,
	// issued or sent, with the time until the bucket holds a call again (docs/api.md "Rate
	// limits").
	// +optional
	RateLimit *RateLimit `json:"rateLimit,omitempty"`

	// pin pins the definitions of the tools this rule governs against silent change (tool
	// poisoning, a "rug pull"): a tool whose definition as the upstream lists it (name, title,
	// description, inputSchema, outputSchema, annotations; digested as docs/api.md "Pinned tool
	// definitions" says) is not the pinned one is hidden from tools/list and its calls are
	// refused with EF_TOOL_CHANGED until an operator accepts the new digest. When omitted the
	// rule pins nothing.
	// +optional
	Pin *ToolPin `json:"pin,omitempty"`

	// budgets bound what calls this rule governs may spend together over a window: a count of
	// calls and/or the sum of a numeric argument, per key (agent, service account, namespace,
	// policy, or a CEL expression over the arguments). Spending is charged at the moment authority
	// is consumed, atomically with it, so concurrent calls that each fit but together exceed
	// never all run; a call that ends FAILED gives its share back (docs/api.md "Budgets").
	// Names are unique within the rule.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	Budgets []Budget `json:"budgets,omitempty"`
}

// BudgetCalendar is a calendar window unit.
// +kubebuilder:validation:Enum=Day;Week;Month
type BudgetCalendar string

const (
	// BudgetCalendarDay is the calendar day, midnight to midnight in the window's time zone.
	BudgetCalendarDay BudgetCalendar = "Day"
	// BudgetCalendarWeek is the ISO week, Monday 00:00 to the next Monday 00:00 in the zone.
	BudgetCalendarWeek BudgetCalendar = "Week"
	// BudgetCalendarMonth is the calendar month, the 1st 00:00 to the next 1st 00:00 in the zone.
	BudgetCalendarMonth BudgetCalendar = "Month"
)

// BudgetKeyBy says which calls share a budget's counters.
// +kubebuilder:validation:Enum=Agent;ServiceAccount;Namespace;Policy;Expression
type BudgetKeyBy string

const (
	// BudgetKeyAgent gives each agent its own counters (the default).
	BudgetKeyAgent BudgetKeyBy = "Agent"
	// BudgetKeyServiceAccount gives each agent pod's service account its own counters (standalone:
	// the agent).
	BudgetKeyServiceAccount BudgetKeyBy = "ServiceAccount"
	// BudgetKeyNamespace shares one set of counters across the policy's namespace.
	BudgetKeyNamespace BudgetKeyBy = "Namespace"
	// BudgetKeyPolicy shares one set of counters across every call the rule governs under this
	// policy.
	BudgetKeyPolicy BudgetKeyBy = "Policy"
	// BudgetKeyExpression keys the counters by the string a CEL expression over the call's
	// arguments returns (for example the payee).
	BudgetKeyExpression BudgetKeyBy = "Expression"
)

// BudgetOnExceed is what happens to a call that would pass a budget's limit.
// +kubebuilder:validation:Enum=Deny;Escalate
type BudgetOnExceed string

const (
	// BudgetOnExceedDeny refuses the call with EF_BUDGET_EXCEEDED; nothing is dispatched.
	BudgetOnExceedDeny BudgetOnExceed = "Deny"
	// BudgetOnExceedEscalate asks the rule's evidence principals through a binding moment whose
	// findings state the budget, what was spent, the limit, the window's end and what the call
	// adds. A person's approval charges the call without enforcing the limit.
	BudgetOnExceedEscalate BudgetOnExceed = "Escalate"
)

// Budget is one limit on what a rule's calls may spend together over a window.
//
// +kubebuilder:validation:XValidation:rule="has(self.maxCalls) || has(self.sum)",message="a budget needs maxCalls, sum or both"
type Budget struct {
	// name identifies the budget within the rule (a DNS label); denials, findings and
	// `actgate budgets` cite it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name,omitempty"`

	// window is the span spending is counted over: a rolling period or a calendar unit.
	// +required
	Window BudgetWindow `json:"window"`

	// key says which calls share counters; default by Agent.
	// +optional
	Key *BudgetKey `json:"key,omitempty"`

	// maxCalls is how many calls may be charged in a window, 1 to 1000000000.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000000
	MaxCalls *int64 `json:"maxCalls,omitempty"`

	// sum bounds the total of a numeric argument over a window.
	// +optional
	Sum *BudgetSum `json:"sum,omitempty"`

	// onExceed is Deny (the default: EF_BUDGET_EXCEEDED) or Escalate (a binding moment to the
	// rule's evidence principals; the rule must name principals and alternatives).
	// +optional
	// +kubebuilder:default=Deny
	OnExceed BudgetOnExceed `json:"onExceed,omitempty"`
}

// BudgetWindow is a rolling period or a calendar unit in a time zone; exactly one of period and
// calendar is set.
//
// +kubebuilder:validation:XValidation:rule="has(self.period) != has(self.calendar)",message="set exactly one of period and calendar"
// +kubebuilder:validation:XValidation:rule="!has(self.timeZone) || has(self.calendar)",message="timeZone applies only to a calendar window"
type BudgetWindow struct {
	// period is a rolling window (a Go duration, 1m to 2232h = 93 days), counted in 60 equal
	// sub-buckets so a call is never under-counted: a charge leaves the window only once its
	// whole sub-bucket is older than the period.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m') && duration(self) <= duration('2232h')",message="period must be between 1m and 2232h"
	Period *metav1.Duration `json:"period,omitempty"`

	// calendar is Day, Week (ISO, from Monday) or Month, in timeZone.
	// +optional
	Calendar BudgetCalendar `json:"calendar,omitempty"`

	// timeZone is the IANA time zone of a calendar window (for example Europe/Berlin); default
	// UTC. Day boundaries follow the zone's daylight-saving changes.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_+/-]+$`
	TimeZone string `json:"timeZone,omitempty"`
}

// BudgetKey says which calls share a budget's counters.
//
// +kubebuilder:validation:XValidation:rule="(has(self.by) && self.by == 'Expression') == has(self.expression)",message="expression is set exactly when by is Expression"
type BudgetKey struct {
	// by is Agent (default), ServiceAccount, Namespace, Policy or Expression.
	// +optional
	// +kubebuilder:default=Agent
	By BudgetKeyBy `json:"by,omitempty"`

	// expression is, for by Expression, a CEL expression over `args` returning a string of at
	// most 256 bytes (for example `args.payee`); an error, a non-string or a longer result
	// refuses the call (fail closed).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Expression string `json:"expression,omitempty"`
}

// BudgetSum bounds the total of one numeric argument.
type BudgetSum struct {
	// pointer is the RFC 6901 JSON Pointer to the amount in the call's arguments (for example
	// /amount). The amount is a JSON number or a decimal string, read exactly (never as a
	// float); a call whose amount is missing, negative or not a plain decimal is refused.
	// +required
	// +kubebuilder:validation:MinLength=2
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^(/([^~/]|~[01])*)+$`
	Pointer string `json:"pointer,omitempty"`

	// max is the window's limit on the sum, a plain decimal string (for example "10000.00"):
	// digits with an optional fraction, no sign, no exponent, at most 30 digits before the point
	// and 18 after.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=49
	// +kubebuilder:validation:Pattern=`^[0-9]{1,30}(\.[0-9]{1,18})?$`
	Max string `json:"max,omitempty"`

	// unit labels the amount for people (for example EUR); it is shown, never converted.
	// +optional
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.-]*$`
	Unit string `json:"unit,omitempty"`
}

// RateLimitPer says which calls share a rate-limit bucket.
// +kubebuilder:validation:Enum=Agent;Pod
type RateLimitPer string

const (
	// RateLimitPerAgent gives each agent a bucket per tool (the default).
	RateLimitPerAgent RateLimitPer = "Agent"
	// RateLimitPerPod gives the process one bucket per tool, shared by every agent it serves:
	// the pod's sidecar in Kubernetes, the gate in standalone.
	RateLimitPerPod RateLimitPer = "Pod"
)

// RateLimit is a token bucket of burst calls, refilled continuously at calls per period.
type RateLimit struct {
	// calls is how many calls the bucket refills each period, 1 to 1000000.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	Calls int32 `json:"calls"`

	// period is the refill period, from 1s to 24h (for example 1m).
	// +required
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('24h')",message="period must be between 1s and 24h"
	Period metav1.Duration `json:"period"`

	// burst is how many calls a full bucket lets run at once, 1 to 1000000; default calls.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	Burst int32 `json:"burst,omitempty"`

	// per is Agent (default: a bucket per agent and tool) or Pod (a bucket per tool shared by
	// every agent of the pod; standalone, of the gate).
	// +optional
	// +kubebuilder:default=Agent
	Per RateLimitPer `json:"per,omitempty"`
}

// ToolPin says which definition of each governed tool the sink accepts: the digest listed here
// for the tool, else the digest recorded in status.toolPins (on first use, or by `tools
// accept`). A governed tool with neither is refused, unless onFirstUse records the first
// definition seen.
type ToolPin struct {
	// onFirstUse records the first definition the sink sees of a governed tool that digests
	// does not list (status.toolPins; the standalone gate's data dir) and accepts it from then
	// on. Without it only listed or accepted digests are.
	// +optional
	OnFirstUse bool `json:"onFirstUse,omitempty"`

	// digests are the accepted definition digests, at most one per server and tool (the
	// controller reports a repeat as InvalidSpec on Accepted). An entry
	// overrides anything recorded for its tool: a policy edit is how a listed digest is
	// accepted anew.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Digests []ToolDigest `json:"digests,omitempty"`
}

// ToolDigest is the accepted definition digest of one tool.
type ToolDigest struct {
	// tool is the tool's exact name (no glob).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.:/-]+$`
	Tool string `json:"tool,omitempty"`

	// server restricts the entry to one of the rule's servers; empty means every server the
	// rule governs.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Server string `json:"server,omitempty"`

	// sha256 is the lowercase hex SHA-256 of the tool's canonical definition (docs/api.md
	// "Pinned tool definitions"; `actgate tools digest` prints it).
	// +required
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
	SHA256 string `json:"sha256,omitempty"`
}

// RecordedToolPin is a tool definition digest the sink recorded on first use or an operator
// accepted.
type RecordedToolPin struct {
	// server is the spec.servers entry whose upstream lists the tool.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Server string `json:"server"`

	// tool is the tool's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Tool string `json:"tool"`

	// sha256 is the accepted definition digest.
	// +required
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
	SHA256 string `json:"sha256"`

	// members are the digests of the definition's members, so a later change can say which
	// members changed (name, title, description, inputSchema, outputSchema, annotations).
	// +optional
	// +kubebuilder:validation:MaxProperties=6
	Members map[string]string `json:"members,omitempty"`

	// acceptedBy is "first-use" for a digest recorded on first use, else who accepted it.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	AcceptedBy string `json:"acceptedBy,omitempty"`

	// acceptedAt is when it was recorded or accepted.
	// +optional
	AcceptedAt metav1.Time `json:"acceptedAt,omitzero"`
}

// EvidenceRequirement is the Authorization Evidence Chain requirement of a rule
// (action-evidence-boundary, "Relying-Party Inputs and Pins": the AEC requirement and the
// separation-of-duty rule are relying-party configuration, never presenter input).
//
// +kubebuilder:validation:XValidation:rule="!has(self.role) || self.role != 'HumanAuthorization' || (has(self.principals) && size(self.principals) >= (has(self.minPrincipals) ? self.minPrincipals : 1))",message="HumanAuthorization evidence must name at least minPrincipals principals"
type EvidenceRequirement struct {
	// role is None, PolicyPermit or HumanAuthorization (see EvidenceRole); default None.
	// +optional
	// +kubebuilder:default=None
	Role EvidenceRole `json:"role,omitempty"`

	// principals are the Kubernetes user names who may authorize a call, each by resolving a
	// BindingMoment addressed to them. Required (at least minPrincipals) for HumanAuthorization
	// and for a rule with an Escalate provenance action.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	Principals []string `json:"principals,omitempty"`

	// minPrincipals is how many distinct principals must each select the option for this exact
	// call before authority is issued; default 1.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=8
	MinPrincipals int32 `json:"minPrincipals,omitempty"`

	// separationOfDuties, when true (the default), forbids the identities that initiated the call
	// (the agent's service account) or will execute it (the sink) from filling the role, even if
	// listed in principals (action-evidence-boundary, "separation-of-duty rule").
	// +optional
	// +kubebuilder:default=true
	SeparationOfDuties *bool `json:"separationOfDuties,omitempty"`
}

// ArgumentConstraint is one CEL check over a call's arguments.
type ArgumentConstraint struct {
	// name identifies the constraint within the rule; deny messages cite it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name,omitempty"`

	// expression is a CEL expression over `args`, the call's arguments as a map(string, dyn),
	// that must evaluate to true for the call to be allowed; false, an error or a non-bool result
	// denies (fail closed). Example: `double(args.amount) <= 1000.0`. The controller compiles it
	// and reports InvalidCEL on the Accepted condition.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Expression string `json:"expression,omitempty"`

	// message is shown to the agent (with the EF code) when the expression is not true.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Message string `json:"message,omitempty"`
}

// ProvenanceRule denies or escalates calls whose instruction came from given sources.
type ProvenanceRule struct {
	// sources are the instruction provenance source types (tool-use-binding §17
	// `instruction_provenance.source_type`) the rule matches. A call with no provenance
	// information matches every source: unknown provenance is treated as the worst listed one.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=4
	Sources []ProvenanceSource `json:"sources,omitempty"`

	// classes restricts the rule to calls of these consequence classes. Empty means every class.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=8
	Classes []ConsequenceClass `json:"classes,omitempty"`

	// action is Deny or Escalate.
	// +required
	Action ProvenanceAction `json:"action,omitempty"`
}

// Alternative is an option a gate-authored binding moment offers instead of the requested call.
type Alternative struct {
	// label is the option's short, action-shaped statement (envelope-04 §5.6 `label`).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=200
	Label string `json:"label,omitempty"`

	// reasoning is one line on why the principal might choose it (envelope-04 §5.6
	// `reasoning`).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1000
	Reasoning string `json:"reasoning,omitempty"`

	// args is a JSON merge patch (RFC 7396) applied to the requested call's arguments to form
	// this option's call of the same tool, e.g. {"dry_run": true}, or {"amount": "1000.00"} to
	// cap an amount. A null member removes that argument. The option's action digest is computed
	// by the sink over the patched arguments, never taken from here.
	// +required
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Type=object
	Args runtime.RawExtension `json:"args"`
}

// ToolPolicyStatus is the observed state of a ToolPolicy, written by the ToolPolicy controller.
type ToolPolicyStatus struct {
	// conditions are Accepted and Ready (see the ToolPolicy*Condition and *Reason constants).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the metadata.generation the conditions describe.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// policyEpoch increases by one each time a changed spec is accepted. Authorities and Acts
	// record the epoch they were issued under; an authority whose epoch is no longer current is
	// refused at the sink (tool-use-binding §16, "uncertain epoch").
	// +optional
	// +kubebuilder:validation:Minimum=0
	PolicyEpoch int64 `json:"policyEpoch,omitempty"`

	// toolPins are the tool definition digests recorded on first use (rules[].pin.onFirstUse)
	// or accepted by an operator (`kubectl actgate tools accept`), one per server and tool. A
	// digest in a rule's pin.digests overrides the one recorded here.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	ToolPins []RecordedToolPin `json:"toolPins,omitempty"`

	// toolChanges are the changed definitions of pinned tools a sidecar saw listed, one per
	// server and tool (the newest): each tool is hidden from tools/list and its calls refused
	// with EF_TOOL_CHANGED until `kubectl actgate tools accept` moves its entry to toolPins (or
	// a policy edit lists its digest).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	ToolChanges []RecordedToolPin `json:"toolChanges,omitempty"`
}

// ToolPolicy declares which tool servers are protected for which agent pods, and what a call
// needs before it may take effect.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=tp,categories=actgate
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`
// +kubebuilder:printcolumn:name="Accepted",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].status`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,description="Enforcing or Auditing when served; NotAccepted or SecretNotFound when not"
// +kubebuilder:printcolumn:name="Epoch",type=integer,JSONPath=`.status.policyEpoch`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ToolPolicy struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the policy.
	// +required
	Spec ToolPolicySpec `json:"spec"`

	// status is the observed state, written by the controller.
	// +optional
	Status ToolPolicyStatus `json:"status,omitempty,omitzero"`
}

// ToolPolicyList is a list of ToolPolicy.
//
// +kubebuilder:object:root=true
type ToolPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ToolPolicy `json:"items"`
}
