package policy

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/ef"
)

// FuzzEvaluate drives random servers, tools, arguments, destinations, provenance and classes
// through the sample policy. It must never panic, never let through a call no rule governs,
// and never Allow what the policy says needs more.
func FuzzEvaluate(f *testing.F) {
	for _, tc := range evalCases() {
		f.Add(tc.r.Server, tc.r.Tool, []byte(tc.r.Args), tc.r.Destination, tc.r.Provenance, string(tc.r.Class), tc.r.Agent, tc.r.StrictArgs)
	}
	f.Add("payments", "send_payment", []byte(`{"amount":1e400}`), paymentsURL, "user", "", "", true)
	f.Add("payments", "get_\xff", []byte(`{"a":"\ud800"}`), "https://[::1", "tool", "FINANCIAL", "alice", false)

	c := compileSample(f, nil)
	audit := compileSample(f, func(s *v1alpha1.ToolPolicySpec) { s.Mode = v1alpha1.PolicyModeAudit })
	f.Fuzz(func(t *testing.T, server, tool string, args []byte, dest, provenance, class, agentID string, strict bool) {
		r := Request{Server: server, Destination: dest, Tool: tool, Args: args, Class: act.ConsequenceClass(class),
			Provenance: provenance, Agent: agentID, StrictArgs: strict}
		d := c.Evaluate(context.Background(), r)
		a := audit.Evaluate(context.Background(), r)

		switch d.Outcome {
		case OutcomeAllow, OutcomePermit, OutcomeEscalate, OutcomeDeny:
		default:
			t.Fatalf("outcome %q", d.Outcome)
		}
		governed := c.byName[server] != nil && c.match(server, tool) != nil
		if !governed && (d.Outcome != OutcomeDeny || d.Code != ef.EFUnknownTool) {
			t.Fatalf("ungoverned call %q on %q: %s %s", tool, server, d.Outcome, d.Code)
		}
		if d.Outcome == OutcomeDeny || d.Outcome == OutcomeEscalate {
			if !d.Code.Known() || d.Message == "" {
				t.Fatalf("%s without a known code and message: %q %q", d.Outcome, d.Code, d.Message)
			}
		}
		if d.Outcome != OutcomeDeny {
			// Anything not denied passed the destination check and has a rule and a class.
			if d.Rule == "" || !d.Class.Valid() {
				t.Fatalf("%s without rule or class: %+v", d.Outcome, d)
			}
			if _, err := origin(dest); err != nil && c.byName[dest] == nil {
				t.Fatalf("%s with a destination that is not a URL or server: %q", d.Outcome, dest)
			}
		}
		if d.Outcome == OutcomeAllow && (authorityRequired(d.Class) || d.Evidence.Role != v1alpha1.EvidenceRoleNone) {
			t.Fatalf("Allow of class %s with role %s", d.Class, d.Evidence.Role)
		}
		if d.Outcome == OutcomeEscalate && (!strict || len(EligiblePrincipals(d, agentID, c.SinkID())) < MinPrincipals(d)) {
			t.Fatalf("escalation that cannot resolve: strict=%v %+v", strict, d)
		}
		if d.Rule == "send-payment" && d.Outcome != OutcomeDeny && d.Outcome != OutcomeEscalate {
			t.Fatalf("send_payment %s", d.Outcome)
		}
		// Audit reports exactly what Enforce decided.
		if a.Outcome != OutcomeAllow || !a.Audit || a.AuditOutcome != d.Outcome || a.Code != d.Code || a.Message != d.Message {
			t.Fatalf("audit %+v vs enforce %+v", a, d)
		}
	})
}

// FuzzLoadFile feeds random bytes through LoadFile and, when they load, Compile and Evaluate.
func FuzzLoadFile(f *testing.F) {
	seed, err := os.ReadFile(samplePath)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte(specOnlyYAML))
	f.Add([]byte(`{"servers":[{"name":"s","url":"https://s.example"}],"rules":[{"name":"r","tools":["*"],"arguments":[{"name":"a","expression":"args.x > 1"}]}]}`))
	f.Add([]byte("servers: [\n"))
	f.Add([]byte("a: &a [*a]\n"))
	f.Add([]byte(specOnlyYAML + "---\n"))
	f.Add([]byte("apiVersion: actgate.io/v1alpha1\nkind: ToolPolicy\nspec: {servers: [{name: s, url: 'http://s'}]}\n"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(dir, "p.yaml")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		spec, err := LoadFile(p)
		if err != nil {
			if spec != nil {
				t.Fatal("spec with an error")
			}
			return
		}
		c, err := Compile("fuzz", spec, 0)
		if err != nil {
			if c != nil {
				t.Fatal("policy with an error")
			}
			return
		}
		for _, s := range c.Servers() {
			d := c.Evaluate(context.Background(), Request{Server: s.Name, Destination: s.URL, Tool: "t", Args: []byte(`{"x":2}`), StrictArgs: true})
			if d.Outcome == "" {
				t.Fatal("empty outcome")
			}
		}
	})
}
