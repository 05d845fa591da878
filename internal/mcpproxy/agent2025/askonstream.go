package agent2025

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/actgate/actgate/internal/logfield"
	"github.com/actgate/actgate/internal/mcpproxy/answerstream"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// streamSeq numbers the requests the proxy puts to the agent on an answer stream
// ("actgate-s-N"): ids of the proxy's own, so that the agent's responses are told apart from
// anything the agent-side SDK session asked.
var streamSeq atomic.Uint64

// errAgentSilent is the answer given upstream when the agent does not answer a request put to
// it on the answer stream in time.
var errAgentSilent = &jsonrpc.Error{Code: wire.CodeInternalError, Message: "actgate: the agent did not answer"}

// askOnStream puts an upstream's request (sampling, elicitation, roots/list) to the agent on
// the agent's answer stream of the request that caused it, as the upstream wrote it, and
// returns the agent's response as the agent wrote it, under the upstream's id. ok is false,
// having sent nothing, when there is no answer stream or the agent did not declare the
// capability: the caller then answers through the agent's SDK session (bridge.answer). The wait is bounded by ctx and, for an
// elicitation, by the elicitation timeout.
func (b *bridge) askOnStream(ctx context.Context, req *jsonrpc.Request) (resp *jsonrpc.Response, ok bool) {
	s := answerstream.Of(ctx)
	if !s.Streams() || !b.agentCan(req.Method) {
		return nil, false
	}
	id, _ := jsonrpc.MakeID("actgate-s-" + strconv.FormatUint(streamSeq.Add(1), 10))
	ch := make(chan *jsonrpc.Response, 1)
	if !b.await(id, ch) {
		return &jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{Code: wire.CodeTooManyRequests,
			Message: fmt.Sprintf("actgate: more than %d requests to the agent in flight on this session", maxRelayed)}}, true
	}
	defer b.unawait(id)
	if req.Method == wire.MethodElicit {
		d := b.p.cfg.ElicitationTimeout
		if d == 0 {
			d = DefaultElicitationTimeout
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	if !s.Message(&jsonrpc.Request{ID: id, Method: req.Method, Params: req.Params}) {
		return nil, false
	}
	select {
	case r := <-ch:
		return &jsonrpc.Response{ID: req.ID, Result: r.Result, Error: r.Error}, true
	case <-ctx.Done():
		b.p.log.Info("The agent did not answer a request of the upstream", "method", logfield.Bound(req.Method), "session", b.ss.ID())
		return &jsonrpc.Response{ID: req.ID, Error: errAgentSilent}, true
	}
}

// agentCan reports whether the agent declared the capability an upstream request needs.
func (b *bridge) agentCan(method string) bool {
	switch method {
	case "sampling/createMessage":
		return b.caps.Sampling != nil
	case wire.MethodElicit:
		return b.caps.Elicitation != nil
	case wire.MethodListRoots:
		return b.caps.RootsV2 != nil
	}
	return false
}

// await records that the proxy waits for the agent's response with id; false at maxRelayed.
func (b *bridge) await(id jsonrpc.ID, ch chan *jsonrpc.Response) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.awaiting) >= maxRelayed {
		return false
	}
	if b.awaiting == nil {
		b.awaiting = make(map[jsonrpc.ID]chan *jsonrpc.Response)
	}
	b.awaiting[id] = ch
	return true
}

func (b *bridge) unawait(id jsonrpc.ID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.awaiting, id)
}

// deliver hands the agent's response to the request the proxy put to it (askOnStream); false
// when no such request waits (the response is the agent-side SDK session's).
func (b *bridge) deliver(resp *jsonrpc.Response) bool {
	b.mu.Lock()
	ch, ok := b.awaiting[resp.ID]
	b.mu.Unlock()
	if ok {
		select {
		case ch <- resp:
		default: // a second response to the same id: the first one counts
		}
	}
	return ok
}
