package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/ef"
)

// state is what the checks of the chain see and establish, in order: the server, then the rule,
// then the class and the evidence role.
type state struct {
	ctx context.Context
	c   *Compiled
	req Request

	srv   *server
	rule  *rule
	class act.ConsequenceClass
	role  v1alpha1.EvidenceRole
	// escalatedBy is set when a provenance rule escalated the call (the role is then
	// HumanAuthorization whatever the rule's own role).
	escalatedBy bool
}

// traceFunc, when given (Explain), is told the result of each check of the chain as it runs.
type traceFunc func(i int, st *state, code ef.EFCode, message string, failed bool)

// check is one link of the evaluation chain (the cert-manager policies.Func shape): it either
// records what it established in st, or fails with an EF code and a message safe to show the
// agent. A check never panics and never performs I/O.
type check func(st *state) (code ef.EFCode, message string, failed bool)

// chain is an ordered list of checks; evaluate stops at the first that fails.
type chain []check

func (ch chain) evaluate(st *state, trace traceFunc) (ef.EFCode, string, bool) {
	for i, c := range ch {
		code, msg, failed := c(st)
		if trace != nil {
			trace(i, st, code, msg, failed)
		}
		if failed {
			return code, msg, true
		}
	}
	return "", "", false
}

// enforceChain is the decision of mode Enforce, in order. Order matters where two checks could
// both fail: the earlier one's code is what the agent sees.
func enforceChain() chain {
	return chain{
		// The context is live: a timed-out or cancelled evaluation never allows
		// (tool-use-binding §16 MUST 5; latest draft §18 "Timeout of that fetch MUST deny").
		contextLive,
		// The server is one this policy lists. A server the policy does not know has no rules,
		// so nothing about the call is declared (docs/architecture.md "Fail closed").
		serverDeclared,
		// The first rule in spec.rules order whose servers and tools match governs the call; a
		// call on a listed server that no rule matches is an unknown tool and is denied
		// (docs/architecture.md "Fail closed").
		ruleMatches,
		// The arguments are one JSON object: every vendor binding delivers an object
		// (tool-use-binding §6-8), and anything else was not mapped by internal/act.
		argumentsObject,
		// The live destination is the server's own origin, or, when the rule has an allowlist,
		// one of its entries (tool-use-binding §12 MCP_SERVER_SWAP and
		// COMPUTER_USE_ORIGIN_CHANGE, §22 T-D and T-E).
		destinationAllowed,
		// The class is the rule's consequenceClass, else the mapper's default (§20: assigned
		// before enforce()). The evidence role is the rule's, raised to PolicyPermit for the
		// classes the latest draft makes fail-closed (see classify).
		classify,
		// The first provenance rule whose sources and classes match applies: Deny refuses with
		// EF_INSTRUCTION_PROVENANCE_FAILURE (§12 INJECTED_EMAIL_SEND, §22 T-A), Escalate makes
		// the call need human authorization. Unknown provenance matches every source.
		provenanceRules,
		// Every CEL argument constraint is true. False, an error, a non-bool, an exceeded cost
		// limit or undecodable arguments deny (fail closed); no human can lift a constraint,
		// so this runs before escalation (§22 T-B: payout above the envelope is denied).
		argumentConstraints,
		// A call needing a human must have arguments a human can be bound to: inside the strict
		// profile (docs/architecture.md "Digests"; envelope-04 §6.3).
		humanBindable,
		// A call needing a human must have enough principals left once the initiating agent
		// (always) and the policy's sink (under separation of duties) are removed
		// (action-evidence-boundary, "separation-of-duty rule"); otherwise the escalation could
		// never resolve, and the call is denied now.
		principalsAvailable,
	}
}

func contextLive(st *state) (ef.EFCode, string, bool) {
	if st.ctx.Err() != nil {
		return ef.EF060, "policy evaluation timed out or was cancelled; the tool was not invoked", true
	}
	return "", "", false
}

func serverDeclared(st *state) (ef.EFCode, string, bool) {
	s := st.c.byName[st.req.Server]
	if s == nil {
		return ef.EFUnknownTool, fmt.Sprintf("server %s is not declared in policy %s", quote(st.req.Server), st.c.name), true
	}
	st.srv = s
	return "", "", false
}

func ruleMatches(st *state) (ef.EFCode, string, bool) {
	st.rule = st.c.match(st.req.Server, st.req.Tool)
	if st.rule == nil {
		return ef.EFUnknownTool, fmt.Sprintf("tool %s is not declared for server %s in policy %s", quote(st.req.Tool), st.srv.name, st.c.name), true
	}
	return "", "", false
}

func argumentsObject(st *state) (ef.EFCode, string, bool) {
	a := bytes.TrimLeft(st.req.Args, " \t\r\n")
	if len(a) == 0 || a[0] != '{' || !json.Valid(a) {
		return ef.EFActInvalid, fmt.Sprintf("the arguments of tool %s are not a JSON object", quote(st.req.Tool)), true
	}
	return "", "", false
}

func destinationAllowed(st *state) (ef.EFCode, string, bool) {
	live, path, ok := st.liveEndpoint()
	if !ok {
		return ef.EFDestinationMismatch, fmt.Sprintf("the destination of tool %s is missing or not an absolute URL", quote(st.req.Tool)), true
	}
	if len(st.rule.destinations) == 0 {
		if live != st.srv.origin || path != st.srv.path {
			return ef.EFDestinationMismatch, fmt.Sprintf("the live destination is not server %s (rule %s)", st.srv.name, st.rule.name), true
		}
		return "", "", false
	}
	for _, d := range st.rule.destinations {
		if d.matches(live, path) {
			return "", "", false
		}
	}
	return ef.EFDestinationMismatch, fmt.Sprintf("the live destination is not in the destinations of rule %s", st.rule.name), true
}

// liveEndpoint is the origin and path of Request.Destination. The server's configured URL and
// a declared server name are recognised without parsing (the hot path).
func (st *state) liveEndpoint() (string, string, bool) {
	d := st.req.Destination
	if d == "" {
		return "", "", false
	}
	if d == st.srv.url || d == st.srv.name {
		return st.srv.origin, st.srv.path, true
	}
	if s := st.c.byName[d]; s != nil {
		return s.origin, s.path, true
	}
	o, p, err := endpoint(d)
	return o, p, err == nil
}

// classify sets the effective class and role.
//
// The class is the rule's consequenceClass, else Request.Class when it is a valid class, else
// act.DefaultClass(tool) (tool-use-binding §20).
//
// The role is the rule's evidence role (None when omitted), except that None is raised to
// PolicyPermit for FINANCIAL, PHYSICAL and NETWORK_CONTROL: the latest draft of the binding
// makes fail-closed "the only conforming behavior" for those classes, "absent successfully
// verified, current, act-bound authority", so such a call always gets a single-use authority
// that the sink consumes, never the authority-free hot path.
func classify(st *state) (ef.EFCode, string, bool) {
	switch {
	case st.rule.class != "":
		st.class = st.rule.class
	case st.req.Class.Valid():
		st.class = st.req.Class
	default:
		st.class = act.DefaultClass(st.req.Tool)
	}
	st.role = st.rule.role
	if st.role == v1alpha1.EvidenceRoleNone && authorityRequired(st.class) {
		st.role = v1alpha1.EvidenceRolePolicyPermit
	}
	return "", "", false
}

// authorityRequired lists the classes above the latest draft's fail-closed threshold.
func authorityRequired(c act.ConsequenceClass) bool {
	switch c {
	case act.ClassFinancial, act.ClassPhysical, act.ClassNetworkControl:
		return true
	}
	return false
}

func provenanceRules(st *state) (ef.EFCode, string, bool) {
	src, known := provenanceSource(st.req.Provenance)
	for _, p := range st.rule.provenance {
		if known && !p.sources[src] {
			continue
		}
		if p.classes != nil && !p.classes[st.class] {
			continue
		}
		if p.action == v1alpha1.ProvenanceActionDeny {
			what := "provenance " + string(src)
			if !known {
				what = "unknown provenance"
			}
			return ef.EFInstructionProvenanceFailure, fmt.Sprintf("an instruction of %s cannot support a %s call of tool %s (rule %s)",
				what, st.class, quote(st.req.Tool), st.rule.name), true
		}
		st.role = v1alpha1.EvidenceRoleHumanAuthorization
		st.escalatedBy = true
		return "", "", false
	}
	return "", "", false
}

// provenanceSource normalises Request.Provenance. The act package's "tool" is tool_output;
// "", "unknown" and anything unrecognised are unknown (known=false), which matches every
// provenance rule: unknown provenance is treated as the least trusted source a rule lists
// (the API's ProvenanceRule.sources; tool-use-binding §24: provenance unknown plus a high class
// escalates).
func provenanceSource(s string) (v1alpha1.ProvenanceSource, bool) {
	switch s {
	case string(v1alpha1.ProvenanceUser), string(v1alpha1.ProvenanceSystem),
		string(v1alpha1.ProvenanceRetrieval), string(v1alpha1.ProvenanceToolOutput):
		return v1alpha1.ProvenanceSource(s), true
	case string(act.SourceTool):
		return v1alpha1.ProvenanceToolOutput, true
	}
	return "", false
}

func argumentConstraints(st *state) (ef.EFCode, string, bool) {
	if len(st.rule.args) == 0 {
		return "", "", false
	}
	args, err := celArgs(st.req.Args)
	if err != nil {
		return ef.EFPolicyDenied, fmt.Sprintf("the arguments of tool %s cannot be checked by rule %s: %s", quote(st.req.Tool), st.rule.name, argsProblem(err)), true
	}
	vars := map[string]any{"args": args}
	for i := range st.rule.args {
		k := &st.rule.args[i]
		switch evalConstraint(st.ctx, k.prg, vars) {
		case celTrue:
			continue
		case celCancelled:
			return ef.EF060, "policy evaluation timed out or was cancelled; the tool was not invoked", true
		case celFalse:
			return ef.EFPolicyDenied, constraintMessage(st.rule, k, false), true
		default:
			return ef.EFPolicyDenied, constraintMessage(st.rule, k, true), true
		}
	}
	return "", "", false
}

// argsProblem names why arguments could not be given to CEL without quoting them.
func argsProblem(err error) string {
	switch err {
	case errArgsNotObject:
		return "they are not a JSON object"
	case errNumberRange:
		return "an integer is outside the 64-bit range"
	}
	return "they are not valid I-JSON"
}

// constraintMessage is the rule author's message when there is one. An evaluation error (a
// missing argument, a failed conversion, the cost limit) says so, without CEL's error text.
func constraintMessage(r *rule, k *constraint, evalErr bool) string {
	switch {
	case k.message != "" && evalErr:
		return fmt.Sprintf("%s (rule %s, constraint %s could not be evaluated)", k.message, r.name, k.name)
	case k.message != "":
		return fmt.Sprintf("%s (rule %s, constraint %s)", k.message, r.name, k.name)
	case evalErr:
		return fmt.Sprintf("argument constraint %s of rule %s could not be evaluated", k.name, r.name)
	}
	return fmt.Sprintf("argument constraint %s of rule %s is not satisfied", k.name, r.name)
}

func humanBindable(st *state) (ef.EFCode, string, bool) {
	if st.role == v1alpha1.EvidenceRoleHumanAuthorization && !st.req.StrictArgs {
		return ef.EFArgumentsOutOfProfile, fmt.Sprintf("tool %s needs a human decision but its arguments are outside the strict canonical profile, "+
			"so they cannot be bound to one (rule %s)", quote(st.req.Tool), st.rule.name), true
	}
	return "", "", false
}

func principalsAvailable(st *state) (ef.EFCode, string, bool) {
	if st.role != v1alpha1.EvidenceRoleHumanAuthorization {
		return "", "", false
	}
	n := 0
	for _, p := range st.rule.principals {
		if eligible(p, st.req.Agent, st.c.sinkID, st.rule.sod) {
			n++
		}
	}
	if n < st.rule.minPrincipals {
		return ef.EFPolicyDenied, fmt.Sprintf("tool %s needs %d principal(s) other than the initiating agent and the sink; rule %s names only %d",
			quote(st.req.Tool), st.rule.minPrincipals, st.rule.name, n), true
	}
	return "", "", false
}

// match returns the first rule, in list order, whose servers and tools match.
func (c *Compiled) match(server, tool string) *rule {
	for _, r := range c.rules {
		if r.servers != nil && !r.servers[server] {
			continue
		}
		for _, g := range r.tools {
			if g.match(tool) {
				return r
			}
		}
	}
	return nil
}

// Evaluate decides what the sink does with r. It is pure (no I/O, no clock), safe for
// concurrent use, and never panics; every path it cannot settle is a Deny. A nil *Compiled
// denies everything. ctx bounds CEL evaluation: if it ends first the decision is a Deny with
// EF_060, never an Allow.
//
// In mode Audit the Enforce decision is computed and then reported, not applied: Outcome is
// Allow, Audit is true, AuditOutcome, Code and Message say what Enforce would have done, and
// WouldDeny is true when that was Deny or Escalate.
func (c *Compiled) Evaluate(ctx context.Context, r Request) Decision {
	return c.evaluate(ctx, r, nil)
}

// evaluate is Evaluate, telling trace (when not nil) the result of each check of the chain.
func (c *Compiled) evaluate(ctx context.Context, r Request, trace traceFunc) (d Decision) {
	if c == nil {
		return Decision{Outcome: OutcomeDeny, Code: ef.EFPolicyDenied, Message: "no policy governs this call"}
	}
	defer func() {
		// Nothing above is expected to panic; if it ever does, the call is denied, never
		// allowed and never audited through.
		if p := recover(); p != nil {
			d = Decision{Outcome: OutcomeDeny, Code: ef.EFPolicyDenied, Message: "policy evaluation failed", Policy: c.name, Epoch: c.epoch}
		}
	}()
	if ctx == nil {
		ctx = context.Background()
	}
	d = c.enforce(ctx, r, trace)
	if c.audit {
		d.Audit = true
		d.AuditOutcome = d.Outcome
		d.WouldDeny = d.Outcome == OutcomeDeny || d.Outcome == OutcomeEscalate
		d.Outcome = OutcomeAllow
	}
	return d
}

func (c *Compiled) enforce(ctx context.Context, r Request, trace traceFunc) Decision {
	st := state{ctx: ctx, c: c, req: r}
	code, msg, failed := c.chain.evaluate(&st, trace)
	d := Decision{Policy: c.name, Epoch: c.epoch, Class: st.class}
	if st.rule != nil {
		d.Rule = st.rule.name
		d.MaskArguments = slices.Clone(st.rule.masks)
	}
	if failed {
		d.Outcome, d.Code, d.Message = OutcomeDeny, code, msg
		return d
	}
	d.AuthorityTTL = st.rule.ttl
	d.RateLimit = st.rule.rate
	d.Evidence.Role = st.role
	budgets, bcode, bmsg := c.budgetChecks(ctx, st.rule, r)
	if bcode != "" {
		d.Outcome, d.Code, d.Message = OutcomeDeny, bcode, bmsg
		return d
	}
	d.Budgets = budgets
	switch st.role {
	case v1alpha1.EvidenceRoleNone:
		if len(budgets) > 0 {
			// Spending is charged when authority is consumed (docs/api.md "Budgets"): a
			// budgeted call takes the machine-permit path, never the hot path.
			d.Outcome = OutcomePermit
			break
		}
		d.Outcome = OutcomeAllow
		d.AuthorityTTL = 0 // no authority is issued on the hot path
	case v1alpha1.EvidenceRolePolicyPermit:
		d.Outcome = OutcomePermit
	default:
		d.Outcome = OutcomeEscalate
		d.Code = ef.EFEscalationRequired
		d.Message = fmt.Sprintf("tool %s requires a human decision before it can run (rule %s); request a binding moment", quote(r.Tool), st.rule.name)
		if st.escalatedBy {
			d.Message = fmt.Sprintf("tool %s requires a human decision because of where its instruction came from (rule %s); request a binding moment", quote(r.Tool), st.rule.name)
		}
		escalation(&d, st.rule)
	}
	if d.Outcome != OutcomeEscalate && slices.ContainsFunc(budgets, func(b BudgetCheck) bool { return b.Spec.Escalate }) {
		// The sink escalates a call over such a budget to the rule's principals.
		escalation(&d, st.rule)
	}
	return d
}

// escalation fills what a gate-authored binding moment needs from the rule: its principals and
// alternatives.
func escalation(d *Decision, r *rule) {
	sod := r.sod
	d.Evidence.Principals = append([]string(nil), r.principals...)
	d.Evidence.MinPrincipals = int32(r.minPrincipals)
	d.Evidence.SeparationOfDuties = &sod
	d.Alternatives = make([]v1alpha1.Alternative, len(r.alternatives))
	for i := range r.alternatives {
		r.alternatives[i].DeepCopyInto(&d.Alternatives[i])
	}
}

// maxQuoted bounds how much of an agent-supplied name a message repeats.
const maxQuoted = 128

// quote renders an agent-supplied name for a message: Go-quoted (so control characters and
// invalid UTF-8 are escaped) and truncated.
func quote(s string) string {
	if len(s) > maxQuoted {
		cut := maxQuoted
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return strconv.Quote(s[:cut]) + "…"
	}
	return strconv.Quote(s)
}

// Servers returns a copy of the servers the policy protects, in spec order.
func (c *Compiled) Servers() []v1alpha1.ToolServer {
	if c == nil {
		return nil
	}
	out := make([]v1alpha1.ToolServer, len(c.servers))
	for i := range c.servers {
		c.servers[i].DeepCopyInto(&out[i])
	}
	return out
}

// CanEscalate reports whether a call of tool on server may be escalated to a human under this
// policy: its governing rule requires HumanAuthorization or has an Escalate provenance action.
// It is advisory, for the emits_binding_moment annotation in tools/list; Evaluate decides. In
// mode Audit nothing escalates, so it is false.
func (c *Compiled) CanEscalate(server, tool string) bool {
	if c == nil || c.audit || c.byName[server] == nil {
		return false
	}
	r := c.match(server, tool)
	if r == nil {
		return false
	}
	if r.role == v1alpha1.EvidenceRoleHumanAuthorization {
		return true
	}
	for _, b := range r.budgets {
		if b.spec.Escalate {
			return true
		}
	}
	for _, p := range r.provenance {
		if p.action == v1alpha1.ProvenanceActionEscalate {
			return true
		}
	}
	return false
}

// Name is the name given to Compile.
func (c *Compiled) Name() string {
	if c == nil {
		return ""
	}
	return c.name
}

// Epoch is the policy epoch given to Compile.
func (c *Compiled) Epoch() int64 {
	if c == nil {
		return 0
	}
	return c.epoch
}

// Audit reports whether the policy is in mode Audit.
func (c *Compiled) Audit() bool {
	if c == nil {
		return false
	}
	return c.audit
}

// SinkID is spec.sink.id, "" when the policy leaves it to each sink.
func (c *Compiled) SinkID() string {
	if c == nil {
		return ""
	}
	return c.sinkID
}
