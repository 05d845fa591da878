package mcpproxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

// Resumption of the gate's answer streams (MCP streamable HTTP, resumability and redelivery:
// a server may close a stream before the response after an event with an id). An answer stream is resumable exactly when the upstream's is: on the first
// upstream event with an id, the agent's stream gets a log (eventLog). Each event that carries
// an upstream event to the agent (a notification, a request put to the agent, the priming event,
// the response) has that event's id as the upstream wrote it; an event the gate writes itself
// (an answer that is not the upstream's response as written: tools/list with the gate's
// additions, an error of the gate's) has an id of the gate's own, "actgate:g{stream}-{n}",
// which no upstream id can equal: an upstream id that begins with "actgate:" is written
// "actgate:u:{id}" (as on the GET stream, getstream.go).
//
// When the upstream closes its stream before the response, the gate resumes the upstream's
// itself (readStream), and the agent's stream is closed too (after the events so far): the
// request goes on (runDetachable), what follows is logged, and a tools/call's outcome is
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

// Bounds of the event logs: per session, the logs kept (the oldest finished one makes room for
// a new one; with maxStreamLogs unfinished, a new answer stream is not resumable, and gets no
// ids), per log the bytes kept (maxStreamLogLen), per session the bytes of all its logs
// (maxSessionLogBytes) and in the whole gate the bytes of every session's logs (streamLogs,
// maxGateLogBytes). A log that would grow beyond any of them is dropped: a resumption that names
// one of the gate's own ids in it is answered 404 with EF_STREAM_LOG_LIMIT, one naming an
// upstream id goes upstream; with a session's or the gate's bytes spent, a new answer stream is
// not resumable (no ids), and is answered on its connection as any other. A log is kept only
// while it can answer a resumption: a finished one without an event of the gate's own (only
// upstream ids: each resumption of it is the upstream's to answer, eventLog.answers) is released
// when it finishes (docs/api.md "Per transport feature": SSE event ids).
const (
	maxStreamLogs      = 64
	maxStreamLogLen    = 1 << 20
	maxSessionLogBytes = 4 << 20
)

// maxGateLogBytes bounds the bytes of the event logs of every session of every proxy in the
// process. A variable for tests.
var maxGateLogBytes int64 = 64 << 20

// streamLogs counts the bytes the process's event logs hold (maxGateLogBytes).
var streamLogs logBudget

// logBudget counts bytes held against a bound.
type logBudget struct{ used atomic.Int64 }

// take counts n more bytes; false, counting nothing, when that would pass max.
func (u *logBudget) take(n, max int64) bool {
	for {
		cur := u.used.Load()
		if cur+n > max {
			return false
		}
		if u.used.CompareAndSwap(cur, cur+n) {
			return true
		}
	}
}

func (u *logBudget) give(n int64) { u.used.Add(-n) }

// full reports whether less than room bytes are left below max.
func (u *logBudget) full(room, max int64) bool { return u.used.Load()+room > max }

// minLogRoom is the room a new log needs in its session's and the gate's budgets: a priming
// event and an answer of a few hundred bytes.
const minLogRoom = 4 << 10

// eventLog is the events of one resumable answer stream, each with its id line.
type eventLog struct {
	key    string
	b      *bridge // the session, whose budget (and the gate's) counts size
	mu     sync.Mutex
	events [][]byte
	ids    []string // the id each event was written with
	own    int      // the gate's own ids given so far
	// lastOwn is the index of the last event written with an id of the gate's own (-1: none):
	// a resumption after an upstream id before it is answered from the log, which alone has it.
	lastOwn int
	size    int
	over    bool          // beyond maxStreamLogLen, or the session's or the gate's budget: dropped
	done    bool          // the response is logged (or the stream abandoned)
	wake    chan struct{} // closed and replaced on each change
	// resumed is signalled (without blocking) by each of the agent's GETs resuming the
	// stream: the gate, waiting to resume the upstream's (readStream), resumes it then.
	resumed chan struct{}
}

func newEventLog(key string, b *bridge) *eventLog {
	return &eventLog{key: key, b: b, lastOwn: -1, wake: make(chan struct{}), resumed: make(chan struct{}, 1)}
}

// appendID appends the id line of the next event to buf: id, an upstream event's id as the
// agent is given it (ownID: the gate's own when ""), and returns that id.
func (l *eventLog) appendID(buf []byte, id string) ([]byte, string) {
	buf = append(buf, "id: "...)
	if id == "" {
		l.mu.Lock()
		n := l.own
		l.own++
		l.mu.Unlock()
		start := len(buf)
		buf = append(buf, gateEventPrefix+"g"...)
		buf = append(buf, l.key...)
		buf = append(buf, '-')
		buf = strconv.AppendInt(buf, int64(n), 10)
		id = string(buf[start:])
	} else {
		buf = append(buf, id...)
	}
	return append(buf, '\n'), id
}

// add logs one event (its bytes are copied) written with id. An event that would take the log
// beyond maxStreamLogLen, or its session or the gate beyond their budgets, drops the log.
func (l *eventLog) add(ev []byte, id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.over || l.done {
		return
	}
	n := len(ev) + len(id)
	if l.size+n > maxStreamLogLen || !l.b.takeLogBytes(int64(n)) {
		l.dropLocked()
	} else {
		l.size += n
		l.events = append(l.events, append([]byte(nil), ev...))
		l.ids = append(l.ids, id)
		if _, _, own := parseResumeID(id); own {
			l.lastOwn = len(l.ids) - 1
		}
	}
	close(l.wake)
	l.wake = make(chan struct{})
}

// dropLocked drops the log's events and gives their bytes back.
func (l *eventLog) dropLocked() {
	l.over, l.events, l.ids = true, nil, nil
	l.b.giveLogBytes(int64(l.size))
	l.size = 0
}

// takeLogBytes counts n bytes of the session's logs against its budget and the gate's; false,
// counting nothing, when either is spent. A nil bridge (tests of a log alone) counts nothing.
func (b *bridge) takeLogBytes(n int64) bool {
	if b == nil {
		return true
	}
	if !b.logBytes.take(n, maxSessionLogBytes) {
		return false
	}
	if !streamLogs.take(n, maxGateLogBytes) {
		b.logBytes.give(n)
		return false
	}
	return true
}

func (b *bridge) giveLogBytes(n int64) {
	if b == nil || n == 0 {
		return
	}
	b.logBytes.give(n)
	streamLogs.give(n)
}

// index returns the index of the event written with id; false when the log has none.
func (l *eventLog) index(id string) (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.ids) - 1; i >= 0; i-- {
		if l.ids[i] == id {
			return i, true
		}
	}
	return 0, false
}

// dropped reports whether the log was dropped at a bound (eventLog.add).
func (l *eventLog) dropped() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.over
}

// answers reports whether a resumption after the n-th event is the log's to answer: its
// stream is still being read (the gate holds the upstream's), or an event after the n-th has
// an id of the gate's own (the upstream has not got it).
func (l *eventLog) answers(n int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.over && (!l.done || l.lastOwn > n)
}

// finish marks the log finished. One without an event of the gate's own can answer no new
// resumption (answers): its session forgets it and its bytes are given back. Its events stay
// with the log for a resumption reading it now (serveResume holds it), which writes the rest,
// the response last, and lets it go.
func (l *eventLog) finish() {
	l.mu.Lock()
	if l.done {
		l.mu.Unlock()
		return
	}
	l.done = true
	release := l.lastOwn < 0 && !l.over
	if release {
		l.b.giveLogBytes(int64(l.size))
		l.size = 0
	}
	close(l.wake)
	l.wake = make(chan struct{})
	l.mu.Unlock()
	if release {
		l.b.forgetLog(l)
	}
}

// forgetLog removes l from the session's logs.
func (b *bridge) forgetLog(l *eventLog) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.logs[l.key] != l {
		return
	}
	delete(b.logs, l.key)
	if i := slices.Index(b.logOrder, l.key); i >= 0 {
		b.logOrder = slices.Delete(b.logOrder, i, i+1)
	}
}

// releaseLogs drops every log of the session (it closed) and gives their bytes back.
func (b *bridge) releaseLogs() {
	b.mu.Lock()
	logs := b.logs
	b.logs, b.logOrder = nil, nil
	b.mu.Unlock()
	for _, l := range logs {
		l.mu.Lock()
		if !l.over {
			l.dropLocked()
		}
		l.done = true
		close(l.wake)
		l.wake = make(chan struct{})
		l.mu.Unlock()
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
// maxStreamLogs unfinished logs are kept already, when the session's or the gate's log budget
// has less than minLogRoom left, or when the session is closed.
func (b *bridge) newLog() *eventLog {
	if b.logBytes.full(minLogRoom, maxSessionLogBytes) || streamLogs.full(minLogRoom, maxGateLogBytes) {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
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
				l.mu.Lock()
				if !l.over {
					l.dropLocked()
				}
				l.mu.Unlock()
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
	l := newEventLog(key, b)
	b.logs[key] = l
	b.logOrder = append(b.logOrder, key)
	return l
}

func (b *bridge) logOf(key string) *eventLog {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.logs[key]
}

// upstreamEvent is told of the end of each event of the upstream's answer stream, before its
// message is handled: its id (hasID false: none) and whether it was a priming event (an id and
// no data). The first id makes the agent's stream resumable; the id is given to the event that
// carries this one to the agent (event), and a priming event is repeated to the agent with it.
func (s *agentStream) upstreamEvent(id string, hasID, priming bool) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.upID = ""
	if !hasID || s.done || s.b == nil {
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
	buf, id := s.log.appendID(make([]byte, 0, 64+len(s.upID)), s.upID)
	s.upID = ""
	if s.retry > 0 {
		buf = append(buf, "retry: "...)
		buf = strconv.AppendInt(buf, s.retry.Milliseconds(), 10)
		buf = append(buf, '\n')
	}
	buf = append(buf, "data: \n\n"...)
	s.log.add(buf, id)
	if s.detached || s.broken {
		return
	}
	if _, err := s.w.Write(buf); err != nil {
		s.broken = true
		return
	}
	s.flushLocked()
}

// upstreamResponse is told that the event last ended (upstreamEvent) holds the response: the
// agent's answer (answer) is given its id.
func (s *agentStream) upstreamResponse() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.respID, s.upID = s.upID, ""
	s.mu.Unlock()
}

// gateAnswer is told that the agent's answer is not the upstream's response as written (the
// gate changed it, or answers instead of it): the answer gets an id of the gate's own, so that
// a resumption after an earlier event is answered from the log, not by the upstream's replay.
func (s *agentStream) gateAnswer() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.respID = ""
	s.mu.Unlock()
}

// answerFrom is told whether the agent's answer is the upstream's response as written
// (upstreams); when it is not, the answer is the gate's own (gateAnswer).
func (s *agentStream) answerFrom(upstreams bool) {
	if !upstreams {
		s.gateAnswer()
	}
}

// agentEventID is the id an upstream event is given on the agent's streams: the upstream's as
// written, or, for one in the gate's namespace, "actgate:u:{id}".
func agentEventID(id string) string {
	if strings.HasPrefix(id, gateEventPrefix) {
		return gateEventPrefix + "u:" + id
	}
	return id
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

// serveResume answers the agent's GET with Last-Event-ID that names an event of one of its
// session's resumable answer streams the gate answers from its log: an id of the gate's own,
// or an upstream id of a stream the gate is still reading. It returns false, having written
// nothing, for any other id (serveGET relays it to the upstream, which answers it) and for a
// request the SDK's handler answers. An id that is not one an event stream can carry, or longer
// than wire.MaxEventID, is refused (HTTP 400, EF_EVENT_ID_INVALID).
func (p *Proxy) serveResume(w http.ResponseWriter, r *http.Request) bool {
	if rebinding(r) {
		return false // refused by the SDK's handler (DNS rebinding: 403)
	}
	b := p.bridgeByID(r.Header.Get(wire.HeaderSessionID))
	if b == nil {
		return false // the SDK's handler answers an unknown session
	}
	last := r.Header.Get(wire.HeaderLastEventID)
	if err := checkEventID(last); err != nil {
		http.Error(w, string(ef.EFEventIDInvalid)+": "+err.Error(), http.StatusBadRequest)
		return true
	}
	if b.agent != p.requestAgent(r.Context()) {
		http.Error(w, "actgate: the session belongs to another agent", http.StatusForbidden)
		return true
	}
	l, n := b.logFor(last)
	if l == nil {
		if _, _, own := parseResumeID(last); own {
			http.Error(w, "actgate: no stream to resume for that Last-Event-ID", http.StatusNotFound)
			return true
		}
		return false // an upstream id: the upstream's to answer (serveGET)
	}
	evs, done, wake, ok := l.after(n)
	if !ok {
		http.Error(w, string(ef.EFStreamLogLimit)+": actgate: the stream can no longer be resumed: its log passed the gate's bounds", http.StatusNotFound)
		return true
	}
	select {
	case l.resumed <- struct{}{}:
	default:
	}
	h := w.Header()
	h.Set("Content-Type", wire.MediaSSE)
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

// logFor returns the log the agent's Last-Event-ID is answered from and the index of the
// event it names: the log of a gate's own id (when it holds that id), or the newest log that
// holds the upstream id when it answers a resumption after it (eventLog.answers); nil for
// none.
func (b *bridge) logFor(last string) (*eventLog, int) {
	if key, _, ok := parseResumeID(last); ok {
		if l := b.logOf(key); l != nil {
			if n, ok := l.index(last); ok || l.dropped() {
				return l, n // a dropped log: serveResume answers EF_STREAM_LOG_LIMIT
			}
		}
		return nil, 0
	}
	b.mu.Lock()
	order := append([]string(nil), b.logOrder...)
	b.mu.Unlock()
	for i := len(order) - 1; i >= 0; i-- {
		l := b.logOf(order[i])
		if l == nil {
			continue
		}
		if n, ok := l.index(last); ok {
			if l.answers(n) {
				return l, n
			}
			return nil, 0
		}
	}
	return nil, 0
}

// checkEventID checks a Last-Event-ID the agent sent: at most wire.MaxEventID bytes, and no byte an
// event stream's id field cannot carry (NUL, CR, LF). Its content is otherwise the upstream's
// to judge.
func checkEventID(id string) error {
	if len(id) > wire.MaxEventID {
		return fmt.Errorf("the Last-Event-ID is longer than %d bytes", wire.MaxEventID)
	}
	if strings.ContainsAny(id, "\x00\r\n") {
		return errors.New("the Last-Event-ID holds NUL, CR or LF")
	}
	return nil
}

// parseResumeID reads an answer-stream event id of the gate's own, actgate:g{stream}-{n} with
// both parts decimal; ok is false for anything else (an upstream id, or the GET stream's
// actgate:{n}:{up} and actgate:u:{up}).
func parseResumeID(id string) (key string, n int, ok bool) {
	rest, ok := strings.CutPrefix(id, gateEventPrefix+"g")
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
