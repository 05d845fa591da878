package mcpproxy

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/actgate/actgate/internal/logfield"
	"github.com/actgate/actgate/internal/mcpproxy/eventlog"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

// agentStream is the answer to one agent POST the direct paths carry (serveToolsCall,
// serveRelay) when the upstream answers the request on an event stream: the gate answers on an
// event stream too, following the server's framing, with the upstream's notifications of that
// stream (progress, log messages) and its requests (sampling, elicitation, roots/list:
// askOnStream) as events before the response, so that a client without a standalone GET stream
// still receives them. An upstream answer in application/json keeps the
// agent's answer application/json. When the upstream's stream offers resumption (its events
// carry ids), so does the agent's: each event that carries an upstream event has that event's
// id as the upstream wrote it (the gate's own events an id of the gate's), a priming event and
// a retry field where the upstream sends them, and they are logged for the agent's GET with
// Last-Event-ID; when the upstream closes its stream before the response, the agent's is
// closed too (resume.go).
//
// A lazy stream (the direct tools/call path, the hot path) becomes an event stream only when a
// message precedes the response: a call the upstream streams with nothing but its response is
// answered application/json, which costs the agent less than an event stream does.
type agentStream struct {
	mu      sync.Mutex
	w       http.ResponseWriter
	lazy    bool
	wanted  bool // the upstream streams (lazy: not started until a message comes)
	started bool
	broken  bool // a write failed: the agent is gone; later events are dropped
	done    bool // answered (or abandoned): nothing more is written
	// early: the agent's headers go out as soon as the upstream's arrive (a relayed
	// subscriptions/listen, whose body may not come for as long as the listen lives), not
	// with the first event or the response; sent: they are out, status 200.
	early, sent bool

	b        *bridge       // the session, where a resumable stream's events are logged
	log      *eventlog.Log // nil: not resumable (no event ids)
	upID     string        // the id of the upstream event being carried ("": none), as written to the agent
	respID   string        // the upID of the upstream's response event, for the answer
	retry    time.Duration // the upstream's retry field, repeated to the agent
	detached bool          // the agent's response has ended: events are only logged
	detach   chan struct{} // closed when detached
}

type agentStreamKey struct{}

// withAgentStream returns ctx carrying s, for the upstream leg of the request (exchange,
// sendCall, fromUpstream).
func withAgentStream(ctx context.Context, s *agentStream) context.Context {
	return context.WithValue(ctx, agentStreamKey{}, s)
}

// agentStreamOf returns the agent stream of the request ctx belongs to, or nil.
func agentStreamOf(ctx context.Context) *agentStream {
	s, _ := ctx.Value(agentStreamKey{}).(*agentStream)
	return s
}

// start makes the answer an event stream (once). Nothing is written yet: the headers go out
// with the first event, so that a stream holding only the response costs one write, as a JSON
// answer does.
func (s *agentStream) start() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return
	}
	s.wanted = true
	if !s.lazy {
		s.beginLocked()
	}
}

func (s *agentStream) beginLocked() {
	if s.started {
		return
	}
	s.started = true
	h := s.w.Header()
	h.Set("Content-Type", wire.MediaSSE)
	h.Set("Cache-Control", "no-cache, no-transform")
}

// upstreamHeaders is told the media type of the upstream's 2xx answer as soon as its headers
// arrive. An early stream writes the agent's headers now, in the upstream's framing (an event
// stream, or application/json whose body is the response the gate relays when it comes), and
// flushes them; any other stream waits for its first event or its response.
func (s *agentStream) upstreamHeaders(mediaType string) {
	if s == nil || !s.early || (mediaType != wire.MediaSSE && mediaType != wire.MediaJSON) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done || s.sent {
		return
	}
	if mediaType == wire.MediaSSE {
		s.wanted = true
		s.beginLocked()
	} else {
		h := s.w.Header()
		h.Set("Content-Type", wire.MediaJSON)
		h.Set("Cache-Control", "no-cache, no-transform")
	}
	s.w.WriteHeader(http.StatusOK)
	s.sent = true
	s.flushLocked()
}

// headersSent reports whether the agent's headers are out (status 200): the answer can only
// be its body now.
func (s *agentStream) headersSent() bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sent
}

// streams reports whether the upstream answers the request on an event stream (the agent's
// answer is one, or becomes one with the first message).
func (s *agentStream) streams() bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.wanted
}

// isStarted reports whether the answer is an event stream.
func (s *agentStream) isStarted() bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started
}

// message writes one JSON-RPC message as an event; false when the answer is not an event
// stream (the caller delivers the message otherwise).
func (s *agentStream) message(msg jsonrpc.Message) bool {
	if s == nil {
		return false
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return false
	}
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		return true // answered already: dropped
	}
	if s.wanted {
		s.beginLocked()
	}
	s.mu.Unlock()
	return s.event(data, true)
}

// event writes one encoded JSON-RPC message as an SSE "message" event, flushed unless it is
// the last (the handler's return sends it).
func (s *agentStream) event(data []byte, flush bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		return false
	}
	if s.done || (s.broken && s.log == nil) {
		return true
	}
	buf := make([]byte, 0, len(data)+48+len(s.upID))
	var id string
	if s.log != nil {
		buf, id = s.log.AppendID(buf, s.upID)
	}
	s.upID = "" // an upstream id is given to one event
	buf = append(buf, "event: message\ndata: "...)
	buf = append(buf, data...)
	buf = append(buf, "\n\n"...)
	if s.log != nil {
		s.log.Add(buf, id)
	}
	if s.detached || s.broken {
		return true // logged for the agent's resumption
	}
	if _, err := s.w.Write(buf); err != nil {
		s.broken = true
		return true
	}
	if flush {
		s.flushLocked()
	}
	return true
}

func (s *agentStream) flushLocked() {
	if err := http.NewResponseController(s.w).Flush(); err != nil {
		s.broken = true
	}
}

// answer writes the response to the agent: the last event of a started stream, or a JSON
// body. Nothing is written to the stream after it.
func (s *agentStream) answer(out []byte) {
	if s.isStarted() {
		s.mu.Lock()
		s.upID, s.respID = s.respID, "" // the response event's id, or the gate's own
		s.mu.Unlock()
		s.event(out, false)
		s.finish()
		return
	}
	s.finish()
	if s.isDetached() {
		return
	}
	h := s.w.Header()
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("Content-Type", wire.MediaJSON)
	_, _ = s.w.Write(out)
}

// finish ends the stream: a message that comes later (from an upstream stream still being
// read) is dropped, never written after the agent's request was answered.
func (s *agentStream) finish() {
	s.mu.Lock()
	s.done = true
	if s.log != nil {
		s.log.Finish()
	}
	s.mu.Unlock()
}

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
	s := agentStreamOf(ctx)
	if !s.streams() || !b.agentCan(req.Method) {
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
	if !s.message(&jsonrpc.Request{ID: id, Method: req.Method, Params: req.Params}) {
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
