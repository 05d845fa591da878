package mcpproxy

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

// pollingUpstream is an upstream that answers method on an event stream it closes after a
// priming event (MCP streamable HTTP polling) and gives the response on the GET that resumes it with
// Last-Event-ID, as the conformance suite's test_reconnection tool does.
type pollingUpstream struct {
	method  string
	mu      sync.Mutex
	posts   int      // POSTs of method
	resumes []string // the Last-Event-ID of each GET
	pending string   // the JSON-RPC id of the call waiting for its response
	retry   int      // the retry field of its priming event, in ms; 0: 80
	resumed []time.Time
	// failResume answers every resuming GET with HTTP 400.
	failResume bool
}

func (u *pollingUpstream) intercept(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") != "" {
		u.mu.Lock()
		u.resumes = append(u.resumes, r.Header.Get("Last-Event-ID"))
		u.resumed = append(u.resumed, time.Now())
		id, fail := u.pending, u.failResume
		u.mu.Unlock()
		if fail {
			http.Error(w, "no replay", http.StatusBadRequest)
			return true
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "id: up-2\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"resumed\"}}\n\n")
		fmt.Fprintf(w, "id: up-3\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"42\"}]}}\n\n", id)
		return true
	}
	_, method, id := rpcBody(r)
	if method != u.method {
		return false
	}
	u.mu.Lock()
	u.posts++
	u.pending = string(id)
	u.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	retry := u.retry
	if retry == 0 {
		retry = 80
	}
	fmt.Fprintf(w, "id: up-1\nretry: %d\ndata: \n\n", retry)
	return true // the stream ends here, before the response
}

// agentExchange sends one agent HTTP request on s's session and returns the answer's content
// type and body.
func agentExchange(t *testing.T, s *rawSession, method, body string, hdr map[string]string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest(method, s.endpoint, strings.NewReader(body))
	if body == "" {
		req.Body = http.NoBody
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", s.session)
	req.Header.Set("Mcp-Protocol-Version", s.version)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

var eventID = regexp.MustCompile(`(?m)^id: (\S+)$`)

// The upstream's streams of TestServerClosedStreamResumed and TestServerClosedStreamAgentNeverResumes
// carry event ids from initialize on (an event store), so that the session's tools/calls run
// detachable (serveToolsCall); TestServerClosedStreamFirstSeen is an upstream whose first ids
// come on a tools/call's stream.

// TestServerClosedStreamResumed: an upstream that closes a tools/call's answer stream after a
// priming event and gives the response on the resuming GET. The gate mirrors the close: the
// agent's answer is a resumable event stream holding the upstream's priming event (its id and
// retry field as written) and nothing else, as the upstream's was. The gate resumes the
// upstream's itself (one tools/call upstream, the call EXECUTED, not INDETERMINATE), and the
// agent's GET with the priming event's Last-Event-ID gets the rest with the upstream's ids,
// the response last. A resumption after the response is the upstream's to answer: relayed to
// it, its replayed response reaches the agent under the agent's id and settles nothing.
func TestServerClosedStreamResumed(t *testing.T) {
	up := &pollingUpstream{method: wire.MethodCallTool}
	f := newFixture(t, fixtureOpts{upstream: mcptest.Options{Intercept: up.intercept, EventStore: true}})
	s := newRawSession(t, f.endpoint())

	status, ct, body := agentExchange(t, s, http.MethodPost, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"ticket_create","arguments":{}}}`, nil)
	if status != http.StatusOK || ct != "text/event-stream" || body != "id: up-1\nretry: 80\ndata: \n\n" {
		t.Fatalf("the POST's answer: HTTP %d %s\n%s\nwant the upstream's priming event (id up-1, retry: 80), and the stream closed", status, ct, body)
	}
	want := "id: up-2\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"resumed\"}}\n\n" +
		"id: up-3\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"42\"}]}}\n\n"
	status, ct, body = agentExchange(t, s, http.MethodGet, "", map[string]string{"Last-Event-ID": "up-1"})
	if status != http.StatusOK || ct != "text/event-stream" || body != want {
		t.Fatalf("the resuming GET: HTTP %d %s\n%s\nwant\n%s", status, ct, body, want)
	}
	up.mu.Lock()
	posts, resumes := up.posts, append([]string(nil), up.resumes...)
	up.mu.Unlock()
	if posts != 1 || len(resumes) != 1 || resumes[0] != "up-1" {
		t.Errorf("upstream: %d tools/call POSTs, resumed with %q; want 1 and [up-1]", posts, resumes)
	}
	if got := statesIn(t, f); got[journal.StateExecuted] != 1 || got[journal.StateIndeterminate] != 0 {
		t.Errorf("journal: %v, want one EXECUTED", got)
	}
	// After the response: the upstream answers the resumption; its replayed response comes
	// under the agent's id, and nothing is settled or sent again.
	status, _, body = agentExchange(t, s, http.MethodGet, "", map[string]string{"Last-Event-ID": "up-3"})
	if status != http.StatusOK || !strings.Contains(body, "id: up-3\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\"") {
		t.Errorf("a resumption after the response: HTTP %d %q, want the upstream's replay under id 5", status, body)
	}
	up.mu.Lock()
	posts, resumes = up.posts, append([]string(nil), up.resumes...)
	up.mu.Unlock()
	if posts != 1 || len(resumes) != 2 || resumes[1] != "up-3" {
		t.Errorf("upstream: %d tools/call POSTs, resumed with %q; want 1 and [up-1 up-3]", posts, resumes)
	}
	if got := statesIn(t, f); got[journal.StateExecuted] != 1 || len(got) != 1 {
		t.Errorf("journal after the relayed replay: %v, want one EXECUTED and nothing else", got)
	}
	// An id of the gate's own of no stream of this session.
	if status, _, _ = agentExchange(t, s, http.MethodGet, "", map[string]string{"Last-Event-ID": "actgate:g999999-0"}); status != http.StatusNotFound {
		t.Errorf("a resumption of no stream: HTTP %d, want 404", status)
	}
	// Another session's resumption with this session's id reaches the upstream on its own
	// upstream session, and a response to this session's request is not relayed to it.
	other := newRawSession(t, f.endpoint())
	if _, _, body = agentExchange(t, other, http.MethodGet, "", map[string]string{"Last-Event-ID": "up-1"}); strings.Contains(body, "42") {
		t.Errorf("another session's resumption got this session's response: %q", body)
	}
}

// TestRelayedStreamResumed: the same for a request the gate relays (resources/read).
func TestRelayedStreamResumed(t *testing.T) {
	up := &pollingUpstream{method: "resources/read"}
	f := newFixture(t, fixtureOpts{upstream: mcptest.Options{Intercept: up.intercept}})
	s := newRawSession(t, f.endpoint())
	start := time.Now()
	_, ct, body := agentExchange(t, s, http.MethodPost, `{"jsonrpc":"2.0","id":"r1","method":"resources/read","params":{"uri":"x:y"}}`, nil)
	ids := eventID.FindAllStringSubmatch(body, -1)
	if ct != "text/event-stream" || len(ids) != 1 || strings.Contains(body, `"result"`) {
		t.Fatalf("the POST's answer: %s\n%s", ct, body)
	}
	time.Sleep(300 * time.Millisecond) // an agent slower than the retry: the gate resumes first
	// The gate has read the response by now: the agent's resumption is the upstream's to answer.
	_, _, body = agentExchange(t, s, http.MethodGet, "", map[string]string{"Last-Event-ID": ids[0][1]})
	if !strings.Contains(body, `"id":"r1","result":{"content":[{"type":"text","text":"42"}]}`) {
		t.Fatalf("the resuming GET:\n%s", body)
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	if len(up.resumed) != 2 || up.resumes[1] != "up-1" {
		t.Fatalf("the upstream's stream was resumed with %q, want twice (the gate's, then the agent's relayed with up-1)", up.resumes)
	}
	if d := up.resumed[0].Sub(start); d < 80*time.Millisecond || d > 250*time.Millisecond {
		t.Errorf("the gate resumed after %s, want the upstream's retry of 80ms (the agent came after 300ms)", d)
	}
}

// TestCancelledStreamNotResumed: an upstream that ends a relayed request's stream without a
// response after the agent cancelled it (as MCP servers do: a cancelled request gets no
// response) is not resumed: no GET with Last-Event-ID reaches the upstream.
func TestCancelledStreamNotResumed(t *testing.T) {
	var mu sync.Mutex
	gets := 0
	cancelled := make(chan struct{})
	reached := make(chan struct{}, 1)
	intercept := func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") != "" {
			mu.Lock()
			gets++
			mu.Unlock()
			w.WriteHeader(http.StatusBadRequest)
			return true
		}
		_, method, _ := rpcBody(r)
		switch method {
		case "foo/slow":
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "id: up-1\ndata: \n\n")
			w.(http.Flusher).Flush()
			reached <- struct{}{}
			select {
			case <-cancelled:
			case <-time.After(5 * time.Second):
			}
			return true // ends the stream without a response
		case wire.NotifyCancelled:
			close(cancelled)
			w.WriteHeader(http.StatusAccepted)
			return true
		}
		return false
	}
	f := newFixture(t, fixtureOpts{upstream: mcptest.Options{Intercept: intercept}})
	s := newRawSession(t, f.endpoint())
	done := make(chan string, 1)
	go func() {
		_, _, body := agentExchange(t, s, http.MethodPost, `{"jsonrpc":"2.0","id":"c1","method":"foo/slow","params":{}}`, nil)
		done <- body
	}()
	select {
	case <-reached:
	case <-time.After(5 * time.Second):
		t.Fatal("the request never reached the upstream")
	}
	s.post(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c1","reason":"stop"}}`)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the agent's answer did not end")
	}
	time.Sleep(time.Second + 200*time.Millisecond) // agent2025's default resume delay: a resumption would have come by now
	mu.Lock()
	defer mu.Unlock()
	if gets != 0 {
		t.Errorf("the upstream got %d resuming GETs of a cancelled request, want 0", gets)
	}
}

// TestServerClosedStreamAgentNeverResumes: the agent's stream of a tools/call is closed with
// the upstream's and the agent never resumes it. The gate goes on reading the upstream's
// resumed stream and records the outcome (EXECUTED, once); the same call again is answered
// from the journal, not sent a second time.
func TestServerClosedStreamAgentNeverResumes(t *testing.T) {
	up := &pollingUpstream{method: wire.MethodCallTool}
	f := newFixture(t, fixtureOpts{upstream: mcptest.Options{Intercept: up.intercept, EventStore: true}})
	s := newRawSession(t, f.endpoint())
	call := `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"ticket_create","arguments":{"title":"once"}}}`
	_, ct, body := agentExchange(t, s, http.MethodPost, fmt.Sprintf(call, 1), nil)
	if ct != "text/event-stream" || strings.Contains(body, `"result"`) || len(eventID.FindAllString(body, -1)) != 1 {
		t.Fatalf("the POST's answer: %s\n%s\nwant the priming event only", ct, body)
	}
	deadline := time.Now().Add(5 * time.Second)
	for statesIn(t, f)[journal.StateExecuted] != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("journal: %v, want one EXECUTED", statesIn(t, f))
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, _, body = agentExchange(t, s, http.MethodPost, fmt.Sprintf(call, 2), nil)
	if !strings.Contains(body, `"id":2,"result":{"content":[{"type":"text","text":"42"}]}`) {
		t.Errorf("the same call again: %s, want the recorded result", body)
	}
	up.mu.Lock()
	posts, resumes := up.posts, len(up.resumes)
	up.mu.Unlock()
	if posts != 1 || resumes != 1 {
		t.Errorf("upstream: %d tools/call POSTs and %d resumptions, want 1 and 1", posts, resumes)
	}
	if got := statesIn(t, f); got[journal.StateExecuted] != 1 || len(got) != 1 {
		t.Errorf("journal: %v, want one EXECUTED and nothing else", got)
	}
}

// TestServerClosedStreamFirstSeen: an upstream whose initialize answer carries no event ids
// closes a tools/call's stream after a priming event. The session's first call runs detachable
// (its upstream has not answered a call yet), so the close is mirrored on that first call, and
// the agent's resumption gets the rest, the response last; the session's next calls run
// detachable because the first showed ids, and the next close is mirrored too. Each call is
// EXECUTED once.
func TestServerClosedStreamFirstSeen(t *testing.T) {
	up := &pollingUpstream{method: wire.MethodCallTool}
	f := newFixture(t, fixtureOpts{upstream: mcptest.Options{Intercept: up.intercept}})
	s := newRawSession(t, f.endpoint())
	for n := 1; n <= 2; n++ {
		_, _, body := agentExchange(t, s, http.MethodPost, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"ticket_create","arguments":{"n":%d}}}`, n, n), nil)
		if body != "id: up-1\nretry: 80\ndata: \n\n" {
			t.Fatalf("call %d's answer:\n%s\nwant the priming event only (the close mirrored)", n, body)
		}
		_, _, body = agentExchange(t, s, http.MethodGet, "", map[string]string{"Last-Event-ID": "up-1"})
		if !strings.Contains(body, fmt.Sprintf(`"id":%d,"result":{"content":[{"type":"text","text":"42"}]}`, n)) {
			t.Fatalf("call %d's resuming GET:\n%s", n, body)
		}
	}
	up.mu.Lock()
	posts := up.posts
	up.mu.Unlock()
	if got := statesIn(t, f); posts != 2 || got[journal.StateExecuted] != 2 || len(got) != 1 {
		t.Errorf("upstream: %d tools/call POSTs, journal %v; want 2 and two EXECUTED", posts, got)
	}
}

// TestHotPathAfterAnswerWithoutIDs: once the upstream has answered a call of the session
// without event ids, the session's calls run on the handler's goroutine: an upstream that then
// closes a call's stream gets the agent's stream kept open, the rest (the response last) on
// it, and the call is EXECUTED once.
func TestHotPathAfterAnswerWithoutIDs(t *testing.T) {
	up := &pollingUpstream{method: wire.MethodCallTool}
	var mu sync.Mutex
	polling := false
	intercept := func(w http.ResponseWriter, r *http.Request) bool {
		mu.Lock()
		on := polling
		mu.Unlock()
		return on && up.intercept(w, r)
	}
	f := newFixture(t, fixtureOpts{upstream: mcptest.Options{Intercept: intercept}})
	s := newRawSession(t, f.endpoint())
	if _, _, body := agentExchange(t, s, http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ticket_create","arguments":{"n":1}}}`, nil); !strings.Contains(body, `"id":1,"result"`) {
		t.Fatalf("the first call's answer:\n%s", body)
	}
	mu.Lock()
	polling = true
	mu.Unlock()
	_, _, body := agentExchange(t, s, http.MethodPost, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ticket_create","arguments":{"n":2}}}`, nil)
	if !strings.HasPrefix(body, "id: up-1\nretry: 80\ndata: \n\n") || !strings.Contains(body, `"id":2,"result":{"content":[{"type":"text","text":"42"}]}`) {
		t.Fatalf("the second call's answer:\n%s\nwant the stream kept open up to the response", body)
	}
	if got := statesIn(t, f); got[journal.StateExecuted] != 2 || len(got) != 1 {
		t.Errorf("journal %v; want two EXECUTED", got)
	}
}

// TestServerClosedStreamResumedWithAgent: the upstream's retry field asks for 10 s before a
// resumption; the agent, given the same field, resumes the gate's stream at once, and the gate
// resumes the upstream's then, not 10 s later (the conformance reference server asks for 5 s,
// and its suite's client waits 5 s for the response on its resuming GET).
func TestServerClosedStreamResumedWithAgent(t *testing.T) {
	up := &pollingUpstream{method: wire.MethodCallTool, retry: 10000}
	f := newFixture(t, fixtureOpts{upstream: mcptest.Options{Intercept: up.intercept, EventStore: true}})
	s := newRawSession(t, f.endpoint())
	_, _, body := agentExchange(t, s, http.MethodPost, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"ticket_create","arguments":{}}}`, nil)
	ids := eventID.FindAllStringSubmatch(body, -1)
	if len(ids) != 1 || !strings.Contains(body, "retry: 10000\n") {
		t.Fatalf("the POST's answer:\n%s\nwant the priming event with retry: 10000", body)
	}
	start := time.Now()
	_, _, body = agentExchange(t, s, http.MethodGet, "", map[string]string{"Last-Event-ID": ids[0][1]})
	if !strings.Contains(body, `"id":3,"result":{"content":[{"type":"text","text":"42"}]}`) {
		t.Fatalf("the resuming GET:\n%s", body)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the response came %s after the agent resumed: the gate waited out the upstream's retry", d)
	}
	if got := statesIn(t, f); got[journal.StateExecuted] != 1 || len(got) != 1 {
		t.Errorf("journal: %v, want one EXECUTED", got)
	}
}
