package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/actgate/actgate/internal/policytest"
)

// The shipped policy test files are the samples' regression suite: every one passes.
var shippedPolicyTests = []string{
	"../../config/samples/tests",
	"../../testdata/gate/tests",
}

func runCLI(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func TestShippedPolicyTestsPass(t *testing.T) {
	for _, dir := range shippedPolicyTests {
		files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no test files (%v)", dir, err)
		}
		for _, f := range files {
			t.Run(f, func(t *testing.T) {
				code, out, errs := runCLI("policy", "test", f)
				if code != exitOK || errs != "" {
					t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
				}
				if strings.Contains(out, "FAIL (") || !strings.Contains(out, "PASS") {
					t.Fatalf("table:\n%s", out)
				}
			})
		}
	}
	// A directory stands for its files.
	code, out, errs := runCLI(append([]string{"policy", "test"}, shippedPolicyTests...)...)
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	t.Logf("\n%s", out)
}

// abs is the absolute path of a file of the repository, for test files written elsewhere.
func abs(t *testing.T, rel string) string {
	t.Helper()
	p, err := filepath.Abs(rel)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func writeTestFile(t *testing.T, doc string) string {
	t.Helper()
	doc = strings.ReplaceAll(doc, "$SAMPLE", abs(t, "../../config/samples/actgate_v1alpha1_toolpolicy.yaml"))
	doc = strings.ReplaceAll(doc, "$GATE", abs(t, "../../testdata/gate/actgate.yaml"))
	p := filepath.Join(t.TempDir(), "t.yaml")
	if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const testHead = `apiVersion: cli.actgate.io/v1alpha1
kind: PolicyTest
policy:
  toolPolicy: $SAMPLE
defaults:
  server: payments
  agent: system:serviceaccount:billing:billing-agent
  provenance: user
`

// A wrong expectation is a FAIL row and exit 1, for each kind of expectation; the other cases
// of the file still pass.
func TestPolicyTestWrongExpectation(t *testing.T) {
	pass := `- name: ok
  call: {tool: get_balance}
  expect: {decision: allow}
`
	cases := []struct{ name, c, got string }{
		{"decision", `- name: wrong
  call: {tool: get_balance}
  expect: {decision: permit}
`, "got decision allow"},
		{"deny code", `- name: wrong
  call: {tool: send_payment, arguments: {amount: 99999}}
  expect: {decision: deny, code: EF_UNKNOWN_TOOL}
`, "got code EF_POLICY_DENIED"},
		{"rule", `- name: wrong
  call: {tool: get_balance}
  expect: {decision: allow, rule: money-movement}
`, `got rule "reads"`},
		{"class", `- name: wrong
  call: {tool: get_balance}
  expect: {decision: allow, class: FINANCIAL}
`, "got class INFORMATIONAL"},
		{"principals", `- name: wrong
  call: {tool: send_payment, arguments: {amount: 5}}
  expect: {decision: escalate, principals: [bob@example.com]}
`, "got principals [alice@example.com]"},
		{"minPrincipals", `- name: wrong
  call: {tool: send_payment, arguments: {amount: 5}}
  expect: {decision: escalate, minPrincipals: 2}
`, "got minPrincipals 1"},
		{"escalate expected, denied", `- name: wrong
  call: {tool: email_send, provenance: retrieval}
  expect: {decision: permit}
`, "got decision deny"},
		{"allow expected, act invalid", `- name: wrong
  call: {tool: "get balance"}
  expect: {decision: allow}
`, "got decision deny"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := writeTestFile(t, testHead+"cases:\n"+pass+tc.c)
			code, out, errs := runCLI("policy", "test", f)
			if code != exitRejected {
				t.Fatalf("exit %d, want %d\n%s%s", code, exitRejected, out, errs)
			}
			var failRow, passRow bool
			for _, l := range strings.Split(out, "\n") {
				if strings.Contains(l, " wrong ") && strings.Contains(l, "FAIL") && strings.Contains(l, tc.got) {
					failRow = true
				}
				if strings.Contains(l, " ok ") && strings.HasSuffix(strings.TrimSpace(l), "PASS") {
					passRow = true
				}
			}
			if !failRow || !passRow {
				t.Fatalf("want a FAIL row with %q and a PASS row:\n%s", tc.got, out)
			}
			if !strings.HasPrefix(errs, policytest.CodeFailed+" 1 of 2 cases failed") {
				t.Fatalf("stderr %q", errs)
			}
		})
	}
}

// The sample's tests catch a policy change before rollout: with the amount cap raised, the
// case that expects a deny above 10000 fails.
func TestPolicyTestCatchesAPolicyChange(t *testing.T) {
	dir := t.TempDir()
	pol, err := os.ReadFile("../../config/samples/actgate_v1alpha1_toolpolicy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(pol), "double(args.amount) <= 10000.0", "double(args.amount) <= 100000.0", 1)
	if changed == string(pol) {
		t.Fatal("the sample's cap expression moved; update this test")
	}
	if err := os.WriteFile(filepath.Join(dir, "actgate_v1alpha1_toolpolicy.yaml"), []byte(changed), 0o600); err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile("../../config/samples/tests/toolpolicy-payments.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "tests"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tests", "t.yaml"), tests, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI("policy", "test", filepath.Join(dir, "tests"))
	if code != exitRejected || !strings.Contains(out, "above the cap") || !strings.Contains(out, "FAIL (got decision escalate, code EF_ESCALATION_REQUIRED)") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
}

// badTestFiles are malformed test files and the code each is refused with.
func badTestFiles() []struct{ name, doc, code, detail string } {
	const c = "cases:\n- name: a\n  call: {tool: get_balance}\n  expect: {decision: allow}\n"
	return []struct{ name, doc, code, detail string }{
		{"empty", "", policytest.CodeFileInvalid, "empty document"},
		{"not a mapping", "- a\n", policytest.CodeFileInvalid, "not a mapping"},
		{"two documents", testHead + c + "---\n" + testHead + c, policytest.CodeFileInvalid, ""},
		{"duplicate key", testHead + "kind: PolicyTest\n" + c, policytest.CodeFileInvalid, ""},
		{"unknown field", testHead + "tests: []\n" + c, policytest.CodeFileInvalid, `unknown field "tests"`},
		{"case-differing field", testHead + "Cases: []\n" + c, policytest.CodeFileInvalid, ""},
		{"unknown case field", testHead + "cases:\n- name: a\n  call: {tool: get_balance}\n  expect: {decision: allow, reason: x}\n", policytest.CodeFileInvalid, "reason"},
		{"unknown call field", testHead + "cases:\n- name: a\n  call: {tool: get_balance, args: {}}\n  expect: {decision: allow}\n", policytest.CodeFileInvalid, "args"},
		{"wrong kind", strings.Replace(testHead, "PolicyTest", "Test", 1) + c, policytest.CodeFileInvalid, "apiVersion/kind"},
		{"wrong apiVersion", strings.Replace(testHead, "cli.actgate.io", "actgate.io", 1) + c, policytest.CodeFileInvalid, "apiVersion/kind"},
		{"no cases", testHead, policytest.CodeFileInvalid, "at least one case"},
		{"too large", testHead + c + "# " + strings.Repeat("x", policytest.MaxFileBytes) + "\n", policytest.CodeFileInvalid, "larger than"},
		{"too many cases", testHead + "cases:\n" + strings.Repeat("- name: x\n", policytest.MaxCases+1), policytest.CodeFileInvalid, "at most"},
		{"no case name", testHead + "cases:\n- call: {tool: get_balance}\n  expect: {decision: allow}\n", policytest.CodeCaseInvalid, "name: required"},
		{"duplicate case name", testHead + c + "- name: a\n  call: {tool: get_balance}\n  expect: {decision: allow}\n", policytest.CodeCaseInvalid, "duplicate"},
		{"no tool", testHead + "cases:\n- name: a\n  call: {}\n  expect: {decision: allow}\n", policytest.CodeCaseInvalid, "tool: required"},
		{"no agent", strings.Replace(testHead, "  agent: system:serviceaccount:billing:billing-agent\n", "", 1) + c, policytest.CodeCaseInvalid, "agent: required"},
		{"no server", strings.Replace(testHead, "  server: payments\n", "", 1) + c, policytest.CodeCaseInvalid, "server: required"},
		{"bad provenance", testHead + "cases:\n- name: a\n  call: {tool: get_balance, provenance: email}\n  expect: {decision: allow}\n", policytest.CodeCaseInvalid, "provenance"},
		{"bad default provenance", strings.Replace(testHead, "provenance: user", "provenance: User", 1) + c, policytest.CodeCaseInvalid, "defaults.provenance"},
		{"arguments not an object", testHead + "cases:\n- name: a\n  call: {tool: get_balance, arguments: [1]}\n  expect: {decision: allow}\n", policytest.CodeCaseInvalid, "arguments: must be an object"},
		{"unknown decision", testHead + "cases:\n- name: a\n  call: {tool: get_balance}\n  expect: {decision: Allow}\n", policytest.CodeCaseInvalid, "decision"},
		{"deny without code", testHead + "cases:\n- name: a\n  call: {tool: get_balance}\n  expect: {decision: deny}\n", policytest.CodeCaseInvalid, "required for deny"},
		{"deny escalation code", testHead + "cases:\n- name: a\n  call: {tool: get_balance}\n  expect: {decision: deny, code: EF_ESCALATION_REQUIRED}\n", policytest.CodeCaseInvalid, "is decision escalate"},
		{"unknown code", testHead + "cases:\n- name: a\n  call: {tool: get_balance}\n  expect: {decision: deny, code: EF_NOPE}\n", policytest.CodeCaseInvalid, "not an EF code"},
		{"allow with code", testHead + "cases:\n- name: a\n  call: {tool: get_balance}\n  expect: {decision: allow, code: EF_POLICY_DENIED}\n", policytest.CodeCaseInvalid, "has no code"},
		{"escalate other code", testHead + "cases:\n- name: a\n  call: {tool: get_balance}\n  expect: {decision: escalate, code: EF_POLICY_DENIED}\n", policytest.CodeCaseInvalid, "EF_ESCALATION_REQUIRED"},
		{"principals on allow", testHead + "cases:\n- name: a\n  call: {tool: get_balance}\n  expect: {decision: allow, principals: [x]}\n", policytest.CodeCaseInvalid, "only for decision escalate"},
		{"spent amount with an exponent", testHead + "cases:\n- name: a\n  call: {tool: get_balance, spent: {daily: {amount: \"1e3\"}}}\n  expect: {decision: allow}\n",
			policytest.CodeCaseInvalid, "spent.daily.amount"},
		{"spent negative calls", testHead + "cases:\n- name: a\n  call: {tool: get_balance, spent: {daily: {calls: -1}}}\n  expect: {decision: allow}\n",
			policytest.CodeCaseInvalid, "spent.daily.calls"},
		{"unknown class", testHead + "cases:\n- name: a\n  call: {tool: get_balance}\n  expect: {decision: allow, class: READ}\n", policytest.CodeCaseInvalid, "consequence class"},
		{"no policy", strings.Replace(testHead, "  toolPolicy: $SAMPLE\n", "  {}\n", 1) + c, policytest.CodePolicyInvalid, "exactly one"},
		{"two policies", strings.Replace(testHead, "  toolPolicy: $SAMPLE\n", "  toolPolicy: $SAMPLE\n  gateConfig: $GATE\n", 1) + c, policytest.CodePolicyInvalid, "exactly one"},
		{"missing policy", strings.Replace(testHead, "$SAMPLE", "/nonexistent/p.yaml", 1) + c, policytest.CodePolicyInvalid, "no such file"},
		{"gate config as tool policy", strings.Replace(testHead, "$SAMPLE", "$GATE", 1) + c, policytest.CodePolicyInvalid, "unknown field"},
		{"tool policy as gate config", strings.Replace(testHead, "toolPolicy: $SAMPLE", "gateConfig: $SAMPLE", 1) + c, policytest.CodePolicyInvalid, "unknown field"},
	}
}

// A malformed test file exits 1 with its code on stderr, never a table, never exit 0.
func TestPolicyTestMalformedFiles(t *testing.T) {
	for _, tc := range badTestFiles() {
		t.Run(tc.name, func(t *testing.T) {
			f := writeTestFile(t, tc.doc)
			code, out, errs := runCLI("policy", "test", f)
			if code != exitRejected || !strings.HasPrefix(errs, tc.code+" "+f+": ") || !strings.Contains(errs, tc.detail) {
				t.Fatalf("exit %d stderr %q, want %d %s ... %q", code, errs, exitRejected, tc.code, tc.detail)
			}
			if strings.Contains(out, "PASS") || strings.Contains(out, "ID ") {
				t.Fatalf("a table for a malformed file:\n%s", out)
			}
		})
	}
}

// A policy that does not compile is refused with its code, as the gate would refuse to serve it.
func TestPolicyTestPolicyDoesNotCompile(t *testing.T) {
	dir := t.TempDir()
	pol := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(pol, []byte("servers:\n- name: payments\n  url: https://p.example/mcp\nrules:\n- name: r\n  tools: [x]\n  arguments:\n  - name: c\n    expression: args.amount +\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(dir, "t.yaml")
	doc := strings.Replace(testHead, "$SAMPLE", "p.yaml", 1) + "cases:\n- name: a\n  call: {tool: x}\n  expect: {decision: allow}\n"
	if err := os.WriteFile(f, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errs := runCLI("policy", "test", f)
	if code != exitRejected || !strings.HasPrefix(errs, policytest.CodePolicyInvalid+" ") || !strings.Contains(errs, "InvalidCEL") {
		t.Fatalf("exit %d stderr %q", code, errs)
	}
}

// One malformed file does not stop the others; the run still fails.
func TestPolicyTestMixedFiles(t *testing.T) {
	bad := writeTestFile(t, testHead)
	code, out, errs := runCLI("policy", "test", bad, "../../testdata/gate/tests")
	if code != exitRejected || !strings.HasPrefix(errs, policytest.CodeFileInvalid) || !strings.Contains(out, "10 of 10 cases passed in 1 file(s); 1 file(s) not run") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
}

func TestPolicyTestUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		exit int
		code string
	}{
		{[]string{"policy", "test"}, exitUsage, "USAGE"},
		{[]string{"policy", "test", "/nonexistent"}, exitUsage, "USAGE"},
		{[]string{"policy", "test", t.TempDir()}, exitRejected, policytest.CodeNoFiles},
		{[]string{"policy", "explain", "--server", "payments", "--tool", "x", "--agent", "a"}, exitUsage, "USAGE"},
		{[]string{"policy", "explain", "--case", "x"}, exitUsage, "USAGE"},
		{[]string{"policy", "explain", "--test", "../../testdata/gate/tests/actgate.yaml", "--case", "no such case"}, exitUsage, "USAGE"},
		{[]string{"policy", "explain", "--gate-config", "../../testdata/gate/actgate.yaml", "--server", "finance", "--agent", "a"}, exitUsage, "USAGE"},
		{[]string{"policy", "explain", "--gate-config", "../../testdata/gate/actgate.yaml", "--server", "finance", "--tool", "x", "--agent", "a", "--args", "[1]"}, exitUsage, "USAGE"},
	} {
		code, _, errs := runCLI(tc.args...)
		if code != tc.exit || !strings.HasPrefix(errs, tc.code) {
			t.Errorf("%v: exit %d stderr %q, want %d %s", tc.args, code, errs, tc.exit, tc.code)
		}
	}
}

// explain lists every check in order: those before the refusing one pass, the refusing one
// carries the decision's code, the rest are not reached.
func TestPolicyExplain(t *testing.T) {
	code, out, errs := runCLI("policy", "explain", "--tool-policy", "../../config/samples/actgate_v1alpha1_toolpolicy.yaml",
		"--server", "payments", "--tool", "send_payment", "--args", `{"amount": 25000, "to": "acct-2"}`,
		"--provenance", "user", "--agent", "system:serviceaccount:billing:billing-agent")
	if code != exitOK || errs != "" {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	checks := []string{"contextLive", "serverDeclared", "ruleMatches", "argumentsObject", "destinationAllowed",
		"classify", "provenanceRules", "argumentConstraints", "humanBindable", "principalsAvailable"}
	results := []string{"pass", "pass", "pass", "pass", "pass", "pass", "pass", "fail", "not reached", "not reached"}
	lines := strings.Split(out, "\n")
	at := 0
	for i, l := range lines {
		if strings.HasPrefix(l, "#") {
			at = i + 1
			break
		}
	}
	for i, c := range checks {
		f := strings.Fields(lines[at+i])
		if len(f) < 3 || f[1] != c || !strings.HasPrefix(strings.Join(f[2:], " "), results[i]) {
			t.Errorf("row %d = %q, want %s %s", i+1, lines[at+i], c, results[i])
		}
	}
	if !strings.Contains(lines[at+7], "EF_POLICY_DENIED") || !strings.Contains(out, "decision: deny EF_POLICY_DENIED (rule money-movement, class FINANCIAL)") {
		t.Fatalf("explanation:\n%s", out)
	}

	// From a test file's case, with a flag overriding its call.
	code, out, errs = runCLI("policy", "explain", "--test", "../../testdata/gate/tests/actgate.yaml",
		"--case", "an email the user asked for runs under a machine permit", "--provenance", "retrieval")
	if code != exitOK || !strings.Contains(out, "provenance retrieval") || !strings.Contains(out, "decision: deny EF_INSTRUCTION_PROVENANCE_FAILURE (rule email") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	code, out, _ = runCLI("policy", "explain", "--test", "../../testdata/gate/tests/actgate.yaml", "--case", "a payment waits for alice")
	if code != exitOK || strings.Contains(out, "fail") || strings.Contains(out, "not reached") || !strings.Contains(out, "decision: escalate [alice] min 1") {
		t.Fatalf("exit %d\n%s", code, out)
	}
}

// A policy in mode Audit is tested on what enforcement would decide, and the table says so.
func TestPolicyTestAuditMode(t *testing.T) {
	dir := t.TempDir()
	pol, err := os.ReadFile("../../config/samples/actgate_v1alpha1_toolpolicy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	audit := strings.Replace(string(pol), "mode: Enforce", "mode: Audit", 1)
	if audit == string(pol) {
		t.Fatal("the sample's mode moved; update this test")
	}
	if err := os.WriteFile(filepath.Join(dir, "p.yaml"), []byte(audit), 0o600); err != nil {
		t.Fatal(err)
	}
	doc := strings.Replace(testHead, "$SAMPLE", "p.yaml", 1) + `cases:
- name: over the cap
  call: {tool: send_payment, arguments: {amount: 99999}}
  expect: {decision: deny, code: EF_POLICY_DENIED}
`
	if err := os.WriteFile(filepath.Join(dir, "t.yaml"), []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI("policy", "test", filepath.Join(dir, "t.yaml"))
	if code != exitOK || !strings.Contains(out, "deny EF_POLICY_DENIED (audit)") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
}

// TestPolicyExplainBudget: explain lists the governing rule's budgets with their keys and says
// which budget decided, with its numbers.
func TestPolicyExplainBudget(t *testing.T) {
	code, out, errs := runCLI("policy", "explain", "--test", "../../config/samples/tests/toolpolicy-payments-budget.yaml",
		"--case", "a 4th payment to the same payee is refused")
	if code != exitOK || errs != "" {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{
		"decision: deny EF_BUDGET_EXCEEDED",
		"budget daily: 20 calls and 10000 EUR at /amount per Day in Europe/Berlin, onExceed Escalate, key system:serviceaccount:treasury:treasury-agent\n",
		"budget per-payee: 3 calls per Day in Europe/Berlin, onExceed Deny, key acct-2 (decided)",
		"budget decided: budget \"per-payee\" of rule \"payments\" exceeded: 3 of 3 calls spent",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("explain output lacks %q:\n%s", want, out)
		}
	}
}
