package policy

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/actgate/actgate/api/v1alpha1"
)

func TestCompileSample(t *testing.T) {
	c := compileSample(t, nil)
	if c.Name() != "shop/payments" || c.Epoch() != 7 || c.Audit() || c.SinkID() != "shop-sink" {
		t.Fatalf("compiled %q %d %v %q", c.Name(), c.Epoch(), c.Audit(), c.SinkID())
	}
}

// TestCompileShippedSample compiles the ToolPolicy sample shipped in config/samples, so the
// example users copy is one the gate accepts.
func TestCompileShippedSample(t *testing.T) {
	const p = "../../config/samples/actgate_v1alpha1_toolpolicy.yaml"
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("shipped sample missing: %v", err)
	}
	spec, err := LoadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Compile("default/payments", spec, 1); err != nil {
		t.Fatal(err)
	}
}

func alt() v1alpha1.Alternative {
	return v1alpha1.Alternative{Label: "Dry run", Reasoning: "No money moves.", Args: runtime.RawExtension{Raw: []byte(`{"dry_run":true}`)}}
}

func TestCompileErrors(t *testing.T) {
	type prob struct {
		field  string
		reason Reason
		detail string // substring
	}
	dur := func(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }
	rule0 := func(f func(r *v1alpha1.ToolRule)) func(*v1alpha1.ToolPolicySpec) {
		return func(s *v1alpha1.ToolPolicySpec) { f(&s.Rules[0]) }
	}
	sendPayment := func(f func(r *v1alpha1.ToolRule)) func(*v1alpha1.ToolPolicySpec) {
		return func(s *v1alpha1.ToolPolicySpec) { f(&s.Rules[1]) }
	}
	for _, tc := range []struct {
		name   string
		mutate func(*v1alpha1.ToolPolicySpec)
		want   []prob
	}{
		{"CEL syntax error", sendPayment(func(r *v1alpha1.ToolRule) { r.Arguments[0].Expression = "int(args.amount) <=" }),
			[]prob{{"spec.rules[1].arguments[0].expression", ReasonInvalidCEL, "does not compile"}}},
		{"CEL non-bool", sendPayment(func(r *v1alpha1.ToolRule) { r.Arguments[0].Expression = "args.amount" }),
			[]prob{{"spec.rules[1].arguments[0].expression", ReasonInvalidCEL, "must return bool"}}},
		{"CEL int result", sendPayment(func(r *v1alpha1.ToolRule) { r.Arguments[0].Expression = "1 + 2" }),
			[]prob{{"spec.rules[1].arguments[0].expression", ReasonInvalidCEL, "must return bool, returns int"}}},
		{"CEL undeclared variable", sendPayment(func(r *v1alpha1.ToolRule) { r.Arguments[1].Expression = "request.amount < 5" }),
			[]prob{{"spec.rules[1].arguments[1].expression", ReasonInvalidCEL, "undeclared reference"}}},
		{"CEL type error", sendPayment(func(r *v1alpha1.ToolRule) { r.Arguments[0].Expression = "1 == 'a' + 2" }),
			[]prob{{"spec.rules[1].arguments[0].expression", ReasonInvalidCEL, "does not compile"}}},
		{"CEL empty", sendPayment(func(r *v1alpha1.ToolRule) { r.Arguments[0].Expression = "  " }),
			[]prob{{"spec.rules[1].arguments[0].expression", ReasonInvalidCEL, "empty"}}},
		{"CEL too long", sendPayment(func(r *v1alpha1.ToolRule) { r.Arguments[0].Expression = strings.Repeat("true && ", 600) + "true" }),
			[]prob{{"spec.rules[1].arguments[0].expression", ReasonInvalidCEL, "longer than 4096"}}},
		{"duplicate constraint name", sendPayment(func(r *v1alpha1.ToolRule) { r.Arguments[1].Name = r.Arguments[0].Name }),
			[]prob{{"spec.rules[1].arguments[1].name", ReasonInvalidSpec, "duplicate"}}},
		{"unknown server in rule", rule0(func(r *v1alpha1.ToolRule) { r.Servers = []string{"payments", "crm"} }),
			[]prob{{"spec.rules[0].servers[1]", ReasonUnknownServer, `"crm"`}}},
		{"unknown server in destinations", rule0(func(r *v1alpha1.ToolRule) { r.Destinations = []string{"ledger"} }),
			[]prob{{"spec.rules[0].destinations[0]", ReasonUnknownServer, `"ledger"`}}},
		{"destination with a path", rule0(func(r *v1alpha1.ToolRule) { r.Destinations = []string{"https://pay.example/checkout"} }),
			[]prob{{"spec.rules[0].destinations[0]", ReasonInvalidSpec, "no path"}}},
		{"destination with another scheme", rule0(func(r *v1alpha1.ToolRule) { r.Destinations = []string{"mcp://pay.example"} }),
			[]prob{{"spec.rules[0].destinations[0]", ReasonInvalidSpec, "server name or an origin"}}},
		{"bad glob: character class", rule0(func(r *v1alpha1.ToolRule) { r.Tools = []string{"get_[ab]*"} }),
			[]prob{{"spec.rules[0].tools[0]", ReasonInvalidSpec, `'['`}}},
		{"bad glob: escape", rule0(func(r *v1alpha1.ToolRule) { r.Tools = []string{"get\\*"} }),
			[]prob{{"spec.rules[0].tools[0]", ReasonInvalidSpec, "allowed are"}}},
		{"bad glob: empty", rule0(func(r *v1alpha1.ToolRule) { r.Tools = []string{"get_*", ""} }),
			[]prob{{"spec.rules[0].tools[1]", ReasonInvalidSpec, "empty"}}},
		{"no tools", rule0(func(r *v1alpha1.ToolRule) { r.Tools = nil }),
			[]prob{{"spec.rules[0].tools", ReasonInvalidSpec, "at least one"}}},
		{"human role without alternative", sendPayment(func(r *v1alpha1.ToolRule) { r.Alternatives = nil }),
			[]prob{{"spec.rules[1].alternatives", ReasonInvalidSpec, "HumanAuthorization evidence must declare at least one alternative"}}},
		{"human role without principals", sendPayment(func(r *v1alpha1.ToolRule) { r.Evidence.Principals = nil }),
			[]prob{{"spec.rules[1].evidence.principals", ReasonInvalidSpec, "at least minPrincipals (1)"}}},
		{"human role, fewer principals than minPrincipals", sendPayment(func(r *v1alpha1.ToolRule) { r.Evidence.MinPrincipals = 2 }),
			[]prob{{"spec.rules[1].evidence.principals", ReasonInvalidSpec, "at least minPrincipals (2)"}}},
		{"escalate provenance without principals", rule0(func(r *v1alpha1.ToolRule) {
			r.Provenance = []v1alpha1.ProvenanceRule{{Sources: []v1alpha1.ProvenanceSource{"retrieval"}, Action: v1alpha1.ProvenanceActionEscalate}}
			r.Alternatives = []v1alpha1.Alternative{alt()}
		}), []prob{{"spec.rules[0].evidence.principals", ReasonInvalidSpec, "Escalate provenance action"}}},
		{"escalate provenance without alternative", rule0(func(r *v1alpha1.ToolRule) {
			r.Provenance = []v1alpha1.ProvenanceRule{{Sources: []v1alpha1.ProvenanceSource{"retrieval"}, Action: v1alpha1.ProvenanceActionEscalate}}
			r.Evidence = &v1alpha1.EvidenceRequirement{Principals: []string{"alice"}}
		}), []prob{{"spec.rules[0].alternatives", ReasonInvalidSpec, "Escalate provenance action"}}},
		{"bad provenance source", rule0(func(r *v1alpha1.ToolRule) {
			r.Provenance = []v1alpha1.ProvenanceRule{{Sources: []v1alpha1.ProvenanceSource{"tool"}, Action: v1alpha1.ProvenanceActionDeny}}
		}), []prob{{"spec.rules[0].provenance[0].sources[0]", ReasonInvalidSpec, "tool_output"}}},
		{"bad provenance action", rule0(func(r *v1alpha1.ToolRule) {
			r.Provenance = []v1alpha1.ProvenanceRule{{Sources: []v1alpha1.ProvenanceSource{"retrieval"}, Action: "Allow"}}
		}), []prob{{"spec.rules[0].provenance[0].action", ReasonInvalidSpec, "Deny or Escalate"}}},
		{"bad provenance class", rule0(func(r *v1alpha1.ToolRule) {
			r.Provenance = []v1alpha1.ProvenanceRule{{Sources: []v1alpha1.ProvenanceSource{"retrieval"}, Classes: []v1alpha1.ConsequenceClass{"financial"}, Action: "Deny"}}
		}), []prob{{"spec.rules[0].provenance[0].classes[0]", ReasonInvalidSpec, "consequence class"}}},
		{"bad consequence class", rule0(func(r *v1alpha1.ToolRule) { r.ConsequenceClass = "READ" }),
			[]prob{{"spec.rules[0].consequenceClass", ReasonInvalidSpec, "consequence class"}}},
		{"bad evidence role", rule0(func(r *v1alpha1.ToolRule) { r.Evidence.Role = "Human" }),
			[]prob{{"spec.rules[0].evidence.role", ReasonInvalidSpec, "None, PolicyPermit or HumanAuthorization"}}},
		{"minPrincipals out of range", sendPayment(func(r *v1alpha1.ToolRule) { r.Evidence.MinPrincipals = 9 }),
			[]prob{{"spec.rules[1].evidence.minPrincipals", ReasonInvalidSpec, "between 1 and 8"}}},
		{"duplicate principal", sendPayment(func(r *v1alpha1.ToolRule) { r.Evidence.Principals = []string{"alice", "alice"} }),
			[]prob{{"spec.rules[1].evidence.principals[1]", ReasonInvalidSpec, "duplicate"}}},
		{"alternative args not an object", sendPayment(func(r *v1alpha1.ToolRule) { r.Alternatives[0].Args.Raw = []byte(`[true]`) }),
			[]prob{{"spec.rules[1].alternatives[0].args", ReasonInvalidSpec, "JSON object"}}},
		{"alternative args out of profile", sendPayment(func(r *v1alpha1.ToolRule) { r.Alternatives[0].Args.Raw = []byte(`{"amount":10.5}`) }),
			[]prob{{"spec.rules[1].alternatives[0].args", ReasonInvalidSpec, "strict canonical profile"}}},
		{"alternative args missing", sendPayment(func(r *v1alpha1.ToolRule) { r.Alternatives[0].Args.Raw = nil }),
			[]prob{{"spec.rules[1].alternatives[0].args", ReasonInvalidSpec, "JSON object"}}},
		{"alternative without label", sendPayment(func(r *v1alpha1.ToolRule) { r.Alternatives[0].Label = " " }),
			[]prob{{"spec.rules[1].alternatives[0].label", ReasonInvalidSpec, "1-200"}}},
		{"too many alternatives", sendPayment(func(r *v1alpha1.ToolRule) {
			r.Alternatives = []v1alpha1.Alternative{alt(), alt(), alt(), alt()}
		}), []prob{{"spec.rules[1].alternatives", ReasonInvalidSpec, "at most 3"}}},
		{"duplicate rule name", func(s *v1alpha1.ToolPolicySpec) { s.Rules[2].Name = s.Rules[0].Name },
			[]prob{{"spec.rules[2].name", ReasonInvalidSpec, `duplicate rule name "reads"`}}},
		{"rule name not a DNS label", rule0(func(r *v1alpha1.ToolRule) { r.Name = "Reads" }),
			[]prob{{"spec.rules[0].name", ReasonInvalidSpec, "DNS label"}}},
		{"duplicate server name", func(s *v1alpha1.ToolPolicySpec) { s.Servers[1].Name = "payments" },
			[]prob{{"spec.servers[1].name", ReasonInvalidSpec, "duplicate server name"}, {"spec.rules[6].servers[0]", ReasonUnknownServer, `"mail"`}}},
		{"server URL not http", func(s *v1alpha1.ToolPolicySpec) { s.Servers[0].URL = "ftp://payments.example" },
			[]prob{{"spec.servers[0].url", ReasonInvalidSpec, "http or https"}}},
		{"server URL relative", func(s *v1alpha1.ToolPolicySpec) { s.Servers[0].URL = "/mcp" },
			[]prob{{"spec.servers[0].url", ReasonInvalidSpec, "absolute"}}},
		{"bad protocol", func(s *v1alpha1.ToolPolicySpec) { s.Servers[0].Protocol = "gRPC" },
			[]prob{{"spec.servers[0].protocol", ReasonInvalidSpec, "must be MCP"}}},
		{"HTTP protocol (no sink proxies it)", func(s *v1alpha1.ToolPolicySpec) { s.Servers[0].Protocol = "HTTP" },
			[]prob{{"spec.servers[0].protocol", ReasonInvalidSpec, "must be MCP"}}},
		{"no servers", func(s *v1alpha1.ToolPolicySpec) { s.Servers = nil; s.Rules = nil },
			[]prob{{"spec.servers", ReasonInvalidSpec, "at least one server"}}},
		{"bad mode", func(s *v1alpha1.ToolPolicySpec) { s.Mode = "enforce" },
			[]prob{{"spec.mode", ReasonInvalidSpec, "Enforce or Audit"}}},
		{"spec TTL too long", func(s *v1alpha1.ToolPolicySpec) { s.AuthorityTTL = dur(2 * time.Hour) },
			[]prob{{"spec.authorityTTL", ReasonInvalidSpec, "between 1s and 1h"}}},
		{"rule TTL too short", rule0(func(r *v1alpha1.ToolRule) { r.AuthorityTTL = dur(500 * time.Millisecond) }),
			[]prob{{"spec.rules[0].authorityTTL", ReasonInvalidSpec, "between 1s and 1h"}}},
		{"rate limit without calls", rule0(func(r *v1alpha1.ToolRule) { r.RateLimit = &v1alpha1.RateLimit{Period: *dur(time.Minute)} }),
			[]prob{{"spec.rules[0].rateLimit.calls", ReasonInvalidSpec, "between 1 and 1000000"}}},
		{"rate limit period too long", rule0(func(r *v1alpha1.ToolRule) { r.RateLimit = &v1alpha1.RateLimit{Calls: 1, Period: *dur(25 * time.Hour)} }),
			[]prob{{"spec.rules[0].rateLimit.period", ReasonInvalidSpec, "between 1s and 24h"}}},
		{"rate limit negative burst", rule0(func(r *v1alpha1.ToolRule) {
			r.RateLimit = &v1alpha1.RateLimit{Calls: 1, Period: *dur(time.Minute), Burst: -1}
		}), []prob{{"spec.rules[0].rateLimit.burst", ReasonInvalidSpec, "between 1 and 1000000"}}},
		{"rate limit bad per", rule0(func(r *v1alpha1.ToolRule) {
			r.RateLimit = &v1alpha1.RateLimit{Calls: 1, Period: *dur(time.Minute), Per: "Namespace"}
		}),
			[]prob{{"spec.rules[0].rateLimit.per", ReasonInvalidSpec, "Agent or Pod"}}},
		{"bad sink id", func(s *v1alpha1.ToolPolicySpec) { s.Sink.ID = "-sink" },
			[]prob{{"spec.sink.id", ReasonInvalidSpec, "alphanumeric"}}},
		{"bad pod selector", func(s *v1alpha1.ToolPolicySpec) {
			s.PodSelector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}
		}, []prob{{"spec.podSelector", ReasonInvalidSpec, ""}}},
		{"every problem is listed, in field order", func(s *v1alpha1.ToolPolicySpec) {
			s.Mode = "Observe"
			s.Rules[0].Tools = []string{"get_[x]"}
			s.Rules[1].Arguments[0].Expression = "args.amount"
			s.Rules[2].Servers = []string{"nowhere"}
		}, []prob{
			{"spec.mode", ReasonInvalidSpec, ""},
			{"spec.rules[0].tools[0]", ReasonInvalidSpec, ""},
			{"spec.rules[1].arguments[0].expression", ReasonInvalidCEL, ""},
			{"spec.rules[2].servers[0]", ReasonUnknownServer, ""},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := sampleSpec(t)
			tc.mutate(spec)
			c, err := Compile("shop/payments", spec, 1)
			if err == nil {
				t.Fatalf("compiled: %v", c)
			}
			if c != nil {
				t.Fatal("a policy that does not compile was returned")
			}
			if !errors.Is(err, ErrInvalidPolicy) {
				t.Fatalf("not ErrInvalidPolicy: %v", err)
			}
			var ce *CompileError
			if !errors.As(err, &ce) {
				t.Fatalf("not a *CompileError: %T", err)
			}
			if len(ce.Problems) != len(tc.want) {
				t.Fatalf("problems %v, want %d", ce.Problems, len(tc.want))
			}
			for i, w := range tc.want {
				p := ce.Problems[i]
				if p.Field != w.field || p.Reason != w.reason || !strings.Contains(p.Detail, w.detail) {
					t.Errorf("problem %d = %s, want %s: %s: …%s…", i, p, w.field, w.reason, w.detail)
				}
			}
			if ce.Reason() != tc.want[0].reason {
				t.Errorf("Reason() %s, want %s", ce.Reason(), tc.want[0].reason)
			}
			if !strings.Contains(err.Error(), "shop/payments") || !strings.Contains(err.Error(), tc.want[0].field) {
				t.Errorf("error text %q", err.Error())
			}
		})
	}
}

func TestCompileNilSpecAndEpoch(t *testing.T) {
	if _, err := Compile("x", nil, 0); !errors.Is(err, ErrInvalidPolicy) {
		t.Fatalf("nil spec: %v", err)
	}
	if _, err := Compile("x", sampleSpec(t), -1); err == nil {
		t.Fatal("negative epoch compiled")
	}
}

func TestCompileDefaults(t *testing.T) {
	spec := &v1alpha1.ToolPolicySpec{
		Servers: []v1alpha1.ToolServer{{Name: "s", URL: "https://s.example"}},
		Rules: []v1alpha1.ToolRule{{Name: "r", Tools: []string{"refund"},
			Evidence: &v1alpha1.EvidenceRequirement{Role: v1alpha1.EvidenceRolePolicyPermit}}},
	}
	c, err := Compile("gate", spec, 0)
	if err != nil {
		t.Fatal(err)
	}
	d := eval(c, req("refund", `{}`, on("s", "https://s.example")))
	if d.Outcome != OutcomePermit || d.AuthorityTTL != 60*time.Second {
		t.Fatalf("%s TTL %v: want Permit with the default 60s (v1alpha1.DefaultAuthorityTTL)", d.Outcome, d.AuthorityTTL)
	}
	if def, _ := time.ParseDuration(v1alpha1.DefaultAuthorityTTL); def != defaultTTL {
		t.Fatalf("defaultTTL %v disagrees with the API's %s", defaultTTL, v1alpha1.DefaultAuthorityTTL)
	}
	if d.RateLimit != nil {
		t.Fatalf("a rule without rateLimit has rate limit %+v", d.RateLimit)
	}
	// A rate limit's burst defaults to its calls, per agent.
	spec.Rules[0].RateLimit = &v1alpha1.RateLimit{Calls: 20, Period: metav1.Duration{Duration: 24 * time.Hour}}
	if c, err = Compile("gate", spec, 0); err != nil {
		t.Fatal(err)
	}
	d = eval(c, req("refund", `{}`, on("s", "https://s.example")))
	if rl := d.RateLimit; rl == nil || rl.Calls != 20 || rl.Burst != 20 || rl.Period != 24*time.Hour || rl.PerPod {
		t.Fatalf("rate limit %+v: want 20 per 24h, burst 20, per agent", rl)
	}
	// No rules: every call to a listed server is denied.
	spec.Rules = nil
	c, err = Compile("gate", spec, 0)
	if err != nil {
		t.Fatal(err)
	}
	if d := eval(c, req("refund", `{}`, on("s", "https://s.example"))); d.Outcome != OutcomeDeny {
		t.Fatalf("no rules: %s", d.Outcome)
	}
}

// TestCompileDoesNotRetainSpec: mutating the spec after Compile changes nothing.
func TestCompileDoesNotRetainSpec(t *testing.T) {
	spec := sampleSpec(t)
	c, err := Compile("shop/payments", spec, 1)
	if err != nil {
		t.Fatal(err)
	}
	spec.Servers[0].URL = "https://evil.example"
	spec.Rules[1].Evidence.Principals[0] = "mallory"
	spec.Rules[1].Alternatives[0].Args.Raw[2] = 'X'
	spec.Rules[0].Tools[0] = "*"
	if d := eval(c, req("get_balance", `{}`)); d.Outcome != OutcomeAllow {
		t.Fatalf("server URL change leaked: %s %s", d.Outcome, d.Code)
	}
	d := eval(c, req("send_payment", `{"amount":1,"currency":"EUR"}`))
	if d.Evidence.Principals[0] != "alice" || string(d.Alternatives[0].Args.Raw) != `{"dry_run":true}` {
		t.Fatalf("spec mutation leaked: %+v", d)
	}
	if c.Servers()[0].URL != paymentsURL {
		t.Fatal("Servers() changed")
	}
}
