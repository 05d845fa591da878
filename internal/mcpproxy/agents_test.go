package mcpproxy

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/ef"
)

// TestAgentSessions: through a real proxy, an unauthenticated request is refused before
// anything reads it; an agent with its token calls; the limiter refuses sessions
// beyond its bounds and frees the place of a closed one.
func TestAgentSessions(t *testing.T) {
	agents, err := NewBearerAgents(map[string][]byte{"billing": []byte("tok-billing-0123456789"), "research": []byte("tok-research-0123456789")})
	if err != nil {
		t.Fatal(err)
	}
	limiter := NewSessionLimiter(3, 2)
	f := newFixture(t, fixtureOpts{configure: func(c *Config) { c.Agents, c.Sessions = agents, limiter }})
	connectAs := func(tok string) (*mcp.ClientSession, error) {
		hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			r = r.Clone(r.Context())
			if tok != "" {
				r.Header.Set("Authorization", "Bearer "+tok)
			}
			return http.DefaultTransport.RoundTrip(r)
		})}
		c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: f.endpoint(), HTTPClient: hc, DisableStandaloneSSE: true}, sessionOpts)
	}
	if _, err := connectAs(""); err == nil {
		t.Fatal("a session opened without a token")
	}
	resp, err := http.Post(f.endpoint(), "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]string
	_ = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || body["code"] != string(ef.EFAgentUnauthenticated) {
		t.Fatalf("unauthenticated: HTTP %d %v", resp.StatusCode, body)
	}
	b1, err := connectAs("tok-billing-0123456789")
	if err != nil {
		t.Fatal(err)
	}
	defer b1.Close()
	r := call(t, b1, "get_balance", `{"account":"a"}`, nil)
	if r.IsError {
		t.Fatalf("get_balance: %s", text(r))
	}
	b2, err := connectAs("tok-billing-0123456789")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := connectAs("tok-billing-0123456789"); err == nil || !strings.Contains(err.Error(), string(ef.EFSessionLimit)) {
		t.Fatalf("a third billing session: %v", err)
	}
	r1, err := connectAs("tok-research-0123456789")
	if err != nil {
		t.Fatal(err)
	}
	defer r1.Close()
	if _, err := connectAs("tok-research-0123456789"); err == nil || !strings.Contains(err.Error(), string(ef.EFSessionLimit)) {
		t.Fatalf("a fourth session in all: %v", err)
	}
	_ = b2.Close()
	deadline := time.Now().Add(5 * time.Second)
	for limiter.Open() != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions counted after one closed, want 2", limiter.Open())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
