package mcpproxy

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

// hdr2026Of are a 2026-07-28 message's standard headers, with the agent's token when set.
func hdr2026Of(method, name, tok string) map[string]string {
	h := map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": method}
	if name != "" {
		h["Mcp-Name"] = name
	}
	if tok != "" {
		h["Authorization"] = "Bearer " + tok
	}
	return h
}

// notificationsOf are the notifications of method the upstream received.
func (wr *wireTap) notificationsOf(method string) []wireMsg {
	var out []wireMsg
	for _, m := range wr.all() {
		if m.Method == method && len(m.ID) == 0 {
			out = append(out, m)
		}
	}
	return out
}

// TestNotificationsRefused: a message without an id whose method is not a client notification
// of the request's revision — a request's method (tools/call of a 999,999 payment, tasks/cancel,
// resources/read), a method nobody defined, or on 2026-07-28 a notification the revision
// removed — is refused with HTTP 400, -32600 and EF_NOTIFICATION_INVALID, and the upstream never
// receives it; no act is journaled. On a 2025 session, as on 2026-07-28 toward each kind of
// upstream.
func TestNotificationsRefused(t *testing.T) {
	cases := []struct {
		method, members, name string
		stateful              bool // refused on a 2025 session too (else it is a 2025 client notification)
	}{
		{"tools/call", `"name":"send_payment","arguments":{"amount":999999,"to":"mallory"}`, "send_payment", true},
		{"tasks/cancel", `"taskId":"t-1"`, "t-1", true},
		{"resources/read", `"uri":"mcptest://readme"`, "mcptest://readme", true},
		{"acme/launch", `"target":"all"`, "", true},
		{"notifications/initialized", ``, "", false},
		{"notifications/progress", `"progressToken":1,"progress":1`, "", false},
		{"notifications/roots/list_changed", ``, "", false},
	}
	params := func(members, meta string) string {
		if members != "" && meta != "" {
			return "{" + members + "," + meta + "}"
		}
		return "{" + members + meta + "}"
	}
	check := func(t *testing.T, wr *wireTap, before int, f *fixture, method string, status int, body string) {
		t.Helper()
		var m struct {
			ID    any `json:"id"`
			Error struct {
				Code int64
				Data map[string]any
			}
		}
		_ = json.Unmarshal([]byte(body), &m)
		if status != http.StatusBadRequest || m.Error.Code != wire.CodeInvalidRequest || m.Error.Data[MetaEFCode] != "EF_NOTIFICATION_INVALID" || m.ID != nil {
			t.Errorf("%s without an id: HTTP %d %s, want 400, -32600, EF_NOTIFICATION_INVALID", method, status, body)
		}
		if got := wr.posts(before); len(got) != 0 {
			t.Errorf("%s without an id: the upstream received %v", method, got)
		}
		if n := f.up.Count(""); n != 0 {
			t.Errorf("the upstream ran %d tools", n)
		}
		if st := statesIn(t, f); len(st) != 0 {
			t.Errorf("journal states %v, want none", st)
		}
	}
	t.Run("2025 session", func(t *testing.T) {
		var wr wireTap
		f := newFixture(t, fixtureOpts{upstream: mcptest.Options{Samples: true, Intercept: wr.intercept}})
		rs := newRawSession(t, f.endpoint())
		for _, tc := range cases {
			if !tc.stateful {
				continue
			}
			body := `{"jsonrpc":"2.0","method":"` + tc.method + `","params":` + params(tc.members, "") + `}`
			before := wr.len()
			status, out := rawRequest(t, http.MethodPost, f.endpoint(), "", body, map[string]string{"Mcp-Session-Id": rs.session, "Mcp-Protocol-Version": rs.version})
			if tc.method == "tools/call" {
				// The session's own handler (the SDK's) refuses it, as the direct paths leave
				// tools/call to it (TestDirectAgentPathMatchesSDK "as a notification").
				if status != http.StatusBadRequest || len(wr.posts(before)) != 0 || f.up.Count("") != 0 {
					t.Errorf("tools/call without an id: HTTP %d %s; the upstream received %v", status, out, wr.posts(before))
				}
				continue
			}
			check(t, &wr, before, f, tc.method, status, out)
		}
		// The revision's own client notifications are relayed.
		body := `{"jsonrpc":"2.0","method":"notifications/roots/list_changed","params":{}}`
		if status, out := rawRequest(t, http.MethodPost, f.endpoint(), "", body, map[string]string{"Mcp-Session-Id": rs.session, "Mcp-Protocol-Version": rs.version}); status != http.StatusAccepted {
			t.Errorf("notifications/roots/list_changed: HTTP %d %s, want 202", status, out)
		}
	})
	for _, up := range []struct {
		name string
		opts mcptest.Options
	}{
		{"2026 stateless upstream", mcptest.Options{Stateless: true, JSONResponse: true, Samples: true}},
		{"2026 stateful upstream", mcptest.Options{Samples: true}},
	} {
		t.Run(up.name, func(t *testing.T) {
			var wr wireTap
			up.opts.Intercept = wr.intercept
			f := newFixture(t, fixtureOpts{upstream: up.opts})
			// The agent has an upstream session (stateful) and the gate knows the upstream's mode.
			if status, out := post2026(t, f.endpoint(), `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{`+meta2026+`}}`, hdr2026Of("tools/list", "", "")); status != http.StatusOK {
				t.Fatalf("tools/list: HTTP %d %v", status, out)
			}
			for _, tc := range cases {
				t.Run(tc.method, func(t *testing.T) {
					body := `{"jsonrpc":"2.0","method":"` + tc.method + `","params":` + params(tc.members, meta2026) + `}`
					before := wr.len()
					status, out := rawRequest(t, http.MethodPost, f.endpoint(), "", body, hdr2026Of(tc.method, tc.name, ""))
					check(t, &wr, before, f, tc.method, status, out)
				})
			}
		})
	}
}

// TestCancellationOwnRequestOnly: on 2026-07-28 the gate sends each request upstream under an id
// of its own, and relays an agent's notifications/cancelled only for that agent's own request
// in flight, under the id the gate sent it with. Another agent's cancellation naming the same
// id, and a cancellation of an id in flight for no one, reach nothing; toward each kind of
// upstream.
func TestCancellationOwnRequestOnly(t *testing.T) {
	for _, up := range []struct {
		name string
		opts mcptest.Options
	}{
		{"stateless upstream", mcptest.Options{Stateless: true, JSONResponse: true}},
		{"stateful upstream", mcptest.Options{}},
	} {
		t.Run(up.name, func(t *testing.T) {
			var wr wireTap
			up.opts.Intercept = wr.intercept
			release := make(chan struct{})
			started := make(chan struct{}, 1)
			tools := []mcptest.Tool{{Name: "ticket_create", Handler: func(ctx context.Context, _ json.RawMessage) (*mcp.CallToolResult, error) {
				started <- struct{}{}
				select {
				case <-release:
				case <-ctx.Done():
				case <-time.After(5 * time.Second):
				}
				return mcptest.Text("ticket created"), nil
			}}}
			agents, err := NewBearerAgents(map[string][]byte{"agent-a": []byte("token-a-0123456789"), "agent-b": []byte("token-b-0123456789")})
			if err != nil {
				t.Fatal(err)
			}
			f := newFixture(t, fixtureOpts{upstream: up.opts, tools: tools, configure: func(c *Config) { c.Agents = agents }})
			const tokA, tokB = "token-a-0123456789", "token-b-0123456789"
			// Agent b has an upstream session of its own (stateful) and the gate knows the mode.
			if status, out := post2026(t, f.endpoint(), `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{`+meta2026+`}}`, hdr2026Of("tools/list", "", tokB)); status != http.StatusOK {
				t.Fatalf("tools/list: HTTP %d %v", status, out)
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ticket_create","arguments":{"title":"slow"},` + meta2026 + `}}`
				rawRequest(t, http.MethodPost, f.endpoint(), "", body, hdr2026Of("tools/call", "ticket_create", tokA))
			}()
			defer func() {
				close(release)
				<-done
			}()
			select {
			case <-started:
			case <-time.After(5 * time.Second):
				t.Fatal("the call did not reach the upstream")
			}
			var upID json.RawMessage
			for _, m := range wr.all() {
				if m.Method == "tools/call" {
					upID = m.ID
				}
			}
			var s string
			if json.Unmarshal(upID, &s) != nil || !strings.HasPrefix(s, "actgate-") {
				t.Fatalf("the upstream got the call under id %s, want one of the gate's own", upID)
			}
			cancel := func(tok string, id string) {
				t.Helper()
				body := `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + id + `,"reason":"stop",` + meta2026 + `}}`
				if status, out := rawRequest(t, http.MethodPost, f.endpoint(), "", body, hdr2026Of(wire.NotifyCancelled, "", tok)); status != http.StatusAccepted {
					t.Fatalf("cancellation: HTTP %d %s, want 202", status, out)
				}
			}
			cancel(tokB, "7")          // another agent's request
			cancel(tokA, "8")          // nothing in flight under this id
			cancel(tokA, string(upID)) // the gate's own id, not the agent's
			cancel(tokA, "null")       // malformed
			if got := wr.notificationsOf(wire.NotifyCancelled); len(got) != 0 {
				t.Fatalf("cancellations of no request of the sender's reached the upstream: %+v", got)
			}
			cancel(tokA, "7")
			deadline := time.Now().Add(5 * time.Second)
			for len(wr.notificationsOf(wire.NotifyCancelled)) == 0 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			got := wr.notificationsOf(wire.NotifyCancelled)
			if len(got) != 1 {
				t.Fatalf("the agent's cancellation of its own request reached the upstream %d times, want once", len(got))
			}
			var p struct {
				RequestID json.RawMessage `json:"requestId"`
				Reason    string          `json:"reason"`
			}
			if err := json.Unmarshal(got[0].Params, &p); err != nil || string(p.RequestID) != string(upID) || p.Reason != "stop" {
				t.Fatalf("the upstream got the cancellation %s, want requestId %s", got[0].Params, upID)
			}
		})
	}
}
