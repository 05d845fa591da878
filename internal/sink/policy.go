package sink

import (
	"context"
	"encoding/json"
	"time"

	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/policy"
)

// PolicyOutcome is what policy decides for one call (docs/architecture.md "The flow of one call",
// step 3).
type PolicyOutcome string

// Policy outcomes.
const (
	// PolicyAllow: the hot path. No authority is issued or consumed; the call is invoked after
	// an in-memory receipt (tool-use-binding §6 step 6 "local hot path").
	PolicyAllow PolicyOutcome = "Allow"
	// PolicyPermit: machine policy fills the evidence slot. The gate issues a signed single-use
	// authority, consumes it and journals DISPATCH_PENDING durably before invoking once.
	PolicyPermit PolicyOutcome = "Permit"
	// PolicyEscalate: a human must decide. The call is denied with EFEscalationRequired and a
	// gate-authored binding moment, unless a resolved moment already granted authority for
	// exactly this action in this session and destination.
	PolicyEscalate PolicyOutcome = "Escalate"
	// PolicyDeny: refused with the decision's code; the upstream is never contacted.
	PolicyDeny PolicyOutcome = "Deny"
)

// PolicyRequest is what the gate asks policy about one call. Every field comes from the gate's
// own view of the live call (the transport's session, server and destination; the arguments the
// gate canonicalized), never from a value the agent asserts about itself.
type PolicyRequest struct {
	Server      string               // ToolServer name the call is addressed to
	Destination string               // live upstream identity
	Tool        string               // tool name
	Args        json.RawMessage      // canonical (RFC 8785) argument object
	Class       act.ConsequenceClass // the act's default class (tool-use-binding §20)
	Provenance  string               // user | system | retrieval | tool_output; "" = unknown
	Agent       string               // initiating agent identity
	StrictArgs  bool                 // the arguments are inside the strict JCS profile
}

// Evidence is the evidence requirement of the governing rule (v1alpha1.EvidenceRequirement).
type Evidence struct {
	Role               string   // None | PolicyPermit | HumanAuthorization
	Principals         []string // who may resolve a binding moment for the call
	MinPrincipals      int      // distinct principals that must each choose the same option; 0 means 1
	SeparationOfDuties bool     // the initiating agent and the sink may not fill the role
}

// Alternative is a rule's declared alternative (v1alpha1.Alternative): an option a gate-authored
// binding moment offers beside the requested call.
type Alternative struct {
	Label     string
	Reasoning string
	// Args is an RFC 7396 JSON merge patch applied to the requested arguments.
	Args json.RawMessage
}

// PolicyDecision is policy's answer for one call.
type PolicyDecision struct {
	Outcome PolicyOutcome
	// Code is the EF code of a Deny (and, in audit mode, of what would have been refused).
	Code ef.EFCode
	// Message is safe to show the agent: no argument values, no other users' data.
	Message string
	// Policy and Rule name the governing policy and rule (for receipts and logs).
	Policy string
	Rule   string
	// Class is the consequence class the rule assigns ("" = the act's default).
	Class act.ConsequenceClass
	// Evidence is the rule's evidence requirement; its principals resolve escalations.
	Evidence Evidence
	// Alternatives are the rule's declared alternatives for a gate-authored binding moment.
	Alternatives []Alternative
	// MaskArguments are the rule's RFC 6901 pointers whose values principal surfaces show
	// masked; the action digest still binds the real values.
	MaskArguments []string
	// AuthorityTTL is the lifetime of an authority issued under the rule (0 = the gate default).
	AuthorityTTL time.Duration
	// RateLimit is the rule's rate limit, enforced by the gate in its process before the call
	// is registered, issued or sent; nil when the rule has none.
	RateLimit *policy.RateLimit
	// Budgets are the rule's budgets with the key this call charges (budget.go); nil when it
	// has none.
	Budgets []policy.BudgetCheck
	// Epoch is the policy epoch the decision was made under; it is bound into every authority,
	// and an authority of another epoch is refused (tool-use-binding §16 MUST 5).
	Epoch int64
	// Audit is true when the policy runs in mode Audit: Outcome is what enforcement would
	// decide, and the gate records it and lets the call through as an allow. Audit mode is
	// observation, never enforcement (action-evidence-boundary "Conformance and Deployment
	// Claims").
	Audit bool
}

// ServerInfo is one protected upstream server.
type ServerInfo struct {
	Name string
	// URL is the upstream the sink contacts: the destination authorities for the server are
	// bound to (a transport sets Call.Destination to it).
	URL string
}

// PolicyEvaluator is what the gate needs from internal/policy. It is an interface so the gate
// can be wired to the compiled ToolPolicy (policy.Compiled, through a small adapter) and
// tested against a table.
//
// Evaluate must fail closed: an evaluation error, an unknown server or tool, a missing policy is
// a PolicyDeny with a code, never a PolicyAllow.
type PolicyEvaluator interface {
	Evaluate(ctx context.Context, r PolicyRequest) PolicyDecision
	// CanEscalate reports whether a call of tool on server may escalate to a binding moment.
	CanEscalate(server, tool string) bool
	// Servers lists the protected servers.
	Servers() []ServerInfo
}
