package mcpproxy

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/mcpproxy/eventlog"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
)

// heapInUse is the test process's live heap after a collection.
func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// TestFinishedUpstreamLogsReleased: an agent reads a 512 KiB resource 48 times on each of two
// sessions in front of the Go SDK's server with an event store (every answer stream carries
// upstream ids). Each answer stream's log ends with only upstream ids, so no resumption of it is
// the gate's to answer (the upstream replays them): the gate keeps none of them. Before, each
// session kept the last 64 such logs whole (48 MiB here; ~4 GiB for one agent at the caps).
func TestFinishedUpstreamLogsReleased(t *testing.T) {
	f := newFixture(t, fixtureOpts{upstream: mcptest.Options{EventStore: true}})
	big := strings.Repeat("x", 512<<10)
	f.up.MCP().AddResource(&mcp.Resource{URI: "mcptest://big", Name: "big", MIMEType: "text/plain"},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "mcptest://big", Text: big}}}, nil
		})
	sessions := []*rawSession{newRawSession1125(t, f.endpoint()), newRawSession1125(t, f.endpoint())}
	before := heapInUse()
	for _, s := range sessions {
		for i := range 48 {
			status, ct, body := agentExchange(t, s, http.MethodPost,
				fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"resources/read","params":{"uri":"mcptest://big"}}`, i+1), nil)
			if status != http.StatusOK || ct != "text/event-stream" || !strings.Contains(body, big) || !eventID.MatchString(body) {
				t.Fatalf("resources/read %d: HTTP %d %s, %d bytes (want a resumable event stream with the resource)", i, status, ct, len(body))
			}
		}
	}
	grown := heapInUse() - before
	t.Logf("heap after 96 reads of 512 KiB: %+d KiB", grown>>10)
	// The upstream's event store (in this process) keeps up to 10 MiB; the gate's logs of the
	// 96 streams would hold 48 MiB.
	if grown > 20<<20 {
		t.Fatalf("the test process holds %d MiB more after 96 finished answer streams carrying only upstream ids, want < 20 MiB", grown>>20)
	}
	// Each such stream is still resumed by the upstream: the gate relays the agent's
	// Last-Event-ID of it (answered by the upstream's replay, not refused by the gate).
	status, _, body := agentExchange(t, sessions[0], http.MethodPost, `{"jsonrpc":"2.0","id":99,"method":"resources/read","params":{"uri":"mcptest://big"}}`, nil)
	ids := eventID.FindAllStringSubmatch(body, -1)
	if status != http.StatusOK || len(ids) == 0 {
		t.Fatalf("resources/read: HTTP %d, ids %v", status, ids)
	}
	if status, _, _ := agentExchange(t, sessions[0], http.MethodGet, "", map[string]string{"Last-Event-ID": ids[0][1], "Accept": "text/event-stream"}); status != http.StatusOK {
		t.Fatalf("resumption after the upstream id %s: HTTP %d, want the upstream's replay", ids[0][1], status)
	}
}

// TestEventLogBudgets: the bytes the event logs hold are bounded per log, per session and in
// the whole gate. A log that would pass a bound is dropped, and the agent's resumption after
// one of the gate's own ids in it is answered 404 with EF_STREAM_LOG_LIMIT; with a session's
// or the gate's budget spent, a new answer stream is not resumable; a finished log, a dropped
// one and a closed session give their bytes back.
func TestEventLogBudgets(t *testing.T) {
	defer eventlog.SetGateLimit(eventlog.SetGateLimit(64 << 20))
	f := newFixture(t, fixtureOpts{upstream: mcptest.Options{EventStore: true}})
	s1, s2 := newRawSession1125(t, f.endpoint()), newRawSession1125(t, f.endpoint())
	b1, b2 := f.proxy.bridgeByID(s1.session), f.proxy.bridgeByID(s2.session)
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
		first := gateEventPrefix + "g" + l.Key() + "-0"
		status, _, body := agentExchange(t, s, http.MethodGet, "", map[string]string{"Last-Event-ID": first, "Accept": "text/event-stream"})
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
		if status, _, _ := agentExchange(t, s, http.MethodDelete, "", nil); status >= 300 {
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
