package mcpproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

// twoAgents is the authenticator of agent-a (tokenA) and agent-b (tokenB).
func twoAgents(t *testing.T) *BearerAgents {
	t.Helper()
	agents, err := NewBearerAgents(map[string][]byte{"agent-a": []byte(tokenA), "agent-b": []byte(tokenB)})
	if err != nil {
		t.Fatal(err)
	}
	return agents
}

// TestDirectPathRefusesAnotherAgentsSession: agent b, authenticated with its own token, sends a
// tools/call on agent a's session exactly as the direct path takes it (the session's own
// Mcp-Protocol-Version, a plain request): the gate answers 403 before anything is decided or
// sent — the upstream never ran the tool, the journal holds nothing — and a's own call on the
// session still runs. A relayed request of b on the session (resources/list) is refused the
// same way.
func TestDirectPathRefusesAnotherAgentsSession(t *testing.T) {
	f := newFixture(t, fixtureOpts{configure: func(c *Config) { c.Agents = twoAgents(t) }})
	a := openTokenSession(t, f.endpoint(), tokenA)
	riding := &tokenSession{t: t, url: f.endpoint(), tok: tokenB, session: a.session}
	for i, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ticket_create","arguments":{"by":"b"}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"resources/list","params":{}}`,
	} {
		req, _ := http.NewRequest(http.MethodPost, f.endpoint(), strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+riding.tok)
		req.Header.Set("Mcp-Session-Id", riding.session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("request %d of agent b on agent a's session: HTTP %d %s, want 403", i, resp.StatusCode, raw)
		}
	}
	if n := f.up.Count("ticket_create"); n != 0 {
		t.Fatalf("agent b's call on agent a's session ran upstream %d times", n)
	}
	if st := statesIn(t, f); len(st) != 0 {
		t.Fatalf("journal after agent b's call on agent a's session: %v, want nothing", st)
	}
	if m := a.request(3, "tools/call", `{"name":"ticket_create","arguments":{"by":"a"}}`); m["result"] == nil || f.up.Count("ticket_create") != 1 {
		t.Fatalf("agent a's own call: %v, upstream ran %d", m, f.up.Count("ticket_create"))
	}
}

// TestUpstreamRedirectNotFollowed: the bound upstream answers each tools/call with a redirect
// to another origin, which runs whatever reaches it. On both agent paths the gate never
// follows it: nothing ran at the other origin, the credential never went there, the journal
// records the act FAILED and the agent gets EF_UPSTREAM_REDIRECT.
func TestUpstreamRedirectNotFollowed(t *testing.T) {
	for _, m := range modes {
		for _, status := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect, http.StatusFound} {
			t.Run(m.name+"/"+strconv.Itoa(status), func(t *testing.T) {
				var ran, credentials atomic.Int64
				elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					body, _ := io.ReadAll(r.Body)
					if r.Header.Get("Authorization") != "" {
						credentials.Add(1)
					}
					if bytes.Contains(body, []byte(`"tools/call"`)) {
						ran.Add(1)
					}
					var req struct {
						ID json.RawMessage `json:"id"`
					}
					_ = json.Unmarshal(body, &req)
					w.Header().Set("Content-Type", "application/json")
					fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"ran elsewhere"}]}}`, req.ID)
				}))
				t.Cleanup(elsewhere.Close)
				intercept := func(w http.ResponseWriter, r *http.Request) bool {
					if !isToolsCall(r) {
						return false
					}
					http.Redirect(w, r, elsewhere.URL+"/mcp", status)
					return true
				}
				f := newFixture(t, fixtureOpts{upstream: mcptest.Options{Intercept: intercept}, configure: sdkOnly(m.sdkOnly)})
				res := call(t, f.agent(), "ticket_create", `{"title":"redirected"}`, nil)
				if !res.IsError || efCode(res) != string(ef.EFUpstreamRedirect) {
					t.Fatalf("redirected call: %s (code %q), want %s", text(res), efCode(res), ef.EFUpstreamRedirect)
				}
				if ran.Load() != 0 || credentials.Load() != 0 {
					t.Fatalf("the redirect was followed: %d calls ran at the other origin, %d carried a credential", ran.Load(), credentials.Load())
				}
				if st := statesIn(t, f); st[journal.StateFailed] != 1 || len(st) != 1 {
					t.Fatalf("journal %v, want one FAILED", st)
				}
			})
		}
	}
}

// TestUpstreamSessionPerAgent: two agents speaking MCP 2026-07-28 through the gate to a
// stateful (2025-11-25) upstream each get an upstream session of their own
// (docs/architecture.md "MCP 2026-07-28 (stateless)", Upstream: one session per agent and set of capabilities): the
// upstream sees two initializes, and every request of each agent arrives on that agent's
// session, never on the other's — so nothing one agent's requests leave in a session (its
// subscriptions, tasks, server-side state) is reachable by the other's.
func TestUpstreamSessionPerAgent(t *testing.T) {
	var mu sync.Mutex
	inits := 0
	sessionsOf := map[string]map[string]bool{} // the account a call names → the upstream sessions it came on
	intercept := func(w http.ResponseWriter, r *http.Request) bool {
		body, method, _ := rpcBody(r)
		var m struct {
			Params struct {
				Arguments struct {
					Account string `json:"account"`
				} `json:"arguments"`
			} `json:"params"`
		}
		_ = json.Unmarshal(body, &m)
		mu.Lock()
		defer mu.Unlock()
		switch method {
		case wire.MethodInitialize:
			inits++
		case wire.MethodCallTool:
			if sessionsOf[m.Params.Arguments.Account] == nil {
				sessionsOf[m.Params.Arguments.Account] = map[string]bool{}
			}
			sessionsOf[m.Params.Arguments.Account][r.Header.Get("Mcp-Session-Id")] = true
		}
		return false
	}
	f := newFixture(t, fixtureOpts{upstream: mcptest.Options{Intercept: intercept}, configure: func(c *Config) { c.Agents = twoAgents(t) }})
	a, b := connect2026(t, f.endpoint(), tokenA), connect2026(t, f.endpoint(), tokenB)
	for i := range 3 {
		for _, s := range []struct {
			cs      *mcp.ClientSession
			account string
		}{{a, "of-a"}, {b, "of-b"}} {
			res, err := s.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_balance", Arguments: map[string]any{"account": s.account, "n": i}})
			if err != nil || res.IsError {
				t.Fatalf("get_balance of %s: %v %v", s.account, err, res)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if inits != 2 {
		t.Errorf("the upstream saw %d initializes, want 2 (one session per agent)", inits)
	}
	sa, sb := sessionsOf["of-a"], sessionsOf["of-b"]
	if len(sa) != 1 || len(sb) != 1 {
		t.Fatalf("upstream sessions of agent a's calls %v, of agent b's %v: want one each", sa, sb)
	}
	for s := range sa {
		if s == "" || sb[s] {
			t.Fatalf("agent a's calls came on upstream session %q, agent b's on %v: want two different sessions", s, sb)
		}
	}
}
