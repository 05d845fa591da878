package policy

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/budget"
	"github.com/actgate/actgate/internal/ef"
)

// Bounds of spec.rules[].budgets, as the CRD's schema states them.
const (
	maxBudgets           = 8
	maxBudgetKeyExprLen  = 1024
	maxBudgetMaxCalls    = 1_000_000_000
	serviceAccountPrefix = "system:serviceaccount:"
)

// BudgetCheck is one budget of the governing rule with the key this call charges: what the
// sink reads usage for before deciding, and charges when it consumes the call's authority
// (docs/api.md "Budgets").
type BudgetCheck struct {
	// Spec is the compiled budget.
	Spec budget.Spec
	// Ref names the policy and rule the budget belongs to.
	Ref budget.Ref
	// Key is the key this call charges (budget.DeriveKey).
	Key string
}

// budgetRule is one compiled budget of a rule.
type budgetRule struct {
	spec budget.Spec
	key  cel.Program // by Expression; nil otherwise
}

func compileBudgets(ps *problems, r *rule, env *cel.Env, f string, in []v1alpha1.Budget) {
	if len(in) > maxBudgets {
		ps.add(f, ReasonInvalidSpec, fmt.Sprintf("at most %d budgets", maxBudgets))
	}
	seen := map[string]bool{}
	for j := range in {
		b := &in[j]
		ff := fmt.Sprintf("%s[%d]", f, j)
		if !isDNSLabel(b.Name) {
			ps.add(ff+".name", ReasonInvalidSpec, "must be a DNS label")
		} else if seen[b.Name] {
			ps.add(ff+".name", ReasonInvalidSpec, fmt.Sprintf("duplicate budget name %q", b.Name))
		}
		seen[b.Name] = true
		br := budgetRule{spec: budget.Spec{Name: b.Name}}
		w, err := budget.NewWindow(durationOf(b.Window.Period), string(b.Window.Calendar), b.Window.TimeZone)
		if err != nil {
			ps.add(ff+".window", ReasonInvalidSpec, strings.TrimPrefix(err.Error(), "budget: invalid window: "))
		}
		br.spec.Window = w
		if b.MaxCalls == nil && b.Sum == nil {
			ps.add(ff, ReasonInvalidSpec, "a budget needs maxCalls, sum or both")
		}
		if b.MaxCalls != nil {
			if *b.MaxCalls < 1 || *b.MaxCalls > maxBudgetMaxCalls {
				ps.add(ff+".maxCalls", ReasonInvalidSpec, fmt.Sprintf("must be between 1 and %d", maxBudgetMaxCalls))
			}
			br.spec.MaxCalls = *b.MaxCalls
		}
		if b.Sum != nil {
			compileBudgetSum(ps, &br.spec, ff+".sum", b.Sum)
		}
		switch b.OnExceed {
		case "", v1alpha1.BudgetOnExceedDeny:
		case v1alpha1.BudgetOnExceedEscalate:
			br.spec.Escalate = true
		default:
			ps.add(ff+".onExceed", ReasonInvalidSpec, "must be Deny or Escalate")
		}
		br.spec.KeyBy = budget.KeyAgent
		if b.Key != nil {
			compileBudgetKey(ps, &br, env, ff+".key", b.Key)
		}
		r.budgets = append(r.budgets, br)
	}
}

func compileBudgetSum(ps *problems, s *budget.Spec, f string, in *v1alpha1.BudgetSum) {
	if _, err := budget.ParsePointer(in.Pointer); err != nil {
		ps.add(f+".pointer", ReasonInvalidSpec, err.Error())
	}
	s.Pointer = in.Pointer
	max, err := budget.ParseDecimal(in.Max)
	if err != nil {
		ps.add(f+".max", ReasonInvalidSpec, err.Error())
	}
	s.MaxSum = &max
	if len(in.Unit) > 16 || strings.ContainsFunc(in.Unit, func(r rune) bool {
		return !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-')
	}) {
		ps.add(f+".unit", ReasonInvalidSpec, "at most 16 of A-Z a-z 0-9 _ . -")
	}
	s.Unit = in.Unit
}

func compileBudgetKey(ps *problems, br *budgetRule, env *cel.Env, f string, in *v1alpha1.BudgetKey) {
	switch in.By {
	case "", v1alpha1.BudgetKeyAgent:
	case v1alpha1.BudgetKeyServiceAccount, v1alpha1.BudgetKeyNamespace, v1alpha1.BudgetKeyPolicy, v1alpha1.BudgetKeyExpression:
		br.spec.KeyBy = string(in.By)
	default:
		ps.add(f+".by", ReasonInvalidSpec, "must be Agent, ServiceAccount, Namespace, Policy or Expression")
		return
	}
	if (in.By == v1alpha1.BudgetKeyExpression) != (in.Expression != "") {
		ps.add(f+".expression", ReasonInvalidSpec, "expression is set exactly when by is Expression")
		return
	}
	if in.By != v1alpha1.BudgetKeyExpression || env == nil {
		return
	}
	prg, err := compileKeyExpression(env, in.Expression)
	if err != nil {
		ps.add(f+".expression", ReasonInvalidCEL, err.Error())
		return
	}
	br.key = prg
}

// compileKeyExpression compiles a budget key expression: CEL over args returning a string.
func compileKeyExpression(env *cel.Env, expr string) (cel.Program, error) {
	if len(expr) > maxBudgetKeyExprLen {
		return nil, fmt.Errorf("expression longer than %d bytes", maxBudgetKeyExprLen)
	}
	if strings.TrimSpace(expr) == "" {
		return nil, fmt.Errorf("empty expression")
	}
	ast, iss := env.Compile(expr)
	if iss != nil && iss.Err() != nil {
		return nil, fmt.Errorf("does not compile: %s", oneLine(iss.Err().Error()))
	}
	if !ast.OutputType().IsExactType(cel.StringType) && !ast.OutputType().IsExactType(cel.DynType) {
		return nil, fmt.Errorf("must return string, returns %s", ast.OutputType())
	}
	prg, err := env.Program(ast, cel.CostLimit(CostLimit), cel.InterruptCheckFrequency(interruptEvery))
	if err != nil {
		return nil, fmt.Errorf("cannot be planned: %s", oneLine(err.Error()))
	}
	return prg, nil
}

// budgetChecks derives each budget's key for the call. A key that cannot be derived (the
// expression fails, is not a string, or is empty, too long or unprintable) refuses the call with
// EF_BUDGET_LIMIT: it could not be counted, so it is not let through. The message never quotes
// the key or an argument.
func (c *Compiled) budgetChecks(ctx context.Context, r *rule, req Request) ([]BudgetCheck, ef.EFCode, string) {
	if len(r.budgets) == 0 {
		return nil, "", ""
	}
	ns, name, _ := strings.Cut(c.name, "/")
	if name == "" {
		ns, name = "", c.name
	}
	ref := budget.Ref{Namespace: ns, Policy: name, Rule: r.name}
	caller := budget.Caller{Agent: req.Agent, ServiceAccount: serviceAccountOf(req.Agent), Namespace: ns, Policy: name}
	var vars map[string]any
	out := make([]BudgetCheck, 0, len(r.budgets))
	for i := range r.budgets {
		b := &r.budgets[i]
		cl := caller
		if b.key != nil {
			if vars == nil {
				args, err := celArgs(req.Args)
				if err != nil {
					return nil, ef.EFBudgetLimit, fmt.Sprintf("budget %s of rule %s: the arguments cannot be read for its key", b.spec.Name, r.name)
				}
				vars = map[string]any{"args": args}
			}
			v, _, err := b.key.ContextEval(ctx, vars)
			if err != nil {
				if ctx.Err() != nil {
					return nil, ef.EF060, ""
				}
				return nil, ef.EFBudgetLimit, fmt.Sprintf("budget %s of rule %s: its key expression failed on this call", b.spec.Name, r.name)
			}
			if v == nil || v.Type() != types.StringType {
				return nil, ef.EFBudgetLimit, fmt.Sprintf("budget %s of rule %s: its key expression did not return a string", b.spec.Name, r.name)
			}
			cl.Expression, _ = v.Value().(string)
		}
		key, err := budget.DeriveKey(b.spec.KeyBy, cl)
		if err != nil {
			return nil, ef.EFBudgetLimit, fmt.Sprintf("budget %s of rule %s: no key for this call (empty, longer than %d bytes or not printable)",
				b.spec.Name, r.name, budget.MaxKeyBytes)
		}
		out = append(out, BudgetCheck{Spec: b.spec, Ref: ref, Key: key})
	}
	return out, "", ""
}

// serviceAccountOf returns "namespace/name" for a Kubernetes service account user name, else
// the agent itself (the standalone gate's agents are their own accounts).
func serviceAccountOf(agent string) string {
	rest, ok := strings.CutPrefix(agent, serviceAccountPrefix)
	if !ok {
		return agent
	}
	ns, name, ok := strings.Cut(rest, ":")
	if !ok || ns == "" || name == "" {
		return agent
	}
	return ns + "/" + name
}

// durationOf is d's duration, 0 for nil.
func durationOf(d *metav1.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return d.Duration
}
