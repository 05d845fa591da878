package policy

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/cel-go/cel"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/argmask"
	"github.com/actgate/actgate/internal/jcs"
	"github.com/actgate/actgate/internal/ratelimit"
)

// Bounds of the API (toolpolicy_types.go markers), checked again here because the standalone
// gate's policy file never passes through the API server.
const (
	maxServers      = 16
	maxRules        = 64
	maxTools        = 32
	maxRuleServers  = 16
	maxArguments    = 16
	maxMessageLen   = 512
	maxDestinations = 32
	maxProvenance   = 8
	maxSources      = 4
	maxClasses      = 8
	maxAlternatives = 3
	maxPrincipals   = 32
	maxPrincipalLen = 253
	maxMinPrincs    = 8
	maxLabelLen     = 200
	maxReasoningLen = 1000
	maxSinkIDLen    = 253

	minTTL = time.Second
	maxTTL = time.Hour
)

// defaultTTL is v1alpha1.DefaultAuthorityTTL.
const defaultTTL = 60 * time.Second

// isDNSLabel is the API's name pattern `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`, at most 63 bytes.
func isDNSLabel(s string) bool {
	if s == "" || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(('a' <= c && c <= 'z') || ('0' <= c && c <= '9') || c == '-') {
			return false
		}
	}
	return true
}

// isSinkID is the API's sink id pattern `^[A-Za-z0-9]([-A-Za-z0-9_.:/]*[A-Za-z0-9])?$`.
func isSinkID(s string) bool {
	if s == "" || len(s) > maxSinkIDLen || !isAlnum(s[0]) || !isAlnum(s[len(s)-1]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && !strings.ContainsRune("-_.:/", rune(c)) {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9')
}

// Compiled is a ToolPolicySpec with everything checked and every CEL expression compiled. It is
// immutable and safe for concurrent use.
type Compiled struct {
	name     string
	epoch    int64
	audit    bool
	selector labels.Selector
	sinkID   string
	ttl      time.Duration
	servers  []v1alpha1.ToolServer // deep copy, for Servers()
	byName   map[string]*server
	rules    []*rule
	chain    chain
	// elicitation holds the classes spec.elicitation lists (ElicitationAllowed).
	elicitation map[act.ConsequenceClass]bool
}

type server struct {
	name   string
	origin string // origin of the URL: the server's destination identity
	path   string // the URL's path: an MCP server is one URL, so another path is another server
	url    string // as configured, for a fast exact-match path
}

// destination is an entry of a rule's destinations: an origin, and for a server name that
// server's path too ("" for an origin entry: any path at the origin).
type destination struct {
	origin, path string
}

// matches says whether a live endpoint is this destination.
func (d destination) matches(origin, path string) bool {
	return origin == d.origin && (d.path == "" || path == d.path)
}

type rule struct {
	name    string
	tools   []glob
	servers map[string]bool // nil: every listed server
	class   act.ConsequenceClass

	role          v1alpha1.EvidenceRole
	principals    []string
	minPrincipals int
	sod           bool

	args         []constraint
	destinations []destination // nil: only the server's own URL (origin and path)
	provenance   []provenanceRule
	alternatives []v1alpha1.Alternative
	masks        []string // RFC 6901 pointers shown masked on principal surfaces
	ttl          time.Duration
	rate         *RateLimit // nil: no rate limit
	pin          *pinSpec   // nil: the rule pins no tool definition
	budgets      []budgetRule
}

type provenanceRule struct {
	sources map[v1alpha1.ProvenanceSource]bool
	classes map[act.ConsequenceClass]bool // nil: every class
	action  v1alpha1.ProvenanceAction
}

// Compile checks spec and compiles it. name is the policy's namespace/name (it appears in every
// Decision); epoch is status.policyEpoch, recorded in every Decision so authorities are bound to
// it. On any defect it returns a *CompileError listing every problem, each with its field path
// and Reason. spec is not retained: Compile copies what it keeps.
func Compile(name string, spec *v1alpha1.ToolPolicySpec, epoch int64) (*Compiled, error) {
	var ps problems
	if spec == nil {
		ps.add("spec", ReasonInvalidSpec, "no spec")
		return nil, &CompileError{Policy: name, Problems: ps}
	}
	c := &Compiled{name: name, epoch: epoch, byName: map[string]*server{}, chain: enforceChain()}
	if epoch < 0 {
		ps.add("status.policyEpoch", ReasonInvalidSpec, "must not be negative")
	}

	switch spec.Mode {
	case "", v1alpha1.PolicyModeEnforce:
	case v1alpha1.PolicyModeAudit:
		c.audit = true
	default:
		ps.add("spec.mode", ReasonInvalidSpec, fmt.Sprintf("must be %s or %s", v1alpha1.PolicyModeEnforce, v1alpha1.PolicyModeAudit))
	}

	sel, err := metav1.LabelSelectorAsSelector(&spec.PodSelector)
	if err != nil {
		ps.add("spec.podSelector", ReasonInvalidSpec, oneLine(err.Error()))
	}
	c.selector = sel

	if spec.Sink != nil {
		if id := spec.Sink.ID; !isSinkID(id) {
			ps.add("spec.sink.id", ReasonInvalidSpec, "must be 1-253 characters of A-Z a-z 0-9 - _ . : /, starting and ending alphanumeric")
		} else {
			c.sinkID = id
		}
	}

	c.ttl = compileTTL(&ps, "spec.authorityTTL", spec.AuthorityTTL, defaultTTL)
	compileServers(&ps, c, spec.Servers)

	if len(spec.Rules) > maxRules {
		ps.add("spec.rules", ReasonInvalidSpec, fmt.Sprintf("at most %d rules", maxRules))
	}
	env, err := newCELEnv()
	if err != nil { // a bug in this package, not in the spec; still reported, never served
		ps.add("spec.rules", ReasonInvalidCEL, "CEL environment: "+oneLine(err.Error()))
	}
	seen := map[string]bool{}
	for i := range spec.Rules {
		r := &spec.Rules[i]
		f := fmt.Sprintf("spec.rules[%d]", i)
		if seen[r.Name] {
			ps.add(f+".name", ReasonInvalidSpec, fmt.Sprintf("duplicate rule name %q", r.Name))
		}
		seen[r.Name] = true
		c.rules = append(c.rules, compileRule(&ps, c, env, f, r))
	}
	compileElicitation(&ps, c, spec.Elicitation)

	if len(ps) > 0 {
		return nil, &CompileError{Policy: name, Problems: ps}
	}
	return c, nil
}

func compileTTL(ps *problems, f string, d *metav1.Duration, def time.Duration) time.Duration {
	if d == nil {
		return def
	}
	if d.Duration < minTTL || d.Duration > maxTTL {
		ps.add(f, ReasonInvalidSpec, "must be between 1s and 1h")
		return def
	}
	return d.Duration
}

func compileServers(ps *problems, c *Compiled, servers []v1alpha1.ToolServer) {
	switch {
	case len(servers) == 0:
		ps.add("spec.servers", ReasonInvalidSpec, "at least one server is required")
	case len(servers) > maxServers:
		ps.add("spec.servers", ReasonInvalidSpec, fmt.Sprintf("at most %d servers", maxServers))
	}
	for i := range servers {
		s := &servers[i]
		f := fmt.Sprintf("spec.servers[%d]", i)
		if !isDNSLabel(s.Name) {
			ps.add(f+".name", ReasonInvalidSpec, "must be a DNS label")
		} else if c.byName[s.Name] != nil {
			ps.add(f+".name", ReasonInvalidSpec, fmt.Sprintf("duplicate server name %q", s.Name))
		}
		switch s.Protocol {
		case "", v1alpha1.ServerProtocolMCP:
		default:
			ps.add(f+".protocol", ReasonInvalidSpec, "must be MCP")
		}
		o, err := httpOrigin(s.URL)
		if err != nil || len(s.URL) > 2048 {
			ps.add(f+".url", ReasonInvalidSpec, "must be an absolute http or https URL")
		}
		_, path, _ := endpoint(s.URL)
		if _, dup := c.byName[s.Name]; !dup {
			c.byName[s.Name] = &server{name: s.Name, origin: o, path: path, url: s.URL}
		}
		c.servers = append(c.servers, *s.DeepCopy())
	}
}

func compileRule(ps *problems, c *Compiled, env *cel.Env, f string, in *v1alpha1.ToolRule) *rule {
	r := &rule{name: in.Name, sod: true, minPrincipals: 1, role: v1alpha1.EvidenceRoleNone}
	if !isDNSLabel(in.Name) {
		ps.add(f+".name", ReasonInvalidSpec, "must be a DNS label")
	}

	switch {
	case len(in.Tools) == 0:
		ps.add(f+".tools", ReasonInvalidSpec, "at least one tool pattern is required")
	case len(in.Tools) > maxTools:
		ps.add(f+".tools", ReasonInvalidSpec, fmt.Sprintf("at most %d tool patterns", maxTools))
	}
	for j, p := range in.Tools {
		g, err := compileGlob(p)
		if err != nil {
			ps.add(fmt.Sprintf("%s.tools[%d]", f, j), ReasonInvalidSpec, err.Error())
			continue
		}
		r.tools = append(r.tools, g)
	}

	if len(in.Servers) > maxRuleServers {
		ps.add(f+".servers", ReasonInvalidSpec, fmt.Sprintf("at most %d servers", maxRuleServers))
	}
	if len(in.Servers) > 0 {
		r.servers = map[string]bool{}
	}
	for j, s := range in.Servers {
		ff := fmt.Sprintf("%s.servers[%d]", f, j)
		switch {
		case c.byName[s] == nil:
			ps.add(ff, ReasonUnknownServer, fmt.Sprintf("server %q is not in spec.servers", s))
		case r.servers[s]:
			ps.add(ff, ReasonInvalidSpec, fmt.Sprintf("duplicate server %q", s))
		}
		r.servers[s] = true
	}

	if in.ConsequenceClass != "" {
		if cl := act.ConsequenceClass(in.ConsequenceClass); cl.Valid() {
			r.class = cl
		} else {
			ps.add(f+".consequenceClass", ReasonInvalidSpec, "not a consequence class of tool-use-binding §10")
		}
	}

	compileEvidence(ps, r, f+".evidence", in.Evidence)
	compileArguments(ps, r, env, f+".arguments", in.Arguments)
	compileDestinations(ps, c, r, f+".destinations", in.Destinations)
	escalates := compileProvenance(ps, r, f+".provenance", in.Provenance)
	compileAlternatives(ps, r, f+".alternatives", in.Alternatives)
	compileMasks(ps, r, f+".maskArguments", in.MaskArguments)
	compilePin(ps, c, r, f+".pin", in.Pin)

	// A rule that can escalate must be able to reach a human and offer a choice
	// (binding-moment-envelope-04 §5.6: 2-4 options, the requested call being one).
	if r.role == v1alpha1.EvidenceRoleHumanAuthorization || escalates {
		why := "HumanAuthorization evidence"
		if r.role != v1alpha1.EvidenceRoleHumanAuthorization {
			why = "an Escalate provenance action"
		}
		if len(r.principals) < r.minPrincipals {
			ps.add(f+".evidence.principals", ReasonInvalidSpec, fmt.Sprintf("a rule with %s must name at least minPrincipals (%d) principals", why, r.minPrincipals))
		}
		if len(in.Alternatives) == 0 {
			ps.add(f+".alternatives", ReasonInvalidSpec, fmt.Sprintf("a rule with %s must declare at least one alternative", why))
		}
	}

	r.ttl = compileTTL(ps, f+".authorityTTL", in.AuthorityTTL, c.ttl)
	r.rate = compileRate(ps, f+".rateLimit", in.RateLimit)
	compileBudgets(ps, r, env, f+".budgets", in.Budgets)
	if slices.ContainsFunc(r.budgets, func(b budgetRule) bool { return b.spec.Escalate }) {
		// Over such a budget a person decides (binding-moment-envelope-04 §5.6: 2-4 options).
		if len(r.principals) < 1 {
			ps.add(f+".evidence.principals", ReasonInvalidSpec, "a rule with an Escalate budget must name evidence principals")
		}
		if len(in.Alternatives) == 0 {
			ps.add(f+".alternatives", ReasonInvalidSpec, "a rule with an Escalate budget must declare at least one alternative")
		}
	}
	return r
}

// Bounds of spec.rules[].rateLimit, as the CRD's schema states them.
const (
	maxRateCalls  = 1_000_000
	minRatePeriod = time.Second
	maxRatePeriod = 24 * time.Hour
)

func compileRate(ps *problems, f string, in *v1alpha1.RateLimit) *RateLimit {
	if in == nil {
		return nil
	}
	out := &RateLimit{Limit: ratelimit.Limit{Calls: int(in.Calls), Period: in.Period.Duration, Burst: int(in.Burst)}}
	if out.Burst == 0 {
		out.Burst = out.Calls
	}
	ok := true
	if in.Calls < 1 || in.Calls > maxRateCalls {
		ps.add(f+".calls", ReasonInvalidSpec, fmt.Sprintf("must be between 1 and %d", maxRateCalls))
		ok = false
	}
	if in.Burst < 0 || in.Burst > maxRateCalls {
		ps.add(f+".burst", ReasonInvalidSpec, fmt.Sprintf("must be between 1 and %d", maxRateCalls))
		ok = false
	}
	if in.Period.Duration < minRatePeriod || in.Period.Duration > maxRatePeriod {
		ps.add(f+".period", ReasonInvalidSpec, "must be between 1s and 24h")
		ok = false
	}
	switch in.Per {
	case "", v1alpha1.RateLimitPerAgent:
	case v1alpha1.RateLimitPerPod:
		out.PerPod = true
	default:
		ps.add(f+".per", ReasonInvalidSpec, "must be Agent or Pod")
		ok = false
	}
	if !ok {
		return nil
	}
	return out
}

func compileEvidence(ps *problems, r *rule, f string, ev *v1alpha1.EvidenceRequirement) {
	if ev == nil {
		return
	}
	switch ev.Role {
	case "", v1alpha1.EvidenceRoleNone:
	case v1alpha1.EvidenceRolePolicyPermit, v1alpha1.EvidenceRoleHumanAuthorization:
		r.role = ev.Role
	default:
		ps.add(f+".role", ReasonInvalidSpec, "must be None, PolicyPermit or HumanAuthorization")
	}
	switch {
	case ev.MinPrincipals == 0:
	case ev.MinPrincipals < 1 || ev.MinPrincipals > maxMinPrincs:
		ps.add(f+".minPrincipals", ReasonInvalidSpec, fmt.Sprintf("must be between 1 and %d", maxMinPrincs))
	default:
		r.minPrincipals = int(ev.MinPrincipals)
	}
	if ev.SeparationOfDuties != nil {
		r.sod = *ev.SeparationOfDuties
	}
	if len(ev.Principals) > maxPrincipals {
		ps.add(f+".principals", ReasonInvalidSpec, fmt.Sprintf("at most %d principals", maxPrincipals))
	}
	seen := map[string]bool{}
	for j, p := range ev.Principals {
		ff := fmt.Sprintf("%s.principals[%d]", f, j)
		switch {
		case p == "" || len(p) > maxPrincipalLen:
			ps.add(ff, ReasonInvalidSpec, "must be 1-253 characters")
			continue
		case seen[p]:
			ps.add(ff, ReasonInvalidSpec, fmt.Sprintf("duplicate principal %q", p))
			continue
		}
		seen[p] = true
		r.principals = append(r.principals, p)
	}
}

func compileArguments(ps *problems, r *rule, env *cel.Env, f string, args []v1alpha1.ArgumentConstraint) {
	if len(args) > maxArguments {
		ps.add(f, ReasonInvalidSpec, fmt.Sprintf("at most %d argument constraints", maxArguments))
	}
	seen := map[string]bool{}
	for j := range args {
		a := &args[j]
		ff := fmt.Sprintf("%s[%d]", f, j)
		if !isDNSLabel(a.Name) {
			ps.add(ff+".name", ReasonInvalidSpec, "must be a DNS label")
		} else if seen[a.Name] {
			ps.add(ff+".name", ReasonInvalidSpec, fmt.Sprintf("duplicate constraint name %q", a.Name))
		}
		seen[a.Name] = true
		if len(a.Message) > maxMessageLen {
			ps.add(ff+".message", ReasonInvalidSpec, fmt.Sprintf("at most %d characters", maxMessageLen))
		}
		if env == nil {
			continue
		}
		prg, err := compileConstraint(env, a.Expression)
		if err != nil {
			ps.add(ff+".expression", ReasonInvalidCEL, err.Error())
			continue
		}
		r.args = append(r.args, constraint{name: a.Name, message: a.Message, prg: prg})
	}
}

func compileDestinations(ps *problems, c *Compiled, r *rule, f string, dests []string) {
	if len(dests) > maxDestinations {
		ps.add(f, ReasonInvalidSpec, fmt.Sprintf("at most %d destinations", maxDestinations))
	}
	for j, d := range dests {
		ff := fmt.Sprintf("%s[%d]", f, j)
		if isDNSLabel(d) {
			s := c.byName[d]
			if s == nil {
				ps.add(ff, ReasonUnknownServer, fmt.Sprintf("server %q is not in spec.servers", d))
				continue
			}
			r.destinations = append(r.destinations, destination{origin: s.origin, path: s.path})
			continue
		}
		rest, ok := strings.CutPrefix(d, "https://")
		if !ok {
			rest, ok = strings.CutPrefix(d, "http://")
		}
		o, err := httpOrigin(d)
		if !ok || err != nil || rest == "" || strings.ContainsAny(rest, "/?#@ \t\r\n") || len(d) > 512 {
			ps.add(ff, ReasonInvalidSpec, "must be a server name or an origin scheme://host[:port] (http or https, no path)")
			continue
		}
		r.destinations = append(r.destinations, destination{origin: o})
	}
}

// compileProvenance reports whether any provenance rule escalates.
func compileProvenance(ps *problems, r *rule, f string, prov []v1alpha1.ProvenanceRule) bool {
	if len(prov) > maxProvenance {
		ps.add(f, ReasonInvalidSpec, fmt.Sprintf("at most %d provenance rules", maxProvenance))
	}
	escalates := false
	for j := range prov {
		p := &prov[j]
		ff := fmt.Sprintf("%s[%d]", f, j)
		pr := provenanceRule{sources: map[v1alpha1.ProvenanceSource]bool{}, action: p.Action}
		switch {
		case len(p.Sources) == 0:
			ps.add(ff+".sources", ReasonInvalidSpec, "at least one source is required")
		case len(p.Sources) > maxSources:
			ps.add(ff+".sources", ReasonInvalidSpec, fmt.Sprintf("at most %d sources", maxSources))
		}
		for k, s := range p.Sources {
			switch s {
			case v1alpha1.ProvenanceUser, v1alpha1.ProvenanceSystem, v1alpha1.ProvenanceRetrieval, v1alpha1.ProvenanceToolOutput:
				pr.sources[s] = true
			default:
				ps.add(fmt.Sprintf("%s.sources[%d]", ff, k), ReasonInvalidSpec, "must be user, system, retrieval or tool_output")
			}
		}
		if len(p.Classes) > maxClasses {
			ps.add(ff+".classes", ReasonInvalidSpec, fmt.Sprintf("at most %d classes", maxClasses))
		}
		if len(p.Classes) > 0 {
			pr.classes = map[act.ConsequenceClass]bool{}
		}
		for k, cl := range p.Classes {
			if ac := act.ConsequenceClass(cl); ac.Valid() {
				pr.classes[ac] = true
			} else {
				ps.add(fmt.Sprintf("%s.classes[%d]", ff, k), ReasonInvalidSpec, "not a consequence class of tool-use-binding §10")
			}
		}
		switch p.Action {
		case v1alpha1.ProvenanceActionDeny:
		case v1alpha1.ProvenanceActionEscalate:
			escalates = true
		default:
			ps.add(ff+".action", ReasonInvalidSpec, "must be Deny or Escalate")
		}
		r.provenance = append(r.provenance, pr)
	}
	return escalates
}

// compileMasks checks the rule's argument masks: RFC 6901 pointers into the arguments, each
// naming a value below the whole object, unique, within argmask's bounds.
func compileMasks(ps *problems, r *rule, f string, masks []string) {
	if len(masks) > argmask.MaxPointers {
		ps.add(f, ReasonInvalidSpec, fmt.Sprintf("at most %d pointers", argmask.MaxPointers))
	}
	seen := map[string]bool{}
	for j, m := range masks {
		ff := fmt.Sprintf("%s[%d]", f, j)
		if _, err := argmask.Parse(m); err != nil {
			ps.add(ff, ReasonInvalidSpec, strings.TrimPrefix(err.Error(), "argmask: "))
			continue
		}
		if seen[m] {
			ps.add(ff, ReasonInvalidSpec, "repeats an earlier pointer")
			continue
		}
		seen[m] = true
		r.masks = append(r.masks, m)
	}
	slices.Sort(r.masks)
}

func compileAlternatives(ps *problems, r *rule, f string, alts []v1alpha1.Alternative) {
	if len(alts) > maxAlternatives {
		ps.add(f, ReasonInvalidSpec, fmt.Sprintf("at most %d alternatives (the requested call is the other option of 2-4, envelope-04 §5.6)", maxAlternatives))
	}
	for j := range alts {
		a := &alts[j]
		ff := fmt.Sprintf("%s[%d]", f, j)
		if strings.TrimSpace(a.Label) == "" || len(a.Label) > maxLabelLen {
			ps.add(ff+".label", ReasonInvalidSpec, fmt.Sprintf("must be 1-%d characters", maxLabelLen))
		}
		if strings.TrimSpace(a.Reasoning) == "" || len(a.Reasoning) > maxReasoningLen {
			ps.add(ff+".reasoning", ReasonInvalidSpec, fmt.Sprintf("must be 1-%d characters", maxReasoningLen))
		}
		// The patched call becomes an option a human binds to, so the patch itself must be a
		// JSON object inside the strict profile (envelope-04 §6.3; docs/architecture.md "Digests").
		canon, err := jcs.Canonicalize(a.Args.Raw, jcs.Strict)
		if err != nil || len(canon) == 0 || canon[0] != '{' {
			ps.add(ff+".args", ReasonInvalidSpec, "must be a JSON object (a merge patch) within the strict canonical profile")
		}
		r.alternatives = append(r.alternatives, *a.DeepCopy())
	}
}
