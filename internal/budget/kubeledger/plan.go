package kubeledger

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/cel-go/cel"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/budget"
	"github.com/actgate/actgate/internal/policy"
)

// AnnotationCharges is the Act annotation holding, as JSON, the budget charges its authority is
// charged with when consumed (Plan.Annotation): recorded when the authority service issues the
// authority, read back when it consumes it, so every replica charges the same ledgers.
const AnnotationCharges = "actgate.io/budget-charges"

// maxKeyPrograms bounds the compiled key expressions a Planner keeps; at the bound it forgets them.
const maxKeyPrograms = 1024

// Plan is what one call charges: one charge per budget of its governing rule.
type Plan struct {
	Charges []budget.Charge
	// Escalate names the budgets whose onExceed is Escalate.
	Escalate map[string]bool
}

// Planner builds the charges of a call from its ToolPolicy (spec.rules[].budgets), for the
// authority service, which decides with its own copy of the policy and never with what a sidecar
// says. It is safe for concurrent use.
type Planner struct {
	mu    sync.Mutex
	progs map[string]cel.Program
	env   *cel.Env
}

// NewPlanner returns a Planner.
func NewPlanner() (*Planner, error) {
	env, err := cel.NewEnv(cel.Variable("args", cel.MapType(cel.StringType, cel.DynType)))
	if err != nil {
		return nil, fmt.Errorf("kubeledger: CEL environment: %w", err)
	}
	return &Planner{env: env, progs: map[string]cel.Program{}}, nil
}

// ErrNoRule: the decision names a rule the policy does not hold (the policy changed under it).
var ErrNoRule = errors.New("kubeledger: the governing rule is not in the policy")

// Plan returns the charges of a call governed by rule of p, made by caller with args at now;
// a rule without budgets charges nothing. A budget whose key or amount cannot be read is an
// error wrapping budget.ErrLimit (EF_BUDGET_LIMIT): the call is refused.
func (pl *Planner) Plan(ctx context.Context, p *v1alpha1.ToolPolicy, rule string, caller budget.Caller, args []byte, now time.Time) (Plan, error) {
	var r *v1alpha1.ToolRule
	for i := range p.Spec.Rules {
		if p.Spec.Rules[i].Name == rule {
			r = &p.Spec.Rules[i]
		}
	}
	if r == nil {
		if rule == "" {
			return Plan{}, nil
		}
		return Plan{}, fmt.Errorf("%w: %q", ErrNoRule, rule)
	}
	if len(r.Budgets) == 0 {
		return Plan{}, nil
	}
	ref := budget.Ref{Namespace: p.Namespace, Policy: p.Name, Rule: r.Name}
	caller.Namespace, caller.Policy = p.Namespace, p.Name
	out := Plan{Escalate: map[string]bool{}}
	for _, b := range r.Budgets {
		s, err := specOf(b)
		if err != nil {
			return Plan{}, fmt.Errorf("%w: budget %q: %w", budget.ErrLimit, b.Name, err)
		}
		c := caller
		if s.KeyBy == budget.KeyExpression {
			if c.Expression, err = pl.key(ctx, b.Key.Expression, args); err != nil {
				return Plan{}, fmt.Errorf("%w: budget %q: %w", budget.ErrLimit, b.Name, err)
			}
		}
		key, err := budget.DeriveKey(s.KeyBy, c)
		if err != nil {
			return Plan{}, fmt.Errorf("%w: budget %q: %w", budget.ErrLimit, b.Name, err)
		}
		ch, err := s.Charge(ref, key, args, now)
		if err != nil {
			return Plan{}, fmt.Errorf("budget %q: %w", b.Name, err)
		}
		out.Charges = append(out.Charges, ch)
		out.Escalate[b.Name] = s.Escalate
	}
	return out, nil
}

// specOf compiles an API budget.
func specOf(b v1alpha1.Budget) (budget.Spec, error) {
	var period time.Duration
	if b.Window.Period != nil {
		period = b.Window.Period.Duration
	}
	w, err := budget.NewWindow(period, string(b.Window.Calendar), b.Window.TimeZone)
	if err != nil {
		return budget.Spec{}, err
	}
	s := budget.Spec{Name: b.Name, Window: w, KeyBy: budget.KeyAgent, Escalate: b.OnExceed == v1alpha1.BudgetOnExceedEscalate}
	if b.Key != nil && b.Key.By != "" {
		s.KeyBy = string(b.Key.By)
	}
	if b.MaxCalls != nil {
		s.MaxCalls = *b.MaxCalls
	}
	if b.Sum != nil {
		d, err := budget.ParseDecimal(b.Sum.Max)
		if err != nil {
			return budget.Spec{}, err
		}
		if _, err := budget.ParsePointer(b.Sum.Pointer); err != nil {
			return budget.Spec{}, err
		}
		s.MaxSum, s.Pointer, s.Unit = &d, b.Sum.Pointer, b.Sum.Unit
	}
	return s, nil
}

// key evaluates a budget's key expression over the call's arguments: a string, or an error.
func (pl *Planner) key(ctx context.Context, expr string, args []byte) (string, error) {
	prg, err := pl.program(expr)
	if err != nil {
		return "", err
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(args))
	if err := dec.Decode(&m); err != nil || m == nil {
		return "", fmt.Errorf("%w: the arguments are not a JSON object", budget.ErrKey)
	}
	v, _, err := prg.ContextEval(ctx, map[string]any{"args": m})
	if err != nil {
		return "", fmt.Errorf("%w: the key expression failed: %w", budget.ErrKey, err)
	}
	s, ok := v.Value().(string)
	if !ok {
		return "", fmt.Errorf("%w: the key expression returned %s, not a string", budget.ErrKey, v.Type().TypeName())
	}
	return s, nil
}

func (pl *Planner) program(expr string) (cel.Program, error) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if p, ok := pl.progs[expr]; ok {
		return p, nil
	}
	ast, iss := pl.env.Compile(expr)
	if iss.Err() != nil {
		return nil, fmt.Errorf("%w: the key expression does not compile: %w", budget.ErrKey, iss.Err())
	}
	if !ast.OutputType().IsExactType(cel.StringType) && !ast.OutputType().IsExactType(cel.DynType) {
		return nil, fmt.Errorf("%w: the key expression's type is %s, not string", budget.ErrKey, ast.OutputType())
	}
	prg, err := pl.env.Program(ast, cel.CostLimit(policy.CostLimit), cel.InterruptCheckFrequency(100))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", budget.ErrKey, err)
	}
	if len(pl.progs) >= maxKeyPrograms {
		clear(pl.progs)
	}
	pl.progs[expr] = prg
	return prg, nil
}

// Annotation is the plan's charges as AnnotationCharges holds them.
func (p Plan) Annotation() (string, error) {
	b, err := json.Marshal(p.Charges)
	return string(b), err
}

// ChargesOf reads the charges an Act's annotations record: none when it has no AnnotationCharges.
// A value that is not a list of at most budget.MaxChargesPerOp charges is an error (refuse).
func ChargesOf(annotations map[string]string) ([]budget.Charge, error) {
	v, ok := annotations[AnnotationCharges]
	if !ok {
		return nil, nil
	}
	var cs []budget.Charge
	if err := json.Unmarshal([]byte(v), &cs); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", budget.ErrLimit, AnnotationCharges, err)
	}
	if len(cs) > budget.MaxChargesPerOp {
		return nil, fmt.Errorf("%w: %s holds %d charges", budget.ErrLimit, AnnotationCharges, len(cs))
	}
	return cs, nil
}

// Ledgers are the ledger ids of charges.
func Ledgers(cs []budget.Charge) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.Ledger)
	}
	return out
}

// Unenforced returns charges with Enforce false: a person approved the call past the limits.
func Unenforced(cs []budget.Charge) []budget.Charge {
	out := make([]budget.Charge, len(cs))
	for i, c := range cs {
		c.Enforce = false
		out[i] = c
	}
	return out
}
