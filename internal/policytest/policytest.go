// Package policytest is what `actgate policy test` and `actgate policy explain` run: the policy
// test file format (docs/api.md "Policy test files": Parse, its stable Code* errors), loading
// the policy a file names the way its server compiles it (Load), and deciding one call as the
// gate would (Policy.Decide), with how a decision is described and compared with a case's
// expectation. The commands themselves (flags, tables, exit codes) are cmd/actgate's.
package policytest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	sigsjson "sigs.k8s.io/json"

	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/budget"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/gateconfig"
	"github.com/actgate/actgate/internal/policy"
	"github.com/actgate/actgate/internal/sink"
	"github.com/actgate/actgate/internal/strictyaml"
)

// The policy test file format (docs/api.md "Policy test files").
const (
	APIVersion = "cli.actgate.io/v1alpha1"
	Kind       = "PolicyTest"
)

// Bounds of a policy test file and of one run.
const (
	MaxFileBytes = 1 << 20
	MaxCases     = 1000
	MaxFiles     = 256
	maxNameLen   = 200
)

// Stable codes of `actgate policy test` and `actgate policy explain` (docs/api.md "Policy
// test files"). Each stderr line begins with one.
const (
	// CodeFileInvalid: the test file is not one strict YAML mapping of the format (unknown
	// or case-differing field, duplicate key, several documents, wrong apiVersion or kind, no
	// cases, too large).
	CodeFileInvalid = "POLICYTEST_FILE_INVALID"
	// CodeCaseInvalid: a case is malformed (no or duplicate name, no tool, server or agent,
	// an unknown decision, provenance or EF code, a deny without its code, principals on a
	// decision other than escalate, arguments that are not an object).
	CodeCaseInvalid = "POLICYTEST_CASE_INVALID"
	// CodePolicyInvalid: the policy the file names is missing, unreadable, not a
	// ToolPolicy or gate configuration, or does not compile; or the file names none or both.
	CodePolicyInvalid = "POLICYTEST_POLICY_INVALID"
	// CodeNoFiles: the directory holds no *.yaml or *.yml file, or more than MaxFiles.
	CodeNoFiles = "POLICYTEST_NO_FILES"
	// CodeFailed: at least one case's decision differs from its expectation.
	CodeFailed = "POLICYTEST_FAILED"
)

// File is one policy test file.
type File struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Name names the test in the output; default the file name.
	Name   string    `json:"name,omitempty"`
	Policy PolicyRef `json:"policy"`
	// Defaults fill the fields a case's call leaves empty.
	Defaults Defaults `json:"defaults,omitempty"`
	Cases    []Case   `json:"cases"`
}

// PolicyRef names the policy under test: exactly one of a ToolPolicy file (a whole object
// or a bare spec) and a standalone gate configuration, whose policy is tested. Relative paths
// are resolved against the test file's directory.
type PolicyRef struct {
	ToolPolicy string `json:"toolPolicy,omitempty"`
	GateConfig string `json:"gateConfig,omitempty"`
}

// Defaults are the call fields a test file gives once for every case that leaves them empty.
type Defaults struct {
	Server      string `json:"server,omitempty"`
	Destination string `json:"destination,omitempty"`
	Provenance  string `json:"provenance,omitempty"`
	Agent       string `json:"agent,omitempty"`
}

// Case is one named call and the decision it is expected to get.
type Case struct {
	Name   string `json:"name"`
	Call   Call   `json:"call"`
	Expect Expect `json:"expect"`
}

// Call is one tool call as the gate would see it.
type Call struct {
	Server string `json:"server,omitempty"`
	// Destination is the live destination; default the server's URL in the policy.
	Destination string `json:"destination,omitempty"`
	Tool        string `json:"tool"`
	// Arguments is the argument object; default {}.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Provenance is user, system, retrieval, tool_output or unknown; default unknown.
	Provenance string `json:"provenance,omitempty"`
	Agent      string `json:"agent,omitempty"`
	// Spent is what the call's key has already spent, in the current window, of each of the
	// governing rule's budgets, by budget name (docs/api.md "Budgets"); a budget not named has
	// spent nothing.
	Spent map[string]Spending `json:"spent,omitempty"`
}

// Spending is a budget's prior spending in a test case: calls and the sum of its amounts.
type Spending struct {
	Calls  int64  `json:"calls,omitempty"`
	Amount string `json:"amount,omitempty"`
}

// Expect is what a case expects of the gate's decision.
type Expect struct {
	// Decision is allow, permit, escalate or deny.
	Decision string `json:"decision"`
	// Code is the EF code: required for deny; for escalate it may only be
	// EF_ESCALATION_REQUIRED.
	Code string `json:"code,omitempty"`
	// Rule, when set, is the governing rule's name ("" when no rule may match).
	Rule *string `json:"rule,omitempty"`
	// Class, when set, is the effective consequence class.
	Class string `json:"class,omitempty"`
	// Principals, when set (escalate only), are the principals who may resolve the moment,
	// in any order.
	Principals []string `json:"principals,omitempty"`
	// MinPrincipals, when set (escalate only), is how many distinct principals must decide.
	MinPrincipals *int `json:"minPrincipals,omitempty"`
}

// Error is a problem with a test file or a case, with its stable code.
type Error struct {
	// Code is the stable code (Code* constants); File the test file, when known.
	Code   string
	File   string
	detail string
}

func (e *Error) Error() string {
	if e.File == "" {
		return e.Code + " " + e.detail
	}
	return e.Code + " " + e.File + ": " + e.detail
}

func newError(code, file, format string, args ...any) *Error {
	return &Error{Code: code, File: file, detail: fmt.Sprintf(format, args...)}
}

// OneLine keeps a parser's message on one stderr line.
func OneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " | ")), " ")
}

// Parse decodes and checks a policy test file strictly: one YAML mapping, no duplicate
// keys, no unknown or case-differing fields, every case well formed. Defaults are applied.
// It never reads the policy (see Load).
func Parse(data []byte, file string) (*File, error) {
	if len(data) > MaxFileBytes {
		return nil, newError(CodeFileInvalid, file, "larger than %d bytes", MaxFileBytes)
	}
	j, err := strictyaml.MappingJSON(data)
	if err != nil {
		return nil, newError(CodeFileInvalid, file, "%s", OneLine(err.Error()))
	}
	var tf File
	if err := strictyaml.Unmarshal(j, &tf); err != nil {
		return nil, newError(CodeFileInvalid, file, "%s", OneLine(err.Error()))
	}
	switch {
	case tf.APIVersion != APIVersion || tf.Kind != Kind:
		return nil, newError(CodeFileInvalid, file, "apiVersion/kind must be %s/%s", APIVersion, Kind)
	case len(tf.Name) > maxNameLen:
		return nil, newError(CodeFileInvalid, file, "name: longer than %d bytes", maxNameLen)
	case len(tf.Cases) == 0:
		return nil, newError(CodeFileInvalid, file, "cases: at least one case")
	case len(tf.Cases) > MaxCases:
		return nil, newError(CodeFileInvalid, file, "cases: at most %d", MaxCases)
	case (tf.Policy.ToolPolicy == "") == (tf.Policy.GateConfig == ""):
		return nil, newError(CodePolicyInvalid, file, "policy: name exactly one of toolPolicy and gateConfig")
	}
	if tf.Name == "" {
		tf.Name = filepath.Base(file)
	}
	if err := checkProvenance(tf.Defaults.Provenance); err != nil {
		return nil, newError(CodeCaseInvalid, file, "defaults.provenance: %v", err)
	}
	seen := map[string]bool{}
	for i := range tf.Cases {
		c := &tf.Cases[i]
		f := fmt.Sprintf("cases[%d]", i)
		if c.Name == "" || len(c.Name) > maxNameLen {
			return nil, newError(CodeCaseInvalid, file, "%s.name: required, at most %d bytes", f, maxNameLen)
		}
		if seen[c.Name] {
			return nil, newError(CodeCaseInvalid, file, "%s.name: duplicate case name %q", f, c.Name)
		}
		seen[c.Name] = true
		ApplyDefaults(&c.Call, tf.Defaults)
		if err := CheckCall(&c.Call); err != nil {
			return nil, newError(CodeCaseInvalid, file, "%s (%s).call.%v", f, c.Name, err)
		}
		if err := CheckExpect(&c.Expect); err != nil {
			return nil, newError(CodeCaseInvalid, file, "%s (%s).expect.%v", f, c.Name, err)
		}
	}
	return &tf, nil
}

// ApplyDefaults fills the fields of c that are empty from d.
func ApplyDefaults(c *Call, d Defaults) {
	if c.Server == "" {
		c.Server = d.Server
	}
	if c.Destination == "" {
		c.Destination = d.Destination
	}
	if c.Provenance == "" {
		c.Provenance = d.Provenance
	}
	if c.Agent == "" {
		c.Agent = d.Agent
	}
	if len(c.Arguments) == 0 {
		c.Arguments = json.RawMessage(`{}`)
	}
}

// checkProvenance checks that p is a provenance the gate knows (user, system, retrieval,
// tool_output, unknown) or empty.
func checkProvenance(p string) error {
	switch p {
	case "", "unknown", "user", "system", "retrieval", "tool_output":
		return nil
	}
	return fmt.Errorf("%q is not user, system, retrieval, tool_output or unknown", p)
}

// CheckCall checks a call once defaults are applied: a tool, server and agent, a known
// provenance, arguments that are an object.
func CheckCall(c *Call) error {
	switch {
	case c.Server == "":
		return errors.New("server: required (here or in defaults)")
	case c.Tool == "":
		return errors.New("tool: required")
	case c.Agent == "":
		return errors.New("agent: required (here or in defaults)")
	}
	if err := checkProvenance(c.Provenance); err != nil {
		return fmt.Errorf("provenance: %v", err)
	}
	if a := bytes.TrimSpace(c.Arguments); len(a) == 0 || a[0] != '{' {
		return errors.New("arguments: must be an object")
	}
	if len(c.Spent) > maxSpent {
		return fmt.Errorf("spent: at most %d budgets", maxSpent)
	}
	for name, s := range c.Spent {
		if name == "" || len(name) > 63 {
			return fmt.Errorf("spent: %q is not a budget name", name)
		}
		if s.Calls < 0 || s.Calls > maxSpentCalls {
			return fmt.Errorf("spent.%s.calls: must be between 0 and %d", name, maxSpentCalls)
		}
		if s.Amount != "" {
			if _, err := budget.ParseDecimal(s.Amount); err != nil {
				return fmt.Errorf("spent.%s.amount: %v", name, err)
			}
		}
	}
	return nil
}

// Bounds of a case's stated spending.
const (
	maxSpent      = 8
	maxSpentCalls = 1_000_000_000
)

// decisions maps a test file's decision to the gate's policy outcome.
var decisions = map[string]sink.PolicyOutcome{
	"allow":    sink.PolicyAllow,
	"permit":   sink.PolicyPermit,
	"escalate": sink.PolicyEscalate,
	"deny":     sink.PolicyDeny,
}

// IsDecision reports whether d is a decision a test file may expect (allow, permit, escalate, deny).
func IsDecision(d string) bool {
	_, ok := decisions[d]
	return ok
}

// CheckExpect checks an expectation: a known decision, and the code, class and principals it
// may carry.
func CheckExpect(e *Expect) error {
	o, ok := decisions[e.Decision]
	if !ok {
		return fmt.Errorf("decision: %q is not allow, permit, escalate or deny", e.Decision)
	}
	if e.Code != "" && !ef.EFCode(e.Code).Known() {
		return fmt.Errorf("code: %q is not an EF code", e.Code)
	}
	switch o {
	case sink.PolicyDeny:
		if e.Code == "" {
			return errors.New("code: required for deny")
		}
		if e.Code == string(ef.EFEscalationRequired) {
			return errors.New("code: EF_ESCALATION_REQUIRED is decision escalate")
		}
	case sink.PolicyEscalate:
		if e.Code != "" && e.Code != string(ef.EFEscalationRequired) {
			return errors.New("code: an escalation's code is EF_ESCALATION_REQUIRED")
		}
	default:
		if e.Code != "" {
			return fmt.Errorf("code: decision %s has no code", e.Decision)
		}
	}
	if o != sink.PolicyEscalate && (e.Principals != nil || e.MinPrincipals != nil) {
		return errors.New("principals, minPrincipals: only for decision escalate")
	}
	if e.Class != "" && !act.ConsequenceClass(e.Class).Valid() {
		return fmt.Errorf("class: %q is not a consequence class", e.Class)
	}
	return nil
}

// Policy is a compiled policy under test with what the gate serving it would put in an
// act.
type Policy struct {
	Compiled *policy.Compiled
	eval     sink.PolicyEvaluator
	sinkID   string
	Source   string // the file it came from
}

// Load reads and compiles the policy a test file (or explain's flags) names, the way
// its server does: a gate configuration through gateconfig (as `actgate serve`), a ToolPolicy
// under its namespace/name at epoch 1 (as the authority service and the sidecars). The gate
// evaluates it through sink.CompiledPolicy, so the tests do too.
func Load(ref PolicyRef, dir string) (*Policy, error) {
	resolve := func(p string) string {
		if filepath.IsAbs(p) || dir == "" {
			return p
		}
		return filepath.Join(dir, p)
	}
	if ref.GateConfig != "" {
		path := resolve(ref.GateConfig)
		cfg, err := gateconfig.Load(path)
		if err != nil {
			return nil, newError(CodePolicyInvalid, "", "%s", OneLine(err.Error()))
		}
		c, err := cfg.Compile()
		if err != nil {
			return nil, newError(CodePolicyInvalid, "", "%s: %s", path, OneLine(err.Error()))
		}
		return &Policy{Compiled: c, eval: sink.CompiledPolicy(c), sinkID: cfg.SinkID, Source: path}, nil
	}
	path := resolve(ref.ToolPolicy)
	data, err := ReadBounded(path, policy.MaxFileBytes)
	if err != nil {
		return nil, newError(CodePolicyInvalid, "", "%s", OneLine(err.Error()))
	}
	spec, err := policy.ParseSpec(data)
	if err != nil {
		return nil, newError(CodePolicyInvalid, "", "%s: %s", path, OneLine(err.Error()))
	}
	c, err := policy.Compile(toolPolicyName(data), spec, 1)
	if err != nil {
		return nil, newError(CodePolicyInvalid, "", "%s: %s", path, OneLine(err.Error()))
	}
	sinkID := sinkID
	if spec.Sink != nil && spec.Sink.ID != "" {
		sinkID = spec.Sink.ID
	}
	return &Policy{Compiled: c, eval: sink.CompiledPolicy(c), sinkID: sinkID, Source: path}, nil
}

// sinkID is the sink id in the acts of a ToolPolicy test whose policy leaves the sink id to
// each sink. No decision depends on it.
const sinkID = "actgate-policy-test"

// toolPolicyName is namespace/name of a whole ToolPolicy object (namespace "default" when
// omitted), or "policy" for a bare spec. ParseSpec has already checked the document.
func toolPolicyName(data []byte) string {
	j, err := strictyaml.MappingJSON(data)
	if err != nil {
		return "policy"
	}
	var probe struct {
		Metadata struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(j, &probe); err != nil || probe.Metadata.Name == "" {
		return "policy"
	}
	ns := probe.Metadata.Namespace
	if ns == "" {
		ns = "default"
	}
	return ns + "/" + probe.Metadata.Name
}

// ReadBounded reads the file at path, refusing one larger than limit bytes.
func ReadBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, limit)
	}
	return data, nil
}

// Result is what the gate decides for one call.
type Result struct {
	Decision sink.PolicyDecision
	// Steps are the chain's checks as policy.Explain ran them; nil when the call did not reach
	// policy.
	Steps []policy.Step
	// Mapping is set when the gate refuses the call before policy, because it does not map to
	// an act (the gate's EF_ACT_INVALID).
	Mapping string
	// Budget names the budget that decided the call, when one did: the Deny budget it would
	// pass (EF_BUDGET_EXCEEDED), or the Escalate budgets it would pass, comma-separated.
	Budget string
	// BudgetDetail states the numbers of the deciding budgets.
	BudgetDetail string
}

// Decide runs a call through what the gate runs: the call is mapped to an act as the gate
// maps it (act.NewCandidate, so the arguments are canonicalized and the class and strictness
// are the mapper's), then evaluated by the sink's PolicyEvaluator for the compiled policy.
// Explain runs the same chain once more for the per-check report; the two decisions must agree.
func (tp *Policy) Decide(ctx context.Context, c Call) (Result, error) {
	dest := c.Destination
	if dest == "" {
		dest = c.Server // a declared server's name stands for its URL
		for _, s := range tp.Compiled.Servers() {
			if s.Name == c.Server {
				dest = s.URL
			}
		}
	}
	prov := c.Provenance
	if prov == "unknown" {
		prov = ""
	}
	ids, err := testIDIssuer()
	if err != nil {
		return Result{}, err
	}
	cand, err := act.NewCandidate(act.Input{Vendor: act.VendorMCP, VendorID: "1", ToolName: c.Tool, Arguments: c.Arguments},
		act.MappingContext{
			SessionID:   "policy-test",
			Principal:   act.Principal{PrincipalID: c.Agent},
			Agent:       act.Agent{AgentID: c.Agent},
			Server:      act.ServerIdentity{Name: c.Server, URL: dest},
			Destination: dest,
			SinkID:      tp.sinkID,
			Provenance:  actSource(prov),
			Now:         time.Now,
			TTL:         time.Minute,
			IDs:         ids,
		})
	if err != nil {
		code := "unknown"
		if ac, ok := act.CodeOf(err); ok {
			code = string(ac)
		}
		return Result{
			Decision: sink.PolicyDecision{Outcome: sink.PolicyDeny, Code: ef.EFActInvalid, Message: "the call does not map to an act (" + code + ")"},
			Mapping:  code,
		}, nil
	}
	pr := sink.PolicyRequest{
		Server:      c.Server,
		Destination: dest,
		Tool:        c.Tool,
		Args:        cand.Arguments,
		Class:       cand.Act.ConsequenceClass,
		Provenance:  prov,
		Agent:       c.Agent,
		StrictArgs:  cand.Strict(),
	}
	dec := tp.eval.Evaluate(ctx, pr)
	pd, steps := tp.Compiled.Explain(ctx, policy.Request{
		Server: pr.Server, Destination: pr.Destination, Tool: pr.Tool, Args: pr.Args,
		Class: pr.Class, Provenance: pr.Provenance, Agent: pr.Agent, StrictArgs: pr.StrictArgs,
	})
	outcome := pd.Outcome
	if pd.Audit {
		outcome = pd.AuditOutcome
	}
	if sink.PolicyOutcome(outcome) != dec.Outcome || pd.Code != dec.Code || pd.Rule != dec.Rule {
		return Result{}, fmt.Errorf("explain decided %s %s (rule %q), the gate %s %s (rule %q)", outcome, pd.Code, pd.Rule, dec.Outcome, dec.Code, dec.Rule)
	}
	res := Result{Decision: dec, Steps: steps}
	if err := judgeBudgets(ctx, &res, c, cand.Arguments); err != nil {
		return Result{}, err
	}
	return res, nil
}

// judgeBudgets applies the gate's check of the rule's budgets (internal/sink budget.go) to the
// decision, with the case's stated spending as the ledger.
func judgeBudgets(ctx context.Context, res *Result, c Call, canonical []byte) error {
	d := &res.Decision
	for name := range c.Spent {
		if !slices.ContainsFunc(d.Budgets, func(b policy.BudgetCheck) bool { return b.Spec.Name == name }) {
			return fmt.Errorf("spent names budget %q, which the governing rule %q does not have", name, d.Rule)
		}
	}
	if len(d.Budgets) == 0 || d.Outcome == sink.PolicyDeny || d.Audit {
		return nil
	}
	now := time.Now()
	ledger := budget.NewMemory(func() time.Time { return now })
	specs := make([]budget.Spec, len(d.Budgets))
	charges := make([]budget.Charge, len(d.Budgets))
	for i, b := range d.Budgets {
		specs[i] = b.Spec
		if s, ok := c.Spent[b.Spec.Name]; ok {
			var amount budget.Decimal
			if s.Amount != "" {
				amount = budget.MustDecimal(s.Amount) // checked by CheckCall
			}
			if err := ledger.Charge(ctx, "prior-"+b.Spec.Name, []budget.Charge{b.Spec.PriorSpending(b.Ref, b.Key, s.Calls, amount, now)}); err != nil {
				return err
			}
		}
		ch, err := b.Spec.ChargeCall(b.Ref, b.Key, c.Arguments, canonical, now)
		if err != nil {
			d.Outcome, d.Code, d.Message = sink.PolicyDeny, ef.EFBudgetLimit, ef.EFBudgetLimit.Description()
			res.Budget = b.Spec.Name
			return nil
		}
		charges[i] = ch
	}
	over, err := budget.Assess(ctx, ledger, charges, now)
	if err != nil {
		return err
	}
	deny, escalate := budget.Judge(specs, over)
	switch {
	case deny != nil:
		d.Outcome, d.Code, d.Message = sink.PolicyDeny, ef.EFBudgetExceeded, deny.Error()
		res.Budget, res.BudgetDetail = deny.Budget, deny.Error()
	case len(escalate) > 0:
		d.Outcome, d.Code = sink.PolicyEscalate, ef.EFEscalationRequired
		var names, details []string
		for _, e := range escalate {
			names = append(names, e.Budget)
			details = append(details, budget.Finding(e))
		}
		res.Budget, res.BudgetDetail = strings.Join(names, ","), strings.Join(details, " ")
	}
	return nil
}

// actSource is the act's source type for a provenance, as the gate maps it.
func actSource(p string) act.SourceType {
	switch p {
	case "user", "system":
		return act.SourceUser
	case "retrieval":
		return act.SourceRetrieval
	case "tool_output":
		return act.SourceTool
	}
	return act.SourceUnknown
}

func testIDIssuer() (*act.IDIssuer, error) {
	key := make([]byte, act.MinIDKeyBytes)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	return act.NewIDIssuer(key, nil)
}

// DecidedBy names what decided a call: the governing rule, and for a deny the check that
// refused it.
func (r Result) DecidedBy() string {
	rule := r.Decision.Rule
	if rule == "" {
		rule = "-"
	}
	if r.Mapping != "" {
		return "- (act mapping)"
	}
	if r.Budget != "" {
		return rule + " (budget " + r.Budget + ")"
	}
	for _, s := range r.Steps {
		if s.Result == policy.StepFailed {
			return rule + " (" + s.Check + ")"
		}
	}
	return rule
}

// Describe renders a decision for the table: "allow", "permit", "deny EF_…",
// "escalate [alice] min 1"; "(audit)" marks a policy in mode Audit, whose decision is what
// enforcement would do.
func Describe(d sink.PolicyDecision) string {
	var b strings.Builder
	b.WriteString(strings.ToLower(string(d.Outcome)))
	switch d.Outcome {
	case sink.PolicyDeny:
		b.WriteString(" " + string(d.Code))
	case sink.PolicyEscalate:
		ps := slices.Clone(d.Evidence.Principals)
		slices.Sort(ps)
		fmt.Fprintf(&b, " [%s] min %d", strings.Join(ps, ","), max(d.Evidence.MinPrincipals, 1))
	}
	if d.Audit {
		b.WriteString(" (audit)")
	}
	return b.String()
}

// DescribeExpect is an expectation as the test table shows it.
func DescribeExpect(e Expect) string {
	var b strings.Builder
	b.WriteString(e.Decision)
	if e.Code != "" && e.Decision == "deny" {
		b.WriteString(" " + e.Code)
	}
	if e.Principals != nil {
		ps := slices.Clone(e.Principals)
		slices.Sort(ps)
		fmt.Fprintf(&b, " [%s]", strings.Join(ps, ","))
	}
	if e.MinPrincipals != nil {
		fmt.Fprintf(&b, " min %d", *e.MinPrincipals)
	}
	return b.String()
}

// Mismatch says how d differs from e, "" when it meets it.
func Mismatch(e Expect, d sink.PolicyDecision) string {
	var why []string
	if decisions[e.Decision] != d.Outcome {
		why = append(why, "decision "+strings.ToLower(string(d.Outcome)))
	}
	if e.Code != "" && ef.EFCode(e.Code) != d.Code {
		why = append(why, "code "+string(d.Code))
	}
	if e.Rule != nil && *e.Rule != d.Rule {
		why = append(why, fmt.Sprintf("rule %q", d.Rule))
	}
	if e.Class != "" && act.ConsequenceClass(e.Class) != d.Class {
		why = append(why, "class "+string(d.Class))
	}
	if d.Outcome == sink.PolicyEscalate {
		if e.Principals != nil {
			want, got := slices.Clone(e.Principals), slices.Clone(d.Evidence.Principals)
			slices.Sort(want)
			slices.Sort(got)
			if !slices.Equal(want, got) {
				why = append(why, "principals ["+strings.Join(got, ",")+"]")
			}
		}
		if e.MinPrincipals != nil && *e.MinPrincipals != max(d.Evidence.MinPrincipals, 1) {
			why = append(why, fmt.Sprintf("minPrincipals %d", max(d.Evidence.MinPrincipals, 1)))
		}
	}
	return strings.Join(why, ", ")
}
