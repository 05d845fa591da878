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

// TestBearerAgents: only a request with exactly one well-formed bearer header naming a
// configured token is an agent; tokens that are empty or shared are refused at construction.
func TestBearerAgents(t *testing.T) {
	a, err := NewBearerAgents(map[string][]byte{"billing": []byte("tok-billing-0123456789"), "research": []byte("tok-research-0123456789")})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		header []string
		want   string
	}{
		{"billing", []string{"Bearer tok-billing-0123456789"}, "billing"},
		{"scheme case", []string{"bearer tok-research-0123456789"}, "research"},
		{"no header", nil, ""},
		{"wrong token", []string{"Bearer tok-billing-012345678"}, ""},
		{"token prefix", []string{"Bearer tok-billing"}, ""},
		{"basic", []string{"Basic tok-billing-0123456789"}, ""},
		{"two headers", []string{"Bearer tok-billing-0123456789", "Bearer tok-billing-0123456789"}, ""},
		{"trailing word", []string{"Bearer tok-billing-0123456789 x"}, ""},
		{"empty token", []string{"Bearer "}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/mcp/bank", nil)
			for _, h := range tc.header {
				r.Header.Add("Authorization", h)
			}
			got, ok := a.Authenticate(r)
			if got != tc.want || ok != (tc.want != "") {
				t.Fatalf("Authenticate = %q, %v; want %q", got, ok, tc.want)
			}
		})
	}
	if _, err := NewBearerAgents(map[string][]byte{"a": []byte("same-token-0123456789"), "b": []byte("same-token-0123456789")}); err == nil {
		t.Fatal("two agents sharing a token were accepted")
	}
	if _, err := NewBearerAgents(map[string][]byte{"a": nil}); err == nil {
		t.Fatal("an empty token was accepted")
	}
}

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

// FuzzBearerAgents: no Authorization header but "Bearer " + a configured token authenticates.
func FuzzBearerAgents(f *testing.F) {
	const tok = "tok-billing-0123456789"
	a, err := NewBearerAgents(map[string][]byte{"billing": []byte(tok)})
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{"Bearer " + tok, "bearer " + tok, "Bearer  " + tok, "Bearer " + tok + " ", "Bearer", "", "Basic " + tok} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, h string) {
		r, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/mcp/bank", nil)
		r.Header["Authorization"] = []string{h}
		name, ok := a.Authenticate(r)
		scheme, rest, _ := strings.Cut(h, " ")
		if ok && (name != "billing" || !strings.EqualFold(scheme, "bearer") || rest != tok) {
			t.Fatalf("%q authenticated as %q", h, name)
		}
	})
}
