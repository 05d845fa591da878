package mcpproxy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/internal/mcpproxy/stateless"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

// listenUpstream is a stateful 2025 upstream (the Go SDK's server with sessions) with tools,
// prompts and subscribable resources: its list changes go to every session's GET stream, its
// resource updates to the sessions subscribed to the resource.
type listenUpstream struct {
	srv          *mcp.Server
	http         *httptest.Server
	mu           sync.Mutex
	subscribed   []string
	unsubscribed []string
}

func newListenUpstream(t *testing.T) *listenUpstream {
	u := &listenUpstream{}
	u.srv = mcp.NewServer(&mcp.Implementation{Name: "legacy", Version: "v1"}, &mcp.ServerOptions{
		SubscribeHandler: func(_ context.Context, req *mcp.SubscribeRequest) error {
			u.mu.Lock()
			u.subscribed = append(u.subscribed, req.Params.URI)
			u.mu.Unlock()
			return nil
		},
		UnsubscribeHandler: func(_ context.Context, req *mcp.UnsubscribeRequest) error {
			u.mu.Lock()
			u.unsubscribed = append(u.unsubscribed, req.Params.URI)
			u.mu.Unlock()
			return nil
		},
	})
	u.srv.AddTool(&mcp.Tool{Name: "noop", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
		})
	u.srv.AddPrompt(&mcp.Prompt{Name: "p0"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{}, nil
	})
	for _, uri := range []string{"res://a", "res://b"} {
		u.srv.AddResource(&mcp.Resource{URI: uri, Name: uri}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, Text: "x"}}}, nil
		})
	}
	u.http = httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return u.srv }, nil))
	t.Cleanup(u.http.Close)
	return u
}

func (u *listenUpstream) calls() (sub, unsub []string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.subscribed), slices.Clone(u.unsubscribed)
}

// newListenGate puts the gate in front of u and returns its endpoint.
func newListenGate(t *testing.T, u *listenUpstream) string {
	_, gate := newGate(t, u.http.URL)
	_, _, endpoint := serveProxy(t, Config{Server: "bank", URL: u.http.URL, Gate: gate, Agent: agentName, CallTimeout: 10 * time.Second})
	return endpoint
}

// listenStream is one open subscriptions/listen: its messages as they arrive.
type listenStream struct {
	status int
	ctype  string
	msgs   chan map[string]any
	cancel context.CancelFunc
}

// openListen POSTs a 2026-07-28 subscriptions/listen with id and the notification filter
// notifications (JSON) and reads its answer in the background.
func openListen(t *testing.T, endpoint string, id any, notifications string) *listenStream {
	t.Helper()
	idRaw, _ := json.Marshal(id)
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"subscriptions/listen","params":{"notifications":%s,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`, idRaw, notifications)
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	ls := &listenStream{status: resp.StatusCode, ctype: resp.Header.Get("Content-Type"), msgs: make(chan map[string]any, 64), cancel: cancel}
	t.Cleanup(cancel)
	go func() {
		defer resp.Body.Close()
		defer close(ls.msgs)
		if strings.HasPrefix(ls.ctype, "application/json") {
			var m map[string]any
			if json.NewDecoder(resp.Body).Decode(&m) == nil {
				ls.msgs <- m
			}
			return
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var m map[string]any
			if json.Unmarshal([]byte(data), &m) == nil {
				ls.msgs <- m
			}
		}
	}()
	return ls
}

// next returns the stream's next message (nil when it ended), failing after d.
func (ls *listenStream) next(t *testing.T, d time.Duration) map[string]any {
	t.Helper()
	select {
	case m := <-ls.msgs:
		return m
	case <-time.After(d):
		t.Fatalf("no message on the listen stream within %s", d)
		return nil
	}
}

func subscriptionOf(m map[string]any) any {
	p, _ := m["params"].(map[string]any)
	if p == nil {
		p, _ = m["result"].(map[string]any)
	}
	meta, _ := p["_meta"].(map[string]any)
	return meta[wire.MetaSubscriptionID]
}

// TestListenStatefulUpstream: a 2026-07-28 agent's subscriptions/listen in front of a 2025
// upstream. The acknowledgement comes first, tagged, with the filter the upstream can honour;
// the upstream session is subscribed to the listen's resource; a tool list change and that
// resource's update reach the listen, tagged with its id, while a prompt and a resource list
// change (which the filter leaves out, and which a second listen asking for them receives) do
// not; closing
// the listen unsubscribes the resource; and when the upstream session ends, the open listen gets
// its result (the revision's graceful end).
func TestListenStatefulUpstream(t *testing.T) {
	u := newListenUpstream(t)
	endpoint := newListenGate(t, u)
	a := openListen(t, endpoint, 41, `{"toolsListChanged":true,"resourceSubscriptions":["res://a"]}`)
	if a.status != http.StatusOK || !strings.HasPrefix(a.ctype, "text/event-stream") {
		t.Fatalf("listen answered HTTP %d %s", a.status, a.ctype)
	}
	ack := a.next(t, 5*time.Second)
	if ack["method"] != wire.NotifyListenAck || subscriptionOf(ack) != float64(41) {
		t.Fatalf("first message %v, want the acknowledgement tagged 41", ack)
	}
	if got, _ := json.Marshal(ack["params"].(map[string]any)["notifications"]); string(got) != `{"resourceSubscriptions":["res://a"],"toolsListChanged":true}` {
		t.Fatalf("acknowledged %s", got)
	}
	if sub, _ := u.calls(); !slices.Equal(sub, []string{"res://a"}) {
		t.Fatalf("upstream subscriptions %v, want [res://a]", sub)
	}
	b := openListen(t, endpoint, "b", `{"promptsListChanged":true,"resourcesListChanged":true}`)
	if ack := b.next(t, 5*time.Second); ack["method"] != wire.NotifyListenAck || subscriptionOf(ack) != "b" {
		t.Fatalf("second listen's first message %v", ack)
	}

	u.srv.AddPrompt(&mcp.Prompt{Name: "p1"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{}, nil
	})
	u.srv.AddResource(&mcp.Resource{URI: "res://c", Name: "c"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{}, nil
	})
	got := map[any]bool{}
	for range 2 {
		m := b.next(t, 5*time.Second)
		if subscriptionOf(m) != "b" {
			t.Fatalf("second listen got %v, untagged", m)
		}
		got[m["method"]] = true
	}
	if !got[wire.NotifyPromptsChanged] || !got[wire.NotifyResourcesChanged] {
		t.Fatalf("second listen got %v, want the prompt and resource list changes", got)
	}
	u.srv.AddTool(&mcp.Tool{Name: "added", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	if m := a.next(t, 5*time.Second); m["method"] != wire.NotifyToolsChanged || subscriptionOf(m) != float64(41) {
		t.Fatalf("after a tool list change (and prompt and resource list changes before it) the listen got %v, want tools/list_changed tagged 41", m)
	}
	if err := u.srv.ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: "res://a"}); err != nil {
		t.Fatal(err)
	}
	m := a.next(t, 5*time.Second)
	if p, _ := m["params"].(map[string]any); m["method"] != wire.NotifyResourceUpdated || p["uri"] != "res://a" || subscriptionOf(m) != float64(41) {
		t.Fatalf("after res://a was updated the listen got %v", m)
	}

	a.cancel()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, unsub := u.calls(); slices.Equal(unsub, []string{"res://a"}) {
			break
		}
		if time.Now().After(deadline) {
			_, unsub := u.calls()
			t.Fatalf("after the listen closed the upstream unsubscribed %v, want [res://a]", unsub)
		}
		time.Sleep(20 * time.Millisecond)
	}

	for ss := range u.srv.Sessions() {
		_ = ss.Close()
	}
	end := b.next(t, 10*time.Second)
	if end["id"] != "b" || subscriptionOf(end) != "b" {
		t.Fatalf("after the upstream session ended the listen got %v, want its result", end)
	}
	if res, _ := end["result"].(map[string]any); res["resultType"] != wire.ResultTypeComplete {
		t.Fatalf("listen result %v", end)
	}
	if m, ok := <-b.msgs; ok {
		t.Fatalf("the listen stream went on after its result: %v", m)
	}
}

// TestListenNothingHonoured: a filter the upstream can honour none of (no resources.subscribe,
// no such list) is acknowledged empty and ended at once with the listen's result; the upstream
// is never asked to subscribe.
func TestListenNothingHonoured(t *testing.T) {
	u := newListenUpstream(t)
	endpoint := newListenGate(t, u)
	l := openListen(t, endpoint, 5, `{"toolsListChanged":false}`)
	ack := l.next(t, 5*time.Second)
	if got, _ := json.Marshal(ack["params"].(map[string]any)["notifications"]); ack["method"] != wire.NotifyListenAck || string(got) != `{}` {
		t.Fatalf("first message %v", ack)
	}
	if end := l.next(t, 5*time.Second); end["id"] != float64(5) || subscriptionOf(end) != float64(5) {
		t.Fatalf("second message %v, want the listen's result", end)
	}
	if sub, _ := u.calls(); len(sub) != 0 {
		t.Fatalf("upstream subscribed %v", sub)
	}
}

// TestListenBound: an agent holds at most stateless.MaxListensPerAgent listens open; the next is refused
// with EF_LISTEN_LIMIT, and one more fits once a listen closes. A malformed filter is refused
// with EF_LISTEN_INVALID and opens nothing.
func TestListenBound(t *testing.T) {
	u := newListenUpstream(t)
	endpoint := newListenGate(t, u)
	var open []*listenStream
	for i := range stateless.MaxListensPerAgent {
		l := openListen(t, endpoint, 100+i, `{"toolsListChanged":true}`)
		if m := l.next(t, 5*time.Second); m["method"] != wire.NotifyListenAck {
			t.Fatalf("listen %d: %v", i, m)
		}
		open = append(open, l)
	}
	refused := func(id int, filter string) (int64, string) {
		l := openListen(t, endpoint, id, filter)
		m := l.next(t, 5*time.Second)
		e, _ := m["error"].(map[string]any)
		data, _ := e["data"].(map[string]any)
		code, _ := e["code"].(float64)
		s, _ := data[MetaEFCode].(string)
		if m["id"] != float64(id) {
			t.Fatalf("refusal %v not under the listen's id", m)
		}
		return int64(code), s
	}
	if code, efc := refused(200, `{"toolsListChanged":true}`); code != wire.CodeInternalError || efc != string(ef.EFListenLimit) {
		t.Fatalf("listen beyond the bound: %d %q, want -32603 EF_LISTEN_LIMIT", code, efc)
	}
	open[0].cancel()
	deadline := time.Now().Add(5 * time.Second)
	for {
		l := openListen(t, endpoint, 300, `{"toolsListChanged":true}`)
		if m := l.next(t, 5*time.Second); m["method"] == wire.NotifyListenAck {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no listen fits after one closed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, efc := refused(201, `{"toolsListChanged":"yes"}`); code != wire.CodeInvalidParams || efc != string(ef.EFListenInvalid) {
		t.Fatalf("malformed filter: %d %q, want -32602 EF_LISTEN_INVALID", code, efc)
	}
}

// TestListenSDKClient: the Go SDK's 2026-07-28 client through the gate in front of a 2025
// upstream: its listen for tool list changes (opened as it connects) and its resource
// subscription (a listen naming the resource) receive the upstream's tool list change and the
// resource's update, each tagged with the client's own listen id (its ids are numbers; the
// gate's upstream ids are strings); its unsubscription ends the upstream's.
func TestListenSDKClient(t *testing.T) {
	u := newListenUpstream(t)
	endpoint := newListenGate(t, u)
	tools := make(chan mcp.Meta, 16)
	updates := make(chan *mcp.ResourceUpdatedNotificationParams, 16)
	c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(_ context.Context, req *mcp.ToolListChangedRequest) {
			tools <- req.Params.Meta
		},
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			updates <- req.Params
		},
	})
	ctx := context.Background()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "res://a"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for sub, _ := u.calls(); !slices.Contains(sub, "res://a"); sub, _ = u.calls() {
		if time.Now().After(deadline) {
			t.Fatalf("the upstream session was not subscribed to res://a (subscriptions %v)", sub)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The client's listens open in the background (the SDK does not say when they are
	// acknowledged, and nothing before the acknowledgement is promised): change the resource
	// and the list until a change reaches each.
	deadline = time.Now().Add(10 * time.Second)
	var upd *mcp.ResourceUpdatedNotificationParams
	for upd == nil {
		if err := u.srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "res://a"}); err != nil {
			t.Fatal(err)
		}
		select {
		case upd = <-updates:
		case <-time.After(100 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatal("the client's subscription got no resources/updated")
			}
		}
	}
	if _, own := upd.Meta[wire.MetaSubscriptionID].(float64); upd.URI != "res://a" || !own {
		t.Fatalf("resource update %+v", upd)
	}
	var meta mcp.Meta
	for i := 0; meta == nil; i++ {
		u.srv.AddTool(&mcp.Tool{Name: fmt.Sprintf("added_%d", i), InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{}, nil
			})
		select {
		case meta = <-tools:
		case <-time.After(100 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatal("no tools/list_changed reached the client's listen")
			}
		}
	}
	if _, own := meta[wire.MetaSubscriptionID].(float64); !own {
		t.Fatalf("tools/list_changed not tagged with the client's listen id (a number): %v", meta)
	}
	if err := cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "res://a"}); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(5 * time.Second)
	for _, unsub := u.calls(); !slices.Contains(unsub, "res://a"); _, unsub = u.calls() {
		if time.Now().After(deadline) {
			t.Fatalf("after the client unsubscribed, the upstream was not (unsubscriptions %v)", unsub)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestListenRelayedBound: toward a 2026-07-28 upstream the gate relays subscriptions/listen (the
// upstream's acknowledgement, tagged by the upstream with the agent's id), and those listens
// count toward the agent's bound: the next is refused with EF_LISTEN_LIMIT, not relayed.
func TestListenRelayedBound(t *testing.T) {
	f := newFixture(t, fixtureOpts{upstream: mcptest.Options{Stateless: true}})
	for i := range stateless.MaxListensPerAgent {
		l := openListen(t, f.endpoint(), 100+i, `{"toolsListChanged":true}`)
		if m := l.next(t, 5*time.Second); m["method"] != wire.NotifyListenAck || subscriptionOf(m) != float64(100+i) {
			t.Fatalf("relayed listen %d: %v", i, m)
		}
	}
	l := openListen(t, f.endpoint(), 200, `{"toolsListChanged":true}`)
	m := l.next(t, 5*time.Second)
	e, _ := m["error"].(map[string]any)
	data, _ := e["data"].(map[string]any)
	if m["id"] != float64(200) || e["code"] != float64(wire.CodeInternalError) || data[MetaEFCode] != string(ef.EFListenLimit) {
		t.Fatalf("listen beyond the bound: %v, want -32603 EF_LISTEN_LIMIT", m)
	}
}
