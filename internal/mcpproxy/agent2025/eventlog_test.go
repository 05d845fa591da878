package agent2025

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/mcpproxy/eventlog"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
)

// TestEventLogBudgets: the bytes the event logs hold are bounded per log, per session and in
// the whole gate. A log that would pass a bound is dropped, and the agent's resumption after
// one of the gate's own ids in it is answered 404 with EF_STREAM_LOG_LIMIT; with a session's
// or the gate's budget spent, a new answer stream is not resumable; a finished log, a dropped
// one and a closed session give their bytes back.
func TestEventLogBudgets(t *testing.T) {
	defer eventlog.SetGateLimit(eventlog.SetGateLimit(64 << 20))
	f := newFixture(t, mcptest.Options{EventStore: true})
	s1, s2 := newRawSession(t, f.endpoint, "2025-11-25"), newRawSession(t, f.endpoint, "2025-11-25")
	b1, b2 := f.h.bridgeByID(s1.session), f.h.bridgeByID(s2.session)
	if b1 == nil || b2 == nil {
		t.Fatal("no bridge for the sessions")
	}
	base := eventlog.GateUsed()
	base1, base2 := b1.streams.Logs.Used(), b2.streams.Logs.Used() // the logs of initialize's answers
	ev := []byte(strings.Repeat("e", 64<<10))
	fill := func(b *bridge, n int) *eventlog.Log {
		l := b.streams.Logs.New()
		if l == nil {
			t.Fatal("no log")
		}
		buf, id := l.AppendID(nil, "") // an event of the gate's own first
		l.Add(buf, id)
		for range n {
			buf, id := l.AppendID(nil, "up")
			l.Add(append(buf, ev...), id)
		}
		l.Finish() // kept: it has an event of the gate's own
		return l
	}
	resume := func(s *rawSession, l *eventlog.Log) (int, string) {
		first := eventlog.Prefix + "g" + l.Key() + "-0"
		status, _, body := s.exchange(http.MethodGet, "", map[string]string{"Last-Event-ID": first, "Accept": "text/event-stream"})
		return status, body
	}

	// Per log: beyond eventlog.MaxLogLen the log is dropped and its bytes given back.
	l := fill(b1, 17)
	if !l.Dropped() || b1.streams.Logs.Used() != base1 {
		t.Fatalf("a log of 17 x 64 KiB: dropped %v, session holds %d bytes", l.Dropped(), b1.streams.Logs.Used())
	}
	if status, body := resume(s1, l); status != http.StatusNotFound || !strings.Contains(body, string(ef.EFStreamLogLimit)) {
		t.Fatalf("resumption of a dropped log: HTTP %d %q, want 404 %s", status, body, ef.EFStreamLogLimit)
	}

	// Per session: 4 logs of 15 x 64 KiB fit in eventlog.MaxSessionBytes (4 MiB); the fifth passes
	// it and is dropped.
	var ls []*eventlog.Log
	for range 5 {
		ls = append(ls, fill(b1, 15))
	}
	for i, l := range ls {
		if l.Dropped() != (i == 4) {
			t.Fatalf("log %d of the session: dropped %v", i, l.Dropped())
		}
	}
	if used := b1.streams.Logs.Used(); used > eventlog.MaxSessionBytes {
		t.Fatalf("the session holds %d bytes of logs, above its %d", used, eventlog.MaxSessionBytes)
	}
	status, body := resume(s1, ls[0])
	if status != http.StatusOK || !strings.Contains(body, "id: up") {
		t.Fatalf("resumption of a kept log: HTTP %d %.200q", status, body)
	}
	if status, body := resume(s1, ls[4]); status != http.StatusNotFound || !strings.Contains(body, string(ef.EFStreamLogLimit)) {
		t.Fatalf("resumption of a log dropped at the session's bound: HTTP %d %q", status, body)
	}

	// The gate: with the gate's budget below what two sessions would hold, the second
	// session's log is dropped at the gate's bound though its own budget has room.
	gateLimit := eventlog.GateUsed() + 512<<10
	eventlog.SetGateLimit(gateLimit)
	l2 := fill(b2, 15)
	if !l2.Dropped() || b2.streams.Logs.Used() != base2 {
		t.Fatalf("a log past the gate's budget: dropped %v, session holds %d bytes", l2.Dropped(), b2.streams.Logs.Used())
	}
	if status, body := resume(s2, l2); status != http.StatusNotFound || !strings.Contains(body, string(ef.EFStreamLogLimit)) {
		t.Fatalf("resumption of a log dropped at the gate's bound: HTTP %d %q", status, body)
	}
	if got := eventlog.GateUsed(); got > gateLimit {
		t.Fatalf("the gate holds %d bytes of logs, above its %d", got, gateLimit)
	}
	// With less than eventlog.MinRoom left in the gate's budget, a new answer stream gets no log.
	eventlog.SetGateLimit(eventlog.GateUsed() + eventlog.MinRoom/2)
	if b2.streams.Logs.New() != nil {
		t.Fatal("a new log with the gate's budget spent")
	}

	// A finished log without an event of the gate's own is released at once.
	eventlog.SetGateLimit(64 << 20)
	l3 := b2.streams.Logs.New()
	buf, id := l3.AppendID(nil, "up-1")
	l3.Add(append(buf, ev...), id)
	if b2.streams.Logs.Used() == base2 {
		t.Fatal("an unfinished log holds no bytes")
	}
	l3.Finish()
	if b2.streams.Logs.Used() != base2 || b2.streams.Logs.Of(l3.Key()) != nil {
		t.Fatalf("a finished log of upstream ids only: session holds %d bytes, log kept %v", b2.streams.Logs.Used(), b2.streams.Logs.Of(l3.Key()) != nil)
	}

	// Closing the sessions gives every byte back.
	for _, s := range []*rawSession{s1, s2} {
		if status, _, _ := s.exchange(http.MethodDelete, "", nil); status >= 300 {
			t.Fatalf("DELETE: HTTP %d", status)
		}
	}
	base -= base1 + base2
	deadline := time.Now().Add(5 * time.Second)
	for eventlog.GateUsed() != base {
		if time.Now().After(deadline) {
			t.Fatalf("the gate holds %d bytes of logs after the sessions closed, want %d", eventlog.GateUsed(), base)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
