package sidecar

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sigstore/sigstore/pkg/signature"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/authority/boltstore"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/hostloop"
	"github.com/actgate/actgate/internal/jcs"
	"github.com/actgate/actgate/internal/mcpproxy"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/internal/policy"
	"github.com/actgate/actgate/internal/receipt"
	"github.com/actgate/actgate/internal/review"
	"github.com/actgate/actgate/internal/sink"
	"github.com/actgate/actgate/test/testutil"
)

const (
	testNS     = "billing"
	testAgent  = "system:serviceaccount:billing:billing-agent"
	testSink   = "billing-agent-sink"
	testToken  = "pod-token-1"
	upstreamTk = "upstream-secret-7f3a"
	moment     = "bm-0123456789abcdef0123456789abcdef01234567"
)

// How the stub authority service answers a Review, and then a Consume, for a tool.
type reviewMode int

const (
	rvAllow reviewMode = iota // allowed, no authority (hot path)
	rvPermit
	rvDeny
	rvEscalate
	rvAudit // audit mode: allowed, AuditDenied
	rvTimeout
	rvGarbage
	rvAllowed503 // HTTP 503 with a body saying allowed: the client must not believe it
	rvWrongUID
	rvUnauthenticated
	rvTamperArgs
	rvWrongSink
	rvWrongDest
	rvWrongNS
	rvRogueKey
	rvExpired
	rvGranted // an escalation granted: authority plus the resolution
)

type consumeMode int

const (
	cmOK consumeMode = iota
	cmRefused
	cmUnconfirmed
	cmWrongOperation
	cmTimeout
	cmGarbage
)

type mode struct {
	review  reviewMode
	consume consumeMode
}

// stub is an authority service over real HTTPS speaking review.actgate.io/v1alpha1 with the
// real strict decoder: what the sidecar sends must be a valid review. It signs with signer (the
// key the sidecar trusts) and remembers every consume.
type stub struct {
	t      testing.TB
	signer *authority.Signer
	rogue  *authority.Signer
	modes  map[string]mode // by tool
	srv    *httptest.Server
	env    *envelope.Envelope
	delay  time.Duration // for the timeout modes

	mu       sync.Mutex
	tokens   []string
	reviews  int
	consumes []review.ConsumeRequest
	spent    map[string]bool
	reports  []review.ReportRequest
	// reportFails makes every Report answer 503 (the service unavailable).
	reportFails bool
	// reportDelay is how long each Report takes to answer; reportsInFlight and
	// maxReportsInFlight count the Reports being answered at once.
	reportDelay                         time.Duration
	reportsInFlight, maxReportsInFlight int
	// traceparents are the traceparent headers of every review received, in order.
	traceparents []string
	// ops counts the reviews received by operation; policyGets the requests of the policy
	// endpoint.
	ops        map[review.Operation]int
	policyGets int
	// proposals are the Propose reviews received; anchors the checkpoints posted.
	proposals []review.ProposalRequest
	anchors   []review.AnchorRequest
	// spec and epoch are the ToolPolicy the stub serves at the policy endpoint (none when
	// spec is nil: the answer is NotGoverned).
	spec  *v1alpha1.ToolPolicySpec
	epoch int64
	// chosen, once set, is the option a principal chose on the escalation of an rvEscalate
	// tool: the stub then answers every Review of that tool with the grant of the chosen
	// option's call, consumed, as a service would that hands a moment's grant to whichever
	// call of the moment comes next.
	chosen *chosenOption
	// level is the review protocol level the stub's answers state; negative states none.
	level atomic.Int64
}

// chosenOption is a principal's resolution: the option's index and its call's arguments.
type chosenOption struct {
	idx  int32
	args json.RawMessage
}

// count is how many reviews of op the stub received.
func (s *stub) count(op review.Operation) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ops[op]
}

// requests is how many reviews of any operation the stub received.
func (s *stub) requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, v := range s.ops {
		n += v
	}
	return n
}

// decisions counts the requests that ask the service for a decision: every operation but
// Refusal, which records a refusal already made, off the call path.
func (s *stub) decisions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for op, v := range s.ops {
		if op != review.OperationRefusal {
			n += v
		}
	}
	return n
}

// podPolicy answers the policy endpoint: the stub's spec at its epoch, or none. A watch
// returns at once when the version differs, else after a short wait with the same answer.
func (s *stub) podPolicy(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	spec, epoch := s.spec, s.epoch
	s.policyGets++
	s.mu.Unlock()
	p := review.PodPolicy{TypeMeta: metav1.TypeMeta{APIVersion: review.APIVersion, Kind: review.PolicyKind}}
	if spec == nil {
		p.Version = "none"
		p.None = &review.NoPolicy{Reason: review.ReasonNotGoverned, Code: ef.EFPolicyDenied, Message: "No ToolPolicy selects this pod."}
	} else {
		p.Version = "v" + strconv.FormatInt(epoch, 10)
		p.Policy = &review.GoverningPolicy{Name: "bank", Namespace: testNS, UID: "uid-bank", Generation: epoch,
			ResourceVersion: p.Version, Epoch: epoch, Spec: *spec}
	}
	if r.URL.Query().Get(review.PolicyWatchParam) == "true" && r.URL.Query().Get(review.PolicyVersionParam) == p.Version {
		select {
		case <-r.Context().Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(p)
}

func (s *stub) reported() []review.ReportRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]review.ReportRequest(nil), s.reports...)
}

func signerFrom(t testing.TB, seed string) *authority.Signer {
	t.Helper()
	s := sha256.Sum256([]byte(seed))
	signer, err := authority.NewSigner(ed25519.NewKeyFromSeed(s[:]))
	if err != nil {
		t.Fatal(err)
	}
	return signer
}

func newStub(t testing.TB, modes map[string]mode) *stub {
	t.Helper()
	raw, err := os.ReadFile("testdata/envelope.canonical.json")
	if err != nil {
		t.Fatal(err)
	}
	env, err := envelope.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	s := &stub{t: t, signer: signerFrom(t, "authority"), rogue: signerFrom(t, "rogue"), modes: modes, env: env,
		delay: 3 * time.Second, spent: map[string]bool{}}
	s.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Every answer states the service's review protocol level, as the real service does.
		if l := s.level.Load(); l >= 0 {
			review.SetLevel(w.Header(), int(l))
		}
		s.serve(w, r)
	}))
	s.level.Store(review.Level)
	t.Cleanup(s.srv.Close)
	return s
}

func (s *stub) client(token func() (string, error)) *review.Client {
	return &review.Client{URL: s.srv.URL, HTTP: s.srv.Client(), Token: token}
}

func (s *stub) consumeCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.consumes)
}

func (s *stub) reviewCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reviews
}

func (s *stub) lastToken() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.tokens) == 0 {
		return ""
	}
	return s.tokens[len(s.tokens)-1]
}

func (s *stub) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == review.PolicyPath {
		s.podPolicy(w, r)
		return
	}
	if r.Method == http.MethodPost && r.URL.Path == review.AnchorPath {
		var a review.AnchorRequest
		if err := json.NewDecoder(r.Body).Decode(&a); err != nil {
			s.t.Errorf("the sidecar sent a malformed anchor request: %v", err)
		}
		s.mu.Lock()
		s.anchors = append(s.anchors, a)
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"},
			Status: metav1.StatusSuccess, Reason: metav1.StatusReason(review.ReasonAnchored), Code: 200})
		return
	}
	body, _ := io.ReadAll(r.Body)
	rv, uid, err := review.DecodeRequest(body)
	if err != nil {
		s.t.Errorf("the sidecar sent a malformed review: %v\n%s", err, body)
		http.Error(w, "bad review", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.tokens = append(s.tokens, strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
	s.traceparents = append(s.traceparents, r.Header.Get("traceparent"))
	s.mu.Unlock()
	req := rv.Request
	s.mu.Lock()
	if s.ops == nil {
		s.ops = map[review.Operation]int{}
	}
	s.ops[req.Operation]++
	s.mu.Unlock()
	switch req.Operation {
	case review.OperationPropose:
		s.mu.Lock()
		s.proposals = append(s.proposals, *req.Proposal)
		s.mu.Unlock()
		env, err := envelope.Parse([]byte(req.Proposal.Envelope))
		if err != nil {
			s.t.Errorf("the sidecar proposed an envelope that does not parse: %v", err)
			s.answer(w, 200, uid, review.Response{Code: ef.EFMomentInvalid, Reason: review.ReasonBadRequest})
			return
		}
		exp := metav1.NewTime(time.Now().Add(10 * time.Minute))
		s.answer(w, 200, uid, review.Response{Allowed: true, Decision: v1alpha1.ActDecisionEscalated, Reason: review.ReasonBindingMoment,
			Escalation: &review.Escalation{State: review.EscalationPending, BindingMoments: []string{moment},
				Envelope: req.Proposal.Envelope, EnvelopeDigest: env.Digest(), ExpiresAt: &exp}})
	case review.OperationConsume:
		s.consume(w, uid, req.Consume)
	case review.OperationReport:
		s.mu.Lock()
		s.reports = append(s.reports, *req.Report)
		fails, delay := s.reportFails, s.reportDelay
		s.reportsInFlight++
		s.maxReportsInFlight = max(s.maxReportsInFlight, s.reportsInFlight)
		s.mu.Unlock()
		time.Sleep(delay)
		s.mu.Lock()
		s.reportsInFlight--
		s.mu.Unlock()
		if fails {
			s.answer(w, 503, uid, review.Response{Code: ef.EFStoreUnavailable, Reason: review.ReasonUnavailable})
			return
		}
		r := req.Report
		s.answer(w, 200, uid, review.Response{Allowed: true, Reason: review.ReasonAuthority,
			Reported: &review.Reported{AuthorityID: r.AuthorityID, OperationID: r.OperationID, State: r.State}})
	default:
		s.review(w, uid, req)
	}
}

func (s *stub) answer(w http.ResponseWriter, status int, uid types.UID, resp review.Response) {
	resp.UID = uid
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(review.ActReview{TypeMeta: metav1.TypeMeta{APIVersion: review.APIVersion, Kind: review.Kind}, Response: &resp})
}

func (s *stub) review(w http.ResponseWriter, uid types.UID, req *review.Request) {
	s.mu.Lock()
	s.reviews++
	s.mu.Unlock()
	a, err := act.ParseCandidateAct(req.Act)
	if err != nil {
		s.t.Errorf("the sidecar sent an invalid act: %v", err)
		s.answer(w, 400, uid, review.Response{Code: ef.EFActInvalid})
		return
	}
	if err := a.MatchArguments(req.Arguments); err != nil {
		s.t.Errorf("the act's digest does not match the arguments sent: %v", err)
	}
	m := s.modes[a.Tool.ToolID]
	canon, err := jcs.Canonicalize(req.Arguments, a.ArgumentsDigest.Canonicalization.Mode())
	if err != nil {
		s.t.Fatal(err)
	}
	b := authority.Binding{
		ActID: a.CandidateActID, ArgumentsDigest: jcs.Digest(canon), ActionDigest: a.ArgumentsDigest.Value,
		Tool: a.Tool.ToolID, Destination: a.Destination.DestinationID, SinkID: a.FinalitySink.SinkID,
		PolicyEpoch: "1", Namespace: testNS,
	}
	signer, issued, ttl := s.signer, time.Now(), time.Minute
	switch m.review {
	case rvAllow:
		s.answer(w, 200, uid, review.Response{Allowed: true, Decision: v1alpha1.ActDecisionAllowed, Act: a.CandidateActID})
		return
	case rvAudit:
		s.answer(w, 200, uid, review.Response{Allowed: true, Decision: v1alpha1.ActDecisionAuditDenied, Code: ef.EFPolicyDenied})
		return
	case rvDeny:
		s.answer(w, 200, uid, review.Response{Decision: v1alpha1.ActDecisionDenied, Code: ef.EFPolicyDenied, Message: "Not this one."})
		return
	case rvEscalate:
		s.mu.Lock()
		chosen := s.chosen
		s.mu.Unlock()
		if chosen != nil {
			s.grantChosen(w, uid, req, b, *chosen)
			return
		}
		exp := metav1.NewTime(time.Now().Add(10 * time.Minute))
		s.answer(w, 200, uid, review.Response{Decision: v1alpha1.ActDecisionEscalated, Code: ef.EFEscalationRequired,
			Escalation: &review.Escalation{State: review.EscalationPending, BindingMoments: []string{moment},
				Envelope: string(s.env.Canonical()), EnvelopeDigest: s.env.Digest(), ExpiresAt: &exp}})
		return
	case rvTimeout:
		time.Sleep(s.delay)
		s.answer(w, 200, uid, review.Response{Allowed: true})
		return
	case rvGarbage:
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"apiVersion":"review.actgate.io/v1alpha1","kind":"ActReview","response":{"allowed":tru`))
		return
	case rvAllowed503:
		s.answer(w, 503, uid, review.Response{Allowed: true, Decision: v1alpha1.ActDecisionAllowed})
		return
	case rvWrongUID:
		s.answer(w, 200, "not-"+uid, review.Response{Allowed: true})
		return
	case rvUnauthenticated:
		s.answer(w, 401, uid, review.Response{Code: ef.EFPolicyDenied, Reason: review.ReasonUnauthenticated, Message: "The caller's token was not accepted."})
		return
	case rvTamperArgs:
		b.ArgumentsDigest = jcs.Digest([]byte(`{"amount":1000000}`))
	case rvWrongSink:
		b.SinkID = "someone-elses-sink"
	case rvWrongDest:
		b.Destination = "https://evil.example/mcp"
	case rvWrongNS:
		b.Namespace = "other"
	case rvRogueKey:
		signer = s.rogue
	case rvExpired:
		issued, ttl = time.Now().Add(-2*time.Minute), time.Minute
	}
	auth, err := signer.Sign(b, issued, ttl)
	if err != nil {
		s.t.Fatal(err)
	}
	signed, err := review.Signed(auth)
	if err != nil {
		s.t.Fatal(err)
	}
	resp := review.Response{Allowed: true, Decision: v1alpha1.ActDecisionAllowed, Authority: signed, Act: a.CandidateActID}
	if req.Operation == review.OperationPermit {
		// One request: the authority is created consumed by the sidecar's operation.
		s.mu.Lock()
		s.spent[auth.ID] = true
		s.consumes = append(s.consumes, review.ConsumeRequest{AuthorityID: auth.ID, OperationID: req.Permit.OperationID, Binding: review.BindingOf(b)})
		s.mu.Unlock()
		resp.Consumed = &review.Consumed{AuthorityID: auth.ID, OperationID: req.Permit.OperationID, ConsumedAt: time.Now()}
		switch m.consume {
		case cmRefused:
			s.answer(w, 200, uid, review.Response{Decision: v1alpha1.ActDecisionDenied, Code: ef.EF005, Reason: review.ReasonAuthority})
			return
		case cmUnconfirmed:
			resp.Consumed = nil
		case cmWrongOperation:
			resp.Consumed.OperationID = "op-someone-else"
		case cmTimeout:
			time.Sleep(s.delay)
		case cmGarbage:
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`<html>502 Bad Gateway</html>`))
			return
		}
	}
	if m.review == rvGranted {
		idx := int32(0)
		resp.Escalation = &review.Escalation{State: review.EscalationGranted, BindingMoments: []string{moment}, EnvelopeDigest: s.env.Digest(),
			Resolution: &review.Resolution{Kind: "option", OptionIdx: &idx, ResolvedBy: []string{"alice@example.com"}}}
	}
	s.answer(w, 200, uid, resp)
}

// grantChosen answers a Review after the principal chose c: an authority bound to c's call
// (its arguments and action digests in place of the call's own in b), consumed by the
// Review's operation, with the resolution that chose it.
func (s *stub) grantChosen(w http.ResponseWriter, uid types.UID, req *review.Request, b authority.Binding, c chosenOption) {
	canon, err := jcs.Canonicalize(c.args, jcs.Strict)
	if err != nil {
		s.t.Fatal(err)
	}
	action, err := envelope.ToolCall(b.Tool, c.args)
	if err != nil {
		s.t.Fatal(err)
	}
	b.ArgumentsDigest, b.ActionDigest = jcs.Digest(canon), action.Digest()
	auth, err := s.signer.Sign(b, time.Now(), time.Minute)
	if err != nil {
		s.t.Fatal(err)
	}
	signed, err := review.Signed(auth)
	if err != nil {
		s.t.Fatal(err)
	}
	resp := review.Response{Allowed: true, Decision: v1alpha1.ActDecisionAllowed, Reason: review.ReasonBindingMoment, Authority: signed,
		Escalation: &review.Escalation{State: review.EscalationGranted, BindingMoments: []string{moment}, EnvelopeDigest: s.env.Digest(),
			Resolution: &review.Resolution{Kind: "option", OptionIdx: &c.idx, ResolvedBy: []string{"alice@example.com"}}}}
	if req.Permit != nil {
		s.mu.Lock()
		s.spent[auth.ID] = true
		s.consumes = append(s.consumes, review.ConsumeRequest{AuthorityID: auth.ID, OperationID: req.Permit.OperationID, Binding: review.BindingOf(b)})
		s.mu.Unlock()
		resp.Consumed = &review.Consumed{AuthorityID: auth.ID, OperationID: req.Permit.OperationID, ConsumedAt: time.Now()}
	}
	s.answer(w, 200, uid, resp)
}

// consume spends an authority once, for the binding it was signed for; it finds the mode by the
// binding's tool.
func (s *stub) consume(w http.ResponseWriter, uid types.UID, c *review.ConsumeRequest) {
	s.mu.Lock()
	s.consumes = append(s.consumes, *c)
	m := s.modes[c.Binding.Tool]
	spent := s.spent[c.AuthorityID]
	s.spent[c.AuthorityID] = true
	s.mu.Unlock()
	ok := review.Response{Allowed: true, Decision: v1alpha1.ActDecisionAllowed, Reason: review.ReasonAuthority,
		Consumed: &review.Consumed{AuthorityID: c.AuthorityID, OperationID: c.OperationID, ConsumedAt: time.Now()}}
	switch {
	case spent || m.consume == cmRefused:
		s.answer(w, 200, uid, review.Response{Decision: v1alpha1.ActDecisionDenied, Code: ef.EF005, Reason: review.ReasonAuthority})
	case m.consume == cmUnconfirmed:
		ok.Consumed = nil
		s.answer(w, 200, uid, ok)
	case m.consume == cmWrongOperation:
		ok.Consumed.OperationID = "op-someone-else"
		s.answer(w, 200, uid, ok)
	case m.consume == cmTimeout:
		time.Sleep(s.delay)
		s.answer(w, 200, uid, ok)
	case m.consume == cmGarbage:
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`<html>502 Bad Gateway</html>`))
	default:
		s.answer(w, 200, uid, ok)
	}
}

// bankTools are the upstream's tools, named after what the stub does with them.
func bankTools() []mcptest.Tool {
	tools := []mcptest.Tool{{Name: "refuse", Handler: func(context.Context, json.RawMessage) (*mcp.CallToolResult, error) {
		return mcptest.ErrorText("insufficient funds"), nil
	}}}
	for _, name := range []string{"get_balance", "send_payment", "email_send", "wire", "audit_me", "slow", "garbage",
		"lying", "wrong_uid", "unauth", "tamper", "wrong_sink", "wrong_dest", "wrong_ns", "rogue", "expired",
		"consume_refused", "consume_unconfirmed", "consume_wrong_op", "consume_slow", "consume_garbage", "granted"} {
		tools = append(tools, mcptest.Tool{Name: name, Handler: func(_ context.Context, args json.RawMessage) (*mcp.CallToolResult, error) {
			return mcptest.Text("done: " + string(args)), nil
		}})
	}
	return tools
}

var bankModes = map[string]mode{
	"get_balance":         {review: rvAllow},
	"send_payment":        {review: rvPermit},
	"refuse":              {review: rvPermit},
	"email_send":          {review: rvDeny},
	"wire":                {review: rvEscalate},
	"audit_me":            {review: rvAudit},
	"slow":                {review: rvTimeout},
	"garbage":             {review: rvGarbage},
	"lying":               {review: rvAllowed503},
	"wrong_uid":           {review: rvWrongUID},
	"unauth":              {review: rvUnauthenticated},
	"tamper":              {review: rvTamperArgs},
	"wrong_sink":          {review: rvWrongSink},
	"wrong_dest":          {review: rvWrongDest},
	"wrong_ns":            {review: rvWrongNS},
	"rogue":               {review: rvRogueKey},
	"expired":             {review: rvExpired},
	"consume_refused":     {review: rvPermit, consume: cmRefused},
	"consume_unconfirmed": {review: rvPermit, consume: cmUnconfirmed},
	"consume_wrong_op":    {review: rvPermit, consume: cmWrongOperation},
	"consume_slow":        {review: rvPermit, consume: cmTimeout},
	"consume_garbage":     {review: rvPermit, consume: cmGarbage},
	"granted":             {review: rvGranted},
}

// permitTools are the tools the test policy permits (evidence PolicyPermit): the stub's mode
// for each says how the service answers the Permit.
var permitTools = []string{"send_payment", "refuse", "slow", "garbage", "lying", "wrong_uid", "unauth", "tamper",
	"wrong_sink", "wrong_dest", "wrong_ns", "rogue", "expired", "consume_refused", "consume_unconfirmed",
	"consume_wrong_op", "consume_slow", "consume_garbage"}

// testPolicy is the ToolPolicy the fixture's sidecar decides with: get_balance is the hot path,
// email_send is refused by an argument constraint that never holds, wire and granted are
// human-gated, the rest need a machine permit.
func testPolicy(t testing.TB, url string) *v1alpha1.ToolPolicySpec {
	t.Helper()
	doc := `podSelector: {}
sink:
  id: ` + testSink + `
servers:
- name: payments
  url: ` + url + `
rules:
- name: reads
  tools: [get_balance]
  consequenceClass: INFORMATIONAL
- name: mail
  tools: [email_send]
  consequenceClass: COMMUNICATION
  evidence:
    role: PolicyPermit
  arguments:
  - name: never
    expression: "false"
    message: Not this one.
- name: wires
  tools: [wire, granted]
  consequenceClass: FINANCIAL
  evidence:
    role: HumanAuthorization
    principals: [alice@example.com]
  alternatives:
  - label: Hold the wire
    reasoning: Keeps the funds until reviewed.
    args:
      hold: true
- name: payments
  tools: [` + strings.Join(permitTools, ", ") + `]
  consequenceClass: FINANCIAL
  evidence:
    role: PolicyPermit
`
	spec, err := policy.ParseSpec([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// compiled is spec compiled at epoch, as the sink's policy.
func compiled(t testing.TB, spec *v1alpha1.ToolPolicySpec, epoch int64) sink.PolicyEvaluator {
	t.Helper()
	c, err := policy.Compile(testNS+"/bank", spec, epoch)
	if err != nil {
		t.Fatal(err)
	}
	return sink.CompiledPolicy(c)
}

// fixture is the sidecar's gate (real journal) behind the real MCP proxy, in front of a real
// upstream MCP server, with the compiled test policy, asking the stub service.
type fixture struct {
	t      testing.TB
	stub   *stub
	up     *mcptest.Server
	store  *boltstore.Store
	gate   *Gate
	policy sink.PolicyEvaluator
	srv    *httptest.Server
	// log is the gate's receipt log in dir, signed with logKey.
	log    *receipt.Log
	dir    string
	logKey signature.SignerVerifier
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	up, err := mcptest.Start(bankTools(), mcptest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = up.Close() })
	f := &fixture{t: t, stub: newStub(t, bankModes), up: up}
	f.store, err = boltstore.Open(filepath.Join(t.TempDir(), JournalFile), boltstore.Options{Verifier: f.stub.signer.Verifier()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.store.Close() })
	f.dir = t.TempDir()
	if f.logKey, err = receipt.LoadOrCreateSigner(filepath.Join(f.dir, ReceiptKeyFile), filepath.Join(f.dir, ReceiptPubFile)); err != nil {
		t.Fatal(err)
	}
	if f.log, err = receipt.Open(receipt.Options{Path: filepath.Join(f.dir, ReceiptsFile), Signer: f.logKey}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.log.Close() })
	f.stub.spec, f.stub.epoch = testPolicy(t, up.URL), 1
	f.policy = compiled(t, f.stub.spec, 1)
	f.gate, err = NewGate(f.options())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.gate.Close)
	p, err := mcpproxy.New(mcpproxy.Config{Server: "payments", URL: up.URL, Gate: f.gate, Agent: testAgent,
		Credential: func(context.Context) (string, error) { return upstreamTk, nil }, CallTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(mcpproxy.Path("payments"), p)
	host := f.gate.HostLoopHandler(testAgent)
	mux.Handle(hostloop.EnforcePath, host)
	mux.Handle(hostloop.CompletePath, host)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(func() {
		_ = p.Close()
		f.srv.Close()
	})
	return f
}

// options are the fixture gate's Options: the stub service with the test token, its signer's
// keys, the fixture's journal and receipt log, the upstream as server "payments". A test that
// needs another gate on the same parts changes a copy.
func (f *fixture) options() Options {
	return Options{
		Review: f.stub.client(func() (string, error) { return testToken, nil }),
		Policy: f.policy, Store: f.store, Namespace: testNS, SinkID: testSink,
		Servers: []Server{{Name: "payments", URL: f.up.URL}}, ReviewTimeout: time.Second, Receipts: f.log,
	}
}

// gateWithOutbox opens the outbox file at path and a gate of the fixture's Options with it.
func (f *fixture) gateWithOutbox(path string) (*Gate, *Outbox) {
	f.t.Helper()
	o, err := OpenOutbox(path)
	if err != nil {
		f.t.Fatal(err)
	}
	opts := f.options()
	opts.Outbox = o
	g, err := NewGate(opts)
	if err != nil {
		f.t.Fatal(err)
	}
	return g, o
}

// waitReports waits until the stub has received at least n outcome reports, and returns them.
func (f *fixture) waitReports(n int) []review.ReportRequest {
	f.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		reps := f.stub.reported()
		if len(reps) >= n {
			return reps
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("%d outcome reports, want %d: %+v", len(reps), n, reps)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// agent connects a real MCP client (the SDK's) to the sidecar.
func (f *fixture) agent() *mcp.ClientSession {
	f.t.Helper()
	return connectTo(f.t, f.srv.URL+mcpproxy.Path("payments"))
}

func connectTo(t testing.TB, endpoint string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "v1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: endpoint}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func call(t *testing.T, cs *mcp.ClientSession, tool, args string) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: json.RawMessage(args)})
	if err != nil {
		t.Fatalf("tools/call %s: %v", tool, err)
	}
	return res
}

func efCode(r *mcp.CallToolResult) string { return testutil.MetaString(r, mcpproxy.MetaEFCode) }

func text(r *mcp.CallToolResult) string { return testutil.Text(r) }

// post sends a JSON body to the sidecar's host-loop endpoint.
func (f *fixture) post(path, body string) (int, []byte) {
	f.t.Helper()
	resp, err := http.Post(f.srv.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	return resp.StatusCode, b
}

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func publicKeyPEM(t testing.TB, s *authority.Signer) []byte {
	t.Helper()
	b, err := EncodePublicKey(s.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func certPEM(srv *httptest.Server) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}

// receipts flushes the receipt log, verifies the file with the public key the sidecar wrote
// beside it, and returns its receipts in order.
func (f *fixture) receipts() []receipt.Receipt {
	f.t.Helper()
	if err := f.log.Flush(context.Background()); err != nil {
		f.t.Fatal(err)
	}
	pub, err := os.ReadFile(filepath.Join(f.dir, ReceiptPubFile))
	if err != nil {
		f.t.Fatal(err)
	}
	v, err := receipt.NewVerifierPEM(pub)
	if err != nil {
		f.t.Fatal(err)
	}
	return testutil.VerifiedReceipts(f.t, filepath.Join(f.dir, ReceiptsFile), v)
}

// serveOnLoopback serves sc on a loopback port and returns its base URL and a stop function,
// which the test's end also calls. Stopping fails the test if Serve returns an error or does
// not return within 15 s.
func serveOnLoopback(t *testing.T, sc *Sidecar) (string, func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sc.Serve(ctx, ln) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Serve: %v", err)
				}
			case <-time.After(15 * time.Second):
				t.Error("Serve did not return")
			}
		})
	}
	t.Cleanup(stop)
	return "http://" + ln.Addr().String(), stop
}
