package policy

import (
	"context"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/ef"
)

type want struct {
	outcome Outcome
	code    ef.EFCode
	rule    string
	class   act.ConsequenceClass
	role    v1alpha1.EvidenceRole
	ttl     time.Duration
	msg     string // substring the message must contain
}

// evalCases is the table of every rule of evaluation against testdata/payments.yaml.
func evalCases() []struct {
	name string
	r    Request
	want want
} {
	const pay = `{"amount":500,"currency":"EUR","to":"acct-1"}`
	return []struct {
		name string
		r    Request
		want want
	}{
		// Hot path: INFORMATIONAL, role None (tool-use-binding §20; T-F's "hot search").
		{"read get_*", req("get_balance", `{}`), want{OutcomeAllow, "", "reads", act.ClassInformational, v1alpha1.EvidenceRoleNone, 0, ""}},
		{"read search*", req("search_invoices", `{"q":"x"}`), want{OutcomeAllow, "", "reads", act.ClassInformational, v1alpha1.EvidenceRoleNone, 0, ""}},
		{"search alone matches search*", req("search", `{}`), want{outcome: OutcomeAllow, rule: "reads", class: act.ClassInformational, role: v1alpha1.EvidenceRoleNone}},

		// Unknown server and unknown tool (docs/architecture.md "Fail closed").
		{"unknown server", req("get_balance", `{}`, on("crm", "https://crm.example")), want{outcome: OutcomeDeny, code: ef.EFUnknownTool, msg: `server "crm" is not declared`}},
		{"empty server", req("get_balance", `{}`, on("", paymentsURL)), want{outcome: OutcomeDeny, code: ef.EFUnknownTool}},
		{"tool no rule matches", req("delete_account", `{}`), want{outcome: OutcomeDeny, code: ef.EFUnknownTool, msg: `tool "delete_account" is not declared for server payments`}},
		{"globs are case-sensitive", req("Get_balance", `{}`), want{outcome: OutcomeDeny, code: ef.EFUnknownTool}},
		{"glob must match the whole name", req("xget_balance", `{}`), want{outcome: OutcomeDeny, code: ef.EFUnknownTool}},
		{"rule servers restrict: email_send on payments", req("email_send", `{}`), want{outcome: OutcomeDeny, code: ef.EFUnknownTool}},
		{"rule servers restrict: get_* on mail", req("get_balance", `{}`, on("mail", mailURL)), want{outcome: OutcomeDeny, code: ef.EFUnknownTool}},
		{"empty tool", req("", `{}`), want{outcome: OutcomeDeny, code: ef.EFUnknownTool}},

		// Arguments must be an object.
		{"args array", req("get_balance", `[]`), want{outcome: OutcomeDeny, code: ef.EFActInvalid, rule: "reads"}},
		{"args empty", req("get_balance", ``), want{outcome: OutcomeDeny, code: ef.EFActInvalid, rule: "reads"}},
		{"args null", req("get_balance", `null`), want{outcome: OutcomeDeny, code: ef.EFActInvalid, rule: "reads"}},
		{"args truncated", req("get_balance", `{"a":`), want{outcome: OutcomeDeny, code: ef.EFActInvalid, rule: "reads"}},

		// Destinations (§12 MCP_SERVER_SWAP, §22 T-D; §12 COMPUTER_USE_ORIGIN_CHANGE, §22 T-E).
		{"T-D swapped server host", req("get_balance", `{}`, dest("https://payments.attacker/mcp")), want{outcome: OutcomeDeny, code: ef.EFDestinationMismatch, rule: "reads"}},
		{"swapped port", req("get_balance", `{}`, dest("https://payments.example:8443/mcp")), want{outcome: OutcomeDeny, code: ef.EFDestinationMismatch, rule: "reads"}},
		{"swapped scheme", req("get_balance", `{}`, dest("http://payments.example/mcp")), want{outcome: OutcomeDeny, code: ef.EFDestinationMismatch, rule: "reads"}},
		{"mcp scheme is another destination", req("get_balance", `{}`, dest("mcp://payments.example/mcp")), want{outcome: OutcomeDeny, code: ef.EFDestinationMismatch, rule: "reads"}},
		{"userinfo trick", req("get_balance", `{}`, dest("https://payments.example@evil.example/mcp")), want{outcome: OutcomeDeny, code: ef.EFDestinationMismatch, rule: "reads"}},
		{"empty destination", req("get_balance", `{}`, dest("")), want{outcome: OutcomeDeny, code: ef.EFDestinationMismatch, rule: "reads"}},
		{"relative destination", req("get_balance", `{}`, dest("/mcp")), want{outcome: OutcomeDeny, code: ef.EFDestinationMismatch, rule: "reads"}},
		{"another server's name", req("get_balance", `{}`, dest("mail")), want{outcome: OutcomeDeny, code: ef.EFDestinationMismatch, rule: "reads"}},
		{"explicit default port is the same origin", req("get_balance", `{}`, dest("https://payments.example:443/mcp")), want{outcome: OutcomeAllow, rule: "reads", class: act.ClassInformational, role: v1alpha1.EvidenceRoleNone}},
		{"case of scheme and host folds", req("get_balance", `{}`, dest("HTTPS://Payments.Example/mcp")), want{outcome: OutcomeAllow, rule: "reads", class: act.ClassInformational, role: v1alpha1.EvidenceRoleNone}},
		{"bare origin is not the server's URL", req("get_balance", `{}`, dest("https://payments.example")), want{outcome: OutcomeDeny, code: ef.EFDestinationMismatch, rule: "reads"}},
		{"T-D another MCP server at the same origin", req("get_balance", `{}`, dest("https://payments.example/evil/mcp")), want{outcome: OutcomeDeny, code: ef.EFDestinationMismatch, rule: "reads"}},
		{"path is case-sensitive", req("get_balance", `{}`, dest("https://payments.example/MCP")), want{outcome: OutcomeDeny, code: ef.EFDestinationMismatch, rule: "reads"}},
		{"trailing slash is another path", req("get_balance", `{}`, dest("https://payments.example/mcp/")), want{outcome: OutcomeDeny, code: ef.EFDestinationMismatch, rule: "reads"}},
		{"query and fragment are not the destination", req("get_balance", `{}`, dest("https://payments.example/mcp?x=1#y")), want{outcome: OutcomeAllow, rule: "reads", class: act.ClassInformational, role: v1alpha1.EvidenceRoleNone}},
		{"own server name", req("get_balance", `{}`, dest("payments")), want{outcome: OutcomeAllow, rule: "reads", class: act.ClassInformational, role: v1alpha1.EvidenceRoleNone}},
		{"allowlist: provider origin", req("computer", `{"action":"left_click"}`, on("browser", "https://pay.example/checkout")), want{outcome: OutcomeAllow, rule: "checkout", class: act.ClassCommunication, role: v1alpha1.EvidenceRoleNone}},
		{"allowlist: listed port", req("computer", `{"action":"left_click"}`, on("browser", "https://pay.example:8443/x")), want{outcome: OutcomeAllow, rule: "checkout", class: act.ClassCommunication, role: v1alpha1.EvidenceRoleNone}},
		{"T-E origin changed", req("computer", `{"action":"left_click"}`, on("browser", "https://pay.example-evil/checkout")), want{outcome: OutcomeDeny, code: ef.EFDestinationMismatch, rule: "checkout", msg: "not in the destinations of rule checkout"}},
		{"allowlist replaces the server's own origin", req("computer", `{}`, on("browser", browserURL)), want{outcome: OutcomeDeny, code: ef.EFDestinationMismatch, rule: "checkout"}},

		// Class: rule overrides mapper; mapper default otherwise; threshold raise.
		{"rule class overrides mapper", req("get_balance", `{}`, class(act.ClassFinancial)), want{outcome: OutcomeAllow, rule: "reads", class: act.ClassInformational, role: v1alpha1.EvidenceRoleNone}},
		{"mapper class when the rule has none", req("note_write", `{}`, class(act.ClassCommunication)), want{outcome: OutcomeAllow, rule: "notes", class: act.ClassCommunication, role: v1alpha1.EvidenceRoleNone}},
		{"DefaultClass when the request has none", req("note_write", `{}`, class("")), want{outcome: OutcomeAllow, rule: "notes", class: act.ClassPersistentStateChange, role: v1alpha1.EvidenceRoleNone}},
		{"invalid request class falls back to DefaultClass", req("note_write", `{}`, class("BOGUS")), want{outcome: OutcomeAllow, rule: "notes", class: act.ClassPersistentStateChange, role: v1alpha1.EvidenceRoleNone}},
		{"FINANCIAL with role None is raised to a permit", req("payout_create", `{}`), want{OutcomePermit, "", "payouts", act.ClassFinancial, v1alpha1.EvidenceRolePolicyPermit, 90 * time.Second, ""}},
		{"NETWORK_CONTROL with role None is raised", req("note_write", `{}`, class(act.ClassNetworkControl)), want{outcome: OutcomePermit, rule: "notes", class: act.ClassNetworkControl, role: v1alpha1.EvidenceRolePolicyPermit, ttl: 90 * time.Second}},
		{"PHYSICAL with role None is raised", req("note_write", `{}`, class(act.ClassPhysical)), want{outcome: OutcomePermit, rule: "notes", class: act.ClassPhysical, role: v1alpha1.EvidenceRolePolicyPermit, ttl: 90 * time.Second}},

		// PolicyPermit.
		{"refund permit, spec TTL", req("refund", `{"charge":"ch_1"}`), want{OutcomePermit, "", "refund", act.ClassFinancial, v1alpha1.EvidenceRolePolicyPermit, 90 * time.Second, ""}},
		{"wire permit for user provenance", req("wire_transfer", pay), want{OutcomePermit, "", "wire", act.ClassFinancial, v1alpha1.EvidenceRolePolicyPermit, 90 * time.Second, ""}},

		// HumanAuthorization (docs/architecture.md "Human decisions").
		{"send_payment escalates", req("send_payment", pay), want{OutcomeEscalate, ef.EFEscalationRequired, "send-payment", act.ClassFinancial, v1alpha1.EvidenceRoleHumanAuthorization, 5 * time.Minute, "requires a human decision"}},
		{"send_payment at the cap", req("send_payment", `{"amount":10000,"currency":"USD"}`), want{outcome: OutcomeEscalate, code: ef.EFEscalationRequired, rule: "send-payment", class: act.ClassFinancial, role: v1alpha1.EvidenceRoleHumanAuthorization, ttl: 5 * time.Minute}},
		{"out of profile cannot be bound to a human", req("send_payment", pay, notStrict), want{outcome: OutcomeDeny, code: ef.EFArgumentsOutOfProfile, rule: "send-payment", class: act.ClassFinancial}},
		{"agent is the only principal", req("send_payment", pay, agent("alice")), want{outcome: OutcomeDeny, code: ef.EFPolicyDenied, rule: "send-payment", class: act.ClassFinancial, msg: "names only 0"}},

		// CEL argument constraints (§22 T-B "payout denied when above envelope").
		{"T-B above the cap", req("send_payment", `{"amount":10001,"currency":"EUR"}`), want{outcome: OutcomeDeny, code: ef.EFPolicyDenied, rule: "send-payment", class: act.ClassFinancial, msg: "an agent may not send more than 10000 in one payment (rule send-payment, constraint amount-cap)"}},
		{"second constraint, default message", req("send_payment", `{"amount":1,"currency":"GBP"}`), want{outcome: OutcomeDeny, code: ef.EFPolicyDenied, rule: "send-payment", msg: "argument constraint currency of rule send-payment is not satisfied"}},
		{"missing argument is an error", req("send_payment", `{"currency":"EUR"}`), want{outcome: OutcomeDeny, code: ef.EFPolicyDenied, rule: "send-payment", msg: "could not be evaluated"}},
		{"int() of a decimal string is an error", req("send_payment", `{"amount":"500.00","currency":"EUR"}`), want{outcome: OutcomeDeny, code: ef.EFPolicyDenied, rule: "send-payment", msg: "could not be evaluated"}},
		{"int() of an integer string works", req("send_payment", `{"amount":"500","currency":"EUR"}`), want{outcome: OutcomeEscalate, code: ef.EFEscalationRequired, rule: "send-payment"}},
		{"int() truncates a double", req("send_payment", `{"amount":10000.5,"currency":"EUR"}`), want{outcome: OutcomeEscalate, code: ef.EFEscalationRequired, rule: "send-payment"}},
		{"integer beyond int64 denies, not rounds", req("send_payment", `{"amount":9223372036854775808,"currency":"EUR"}`, notStrict), want{outcome: OutcomeDeny, code: ef.EFPolicyDenied, rule: "send-payment", msg: "outside the 64-bit range"}},
		{"negative integer beyond int64 denies", req("send_payment", `{"amount":-9223372036854775809,"currency":"EUR"}`, notStrict), want{outcome: OutcomeDeny, code: ef.EFPolicyDenied, rule: "send-payment"}},
		{"int64 max is exact and above the cap", req("send_payment", `{"amount":9223372036854775807,"currency":"EUR"}`, notStrict), want{outcome: OutcomeDeny, code: ef.EFPolicyDenied, rule: "send-payment", msg: "amount-cap"}},
		{"duplicate member names are refused", req("send_payment", `{"amount":1,"amount":99999,"currency":"EUR"}`), want{outcome: OutcomeDeny, code: ef.EFPolicyDenied, rule: "send-payment", msg: "not valid I-JSON"}},
		{"CEL deny beats out-of-profile", req("send_payment", `{"amount":20000,"currency":"EUR"}`, notStrict), want{outcome: OutcomeDeny, code: ef.EFPolicyDenied, rule: "send-payment"}},

		// Provenance (§12 INJECTED_EMAIL_SEND, §22 T-A).
		{"email from the user", req("email_send", `{"to":"bob@example.com"}`, on("mail", mailURL)), want{outcome: OutcomeAllow, rule: "email", class: act.ClassCommunication, role: v1alpha1.EvidenceRoleNone}},
		{"email from the system prompt", req("email_send", `{}`, on("mail", mailURL), prov("system")), want{outcome: OutcomeAllow, rule: "email", class: act.ClassCommunication, role: v1alpha1.EvidenceRoleNone}},
		{"T-A email from retrieval", req("email_send", `{"to":"attacker@ex.com"}`, on("mail", mailURL), prov("retrieval")), want{outcome: OutcomeDeny, code: ef.EFInstructionProvenanceFailure, rule: "email", class: act.ClassCommunication, msg: "provenance retrieval"}},
		{"email from tool output", req("email_send", `{}`, on("mail", mailURL), prov("tool_output")), want{outcome: OutcomeDeny, code: ef.EFInstructionProvenanceFailure, rule: "email"}},
		{"act spelling tool = tool_output", req("email_send", `{}`, on("mail", mailURL), prov("tool")), want{outcome: OutcomeDeny, code: ef.EFInstructionProvenanceFailure, rule: "email"}},
		{"unknown provenance is least trusted", req("email_send", `{}`, on("mail", mailURL), prov("")), want{outcome: OutcomeDeny, code: ef.EFInstructionProvenanceFailure, rule: "email", msg: "unknown provenance"}},
		{"act spelling unknown", req("email_send", `{}`, on("mail", mailURL), prov("unknown")), want{outcome: OutcomeDeny, code: ef.EFInstructionProvenanceFailure, rule: "email"}},
		{"unrecognised provenance is unknown", req("email_send", `{}`, on("mail", mailURL), prov("User")), want{outcome: OutcomeDeny, code: ef.EFInstructionProvenanceFailure, rule: "email"}},
		{"provenance escalate (retrieval, FINANCIAL)", req("wire_transfer", pay, prov("retrieval")), want{OutcomeEscalate, ef.EFEscalationRequired, "wire", act.ClassFinancial, v1alpha1.EvidenceRoleHumanAuthorization, 90 * time.Second, "because of where its instruction came from"}},
		{"provenance escalate for unknown provenance", req("wire_transfer", pay, prov("")), want{outcome: OutcomeEscalate, code: ef.EFEscalationRequired, rule: "wire", role: v1alpha1.EvidenceRoleHumanAuthorization}},
		{"provenance escalate needs strict args", req("wire_transfer", pay, prov("retrieval"), notStrict), want{outcome: OutcomeDeny, code: ef.EFArgumentsOutOfProfile, rule: "wire"}},
		{"provenance escalate: agent removes a needed principal", req("wire_transfer", pay, prov("retrieval"), agent("bob")), want{outcome: OutcomeDeny, code: ef.EFPolicyDenied, rule: "wire", msg: "needs 2 principal(s)"}},
		{"provenance not escalated for user", req("wire_transfer", pay, prov("user"), notStrict), want{outcome: OutcomePermit, rule: "wire", role: v1alpha1.EvidenceRolePolicyPermit}},
	}
}

func TestEvaluate(t *testing.T) {
	c := compileSample(t, nil)
	for _, tc := range evalCases() {
		t.Run(tc.name, func(t *testing.T) {
			d := eval(c, tc.r)
			checkDecision(t, d, tc.want)
		})
	}
}

func checkDecision(t *testing.T, d Decision, w want) {
	t.Helper()
	if d.Outcome != w.outcome || d.Code != w.code {
		t.Fatalf("outcome %s %s (%q), want %s %s", d.Outcome, d.Code, d.Message, w.outcome, w.code)
	}
	if d.Rule != w.rule {
		t.Errorf("rule %q, want %q", d.Rule, w.rule)
	}
	if w.class != "" && d.Class != w.class {
		t.Errorf("class %s, want %s", d.Class, w.class)
	}
	if w.role != "" && d.Evidence.Role != w.role {
		t.Errorf("evidence role %s, want %s", d.Evidence.Role, w.role)
	}
	if w.ttl != 0 && d.AuthorityTTL != w.ttl {
		t.Errorf("TTL %v, want %v", d.AuthorityTTL, w.ttl)
	}
	if d.Outcome == OutcomeAllow && d.AuthorityTTL != 0 {
		t.Errorf("Allow with an authority TTL %v: the hot path issues no authority", d.AuthorityTTL)
	}
	if !strings.Contains(d.Message, w.msg) {
		t.Errorf("message %q does not contain %q", d.Message, w.msg)
	}
	if (d.Outcome == OutcomeDeny || d.Outcome == OutcomeEscalate) && (!d.Code.Known() || d.Message == "") {
		t.Errorf("%s without a known code and a message: %q %q", d.Outcome, d.Code, d.Message)
	}
	if d.Policy != "shop/payments" || d.Epoch != 7 {
		t.Errorf("policy %q epoch %d", d.Policy, d.Epoch)
	}
	if d.Audit || d.WouldDeny || d.AuditOutcome != "" {
		t.Errorf("Enforce decision carries audit fields: %+v", d)
	}
}

// TestServerNameDestinationBindsItsURL: a server name in a rule's destinations stands for the
// server's URL, origin and path, so another MCP server at the same origin is refused
// (tool-use-binding §13, §22 T-D); an origin entry admits any path at the origin (§22 T-E: a
// page of the authorised site). An empty path is the root.
func TestServerNameDestinationBindsItsURL(t *testing.T) {
	c := compileSample(t, func(s *v1alpha1.ToolPolicySpec) {
		for i := range s.Rules {
			if s.Rules[i].Name == "checkout" {
				s.Rules[i].Destinations = []string{"payments", "https://pay.example", "browser"}
			}
		}
	})
	for _, tc := range []struct {
		dest string
		code ef.EFCode
	}{
		{paymentsURL, ""},
		{"payments", ""},
		{"https://PAYMENTS.example:443/mcp", ""},
		{"https://payments.example/other/mcp", ef.EFDestinationMismatch},
		{"https://payments.example", ef.EFDestinationMismatch},
		{"https://pay.example/any/page", ""},
		{"https://pay.example", ""},
		{browserURL + "/", ""},
		{browserURL + "/devtools", ef.EFDestinationMismatch},
	} {
		d := eval(c, req("computer", `{}`, on("browser", tc.dest)))
		if d.Code != tc.code {
			t.Errorf("destination %q: %s %s (%s), want code %q", tc.dest, d.Outcome, d.Code, d.Message, tc.code)
		}
	}
}

func TestEscalationDecisionCarriesTheRequirement(t *testing.T) {
	c := compileSample(t, nil)
	d := eval(c, req("send_payment", `{"amount":500,"currency":"EUR"}`))
	if d.Outcome != OutcomeEscalate {
		t.Fatalf("outcome %s", d.Outcome)
	}
	ev := d.Evidence
	if !reflect.DeepEqual(ev.Principals, []string{"alice"}) || ev.MinPrincipals != 1 || ev.SeparationOfDuties == nil || !*ev.SeparationOfDuties {
		t.Fatalf("evidence %+v: want principals [alice], min 1, SoD true (defaults applied)", ev)
	}
	if len(d.Alternatives) != 1 || d.Alternatives[0].Label != "Dry-run the payment" || string(d.Alternatives[0].Args.Raw) != `{"dry_run":true}` {
		t.Fatalf("alternatives %+v", d.Alternatives)
	}

	// The decision owns its slices: a caller scribbling on them changes no later decision.
	d.Evidence.Principals[0] = "mallory"
	*d.Evidence.SeparationOfDuties = false
	d.Alternatives[0].Args.Raw[2] = 'X'
	d.Alternatives[0].Label = "x"
	again := eval(c, req("send_payment", `{"amount":500,"currency":"EUR"}`))
	if again.Evidence.Principals[0] != "alice" || !*again.Evidence.SeparationOfDuties ||
		string(again.Alternatives[0].Args.Raw) != `{"dry_run":true}` || again.Alternatives[0].Label != "Dry-run the payment" {
		t.Fatalf("a caller's mutation leaked into the policy: %+v", again)
	}

	// Provenance escalation: the rule's principals and minPrincipals, the rule's alternatives.
	w := eval(c, req("wire_transfer", `{"amount":1}`, prov("retrieval")))
	if w.Evidence.MinPrincipals != 2 || len(w.Evidence.Principals) != 3 || len(w.Alternatives) != 1 {
		t.Fatalf("wire escalation %+v", w)
	}
	if got := EligiblePrincipals(w, "system:serviceaccount:shop:agent", c.SinkID()); !reflect.DeepEqual(got, []string{"alice", "bob"}) {
		t.Fatalf("eligible %v, want [alice bob] (the sink is excluded under separation of duties)", got)
	}
}

// TestParallelCallsAreIndependent is §22 T-B / §12 PARALLEL_PAY_AND_SEARCH: a search allowed in
// the same message authorises nothing for the payment beside it, in either order.
func TestParallelCallsAreIndependent(t *testing.T) {
	c := compileSample(t, nil)
	search := req("search", `{"q":"invoices"}`)
	payAbove := req("send_payment", `{"amount":50000,"currency":"EUR"}`)
	payBelow := req("send_payment", `{"amount":50,"currency":"EUR"}`)

	first := []Decision{eval(c, payAbove), eval(c, search), eval(c, payBelow)}
	second := []Decision{eval(c, search), eval(c, payAbove), eval(c, payBelow)}
	for i, d := range [][2]Decision{{first[0], second[1]}, {first[1], second[0]}, {first[2], second[2]}} {
		if !reflect.DeepEqual(d[0], d[1]) {
			t.Fatalf("pair %d depends on order: %+v vs %+v", i, d[0], d[1])
		}
	}
	if first[1].Outcome != OutcomeAllow {
		t.Fatalf("search: %s", first[1].Outcome)
	}
	if first[0].Outcome != OutcomeDeny || first[0].Code != ef.EFPolicyDenied {
		t.Fatalf("payment above the cap: %s %s", first[0].Outcome, first[0].Code)
	}
	if first[2].Outcome != OutcomeEscalate {
		t.Fatalf("payment below the cap must still escalate, got %s", first[2].Outcome)
	}
}

func TestCancelledContextDenies(t *testing.T) {
	c := compileSample(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, r := range []Request{req("get_balance", `{}`), req("send_payment", `{"amount":1,"currency":"EUR"}`)} {
		d := c.Evaluate(ctx, r)
		if d.Outcome != OutcomeDeny || d.Code != ef.EF060 {
			t.Fatalf("%s under a cancelled context: %s %s", r.Tool, d.Outcome, d.Code)
		}
	}
	expired, cancel2 := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel2()
	if d := c.Evaluate(expired, req("get_balance", `{}`)); d.Outcome != OutcomeDeny || d.Code != ef.EF060 {
		t.Fatalf("past deadline: %s %s", d.Outcome, d.Code)
	}
	//nolint:staticcheck // a nil context is tolerated, not a reason to panic
	if d := c.Evaluate(nil, req("get_balance", `{}`)); d.Outcome != OutcomeAllow {
		t.Fatalf("nil context: %s %s", d.Outcome, d.Code)
	}
}

func TestCELCostLimitDenies(t *testing.T) {
	// Well-typed, but quadratic in a list the agent controls: the cost limit stops it and the
	// call is denied, not allowed.
	c := compileSample(t, func(s *v1alpha1.ToolPolicySpec) {
		s.Rules[0].Arguments = []v1alpha1.ArgumentConstraint{{
			Name:       "expensive",
			Expression: `!has(args.l) || args.l.all(x, args.l.all(y, x == y || x != y))`,
		}}
	})
	if d := eval(c, req("get_balance", `{"l":[1,2,3]}`)); d.Outcome != OutcomeAllow {
		t.Fatalf("small list: %s %s %q", d.Outcome, d.Code, d.Message)
	}
	big := "[" + strings.Repeat("1,", 3000) + "1]"
	d := eval(c, req("get_balance", `{"l":`+big+`}`))
	if d.Outcome != OutcomeDeny || d.Code != ef.EFPolicyDenied || !strings.Contains(d.Message, "could not be evaluated") {
		t.Fatalf("cost limit: %s %s %q", d.Outcome, d.Code, d.Message)
	}
}

func TestAuditMode(t *testing.T) {
	c := compileSample(t, func(s *v1alpha1.ToolPolicySpec) { s.Mode = v1alpha1.PolicyModeAudit })
	if !c.Audit() {
		t.Fatal("Audit() false")
	}
	enforce := compileSample(t, nil)
	for _, tc := range evalCases() {
		t.Run(tc.name, func(t *testing.T) {
			d := eval(c, tc.r)
			e := eval(enforce, tc.r)
			if d.Outcome != OutcomeAllow || !d.Audit {
				t.Fatalf("audit decision %s audit=%v, want Allow audit=true", d.Outcome, d.Audit)
			}
			if d.AuditOutcome != e.Outcome || d.Code != e.Code || d.Message != e.Message || d.Rule != e.Rule {
				t.Fatalf("audit reports %s %s %q, enforce decided %s %s %q", d.AuditOutcome, d.Code, d.Message, e.Outcome, e.Code, e.Message)
			}
			if want := e.Outcome == OutcomeDeny || e.Outcome == OutcomeEscalate; d.WouldDeny != want {
				t.Fatalf("WouldDeny %v, want %v", d.WouldDeny, want)
			}
		})
	}
	if c.CanEscalate("payments", "send_payment") {
		t.Fatal("nothing escalates in Audit mode")
	}
}

// TestMessagesAreSafe: no decision message repeats an argument value (docs/architecture.md
// "Privacy") or calls anything enforcement (action-evidence-boundary: observe-only is never
// enforcement).
func TestMessagesAreSafe(t *testing.T) {
	const secret = "s3cr3t-V4LUE"
	reqs := []Request{
		req("send_payment", `{"amount":"`+secret+`","currency":"EUR"}`),
		req("send_payment", `{"amount":99999999,"currency":"`+secret+`"}`),
		req("send_payment", `{"amount":1,"currency":"EUR","to":"`+secret+`"}`, notStrict),
		req("email_send", `{"to":"`+secret+`"}`, on("mail", mailURL), prov("retrieval")),
		req("get_balance", `{"a":"`+secret+`"`),
		req("delete", `{"a":"`+secret+`"}`),
	}
	for _, mode := range []v1alpha1.PolicyMode{v1alpha1.PolicyModeEnforce, v1alpha1.PolicyModeAudit} {
		c := compileSample(t, func(s *v1alpha1.ToolPolicySpec) { s.Mode = mode })
		for _, tc := range evalCases() {
			reqs = append(reqs, tc.r)
		}
		for _, r := range reqs {
			d := eval(c, r)
			if strings.Contains(d.Message, secret) {
				t.Errorf("%s: message quotes an argument value: %q", mode, d.Message)
			}
			if strings.Contains(strings.ToLower(d.Message), "enforc") {
				t.Errorf("%s: message says enforce: %q", mode, d.Message)
			}
		}
	}
}

func TestLongToolNamesAreTruncatedInMessages(t *testing.T) {
	c := compileSample(t, nil)
	d := eval(c, req(strings.Repeat("é", 500), `{}`))
	if d.Code != ef.EFUnknownTool || len(d.Message) > 400 {
		t.Fatalf("%s %d bytes: %q", d.Code, len(d.Message), d.Message)
	}
}

func TestCanEscalate(t *testing.T) {
	c := compileSample(t, nil)
	for _, tc := range []struct {
		server, tool string
		want         bool
	}{
		{"payments", "send_payment", true},  // HumanAuthorization
		{"payments", "wire_transfer", true}, // Escalate provenance
		{"payments", "get_balance", false},
		{"payments", "refund", false},
		{"payments", "nope", false},
		{"mail", "email_send", false}, // provenance Deny only
		{"crm", "send_payment", false},
	} {
		if got := c.CanEscalate(tc.server, tc.tool); got != tc.want {
			t.Errorf("CanEscalate(%s, %s) = %v, want %v", tc.server, tc.tool, got, tc.want)
		}
	}
}

func TestServersIsACopy(t *testing.T) {
	c := compileSample(t, nil)
	s := c.Servers()
	if len(s) != 3 || s[0].Name != "payments" || s[2].Name != "browser" {
		t.Fatalf("servers %+v", s)
	}
	s[0].URL = "https://evil.example"
	if c.Servers()[0].URL != paymentsURL {
		t.Fatal("Servers() shares state with the policy")
	}
	if d := eval(c, req("get_balance", `{}`)); d.Outcome != OutcomeAllow {
		t.Fatalf("after mutating a copy: %s", d.Outcome)
	}
}

func TestFirstMatchingRuleWins(t *testing.T) {
	// A broad rule placed first shadows the narrow one after it: list order decides.
	c := compileSample(t, func(s *v1alpha1.ToolPolicySpec) {
		broad := v1alpha1.ToolRule{Name: "all-payments", Servers: []string{"payments"}, Tools: []string{"*"},
			Evidence: &v1alpha1.EvidenceRequirement{Role: v1alpha1.EvidenceRolePolicyPermit}}
		s.Rules = append([]v1alpha1.ToolRule{broad}, s.Rules...)
	})
	for _, tool := range []string{"get_balance", "send_payment", "anything/at/all"} {
		if d := eval(c, req(tool, `{}`)); d.Rule != "all-payments" || d.Outcome != OutcomePermit {
			t.Errorf("%s: rule %q outcome %s", tool, d.Rule, d.Outcome)
		}
	}
	// On another server the broad rule does not apply.
	if d := eval(c, req("email_send", `{}`, on("mail", mailURL))); d.Rule != "email" {
		t.Errorf("mail: rule %q", d.Rule)
	}
}

func TestNilCompiledDenies(t *testing.T) {
	var c *Compiled
	if d := c.Evaluate(context.Background(), req("get_balance", `{}`)); d.Outcome != OutcomeDeny {
		t.Fatalf("nil policy: %s", d.Outcome)
	}
	if c.CanEscalate("payments", "send_payment") || c.Servers() != nil || c.Name() != "" || c.Audit() {
		t.Fatal("nil policy answers")
	}
}

func TestConcurrentEvaluate(t *testing.T) {
	c := compileSample(t, nil)
	cases := evalCases()
	want := make([]Decision, len(cases))
	for i, tc := range cases {
		want[i] = eval(c, tc.r)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for n := 0; n < 20; n++ {
				i := (g*7 + n) % len(cases)
				if got := eval(c, cases[i].r); !reflect.DeepEqual(got, want[i]) {
					select {
					case errs <- cases[i].name:
					default:
					}
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for name := range errs {
		t.Errorf("%s: concurrent decision differs", name)
	}
}
