package admission

import (
	"net/http"
	"strings"
	"testing"
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
