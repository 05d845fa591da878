package mcpproxy

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Resumption of the gate's answer streams (MCP streamable HTTP, resumability and redelivery;
// SEP-1699 polling). An answer stream is resumable exactly when the upstream's is: on the first
// upstream event with an id, the agent's stream gets a log (eventLog) and its events get ids of
// the gate's own, "g{stream}-{n}", which say which of the session's streams an id belongs to.
// When the upstream closes its stream before the response, the gate resumes the upstream's
// itself (readStream), and the agent's stream is closed too (after the events so far): the
// request goes on (runDetachable), what follows is logged, and a tools/call's outcome is
// recorded when its response comes. The agent's GET with Last-Event-ID on its session gets the
// events after that id, then the rest as it comes, up to the response. A logged event is never sent twice on one
// connection and never to another session.

// Bounds of the event logs: per session, the logs kept (the oldest finished one makes room for
// a new one; with maxStreamLogs unfinished, a new answer stream is not resumable, and gets no
// ids), and per log, the bytes kept (beyond them the log is dropped: its stream can no longer
// be resumed, and a GET for it is answered 404).
const (
	maxStreamLogs   = 64
	maxStreamLogLen = 1 << 20
)

// eventLog is the events of one resumable answer stream, each with its id line.
type eventLog struct {
	key    string
	mu     sync.Mutex
	events [][]byte
	size   int
	over   bool          // beyond maxStreamLogLen: dropped
	done   bool          // the response is logged (or the stream abandoned)
	wake   chan struct{} // closed and replaced on each change
	// resumed is signalled (without blocking) by each of the agent's GETs resuming the
	// stream: the gate, waiting to resume the upstream's (readStream), resumes it then.
	resumed chan struct{}
}

func newEventLog(key string) *eventLog {
	return &eventLog{key: key, wake: make(chan struct{}), resumed: make(chan struct{}, 1)}
}

// appendID appends the id line of the next event to buf.
func (l *eventLog) appendID(buf []byte) []byte {
	l.mu.Lock()
	n := len(l.events)
	l.mu.Unlock()
	buf = append(buf, "id: g"...)
	buf = append(buf, l.key...)
	buf = append(buf, '-')
	buf = strconv.AppendInt(buf, int64(n), 10)
	return append(buf, '\n')
}

// add logs one event (its bytes are copied).
func (l *eventLog) add(ev []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.over || l.done {
		return
	}
	l.size += len(ev)
	if l.size > maxStreamLogLen {
		l.over, l.events = true, nil
	} else {
		l.events = append(l.events, append([]byte(nil), ev...))
	}
	close(l.wake)
	l.wake = make(chan struct{})
}

func (l *eventLog) finish() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done {
		l.done = true
		close(l.wake)
		l.wake = make(chan struct{})
	}
}

// after returns the events after the n-th, whether the log is finished, and the channel closed
// on its next change; ok is false for a dropped log.
func (l *eventLog) after(n int) (evs [][]byte, done bool, wake <-chan struct{}, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.over {
		return nil, false, nil, false
	}
	if n+1 < len(l.events) {
		evs = l.events[n+1:]
	}
	return evs, l.done, l.wake, true
}

// newLog allocates the log of a new resumable answer stream of the session; nil when
// maxStreamLogs unfinished logs are kept already.
func (b *bridge) newLog() *eventLog {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.logs == nil {
		b.logs = make(map[string]*eventLog)
	}
	if len(b.logs) >= maxStreamLogs {
		evicted := false
		for i, k := range b.logOrder {
			l := b.logs[k]
			l.mu.Lock()
			finished := l.done || l.over
			l.mu.Unlock()
			if finished {
				delete(b.logs, k)
				b.logOrder = append(b.logOrder[:i:i], b.logOrder[i+1:]...)
				evicted = true
				break
			}
		}
		if !evicted {
			return nil
		}
	}
	key := strconv.FormatUint(streamSeq.Add(1), 10)
	l := newEventLog(key)
	b.logs[key] = l
	b.logOrder = append(b.logOrder, key)
	return l
}

func (b *bridge) logOf(key string) *eventLog {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.logs[key]
}

// upstreamEvent is told of each event of the upstream's answer stream that ends: whether it
// carried an id and whether it was a priming event (an id and no data). The first id makes the
// agent's stream resumable; a priming event is repeated to the agent as one of the gate's own.
func (s *agentStream) upstreamEvent(hasID, priming bool) {
	if s == nil || !hasID {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done || s.b == nil {
		return
	}
	if !s.b.resumable.Load() {
		s.b.resumable.Store(true)
	}
	if s.log == nil {
		if s.log = s.b.newLog(); s.log == nil {
			return
		}
	}
	if !priming {
		return
	}
	if s.wanted {
		s.beginLocked()
	}
	if !s.started {
		return
	}
	buf := s.log.appendID(make([]byte, 0, 64))
	if s.retry > 0 {
		buf = append(buf, "retry: "...)
		buf = strconv.AppendInt(buf, s.retry.Milliseconds(), 10)
		buf = append(buf, '\n')
	}
	buf = append(buf, "data: \n\n"...)
	s.log.add(buf)
	if s.detached || s.broken {
		return
	}
	if _, err := s.w.Write(buf); err != nil {
		s.broken = true
		return
	}
	s.flushLocked()
}

// upstreamRetry records the upstream's retry field, repeated on the agent's priming event.
func (s *agentStream) upstreamRetry(d time.Duration) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.retry = d
	s.mu.Unlock()
}

// upstreamClosed is told that the upstream closed its stream before the response (readStream
// resumes it): a resumable agent stream of a request run by runDetachable (serveToolsCall,
// serveRelay) is closed too, and what follows is only logged.
func (s *agentStream) upstreamClosed() {
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

// agentResumed returns the channel signalled when the agent resumes the stream (nil: not
// resumable, never signalled).
func (s *agentStream) agentResumed() <-chan struct{} {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.log == nil {
		return nil
	}
	return s.log.resumed
}

func (s *agentStream) isDetached() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.detached
}

// resumable reports whether the agent could resume the stream: it is an event stream with a
// log (so the answer is written through event, under the stream's lock).
func (s *agentStream) resumable() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log != nil && s.started
}

// runDetachable runs work, which answers on stream, for the handler of the agent's request:
// it returns when work is done, or when the stream is detached (upstreamClosed) or the agent
// went away from a resumable stream, work then going on (bounded by CallTimeout) with what it
// writes only logged. The agent's leaving a stream that is not resumable cancels work's
// context, and the handler waits for it, so that nothing is written after the handler returns.
func (p *Proxy) runDetachable(r *http.Request, stream *agentStream, work func(ctx context.Context)) {
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
	t := time.AfterFunc(p.cfg.CallTimeout, cancel)
	go func() { <-done; t.Stop() }()
}

// serveResume answers the agent's GET with Last-Event-ID that names one of its session's
// resumable answer streams: the events after that id, then the rest as they come, up to the
// response. It returns false, having written nothing, for an id that is not the gate's own
// (the SDK's handler answers it).
func (p *Proxy) serveResume(w http.ResponseWriter, r *http.Request) bool {
	key, n, ok := parseResumeID(r.Header.Get(headerLastEventID))
	if !ok || rebinding(r) {
		return false // not the gate's id; or refused by the SDK's handler (DNS rebinding: 403)
	}
	b := p.bridgeByID(r.Header.Get(headerSessionID))
	if b == nil {
		return false // the SDK's handler answers an unknown session
	}
	if b.agent != p.requestAgent(r.Context()) {
		http.Error(w, "actgate: the session belongs to another agent", http.StatusForbidden)
		return true
	}
	l := b.logOf(key)
	if l == nil {
		http.Error(w, "actgate: no stream to resume for that Last-Event-ID", http.StatusNotFound)
		return true
	}
	evs, done, wake, ok := l.after(n)
	if !ok {
		http.Error(w, "actgate: the stream can no longer be resumed", http.StatusNotFound)
		return true
	}
	select {
	case l.resumed <- struct{}{}:
	default:
	}
	h := w.Header()
	h.Set("Content-Type", mediaSSE)
	h.Set("Cache-Control", "no-cache, no-transform")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	for {
		for _, ev := range evs {
			if _, err := w.Write(ev); err != nil {
				return true
			}
			n++
		}
		_ = rc.Flush()
		if done {
			return true
		}
		select {
		case <-wake:
		case <-r.Context().Done():
			return true
		}
		if evs, done, wake, ok = l.after(n); !ok {
			return true
		}
	}
}

// parseResumeID reads an event id of the gate's own, g{stream}-{n} with both parts decimal
// (the SDK's ids are {stream}_{n}); ok is false for anything else.
func parseResumeID(id string) (key string, n int, ok bool) {
	rest, ok := strings.CutPrefix(id, "g")
	if !ok || len(rest) > 64 {
		return "", 0, false
	}
	key, num, ok := strings.Cut(rest, "-")
	if !ok || !decimal(key) || !decimal(num) {
		return "", 0, false
	}
	n, err := strconv.Atoi(num)
	if err != nil {
		return "", 0, false
	}
	return key, n, true
}

// decimal reports whether s is a non-empty run of ASCII digits.
func decimal(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
