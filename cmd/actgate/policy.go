package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/actgate/actgate/internal/budget"
	"github.com/actgate/actgate/internal/policy"
	"github.com/actgate/actgate/internal/policytest"
	"github.com/actgate/actgate/internal/strictyaml"
)

func newPolicyCmd(s streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Test a ToolPolicy before rollout, and explain its decision for one call",
		Long: `Commands that run a ToolPolicy (or a standalone gate configuration's policy) over tool calls
offline, with the evaluation the gate and the sidecars run (docs/api.md "Policy test files").`,
		Args: cobra.NoArgs,
		RunE: showHelp,
	}
	cmd.AddCommand(newPolicyTestCmd(s), newPolicyExplainCmd(s))
	return cmd
}

func newPolicyTestCmd(s streams) *cobra.Command {
	return &cobra.Command{
		Use:   "test DIR|FILE...",
		Short: "Run policy test files and print a pass/fail table",
		Long: `Run each policy test file (kind PolicyTest, docs/api.md "Policy test files"): compile the
policy it names, decide each case's tool call as the gate would, and compare the decision with
the case's expectation. A DIR stands for every *.yaml and *.yml file directly in it, each of
which must be a test file.

stdout has one table per file: each case, what was expected, what the gate decided, the rule
that decided it (and, for a deny, the check of the chain that refused it) and PASS or FAIL.
Exit 0 when every case passes. Exit 1 when a case fails (stderr: POLICYTEST_FAILED) or a test
file is malformed (stderr: POLICYTEST_FILE_INVALID, POLICYTEST_CASE_INVALID,
POLICYTEST_POLICY_INVALID, POLICYTEST_NO_FILES); the other files still run. Exit 2 when a
path cannot be read.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			files, err := testFiles(args)
			if err != nil {
				return err
			}
			return runPolicyTests(cmd.Context(), s.out, files)
		},
	}
}

// testFiles expands the arguments: a file is itself, a directory its *.yaml and *.yml files in
// name order.
func testFiles(args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		fi, err := os.Stat(a)
		if err != nil {
			return nil, usageError("%v", err)
		}
		if !fi.IsDir() {
			out = append(out, a)
			continue
		}
		ents, err := os.ReadDir(a)
		if err != nil {
			return nil, usageError("%v", err)
		}
		n := 0
		for _, e := range ents {
			if ext := filepath.Ext(e.Name()); !e.IsDir() && (ext == ".yaml" || ext == ".yml") {
				out = append(out, filepath.Join(a, e.Name()))
				n++
			}
		}
		if n == 0 {
			return nil, fail(exitRejected, fmt.Sprintf("%s %s: no *.yaml or *.yml file", policytest.CodeNoFiles, a))
		}
	}
	if len(out) > policytest.MaxFiles {
		return nil, fail(exitRejected, fmt.Sprintf("%s more than %d test files", policytest.CodeNoFiles, policytest.MaxFiles))
	}
	return out, nil
}

func runPolicyTests(ctx context.Context, out io.Writer, files []string) error {
	if ctx == nil {
		ctx = context.Background()
	}
	var problems []string
	total, failed := 0, 0
	for _, file := range files {
		data, err := readTestFile(file)
		if err != nil {
			return usageError("%v", err)
		}
		tf, err := policytest.Parse(data, file)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		tp, err := policytest.Load(tf.Policy, filepath.Dir(file))
		if err != nil {
			var te *policytest.Error
			if errors.As(err, &te) {
				te.File = file
			}
			problems = append(problems, err.Error())
			continue
		}
		fmt.Fprintf(out, "%s: %s (policy %s from %s)\n", file, tf.Name, tp.Compiled.Name(), tp.Source)
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tCASE\tEXPECTED\tDECISION\tDECIDED BY\tRESULT")
		for i, c := range tf.Cases {
			total++
			res, err := tp.Decide(ctx, c.Call)
			if err != nil {
				return fail(exitRejected, fmt.Sprintf("%s %s: case %q: %v", policytest.CodeFailed, file, c.Name, err))
			}
			result := "PASS"
			if why := policytest.Mismatch(c.Expect, res.Decision); why != "" {
				result = "FAIL (got " + why + ")"
				failed++
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", i+1, c.Name, policytest.DescribeExpect(c.Expect), policytest.Describe(res.Decision), res.DecidedBy(), result)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(out)
	}
	fmt.Fprintf(out, "%d of %d cases passed in %d file(s)", total-failed, total, len(files)-len(problems))
	if len(problems) > 0 {
		fmt.Fprintf(out, "; %d file(s) not run", len(problems))
	}
	fmt.Fprintln(out)
	if failed > 0 {
		problems = append(problems, fmt.Sprintf("%s %d of %d cases failed", policytest.CodeFailed, failed, total))
	}
	if len(problems) > 0 {
		return fail(exitRejected, problems...)
	}
	return nil
}

func newPolicyExplainCmd(s streams) *cobra.Command {
	var (
		ref      policytest.PolicyRef
		call     policytest.Call
		args     string
		argsFile string
		testFile string
		caseName string
	)
	cmd := &cobra.Command{
		Use:   "explain (--tool-policy FILE | --gate-config FILE) --server S --tool T --agent A [flags] | --test FILE --case NAME",
		Short: "Show every check of the policy's chain for one call, in order, with its result",
		Long: `Decide one tool call as the gate would and show each check of the evaluation chain in order:
pass, fail (with its EF code and message) or not reached, with what the evaluation had
established after it (server, rule, class, evidence role), then the decision.

The call comes from the flags, with the policy from --tool-policy or --gate-config, or from one
case of a policy test file (--test FILE --case NAME), with that file's policy; flags given
beside --test override the case's call. Exit 0 whatever the decision; 1 when the policy or test
file is malformed (its POLICYTEST_* code); 2 on usage errors.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if args != "" && argsFile != "" {
				return usageError("give --args or --args-file, not both")
			}
			if argsFile != "" {
				data, err := policytest.ReadBounded(argsFile, policytest.MaxFileBytes)
				if err != nil {
					return usageError("%v", err)
				}
				args = string(data)
			}
			dir := ""
			if testFile != "" {
				if caseName == "" || ref.ToolPolicy != "" || ref.GateConfig != "" {
					return usageError("--test needs --case NAME and no --tool-policy or --gate-config")
				}
				data, err := readTestFile(testFile)
				if err != nil {
					return usageError("%v", err)
				}
				tf, err := policytest.Parse(data, testFile)
				if err != nil {
					return fail(exitRejected, err.Error())
				}
				i := slices.IndexFunc(tf.Cases, func(c policytest.Case) bool { return c.Name == caseName })
				if i < 0 {
					return usageError("%s has no case %q", testFile, caseName)
				}
				ref, dir = tf.Policy, filepath.Dir(testFile)
				overrideCall(&tf.Cases[i].Call, call)
				call = tf.Cases[i].Call
			} else if caseName != "" {
				return usageError("--case needs --test")
			}
			if args != "" {
				j, err := strictyaml.MappingJSON([]byte(args))
				if err != nil {
					return usageError("--args: %s", policytest.OneLine(err.Error()))
				}
				call.Arguments = json.RawMessage(j)
			}
			if (ref.ToolPolicy == "") == (ref.GateConfig == "") {
				return usageError("give exactly one of --tool-policy, --gate-config and --test")
			}
			policytest.ApplyDefaults(&call, policytest.Defaults{})
			if err := policytest.CheckCall(&call); err != nil {
				return usageError("%s", strings.TrimSuffix(err.Error(), " (here or in defaults)"))
			}
			tp, err := policytest.Load(ref, dir)
			if err != nil {
				return fail(exitRejected, err.Error())
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			res, err := tp.Decide(ctx, call)
			if err != nil {
				return fail(exitRejected, err.Error())
			}
			return writeExplanation(s.out, tp, call, res)
		},
	}
	f := cmd.Flags()
	f.StringVar(&ref.ToolPolicy, "tool-policy", "", "a ToolPolicy file (a whole object or a bare spec)")
	f.StringVar(&ref.GateConfig, "gate-config", "", "a standalone gate configuration, whose policy is used")
	f.StringVar(&testFile, "test", "", "a policy test file: take the policy and the call from it")
	f.StringVar(&caseName, "case", "", "the case of --test to explain")
	f.StringVar(&call.Server, "server", "", "the ToolServer name the call is addressed to")
	f.StringVar(&call.Tool, "tool", "", "the tool name")
	f.StringVar(&args, "args", "", "the argument object, JSON or YAML (default {})")
	f.StringVar(&argsFile, "args-file", "", "a file holding the argument object")
	f.StringVar(&call.Provenance, "provenance", "", "user, system, retrieval, tool_output or unknown (default unknown)")
	f.StringVar(&call.Agent, "agent", "", "the initiating agent identity")
	f.StringVar(&call.Destination, "destination", "", "the live destination (default the server's URL)")
	return cmd
}

// readTestFile reads at most one byte more than a test file may hold, so that policytest.Parse
// refuses a larger one with its code.
func readTestFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, policytest.MaxFileBytes+1))
}

// overrideCall sets in c every field given in flags.
func overrideCall(c *policytest.Call, flags policytest.Call) {
	for _, p := range []struct{ dst, src *string }{
		{&c.Server, &flags.Server}, {&c.Tool, &flags.Tool}, {&c.Provenance, &flags.Provenance},
		{&c.Agent, &flags.Agent}, {&c.Destination, &flags.Destination},
	} {
		if *p.src != "" {
			*p.dst = *p.src
		}
	}
}

func writeExplanation(out io.Writer, tp *policytest.Policy, c policytest.Call, res policytest.Result) error {
	mode := "Enforce"
	if tp.Compiled.Audit() {
		mode = "Audit"
	}
	prov := c.Provenance
	if prov == "" {
		prov = "unknown"
	}
	fmt.Fprintf(out, "policy %s (mode %s) from %s\n", tp.Compiled.Name(), mode, tp.Source)
	fmt.Fprintf(out, "call: server %s, tool %q, provenance %s, agent %s\n\n", c.Server, c.Tool, prov, c.Agent)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tCHECK\tRESULT\tESTABLISHED\tDETAIL")
	if res.Mapping != "" {
		fmt.Fprintf(tw, "0\tact mapping\tfail\t\t%s %s\n", res.Decision.Code, res.Decision.Message)
		for i, n := range tp.Compiled.CheckNames() {
			fmt.Fprintf(tw, "%d\t%s\t%s\t\t\n", i+1, n, policy.StepNotReached)
		}
	}
	var prev policy.Step
	for i, st := range res.Steps {
		detail := st.Description
		if st.Result == policy.StepFailed {
			detail = string(st.Code) + " " + st.Message
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", i+1, st.Check, st.Result, established(prev, st), detail)
		prev = st
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(out, "\ndecision: %s", policytest.Describe(res.Decision))
	if res.Decision.Rule != "" {
		fmt.Fprintf(out, " (rule %s", res.Decision.Rule)
		if res.Decision.Class != "" {
			fmt.Fprintf(out, ", class %s", res.Decision.Class)
		}
		fmt.Fprint(out, ")")
	}
	fmt.Fprintln(out)
	if res.Decision.Message != "" {
		fmt.Fprintf(out, "message: %s\n", res.Decision.Message)
	}
	for _, b := range res.Decision.Budgets {
		fmt.Fprintf(out, "budget %s: %s, key %s%s\n", b.Spec.Name, budgetLimits(b.Spec), b.Key, decidedMark(res.Budget, b.Spec.Name))
	}
	if res.BudgetDetail != "" {
		fmt.Fprintf(out, "budget decided: %s\n", res.BudgetDetail)
	}
	return nil
}

// budgetLimits describes a budget's limits and window: "20 calls and 10000 EUR per Day in
// Europe/Berlin, onExceed Escalate".
func budgetLimits(s budget.Spec) string {
	var lim []string
	if s.MaxCalls > 0 {
		lim = append(lim, fmt.Sprintf("%d calls", s.MaxCalls))
	}
	if s.MaxSum != nil {
		l := s.MaxSum.String() + " at " + s.Pointer
		if s.Unit != "" {
			l = s.MaxSum.String() + " " + s.Unit + " at " + s.Pointer
		}
		lim = append(lim, l)
	}
	on := "Deny"
	if s.Escalate {
		on = "Escalate"
	}
	return fmt.Sprintf("%s per %s, onExceed %s", strings.Join(lim, " and "), s.Window, on)
}

// decidedMark marks the budget(s) that decided the call.
func decidedMark(decided, name string) string {
	if slices.Contains(strings.Split(decided, ","), name) {
		return " (decided)"
	}
	return ""
}

// established renders what a step established beyond the step before it, "-" when nothing.
func established(prev, st policy.Step) string {
	if st.Result == policy.StepNotReached {
		return ""
	}
	var parts []string
	if st.Server != prev.Server {
		parts = append(parts, "server "+st.Server)
	}
	if st.Rule != prev.Rule {
		parts = append(parts, "rule "+st.Rule)
	}
	if st.Class != prev.Class {
		parts = append(parts, "class "+string(st.Class))
	}
	if st.Role != prev.Role {
		parts = append(parts, "role "+string(st.Role))
	}
	if st.EscalatedByProvenance && !prev.EscalatedByProvenance {
		parts = append(parts, "escalated by provenance")
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}
