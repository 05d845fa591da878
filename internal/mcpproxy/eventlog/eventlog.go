package eventlog

import (
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
)

// Bounds of the event logs: per session, the logs kept (the oldest finished one makes room for
// a new one; with MaxLogs unfinished, a new answer stream is not resumable, and gets no ids),
// per log the bytes kept (MaxLogLen), per session the bytes of all its logs (MaxSessionBytes)
// and in the whole process the bytes of every session's logs (GateLimit). A log that would grow
// beyond any of them is dropped: a resumption that names one of the gate's own ids in it is
// answered 404 with EF_STREAM_LOG_LIMIT, one naming an upstream id goes upstream; with a
// session's or the process's bytes spent, a new answer stream is not resumable (no ids), and
// is answered on its connection as any other. A log is kept only while it can answer a
// resumption: a finished one without an event of the gate's own (only upstream ids: each
// resumption of it is the upstream's to answer, Log.Answers) is released when it finishes
// (docs/api.md "Per transport feature": SSE event ids).
const (
	MaxLogs         = 64
	MaxLogLen       = 1 << 20
	MaxSessionBytes = 4 << 20
	// MinRoom is the room a new log needs in its session's and the process's budgets: a
	// priming event and an answer of a few hundred bytes.
	MinRoom = 4 << 10
)

// maxGateBytes bounds the bytes of the event logs of every session of every proxy in the
// process (SetGateLimit: for tests).
var maxGateBytes atomic.Int64

func init() { maxGateBytes.Store(64 << 20) }

// gateBytes counts the bytes the process's event logs hold (maxGateBytes).
var gateBytes budget

// SetGateLimit sets the bound of the bytes of every event log in the process and returns the
// one before (tests narrow it and put it back).
func SetGateLimit(n int64) int64 { return maxGateBytes.Swap(n) }

// GateUsed returns the bytes the process's event logs hold.
func GateUsed() int64 { return gateBytes.used.Load() }

// budget counts bytes held against a bound.
type budget struct{ used atomic.Int64 }

// take counts n more bytes; false, counting nothing, when that would pass limit.
func (u *budget) take(n, limit int64) bool {
	for {
		cur := u.used.Load()
		if cur+n > limit {
			return false
		}
		if u.used.CompareAndSwap(cur, cur+n) {
			return true
		}
	}
}

func (u *budget) give(n int64) { u.used.Add(-n) }

// full reports whether less than room bytes are left below limit.
func (u *budget) full(room, limit int64) bool { return u.used.Load()+room > limit }

// seq names the logs (a stream's key, the {stream} of its ids), unique in the process.
var seq atomic.Uint64

// Log is the events of one resumable answer stream, each with its id line.
type Log struct {
	key    string
	set    *Set // the session's logs, whose budget (and the process's) counts size; nil: none
	mu     sync.Mutex
	events [][]byte
	ids    []string // the id each event was written with
	own    int      // the gate's own ids given so far
	// lastOwn is the index of the last event written with an id of the gate's own (-1: none):
	// a resumption after an upstream id before it is answered from the log, which alone has it.
	lastOwn int
	size    int
	over    bool          // beyond MaxLogLen, or the session's or the process's budget: dropped
	done    bool          // the response is logged (or the stream abandoned)
	wake    chan struct{} // closed and replaced on each change
	resumed chan struct{}
}

func newLog(key string, set *Set) *Log {
	return &Log{key: key, set: set, lastOwn: -1, wake: make(chan struct{}), resumed: make(chan struct{}, 1)}
}

// Key is the log's stream key, the {stream} of the gate's own ids in it.
func (l *Log) Key() string { return l.key }

// Resumed is signalled (without blocking) by each of the agent's GETs resuming the stream:
// the gate, waiting to resume the upstream's, resumes it then.
func (l *Log) Resumed() chan struct{} { return l.resumed }

// AppendID appends the id line of the next event to buf: id, an upstream event's id as the
// agent is given it (the gate's own, actgate:g{key}-{n}, when ""), and returns that id.
func (l *Log) AppendID(buf []byte, id string) ([]byte, string) {
	buf = append(buf, "id: "...)
	if id == "" {
		l.mu.Lock()
		n := l.own
		l.own++
		l.mu.Unlock()
		start := len(buf)
		buf = append(buf, Prefix+"g"...)
		buf = append(buf, l.key...)
		buf = append(buf, '-')
		buf = strconv.AppendInt(buf, int64(n), 10)
		id = string(buf[start:])
	} else {
		buf = append(buf, id...)
	}
	return append(buf, '\n'), id
}

// Add logs one event (its bytes are copied) written with id. An event that would take the log
// beyond MaxLogLen, or its session or the process beyond their budgets, drops the log.
func (l *Log) Add(ev []byte, id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.over || l.done {
		return
	}
	n := len(ev) + len(id)
	if l.size+n > MaxLogLen || !l.set.take(int64(n)) {
		l.dropLocked()
	} else {
		l.size += n
		l.events = append(l.events, append([]byte(nil), ev...))
		l.ids = append(l.ids, id)
		if _, _, own := ParseID(id); own {
			l.lastOwn = len(l.ids) - 1
		}
	}
	close(l.wake)
	l.wake = make(chan struct{})
}

// dropLocked drops the log's events and gives their bytes back.
func (l *Log) dropLocked() {
	l.over, l.events, l.ids = true, nil, nil
	l.set.give(int64(l.size))
	l.size = 0
}

// Index returns the index of the event written with id; false when the log has none.
func (l *Log) Index(id string) (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.ids) - 1; i >= 0; i-- {
		if l.ids[i] == id {
			return i, true
		}
	}
	return 0, false
}

// Dropped reports whether the log was dropped at a bound (Add).
func (l *Log) Dropped() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.over
}

// Answers reports whether a resumption after the n-th event is the log's to answer: its
// stream is still being read (the gate holds the upstream's), or an event after the n-th has
// an id of the gate's own (the upstream has not got it).
func (l *Log) Answers(n int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.over && (!l.done || l.lastOwn > n)
}

// Finish marks the log finished. One without an event of the gate's own can answer no new
// resumption (Answers): its session forgets it and its bytes are given back. Its events stay
// with the log for a resumption reading it now (which holds it), which writes the rest, the
// response last, and lets it go.
func (l *Log) Finish() {
	l.mu.Lock()
	if l.done {
		l.mu.Unlock()
		return
	}
	l.done = true
	release := l.lastOwn < 0 && !l.over
	if release {
		l.set.give(int64(l.size))
		l.size = 0
	}
	close(l.wake)
	l.wake = make(chan struct{})
	l.mu.Unlock()
	if release {
		l.set.forget(l)
	}
}

// After returns the events after the n-th, whether the log is finished, and the channel closed
// on its next change; ok is false for a dropped log.
func (l *Log) After(n int) (evs [][]byte, done bool, wake <-chan struct{}, ok bool) {
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

// Set is one agent session's logs, by stream key: at most MaxLogs, and MaxSessionBytes. Its
// zero value is an empty set.
type Set struct {
	mu     sync.Mutex
	logs   map[string]*Log
	order  []string // the keys of logs, oldest first
	bytes  budget
	closed bool
}

// Used returns the bytes the set's logs hold.
func (s *Set) Used() int64 { return s.bytes.used.Load() }

// take counts n bytes of the set's logs against its budget and the process's; false, counting
// nothing, when either is spent. A nil set (a log alone) counts nothing.
func (s *Set) take(n int64) bool {
	if s == nil {
		return true
	}
	if !s.bytes.take(n, MaxSessionBytes) {
		return false
	}
	if !gateBytes.take(n, maxGateBytes.Load()) {
		s.bytes.give(n)
		return false
	}
	return true
}

func (s *Set) give(n int64) {
	if s == nil || n == 0 {
		return
	}
	s.bytes.give(n)
	gateBytes.give(n)
}

// forget removes l from the set.
func (s *Set) forget(l *Log) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.logs[l.key] != l {
		return
	}
	delete(s.logs, l.key)
	if i := slices.Index(s.order, l.key); i >= 0 {
		s.order = slices.Delete(s.order, i, i+1)
	}
}

// Release drops every log of the set (its session closed), gives their bytes back, and makes
// New answer nil from now on.
func (s *Set) Release() {
	s.mu.Lock()
	logs := s.logs
	s.logs, s.order, s.closed = nil, nil, true
	s.mu.Unlock()
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

// New allocates the log of a new resumable answer stream; nil when MaxLogs unfinished logs are
// kept already, when the set's or the process's budget has less than MinRoom left, or when the
// set was released.
func (s *Set) New() *Log {
	if s.bytes.full(MinRoom, MaxSessionBytes) || gateBytes.full(MinRoom, maxGateBytes.Load()) {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	if s.logs == nil {
		s.logs = make(map[string]*Log)
	}
	if len(s.logs) >= MaxLogs {
		evicted := false
		for i, k := range s.order {
			l := s.logs[k]
			l.mu.Lock()
			finished := l.done || l.over
			if finished && !l.over {
				l.dropLocked()
			}
			l.mu.Unlock()
			if finished {
				delete(s.logs, k)
				s.order = append(s.order[:i:i], s.order[i+1:]...)
				evicted = true
				break
			}
		}
		if !evicted {
			return nil
		}
	}
	key := strconv.FormatUint(seq.Add(1), 10)
	l := newLog(key, s)
	s.logs[key] = l
	s.order = append(s.order, key)
	return l
}

// Of returns the log of stream key; nil for none.
func (s *Set) Of(key string) *Log {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logs[key]
}

// For returns the log the agent's Last-Event-ID is answered from and the index of the event it
// names: the log of a gate's own id (when it holds that id, or was dropped: the caller answers
// EF_STREAM_LOG_LIMIT), or the newest log that holds the upstream id when it answers a
// resumption after it (Log.Answers); nil for none.
func (s *Set) For(last string) (*Log, int) {
	if key, _, ok := ParseID(last); ok {
		if l := s.Of(key); l != nil {
			if n, ok := l.Index(last); ok || l.Dropped() {
				return l, n
			}
		}
		return nil, 0
	}
	s.mu.Lock()
	order := append([]string(nil), s.order...)
	s.mu.Unlock()
	for i := len(order) - 1; i >= 0; i-- {
		l := s.Of(order[i])
		if l == nil {
			continue
		}
		if n, ok := l.Index(last); ok {
			if l.Answers(n) {
				return l, n
			}
			return nil, 0
		}
	}
	return nil, 0
}
