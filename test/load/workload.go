package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/mcpproxy"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

// Kind is one kind of operation of the mix.
type Kind string

// The kinds of the mix (see the package documentation).
const (
	KindHot        Kind = "hot"
	KindPermit     Kind = "permit"
	KindEscalate   Kind = "escalate"
	KindReplay     Kind = "replay"
	KindSubstitute Kind = "substitute"
)

// kinds in report order.
var kinds = []Kind{KindHot, KindPermit, KindEscalate, KindReplay, KindSubstitute}

// The tools of the load upstream and the server name the sink proxies it as.
const (
	serverName    = "finance"
	toolBalance   = "get_balance"  // INFORMATIONAL, the hot path
	toolEmail     = "email_send"   // PolicyPermit
	toolPayment   = "send_payment" // HumanAuthorization
	upstreamToken = "load-upstream-token"
	agentName     = "load-agent"
)

// hotTools are the tools the policy allows on the hot path (no authority, no journal).
var hotTools = map[string]bool{toolBalance: true}

// Latency series through the sink, by step of the mix.
const (
	seriesHot        = "hot"        // get_balance through the sink
	seriesPermit     = "permit"     // email_send through the sink
	seriesEscalate   = "escalate"   // the refused direct call of send_payment
	seriesResolve    = "resolve"    // the scripted principal's resolution
	seriesGranted    = "granted"    // the approved send_payment, run once
	seriesReplay     = "replay"     // a call that already ran, sent again
	seriesSubstitute = "substitute" // approved payment, other payee
)

// gateSeries in report order.
var gateSeries = []string{seriesHot, seriesPermit, seriesEscalate, seriesResolve, seriesGranted, seriesReplay, seriesSubstitute}

// overheadPairs compare a series through the sink with the same tool called directly.
var overheadPairs = []struct{ series, tool string }{
	{seriesHot, toolBalance}, {seriesPermit, toolEmail}, {seriesGranted, toolPayment},
}

// DefaultMix is the -mix default: mostly hot reads, as an agent's traffic is.
const DefaultMix = "hot=60,permit=20,escalate=8,replay=6,substitute=6"

// Mix is the weight of each kind.
type Mix map[Kind]int

// ParseMix parses "kind=weight,…". Kinds not named weigh 0; at least one weight must be
// positive.
func ParseMix(s string) (Mix, error) {
	m := Mix{}
	total := 0
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		k, v, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fmt.Errorf("mix item %q is not kind=weight", item)
		}
		kind := Kind(strings.TrimSpace(k))
		known := false
		for _, x := range kinds {
			known = known || x == kind
		}
		if !known {
			return nil, fmt.Errorf("mix kind %q is not one of hot, permit, escalate, replay, substitute", kind)
		}
		if _, dup := m[kind]; dup {
			return nil, fmt.Errorf("mix kind %q given twice", kind)
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 || n > 1_000_000 {
			return nil, fmt.Errorf("mix weight %q of %s is not an integer 0..1000000", v, kind)
		}
		m[kind] = n
		total += n
	}
	if total == 0 {
		return nil, errors.New("mix has no positive weight")
	}
	return m, nil
}

func (m Mix) String() string {
	var parts []string
	for _, k := range kinds {
		if m[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
		}
	}
	return strings.Join(parts, ",")
}

// kinds returns the kinds of positive weight, in report order.
func (m Mix) kinds() []Kind {
	var out []Kind
	for _, k := range kinds {
		if m[k] > 0 {
			out = append(out, k)
		}
	}
	return out
}

// firstKinds are the kinds worker id of n runs first, before drawing at random: the kinds of
// the mix dealt round-robin over the workers, so that every run exercises every kind even when
// it is slow (one worker runs them all) without making each of many workers run them all.
func (m Mix) firstKinds(id, n int) []Kind {
	ks := m.kinds()
	var out []Kind
	for j := id; j < len(ks); j += n {
		out = append(out, ks[j])
	}
	return out
}

// nextKind is the kind of operation number done of worker id of n: its first kinds, then
// random by weight.
func (m Mix) nextKind(r *rand.Rand, id, n, done int) Kind {
	if first := m.firstKinds(id, n); done < len(first) {
		return first[done]
	}
	return m.pick(r)
}

// pick draws a kind with probability proportional to its weight.
func (m Mix) pick(r *rand.Rand) Kind {
	total := 0
	for _, k := range kinds {
		total += m[k]
	}
	n := r.IntN(total)
	for _, k := range kinds {
		if n < m[k] {
			return k
		}
		n -= m[k]
	}
	return KindHot
}

// startUpstream runs the counting MCP server the sink protects (or its twin the direct phase
// calls). It answers only requests that carry the sink's credential.
func startUpstream(addr string) (*mcptest.Server, error) {
	text := func(s string) mcptest.Handler {
		return func(context.Context, json.RawMessage) (*mcp.CallToolResult, error) { return mcptest.Text(s), nil }
	}
	tools := []mcptest.Tool{
		{Name: toolBalance, Description: "Read the balance of an account.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
			InputSchema: json.RawMessage(`{"type":"object","properties":{"account":{"type":"string"}}}`),
			Handler:     text(`{"balance":1000}`)},
		{Name: toolEmail, Description: "Send an email.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"to":{"type":"string"},"subject":{"type":"string"}},"required":["to"]}`),
			Handler:     text(`{"sent":true}`)},
		{Name: toolPayment, Description: "Pay an amount to a payee.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"to":{"type":"string"},"amount":{"type":"number"}},"required":["to","amount"]}`),
			Handler:     text(`{"paid":true}`)},
	}
	auth := func(w http.ResponseWriter, r *http.Request) bool {
		if r.Header.Get("Authorization") != "Bearer "+upstreamToken {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return true
		}
		return false
	}
	return mcptest.Start(tools, mcptest.Options{Name: "load-finance", Intercept: auth, Addr: addr})
}

// bearer adds the upstream credential to the direct phase's requests (through the sink it is
// the sink that holds it).
type bearer struct{ base http.RoundTripper }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+upstreamToken)
	return b.base.RoundTrip(r)
}

// connect opens one MCP client session (streamable HTTP) to endpoint.
func connect(ctx context.Context, endpoint string, hc *http.Client) (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: agentName, Version: "v1"}, nil)
	return c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc, DisableStandaloneSSE: true}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
}

// principal resolves a gate-authored binding moment with the option that is exactly the
// requested call (tool, args).
type principal interface {
	resolve(ctx context.Context, momentID, envelopeDigest, tool string, args json.RawMessage) error
}

// ToolArgs is one call's tool and canonical arguments (encoding/json of the decoded value:
// object keys sorted), so the agent's and the upstream's views compare.
type ToolArgs struct {
	Tool string `json:"tool"`
	Args string `json:"args"`
}

func canonArgs(raw json.RawMessage) string {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return string(raw)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// Tally is the workload's own view of a run: what the agents saw.
type Tally struct {
	// Ops counts operations started, by kind.
	Ops map[Kind]int
	// Calls counts tools/call requests sent through the sink.
	Calls int
	// Invoked counts, per tool, calls the agent saw run (neither refused nor replayed).
	Invoked map[string]int
	// InvokedArgs are the calls the agent saw run.
	InvokedArgs []ToolArgs
	// Refused are calls refused with an EF code.
	Refused []ToolArgs
	// Substituted are the arguments of every substitution attempt.
	Substituted []ToolArgs
	// Unexpected counts answers that were not what the kind expects, in all and by "kind: step";
	// Samples describe a few.
	Unexpected   int
	UnexpectedBy map[string]int
	Samples      []string
	// Codes counts EF codes the agents got.
	Codes map[string]int
}

func newTally() Tally {
	return Tally{Ops: map[Kind]int{}, Invoked: map[string]int{}, Codes: map[string]int{}, UnexpectedBy: map[string]int{}}
}

func (t *Tally) merge(o Tally) {
	for k, v := range o.Ops {
		t.Ops[k] += v
	}
	t.Calls += o.Calls
	for k, v := range o.Invoked {
		t.Invoked[k] += v
	}
	for k, v := range o.Codes {
		t.Codes[k] += v
	}
	for k, v := range o.UnexpectedBy {
		t.UnexpectedBy[k] += v
	}
	t.InvokedArgs = append(t.InvokedArgs, o.InvokedArgs...)
	t.Refused = append(t.Refused, o.Refused...)
	t.Substituted = append(t.Substituted, o.Substituted...)
	t.Unexpected += o.Unexpected
	for _, s := range o.Samples {
		if len(t.Samples) < maxSamples {
			t.Samples = append(t.Samples, s)
		}
	}
}

const maxSamples = 8

func (t *Tally) unexpected(step string, format string, args ...any) {
	t.Unexpected++
	t.UnexpectedBy[step]++
	if len(t.Samples) < maxSamples {
		t.Samples = append(t.Samples, fmt.Sprintf(format, args...))
	}
}

// latencies are one worker's samples by series.
type latencies map[string][]time.Duration

// worker is one agent: its own MCP session to the sink, its own sequence of unique arguments.
type worker struct {
	id        int
	cs        *mcp.ClientSession
	marks     *atomic.Int64 // the session's answers marked a journal replay (the gate's header)
	principal principal
	rnd       *rand.Rand
	seq       int
	// lastPermit and lastGranted are the worker's latest email_send and approved payment that
	// ran, for replays.
	lastPermit, lastGranted *ToolArgs
	done                    int // operations finished
	lat                     latencies
	tally                   Tally
}

// answer is what the agent made of one result.
type answer struct {
	code     string
	replayed bool
	moment   string
	envelope string
	ran      bool
	err      error
}

// opTimeout bounds one call; operations are never cut by the run's end (a worker starts no new
// operation after it), so that the run ends with nothing in flight.
const opTimeout = 60 * time.Second

// call sends one tools/call through the sink and records its latency under series.
func (w *worker) call(ctx context.Context, series, tool, args string) answer {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	p := &mcp.CallToolParams{Name: tool, Arguments: json.RawMessage(args), Meta: mcp.Meta{mcpproxy.MetaProvenance: "user"}}
	start := time.Now()
	marked := w.marks.Load()
	res, err := w.cs.CallTool(ctx, p)
	w.lat[series] = append(w.lat[series], time.Since(start))
	w.tally.Calls++
	if err != nil {
		return answer{err: err}
	}
	a := answer{}
	a.code, _ = res.Meta[mcpproxy.MetaEFCode].(string)
	a.replayed = w.marks.Load() > marked // the gate's header: the result is the one first given
	a.moment, _ = res.Meta[mcpproxy.MetaMomentID].(string)
	a.envelope, _ = res.Meta[mcpproxy.MetaEnvelopeDigest].(string)
	ta := ToolArgs{Tool: tool, Args: canonArgs(json.RawMessage(args))}
	switch {
	case a.code != "":
		w.tally.Codes[a.code]++
		w.tally.Refused = append(w.tally.Refused, ta)
	case a.replayed:
	case res.IsError:
		a.err = fmt.Errorf("the upstream answered isError: %s", firstText(res))
	default:
		a.ran = true
		w.tally.Invoked[tool]++
		w.tally.InvokedArgs = append(w.tally.InvokedArgs, ta)
	}
	return a
}

func firstText(r *mcp.CallToolResult) string {
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			if len(t.Text) > 200 {
				return t.Text[:200]
			}
			return t.Text
		}
	}
	return ""
}

func (w *worker) describe(kind Kind, step string, a answer) {
	w.tally.unexpected(string(kind)+": "+step, "worker %d %s %s: code=%q replayed=%v ran=%v err=%v", w.id, kind, step, a.code, a.replayed, a.ran, a.err)
}

// next returns a fresh sequence number: every argument set of the run is unique.
func (w *worker) next() int {
	w.seq++
	return w.seq
}

// paymentArgs never asks for amount 1: that is the policy's declared alternative (standalone.go),
// and an alternative equal to the requested call is dropped, which leaves the rule nothing to
// offer beside it — the gate then refuses with EF_ESCALATION_REQUIRED and no binding moment
// ("policy declares no alternative to offer"), which the workload would count as unexpected.
func paymentArgs(to string, n int) string {
	return fmt.Sprintf(`{"amount":%d,"to":%q}`, 2+n%500, to)
}

// op runs one operation of kind.
func (w *worker) op(ctx context.Context, kind Kind) {
	w.tally.Ops[kind]++
	switch kind {
	case KindHot:
		a := w.call(ctx, seriesHot, toolBalance, fmt.Sprintf(`{"account":"w%d-%d"}`, w.id, w.next()))
		if !a.ran {
			w.describe(kind, "get_balance", a)
		}
	case KindPermit:
		w.permit(ctx)
	case KindEscalate:
		args := paymentArgs(fmt.Sprintf("w%d-e%d", w.id, w.next()), w.seq)
		if !w.escalateAndResolve(ctx, kind, args) {
			return
		}
		a := w.call(ctx, seriesGranted, toolPayment, args)
		if !a.ran {
			w.describe(kind, "approved retry", a)
			return
		}
		w.lastGranted = &ToolArgs{Tool: toolPayment, Args: args}
	case KindReplay:
		// Both protected paths: the worker's latest permitted call and latest approved call.
		if w.lastPermit == nil && w.lastGranted == nil && !w.permit(ctx) {
			return
		}
		for _, last := range []*ToolArgs{w.lastPermit, w.lastGranted} {
			if last == nil {
				continue
			}
			a := w.call(ctx, seriesReplay, last.Tool, last.Args)
			if a.ran || a.err != nil || (a.code == "" && !a.replayed) {
				w.describe(kind, "replay of "+last.Tool, a)
			}
		}
	case KindSubstitute:
		n := w.next()
		args := paymentArgs(fmt.Sprintf("w%d-s%d", w.id, n), n)
		if !w.escalateAndResolve(ctx, kind, args) {
			return
		}
		other := paymentArgs(fmt.Sprintf("mallory-w%d-s%d", w.id, n), n)
		w.tally.Substituted = append(w.tally.Substituted, ToolArgs{Tool: toolPayment, Args: canonArgs(json.RawMessage(other))})
		a := w.call(ctx, seriesSubstitute, toolPayment, other)
		if a.ran || a.code == "" {
			w.describe(kind, "substituted payee", a)
		}
	}
}

// permit runs one email_send under a policy permit; it reports whether it ran.
func (w *worker) permit(ctx context.Context) bool {
	n := w.next()
	args := fmt.Sprintf(`{"subject":"statement %d","to":"w%d-%d@example.com"}`, n, w.id, n)
	a := w.call(ctx, seriesPermit, toolEmail, args)
	if !a.ran {
		w.describe(KindPermit, "email_send", a)
		return false
	}
	w.lastPermit = &ToolArgs{Tool: toolEmail, Args: args}
	return true
}

// escalateAndResolve calls send_payment with args, expects EF_ESCALATION_REQUIRED with a
// binding moment, and has the principal choose exactly that call.
func (w *worker) escalateAndResolve(ctx context.Context, kind Kind, args string) bool {
	a := w.call(ctx, seriesEscalate, toolPayment, args)
	if a.code != string(ef.EFEscalationRequired) || a.moment == "" {
		w.describe(kind, "escalation", a)
		return false
	}
	rctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	start := time.Now()
	err := w.principal.resolve(rctx, a.moment, a.envelope, toolPayment, json.RawMessage(args))
	w.lat[seriesResolve] = append(w.lat[seriesResolve], time.Since(start))
	if err != nil {
		w.describe(kind, "resolution", answer{err: err})
		return false
	}
	return true
}

// phaseResult is what one phase's workers measured.
type phaseResult struct {
	lat     latencies
	tally   Tally
	elapsed time.Duration
}

// runPhase runs n workers for d: each connects its own session to endpoint and loops fn until
// d has passed and it has run at least minOps(id) operations (an operation started is always
// finished).
func runPhase(ctx context.Context, n int, d time.Duration, minOps func(id int) int, seed uint64, endpoint string, hc *http.Client, pr principal,
	fn func(ctx context.Context, w *worker)) (phaseResult, error) {
	workers := make([]*worker, n)
	for i := range workers {
		marks := &atomic.Int64{}
		whc := *hc
		whc.Transport = wire.ReplayCounter{Base: hc.Transport, N: marks}
		cs, err := connect(ctx, endpoint, &whc)
		if err != nil {
			for _, w := range workers[:i] {
				_ = w.cs.Close()
			}
			return phaseResult{}, fmt.Errorf("MCP session to %s: %w", endpoint, err)
		}
		workers[i] = &worker{id: i, cs: cs, marks: marks, principal: pr, rnd: rand.New(rand.NewPCG(seed, uint64(i))), lat: latencies{}, tally: newTally()}
	}
	defer func() {
		for _, w := range workers {
			_ = w.cs.Close()
		}
	}()
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Go(func() {
			for (time.Now().Before(deadline) || w.done < minOps(w.id)) && ctx.Err() == nil {
				fn(ctx, w)
				w.done++
			}
		})
	}
	wg.Wait()
	out := phaseResult{lat: latencies{}, tally: newTally(), elapsed: time.Since(start)}
	for _, w := range workers {
		for s, ds := range w.lat {
			out.lat[s] = append(out.lat[s], ds...)
		}
		out.tally.merge(w.tally)
	}
	return out, nil
}

// directTool maps a kind to the tool its calls reach upstream.
func directTool(k Kind) string {
	switch k {
	case KindHot:
		return toolBalance
	case KindPermit:
		return toolEmail
	}
	return toolPayment
}

// directOp is one direct-phase call: the kind's tool with fresh arguments, no sink.
func directOp(mix Mix) func(ctx context.Context, w *worker) {
	return func(ctx context.Context, w *worker) {
		tool := directTool(mix.pick(w.rnd))
		n := w.next()
		var args string
		switch tool {
		case toolBalance:
			args = fmt.Sprintf(`{"account":"d%d-%d"}`, w.id, n)
		case toolEmail:
			args = fmt.Sprintf(`{"subject":"statement %d","to":"d%d-%d@example.com"}`, n, w.id, n)
		default:
			args = paymentArgs(fmt.Sprintf("d%d-%d", w.id, n), n)
		}
		a := w.call(ctx, tool, tool, args)
		if !a.ran {
			w.describe(Kind("direct"), tool, a)
		}
	}
}

// sortedKeys returns m's keys sorted.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
