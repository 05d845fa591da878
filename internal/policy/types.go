package policy

import (
	"encoding/json"
	"time"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/ratelimit"
)

// Outcome is what the sink does with a call. The four outcomes map one to one onto the
// evidence role the decision requires (action-evidence-boundary, "Evaluate AEC Evidence
// Satisfaction"), plus Deny.
type Outcome string

const (
	// OutcomeAllow: evidence role None. The hot path: no authority is issued or consumed.
	OutcomeAllow Outcome = "Allow"
	// OutcomePermit: evidence role PolicyPermit. The authority service issues machine authority
	// for this exact call and the sink consumes it durably before invoking (tool-use-binding §16
	// MUST 4).
	OutcomePermit Outcome = "Permit"
	// OutcomeEscalate: evidence role HumanAuthorization. The call needs a resolved binding
	// moment; a direct call is refused with EF_ESCALATION_REQUIRED (docs/architecture.md "Human
	// decisions").
	OutcomeEscalate Outcome = "Escalate"
	// OutcomeDeny: the call is refused; the upstream is never contacted.
	OutcomeDeny Outcome = "Deny"
)

// Request is one call as the sink sees it. Every field is filled by the sink from what it
// controls (action-evidence-boundary, "Construct the Observed Material Action"); none is taken
// from the agent's word.
type Request struct {
	// Server is the ToolServer.name the call is addressed to.
	Server string
	// Destination is the live destination identity: the server URL the sink forwards to, or for
	// computer-use and browser acts the focused origin. Only its origin is compared (see
	// Evaluate). A declared server name is accepted as standing for that server's origin.
	Destination string
	// Tool is the tool name.
	Tool string
	// Args are the canonical arguments, a JSON object.
	Args json.RawMessage
	// Class is the mapper's default consequence class (act.DefaultClass); a rule's
	// consequenceClass overrides it. Empty or invalid means act.DefaultClass(Tool).
	Class act.ConsequenceClass
	// Provenance is the instruction provenance source: user, system, retrieval, tool_output, or
	// "" when unknown. The act package's spellings "tool" (= tool_output) and "unknown" (= "")
	// are accepted; anything else is unknown.
	Provenance string
	// Agent is the initiating agent identity (e.g. the service account user name). It can never
	// count as a principal of a human authorization.
	Agent string
	// StrictArgs reports whether Args fit the JCS strict profile (envelope-04 §6.3), i.e. can be
	// bound to a human decision (docs/architecture.md "Digests").
	StrictArgs bool
}

// Decision is the result of evaluating a Request against one policy.
type Decision struct {
	// Outcome is what the sink does. In Audit mode it is always Allow; see Audit.
	Outcome Outcome
	// Code is the EF code, set for Deny and Escalate (and, in Audit mode, for what Enforce would
	// have returned).
	Code ef.EFCode
	// Message is safe to show the agent: it names the policy, rule, tool or constraint, never a
	// raw argument value.
	Message string
	// Policy is the name (namespace/name) of the ToolPolicy that decided.
	Policy string
	// Rule is the name of the governing rule, "" when no rule matched.
	Rule string
	// Class is the effective consequence class, "" when no rule matched.
	Class act.ConsequenceClass
	// Evidence is the effective evidence requirement with defaults applied, set unless the
	// decision is Deny: Role always; Principals, MinPrincipals (default 1) and
	// SeparationOfDuties (default true) for HumanAuthorization. The slices and pointers are the
	// decision's own.
	Evidence v1alpha1.EvidenceRequirement
	// Alternatives are the rule's declared alternatives, set for Escalate.
	Alternatives []v1alpha1.Alternative
	// MaskArguments are the governing rule's RFC 6901 pointers whose values a principal's
	// surface shows masked (spec.rules[].maskArguments), sorted; nil when none or no rule
	// matched.
	MaskArguments []string
	// AuthorityTTL is how long an authority issued for this decision stays usable.
	AuthorityTTL time.Duration
	// RateLimit is the governing rule's rate limit (spec.rules[].rateLimit), nil when it has
	// none or no rule matched. The sink enforces it; Evaluate only reports it.
	RateLimit *RateLimit
	// Budgets are the governing rule's budgets with the key this call charges
	// (spec.rules[].budgets), nil when it has none. A rule with budgets never takes the hot
	// path: its evidence role None is decided as Permit, so the call's authority is consumed and
	// its budgets charged in that commit. The sink checks usage and charges; Evaluate only
	// reports them.
	Budgets []BudgetCheck
	// Epoch is the policy epoch the decision was made under; authorities record it.
	Epoch int64
	// Audit is true when the policy is in mode Audit: Outcome is Allow, the call goes through
	// with no authority issued or consumed, and AuditOutcome, Code, Message (and Evidence,
	// Alternatives, AuthorityTTL) say what Enforce would have done. The caller records it
	// as an audit observation and never calls it enforcement (action-evidence-boundary,
	// "Conformance and Deployment Claims").
	Audit bool
	// AuditOutcome is, in Audit mode, the outcome Enforce would have returned; "" otherwise.
	AuditOutcome Outcome
	// WouldDeny is, in Audit mode, true when Enforce would have denied or escalated.
	WouldDeny bool
}

// RateLimit is a rule's compiled rate limit: a token bucket per agent and tool, or per tool
// for the whole process when PerPod.
type RateLimit struct {
	ratelimit.Limit
	PerPod bool
}
