package answerstream

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/actgate/actgate/internal/mcpproxy/eventlog"
)

// Resumption of the gate's answer streams (MCP streamable HTTP, resumability and redelivery:
// a server may close a stream before the response after an event with an id). An answer stream is resumable exactly when the upstream's is: on the first
// upstream event with an id, the agent's stream gets a log (eventlog.Log). Each event that carries
// an upstream event to the agent (a notification, a request put to the agent, the priming event,
// the response) has that event's id as the upstream wrote it; an event the gate writes itself
// (an answer that is not the upstream's response as written: tools/list with the gate's
// additions, an error of the gate's) has an id of the gate's own, "actgate:g{stream}-{n}",
// which no upstream id can equal: an upstream id that begins with "actgate:" is written
// "actgate:u:{id}" (as on the GET stream, agent2025's getstream.go).
//
// When the upstream closes its stream before the response, the gate resumes the upstream's
// itself (readStream), and the agent's stream is closed too (after the events so far): the
// request goes on (RunDetachable), what follows is logged, and a tools/call's outcome is
// recorded when its response comes. The agent's GET with Last-Event-ID on its session is
// answered
//
//   - for an id of the gate's own, or an upstream id of a stream the gate is still reading, or
//     one followed in the log by an event of the gate's own: from the log, the events after
//     that id, then the rest as it comes, up to the response (the gate holds the upstream's
//     stream, which a second reader could not claim; or the upstream never had what follows);
//   - for any other upstream id: by the upstream, relayed as the GET stream is (serveGET), so that
//     the agent gets what the upstream replays, as it would directly; a response the upstream
//     replays there is relayed under the agent's id and never settles anything (legs).
//
// A logged event is never sent twice on one connection and never to another session.

// UpstreamEvent is told of the end of each event of the upstream's answer stream, before its
// message is handled: its id (hasID false: none) and whether it was a priming event (an id and
// no data). The first id makes the agent's stream resumable; the id is given to the event that
// carries this one to the agent (event), and a priming event is repeated to the agent with it.
func (s *Stream) UpstreamEvent(id string, hasID, priming bool) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.upID = ""
	if !hasID || s.done || s.sess == nil {
		return
	}
	if !s.sess.Resumable.Load() {
		s.sess.Resumable.Store(true)
	}
	if s.log == nil {
		if s.log = s.sess.Logs.New(); s.log == nil {
			return
		}
	}
	s.upID = agentEventID(id)
	if !priming {
		return
	}
	if s.wanted {
		s.beginLocked()
	}
	if !s.started {
		return
	}
	buf, id := s.log.AppendID(make([]byte, 0, 64+len(s.upID)), s.upID)
	s.upID = ""
	if s.retry > 0 {
		buf = append(buf, "retry: "...)
		buf = strconv.AppendInt(buf, s.retry.Milliseconds(), 10)
		buf = append(buf, '\n')
	}
	buf = append(buf, "data: \n\n"...)
	s.log.Add(buf, id)
	if s.detached || s.broken {
		return
	}
	if _, err := s.w.Write(buf); err != nil {
		s.broken = true
		return
	}
	s.flushLocked()
}

// UpstreamResponse is told that the event last ended (upstreamEvent) holds the response: the
// agent's answer (answer) is given its id.
func (s *Stream) UpstreamResponse() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.respID, s.upID = s.upID, ""
	s.mu.Unlock()
}

// GateAnswer is told that the agent's answer is not the upstream's response as written (the
// gate changed it, or answers instead of it): the answer gets an id of the gate's own, so that
// a resumption after an earlier event is answered from the log, not by the upstream's replay.
func (s *Stream) GateAnswer() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.respID = ""
	s.mu.Unlock()
}

// AnswerFrom is told whether the agent's answer is the upstream's response as written
// (upstreams); when it is not, the answer is the gate's own (gateAnswer).
func (s *Stream) AnswerFrom(upstreams bool) {
	if !upstreams {
		s.GateAnswer()
	}
}

// agentEventID is the id an upstream event is given on the agent's streams: the upstream's as
// written, or, for one in the gate's namespace, "actgate:u:{id}".
func agentEventID(id string) string {
	if strings.HasPrefix(id, eventlog.Prefix) {
		return eventlog.Prefix + "u:" + id
	}
	return id
}

// UpstreamRetry records the upstream's retry field, repeated on the agent's priming event.
func (s *Stream) UpstreamRetry(d time.Duration) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.retry = d
	s.mu.Unlock()
}

// UpstreamClosed is told that the upstream closed its stream before the response (readStream
// resumes it): a resumable agent stream of a request run by RunDetachable (serveToolsCall,
// serveRelay) is closed too, and what follows is only logged.
func (s *Stream) UpstreamClosed() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.log == nil || s.detach == nil || s.detached || s.done || !s.started {
		return
	}
	s.detached = true
	if s.detach != nil {
		close(s.detach)
	}
}

// AgentResumed returns the channel signalled when the agent resumes the stream (nil: not
// resumable, never signalled).
func (s *Stream) AgentResumed() <-chan struct{} {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.log == nil {
		return nil
	}
	return s.log.Resumed()
}

func (s *Stream) isDetached() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.detached
}

// resumable reports whether the agent could resume the stream: it is an event stream with a
// log (so the answer is written through event, under the stream's lock).
func (s *Stream) resumable() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log != nil && s.started
}

// RunDetachable runs work, which answers on stream, for the handler of the agent's request:
// it returns when work is done, or when the stream is detached (upstreamClosed) or the agent
// went away from a resumable stream, work then going on (bounded by timeout, the proxy's CallTimeout) with what it
// writes only logged. The agent's leaving a stream that is not resumable cancels work's
// context, and the handler waits for it, so that nothing is written after the handler returns.
func RunDetachable(r *http.Request, stream *Stream, timeout time.Duration, work func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	stream.detach = make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer cancel()
		work(ctx)
	}()
	select {
	case <-done:
		return
	case <-stream.detach:
	case <-r.Context().Done():
		if !stream.resumable() {
			cancel()
			<-done
			return
		}
		stream.mu.Lock()
		stream.detached = true
		stream.mu.Unlock()
	}
	t := time.AfterFunc(timeout, cancel)
	go func() { <-done; t.Stop() }()
}
