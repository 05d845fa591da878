package metrics_test

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/authority/boltstore"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/sink"
)

// The fixture follows internal/sink/helpers_test.go: a real gate on a real bbolt store in
// t.TempDir(), an injected clock, a small table policy and an upstream that counts calls.

var t0 = time.Date(2026, 7, 27, 12, 0, 0, 0, time.UTC)

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

const (
	toolsURL   = "https://tools.example/mcp"
	payURL     = "https://pay.example/mcp"
	agentID    = "agent-1"
	policyName = "billing/payments"
)

type rule struct {
	outcome sink.PolicyOutcome
	code    ef.EFCode
	class   act.ConsequenceClass
}

// tablePolicy decides by tool name; an unknown server or tool is denied (fail closed).
type tablePolicy struct {
	rules map[string]rule
	audit bool
}

func (p *tablePolicy) Servers() []sink.ServerInfo {
	return []sink.ServerInfo{{Name: "tools", URL: toolsURL}, {Name: "pay", URL: payURL}}
}

func (p *tablePolicy) CanEscalate(_, tool string) bool {
	return p.rules[tool].outcome == sink.PolicyEscalate
}

func (p *tablePolicy) Evaluate(ctx context.Context, r sink.PolicyRequest) sink.PolicyDecision {
	d := sink.PolicyDecision{Epoch: 3, Policy: policyName, Audit: p.audit}
	rl, ok := p.rules[r.Tool]
	if ctx.Err() != nil || !ok {
		d.Outcome, d.Code = sink.PolicyDeny, ef.EFUnknownTool
		return d
	}
	d.Rule = r.Tool
	d.Outcome, d.Code, d.Class = rl.outcome, rl.code, rl.class
	if rl.outcome == sink.PolicyEscalate {
		d.Code = ef.EFEscalationRequired
		d.Evidence = sink.Evidence{Role: "HumanAuthorization", Principals: []string{"alice"}, MinPrincipals: 1, SeparationOfDuties: true}
		d.Alternatives = []sink.Alternative{{Label: "Pay at most 100", Reasoning: "Caps the amount.", Args: json.RawMessage(`{"amount":100}`)}}
	}
	return d
}

func newPolicy() *tablePolicy {
	return &tablePolicy{rules: map[string]rule{
		"search":        {outcome: sink.PolicyAllow, class: act.ClassInformational},
		"lookup":        {outcome: sink.PolicyDeny, code: ef.EFPolicyDenied, class: act.ClassInformational},
		"email_send":    {outcome: sink.PolicyPermit, class: act.ClassCommunication},
		"delete_all":    {outcome: sink.PolicyDeny, code: ef.EFPolicyDenied, class: act.ClassPersistentStateChange},
		"payout_create": {outcome: sink.PolicyEscalate, class: act.ClassFinancial},
	}}
}

type upstream struct {
	mu      sync.Mutex
	calls   int
	outcome sink.InvokeOutcome
}

func (u *upstream) invoker(context.Context, string) (sink.InvokeResult, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.calls++
	return sink.InvokeResult{Result: json.RawMessage(`{"content":[{"type":"text","text":"ok"}]}`), Outcome: u.outcome}, nil
}

func (u *upstream) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.calls
}

type fixture struct {
	t     *testing.T
	clock *clock
	store *boltstore.Store
	gate  *sink.Gate
	up    *upstream
}

func newFixture(t *testing.T, p sink.PolicyEvaluator, obs sink.Observer, mutate ...func(*sink.Options)) *fixture {
	t.Helper()
	seed := sha256.Sum256([]byte("actgate metrics tests"))
	signer, err := authority.NewSigner(ed25519.NewKeyFromSeed(seed[:]))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, clock: &clock{now: t0}, up: &upstream{outcome: sink.OutcomeExecuted}}
	f.store, err = boltstore.Open(filepath.Join(t.TempDir(), "actgate.db"), boltstore.Options{Verifier: signer.Verifier(), Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.store.Close() })
	ids, err := act.NewIDIssuer([]byte("0123456789abcdef0123456789abcdef"), nil)
	if err != nil {
		t.Fatal(err)
	}
	opts := sink.Options{SinkID: "sink-test", Policy: p, Store: f.store, Journal: f.store, Signer: signer,
		IDs: ids, Now: f.clock.Now, RuntimeID: "metrics-tests", Observer: obs}
	for _, m := range mutate {
		m(&opts)
	}
	f.gate, err = sink.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func call(session, server, tool, args string) sink.Call {
	dest := map[string]string{"tools": toolsURL, "pay": payURL}[server]
	return sink.Call{Session: session, Agent: agentID, Server: server, Destination: dest, Tool: tool,
		Args: json.RawMessage(args), Vendor: act.VendorMCP, VendorID: "7"}
}

func (f *fixture) handle(c sink.Call) sink.Result {
	f.t.Helper()
	res, err := f.gate.Handle(context.Background(), c, f.up.invoker)
	if err != nil {
		f.t.Fatalf("Handle(%s): %v", c.Tool, err)
	}
	return res
}

func (f *fixture) resolve(m *sink.MomentRef, principal, kind string) {
	f.t.Helper()
	r := map[string]any{"envelope_digest": m.Digest, "resolution": kind}
	if kind == "option" {
		r["option_idx"] = 0
	}
	b, _ := json.Marshal(map[string]any{"binding_moment_resolution": r})
	if _, err := f.gate.Resolve(context.Background(), m.ID, principal, b); err != nil {
		f.t.Fatalf("resolve %s: %v", kind, err)
	}
}

// series is one gathered sample: its metric name, labels and value (for a histogram, its
// sample count and sum).
type series struct {
	name   string
	labels map[string]string
	value  float64
	count  uint64
	sum    float64
}

func gather(t *testing.T, g prometheus.Gatherer) []series {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	var out []series
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			s := series{name: mf.GetName(), labels: map[string]string{}}
			for _, lp := range m.GetLabel() {
				s.labels[lp.GetName()] = lp.GetValue()
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				s.value = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				s.value = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				s.count, s.sum = m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
			}
			out = append(out, s)
		}
	}
	return out
}

// find returns the series of name whose labels are exactly want.
func find(ss []series, name string, want map[string]string) (series, bool) {
	for _, s := range ss {
		if s.name != name || len(s.labels) != len(want) {
			continue
		}
		match := true
		for k, v := range want {
			if s.labels[k] != v {
				match = false
			}
		}
		if match {
			return s, true
		}
	}
	return series{}, false
}

// dump lists every series of name, for failure messages.
func dump(ss []series, name string) string {
	var lines []string
	for _, s := range ss {
		if s.name == name {
			lines = append(lines, fmt.Sprintf("%v value=%v count=%d sum=%v", s.labels, s.value, s.count, s.sum))
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// countOf sums the values (or histogram counts) of every series of name.
func countOf(ss []series, name string) float64 {
	n := 0.0
	for _, s := range ss {
		if s.name == name {
			n += s.value + float64(s.count)
		}
	}
	return n
}
