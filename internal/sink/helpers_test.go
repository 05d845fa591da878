package sink

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/authority/boltstore"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/policy"
	"github.com/actgate/actgate/internal/receipt"
	"github.com/actgate/actgate/test/testutil"
)

var t0 = time.Date(2026, 7, 27, 12, 0, 0, 0, time.UTC)

// clock is the injected clock shared by the gate, the store and the receipt log.
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

// Servers of the test policy.
const (
	toolsURL   = "https://tools.example/mcp"
	payURL     = "https://pay.example/mcp"
	evilURL    = "https://pay.attacker.example/mcp"
	browserURL = "https://browser.example/mcp"
	agentID    = "agent-1"
)

// tableRule is one rule of the table policy the tests use: a small stand-in for the compiled
// ToolPolicy with the same fail-closed shape (unknown server or tool: deny; destination must be
// the server's unless the rule lets any through; provenance deny rules first).
type tableRule struct {
	tool           string
	outcome        PolicyOutcome
	code           ef.EFCode
	class          act.ConsequenceClass
	principals     []string
	min            int
	alternatives   []Alternative
	denySources    []string // provenance sources that deny with EF_INSTRUCTION_PROVENANCE_FAILURE
	anyDestination bool     // computer-use: the destination is the focused origin
	ttl            time.Duration
	masks          []string // maskArguments
	rate           *policy.RateLimit
}

type tablePolicy struct {
	servers []ServerInfo
	rules   []tableRule
	epoch   atomic.Int64
	audit   bool
	delay   time.Duration
	evals   atomic.Int64
}

func (p *tablePolicy) Servers() []ServerInfo { return p.servers }

func (p *tablePolicy) CanEscalate(server, tool string) bool {
	for _, r := range p.rules {
		if r.tool == tool {
			return r.outcome == PolicyEscalate
		}
	}
	return false
}

func (p *tablePolicy) Evaluate(ctx context.Context, r PolicyRequest) PolicyDecision {
	p.evals.Add(1)
	if p.delay > 0 {
		select {
		case <-time.After(p.delay):
		case <-ctx.Done():
		}
	}
	d := PolicyDecision{Epoch: p.epoch.Load(), Policy: "default/test", Audit: p.audit}
	deny := func(code ef.EFCode) PolicyDecision {
		d.Outcome, d.Code = PolicyDeny, code
		return d
	}
	if ctx.Err() != nil {
		return deny(ef.EF060)
	}
	var srv *ServerInfo
	for i := range p.servers {
		if p.servers[i].Name == r.Server {
			srv = &p.servers[i]
		}
	}
	if srv == nil {
		return deny(ef.EFUnknownTool)
	}
	var rule *tableRule
	for i := range p.rules {
		if p.rules[i].tool == r.Tool {
			rule = &p.rules[i]
			break
		}
	}
	if rule == nil {
		return deny(ef.EFUnknownTool)
	}
	d.Rule = strings.ReplaceAll(rule.tool, "_", "-")
	if !rule.anyDestination && r.Destination != srv.URL {
		return deny(ef.EFDestinationMismatch)
	}
	for _, s := range rule.denySources {
		if s == r.Provenance {
			return deny(ef.EFInstructionProvenanceFailure)
		}
	}
	d.Outcome, d.Code, d.Class, d.AuthorityTTL = rule.outcome, rule.code, rule.class, rule.ttl
	d.MaskArguments = rule.masks
	d.RateLimit = rule.rate
	if rule.outcome == PolicyEscalate {
		d.Code = ef.EFEscalationRequired
		d.Evidence = Evidence{Role: "HumanAuthorization", Principals: rule.principals, MinPrincipals: rule.min, SeparationOfDuties: true}
		d.Alternatives = rule.alternatives
	}
	return d
}

func newTablePolicy() *tablePolicy {
	p := &tablePolicy{
		servers: []ServerInfo{{"tools", toolsURL}, {"pay", payURL}, {"browser", browserURL}},
		rules: []tableRule{
			{tool: "search", outcome: PolicyAllow, class: act.ClassInformational},
			{tool: "email_send", outcome: PolicyPermit, class: act.ClassCommunication, denySources: []string{"retrieval"}},
			{tool: "ticket_create", outcome: PolicyPermit},
			{tool: "payout_create", outcome: PolicyEscalate, class: act.ClassFinancial,
				principals: []string{"alice", "bob", "carol"}, min: 1,
				alternatives: []Alternative{
					{Label: "Pay at most 100", Reasoning: "Caps the amount while the rest is checked.", Args: json.RawMessage(`{"amount":100}`)},
					{Label: "Dry run", Reasoning: "Shows what would be paid and pays nothing.", Args: json.RawMessage(`{"dry_run":true}`)},
				}},
			{tool: "wire_transfer", outcome: PolicyEscalate, class: act.ClassFinancial,
				principals: []string{"alice", "bob", "carol", agentID}, min: 2,
				alternatives: []Alternative{{Label: "Hold the wire", Reasoning: "Keeps the funds until reviewed.", Args: json.RawMessage(`{"hold":true}`)}}},
			{tool: "computer_submit", outcome: PolicyEscalate, anyDestination: true,
				principals:   []string{"alice"},
				alternatives: []Alternative{{Label: "Fill without submitting", Reasoning: "Leaves the form for a person to send.", Args: json.RawMessage(`{"submit":false}`)}}},
			{tool: "delete_all", outcome: PolicyDeny, code: ef.EFPolicyDenied},
		},
	}
	p.epoch.Store(7)
	return p
}

// upstream counts invocations per tool: its own count is what the tests assert.
type upstream struct {
	mu      sync.Mutex
	counts  map[string]int
	outcome InvokeOutcome
	err     error
	hook    func(ctx context.Context) // runs inside the invocation
	opIDs   []string
}

func newUpstream() *upstream {
	return &upstream{counts: map[string]int{}, outcome: OutcomeExecuted}
}

func (u *upstream) invoker(tool string) Invoker {
	return func(ctx context.Context, operationID string) (InvokeResult, error) {
		u.mu.Lock()
		u.counts[tool]++
		n := u.counts[tool]
		u.opIDs = append(u.opIDs, operationID)
		outcome, err, hook := u.outcome, u.err, u.hook
		u.mu.Unlock()
		if hook != nil {
			hook(ctx)
		}
		res := json.RawMessage(fmt.Sprintf(`{"content":[{"type":"text","text":"%s #%d"}]}`, tool, n))
		return InvokeResult{Result: res, Outcome: outcome}, err
	}
}

func (u *upstream) count(tool string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.counts[tool]
}

func (u *upstream) total() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := 0
	for _, c := range u.counts {
		n += c
	}
	return n
}

// fixture is a gate on a real bbolt store and a real receipt log in a temporary directory.
type fixture struct {
	t      testing.TB
	dir    string
	clock  *clock
	signer *authority.Signer
	idKey  []byte
	logKey *signature.ED25519SignerVerifier
	policy *tablePolicy
	store  *boltstore.Store
	log    *receipt.Log
	gate   *Gate
	up     *upstream
	mutate func(*Options)
}

func newFixture(t testing.TB, mutate ...func(*Options)) *fixture {
	t.Helper()
	seed := sha256.Sum256([]byte("actgate sink tests"))
	signer, err := authority.NewSigner(ed25519.NewKeyFromSeed(seed[:]))
	if err != nil {
		t.Fatal(err)
	}
	logSeed := sha256.Sum256([]byte("actgate receipt tests"))
	logKey, err := signature.LoadED25519SignerVerifier(ed25519.NewKeyFromSeed(logSeed[:]))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{
		t: t, dir: t.TempDir(), clock: &clock{now: t0}, signer: signer,
		idKey: []byte("0123456789abcdef0123456789abcdef"), logKey: logKey,
		policy: newTablePolicy(), up: newUpstream(),
	}
	if len(mutate) > 0 {
		f.mutate = mutate[0]
	}
	f.open()
	t.Cleanup(f.close)
	return f
}

// open opens the store and the receipt log and builds a gate on them (New runs recovery).
func (f *fixture) open() {
	f.t.Helper()
	st, err := boltstore.Open(filepath.Join(f.dir, "actgate.db"), boltstore.Options{Verifier: f.signer.Verifier(), Now: f.clock.Now})
	if err != nil {
		f.t.Fatal(err)
	}
	lg, err := receipt.Open(receipt.Options{Path: filepath.Join(f.dir, "receipts.jsonl"), Signer: f.logKey, Now: f.clock.Now})
	if err != nil {
		f.t.Fatal(err)
	}
	ids, err := act.NewIDIssuer(f.idKey, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	opts := Options{
		SinkID: "sink-test", Policy: f.policy, Store: st, Journal: st, Signer: f.signer, IDs: ids,
		Receipts: lg, Now: f.clock.Now, RuntimeID: "sink-tests",
	}
	if f.mutate != nil {
		f.mutate(&opts)
	}
	g, err := New(opts)
	if err != nil {
		f.t.Fatal(err)
	}
	f.store, f.log, f.gate = st, lg, g
}

func (f *fixture) close() {
	if f.log != nil {
		f.log.Close()
		f.log = nil
	}
	if f.store != nil {
		f.store.Close()
		f.store = nil
	}
}

// restart closes the store and log and opens them again with a new gate: what a process
// restart does to everything but the files.
func (f *fixture) restart() {
	f.t.Helper()
	f.close()
	f.open()
}

// call is a call of tool on server with args in session.
func call(session, server, tool, args string) Call {
	dest := map[string]string{"tools": toolsURL, "pay": payURL, "browser": browserURL}[server]
	return Call{Session: session, Agent: agentID, Server: server, Destination: dest, Tool: tool,
		Args: json.RawMessage(args), Vendor: act.VendorMCP, VendorID: "7"}
}

func (f *fixture) handle(c Call) Result {
	f.t.Helper()
	res, err := f.gate.Handle(context.Background(), c, f.up.invoker(c.Tool))
	if err != nil {
		f.t.Fatalf("Handle(%s): %v", c.Tool, err)
	}
	return res
}

// resolution is the envelope-04 §7.3 resolution JSON.
func resolution(digest, kind string, option int, answer string) []byte {
	m := map[string]any{"envelope_digest": digest, "resolution": kind}
	switch kind {
	case "option":
		m["option_idx"] = option
	case "answer":
		m["answer"] = answer
	}
	b, _ := json.Marshal(map[string]any{"binding_moment_resolution": m})
	return b
}

// receipts flushes, reads and verifies the receipt log and returns its receipts.
func (f *fixture) receipts() []receipt.Receipt {
	f.t.Helper()
	if err := f.log.Flush(context.Background()); err != nil {
		f.t.Fatal(err)
	}
	return testutil.VerifiedReceipts(f.t, filepath.Join(f.dir, "receipts.jsonl"), f.logKey)
}

// records returns every journal record in state s.
func (f *fixture) records(s journal.State) []journal.DispatchRecord {
	f.t.Helper()
	recs, err := f.store.InState(context.Background(), s)
	if err != nil {
		f.t.Fatal(err)
	}
	return recs
}

func wantDeny(t testing.TB, res Result, code ef.EFCode) {
	t.Helper()
	if res.Allowed || res.Invoked || res.Code != code {
		t.Fatalf("result = allowed %v invoked %v code %q (%s), want a deny with %s", res.Allowed, res.Invoked, res.Code, res.Message, code)
	}
}
