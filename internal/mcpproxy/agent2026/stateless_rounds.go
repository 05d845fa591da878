package agent2026

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/logfield"
	"github.com/actgate/actgate/internal/mcpproxy/answerstream"
	"github.com/actgate/actgate/internal/mcpproxy/rounds"
	"github.com/actgate/actgate/internal/mcpproxy/stateless"
	"github.com/actgate/actgate/internal/mcpproxy/toolcall"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

// Input-required rounds in front of a stateful upstream (docs/architecture.md "Input-required
// rounds toward a 2025 upstream"). A 2025 server asks its client for input with requests during
// a call (elicitation/create, sampling/createMessage, roots/list); a 2026-07-28 agent is asked
// with an input_required result and answers by repeating the request with inputResponses and
// the result's requestState. The gate holds the upstream exchange in memory (a heldCall) while
// the agent answers: the agent's repeat continues the same exchange, so a tools/call is
// dispatched once and the upstream's final answer is its outcome.
const (
	// MaxHeldPerAgent bounds the exchanges held for one agent awaiting its input. Each costs a
	// goroutine, an open upstream request and at most heldEvents buffered events; an agent that
	// abandons rounds holds them for the call's bound.
	MaxHeldPerAgent = 32
	// heldEvents is the buffer between an upstream exchange and the agent's request waiting on
	// it.
	heldEvents = 64
)

// heldEvent is one thing an upstream exchange gives the agent's waiting request: a message of
// the upstream (a notification to relay or a request needing the agent's input), the start of
// its event stream, or the final answer.
type heldEvent struct {
	msg    *jsonrpc.Request
	start  bool
	final  *jsonrpc.Response
	status int
}

// heldCall is one upstream exchange of a 2026-07-28 agent's request on a stateful upstream
// session, which may outlive the agent's request while the agent answers the upstream's
// requests.
type heldCall struct {
	id      string // random; names the call in its requestState
	agent   string
	method  string
	binding [32]byte // digest of the request's params without its revision members
	events  chan heldEvent
	ctx     context.Context // ends when the exchange is over or its lifetime is
	cancel  context.CancelFunc

	mu         sync.Mutex
	session    *upstreamSession
	operation  string
	round      int
	busy       bool                  // an agent request is waiting on the call
	waiting    map[string]jsonrpc.ID // the current round's inputRequests keys → upstream request ids
	requests   map[string]json.RawMessage
	registered bool
}

type heldKey struct{}

// withHeld returns ctx carrying hc, which the upstream exchange under it reports to.
func withHeld(ctx context.Context, hc *heldCall) context.Context {
	return context.WithValue(ctx, heldKey{}, hc)
}

func heldOf(ctx context.Context) *heldCall {
	hc, _ := ctx.Value(heldKey{}).(*heldCall)
	return hc
}

// send gives ev to the waiting agent request; false when the call's lifetime is over.
func (hc *heldCall) send(ev heldEvent) bool {
	select {
	case hc.events <- ev:
		return true
	case <-hc.ctx.Done():
		return false
	}
}

func (hc *heldCall) setSession(s *upstreamSession) {
	hc.mu.Lock()
	hc.session = s
	hc.mu.Unlock()
}

func (hc *heldCall) setOperation(op string) {
	hc.mu.Lock()
	hc.operation = op
	hc.mu.Unlock()
}

// heldTable holds the calls awaiting an agent's input, by id.
type heldTable struct {
	once  sync.Once
	key   []byte // the requestState MAC key, random per proxy
	mu    sync.Mutex
	calls map[string]*heldCall
}

func (t *heldTable) macKey() []byte {
	t.once.Do(func() { t.key = rounds.NewKey() })
	return t.key
}

// countLocked is the number of calls held for agent.
func (t *heldTable) countLocked(agent string) int {
	n := 0
	for _, hc := range t.calls {
		if hc.agent == agent {
			n++
		}
	}
	return n
}

func (t *heldTable) full(agent string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.countLocked(agent) >= MaxHeldPerAgent
}

// register adds hc; false when the agent already has maxHeldPerAgent held.
func (t *heldTable) register(hc *heldCall) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.calls[hc.id] == hc {
		return true
	}
	if t.countLocked(hc.agent) >= MaxHeldPerAgent {
		return false
	}
	if t.calls == nil {
		t.calls = make(map[string]*heldCall)
	}
	t.calls[hc.id] = hc
	return true
}

func (t *heldTable) drop(hc *heldCall) {
	t.mu.Lock()
	if t.calls[hc.id] == hc {
		delete(t.calls, hc.id)
	}
	t.mu.Unlock()
}

func (t *heldTable) get(id string) *heldCall {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.calls[id]
}

// closeAll ends every held call (the proxy closes), returning them.
func (t *heldTable) closeAll() []*heldCall {
	t.mu.Lock()
	calls := t.calls
	t.calls = nil
	t.mu.Unlock()
	out := make([]*heldCall, 0, len(calls))
	for _, hc := range calls {
		hc.cancel()
		out = append(out, hc)
	}
	return out
}

// stateBound is the digest the state of hc's round binds (rounds.Bound).
func (p *Handler) stateBound(hc *heldCall, round int, waiting map[string]jsonrpc.ID, operation string) string {
	return rounds.Bound(hc.agent, p.cfg.Server, hc.method, hc.binding, operation, round, waiting)
}

// continuationRefused is the answer to a continuation the gate does not continue: nothing is
// delivered upstream, nothing is decided or dispatched.
func continuationRefused(id jsonrpc.ID, code ef.EFCode, msg string) (*jsonrpc.Response, int) {
	data, _ := json.Marshal(map[string]string{toolcall.MetaEFCode: string(code)})
	return &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: wire.CodeInvalidParams, Message: "actgate: " + msg, Data: data}}, http.StatusBadRequest
}

// startHeld runs compute (one request's exchange with the stateful upstream) under a held call
// and answers the agent's request with its first round or its final answer.
func (p *Handler) startHeld(ctx context.Context, agent string, sr *stateless.Request, stream *answerstream.Stream,
	compute func(context.Context) (*jsonrpc.Response, int),
) (*jsonrpc.Response, int) {
	binding, ok := rounds.RequestBinding(sr)
	if !ok {
		// Params that cannot be canonicalized cannot be bound to a continuation: the exchange
		// runs without rounds.
		return compute(ctx)
	}
	// A tools/call is refused before it is decided or dispatched when the agent could not be
	// asked for its input: it would run without it. Another request goes on; should it need
	// input, its upstream's request is refused at the round (inputRound).
	if sr.Req.Method == wire.MethodCallTool && p.sl.held.full(agent) {
		return continuationRefused(sr.Req.ID, ef.EFInputLimit, fmt.Sprintf("%d requests of this agent await its input; answer or abandon them first", MaxHeldPerAgent))
	}
	var idb [16]byte
	_, _ = rand.Read(idb[:])
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.CallTimeout+p.cfg.ConnectTimeout)
	hc := &heldCall{
		id: hex.EncodeToString(idb[:]), agent: agent, method: sr.Req.Method, binding: binding,
		events: make(chan heldEvent, heldEvents), ctx: hctx, cancel: cancel, busy: true,
	}
	go func() {
		resp, status := compute(withHeld(hctx, hc))
		// The exchange is over: requests of the upstream still unanswered never will be.
		p.abandonWaiting(hc)
		hc.send(heldEvent{final: resp, status: status})
	}()
	context.AfterFunc(hctx, func() {
		p.sl.held.drop(hc)
		p.abandonWaiting(hc)
	})
	return p.awaitHeld(ctx, hc, sr, stream)
}

// awaitHeld waits for hc's next round or final answer, relaying the upstream's notifications
// on the agent's stream meanwhile.
func (p *Handler) awaitHeld(ctx context.Context, hc *heldCall, sr *stateless.Request, stream *answerstream.Stream) (*jsonrpc.Response, int) {
	for {
		var ev heldEvent
		select {
		case ev = <-hc.events:
		case <-hc.ctx.Done():
			p.sl.held.drop(hc)
			return &jsonrpc.Response{ID: sr.Req.ID, Error: p.unavailableErr()}, http.StatusOK
		case <-ctx.Done():
			// The agent went away. A held call stays for its continuation; one never held ends
			// with the agent's request (a dispatched tools/call still runs to its own bound).
			hc.mu.Lock()
			hc.busy = false
			held := hc.registered
			hc.mu.Unlock()
			if !held {
				hc.cancel()
			}
			return &jsonrpc.Response{ID: sr.Req.ID, Error: p.unavailableErr()}, http.StatusOK
		}
		switch {
		case ev.final != nil:
			hc.cancel()
			p.sl.held.drop(hc)
			ev.final.ID = sr.Req.ID
			if ev.status == 0 {
				ev.status = http.StatusOK
			}
			return ev.final, ev.status
		case ev.start:
			stream.Start()
		case !ev.msg.IsCall():
			stream.Message(ev.msg)
		default:
			return p.inputRound(ctx, hc, sr, stream, ev.msg)
		}
	}
}

// inputRound answers the agent's request with an input_required result for the upstream's
// request first (and any others already waiting), registering hc for the continuation.
func (p *Handler) inputRound(ctx context.Context, hc *heldCall, sr *stateless.Request, stream *answerstream.Stream, first *jsonrpc.Request) (*jsonrpc.Response, int) {
	reqs := []*jsonrpc.Request{first}
drain:
	for len(reqs) < rounds.MaxInputRequests {
		select {
		case ev := <-hc.events:
			if ev.msg != nil && ev.msg.IsCall() {
				reqs = append(reqs, ev.msg)
				continue
			}
			if ev.start {
				stream.Start()
				continue
			}
			if ev.msg != nil {
				stream.Message(ev.msg)
				continue
			}
			// The final answer came right behind: give it back for the next wait. The buffer
			// has room, as this event was just taken from it.
			hc.events <- ev
			break drain
		default:
			break drain
		}
	}
	if !p.sl.held.register(hc) {
		for _, r := range reqs {
			p.answerUpstream(hc, r.ID, nil, &jsonrpc.Error{Code: wire.CodeInternalError, Message: "actgate: too many requests of this agent await its input"})
		}
		p.log.Info("Upstream request for input refused: the agent has too many waiting", "code", ef.EFInputLimit)
		hc.mu.Lock()
		hc.busy = false
		hc.mu.Unlock()
		return p.awaitHeld(ctx, hc, sr, stream)
	}
	hc.mu.Lock()
	hc.registered = true
	hc.round++
	hc.waiting = make(map[string]jsonrpc.ID, len(reqs))
	hc.requests = make(map[string]json.RawMessage, len(reqs))
	for i, r := range reqs {
		key := "r" + strconv.Itoa(hc.round) + "-" + strconv.Itoa(i+1)
		hc.waiting[key] = r.ID
		params := r.Params
		if len(params) == 0 {
			params = json.RawMessage("{}")
		}
		one, _ := wire.MarshalNoEscape(map[string]json.RawMessage{"method": jsonOf(r.Method), "params": params})
		hc.requests[key] = one
	}
	round, op := hc.round, hc.operation
	waiting, requests := hc.waiting, hc.requests
	hc.busy = false
	hc.mu.Unlock()
	return p.roundResult(hc, sr.Req.ID, round, waiting, requests, op), http.StatusOK
}

// roundResult is the input_required result of one round.
func (p *Handler) roundResult(hc *heldCall, id jsonrpc.ID, round int, waiting map[string]jsonrpc.ID, requests map[string]json.RawMessage, op string) *jsonrpc.Response {
	state := rounds.Mint(p.sl.held.macKey(), rounds.Claims{Call: hc.id, Round: round, Expires: deadlineOf(hc.ctx).Unix(), Bound: p.stateBound(hc, round, waiting, op)})
	ir, _ := wire.MarshalNoEscape(requests)
	out, err := wire.MarshalNoEscape(map[string]json.RawMessage{
		"resultType": jsonOf(wire.ResultTypeInputRequired), "inputRequests": ir, "requestState": jsonOf(state),
	})
	if err != nil {
		return &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: wire.CodeInternalError, Message: "actgate: result could not be rendered"}}
	}
	p.log.Info("Upstream asks the agent for input", "method", logfield.Bound(hc.method), "round", round, "requests", len(requests), "operation", op)
	return &jsonrpc.Response{ID: id, Result: out}
}

func deadlineOf(ctx context.Context) time.Time {
	d, ok := ctx.Deadline()
	if !ok {
		return time.Now()
	}
	return d
}

func jsonOf(v any) json.RawMessage {
	raw, _ := json.Marshal(v)
	return raw
}

// continueHeld answers a continuation (a request with requestState) toward a stateful
// upstream: the state must be one the gate minted for a call held now for this agent, for this
// round, with the same method and params; the agent's inputResponses go to the upstream's
// pending requests and the agent's request waits, as the first did, for the next round or the
// final answer. A missing response is asked for again in a new round. Nothing here decides or
// dispatches: a tools/call was dispatched once, by the request that began it.
func (p *Handler) continueHeld(ctx context.Context, agent string, sr *stateless.Request, stream *answerstream.Stream) (*jsonrpc.Response, int) {
	id := sr.Req.ID
	claims, err := rounds.Parse(p.sl.held.macKey(), sr.Params["requestState"])
	if err != nil {
		p.log.Info("Continuation refused", "method", logfield.Bound(sr.Req.Method), "reason", err.Error())
		return continuationRefused(id, ef.EFContinuationInvalid, err.Error())
	}
	responses, err := rounds.ParseInputResponses(sr.Params["inputResponses"])
	if err != nil {
		return continuationRefused(id, ef.EFContinuationInvalid, err.Error())
	}
	hc := p.sl.held.get(claims.Call)
	// An exchange whose lifetime ended is over even before its AfterFunc has dropped it.
	if hc == nil || hc.ctx.Err() != nil || time.Now().Unix() > claims.Expires {
		return continuationRefused(id, ef.EFContinuationInvalid, "requestState names no request awaiting input (answered, expired or never held)")
	}
	binding, ok := rounds.RequestBinding(sr)
	hc.mu.Lock()
	switch {
	case hc.agent != agent:
		hc.mu.Unlock()
		return continuationRefused(id, ef.EFContinuationInvalid, "requestState names no request awaiting input (answered, expired or never held)")
	case !ok || binding != hc.binding || sr.Req.Method != hc.method:
		hc.mu.Unlock()
		p.log.Info("Continuation refused: its request differs from the one it continues", "method", logfield.Bound(sr.Req.Method))
		return continuationRefused(id, ef.EFContinuationInvalid, "a continuation must repeat the request it continues: the method, name and arguments differ")
	case claims.Round != hc.round || claims.Bound != p.stateBound(hc, hc.round, hc.waiting, hc.operation):
		hc.mu.Unlock()
		return continuationRefused(id, ef.EFContinuationInvalid, "requestState is not the current round's")
	case hc.busy:
		hc.mu.Unlock()
		return continuationRefused(id, ef.EFContinuationInvalid, "this request's continuation is already being answered")
	}
	var missing []string
	type answer struct {
		up  jsonrpc.ID
		res json.RawMessage
	}
	var deliver []answer
	for k, up := range hc.waiting {
		if res, ok := responses[k]; ok {
			deliver = append(deliver, answer{up, res})
			delete(hc.waiting, k)
		} else {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		// Ask again for what is missing, in a new round; the answered ones go upstream now.
		hc.round++
		for k := range hc.requests {
			if _, ok := hc.waiting[k]; !ok {
				delete(hc.requests, k)
			}
		}
		round, waiting, requests, op := hc.round, hc.waiting, hc.requests, hc.operation
		hc.mu.Unlock()
		for _, a := range deliver {
			p.answerUpstream(hc, a.up, a.res, nil)
		}
		return p.roundResult(hc, id, round, waiting, requests, op), http.StatusOK
	}
	hc.busy = true
	hc.waiting, hc.requests = nil, nil
	hc.mu.Unlock()
	for _, a := range deliver {
		p.answerUpstream(hc, a.up, a.res, nil)
	}
	return p.awaitHeld(ctx, hc, sr, stream)
}

// abandonWaiting answers the upstream's requests of hc's current round, if any, with an error:
// the agent did not answer them in the call's lifetime (or the exchange ended), and a 2025
// server waits for an answer to each of its requests. Its state then names no round.
func (p *Handler) abandonWaiting(hc *heldCall) {
	hc.mu.Lock()
	waiting := hc.waiting
	hc.waiting, hc.requests = nil, nil
	hc.round++
	hc.mu.Unlock()
	for _, up := range waiting {
		p.answerUpstream(hc, up, nil, &jsonrpc.Error{Code: wire.CodeInternalError, Message: "actgate: the agent did not answer this request in time"})
	}
}

// answerUpstream posts the response to the upstream's request up on hc's upstream session.
func (p *Handler) answerUpstream(hc *heldCall, up jsonrpc.ID, result json.RawMessage, rpcErr *jsonrpc.Error) {
	hc.mu.Lock()
	s := hc.session
	hc.mu.Unlock()
	if s == nil {
		return
	}
	resp := &jsonrpc.Response{ID: up, Result: result}
	if rpcErr != nil {
		resp = &jsonrpc.Response{ID: up, Error: rpcErr}
	}
	body, err := jsonrpc.EncodeMessage(resp)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(hc.ctx), p.cfg.ConnectTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return
	}
	req.Header.Set("Content-Type", wire.MediaJSON)
	req.Header.Set("Accept", "application/json, text/event-stream")
	if s.id != "" {
		req.Header.Set(wire.HeaderSessionID, s.id)
	}
	req.Header.Set(wire.HeaderProtocolVersion, s.version)
	r, err := p.direct.Do(req)
	if err != nil {
		p.log.Info("Input response not delivered upstream", "method", logfield.Bound(hc.method), "error", err.Error())
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 64<<10))
	_ = r.Body.Close()
	if r.StatusCode < 200 || r.StatusCode > 299 {
		p.log.Info("Input response not delivered upstream", "method", logfield.Bound(hc.method), "status", r.StatusCode)
	}
}
