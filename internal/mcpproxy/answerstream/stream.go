// Package answerstream is the gate's answer to one agent POST of either revision when the upstream
// answers on an event stream (Stream): its framing follows the upstream's, the upstream's
// messages before the response are events of it, and, when the upstream's stream offers
// resumption, its events are logged (internal/mcpproxy/eventlog) for the agent's GET with
// Last-Event-ID and the request goes on when the agent's stream is closed (RunDetachable).
// A journal replay is marked on it (MarkReplayed), or on the MCP SDK handler's writer when that
// handler answers (SDKAnswers). It imports wire and eventlog only.
package answerstream

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/actgate/actgate/internal/mcpproxy/eventlog"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

// Stream is the answer to one agent POST the direct paths carry (serveToolsCall,
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
type Stream struct {
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

	sess     *Session      // the session, where a resumable stream's events are logged (nil: none)
	log      *eventlog.Log // nil: not resumable (no event ids)
	upID     string        // the id of the upstream event being carried ("": none), as written to the agent
	respID   string        // the upID of the upstream's response event, for the answer
	retry    time.Duration // the upstream's retry field, repeated to the agent
	detached bool          // the agent's response has ended: events are only logged
	detach   chan struct{} // closed when detached
}

// Session is what a session keeps of its answer streams' resumption: the logs of its resumable
// streams, and the mark set once the upstream's streams are seen to carry event ids.
type Session struct {
	Logs      eventlog.Set
	Resumable atomic.Bool
}

// Options are how an answer stream is opened (Stream).
type Options struct {
	// Lazy: the stream becomes an event stream only when a message precedes the response.
	Lazy bool
	// Early: the agent's headers go out as soon as the upstream's arrive (UpstreamHeaders).
	Early bool
	// Session, when set, is where a resumable stream's events are logged.
	Session *Session
}

// New returns the answer stream of one agent POST, answered on w.
func New(w http.ResponseWriter, o Options) *Stream {
	return &Stream{w: w, lazy: o.Lazy, early: o.Early, sess: o.Session}
}

type agentStreamKey struct{}

// With returns ctx carrying s, for the upstream leg of the request (exchange,
// sendCall, fromUpstream).
func With(ctx context.Context, s *Stream) context.Context {
	return context.WithValue(ctx, agentStreamKey{}, s)
}

// Of returns the agent stream of the request ctx belongs to, or nil.
func Of(ctx context.Context) *Stream {
	s, _ := ctx.Value(agentStreamKey{}).(*Stream)
	return s
}

// Start makes the answer an event stream (once). Nothing is written yet: the headers go out
// with the first event, so that a stream holding only the response costs one write, as a JSON
// answer does.
func (s *Stream) Start() {
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

func (s *Stream) beginLocked() {
	if s.started {
		return
	}
	s.started = true
	h := s.w.Header()
	h.Set("Content-Type", wire.MediaSSE)
	h.Set("Cache-Control", "no-cache, no-transform")
}

// UpstreamHeaders is told the media type of the upstream's 2xx answer as soon as its headers
// arrive. An early stream writes the agent's headers now, in the upstream's framing (an event
// stream, or application/json whose body is the response the gate relays when it comes), and
// flushes them; any other stream waits for its first event or its response.
func (s *Stream) UpstreamHeaders(mediaType string) {
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

// HeadersSent reports whether the agent's headers are out (status 200): the answer can only
// be its body now.
func (s *Stream) HeadersSent() bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sent
}

// Streams reports whether the upstream answers the request on an event stream (the agent's
// answer is one, or becomes one with the first message).
func (s *Stream) Streams() bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.wanted
}

// IsStarted reports whether the answer is an event stream.
func (s *Stream) IsStarted() bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started
}

// Message writes one JSON-RPC message as an event; false when the answer is not an event
// stream (the caller delivers the message otherwise).
func (s *Stream) Message(msg jsonrpc.Message) bool {
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
func (s *Stream) event(data []byte, flush bool) bool {
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

func (s *Stream) flushLocked() {
	if err := http.NewResponseController(s.w).Flush(); err != nil {
		s.broken = true
	}
}

// Answer writes the response to the agent: the last event of a started stream, or a JSON
// body. Nothing is written to the stream after it.
func (s *Stream) Answer(out []byte) {
	if s.IsStarted() {
		s.mu.Lock()
		s.upID, s.respID = s.respID, "" // the response event's id, or the gate's own
		s.mu.Unlock()
		s.event(out, false)
		s.Finish()
		return
	}
	s.Finish()
	if s.isDetached() {
		return
	}
	h := s.w.Header()
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("Content-Type", wire.MediaJSON)
	_, _ = s.w.Write(out)
}

// Finish ends the stream: a message that comes later (from an upstream stream still being
// read) is dropped, never written after the agent's request was answered.
func (s *Stream) Finish() {
	s.mu.Lock()
	s.done = true
	if s.log != nil {
		s.log.Finish()
	}
	s.mu.Unlock()
}

// MarkReplayed sets wire.HeaderReplayed on the answer when its headers are not out yet; it
// reports whether it did. An event stream's headers go out with its first event.
func (s *Stream) MarkReplayed() bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started || s.sent || s.done {
		return false
	}
	s.w.Header().Set(wire.HeaderReplayed, "true")
	return true
}
